//! Every arithmetic, compare, select and math operation on every type it is defined for.
mod common;
use common::*;
use entkv_dsl::*;

/// All integer operations of `ty` on two loaded operands; results to `out`, compares to `flags`.
fn int_kernel(name: &str, ty: Scalar) -> Kernel {
    let mut k = KernelBuilder::new(name, 128);
    let a = k.buffer("a", ty, Access::Read);
    let b = k.buffer("b", ty, Access::Read);
    let out = k.buffer("out", ty, Access::Write);
    let flags = k.buffer("flags", Scalar::U32, Access::Write);
    let i = k.let_("i", k.global_thread_id().i64());
    let x = k.let_("x", a.at(i));
    let y = k.let_("y", b.at(i));
    let mut r: Vec<Expr> = vec![
        x + y,
        x - y,
        x * y,
        x / y,
        x % y,
        x.min(y),
        x.max(y),
        x & y,
        x | y,
        x ^ y,
        x << y,
        x >> y,
        x << 3,
        x >> 5,
        x.not(),
        select(x.lt(y), x, y),
    ];
    if ty.is_signed_int() {
        r.push(-x);
        r.push(x.abs());
    }
    let n = r.len() as i64;
    for (j, e) in r.into_iter().enumerate() {
        k.store(out, i * n + j as i64, e);
    }
    let c = [x.eq_(y), x.ne_(y), x.lt(y), x.le(y), x.gt(y), x.ge(y)];
    for (j, e) in c.into_iter().enumerate() {
        k.store(flags, i * 6 + j as i64, e.cast(Scalar::U32));
    }
    k.finish().unwrap()
}

#[test]
fn integer_ops_on_every_int_type() {
    let ks: Vec<Kernel> = [Scalar::I32, Scalar::U32, Scalar::I64, Scalar::U64]
        .into_iter()
        .map(|t| int_kernel(&format!("int_ops_{}", t.name()), t))
        .collect();
    let refs: Vec<&Kernel> = ks.iter().collect();
    let c = check(&refs);
    let (i32k, u32k, i64k, u64k) = (
        c.entry("int_ops_i32"),
        c.entry("int_ops_u32"),
        c.entry("int_ops_i64"),
        c.entry("int_ops_u64"),
    );
    for (e, s, u) in [(i32k, "s32", "b32"), (i64k, "s64", "b64")] {
        // (`rem` is computed from the quotient, `x - (x / y) * y`, when both are used.)
        for op in ["div", "min", "max", "shr", "neg", "setp.lt", "setp.le", "setp.gt"] {
            assert_insn(e, &format!("{op}.{s}"));
        }
        for op in ["shl", "and", "or", "xor", "not"] {
            assert_insn(e, &format!("{op}.{u}"));
        }
    }
    for (e, s) in [(u32k, "u32"), (u64k, "u64")] {
        for op in ["div", "min", "max", "shr", "setp.lt", "setp.le", "setp.gt"] {
            assert_insn(e, &format!("{op}.{s}"));
        }
        assert_no_insn(e, "neg");
    }
    // Every load comes from a read-only buffer.
    for e in [i32k, u32k, i64k, u64k] {
        assert_insn(e, "ld.global.nc");
        assert_no_insn(e, "ld.global.u");
        assert_no_insn(e, "ld.global.b");
    }
}

#[test]
fn float_ops_f32() {
    let mut k = KernelBuilder::new("f32_ops", 256);
    let a = k.buffer("a", Scalar::F32, Access::Read);
    let b = k.buffer("b", Scalar::F32, Access::Read);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let flags = k.buffer("flags", Scalar::U32, Access::Write);
    let i = k.let_("i", k.global_thread_id());
    let x = k.let_("x", a.at(i));
    let y = k.let_("y", b.at(i));
    let z = k.let_("z", a.at(i + 1u32));
    let r: Vec<Expr> = vec![
        x + y,
        x - y,
        x * y,
        x / y,
        x.min(y),
        x.max(y),
        -x,
        x.abs(),
        x.sqrt(),
        x.rcp(),
        x.exp2(),
        x.log2(),
        x.e().floor(),
        x.e().ceil(),
        fma(x, y, z),
        select(x.lt(y), x, y),
        x * 2.5 + 1.0,
        1.0 - x,
    ];
    let n = r.len() as u32;
    for (j, e) in r.into_iter().enumerate() {
        k.store(out, i * n + j as u32, e);
    }
    let c = [x.eq_(y), x.ne_(y), x.lt(y), x.le(y), x.gt(y), x.ge(y)];
    for (j, e) in c.into_iter().enumerate() {
        k.store(flags, i * 6u32 + j as u32, e.cast(Scalar::U32));
    }
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let p = c.ptx();
    for insn in [
        "add.rn.f32",
        "sub.rn.f32",
        "mul.rn.f32",
        "div.rn.f32",
        "min.f32",
        "max.f32",
        "neg.f32",
        "abs.f32",
        "sqrt.rn.f32",
        "ex2.approx.f32",
        "lg2.approx.f32",
        "cvt.rmi.f32.f32",
        "cvt.rpi.f32.f32",
        "fma.rn.f32",
        // Ordered compares, except `Ne`, which is unordered.
        "setp.eq.f32",
        "setp.neu.f32",
        "setp.lt.f32",
        "setp.le.f32",
        "setp.gt.f32",
        "setp.ge.f32",
    ] {
        assert_insn(p, insn);
    }
    // 1/x is correctly rounded (either `rcp.rn` or `div.rn`), never approximate.
    assert_no_insn(p, "rcp.approx");
    assert_no_insn(p, "div.approx");
    assert_no_insn(p, "div.full");
    assert!(!p.contains(".ftz"), "no flush-to-zero:\n{p}");
    // `x * 2.5 + 1.0` may contract into an fma only if LLVM is told so; it is not.
    assert!(c.ir().contains("@llvm.fma.f32"));
}

#[test]
fn half_and_bfloat_ops() {
    let mut k = KernelBuilder::new("half_ops", 64);
    let a = k.buffer("a", Scalar::F16, Access::Read);
    let b = k.buffer("b", Scalar::BF16, Access::Read);
    let oh = k.buffer("oh", Scalar::F16, Access::Write);
    let ob = k.buffer("ob", Scalar::BF16, Access::Write);
    let of = k.buffer("of", Scalar::F32, Access::Write);
    let i = k.let_("i", k.global_thread_id());
    let h = k.let_("h", a.at(i));
    let g = k.let_("g", b.at(i));
    let hs: Vec<Expr> = vec![
        -h,
        h.abs(),
        g.cast(Scalar::F16),
        g.e().bitcast(Scalar::F16),
        (h.f32() * g.f32()).cast(Scalar::F16),
        select(h.f32().lt(0.5), h, h.abs()),
        lit(Scalar::F16, 0.1),
    ];
    let n = hs.len() as u32;
    for (j, e) in hs.into_iter().enumerate() {
        k.store(oh, i * n + j as u32, e);
    }
    let gs: Vec<Expr> = vec![
        -g,
        g.abs(),
        h.cast(Scalar::BF16),
        h.e().bitcast(Scalar::BF16),
        (h.f32() + g.f32()).cast(Scalar::BF16),
        lit(Scalar::BF16, 3.3),
    ];
    let n = gs.len() as u32;
    for (j, e) in gs.into_iter().enumerate() {
        k.store(ob, i * n + j as u32, e);
    }
    k.store(of, i, h.f32() - g.f32());
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let p = c.ptx();
    for insn in ["cvt.f32.f16", "cvt.f32.bf16", "cvt.rn.f16.f32", "cvt.rn.bf16.f32"] {
        assert_insn(p, insn);
    }
    // 2-byte loads and stores.
    assert_insn(p, "ld.global.nc.u16");
    assert_insn(p, "st.global.b16");
}

#[test]
fn bool_ops_and_bool_param() {
    let mut k = KernelBuilder::new("bool_ops", 32);
    let a = k.buffer("a", Scalar::U32, Access::Read);
    let b = k.buffer("b", Scalar::U32, Access::Read);
    let f = k.scalar_param("f", Scalar::Bool);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let of = k.buffer("of", Scalar::F32, Access::Write);
    let ol = k.buffer("ol", Scalar::I64, Access::Write);
    let i = k.let_("i", k.thread_idx());
    let p = k.let_("p", a.at(i).gt(0u32));
    let q = k.let_("q", b.at(i).lt(10u32));
    let r: Vec<Expr> = vec![
        p & q,
        p | q,
        p ^ q,
        p.not(),
        p.eq_(q),
        p.ne_(q),
        p.lt(q),
        p.ge(q),
        select(p, q, f.clone()),
        f.clone() ^ p,
        boolc(true) & q,
    ];
    let n = r.len() as u32;
    for (j, e) in r.into_iter().enumerate() {
        k.store(out, i * n + j as u32, e.cast(Scalar::U32));
    }
    k.store(of, i, p.f32());
    k.store(ol, i, q.i64());
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    // `Bool` parameters travel as one byte.
    assert!(c.ptx().contains(".param .u8 bool_ops_param_2"), "{}", c.ptx());
    assert!(c.ir_unoptimized().contains("i8 %f"));
}

#[test]
fn scalar_params_of_every_type() {
    let mut k = KernelBuilder::new("params", 64);
    let tys = [
        Scalar::I32,
        Scalar::U32,
        Scalar::I64,
        Scalar::U64,
        Scalar::F16,
        Scalar::BF16,
        Scalar::F32,
    ];
    let ps: Vec<Expr> = tys
        .iter()
        .map(|t| k.scalar_param(&format!("p_{}", t.name()), *t))
        .collect();
    let flag = k.scalar_param("flag", Scalar::Bool);
    let out = k.buffer("out", Scalar::F32, Access::Write);
    let ol = k.buffer("ol", Scalar::I64, Access::Write);
    let i = k.let_("i", k.thread_idx());
    let mut acc = select(flag, f32c(1.0), f32c(0.0));
    for p in &ps {
        acc = acc + p.clone().f32();
    }
    k.store(out, i, acc);
    k.store(
        ol,
        i,
        ps[0].clone().i64() + ps[2].clone() + ps[3].clone().bitcast(Scalar::I64),
    );
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let e = c.entry("params");
    // LLVM 19 passes `half`/`bfloat` as 2-byte aligned byte arrays.
    for decl in [
        ".param .u32",
        ".param .u64",
        ".param .align 2 .b8",
        ".param .f32",
        ".param .u8",
    ] {
        assert!(e.contains(decl), "{decl}:\n{e}");
    }
}

#[test]
fn prmt_lowers_to_ptx_prmt_with_its_selector() {
    let mut k = KernelBuilder::new("prmt_ops", 128);
    let a = k.buffer("a", Scalar::U32, Access::Read);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let i = k.let_("i", k.global_thread_id().i64());
    let x = k.let_("x", a.at(i));
    let y = k.let_("y", a.at(i + 1i64));
    k.store(out, i, prmt(x, y, 0x5140));
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    assert_insn(c.entry("prmt_ops"), "prmt.b32");
    // The selector 0x5140 (as LLVM writes it, in decimal).
    assert!(c.entry("prmt_ops").contains("20800"), "{}", c.entry("prmt_ops"));
}

#[test]
fn popc_lowers_to_ptx_popc() {
    let mut k = KernelBuilder::new("popc_ops", 128);
    let a = k.buffer("a", Scalar::U32, Access::Read);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let i = k.let_("i", k.global_thread_id().i64());
    k.store(out, i, a.at(i).popc());
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    assert_insn(c.entry("popc_ops"), "popc.b32");
}

#[test]
fn dp4a_lowers_to_ptx_dp4a_for_every_signedness() {
    let mut k = KernelBuilder::new("dp4a_ops", 128);
    let a = k.buffer("a", Scalar::U32, Access::Read);
    let b = k.buffer("b", Scalar::U32, Access::Read);
    let out = k.buffer("out", Scalar::I32, Access::Write);
    let i = k.let_("i", k.global_thread_id().i64());
    let x = k.let_("x", a.at(i));
    let y = k.let_("y", b.at(i));
    for (j, (sa, sb)) in [(false, false), (true, false), (false, true), (true, true)]
        .into_iter()
        .enumerate()
    {
        k.store(out, i * 4 + j as i64, dp4a(x, sa, y, sb, i.i32()));
    }
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let e = c.entry("dp4a_ops");
    for op in ["dp4a.u32.u32", "dp4a.s32.u32", "dp4a.u32.s32", "dp4a.s32.s32"] {
        assert_insn(e, op);
    }
}
