//! Tests of the CPU interpreter: semantics (arithmetic, casts, compares, shuffles, ballots,
//! collectives, control flow) and every sanitizer error.

use entkv_dsl::interp::{check_args, MemAccess, RaceAccess};
use entkv_dsl::ir::{BinOp, CmpOp, ExprKind, Lit};
use entkv_dsl::*;
use half::{bf16, f16};

// ----- helpers ---------------------------------------------------------------------------

fn launch(k: &Kernel, blocks: u32, args: &mut [Arg<'_>]) -> Result<RunStats, InterpError> {
    run(k, LaunchDims::linear(blocks, k.block_threads), args)
}

fn ilit(ty: Scalar, v: i64) -> Expr {
    Expr::new(ExprKind::Lit(Lit::Int(v)), ty)
}

fn same_f32(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// Threads needed for `n` work items, rounded up to whole blocks of `bt`.
fn blocks_for(n: usize, bt: u32) -> u32 {
    n.div_ceil(bt as usize) as u32
}

/// Simple deterministic pseudo-random numbers (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn loc(e: &InterpError) -> &Location {
    e.location().unwrap_or_else(|| panic!("no location in {e}"))
}

// ----- float arithmetic ------------------------------------------------------------------

fn ptx_min(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        b
    } else if b.is_nan() {
        a
    } else if a == b {
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else if a < b {
        a
    } else {
        b
    }
}

fn ptx_max(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        b
    } else if b.is_nan() {
        a
    } else if a == b {
        if a.is_sign_positive() {
            a
        } else {
            b
        }
    } else if a > b {
        a
    } else {
        b
    }
}

type F32Op = (&'static str, fn(Expr, Expr) -> Expr, fn(f32, f32) -> f32);

fn f32_ops() -> Vec<F32Op> {
    vec![
        ("add", |a, b| a + b, |a, b| a + b),
        ("sub", |a, b| a - b, |a, b| a - b),
        ("mul", |a, b| a * b, |a, b| a * b),
        ("div", |a, b| a / b, |a, b| a / b),
        ("min", |a, b| a.min(b), ptx_min),
        ("max", |a, b| a.max(b), ptx_max),
        ("fma", |a, b| fma(a.clone(), b, a), |a, b| a.mul_add(b, a)),
        ("neg", |a, _| -a, |a, _| -a),
        ("abs", |a, _| a.abs(), |a, _| a.abs()),
        ("sqrt", |a, _| a.sqrt(), |a, _| a.sqrt()),
        ("rcp", |a, _| a.rcp(), |a, _| 1.0 / a),
        ("exp2", |a, _| a.exp2(), |a, _| (a as f64).exp2() as f32),
        ("log2", |a, _| a.log2(), |a, _| (a as f64).log2() as f32),
        ("floor", |a, _| a.floor(), |a, _| a.floor()),
        ("ceil", |a, _| a.ceil(), |a, _| a.ceil()),
        (
            "select",
            |a, b| select(a.clone().lt(b.clone()), a, b),
            |a, b| if a < b { a } else { b },
        ),
    ]
}

#[test]
fn f32_arithmetic_matches_ieee() {
    let specials = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        1.5,
        2.5,
        -2.5,
        0.1,
        3.0e38,
        -3.0e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1.0e-40,
        16_777_217.0,
        -7.75,
        0.333_333_34,
    ];
    let mut a = Vec::new();
    let mut b = Vec::new();
    for &x in &specials {
        for &y in &specials {
            a.push(x);
            b.push(y);
        }
    }
    let n = a.len();
    let ops = f32_ops();
    let nops = ops.len();
    let mut k = KernelBuilder::new("f32_ops", 64);
    let ab = k.buffer("a", Scalar::F32, Access::Read);
    let bb = k.buffer("b", Scalar::F32, Access::Read);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let gid = k.let_("gid", k.global_thread_id());
    k.if_(gid.lt(n as u32), |k| {
        let x = k.let_("x", ab.at(gid));
        let y = k.let_("y", bb.at(gid));
        for (j, (_, f, _)) in ops.iter().enumerate() {
            k.store(out, gid * nops as u32 + j as u32, f(x.e(), y.e()));
        }
    });
    let kernel = k.finish().unwrap();
    let mut ha = HostBuffer::F32(a.clone());
    let mut hb = HostBuffer::F32(b.clone());
    let mut ho = HostBuffer::filled_f64(Scalar::F32, n * nops, 12345.0);
    launch(
        &kernel,
        blocks_for(n, 64),
        &mut [Arg::Buf(&mut ha), Arg::Buf(&mut hb), Arg::Buf(&mut ho)],
    )
    .unwrap();
    let o = ho.as_f32().unwrap();
    for i in 0..n {
        for (j, (name, _, r)) in ops.iter().enumerate() {
            let want = r(a[i], b[i]);
            let got = o[i * nops + j];
            assert!(
                same_f32(got, want),
                "{name}({:e}, {:e}) = {got:e}, want {want:e}",
                a[i],
                b[i]
            );
        }
    }
}

#[test]
fn f32_min_max_nan_and_signed_zero() {
    assert!(ptx_min(0.0, -0.0).is_sign_negative());
    let mut k = KernelBuilder::new("minmax", 32);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    k.store(out, 0u32, f32c(f64::NAN).min(3.0f32));
    k.store(out, 1u32, f32c(3.0).max(f32c(f64::NAN)));
    k.store(out, 2u32, f32c(0.0).min(f32c(-0.0)));
    k.store(out, 3u32, f32c(-0.0).max(f32c(0.0)));
    k.store(out, 4u32, f32c(f64::NAN).max(f32c(f64::NAN)));
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::F32, 5);
    launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap();
    let o = o.as_f32().unwrap();
    assert_eq!(o[0], 3.0);
    assert_eq!(o[1], 3.0);
    assert_eq!(o[2].to_bits(), (-0.0f32).to_bits());
    assert_eq!(o[3].to_bits(), 0.0f32.to_bits());
    assert!(o[4].is_nan());
}

// ----- integer arithmetic ----------------------------------------------------------------

macro_rules! int_ops_test {
    ($name:ident, $t:ty, $scalar:expr, $variant:ident, $get:ident) => {
        #[test]
        fn $name() {
            let ty: Scalar = $scalar;
            let signed = ty.is_signed_int();
            let bits = <$t>::BITS as i64;
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ bits as u64);
            let mut vals: Vec<$t> = vec![
                0,
                1,
                2,
                3,
                7,
                <$t>::MAX,
                <$t>::MIN,
                <$t>::MAX - 1,
                <$t>::MIN.wrapping_add(1),
            ];
            vals.push((0 as $t).wrapping_sub(1));
            vals.push((0 as $t).wrapping_sub(7));
            for _ in 0..6 {
                vals.push(rng.next() as $t);
            }
            let mut a = Vec::new();
            let mut b = Vec::new();
            for &x in &vals {
                for &y in &vals {
                    a.push(x);
                    b.push(y);
                }
            }
            let n = a.len();
            let minv = ilit(ty, <$t>::MIN as i64);
            let neg1 = ilit(ty, -1);
            let one = ilit(ty, 1);
            let zero = ilit(ty, 0);
            let mask = ilit(ty, bits - 1);
            type IOp = (&'static str, fn(Expr, Expr, &[Expr; 5]) -> Expr);
            let ops: Vec<IOp> = vec![
                ("add", |a, b, _| a + b),
                ("sub", |a, b, _| a - b),
                ("mul", |a, b, _| a * b),
                ("div", |a, b, c| {
                    let bad = b
                        .clone()
                        .eq_(c[3].clone())
                        .or(a.clone().eq_(c[0].clone()).and(b.clone().eq_(c[1].clone())));
                    a / select(bad, c[2].clone(), b)
                }),
                ("rem", |a, b, c| {
                    let bad = b
                        .clone()
                        .eq_(c[3].clone())
                        .or(a.clone().eq_(c[0].clone()).and(b.clone().eq_(c[1].clone())));
                    a % select(bad, c[2].clone(), b)
                }),
                ("min", |a, b, _| a.min(b)),
                ("max", |a, b, _| a.max(b)),
                ("and", |a, b, _| a & b),
                ("or", |a, b, _| a | b),
                ("xor", |a, b, _| a ^ b),
                ("not", |a, _, _| a.not()),
                ("shl", |a, b, c| a << (b & c[4].clone())),
                ("shr", |a, b, c| a >> (b & c[4].clone())),
                ("lt", |a, b, c| select(a.lt(b), c[2].clone(), c[3].clone())),
                ("ge", |a, b, c| select(a.ge(b), c[2].clone(), c[3].clone())),
                ("ne", |a, b, c| select(a.ne_(b), c[2].clone(), c[3].clone())),
            ];
            let consts = [minv, neg1.clone(), one, zero, mask];
            let nops = ops.len() + if signed { 2 } else { 0 };
            let mut k = KernelBuilder::new(concat!("int_ops_", stringify!($t)), 64);
            let ab = k.buffer("a", ty, Access::Read);
            let bb = k.buffer("b", ty, Access::Read);
            let out = k.buffer("out", ty, Access::Write);
            let gid = k.let_("gid", k.global_thread_id());
            k.if_(gid.lt(n as u32), |k| {
                let x = k.let_("x", ab.at(gid));
                let y = k.let_("y", bb.at(gid));
                for (j, (_, f)) in ops.iter().enumerate() {
                    k.store(out, gid * nops as u32 + j as u32, f(x.e(), y.e(), &consts));
                }
                if signed {
                    k.store(out, gid * nops as u32 + ops.len() as u32, -x.e());
                    k.store(out, gid * nops as u32 + ops.len() as u32 + 1, x.abs());
                }
            });
            let kernel = k.finish().unwrap();
            let mut ha = HostBuffer::$variant(a.clone());
            let mut hb = HostBuffer::$variant(b.clone());
            let mut ho = HostBuffer::zeros(ty, n * nops);
            launch(
                &kernel,
                blocks_for(n, 64),
                &mut [Arg::Buf(&mut ha), Arg::Buf(&mut hb), Arg::Buf(&mut ho)],
            )
            .unwrap();
            let o = ho.$get().unwrap();
            for i in 0..n {
                let (x, y) = (a[i], b[i]);
                let bad = y == 0 || (signed && x == <$t>::MIN && y == (0 as $t).wrapping_sub(1));
                let d = if bad { 1 } else { y };
                let s = (y & (bits as $t - 1)) as u32;
                let mut want: Vec<$t> = vec![
                    x.wrapping_add(y),
                    x.wrapping_sub(y),
                    x.wrapping_mul(y),
                    x.wrapping_div(d),
                    x.wrapping_rem(d),
                    x.min(y),
                    x.max(y),
                    x & y,
                    x | y,
                    x ^ y,
                    !x,
                    x.wrapping_shl(s),
                    x.wrapping_shr(s),
                    (x < y) as $t,
                    (x >= y) as $t,
                    (x != y) as $t,
                ];
                if signed {
                    want.push(x.wrapping_neg());
                    // abs(MIN) wraps to MIN, like `abs.s32`.
                    want.push(if x < (0 as $t) { x.wrapping_neg() } else { x });
                }
                for j in 0..nops {
                    let name = if j < ops.len() {
                        ops[j].0
                    } else if j == ops.len() {
                        "neg"
                    } else {
                        "abs"
                    };
                    assert_eq!(
                        o[i * nops + j],
                        want[j],
                        "{name}({x}, {y}) on {}",
                        stringify!($t)
                    );
                }
            }
        }
    };
}

int_ops_test!(int_ops_i32, i32, Scalar::I32, I32, as_i32);
int_ops_test!(int_ops_u32, u32, Scalar::U32, U32, as_u32);
int_ops_test!(int_ops_i64, i64, Scalar::I64, I64, as_i64);
int_ops_test!(int_ops_u64, u64, Scalar::U64, U64, as_u64);

#[test]
fn bool_logic() {
    let mut k = KernelBuilder::new("bools", 32);
    let out = k.buffer("out", Scalar::I32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    let a = k.let_("a", (tid & 1u32).eq_(1u32));
    let b = k.let_("b", (tid & 2u32).eq_(2u32));
    let ops: Vec<Expr> = vec![
        a.and(b),
        a.or(b),
        binary(BinOp::Xor, a, b),
        a.not(),
        cmp(CmpOp::Lt, a, b),
        cmp(CmpOp::Eq, a, b),
    ];
    for (j, e) in ops.into_iter().enumerate() {
        k.store(out, tid * 6u32 + j as u32, select(e, 1i32, 0i32));
    }
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::I32, 32 * 6);
    launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap();
    let o = o.as_i32().unwrap();
    for t in 0..32 {
        let (a, b) = (t & 1 == 1, t & 2 == 2);
        let want = [a & b, a | b, a ^ b, !a, !a & b, a == b];
        for j in 0..6 {
            assert_eq!(o[t * 6 + j], want[j] as i32, "thread {t} op {j}");
        }
    }
}

// ----- compares --------------------------------------------------------------------------

#[test]
fn float_compares_are_ordered_and_ne_is_not_eq() {
    let vals = [f32::NAN, 1.0, -1.0, 0.0, -0.0, f32::INFINITY];
    let mut a = Vec::new();
    let mut b = Vec::new();
    for &x in &vals {
        for &y in &vals {
            a.push(x);
            b.push(y);
        }
    }
    let n = a.len();
    let mut k = KernelBuilder::new("fcmp", 64);
    let ab = k.buffer("a", Scalar::F32, Access::Read);
    let bb = k.buffer("b", Scalar::F32, Access::Read);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.lt(n as u32), |k| {
        let x = k.let_("x", ab.at(tid));
        let y = k.let_("y", bb.at(tid));
        let ops = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
        for (j, op) in ops.iter().enumerate() {
            k.store(out, tid * 6u32 + j as u32, select(cmp(*op, x, y), 1u32, 0u32));
        }
    });
    let kernel = k.finish().unwrap();
    let mut ha = HostBuffer::F32(a.clone());
    let mut hb = HostBuffer::F32(b.clone());
    let mut ho = HostBuffer::zeros(Scalar::U32, n * 6);
    launch(
        &kernel,
        1,
        &mut [Arg::Buf(&mut ha), Arg::Buf(&mut hb), Arg::Buf(&mut ho)],
    )
    .unwrap();
    let o = ho.as_u32().unwrap();
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let want = [x == y, !(x == y), x < y, x <= y, x > y, x >= y];
        for j in 0..6 {
            assert_eq!(o[i * 6 + j], want[j] as u32, "cmp {j} of {x} {y}");
        }
    }
    // NaN != NaN is true, NaN == NaN false, -0 == 0 true.
    assert_eq!(o[0], 0);
    assert_eq!(o[1], 1);
}

// ----- casts -----------------------------------------------------------------------------

#[test]
fn casts_from_f32() {
    let xs = [
        0.0f32,
        -0.0,
        1.9,
        -1.9,
        2.5,
        -2.5,
        3.0e9,
        -3.0e9,
        1.0e20,
        -1.0e20,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        65504.0,
        65520.0,            // rounds to f16 infinity
        1.0 + 1.0 / 2048.0, // halfway between two f16s: ties to even (1.0)
        1.0 + 3.0 / 2048.0, // halfway: ties to even (1 + 2/1024)
        1.0e-7,             // f16 subnormal
        1.0 + 1.0 / 256.0,  // halfway for bf16: ties to even (1.0)
        std::f32::consts::PI,
    ];
    let n = xs.len();
    let mut k = KernelBuilder::new("casts_f32", 32);
    let x = k.buffer("x", Scalar::F32, Access::Read);
    let oi32 = k.buffer("oi32", Scalar::I32, Access::Write);
    let ou32 = k.buffer("ou32", Scalar::U32, Access::Write);
    let oi64 = k.buffer("oi64", Scalar::I64, Access::Write);
    let ou64 = k.buffer("ou64", Scalar::U64, Access::Write);
    let of16 = k.buffer("of16", Scalar::F16, Access::Write);
    let obf16 = k.buffer("obf16", Scalar::BF16, Access::Write);
    let obits = k.buffer("obits", Scalar::U32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.lt(n as u32), |k| {
        let v = k.let_("v", x.at(tid));
        k.store(oi32, tid, v.cast(Scalar::I32));
        k.store(ou32, tid, v.cast(Scalar::U32));
        k.store(oi64, tid, v.cast(Scalar::I64));
        k.store(ou64, tid, v.cast(Scalar::U64));
        k.store(of16, tid, v.cast(Scalar::F16));
        k.store(obf16, tid, v.cast(Scalar::BF16));
        k.store(obits, tid, v.e().bitcast(Scalar::U32));
    });
    let kernel = k.finish().unwrap();
    let mut bufs = [
        HostBuffer::F32(xs.to_vec()),
        HostBuffer::zeros(Scalar::I32, n),
        HostBuffer::zeros(Scalar::U32, n),
        HostBuffer::zeros(Scalar::I64, n),
        HostBuffer::zeros(Scalar::U64, n),
        HostBuffer::zeros(Scalar::F16, n),
        HostBuffer::zeros(Scalar::BF16, n),
        HostBuffer::zeros(Scalar::U32, n),
    ];
    let mut args: Vec<Arg> = bufs.iter_mut().map(Arg::Buf).collect();
    launch(&kernel, 1, &mut args).unwrap();
    drop(args);
    for (i, &v) in xs.iter().enumerate() {
        assert_eq!(bufs[1].as_i32().unwrap()[i], v as i32, "{v} as i32");
        assert_eq!(bufs[2].as_u32().unwrap()[i], v as u32, "{v} as u32");
        assert_eq!(bufs[3].as_i64().unwrap()[i], v as i64, "{v} as i64");
        assert_eq!(bufs[4].as_u64().unwrap()[i], v as u64, "{v} as u64");
        let h = bufs[5].as_f16().unwrap()[i];
        assert!(
            h.to_bits() == f16::from_f32(v).to_bits() || (h.is_nan() && v.is_nan()),
            "{v} as f16"
        );
        let bh = bufs[6].as_bf16().unwrap()[i];
        assert!(
            bh.to_bits() == bf16::from_f32(v).to_bits() || (bh.is_nan() && v.is_nan()),
            "{v} as bf16"
        );
        assert_eq!(bufs[7].as_u32().unwrap()[i], v.to_bits());
    }
    // Hand-checked values (independent of the `half` crate).
    assert_eq!(bufs[1].as_i32().unwrap()[6], i32::MAX); // 3e9 saturates
    assert_eq!(bufs[1].as_i32().unwrap()[7], i32::MIN);
    assert_eq!(bufs[1].as_i32().unwrap()[10], 0); // NaN -> 0
    assert_eq!(bufs[2].as_u32().unwrap()[3], 0); // -1.9 -> 0 for unsigned
    assert_eq!(bufs[1].as_i32().unwrap()[3], -1); // truncation toward zero
    let f16s = bufs[5].as_f16().unwrap();
    assert_eq!(f16s[13].to_bits(), 0x7bff); // 65504 = f16::MAX
    assert_eq!(f16s[14].to_bits(), 0x7c00); // +inf
    assert_eq!(f16s[15].to_bits(), 0x3c00); // 1.0 (tie to even)
    assert_eq!(f16s[16].to_bits(), 0x3c02); // tie to even upwards
    let bf16s = bufs[6].as_bf16().unwrap();
    assert_eq!(bf16s[18].to_bits(), 0x3f80); // 1.0 (tie to even)
    assert_eq!(bf16s[2].to_bits(), 0x3ff3); // 1.9 rounds to nearest: 0x3ff33333 -> 0x3ff3
}

#[test]
fn casts_from_half_types_all_bit_patterns() {
    let n = 65536usize;
    let mut k = KernelBuilder::new("casts_half", 256);
    let h = k.buffer("h", Scalar::F16, Access::Read);
    let b = k.buffer("b", Scalar::BF16, Access::Read);
    let hf = k.buffer("hf", Scalar::F32, Access::Write);
    let bf = k.buffer("bf", Scalar::F32, Access::Write);
    let hb = k.buffer("hb", Scalar::BF16, Access::Write);
    let hi = k.buffer("hi", Scalar::I32, Access::Write);
    let hn = k.buffer("hn", Scalar::F16, Access::Write);
    let gid = k.let_("gid", k.global_thread_id());
    let hv = k.let_("hv", h.at(gid));
    k.store(hf, gid, hv.f32());
    k.store(bf, gid, b.at(gid).f32());
    k.store(hb, gid, hv.cast(Scalar::BF16));
    k.store(hi, gid, hv.cast(Scalar::I32));
    k.store(hn, gid, -hv.e());
    let kernel = k.finish().unwrap();
    let mut bufs = [
        HostBuffer::F16((0..n).map(|i| f16::from_bits(i as u16)).collect()),
        HostBuffer::BF16((0..n).map(|i| bf16::from_bits(i as u16)).collect()),
        HostBuffer::zeros(Scalar::F32, n),
        HostBuffer::zeros(Scalar::F32, n),
        HostBuffer::zeros(Scalar::BF16, n),
        HostBuffer::zeros(Scalar::I32, n),
        HostBuffer::zeros(Scalar::F16, n),
    ];
    let mut args: Vec<Arg> = bufs.iter_mut().map(Arg::Buf).collect();
    launch(&kernel, (n / 256) as u32, &mut args).unwrap();
    drop(args);
    for i in 0..n {
        let hv = f16::from_bits(i as u16);
        let bv = bf16::from_bits(i as u16);
        assert!(same_f32(bufs[2].as_f32().unwrap()[i], hv.to_f32()), "f16 {i:#x}");
        assert!(same_f32(bufs[3].as_f32().unwrap()[i], bv.to_f32()), "bf16 {i:#x}");
        let got = bufs[4].as_bf16().unwrap()[i];
        let want = bf16::from_f32(hv.to_f32());
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "f16->bf16 {i:#x}"
        );
        assert_eq!(
            bufs[5].as_i32().unwrap()[i],
            hv.to_f32() as i32,
            "f16->i32 {i:#x}"
        );
        assert_eq!(
            bufs[6].as_f16().unwrap()[i].to_bits(),
            (i as u16) ^ 0x8000,
            "neg f16 {i:#x}"
        );
    }
}

#[test]
fn casts_between_ints_and_to_float() {
    let xs: Vec<i64> = vec![
        0,
        1,
        -1,
        5,
        -5,
        i32::MAX as i64,
        i32::MIN as i64,
        i64::MAX,
        i64::MIN,
        1 << 40,
        16_777_217,
        (1 << 53) + 1,
        -(1 << 31) - 1,
    ];
    let n = xs.len();
    let mut k = KernelBuilder::new("casts_int", 32);
    let x = k.buffer("x", Scalar::I64, Access::Read);
    let out = k.buffer("out", Scalar::I64, Access::Write);
    let fo = k.buffer("fo", Scalar::F32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.lt(n as u32), |k| {
        let v = k.let_("v", x.at(tid));
        let o = tid * 8u32;
        k.store(out, o.clone(), v.cast(Scalar::I32).i64()); // wrap then sign-extend
        k.store(out, o.clone() + 1u32, v.cast(Scalar::U32).i64()); // wrap then zero-extend
        k.store(out, o.clone() + 2u32, v.cast(Scalar::U64).bitcast(Scalar::I64));
        k.store(
            out,
            o.clone() + 3u32,
            v.cast(Scalar::I32).cast(Scalar::U64).bitcast(Scalar::I64),
        );
        k.store(out, o.clone() + 4u32, v.cast(Scalar::U32).cast(Scalar::I32).i64());
        k.store(out, o.clone() + 5u32, v.lt(0i64).cast(Scalar::I64)); // bool -> int
        k.store(fo, tid * 4u32, v.f32());
        k.store(fo, tid * 4u32 + 1u32, v.cast(Scalar::I32).f32());
        k.store(fo, tid * 4u32 + 2u32, v.cast(Scalar::U64).f32());
        k.store(fo, tid * 4u32 + 3u32, v.gt(0i64).f32());
    });
    let kernel = k.finish().unwrap();
    let mut hx = HostBuffer::I64(xs.clone());
    let mut ho = HostBuffer::zeros(Scalar::I64, n * 8);
    let mut hf = HostBuffer::zeros(Scalar::F32, n * 4);
    launch(
        &kernel,
        1,
        &mut [Arg::Buf(&mut hx), Arg::Buf(&mut ho), Arg::Buf(&mut hf)],
    )
    .unwrap();
    let o = ho.as_i64().unwrap();
    let f = hf.as_f32().unwrap();
    for (i, &v) in xs.iter().enumerate() {
        assert_eq!(o[i * 8], v as i32 as i64, "{v}");
        assert_eq!(o[i * 8 + 1], v as u32 as i64, "{v}");
        assert_eq!(o[i * 8 + 2], v as u64 as i64, "{v}");
        assert_eq!(o[i * 8 + 3], v as i32 as u64 as i64, "{v}");
        assert_eq!(o[i * 8 + 4], v as u32 as i32 as i64, "{v}");
        assert_eq!(o[i * 8 + 5], (v < 0) as i64, "{v}");
        assert_eq!(f[i * 4].to_bits(), (v as f32).to_bits(), "{v} as f32");
        assert_eq!(f[i * 4 + 1].to_bits(), (v as i32 as f32).to_bits(), "{v}");
        assert_eq!(f[i * 4 + 2].to_bits(), (v as u64 as f32).to_bits(), "{v}");
        assert_eq!(f[i * 4 + 3], (v > 0) as i32 as f32, "{v}");
    }
    // 2^24 + 1 rounds to nearest even.
    assert_eq!(f[10 * 4], 16_777_216.0);
}

#[test]
fn literals_round_to_their_type() {
    let mut k = KernelBuilder::new("lits", 32);
    let h = k.buffer("h", Scalar::F16, Access::Write);
    let b = k.buffer("b", Scalar::BF16, Access::Write);
    let f = k.buffer("f", Scalar::F32, Access::Write);
    let i = k.buffer("i", Scalar::U32, Access::Write);
    k.store(h, 0u32, lit(Scalar::F16, 0.1));
    k.store(b, 0u32, lit(Scalar::BF16, 0.1));
    k.store(f, 0u32, lit(Scalar::F32, 0.1));
    k.store(i, 0u32, ilit(Scalar::U32, -1));
    let kernel = k.finish().unwrap();
    let mut bufs = [
        HostBuffer::zeros(Scalar::F16, 1),
        HostBuffer::zeros(Scalar::BF16, 1),
        HostBuffer::zeros(Scalar::F32, 1),
        HostBuffer::zeros(Scalar::U32, 1),
    ];
    let mut args: Vec<Arg> = bufs.iter_mut().map(Arg::Buf).collect();
    launch(&kernel, 1, &mut args).unwrap();
    drop(args);
    assert_eq!(bufs[0].as_f16().unwrap()[0].to_bits(), 0x2e66);
    assert_eq!(bufs[1].as_bf16().unwrap()[0].to_bits(), 0x3dcd);
    assert_eq!(bufs[2].as_f32().unwrap()[0], 0.1f32);
    assert_eq!(bufs[3].as_u32().unwrap()[0], u32::MAX);
}

// ----- builtins and grid order -----------------------------------------------------------

#[test]
fn builtins_and_block_order() {
    let grid = [3u32, 2, 2];
    let nb = (grid[0] * grid[1] * grid[2]) as usize;
    let mut k = KernelBuilder::new("order", 32);
    let counter = k.buffer("counter", Scalar::U32, Access::ReadWrite);
    let order = k.buffer("order", Scalar::U32, Access::Write);
    let ids = k.buffer("ids", Scalar::U32, Access::Write);
    let bx = k.let_("bx", k.block_idx(Axis::X));
    let by = k.let_("by", k.block_idx(Axis::Y));
    let bz = k.let_("bz", k.block_idx(Axis::Z));
    let gx = k.let_("gx", k.grid_dim(Axis::X));
    let gy = k.let_("gy", k.grid_dim(Axis::Y));
    let gz = k.let_("gz", k.grid_dim(Axis::Z));
    let lin = k.let_("lin", bx + gx * (by + gy * bz));
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.eq_(0u32), |k| {
        let old = k.atomic(AtomicOp::Add, counter, 0u32, 1u32);
        k.store(order, lin, old);
    });
    k.store(ids, lin * 32u32 * 4u32 + tid * 4u32, tid);
    k.store(
        ids,
        lin * 32u32 * 4u32 + tid * 4u32 + 1u32,
        gx * 100u32 + gy * 10u32 + gz,
    );
    k.store(
        ids,
        lin * 32u32 * 4u32 + tid * 4u32 + 2u32,
        bx * 100u32 + by * 10u32 + bz,
    );
    k.store(
        ids,
        lin * 32u32 * 4u32 + tid * 4u32 + 3u32,
        k.lane() + k.warp() * 1000u32,
    );
    let kernel = k.finish().unwrap();
    let mut c = HostBuffer::zeros(Scalar::U32, 1);
    let mut o = HostBuffer::zeros(Scalar::U32, nb);
    let mut ids = HostBuffer::zeros(Scalar::U32, nb * 32 * 4);
    let stats = run(
        &kernel,
        LaunchDims::new(grid, 32),
        &mut [Arg::Buf(&mut c), Arg::Buf(&mut o), Arg::Buf(&mut ids)],
    )
    .unwrap();
    assert_eq!(stats.blocks, nb as u64);
    assert_eq!(o.as_u32().unwrap(), (0..nb as u32).collect::<Vec<_>>().as_slice());
    let ids = ids.as_u32().unwrap();
    for z in 0..2 {
        for y in 0..2 {
            for x in 0..3 {
                let lin = (x + 3 * (y + 2 * z)) as usize;
                for t in 0..32 {
                    let base = lin * 128 + t * 4;
                    assert_eq!(ids[base], t as u32);
                    assert_eq!(ids[base + 1], 322);
                    assert_eq!(ids[base + 2], x * 100 + y * 10 + z);
                    assert_eq!(ids[base + 3], t as u32);
                }
            }
        }
    }
}

// ----- shuffles and ballots --------------------------------------------------------------

fn ref_shuffle(mode: ShuffleMode, vals: &[u32], args: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    for w in 0..vals.len() / 32 {
        for lane in 0..32usize {
            // The hardware uses the low 5 bits of the operand in every mode.
            let a = (args[w * 32 + lane] & 31) as usize;
            let src = match mode {
                ShuffleMode::Xor => lane ^ a,
                ShuffleMode::Down => lane + a,
                ShuffleMode::Up => {
                    if a > lane {
                        lane
                    } else {
                        lane - a
                    }
                }
                ShuffleMode::Idx => a & 31,
            };
            let src = if src > 31 { lane } else { src };
            out.push(vals[w * 32 + src]);
        }
    }
    out
}

#[test]
fn shuffles_all_modes() {
    type ArgFn = fn(&KernelBuilder) -> Expr;
    type Case = (&'static str, ArgFn, fn(u32) -> u32);
    let arg_fns: Vec<Case> = vec![
        ("0", |_| u32c(0), |_| 0),
        ("1", |_| u32c(1), |_| 1),
        ("5", |_| u32c(5), |_| 5),
        ("16", |_| u32c(16), |_| 16),
        ("31", |_| u32c(31), |_| 31),
        ("35", |_| u32c(35), |_| 35),
        (
            "per-lane",
            |k| (k.lane() * 7u32 + 3u32) & 31u32,
            |l| (l * 7 + 3) & 31,
        ),
        ("per-lane-wide", |k| k.lane() * 3u32, |l| l * 3),
    ];
    let modes = [
        ShuffleMode::Xor,
        ShuffleMode::Down,
        ShuffleMode::Up,
        ShuffleMode::Idx,
    ];
    let nt = 64u32;
    let mut k = KernelBuilder::new("shuffles", nt);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let fout = k.buffer("fout", Scalar::F32, Access::Write);
    let iout = k.buffer("iout", Scalar::I32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    let v = k.let_("v", tid * 10u32 + 7u32);
    let fv = k.let_("fv", tid.f32() * 0.5f32 - 3.0f32);
    let iv = k.let_("iv", tid.i32() - 40i32);
    let ncase = modes.len() * arg_fns.len();
    let mut c = 0u32;
    for mode in modes {
        for (_, af, _) in &arg_fns {
            let a = af(&k);
            let r = k.shuffle(mode, v, a.clone());
            k.store(out, tid * ncase as u32 + c, r);
            let rf = k.shuffle(mode, fv, a.clone());
            k.store(fout, tid * ncase as u32 + c, rf);
            let ri = k.shuffle(mode, iv, a);
            k.store(iout, tid * ncase as u32 + c, ri);
            c += 1;
        }
    }
    let kernel = k.finish().unwrap();
    let n = nt as usize * ncase;
    let mut ho = HostBuffer::zeros(Scalar::U32, n);
    let mut hf = HostBuffer::zeros(Scalar::F32, n);
    let mut hi = HostBuffer::zeros(Scalar::I32, n);
    launch(
        &kernel,
        2,
        &mut [Arg::Buf(&mut ho), Arg::Buf(&mut hf), Arg::Buf(&mut hi)],
    )
    .unwrap();
    let (o, f, iv) = (ho.as_u32().unwrap(), hf.as_f32().unwrap(), hi.as_i32().unwrap());
    let vals: Vec<u32> = (0..nt).map(|t| t * 10 + 7).collect();
    let mut c = 0usize;
    for mode in modes {
        for (name, _, rf) in &arg_fns {
            let args: Vec<u32> = (0..nt).map(|t| rf(t % 32)).collect();
            let want = ref_shuffle(mode, &vals, &args);
            for t in 0..nt as usize {
                assert_eq!(o[t * ncase + c], want[t], "{mode:?} arg {name} thread {t}");
                let src = (want[t] - 7) / 10;
                assert_eq!(
                    f[t * ncase + c],
                    src as f32 * 0.5 - 3.0,
                    "{mode:?} f32 arg {name}"
                );
                assert_eq!(iv[t * ncase + c], src as i32 - 40, "{mode:?} i32 arg {name}");
            }
            c += 1;
        }
    }
    // Spot checks of the edge lanes, independent of the reference function.
    let at = |t: usize, mode: usize, arg: usize| o[t * ncase + mode * arg_fns.len() + arg];
    assert_eq!(at(31, 1, 1), 31 * 10 + 7); // down 1: last lane keeps its own
    assert_eq!(at(30, 1, 1), 31 * 10 + 7);
    assert_eq!(at(32, 2, 1), 32 * 10 + 7); // up 1: first lane of warp 1 keeps its own
    assert_eq!(at(33, 2, 1), 32 * 10 + 7);
    assert_eq!(at(40, 3, 5), 35 * 10 + 7); // idx 35 -> lane 3 of warp 1
    assert_eq!(at(0, 0, 4), 31 * 10 + 7); // xor 31
    assert_eq!(at(40, 1, 5), 43 * 10 + 7); // down 35 = down 3 (operand taken mod 32)
    assert_eq!(at(62, 1, 5), 62 * 10 + 7); // ... and past the end keeps its own
    assert_eq!(at(34, 2, 5), 34 * 10 + 7); // up 35 = up 3: lane 2 keeps its own
    assert_eq!(at(36, 2, 5), 33 * 10 + 7);
}

/// `warp_rank`: each lane with the predicate gets the number of such lanes below it, every
/// lane the warp's total — the slots of a warp-ordered append.
#[test]
fn warp_rank_is_the_append_slot() {
    let mut k = KernelBuilder::new("warp_rank", 64);
    let x = k.buffer("x", Scalar::U32, Access::Read);
    let rank = k.buffer("rank", Scalar::I32, Access::Write);
    let total = k.buffer("total", Scalar::I32, Access::Write);
    let gid = k.let_("gid", k.global_thread_id());
    let below = k.lanes_below();
    let (r, n) = k.warp_rank(x.at(gid).gt(5u32), below);
    k.store(rank, gid, r);
    k.store(total, gid, n);
    let kernel = k.finish().unwrap();
    let mut rng = Rng(11);
    let xs: Vec<u32> = (0..128).map(|_| rng.below(10) as u32).collect();
    let mut hx = HostBuffer::U32(xs.clone());
    let mut hr = HostBuffer::zeros(Scalar::I32, 128);
    let mut hn = HostBuffer::zeros(Scalar::I32, 128);
    launch(
        &kernel,
        2,
        &mut [Arg::Buf(&mut hx), Arg::Buf(&mut hr), Arg::Buf(&mut hn)],
    )
    .unwrap();
    for w in 0..4 {
        let set: Vec<bool> = (0..32).map(|l| xs[w * 32 + l] > 5).collect();
        let want_total = set.iter().filter(|&&b| b).count() as i32;
        for l in 0..32 {
            let want_rank = set[..l].iter().filter(|&&b| b).count() as i32;
            assert_eq!(hr.as_i32().unwrap()[w * 32 + l], want_rank, "warp {w} lane {l}");
            assert_eq!(hn.as_i32().unwrap()[w * 32 + l], want_total, "warp {w}");
        }
    }
}

#[test]
fn ballot_per_warp() {
    let mut k = KernelBuilder::new("ballot", 96);
    let x = k.buffer("x", Scalar::U32, Access::Read);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let count = k.buffer("count", Scalar::U32, Access::Write);
    let gid = k.let_("gid", k.global_thread_id());
    let b = k.ballot(x.at(gid).gt(5u32));
    k.store(out, gid, b);
    k.store(count, gid, b.e().popc());
    let kernel = k.finish().unwrap();
    let mut rng = Rng(7);
    let xs: Vec<u32> = (0..192).map(|_| rng.below(10) as u32).collect();
    let mut hx = HostBuffer::U32(xs.clone());
    let mut ho = HostBuffer::zeros(Scalar::U32, 192);
    let mut hc = HostBuffer::zeros(Scalar::U32, 192);
    launch(
        &kernel,
        2,
        &mut [Arg::Buf(&mut hx), Arg::Buf(&mut ho), Arg::Buf(&mut hc)],
    )
    .unwrap();
    for w in 0..6 {
        let want = (0..32).fold(0u32, |acc, l| acc | (((xs[w * 32 + l] > 5) as u32) << l));
        for l in 0..32 {
            assert_eq!(ho.as_u32().unwrap()[w * 32 + l], want, "warp {w} lane {l}");
            assert_eq!(
                hc.as_u32().unwrap()[w * 32 + l],
                want.count_ones(),
                "popc, warp {w}"
            );
        }
    }
}

#[test]
fn shuffle_in_whole_warps_of_a_divergent_branch_is_fine() {
    let mut k = KernelBuilder::new("warp_branch", 64);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(k.warp().eq_(1u32), |k| {
        let s = k.warp_allreduce(Reduce::Sum, tid);
        k.store(out, tid - 32u32, s);
    });
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::U32, 32);
    launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap();
    assert!(o.as_u32().unwrap().iter().all(|&s| s == (32..64).sum::<u32>()));
}

// ----- tensor-core mma ---------------------------------------------------------------------

/// A kernel of two warps, each computing `D = A·B + C` for its own 16×16 A (row-major), 16×8 B
/// and C (row-major), with the fragments placed by the PTX ISA's formulas written out here
/// (independently of `entkv_dsl::mma`): lane `l`, `g = l/4`, `t = l%4`; A's element `i` at row
/// `g + 8·⌊i/2⌋ mod 2`… see `Stmt::Mma`.
fn mma_kernel(ab: Scalar) -> Kernel {
    let mut k = KernelBuilder::new("mma_tile", 64);
    let a = k.buffer("a", ab, Access::Read);
    let b = k.buffer("b", ab, Access::Read);
    let c = k.buffer("c", Scalar::F32, Access::Read);
    let d = k.buffer("d", Scalar::F32, Access::Write);
    let w = k.let_("w", k.warp());
    let g = k.let_("g", k.lane() / 4u32);
    let t = k.let_("t", k.lane() % 4u32);
    let av: Vec<Expr> = (0..8u32)
        .map(|i| {
            let row = g + 8 * ((i / 2) % 2);
            let col = t * 2u32 + (i % 2 + 8 * (i / 4));
            a.at(w * 256u32 + row * 16u32 + col)
        })
        .collect();
    let bv: Vec<Expr> = (0..4u32)
        .map(|i| {
            let row = t * 2u32 + (i % 2 + 8 * (i / 2));
            b.at(w * 128u32 + row * 8u32 + g)
        })
        .collect();
    let cidx = |i: u32| w * 128u32 + (g + 8 * (i / 2)) * 8u32 + t * 2u32 + i % 2;
    let cv: Vec<Expr> = (0..4u32).map(|i| c.at(cidx(i))).collect();
    let out = k.mma(&av, &bv, &cv);
    for (i, o) in out.iter().enumerate() {
        k.store(d, cidx(i as u32), *o);
    }
    k.finish().unwrap()
}

#[test]
fn mma_multiplies_the_fragments_ptx_describes() {
    for ab in [Scalar::F16, Scalar::BF16] {
        let kernel = mma_kernel(ab);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut small = || (rng.below(2001) as f64 - 1000.0) / 250.0;
        let av: Vec<f64> = (0..2 * 256).map(|_| small()).collect();
        let bv: Vec<f64> = (0..2 * 128).map(|_| small()).collect();
        let cv: Vec<f32> = (0..2 * 128).map(|i| i as f32 * 0.5 - 60.0).collect();
        let mut ha = HostBuffer::from_f64_as(ab, &av);
        let mut hb = HostBuffer::from_f64_as(ab, &bv);
        let (aq, bq) = (ha.to_f64_vec(), hb.to_f64_vec());
        let mut hc = HostBuffer::F32(cv.clone());
        let mut hd = HostBuffer::zeros(Scalar::F32, 2 * 128);
        launch(
            &kernel,
            1,
            &mut [
                Arg::Buf(&mut ha),
                Arg::Buf(&mut hb),
                Arg::Buf(&mut hc),
                Arg::Buf(&mut hd),
            ],
        )
        .unwrap();
        let got = hd.as_f32().unwrap();
        for w in 0..2 {
            for m in 0..16 {
                for n in 0..8 {
                    let dot: f64 = (0..16)
                        .map(|j| aq[w * 256 + m * 16 + j] * bq[w * 128 + j * 8 + n])
                        .sum();
                    let want = (cv[w * 128 + m * 8 + n] as f64 + dot) as f32;
                    let i = w * 128 + m * 8 + n;
                    assert!(
                        same_f32(got[i], want),
                        "{ab} warp {w} D[{m}][{n}] = {} want {want}",
                        got[i]
                    );
                }
            }
        }
    }
}

#[test]
fn mma_needs_the_whole_warp() {
    let mut k = KernelBuilder::new("partial_mma", 64);
    let x = f32c(1.0).cast(Scalar::BF16);
    let one = f32c(0.0);
    k.if_(k.thread_idx().lt(48u32), |k| {
        k.mma(&vec![x.clone(); 8], &vec![x.clone(); 4], &vec![one.clone(); 4]);
    });
    let kernel = k.finish().unwrap();
    let e = launch(&kernel, 1, &mut []).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::PartialWarp {
                op: "mma",
                warp: 1,
                ..
            }
        ),
        "{e}"
    );
}

/// The integer form is warp-collective too, and takes exactly 4 A and 2 B words of U32 and
/// 4 i32 accumulators.
#[test]
fn integer_mma_needs_the_whole_warp_and_its_word_counts() {
    let mut k = KernelBuilder::new("partial_imma", 64);
    let w = u32c(0x0102_0304);
    let z = i32c(0);
    k.if_(k.thread_idx().lt(48u32), |k| {
        k.mma_i8(
            &vec![w.clone(); 4],
            true,
            &vec![w.clone(); 2],
            false,
            &vec![z.clone(); 4],
        );
    });
    let kernel = k.finish().unwrap();
    let e = launch(&kernel, 1, &mut []).unwrap_err();
    assert!(matches!(e, InterpError::PartialWarp { op: "mma", .. }), "{e}");
    let mut k = KernelBuilder::new("short_imma", 32);
    k.mma_i8(
        &vec![w.clone(); 3],
        true,
        &vec![w.clone(); 2],
        false,
        &vec![z.clone(); 4],
    );
    let e = k.finish().unwrap_err().to_string();
    assert!(e.contains("4 A and 2 B words"), "{e}");
    let mut k = KernelBuilder::new("float_imma", 32);
    k.mma_i8(&vec![f32c(1.0); 4], true, &vec![w.clone(); 2], false, &vec![z; 4]);
    let e = k.finish().unwrap_err().to_string();
    assert!(e.contains("integer mma A/B word"), "{e}");
}

// ----- collectives -----------------------------------------------------------------------

#[test]
fn strided_warp_reductions_combine_lanes_of_one_residue() {
    // Static strides 1..32 and the same at run time (stride_log a kernel argument, from a
    // smaller minimum): lane l gets the max and the sum over lanes ≡ l mod stride.
    for stride in [1u32, 2, 4, 8, 16, 32] {
        for dynamic in [false, true] {
            let mut k = KernelBuilder::new(format!("strided_{stride}_{dynamic}"), 64);
            let out = k.buffer("out", Scalar::U32, Access::Write);
            let log = k.scalar_param("stride_log", Scalar::U32);
            let tid = k.let_("tid", k.thread_idx());
            // Values that differ per lane, not monotone in the lane.
            let v = k.let_("v", (tid * 37u32 + 11u32) % 64u32);
            let items = [(Reduce::Max, v.e()), (Reduce::Sum, v.e())];
            let r = if dynamic {
                k.warp_allreduce_strided_dyn(&items, log, 1)
            } else {
                k.warp_allreduce_strided(&items, stride)
            };
            k.store(out, tid * 2u32, r[0]);
            k.store(out, tid * 2u32 + 1u32, r[1]);
            let kernel = k.finish().unwrap();
            let mut o = HostBuffer::zeros(Scalar::U32, 128);
            launch(
                &kernel,
                1,
                &mut [
                    Arg::Buf(&mut o),
                    Arg::Scalar(ScalarValue::U32(stride.trailing_zeros())),
                ],
            )
            .unwrap();
            let o = o.as_u32().unwrap();
            for t in 0..64u32 {
                let class: Vec<u32> = (0..32u32)
                    .map(|l| (t / 32) * 32 + l)
                    .filter(|l| l % stride == t % stride)
                    .map(|l| (l * 37 + 11) % 64)
                    .collect();
                let want = (*class.iter().max().unwrap(), class.iter().sum::<u32>());
                assert_eq!(
                    (o[2 * t as usize], o[2 * t as usize + 1]),
                    want,
                    "stride {stride}, dynamic {dynamic}, thread {t}"
                );
            }
        }
    }
}

#[test]
fn block_allreduce_many_all_block_sizes() {
    for bt in [32u32, 64, 96, 256, 1024] {
        let blocks = 3u32;
        let n = (bt * blocks) as usize;
        let warps = bt / 32;
        let mut k = KernelBuilder::new(format!("allreduce_{bt}"), bt);
        let x = k.buffer("x", Scalar::F32, Access::Read);
        let y = k.buffer("y", Scalar::I32, Access::Read);
        let out = k.buffer("out", Scalar::F32, Access::Write);
        let iout = k.buffer("iout", Scalar::I32, Access::Write);
        let red = k.shared("red", Scalar::F32, warps * 3);
        let ired = k.shared("ired", Scalar::I32, warps * 2);
        let gid = k.let_("gid", k.global_thread_id());
        let xv = k.let_("xv", x.at(gid));
        let yv = k.let_("yv", y.at(gid));
        let r = k.block_allreduce_many(
            &[
                (Reduce::Sum, xv.e()),
                (Reduce::Max, xv.e()),
                (Reduce::Min, xv.e()),
            ],
            red,
        );
        // A second reduction reusing the same scratch right away.
        let r2 = k.block_allreduce(Reduce::Sum, xv * 2.0f32, red);
        let ri = k.block_allreduce_many(&[(Reduce::Max, yv.e()), (Reduce::Sum, yv.e())], ired);
        for (j, v) in r.iter().chain([&r2]).enumerate() {
            k.store(out, gid * 4u32 + j as u32, *v);
        }
        for (j, v) in ri.iter().enumerate() {
            k.store(iout, gid * 2u32 + j as u32, *v);
        }
        let kernel = k.finish().unwrap();
        let mut rng = Rng(bt as u64 + 11);
        // Small integers: sums are exact in any order.
        let xs: Vec<f32> = (0..n).map(|_| rng.below(2001) as f32 - 1000.0).collect();
        let ys: Vec<i32> = (0..n).map(|_| rng.below(1 << 20) as i32 - (1 << 19)).collect();
        let mut hx = HostBuffer::F32(xs.clone());
        let mut hy = HostBuffer::I32(ys.clone());
        let mut ho = HostBuffer::filled_f64(Scalar::F32, n * 4, f64::NAN);
        let mut hi = HostBuffer::zeros(Scalar::I32, n * 2);
        let stats = launch(
            &kernel,
            blocks,
            &mut [
                Arg::Buf(&mut hx),
                Arg::Buf(&mut hy),
                Arg::Buf(&mut ho),
                Arg::Buf(&mut hi),
            ],
        )
        .unwrap();
        assert!(stats.barriers > 0 || bt == 32);
        for b in 0..blocks as usize {
            let s = &xs[b * bt as usize..(b + 1) * bt as usize];
            let sy = &ys[b * bt as usize..(b + 1) * bt as usize];
            let want = [
                s.iter().sum::<f32>(),
                s.iter().cloned().fold(f32::NEG_INFINITY, f32::max),
                s.iter().cloned().fold(f32::INFINITY, f32::min),
                s.iter().map(|v| v * 2.0).sum::<f32>(),
            ];
            let wanti = [*sy.iter().max().unwrap(), sy.iter().sum::<i32>()];
            for t in 0..bt as usize {
                let g = b * bt as usize + t;
                for (j, w) in want.iter().enumerate() {
                    assert_eq!(
                        ho.as_f32().unwrap()[g * 4 + j],
                        *w,
                        "bt {bt} block {b} thread {t} item {j}"
                    );
                }
                for (j, w) in wanti.iter().enumerate() {
                    assert_eq!(hi.as_i32().unwrap()[g * 2 + j], *w, "bt {bt} int item {j}");
                }
            }
        }
    }
}

#[test]
fn block_exclusive_scan_all_block_sizes() {
    for bt in [32u32, 64, 96, 256, 1024] {
        let blocks = 3u32;
        let n = (bt * blocks) as usize;
        let mut k = KernelBuilder::new(format!("scan_{bt}"), bt);
        let x = k.buffer("x", Scalar::U32, Access::Read);
        let ex = k.buffer("excl", Scalar::U32, Access::Write);
        let tot = k.buffer("total", Scalar::U32, Access::Write);
        let scratch = k.shared("scan", Scalar::U32, bt / 32);
        let gid = k.let_("gid", k.global_thread_id());
        let (e, t) = k.block_exclusive_scan(x.at(gid), scratch);
        k.store(ex, gid, e);
        k.store(tot, gid, t);
        // Scan again with the same scratch: the begin/end barriers make reuse safe.
        let (e2, _) = k.block_exclusive_scan(e + 1u32, scratch);
        let _ = e2;
        let kernel = k.finish().unwrap();
        let mut rng = Rng(bt as u64 * 3 + 1);
        let xs: Vec<u32> = (0..n).map(|_| rng.below(10) as u32).collect();
        let mut hx = HostBuffer::U32(xs.clone());
        let mut he = HostBuffer::zeros(Scalar::U32, n);
        let mut ht = HostBuffer::zeros(Scalar::U32, n);
        launch(
            &kernel,
            blocks,
            &mut [Arg::Buf(&mut hx), Arg::Buf(&mut he), Arg::Buf(&mut ht)],
        )
        .unwrap();
        for b in 0..blocks as usize {
            let mut acc = 0u32;
            let s = &xs[b * bt as usize..(b + 1) * bt as usize];
            let total: u32 = s.iter().sum();
            for (t, &v) in s.iter().enumerate() {
                let g = b * bt as usize + t;
                assert_eq!(he.as_u32().unwrap()[g], acc, "bt {bt} block {b} thread {t}");
                assert_eq!(ht.as_u32().unwrap()[g], total, "bt {bt} block {b} total");
                acc += v;
            }
        }
    }
}

/// The `_reusing` collectives skip their leading barrier: chained on one scratch they give the
/// same results race-free, and after a plain read of that scratch the race check reports the
/// write that would need the barrier.
#[test]
fn reusing_collectives_chain_without_leading_barriers() {
    let build = |plain_read_first: bool| {
        let bt = 128u32;
        let mut k = KernelBuilder::new("reusing", bt);
        let x = k.buffer("x", Scalar::I32, Access::Read);
        let out = k.buffer("out", Scalar::I32, Access::Write);
        let red = k.shared("red", Scalar::I32, bt / 32);
        let tid = k.let_("tid", k.thread_idx());
        let v = k.let_("v", x.at(tid));
        if plain_read_first {
            k.if_(tid.lt(bt / 32), |k| k.store(red, tid, v));
            k.barrier();
            let peek = k.let_("peek", red.at(0u32));
            k.store(out, tid + 4 * bt, peek);
        }
        let (e1, t1) = k.block_exclusive_scan_reusing(v, red);
        let m = k.block_allreduce_many_reusing(&[(Reduce::Max, v.e())], red);
        let (e2, _) = k.block_exclusive_scan_reusing(e1 + 1i32, red);
        for (i, val) in [e1.e(), t1.e(), m[0].e(), e2.e()].into_iter().enumerate() {
            k.store(out, tid + i as u32 * bt, val);
        }
        k.finish().unwrap()
    };
    let xs: Vec<i32> = (0..128).map(|i| (i * 37 % 11) - 3).collect();
    let mut hx = HostBuffer::I32(xs.clone());
    let mut ho = HostBuffer::zeros(Scalar::I32, 5 * 128);
    launch(&build(false), 1, &mut [Arg::Buf(&mut hx), Arg::Buf(&mut ho)]).unwrap();
    let o = ho.as_i32().unwrap();
    let (mut acc, mut acc2) = (0, 0);
    for t in 0..128 {
        assert_eq!(o[t], acc, "exclusive scan at {t}");
        assert_eq!(o[128 + t], xs.iter().sum::<i32>());
        assert_eq!(o[256 + t], *xs.iter().max().unwrap());
        assert_eq!(o[384 + t], acc2, "second scan at {t}");
        acc2 += acc + 1;
        acc += xs[t];
    }
    let e = launch(&build(true), 1, &mut [Arg::Buf(&mut hx), Arg::Buf(&mut ho)]).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::SharedRace {
                access: RaceAccess::Write,
                other_access: RaceAccess::Read,
                ..
            }
        ),
        "{e}"
    );
}

// ----- control flow ----------------------------------------------------------------------

#[test]
fn for_loops_with_per_thread_trip_counts() {
    let mut k = KernelBuilder::new("loops", 64);
    let out = k.buffer("out", Scalar::I32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    let t = k.let_("t", tid.i32());
    let acc = k.let_typed("acc", Scalar::I32, 0);
    let iters = k.let_typed("iters", Scalar::I32, 0);
    // Start, end and step all vary per thread.
    k.for_("i", t % 7i32, t % 13i32 + 5i32, t % 3i32 + 1i32, |k, i| {
        k.assign(acc, acc + i);
        k.assign(iters, iters + 1i32);
    });
    // `end` re-evaluated every iteration: it shrinks as the body runs.
    let lim = k.let_("lim", t % 11i32 + 3i32);
    let acc2 = k.let_typed("acc2", Scalar::I32, 0);
    k.for_("j", 0i32, lim, 1i32, |k, j| {
        k.assign(acc2, acc2 * 3i32 + j);
        k.assign(lim, lim - 1i32);
    });
    // Nested loop whose inner bound depends on the outer variable.
    let acc3 = k.let_typed("acc3", Scalar::I32, 0);
    k.for_("a", 0i32, t % 5i32, 1i32, |k, a| {
        k.for_("b", a.clone(), 4i32, 2i32, |k, b| {
            k.assign(acc3, acc3 + a.clone() * 10i32 + b);
        });
    });
    k.store(out, tid * 4u32, acc);
    k.store(out, tid * 4u32 + 1u32, iters);
    k.store(out, tid * 4u32 + 2u32, acc2);
    k.store(out, tid * 4u32 + 3u32, acc3);
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::I32, 64 * 4);
    launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap();
    let o = o.as_i32().unwrap();
    for t in 0..64i32 {
        let (mut acc, mut iters) = (0, 0);
        let mut i = t % 7;
        while i < t % 13 + 5 {
            acc += i;
            iters += 1;
            i += t % 3 + 1;
        }
        let mut lim = t % 11 + 3;
        let mut acc2 = 0i32;
        let mut j = 0;
        while j < lim {
            acc2 = acc2.wrapping_mul(3) + j;
            lim -= 1;
            j += 1;
        }
        let mut acc3 = 0;
        for a in 0..t % 5 {
            let mut b = a;
            while b < 4 {
                acc3 += a * 10 + b;
                b += 2;
            }
        }
        let base = t as usize * 4;
        assert_eq!(&o[base..base + 4], &[acc, iters, acc2, acc3], "thread {t}");
    }
}

#[test]
fn while_loops_with_per_thread_conditions() {
    let mut k = KernelBuilder::new("collatz", 128);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let gid = k.let_("gid", k.global_thread_id());
    let x = k.let_("x", gid.cast(Scalar::U64) + 1u64);
    let steps = k.let_typed("steps", Scalar::U32, 0);
    k.while_(x.gt(1u64), |k| {
        k.if_else(
            (x & 1u64).eq_(0u64),
            |k| k.assign(x, x >> 1u64),
            |k| k.assign(x, x * 3u64 + 1u64),
        );
        k.assign(steps, steps + 1u32);
    });
    k.store(out, gid, steps);
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::U32, 256);
    let stats = launch(&kernel, 2, &mut [Arg::Buf(&mut o)]).unwrap();
    for g in 0..256u64 {
        let (mut x, mut s) = (g + 1, 0u32);
        while x > 1 {
            x = if x % 2 == 0 { x / 2 } else { 3 * x + 1 };
            s += 1;
        }
        assert_eq!(o.as_u32().unwrap()[g as usize], s, "collatz({})", g + 1);
    }
    assert!(stats.statements > 0 && stats.lane_ops > stats.statements);
}

#[test]
fn if_else_divergence_and_nesting() {
    let mut k = KernelBuilder::new("branches", 64);
    let out = k.buffer("out", Scalar::I32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    let r = k.var("r", Scalar::I32);
    k.if_else(
        (tid % 3u32).eq_(0u32),
        |k| k.assign(r, 1i32),
        |k| {
            k.if_else(
                (tid % 3u32).eq_(1u32),
                |k| {
                    k.assign(r, 2i32);
                    k.if_(tid.gt(40u32), |k| k.assign(r, r * 10i32));
                },
                |k| k.assign(r, 3i32),
            )
        },
    );
    // An all-false branch is skipped entirely (its out-of-bounds store never runs).
    k.if_(tid.gt(1000u32), |k| k.store(out, 1_000_000u32, 0i32));
    k.store(out, tid, r);
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::I32, 64);
    launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap();
    for t in 0..64 {
        let want = match t % 3 {
            0 => 1,
            1 if t > 40 => 20,
            1 => 2,
            _ => 3,
        };
        assert_eq!(o.as_i32().unwrap()[t], want, "thread {t}");
    }
}

// ----- memory ----------------------------------------------------------------------------

#[test]
fn vector_loads_stores_and_stats() {
    let n = 256usize;
    let mut k = KernelBuilder::new("vec", 32);
    let x = k.buffer("x", Scalar::F16, Access::Read);
    let y = k.buffer("y", Scalar::F16, Access::Write);
    let s = k.buffer("s", Scalar::F32, Access::Write);
    let sm = k.shared("sm", Scalar::F32, 128);
    let tid = k.let_("tid", k.thread_idx());
    let v = k.load_vec("x", x, tid * 8u32, 8);
    let vals: Vec<Expr> = v.iter().rev().map(|e| e.e()).collect();
    k.store_vec(y, tid * 8u32, vals);
    // Shared vector round trip.
    let f: Vec<Expr> = v.iter().take(4).map(|e| e.f32()).collect();
    k.store_vec(sm, tid * 4u32, f);
    k.barrier();
    let back = k.load_vec("b", sm, tid * 4u32, 4);
    k.store(s, tid, back[0] + back[1] + back[2] + back[3]);
    let kernel = k.finish().unwrap();
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let mut hx = HostBuffer::from_f32_as(Scalar::F16, &xs);
    let mut hy = HostBuffer::zeros(Scalar::F16, n);
    let mut hs = HostBuffer::zeros(Scalar::F32, 32);
    let stats = launch(
        &kernel,
        1,
        &mut [Arg::Buf(&mut hx), Arg::Buf(&mut hy), Arg::Buf(&mut hs)],
    )
    .unwrap();
    let y = hy.to_f64_vec();
    for t in 0..32 {
        for c in 0..8 {
            assert_eq!(y[t * 8 + c], xs[t * 8 + 7 - c] as f64);
        }
        let want: f32 = xs[t * 8..t * 8 + 4].iter().sum();
        assert_eq!(hs.as_f32().unwrap()[t], want);
    }
    assert_eq!(stats.global_bytes_loaded, n as u64 * 2);
    assert_eq!(stats.global_bytes_stored, n as u64 * 2 + 32 * 4);
    assert_eq!(stats.buffer("x").unwrap().bytes_loaded, 512);
    assert_eq!(stats.buffer("y").unwrap().bytes_stored, 512);
    assert_eq!(stats.buffer("s").unwrap().bytes_stored, 128);
    assert_eq!(stats.shared_bytes_stored, 128 * 4);
    assert_eq!(stats.shared_bytes_loaded, 128 * 4);
    assert_eq!(stats.barriers, 1);
}

#[test]
fn atomics_in_thread_order() {
    let bt = 64u32;
    let mut k = KernelBuilder::new("atomics", bt);
    let counter = k.buffer("counter", Scalar::U32, Access::ReadWrite);
    let olds = k.buffer("olds", Scalar::U32, Access::Write);
    let fsum = k.buffer("fsum", Scalar::F32, Access::ReadWrite);
    let imax = k.buffer("imax", Scalar::I32, Access::ReadWrite);
    let exch = k.buffer("exch", Scalar::I64, Access::ReadWrite);
    let hist = k.buffer("hist", Scalar::U32, Access::Write);
    let sh = k.shared("sh", Scalar::U32, 4);
    let gid = k.let_("gid", k.global_thread_id());
    let tid = k.let_("tid", k.thread_idx());
    let old = k.atomic(AtomicOp::Add, counter, 0u32, 1u32);
    k.store(olds, gid, old);
    k.atomic_no_ret(AtomicOp::Add, fsum, 0u32, gid.f32() * 0.5f32);
    k.atomic_no_ret(
        AtomicOp::Max,
        imax,
        0u32,
        (gid.i32() - 50i32) * (gid.i32() - 50i32) * -1i32,
    );
    k.atomic_no_ret(AtomicOp::Min, imax, 1u32, gid.i32() * 7i32 % 23i32 - 11i32);
    let prev = k.atomic(AtomicOp::Exch, exch, 0u32, gid.i64());
    k.store(olds, gid + 1000u32, prev.cast(Scalar::U32));
    // Shared-memory histogram.
    k.if_(tid.lt(4u32), |k| k.store(sh, tid, 0u32));
    k.barrier();
    k.atomic_no_ret(AtomicOp::Add, sh, tid % 4u32, 1u32);
    k.barrier();
    k.if_(tid.lt(4u32), |k| {
        k.store(hist, k.block_idx(Axis::X) * 4u32 + tid, sh.at(tid))
    });
    let kernel = k.finish().unwrap();
    let nb = 3u32;
    let n = (bt * nb) as usize;
    let mut bufs = [
        HostBuffer::zeros(Scalar::U32, 1),
        HostBuffer::zeros(Scalar::U32, 1000 + n),
        HostBuffer::zeros(Scalar::F32, 1),
        HostBuffer::I32(vec![i32::MIN, i32::MAX]),
        HostBuffer::I64(vec![-1]),
        HostBuffer::zeros(Scalar::U32, nb as usize * 4),
    ];
    let mut args: Vec<Arg> = bufs.iter_mut().map(Arg::Buf).collect();
    let stats = launch(&kernel, nb, &mut args).unwrap();
    drop(args);
    let o = bufs[1].as_u32().unwrap();
    for g in 0..n {
        assert_eq!(o[g], g as u32, "atomic add returns old values in thread order");
        assert_eq!(o[1000 + g], if g == 0 { u32::MAX } else { g as u32 - 1 });
    }
    assert_eq!(bufs[0].as_u32().unwrap()[0], n as u32);
    let mut want = 0f32;
    for g in 0..n {
        want += g as f32 * 0.5;
    }
    assert_eq!(bufs[2].as_f32().unwrap()[0], want);
    assert_eq!(bufs[3].as_i32().unwrap()[0], 0);
    assert_eq!(
        bufs[3].as_i32().unwrap()[1],
        (0..n as i32).map(|g| g * 7 % 23 - 11).min().unwrap()
    );
    assert_eq!(bufs[4].as_i64().unwrap()[0], n as i64 - 1);
    assert!(bufs[5].as_u32().unwrap().iter().all(|&h| h == 16));
    assert_eq!(stats.buffer("counter").unwrap().bytes_loaded, n as u64 * 4);
    assert_eq!(stats.buffer("counter").unwrap().bytes_stored, n as u64 * 4);
}

#[test]
fn scalar_params_of_every_type() {
    let mut k = KernelBuilder::new("params", 32);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let a = k.scalar_param("a", Scalar::I32);
    let b = k.scalar_param("b", Scalar::U32);
    let c = k.scalar_param("c", Scalar::I64);
    let d = k.scalar_param("d", Scalar::U64);
    let e = k.scalar_param("e", Scalar::F32);
    let f = k.scalar_param("f", Scalar::Bool);
    let g = k.scalar_param("g", Scalar::F16);
    k.store(out, 0u32, a.f32());
    k.store(out, 1u32, b.f32());
    k.store(out, 2u32, c.f32());
    k.store(out, 3u32, d.f32());
    k.store(out, 4u32, e);
    k.store(out, 5u32, select(f, 1.0f32, 0.0f32));
    k.store(out, 6u32, g.f32());
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::F32, 7);
    launch(
        &kernel,
        1,
        &mut [
            Arg::Buf(&mut o),
            Arg::scalar(-3i32),
            Arg::scalar(4u32),
            Arg::scalar(-5i64),
            Arg::scalar(6u64),
            Arg::scalar(7.5f32),
            Arg::scalar(true),
            Arg::scalar(f16::from_f32(0.5)),
        ],
    )
    .unwrap();
    assert_eq!(o.as_f32().unwrap(), &[-3.0, 4.0, -5.0, 6.0, 7.5, 1.0, 0.5]);
}

#[test]
fn host_buffer_helpers() {
    let b = HostBuffer::filled_f64(Scalar::F32, 3, f64::NAN);
    assert_eq!(b.len(), 3);
    assert!(!b.is_empty());
    assert_eq!(b.elem(), Scalar::F32);
    assert!(b.to_f64_vec().iter().all(|v| v.is_nan()));
    let h = HostBuffer::from_f32_as(Scalar::F16, &[1.0, 0.1, 1e6]);
    assert_eq!(h.as_f16().unwrap()[1], f16::from_f32(0.1));
    assert!(h.to_f64_vec()[2].is_infinite());
    let i = HostBuffer::from_f32_as(Scalar::I32, &[1.9, -1.9]);
    assert_eq!(i.as_i32().unwrap(), &[1, -1]);
    assert!(i.as_f32().is_none());
    assert_eq!(HostBuffer::zeros(Scalar::U64, 0).len(), 0);
    assert!(HostBuffer::zeros(Scalar::BF16, 0).is_empty());
    assert_eq!(HostBuffer::from(vec![1u64, 2]).elem(), Scalar::U64);
    assert_eq!(HostBuffer::zeros(Scalar::I64, 2).size_bytes(), 16);
}

// ----- sanitizer errors ------------------------------------------------------------------

/// `x` has 40 elements; 64 threads load `x[tid + off]`.
fn load_kernel(off: i32) -> Kernel {
    let mut k = KernelBuilder::new("oob_load", 64);
    let x = k.buffer("x", Scalar::F32, Access::Read);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.store(out, tid, x.at(tid.i32() + off));
    k.finish().unwrap()
}

#[test]
fn error_out_of_bounds_global_load() {
    let kernel = load_kernel(0);
    let mut x = HostBuffer::zeros(Scalar::F32, 40);
    let mut out = HostBuffer::zeros(Scalar::F32, 64);
    let e = launch(&kernel, 2, &mut [Arg::Buf(&mut x), Arg::Buf(&mut out)]).unwrap_err();
    match &e {
        InterpError::OutOfBounds {
            buffer,
            index,
            len,
            access,
            loc,
        } => {
            assert_eq!(buffer, "x");
            assert_eq!(*index, 40);
            assert_eq!(*len, 40);
            assert_eq!(*access, MemAccess::Load);
            assert_eq!(loc.thread, 40);
            assert_eq!(loc.block, [0, 0, 0]);
            assert_eq!(loc.path, "body[1]");
        }
        other => panic!("unexpected {other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("oob_load") && msg.contains("thread 40") && msg.contains("body[1]"),
        "{msg}"
    );
    assert!(msg.contains("block (0, 0, 0)"), "{msg}");
    // Negative index.
    let kernel = load_kernel(-1);
    let mut x = HostBuffer::zeros(Scalar::F32, 100);
    let e = launch(&kernel, 1, &mut [Arg::Buf(&mut x), Arg::Buf(&mut out)]).unwrap_err();
    assert!(matches!(e, InterpError::OutOfBounds { index: -1, .. }), "{e}");
    assert_eq!(loc(&e).thread, 0);
    // In bounds: fine.
    let mut x = HostBuffer::zeros(Scalar::F32, 64);
    launch(&load_kernel(0), 1, &mut [Arg::Buf(&mut x), Arg::Buf(&mut out)]).unwrap();
}

#[test]
fn error_out_of_bounds_store_and_path() {
    let mut k = KernelBuilder::new("oob_store", 32);
    let out = k.buffer("out", Scalar::I32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.ge(0u32), |k| {
        k.if_else(tid.lt(100u32), |_| {}, |_| {});
        k.if_else(
            tid.lt(4u32),
            |_| {},
            |k| k.store(out, tid.cast(Scalar::I64) * 2i64, 1i32),
        );
    });
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::I32, 20);
    let e = run(&kernel, LaunchDims::new([1, 2, 1], 32), &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::OutOfBounds {
                index: 20,
                len: 20,
                access: MemAccess::Store,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(loc(&e).path, "body[1].then[1].else[0]");
    assert_eq!(loc(&e).thread, 10);
}

#[test]
fn error_out_of_bounds_shared() {
    let mut k = KernelBuilder::new("oob_shared", 64);
    let sm = k.shared("tile", Scalar::F32, 48);
    let tid = k.let_("tid", k.thread_idx());
    k.store(sm, tid, 1.0f32);
    let kernel = k.finish().unwrap();
    let e = launch(&kernel, 1, &mut []).unwrap_err();
    match &e {
        InterpError::OutOfBounds {
            buffer,
            index,
            len,
            loc,
            ..
        } => {
            assert!(buffer.contains("tile"));
            assert_eq!((*index, *len, loc.thread), (48, 48, 48));
        }
        other => panic!("unexpected {other}"),
    }
    // Shared load out of bounds too.
    let mut k = KernelBuilder::new("oob_shared_load", 32);
    let sm = k.shared("tile", Scalar::F32, 32);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.store(sm, tid, 1.0f32);
    k.barrier();
    k.store(out, tid, sm.at(tid + 1u32));
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::F32, 32);
    let e = launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::OutOfBounds {
                index: 32,
                access: MemAccess::Load,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(loc(&e).thread, 31);
}

#[test]
fn error_misaligned_and_out_of_bounds_vectors() {
    let build = |off: u32, store: bool| {
        let mut k = KernelBuilder::new("vec_align", 32);
        let x = k.buffer("x", Scalar::F32, Access::ReadWrite);
        let tid = k.let_("tid", k.thread_idx());
        if store {
            k.store_vec(x, tid * 4u32 + off, vec![f32c(1.0), f32c(2.0)]);
        } else {
            let v = k.load_vec("v", x, tid * 4u32 + off, 4);
            k.store(x, tid, v[0]);
        }
        k.finish().unwrap()
    };
    let mut x = HostBuffer::zeros(Scalar::F32, 128);
    let e = launch(&build(2, false), 1, &mut [Arg::Buf(&mut x)]).unwrap_err();
    assert!(
        matches!(&e, InterpError::Misaligned { index: 2, vec_len: 4, access: MemAccess::VectorLoad, buffer, .. } if buffer == "x"),
        "{e}"
    );
    assert_eq!(loc(&e).thread, 0);
    let e = launch(&build(1, true), 1, &mut [Arg::Buf(&mut x)]).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::Misaligned {
                index: 1,
                vec_len: 2,
                access: MemAccess::VectorStore,
                ..
            }
        ),
        "{e}"
    );
    // Aligned (vec of 2 at multiples of 4 + 2) is fine.
    launch(&build(2, true), 1, &mut [Arg::Buf(&mut x)]).unwrap();
    // The last element of the vector past the end.
    let mut x = HostBuffer::zeros(Scalar::F32, 126);
    let e = launch(&build(0, false), 1, &mut [Arg::Buf(&mut x)]).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::OutOfBounds {
                index: 126,
                len: 126,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(loc(&e).thread, 31);
}

#[test]
fn error_barrier_in_divergent_if() {
    let build = |bound: u32| {
        let mut k = KernelBuilder::new("div_barrier", 64);
        let tid = k.let_("tid", k.thread_idx());
        k.if_(tid.lt(bound), |k| k.barrier());
        k.finish().unwrap()
    };
    let e = launch(&build(16), 1, &mut []).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::BarrierDivergence {
                active: 16,
                total: 64,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(loc(&e).path, "body[1].then[0]");
    assert_eq!(loc(&e).thread, 16);
    // A uniform condition is fine.
    launch(&build(64), 1, &mut []).unwrap();
    // Barrier in a loop with divergent trip counts.
    let mut k = KernelBuilder::new("loop_barrier", 64);
    let tid = k.let_("tid", k.thread_idx());
    k.for_("i", 0u32, (tid >> 5u32) + 1u32, 1u32, |k, _| k.barrier());
    let kernel = k.finish().unwrap();
    let e = launch(&kernel, 1, &mut []).unwrap_err();
    assert!(
        matches!(e, InterpError::BarrierDivergence { active: 32, .. }),
        "{e}"
    );
    assert_eq!(loc(&e).path, "body[1].body[0]");
    assert_eq!(loc(&e).thread, 0);
}

#[test]
fn error_partial_warp_shuffle_and_ballot() {
    let mut k = KernelBuilder::new("partial_shfl", 64);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(k.lane().lt(16u32), |k| {
        k.shuffle(ShuffleMode::Xor, tid, 1u32);
    });
    let kernel = k.finish().unwrap();
    let e = launch(&kernel, 1, &mut []).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::PartialWarp {
                op: "shuffle",
                warp: 0,
                mask: 0xffff,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(loc(&e).thread, 16);
    assert_eq!(loc(&e).path, "body[1].then[0]");

    let mut k = KernelBuilder::new("partial_ballot", 64);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.ne_(40u32), |k| {
        k.ballot(tid.gt(3u32));
    });
    let kernel = k.finish().unwrap();
    let e = launch(&kernel, 1, &mut []).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::PartialWarp {
                op: "ballot",
                warp: 1,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(loc(&e).thread, 40);

    let mut k = KernelBuilder::new("partial_warp_sync", 64);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.lt(60u32), |k| k.warp_sync());
    let kernel = k.finish().unwrap();
    let e = launch(&kernel, 1, &mut []).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::PartialWarp {
                op: "warp sync",
                warp: 1,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn error_uninitialised_register() {
    let mut k = KernelBuilder::new("uninit_reg", 32);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    let v = k.var("acc", Scalar::F32);
    k.if_(tid.lt(5u32), |k| k.assign(v, 1.0f32));
    k.store(out, tid, v);
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::F32, 32);
    let e = launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(
        matches!(&e, InterpError::UninitRegister { var, .. } if var == "acc"),
        "{e}"
    );
    assert_eq!(loc(&e).thread, 5);
    assert_eq!(loc(&e).path, "body[2]");
    assert!(e.to_string().contains("acc"));

    // Registers start undefined in every block: a value from block 0 does not leak.
    let mut k = KernelBuilder::new("uninit_reg_block", 32);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let v = k.var("v", Scalar::U32);
    k.if_(k.block_idx(Axis::X).eq_(0u32), |k| k.assign(v, 1u32));
    k.store(out, k.thread_idx(), v);
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::U32, 32);
    let e = launch(&kernel, 2, &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(matches!(e, InterpError::UninitRegister { .. }), "{e}");
    assert_eq!(loc(&e).block, [1, 0, 0]);
}

#[test]
fn error_uninitialised_shared() {
    let mut k = KernelBuilder::new("uninit_shared", 64);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let sm = k.shared("tile", Scalar::F32, 64);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(k.block_idx(Axis::X).eq_(0u32).or(tid.lt(63u32)), |k| {
        k.store(sm, tid, 1.0f32)
    });
    k.barrier();
    k.store(out, tid, sm.at(tid));
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::F32, 64);
    // Block 0 writes everything; block 1 leaves element 63 unwritten (fresh per block).
    let e = launch(&kernel, 2, &mut [Arg::Buf(&mut o)]).unwrap_err();
    match &e {
        InterpError::UninitShared {
            array, index, loc, ..
        } => {
            assert_eq!(array, "tile");
            assert_eq!(*index, 63);
            assert_eq!(loc.block, [1, 0, 0]);
            assert_eq!(loc.thread, 63);
            assert_eq!(loc.path, "body[3]");
        }
        other => panic!("unexpected {other}"),
    }
}

fn race_kernel(with_barrier: bool) -> Kernel {
    let mut k = KernelBuilder::new("race", 64);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let sm = k.shared("sm", Scalar::U32, 32);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.lt(32u32), |k| k.store(sm, tid, tid * 3u32));
    if with_barrier {
        k.barrier();
    }
    k.if_(tid.ge(32u32), |k| k.store(out, tid - 32u32, sm.at(tid - 32u32)));
    k.finish().unwrap()
}

/// Warp 0 writes `buf`, warp 1 reads it back (a workspace segment read without a barrier).
fn global_race_kernel(with_barrier: bool) -> Kernel {
    let mut k = KernelBuilder::new("global_race", 64);
    let ws = k.buffer("ws", Scalar::U32, Access::ReadWrite);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.lt(32u32), |k| k.store(ws, tid, tid * 5u32));
    if with_barrier {
        k.barrier();
    }
    k.if_(tid.ge(32u32), |k| k.store(out, tid - 32u32, ws.at(tid - 32u32)));
    k.finish().unwrap()
}

#[test]
fn error_global_race_within_a_block() {
    let mut ws = HostBuffer::zeros(Scalar::U32, 32);
    let mut o = HostBuffer::zeros(Scalar::U32, 32);
    let e = launch(
        &global_race_kernel(false),
        1,
        &mut [Arg::Buf(&mut ws), Arg::Buf(&mut o)],
    )
    .unwrap_err();
    match &e {
        InterpError::GlobalRace {
            buffer,
            index,
            access,
            warp,
            other_access,
            other_warp,
            loc,
        } => {
            assert_eq!(buffer, "ws");
            assert_eq!(*index, 0);
            assert_eq!((*access, *other_access), (RaceAccess::Read, RaceAccess::Write));
            assert_eq!((*warp, *other_warp), (1, 0));
            assert_eq!(loc.thread, 32);
        }
        other => panic!("unexpected {other}"),
    }
    assert!(e.to_string().contains("global-memory race on `ws`[0]"), "{e}");
    launch(
        &global_race_kernel(true),
        1,
        &mut [Arg::Buf(&mut ws), Arg::Buf(&mut o)],
    )
    .unwrap();
    assert_eq!(
        o.as_u32().unwrap(),
        (0..32).map(|t| t * 5).collect::<Vec<u32>>().as_slice()
    );
    // Blocks are separate epochs: block 1 reading what block 0 wrote is not a race here.
    let mut k = KernelBuilder::new("next_block", 64);
    let ws_b = k.buffer("ws", Scalar::U32, Access::ReadWrite);
    let tid = k.let_("tid", k.thread_idx());
    let b = k.let_("b", k.block_idx(Axis::X));
    k.if_(b.eq_(0u32).and(tid.eq_(0u32)), |k| k.store(ws_b, 0u32, 7u32));
    k.if_(b.eq_(1u32).and(tid.eq_(32u32)), |k| {
        k.store(ws_b, 1u32, ws_b.at(0u32))
    });
    let next_block = k.finish().unwrap();
    let mut ws2 = HostBuffer::zeros(Scalar::U32, 2);
    launch(&next_block, 2, &mut [Arg::Buf(&mut ws2)]).unwrap();
    assert_eq!(ws2.as_u32().unwrap(), &[7, 7]);
}

#[test]
fn error_shared_race_between_warps() {
    let mut o = HostBuffer::zeros(Scalar::U32, 32);
    let e = launch(&race_kernel(false), 1, &mut [Arg::Buf(&mut o)]).unwrap_err();
    match &e {
        InterpError::SharedRace {
            array,
            index,
            access,
            warp,
            other_access,
            other_warp,
            loc,
        } => {
            assert_eq!(array, "sm");
            assert_eq!(*index, 0);
            assert_eq!((*access, *other_access), (RaceAccess::Read, RaceAccess::Write));
            assert_eq!((*warp, *other_warp), (1, 0));
            assert_eq!(loc.thread, 32);
            assert_eq!(loc.path, "body[2].then[0]");
        }
        other => panic!("unexpected {other}"),
    }
    // With a barrier in between: fine, and the data arrives.
    launch(&race_kernel(true), 1, &mut [Arg::Buf(&mut o)]).unwrap();
    assert_eq!(
        o.as_u32().unwrap(),
        (0..32).map(|t| t * 3).collect::<Vec<u32>>().as_slice()
    );
    // Race checking can be switched off.
    let opts = InterpOptions {
        check_races: false,
        ..Default::default()
    };
    run_with(
        &race_kernel(false),
        LaunchDims::linear(1, 64),
        &mut [Arg::Buf(&mut o)],
        &opts,
    )
    .unwrap();
}

#[test]
fn error_shared_write_after_read_race() {
    // Warp 1 reads what warp 0 wrote (after a barrier), then warp 0 overwrites it without one.
    let build = |second_barrier: bool| {
        let mut k = KernelBuilder::new("war", 64);
        let out = k.buffer("out", Scalar::U32, Access::Write);
        let sm = k.shared("sm", Scalar::U32, 32);
        let tid = k.let_("tid", k.thread_idx());
        k.if_(tid.lt(32u32), |k| k.store(sm, tid, tid));
        k.barrier();
        k.if_(tid.ge(32u32), |k| k.store(out, tid - 32u32, sm.at(63u32 - tid)));
        if second_barrier {
            k.barrier();
        }
        k.if_(tid.lt(32u32), |k| k.store(sm, tid, 0u32));
        k.finish().unwrap()
    };
    let mut o = HostBuffer::zeros(Scalar::U32, 32);
    let e = launch(&build(false), 1, &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::SharedRace {
                access: RaceAccess::Write,
                other_access: RaceAccess::Read,
                warp: 0,
                other_warp: 1,
                ..
            }
        ),
        "{e}"
    );
    launch(&build(true), 1, &mut [Arg::Buf(&mut o)]).unwrap();
    // Two warps writing one element in the same epoch.
    let mut k = KernelBuilder::new("waw", 64);
    let sm = k.shared("sm", Scalar::U32, 32);
    let tid = k.let_("tid", k.thread_idx());
    k.store(sm, tid % 32u32, tid);
    let e = launch(&k.finish().unwrap(), 1, &mut []).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::SharedRace {
                access: RaceAccess::Write,
                other_access: RaceAccess::Write,
                warp: 1,
                other_warp: 0,
                ..
            }
        ),
        "{e}"
    );
    // Plain write by warp 0, atomic by warp 1 without a barrier.
    let mut k = KernelBuilder::new("atomic_race", 64);
    let sm = k.shared("sm", Scalar::U32, 1);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.eq_(0u32), |k| k.store(sm, 0u32, 0u32));
    k.atomic_no_ret(AtomicOp::Add, sm, 0u32, 1u32);
    let e = launch(&k.finish().unwrap(), 1, &mut []).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::SharedRace {
                access: RaceAccess::Atomic,
                warp: 1,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn error_div_by_zero_and_shift_overflow() {
    let mut k = KernelBuilder::new("divzero", 32);
    let out = k.buffer("out", Scalar::I32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.store(out, tid, 10i32 / (tid.i32() - 3i32));
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::I32, 32);
    let e = launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(matches!(e, InterpError::DivByZero { ty: Scalar::I32, .. }), "{e}");
    assert_eq!(loc(&e).thread, 3);
    assert_eq!(loc(&e).path, "body[1]");

    let mut k = KernelBuilder::new("remzero", 32);
    let out = k.buffer("out", Scalar::U64, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.store(out, tid, tid.cast(Scalar::U64) % (tid.cast(Scalar::U64) & 1u64));
    let mut o = HostBuffer::zeros(Scalar::U64, 32);
    let e = launch(&k.finish().unwrap(), 1, &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(matches!(e, InterpError::DivByZero { ty: Scalar::U64, .. }), "{e}");
    assert_eq!(loc(&e).thread, 0);

    let mut k = KernelBuilder::new("divovf", 32);
    let out = k.buffer("out", Scalar::I32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.store(out, tid, ilit(Scalar::I32, i32::MIN as i64) / (tid.i32() - 1i32));
    let mut o = HostBuffer::zeros(Scalar::I32, 32);
    let e = launch(&k.finish().unwrap(), 1, &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(matches!(e, InterpError::DivOverflow { .. }), "{e}");
    assert_eq!(loc(&e).thread, 0);

    let mut k = KernelBuilder::new("shift", 64);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.store(out, tid, binary(BinOp::Shl, 1u32, tid));
    let mut o = HostBuffer::zeros(Scalar::U32, 64);
    let e = launch(&k.finish().unwrap(), 1, &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::ShiftOverflow {
                amount: 32,
                ty: Scalar::U32,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(loc(&e).thread, 32);

    let mut k = KernelBuilder::new("shift_neg", 32);
    let out = k.buffer("out", Scalar::I64, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.store(out, tid, binary(BinOp::Shr, 1i64, tid.i64() - 5i64));
    let mut o = HostBuffer::zeros(Scalar::I64, 32);
    let e = launch(&k.finish().unwrap(), 1, &mut [Arg::Buf(&mut o)]).unwrap_err();
    assert!(matches!(e, InterpError::ShiftOverflow { amount: -5, .. }), "{e}");
    assert_eq!(loc(&e).thread, 0);
}

#[test]
fn error_bad_args() {
    let mut k = KernelBuilder::new("args", 64);
    let x = k.buffer("x", Scalar::F32, Access::ReadWrite);
    let n = k.scalar_param("n", Scalar::I32);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.i32().lt(n), |k| k.store(x, tid, 1.0f32));
    let kernel = k.finish().unwrap();
    let param_of = |e: InterpError| match e {
        InterpError::BadArgs { param, kernel, .. } => {
            assert_eq!(kernel, "args");
            param
        }
        other => panic!("unexpected {other}"),
    };
    let d = LaunchDims::linear(1, 64);
    let mut xf = HostBuffer::zeros(Scalar::F32, 64);
    let mut xi = HostBuffer::zeros(Scalar::I32, 64);
    // Missing argument.
    assert_eq!(
        param_of(run(&kernel, d, &mut [Arg::Buf(&mut xf)]).unwrap_err()),
        "n"
    );
    // Too many.
    assert_eq!(
        param_of(
            run(
                &kernel,
                d,
                &mut [Arg::Buf(&mut xf), Arg::scalar(1i32), Arg::scalar(1i32)]
            )
            .unwrap_err()
        ),
        "#2"
    );
    // Wrong element type.
    let e = run(&kernel, d, &mut [Arg::Buf(&mut xi), Arg::scalar(1i32)]).unwrap_err();
    assert!(
        e.to_string().contains("i32") && e.to_string().contains("f32"),
        "{e}"
    );
    assert_eq!(param_of(e), "x");
    // Wrong scalar type.
    assert_eq!(
        param_of(run(&kernel, d, &mut [Arg::Buf(&mut xf), Arg::scalar(1u32)]).unwrap_err()),
        "n"
    );
    // Scalar for buffer and buffer for scalar.
    assert_eq!(
        param_of(run(&kernel, d, &mut [Arg::scalar(1i32), Arg::scalar(1i32)]).unwrap_err()),
        "x"
    );
    let mut xf2 = HostBuffer::zeros(Scalar::F32, 64);
    assert_eq!(
        param_of(run(&kernel, d, &mut [Arg::Buf(&mut xf), Arg::Buf(&mut xf2)]).unwrap_err()),
        "n"
    );
    // Block size and grid.
    let mut ok_args = [Arg::Buf(&mut xf), Arg::scalar(64i32)];
    assert_eq!(
        param_of(run(&kernel, LaunchDims::linear(1, 128), &mut ok_args).unwrap_err()),
        "block"
    );
    assert_eq!(
        param_of(run(&kernel, LaunchDims::new([1, 0, 1], 64), &mut ok_args).unwrap_err()),
        "grid"
    );
    assert_eq!(
        param_of(run(&kernel, LaunchDims::new([1, 1, 70000], 64), &mut ok_args).unwrap_err()),
        "grid"
    );
    check_args(&kernel, d, &ok_args).unwrap();
    run(&kernel, d, &mut ok_args).unwrap();
}

#[test]
fn errors_are_small() {
    // Callers put `InterpError` in their own `Result`s; keep it well under clippy's
    // `result_large_err` threshold.
    assert!(
        std::mem::size_of::<InterpError>() <= 80,
        "{}",
        std::mem::size_of::<InterpError>()
    );
}

#[test]
fn error_invalid_kernel() {
    let mut k = KernelBuilder::new("bad", 32);
    let x = k.buffer("x", Scalar::F32, Access::Write);
    k.store(x, 0u32, 1.0f32);
    let mut kernel = k.finish().unwrap();
    kernel.block_threads = 33;
    let mut b = HostBuffer::zeros(Scalar::F32, 1);
    let e = run(&kernel, LaunchDims::linear(1, 33), &mut [Arg::Buf(&mut b)]).unwrap_err();
    assert!(matches!(e, InterpError::Invalid(_)), "{e}");
    assert!(e.location().is_none());
}

#[test]
fn error_step_budget() {
    let mut k = KernelBuilder::new("spin", 32);
    let x = k.let_typed("x", Scalar::U32, 0);
    k.while_(x.lt(10u32), |k| k.assign(x, x * 1u32));
    let kernel = k.finish().unwrap();
    let opts = InterpOptions {
        max_steps: 100_000,
        ..Default::default()
    };
    let e = run_with(&kernel, LaunchDims::linear(1, 32), &mut [], &opts).unwrap_err();
    assert!(
        matches!(
            e,
            InterpError::Timeout {
                max_steps: 100_000,
                ..
            }
        ),
        "{e}"
    );
    assert!(loc(&e).path.starts_with("body[1]"), "{e}");
    // An empty kernel over a large grid also stops.
    let k = KernelBuilder::new("empty", 32);
    let kernel = k.finish().unwrap();
    let e = run_with(&kernel, LaunchDims::new([1000, 1000, 1], 32), &mut [], &opts).unwrap_err();
    assert!(matches!(e, InterpError::Timeout { .. }), "{e}");
}

#[test]
fn error_non_positive_runtime_step() {
    let mut k = KernelBuilder::new("step", 32);
    let s = k.scalar_param("s", Scalar::I32);
    let acc = k.let_typed("acc", Scalar::I32, 0);
    k.for_("i", 0i32, 10i32, s, |k, i| k.assign(acc, acc + i));
    let kernel = k.finish().unwrap();
    for bad in [0, -2] {
        let e = launch(&kernel, 1, &mut [Arg::scalar(bad)]).unwrap_err();
        assert!(
            matches!(&e, InterpError::BadLoopStep { var, step, .. } if var == "i" && *step == bad as i128),
            "{e}"
        );
        assert_eq!(loc(&e).path, "body[1]");
    }
    launch(&kernel, 1, &mut [Arg::scalar(3i32)]).unwrap();
}

#[test]
fn error_messages_name_everything() {
    let mut k = KernelBuilder::new("msg", 32);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    k.for_("i", 0u32, 2u32, 1u32, |k, i| {
        k.if_(tid.eq_(7u32).and(k.block_idx(Axis::Y).eq_(1u32)), |k| {
            k.store(out, i + 100u32, 0.0f32);
        });
    });
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::F32, 4);
    let e = run(&kernel, LaunchDims::new([1, 2, 1], 32), &mut [Arg::Buf(&mut o)]).unwrap_err();
    let msg = e.to_string();
    for part in [
        "kernel `msg`",
        "block (0, 1, 0)",
        "thread 7",
        "body[1].body[0].then[0]",
        "`out`",
        "index 100",
        "length 4",
    ] {
        assert!(msg.contains(part), "{part:?} missing from {msg}");
    }
}

// ----- speed -----------------------------------------------------------------------------

/// An attention-like inner loop: every thread streams over `tokens` keys, doing a dot product,
/// an online max and an exponential sum, with a block reduction at the end.
fn speed_kernel(bt: u32, d: u32) -> Kernel {
    let mut k = KernelBuilder::new("speed", bt);
    let q = k.buffer("q", Scalar::F32, Access::Read);
    let keys = k.buffer("keys", Scalar::F16, Access::Read);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let n = k.scalar_param("n", Scalar::I32);
    let red = k.shared("red", Scalar::F32, bt / 32 * 2);
    let tid = k.let_("tid", k.thread_idx());
    let qs: Vec<Var> = (0..d).map(|c| k.let_("q", q.at(c))).collect();
    let m = k.let_typed("m", Scalar::F32, f32c(f64::NEG_INFINITY));
    let s = k.let_typed("s", Scalar::F32, 0.0);
    k.for_("t", tid.i32(), n.clone(), bt as i32, |k, t| {
        let row = k.let_("row", t.i64() * d as i64);
        let mut dot = f32c(0.0);
        for c in 0..d / 8 {
            let v = k.load_vec("k", keys, row + (c * 8) as i64, 8);
            for (j, x) in v.iter().enumerate() {
                dot = fma(qs[(c * 8) as usize + j], x.f32(), dot);
            }
        }
        let z = k.let_("z", dot);
        let m2 = k.let_("m2", m.max(z));
        k.assign(s, s * (m - m2).exp2() + (z - m2).exp2());
        k.assign(m, m2);
    });
    let mx = k.block_allreduce(Reduce::Max, m, red);
    let sum = k.block_allreduce(Reduce::Sum, s * (m - mx).exp2(), red);
    k.if_(tid.eq_(0u32), |k| {
        k.store(out, k.block_idx(Axis::X) * 2u32, mx);
        k.store(out, k.block_idx(Axis::X) * 2u32 + 1u32, sum);
    });
    k.finish().unwrap()
}

fn measure_speed(blocks: u32, tokens: i32) -> (RunStats, f64) {
    let (bt, d) = (128u32, 64u32);
    let kernel = speed_kernel(bt, d);
    let mut rng = Rng(99);
    let mut q = HostBuffer::F32(
        (0..d)
            .map(|_| (rng.below(1000) as f32 - 500.0) / 5000.0)
            .collect(),
    );
    let kv: Vec<f32> = (0..tokens as usize * d as usize)
        .map(|_| (rng.below(1000) as f32 - 500.0) / 500.0)
        .collect();
    let mut keys = HostBuffer::from_f32_as(Scalar::F16, &kv);
    let mut out = HostBuffer::zeros(Scalar::F32, blocks as usize * 2);
    let t0 = std::time::Instant::now();
    let stats = launch(
        &kernel,
        blocks,
        &mut [
            Arg::Buf(&mut q),
            Arg::Buf(&mut keys),
            Arg::Buf(&mut out),
            Arg::scalar(tokens),
        ],
    )
    .unwrap();
    let secs = t0.elapsed().as_secs_f64();
    // Check against a plain Rust evaluation of block 0 (all blocks compute the same).
    let (o, qv) = (out.as_f32().unwrap(), q.as_f32().unwrap());
    let kh = keys.to_f64_vec();
    let mut zs = Vec::new();
    for t in 0..tokens as usize {
        let dot: f64 = (0..d as usize)
            .map(|c| qv[c] as f64 * kh[t * d as usize + c])
            .sum();
        zs.push(dot);
    }
    let mref = zs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let sref: f64 = zs.iter().map(|z| (z - mref).exp2()).sum();
    assert!((o[0] as f64 - mref).abs() < 1e-4, "{} vs {mref}", o[0]);
    assert!((o[1] as f64 - sref).abs() < 1e-3 * sref, "{} vs {sref}", o[1]);
    (stats, secs)
}

#[test]
fn speed_smoke() {
    let (stats, secs) = measure_speed(4, 1024);
    eprintln!(
        "speed_smoke: {} lane-ops, {} thread-statements in {:.3}s: {:.1} M lane-ops/s",
        stats.lane_ops,
        stats.statements,
        secs,
        stats.lane_ops as f64 / secs / 1e6
    );
}

/// `cargo test -p entkv-dsl --test interp speed_report -- --ignored --nocapture`
#[test]
#[ignore]
fn speed_report() {
    let (stats, secs) = measure_speed(200, 4096);
    eprintln!(
        "speed_report: {} lane-ops, {} thread-statements in {:.3}s: {:.1} M lane-ops/s, {:.1} M thread-statements/s",
        stats.lane_ops,
        stats.statements,
        secs,
        stats.lane_ops as f64 / secs / 1e6,
        stats.statements as f64 / secs / 1e6
    );
}

#[test]
fn fma_rounds_once() {
    // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: the product alone rounds the 2^-24 away.
    let a = 1.0 + 2f64.powi(-12);
    let c = -(1.0 + 2f64.powi(-11));
    let mut k = KernelBuilder::new("fma1", 32);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let x = k.let_("x", f32c(a));
    k.store(out, 0u32, fma(x, x, f32c(c)));
    k.store(out, 1u32, x * x + f32c(c));
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::F32, 2);
    launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap();
    assert_eq!(o.as_f32().unwrap(), &[2f32.powi(-24), 0.0]);
}

#[test]
fn accesses_within_one_warp_are_ordered() {
    // Documented limitation: lanes of one warp exchanging data through shared memory without
    // a barrier is not reported (lockstep execution makes it deterministic here).
    let mut k = KernelBuilder::new("intra_warp", 64);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let sm = k.shared("sm", Scalar::U32, 64);
    let tid = k.let_("tid", k.thread_idx());
    k.store(sm, tid, tid * 2u32);
    let lane = k.let_("lane", k.lane());
    // Each lane reads its neighbour in the same warp.
    k.store(out, tid, sm.at(tid - lane + ((lane + 1u32) & 31u32)));
    let kernel = k.finish().unwrap();
    let mut o = HostBuffer::zeros(Scalar::U32, 64);
    launch(&kernel, 1, &mut [Arg::Buf(&mut o)]).unwrap();
    for t in 0..64u32 {
        assert_eq!(
            o.as_u32().unwrap()[t as usize],
            (t - t % 32 + (t % 32 + 1) % 32) * 2
        );
    }
}

#[test]
fn error_misaligned_shared_vector_and_unsigned_zero_step() {
    let mut k = KernelBuilder::new("sh_vec", 32);
    let sm = k.shared("sm", Scalar::F16, 256);
    let tid = k.let_("tid", k.thread_idx());
    k.store_vec(
        sm,
        tid * 8u32 + 4u32,
        (0..8).map(|_| lit(Scalar::F16, 1.0)).collect(),
    );
    let e = launch(&k.finish().unwrap(), 1, &mut []).unwrap_err();
    assert!(
        matches!(&e, InterpError::Misaligned { index: 4, vec_len: 8, buffer, .. } if buffer.contains("sm")),
        "{e}"
    );

    let mut k = KernelBuilder::new("ustep", 32);
    let s = k.scalar_param("s", Scalar::U64);
    let tid = k.let_("tid", k.thread_idx());
    k.if_(tid.eq_(3u32), |k| {
        k.for_("i", 0u64, 4u64, s, |_, _| {});
    });
    let kernel = k.finish().unwrap();
    let e = launch(&kernel, 1, &mut [Arg::scalar(0u64)]).unwrap_err();
    assert!(matches!(e, InterpError::BadLoopStep { step: 0, .. }), "{e}");
    assert_eq!(loc(&e).thread, 3);
    assert_eq!(loc(&e).path, "body[1].then[0]");
}

#[test]
fn timeout_names_the_spinning_threads() {
    let mut k = KernelBuilder::new("spin2", 64);
    let tid = k.let_("tid", k.thread_idx());
    let x = k.let_typed("x", Scalar::U32, 0);
    k.if_(tid.ge(40u32), |k| {
        k.while_(x.lt(10u32), |k| k.assign(x, x + (tid & 0u32)));
    });
    let kernel = k.finish().unwrap();
    let opts = InterpOptions {
        max_steps: 50_000,
        ..Default::default()
    };
    let e = run_with(&kernel, LaunchDims::linear(1, 64), &mut [], &opts).unwrap_err();
    assert!(matches!(e, InterpError::Timeout { .. }), "{e}");
    assert_eq!(loc(&e).thread, 40);
    assert!(loc(&e).path.starts_with("body[2].then[0]"), "{e}");
    assert!(e.to_string().contains("50000"), "{e}");
}

// ----- async copies ------------------------------------------------------------------------

/// Each thread copies two 16-byte runs of `a` into shared memory in two groups, the runs of
/// the thread `shift` lanes on (a double buffer, as a pipelined pass uses one); after the waits
/// and a barrier every thread reads back its neighbour's data.
fn copy_async_kernel(wait_first: u32, read_before_wait: bool, barrier: bool, wait_last: bool) -> Kernel {
    let mut k = KernelBuilder::new("copy_async", 64);
    let a = k.buffer("a", Scalar::F16, Access::Read);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let stage = k.shared("stage", Scalar::F16, 2 * 64 * 8);
    let tid = k.let_("tid", k.thread_idx());
    let g = k.let_("g", k.global_thread_id().i64());
    k.copy_async(stage, tid * 8u32, a, g * 16i64, 8);
    k.copy_async_commit();
    k.copy_async(stage, tid * 8u32 + 512u32, a, g * 16i64 + 8i64, 8);
    k.copy_async_commit();
    if read_before_wait {
        let _ = k.let_("early", stage.at(tid * 8u32 + 512u32));
    }
    k.copy_async_wait(wait_first);
    let first = k.load_vec("first", stage, tid * 8u32, 8);
    if wait_last {
        k.copy_async_wait(0);
    }
    if barrier {
        k.barrier();
    }
    // The other half of the block's second runs: another warp's copies.
    let other = k.let_("other", (tid + 32u32) % 64u32);
    let second = k.load_vec("second", stage, other * 8u32 + 512u32, 8);
    let sum = first
        .iter()
        .chain(&second)
        .fold(f32c(0.0), |acc, v| acc + v.f32());
    k.store(out, g, sum);
    k.finish().unwrap()
}

fn copy_async_input(blocks: usize) -> Vec<f16> {
    (0..blocks * 64 * 16)
        .map(|i| f16::from_f32((i % 97) as f32 * 0.25))
        .collect()
}

#[test]
fn async_copies_land_at_their_wait() {
    let kernel = copy_async_kernel(1, false, true, true);
    let a = copy_async_input(2);
    let mut ha = HostBuffer::F16(a.clone());
    let mut o = HostBuffer::filled_f64(Scalar::F32, 128, f64::NAN);
    let stats = launch(&kernel, 2, &mut [Arg::Buf(&mut ha), Arg::Buf(&mut o)]).unwrap();
    let HostBuffer::F32(got) = o else { unreachable!() };
    for b in 0..2 {
        for t in 0..64 {
            let g = b * 64 + t;
            let other = b * 64 + (t + 32) % 64;
            let want: f32 = a[g * 16..g * 16 + 8]
                .iter()
                .chain(&a[other * 16 + 8..other * 16 + 16])
                .map(|x| x.to_f32())
                .sum();
            assert_eq!(got[g], want, "thread {t} of block {b}");
        }
    }
    assert_eq!(
        stats.global_bytes_loaded,
        2 * 64 * 32,
        "each copy reads its bytes once"
    );
}

#[test]
fn error_async_copy_read_in_flight() {
    // Read before any wait.
    let kernel = copy_async_kernel(0, true, true, true);
    let mut ha = HostBuffer::F16(copy_async_input(1));
    let mut o = HostBuffer::zeros(Scalar::F32, 64);
    let e = launch(&kernel, 1, &mut [Arg::Buf(&mut ha), Arg::Buf(&mut o)]).unwrap_err();
    match &e {
        InterpError::AsyncCopyInFlight { array, index, .. } => {
            assert_eq!(array, "stage");
            assert_eq!(*index, 512);
        }
        other => panic!("unexpected {other}"),
    }
    // `wait_group 1` retires only the older group: the second runs are still in flight.
    let kernel = copy_async_kernel(1, false, true, false);
    let e = launch(&kernel, 1, &mut [Arg::Buf(&mut ha), Arg::Buf(&mut o)]).unwrap_err();
    assert!(matches!(e, InterpError::AsyncCopyInFlight { .. }), "{e}");
}

#[test]
fn error_async_copy_read_by_another_warp_without_a_barrier() {
    let kernel = copy_async_kernel(0, false, false, true);
    let mut ha = HostBuffer::F16(copy_async_input(1));
    let mut o = HostBuffer::zeros(Scalar::F32, 64);
    let e = launch(&kernel, 1, &mut [Arg::Buf(&mut ha), Arg::Buf(&mut o)]).unwrap_err();
    assert!(matches!(e, InterpError::SharedRace { .. }), "{e}");
}

#[test]
fn error_async_copy_never_waited() {
    let mut k = KernelBuilder::new("copy_async_no_wait", 32);
    let a = k.buffer("a", Scalar::F32, Access::Read);
    let stage = k.shared("stage", Scalar::F32, 32 * 4);
    let tid = k.let_("tid", k.thread_idx());
    k.copy_async(stage, tid * 4u32, a, tid.i64() * 4i64, 4);
    k.copy_async_commit();
    let kernel = k.finish().unwrap();
    let mut ha = HostBuffer::F32(vec![1.0; 128]);
    let e = launch(&kernel, 1, &mut [Arg::Buf(&mut ha)]).unwrap_err();
    match &e {
        InterpError::AsyncCopyNotWaited { copies, loc } => {
            assert_eq!(*copies, 1);
            assert_eq!(loc.thread, 0);
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn async_copies_are_validated() {
    let build = |access: Access, len: u32| {
        let mut k = KernelBuilder::new("bad_copy", 32);
        let a = k.buffer("a", Scalar::F16, access);
        let stage = k.shared("stage", Scalar::F16, 32 * 8);
        let tid = k.let_("tid", k.thread_idx());
        k.copy_async(stage, tid * 8u32, a, tid.i64() * 8i64, len);
        k.copy_async_commit();
        k.copy_async_wait(0);
        k.finish()
    };
    assert!(build(Access::Read, 8).is_ok());
    let e = build(Access::ReadWrite, 8).unwrap_err();
    assert!(e.to_string().contains("not a read-only buffer"), "{e}");
    let e = build(Access::Read, 3).unwrap_err();
    assert!(e.to_string().contains("4, 8 or 16"), "{e}");
}
