//! Vectorised lane operations on raw values (see [`super::values`] for the encoding).
//!
//! Each function takes the operand columns of the active lanes (compacted: element `j` is the
//! `j`-th active lane) and overwrites the first operand with the result, so the interpreter
//! needs no third buffer. Per-lane failures are reported as `(j, error)`.

use super::error::InterpError;
use super::values::{bf16_from_f64, f16_from_f64, f32_of, int_value, raw_f32, width_mask};
use crate::ir::{BinOp, CmpOp, Lit, Scalar, UnOp};
use half::{bf16, f16};

/// Per-lane failure: the lane's column index and the error (boxed: errors are rare).
pub(crate) type LaneResult = Result<(), (usize, Box<InterpError>)>;

fn lane_err(j: usize, e: InterpError) -> (usize, Box<InterpError>) {
    (j, Box::new(e))
}

fn unsupported(what: impl std::fmt::Display, ty: Scalar) -> InterpError {
    InterpError::internal(format!("{what} is not defined on {ty}"))
}

#[inline(always)]
fn map1(a: &mut [u64], f: impl Fn(u64) -> u64) {
    for x in a.iter_mut() {
        *x = f(*x);
    }
}

#[inline(always)]
fn map2(a: &mut [u64], b: &[u64], f: impl Fn(u64, u64) -> u64) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x = f(*x, y);
    }
}

/// The raw value of a literal of type `ty`.
pub(crate) fn lit_raw(l: &Lit, ty: Scalar) -> u64 {
    match *l {
        Lit::Bool(b) => cast_one(Scalar::Bool, ty, b as u64),
        Lit::Int(i) => match ty {
            Scalar::I32 => i as i32 as u32 as u64,
            Scalar::U32 => i as u32 as u64,
            Scalar::I64 | Scalar::U64 => i as u64,
            Scalar::Bool => (i != 0) as u64,
            Scalar::F32 => raw_f32(i as f32),
            Scalar::F16 => f16_from_f64(i as f64).to_bits() as u64,
            Scalar::BF16 => bf16_from_f64(i as f64).to_bits() as u64,
        },
        Lit::Float(f) => match ty {
            Scalar::F32 => raw_f32(f as f32),
            Scalar::F16 => f16_from_f64(f).to_bits() as u64,
            Scalar::BF16 => bf16_from_f64(f).to_bits() as u64,
            Scalar::I32 => f as i32 as u32 as u64,
            Scalar::U32 => f as u32 as u64,
            Scalar::I64 => f as i64 as u64,
            Scalar::U64 => f as u64,
            Scalar::Bool => (f != 0.0) as u64,
        },
    }
}

// ----- integers --------------------------------------------------------------------------

pub(crate) trait IntT: Copy + Ord {
    const SIGNED: bool;
    const BITS: u32;
    const MIN: Self;
    const NEG_ONE: Self;
    const ZERO: Self;
    fn from_raw(r: u64) -> Self;
    fn raw(self) -> u64;
    fn wadd(self, o: Self) -> Self;
    fn wsub(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    fn wdiv(self, o: Self) -> Self;
    fn wrem(self, o: Self) -> Self;
    fn wshl(self, s: u32) -> Self;
    fn wshr(self, s: u32) -> Self;
    fn wneg(self) -> Self;
    fn wabs(self) -> Self;
    fn to_i128(self) -> i128;
}

macro_rules! int_t {
    ($t:ty, $u:ty, $signed:expr) => {
        impl IntT for $t {
            const SIGNED: bool = $signed;
            const BITS: u32 = <$t>::BITS;
            const MIN: Self = <$t>::MIN;
            const NEG_ONE: Self = (0 as $t).wrapping_sub(1);
            const ZERO: Self = 0;
            #[inline(always)]
            fn from_raw(r: u64) -> Self {
                r as $u as $t
            }
            #[inline(always)]
            fn raw(self) -> u64 {
                self as $u as u64
            }
            #[inline(always)]
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn wsub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn wmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn wdiv(self, o: Self) -> Self {
                self.checked_div(o).unwrap_or(Self::ZERO)
            }
            #[inline(always)]
            fn wrem(self, o: Self) -> Self {
                self.checked_rem(o).unwrap_or(Self::ZERO)
            }
            #[inline(always)]
            fn wshl(self, s: u32) -> Self {
                self.wrapping_shl(s)
            }
            #[inline(always)]
            fn wshr(self, s: u32) -> Self {
                self.wrapping_shr(s)
            }
            #[inline(always)]
            fn wneg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn wabs(self) -> Self {
                if self < Self::ZERO {
                    self.wrapping_neg()
                } else {
                    self
                }
            }
            #[inline(always)]
            fn to_i128(self) -> i128 {
                self as i128
            }
        }
    };
}
int_t!(i32, u32, true);
int_t!(u32, u32, false);
int_t!(i64, u64, true);
int_t!(u64, u64, false);

fn int_binary<T: IntT>(op: BinOp, ty: Scalar, a: &mut [u64], b: &[u64]) -> LaneResult {
    let t = T::from_raw;
    match op {
        BinOp::Add => map2(a, b, |x, y| t(x).wadd(t(y)).raw()),
        BinOp::Sub => map2(a, b, |x, y| t(x).wsub(t(y)).raw()),
        BinOp::Mul => map2(a, b, |x, y| t(x).wmul(t(y)).raw()),
        BinOp::Div | BinOp::Rem => {
            for (j, (&x, &y)) in a.iter().zip(b).enumerate() {
                if t(y) == T::ZERO {
                    return Err(lane_err(
                        j,
                        InterpError::DivByZero {
                            loc: Box::default(),
                            ty,
                        },
                    ));
                }
                if T::SIGNED && t(y) == T::NEG_ONE && t(x) == T::MIN {
                    return Err(lane_err(
                        j,
                        InterpError::DivOverflow {
                            loc: Box::default(),
                            ty,
                        },
                    ));
                }
            }
            if op == BinOp::Div {
                map2(a, b, |x, y| t(x).wdiv(t(y)).raw());
            } else {
                map2(a, b, |x, y| t(x).wrem(t(y)).raw());
            }
        }
        BinOp::Min => map2(a, b, |x, y| t(x).min(t(y)).raw()),
        BinOp::Max => map2(a, b, |x, y| t(x).max(t(y)).raw()),
        // Canonical raw values stay canonical under bitwise and/or/xor.
        BinOp::And => map2(a, b, |x, y| x & y),
        BinOp::Or => map2(a, b, |x, y| x | y),
        BinOp::Xor => map2(a, b, |x, y| x ^ y),
        BinOp::Shl | BinOp::Shr => {
            for (j, &y) in b.iter().enumerate() {
                let s = t(y).to_i128();
                if s < 0 || s >= T::BITS as i128 {
                    return Err(lane_err(
                        j,
                        InterpError::ShiftOverflow {
                            loc: Box::default(),
                            ty,
                            amount: s,
                        },
                    ));
                }
            }
            if op == BinOp::Shl {
                map2(a, b, |x, y| t(x).wshl(y as u32).raw());
            } else {
                map2(a, b, |x, y| t(x).wshr(y as u32).raw());
            }
        }
    }
    Ok(())
}

// ----- floats ----------------------------------------------------------------------------

/// PTX `min.f32`: the non-NaN operand if exactly one is NaN; `-0 < +0`.
#[inline(always)]
pub(crate) fn fmin(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a < b {
        a
    } else if b < a {
        b
    } else if a.is_sign_negative() {
        a
    } else {
        b
    }
}

/// PTX `max.f32`: the non-NaN operand if exactly one is NaN; `+0 > -0`.
#[inline(always)]
pub(crate) fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a > b {
        a
    } else if b > a {
        b
    } else if a.is_sign_positive() {
        a
    } else {
        b
    }
}

fn f32_binary(op: BinOp, a: &mut [u64], b: &[u64]) -> Result<(), InterpError> {
    let f = f32_of;
    match op {
        BinOp::Add => map2(a, b, |x, y| raw_f32(f(x) + f(y))),
        BinOp::Sub => map2(a, b, |x, y| raw_f32(f(x) - f(y))),
        BinOp::Mul => map2(a, b, |x, y| raw_f32(f(x) * f(y))),
        BinOp::Div => map2(a, b, |x, y| raw_f32(f(x) / f(y))),
        BinOp::Min => map2(a, b, |x, y| raw_f32(fmin(f(x), f(y)))),
        BinOp::Max => map2(a, b, |x, y| raw_f32(fmax(f(x), f(y)))),
        _ => return Err(unsupported(format_args!("{op:?}"), Scalar::F32)),
    }
    Ok(())
}

/// `a = op(a, b)` on lanes of type `ty`.
pub(crate) fn binary(op: BinOp, ty: Scalar, a: &mut [u64], b: &[u64]) -> LaneResult {
    match ty {
        Scalar::I32 => int_binary::<i32>(op, ty, a, b),
        Scalar::U32 => int_binary::<u32>(op, ty, a, b),
        Scalar::I64 => int_binary::<i64>(op, ty, a, b),
        Scalar::U64 => int_binary::<u64>(op, ty, a, b),
        Scalar::F32 => f32_binary(op, a, b).map_err(|e| lane_err(0, e)),
        Scalar::Bool => match op {
            BinOp::And => {
                map2(a, b, |x, y| x & y);
                Ok(())
            }
            BinOp::Or => {
                map2(a, b, |x, y| x | y);
                Ok(())
            }
            BinOp::Xor => {
                map2(a, b, |x, y| x ^ y);
                Ok(())
            }
            _ => Err(lane_err(0, unsupported(format_args!("{op:?}"), ty))),
        },
        Scalar::F16 | Scalar::BF16 => Err(lane_err(0, unsupported(format_args!("{op:?}"), ty))),
    }
}

/// `a = op(a)` on lanes of type `ty`.
pub(crate) fn unary(op: UnOp, ty: Scalar, a: &mut [u64]) -> Result<(), InterpError> {
    match (op, ty) {
        (UnOp::Not, Scalar::Bool) => map1(a, |x| x ^ 1),
        (UnOp::Not, t) if t.is_int() => {
            let m = width_mask(t);
            map1(a, |x| !x & m)
        }
        (UnOp::Neg, Scalar::I32) => map1(a, |x| i32::from_raw(x).wneg().raw()),
        (UnOp::Neg, Scalar::I64) => map1(a, |x| i64::from_raw(x).wneg().raw()),
        (UnOp::Abs, Scalar::I32) => map1(a, |x| i32::from_raw(x).wabs().raw()),
        (UnOp::Abs, Scalar::I64) => map1(a, |x| i64::from_raw(x).wabs().raw()),
        // Storage floats: sign-bit operations, exact like `neg.f16` / `abs.f16`.
        (UnOp::Neg, Scalar::F16 | Scalar::BF16) => map1(a, |x| x ^ 0x8000),
        (UnOp::Abs, Scalar::F16 | Scalar::BF16) => map1(a, |x| x & 0x7fff),
        (UnOp::Neg, Scalar::F32) => map1(a, |x| raw_f32(-f32_of(x))),
        (UnOp::Abs, Scalar::F32) => map1(a, |x| raw_f32(f32_of(x).abs())),
        (UnOp::Sqrt, Scalar::F32) => map1(a, |x| raw_f32(f32_of(x).sqrt())),
        (UnOp::Rcp, Scalar::F32) => map1(a, |x| raw_f32(1.0 / f32_of(x))),
        (UnOp::Exp2, Scalar::F32) => map1(a, |x| raw_f32((f32_of(x) as f64).exp2() as f32)),
        (UnOp::Log2, Scalar::F32) => map1(a, |x| raw_f32((f32_of(x) as f64).log2() as f32)),
        (UnOp::Floor, Scalar::F32) => map1(a, |x| raw_f32(f32_of(x).floor())),
        (UnOp::Ceil, Scalar::F32) => map1(a, |x| raw_f32(f32_of(x).ceil())),
        (UnOp::Popc, Scalar::U32) => map1(a, |x| (x as u32).count_ones() as u64),
        _ => return Err(unsupported(format_args!("{op:?}"), ty)),
    }
    Ok(())
}

#[inline(always)]
fn cmp_ord<T: PartialOrd>(op: CmpOp, x: T, y: T) -> bool {
    match op {
        CmpOp::Eq => x == y,
        CmpOp::Ne => x != y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
    }
}

fn cmp_typed<T: PartialOrd>(op: CmpOp, a: &mut [u64], b: &[u64], t: impl Fn(u64) -> T) {
    // One loop per operator so the comparison is hoisted out of the lane loop.
    match op {
        CmpOp::Eq => map2(a, b, |x, y| (t(x) == t(y)) as u64),
        // Rust's `!=` on floats is `!(==)`, true when either side is NaN.
        CmpOp::Ne => map2(a, b, |x, y| (t(x) != t(y)) as u64),
        CmpOp::Lt => map2(a, b, |x, y| (t(x) < t(y)) as u64),
        CmpOp::Le => map2(a, b, |x, y| (t(x) <= t(y)) as u64),
        CmpOp::Gt => map2(a, b, |x, y| (t(x) > t(y)) as u64),
        CmpOp::Ge => map2(a, b, |x, y| (t(x) >= t(y)) as u64),
    }
}

/// `a = (a op b)` as Bool lanes; operands of type `ty`.
pub(crate) fn compare(op: CmpOp, ty: Scalar, a: &mut [u64], b: &[u64]) {
    match ty {
        Scalar::F32 => cmp_typed(op, a, b, f32_of),
        Scalar::F16 => cmp_typed(op, a, b, |x| f16::from_bits(x as u16).to_f32()),
        Scalar::BF16 => cmp_typed(op, a, b, |x| bf16::from_bits(x as u16).to_f32()),
        Scalar::I32 => cmp_typed(op, a, b, i32::from_raw),
        Scalar::I64 => cmp_typed(op, a, b, i64::from_raw),
        Scalar::U32 | Scalar::U64 | Scalar::Bool => cmp_typed(op, a, b, |x| x),
    }
}

/// Scalar comparison (used by loops).
#[inline]
pub(crate) fn compare_one(op: CmpOp, ty: Scalar, a: u64, b: u64) -> bool {
    match ty {
        Scalar::F32 => cmp_ord(op, f32_of(a), f32_of(b)),
        Scalar::F16 => cmp_ord(op, f16::from_bits(a as u16), f16::from_bits(b as u16)),
        Scalar::BF16 => cmp_ord(op, bf16::from_bits(a as u16), bf16::from_bits(b as u16)),
        Scalar::I32 => cmp_ord(op, i32::from_raw(a), i32::from_raw(b)),
        Scalar::I64 => cmp_ord(op, i64::from_raw(a), i64::from_raw(b)),
        Scalar::U32 | Scalar::U64 | Scalar::Bool => cmp_ord(op, a, b),
    }
}

/// `a = a * b + c` with one rounding (f32).
pub(crate) fn fma(a: &mut [u64], b: &[u64], c: &[u64]) {
    for ((x, &y), &z) in a.iter_mut().zip(b).zip(c) {
        *x = raw_f32(f32_of(*x).mul_add(f32_of(y), f32_of(z)));
    }
}

/// `c = c + Σ_k a[k]·b[k]` over the four bytes of `a` and `b` (signed per flag), i32 wrapping:
/// PTX `dp4a`.
pub(crate) fn dp4a(a_signed: bool, b_signed: bool, a: &[u64], b: &[u64], c: &mut [u64]) {
    let byte = |w: u64, k: u32, signed: bool| -> i32 {
        let v = ((w >> (8 * k)) & 0xff) as u8;
        if signed {
            v as i8 as i32
        } else {
            v as i32
        }
    };
    for ((z, &x), &y) in c.iter_mut().zip(a).zip(b) {
        let acc = (0..4).fold(i32::from_raw(*z), |s, k| {
            s.wrapping_add(byte(x, k, a_signed).wrapping_mul(byte(y, k, b_signed)))
        });
        *z = acc.raw();
    }
}

/// PTX `prmt.b32` in its default mode (the result lands in `b`): byte `i` of the result is byte
/// `n & 7` of `b:a` (`a` low) for selector nibble `n = (selector >> 4i) & 15`, or that byte's
/// sign replicated when `n & 8`.
pub(crate) fn prmt(a: &[u64], b: &mut [u64], selector: u16) {
    for (y, &x) in b.iter_mut().zip(a) {
        let bytes = ((*y & 0xffff_ffff) << 32) | (x & 0xffff_ffff);
        *y = (0..4).fold(0u64, |acc, i| {
            let n = (selector >> (4 * i)) & 15;
            let byte = (bytes >> (8 * (n & 7))) & 0xff;
            let byte = if n & 8 != 0 {
                if byte & 0x80 != 0 {
                    0xff
                } else {
                    0
                }
            } else {
                byte
            };
            acc | (byte << (8 * i))
        });
    }
}

/// `b = cond ? a : b` (the result lands in `b`).
pub(crate) fn select(cond: &[u64], a: &[u64], b: &mut [u64]) {
    for ((y, &x), &c) in b.iter_mut().zip(a).zip(cond) {
        if c != 0 {
            *y = x;
        }
    }
}

/// Convert one raw value between types (see [`crate::ir::ExprKind::Cast`]).
#[inline]
pub(crate) fn cast_one(from: Scalar, to: Scalar, r: u64) -> u64 {
    use Scalar::*;
    if from == to {
        return r;
    }
    match to {
        Bool => match from {
            F32 | F16 | BF16 => (float_of(from, r) != 0.0) as u64,
            _ => (r != 0) as u64,
        },
        F32 => raw_f32(match from {
            Bool => r as f32,
            I32 => i32::from_raw(r) as f32,
            U32 => r as u32 as f32,
            I64 => r as i64 as f32,
            U64 => r as f32,
            F16 | BF16 => float_of(from, r),
            F32 => f32_of(r),
        }),
        F16 => f16_from_f64(match from {
            F32 | F16 | BF16 => float_of(from, r) as f64,
            _ => int_value(r, from) as f64,
        })
        .to_bits() as u64,
        BF16 => bf16_from_f64(match from {
            F32 | F16 | BF16 => float_of(from, r) as f64,
            _ => int_value(r, from) as f64,
        })
        .to_bits() as u64,
        I32 | U32 | I64 | U64 => {
            if from.is_float() {
                let x = float_of(from, r);
                match to {
                    I32 => x as i32 as u32 as u64,
                    U32 => x as u32 as u64,
                    I64 => x as i64 as u64,
                    _ => x as u64,
                }
            } else {
                // Extend by the source's signedness, then wrap to the target width.
                (int_value(r, from) as u64) & width_mask(to)
            }
        }
    }
}

/// One warp's `D = A·B + C` of [`crate::ir::Stmt::Mma`]: `a`, `b`, `c` hold each operand
/// element's lanes (`a[i][first + lane]`, raw `ab` / f32 bits), the warp's 32 starting at
/// `first`; returns `d[i][lane]` (f32 bits). The products are exact in f64 and the sum of 16 of
/// them and C is rounded once to f32 (the hardware's own order and rounding differ by a few f32
/// ulps at most).
pub(crate) fn mma_warp(
    ab: Scalar,
    a: &[Vec<u64>],
    b: &[Vec<u64>],
    c: &[Vec<u64>],
    first: usize,
) -> Vec<Vec<u64>> {
    use crate::mma::{a_coord, b_coord, c_coord, K, M, N};
    let (m, n, kk) = (M as usize, N as usize, K as usize);
    let mut am = vec![0f64; m * kk];
    let mut bm = vec![0f64; kk * n];
    let mut cm = vec![0f64; m * n];
    for lane in 0..32u32 {
        let l = first + lane as usize;
        for (i, col) in a.iter().enumerate() {
            let (r, q) = a_coord(lane, i);
            am[r as usize * kk + q as usize] = float_of(ab, col[l]) as f64;
        }
        for (i, col) in b.iter().enumerate() {
            let (r, q) = b_coord(lane, i);
            bm[r as usize * n + q as usize] = float_of(ab, col[l]) as f64;
        }
        for (i, col) in c.iter().enumerate() {
            let (r, q) = c_coord(lane, i);
            cm[r as usize * n + q as usize] = f32_of(col[l]) as f64;
        }
    }
    mma_out(c.len(), |r, q| {
        let dot: f64 = (0..kk).map(|j| am[r * kk + j] * bm[j * n + q]).sum();
        ((cm[r * n + q] + dot) as f32).to_bits() as u64
    })
}

/// D's elements, `d[i][lane]` = `value(row, col)` at [`crate::mma::c_coord`]`(lane, i)`.
fn mma_out(elems: usize, value: impl Fn(usize, usize) -> u64) -> Vec<Vec<u64>> {
    (0..elems)
        .map(|i| {
            (0..32u32)
                .map(|lane| {
                    let (r, q) = crate::mma::c_coord(lane, i);
                    value(r as usize, q as usize)
                })
                .collect()
        })
        .collect()
}

#[inline(always)]
fn float_of(ty: Scalar, r: u64) -> f32 {
    match ty {
        Scalar::F16 => f16::from_bits(r as u16).to_f32(),
        Scalar::BF16 => bf16::from_bits(r as u16).to_f32(),
        _ => f32_of(r),
    }
}

/// Convert lanes in place.
pub(crate) fn cast(from: Scalar, to: Scalar, a: &mut [u64]) {
    use Scalar::*;
    // Hot conversions get their own loops; everything else goes through `cast_one`.
    match (from, to) {
        _ if from == to => {}
        (F16, F32) => map1(a, |x| raw_f32(f16::from_bits(x as u16).to_f32())),
        (BF16, F32) => map1(a, |x| raw_f32(bf16::from_bits(x as u16).to_f32())),
        (F32, F16) => map1(a, |x| f16::from_f32(f32_of(x)).to_bits() as u64),
        (F32, BF16) => map1(a, |x| bf16::from_f32(f32_of(x)).to_bits() as u64),
        (I32, F32) => map1(a, |x| raw_f32(i32::from_raw(x) as f32)),
        (U32, F32) => map1(a, |x| raw_f32(x as u32 as f32)),
        (I64, F32) => map1(a, |x| raw_f32(x as i64 as f32)),
        (F32, I32) => map1(a, |x| f32_of(x) as i32 as u32 as u64),
        (U32, I64) | (U32, U64) | (I64, U64) | (U64, I64) => {}
        (I32, I64) | (I32, U64) => map1(a, |x| x as u32 as i32 as i64 as u64),
        (I64 | U64, I32 | U32) | (I32, U32) | (U32, I32) => map1(a, |x| x & 0xffff_ffff),
        _ => map1(a, |x| cast_one(from, to, x)),
    }
}

/// Reinterpret lanes as `to` (same size; with the canonical encoding only a mask).
pub(crate) fn bitcast(to: Scalar, a: &mut [u64]) {
    let m = width_mask(to);
    if m != u64::MAX {
        map1(a, |x| x & m);
    }
}

/// One warp's integer `D = A·B + C` of [`crate::ir::Stmt::Mma`] (`m16n8k32`): `a` (4 words)
/// and `b` (2 words) hold each lane's packed bytes (`a[w][first + lane]`), `c` its i32
/// accumulators; returns `d[i][lane]` (i32 bits as u32). Exact; a sum past i32 wraps (callers
/// keep it in range: see [`crate::ir::Stmt::Mma`]).
pub(crate) fn mma_i8_warp(
    a_signed: bool,
    b_signed: bool,
    a: &[Vec<u64>],
    b: &[Vec<u64>],
    c: &[Vec<u64>],
    first: usize,
) -> Vec<Vec<u64>> {
    use crate::mma::{c_coord, int8, M, N};
    let (m, n, kk) = (M as usize, N as usize, int8::K as usize);
    let byte = |word: u64, j: usize, signed: bool| {
        let x = (word >> (8 * j)) as u8;
        if signed {
            x as i8 as i64
        } else {
            x as i64
        }
    };
    let mut am = vec![0i64; m * kk];
    let mut bm = vec![0i64; kk * n];
    let mut cm = vec![0i64; m * n];
    for lane in 0..32u32 {
        let l = first + lane as usize;
        for (w, col) in a.iter().enumerate() {
            for j in 0..4 {
                let (r, q) = int8::a_coord(lane, w, j);
                am[r as usize * kk + q as usize] = byte(col[l], j, a_signed);
            }
        }
        for (w, col) in b.iter().enumerate() {
            for j in 0..4 {
                let (r, q) = int8::b_coord(lane, w, j);
                bm[r as usize * n + q as usize] = byte(col[l], j, b_signed);
            }
        }
        for (i, col) in c.iter().enumerate() {
            let (r, q) = c_coord(lane, i);
            cm[r as usize * n + q as usize] = col[l] as u32 as i32 as i64;
        }
    }
    mma_out(c.len(), |r, q| {
        let dot: i64 = (0..kk).map(|j| am[r * kk + j] * bm[j * n + q]).sum();
        (cm[r * n + q] + dot) as u32 as u64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin1(op: BinOp, ty: Scalar, x: u64, y: u64) -> Result<u64, InterpError> {
        let mut a = [x];
        binary(op, ty, &mut a, &[y]).map_err(|e| *e.1)?;
        Ok(a[0])
    }

    #[test]
    fn cast_one_matches_rust_as() {
        use Scalar::*;
        assert_eq!(cast_one(F32, I32, raw_f32(f32::NAN)), 0);
        assert_eq!(cast_one(F32, I32, raw_f32(3e9)), i32::MAX as u32 as u64);
        assert_eq!(cast_one(F32, I32, raw_f32(-3e9)), i32::MIN as u32 as u64);
        assert_eq!(cast_one(F32, U32, raw_f32(-5.0)), 0);
        assert_eq!(cast_one(F32, I64, raw_f32(-2.9)), (-2i64) as u64);
        assert_eq!(cast_one(I32, I64, (-7i32) as u32 as u64), (-7i64) as u64);
        assert_eq!(cast_one(U32, I64, u32::MAX as u64), u32::MAX as u64);
        assert_eq!(cast_one(I64, I32, (1u64 << 32) + 5), 5);
        assert_eq!(cast_one(I32, U64, (-1i32) as u32 as u64), u64::MAX);
        assert_eq!(cast_one(Bool, F32, 1), raw_f32(1.0));
        assert_eq!(cast_one(U64, F32, u64::MAX), raw_f32(u64::MAX as f32));
        // Rounding through f64 for 64-bit ints to f16 is a single rounding in range.
        assert_eq!(cast_one(I64, F16, 2049), f16::from_f32(2049.0).to_bits() as u64);
        // Vector and scalar paths agree on every pair of types.
        let tys = [Bool, I32, U32, I64, U64, F16, BF16, F32];
        let samples: [u64; 6] = [0, 1, 0x8000_0000, 0xffff_ffff, 0x3c00, u64::MAX];
        for &from in &tys {
            for &to in &tys {
                let vals: Vec<u64> = samples.iter().map(|s| s & width_mask(from)).collect();
                let mut v = vals.clone();
                cast(from, to, &mut v);
                for (x, y) in vals.iter().zip(&v) {
                    assert_eq!(cast_one(from, to, *x), *y, "{from} -> {to} of {x:#x}");
                    assert_eq!(*y & !width_mask(to), 0, "{from} -> {to} not canonical");
                }
            }
        }
    }

    #[test]
    fn float_min_max_nan_and_zero() {
        assert_eq!(fmin(f32::NAN, 1.0), 1.0);
        assert_eq!(fmin(1.0, f32::NAN), 1.0);
        assert!(fmin(f32::NAN, f32::NAN).is_nan());
        assert!(fmin(0.0, -0.0).is_sign_negative());
        assert!(fmin(-0.0, 0.0).is_sign_negative());
        assert!(fmax(0.0, -0.0).is_sign_positive());
        assert!(fmax(-0.0, 0.0).is_sign_positive());
        assert_eq!(fmax(-1.0, f32::NAN), -1.0);
    }

    #[test]
    fn int_ops_edge_cases() {
        use Scalar::*;
        let m = i32::MIN as u32 as u64;
        let neg1 = (-1i32) as u32 as u64;
        assert!(matches!(
            bin1(BinOp::Div, I32, m, neg1),
            Err(InterpError::DivOverflow { .. })
        ));
        assert!(matches!(
            bin1(BinOp::Rem, I32, m, neg1),
            Err(InterpError::DivOverflow { .. })
        ));
        assert!(matches!(
            bin1(BinOp::Rem, U32, 5, 0),
            Err(InterpError::DivByZero { .. })
        ));
        // u32 MAX / u32 MAX is fine (no signed overflow on unsigned types).
        assert_eq!(bin1(BinOp::Div, U32, 0xffff_ffff, 0xffff_ffff).unwrap(), 1);
        assert_eq!(
            bin1(BinOp::Div, I32, (-7i32) as u32 as u64, 2).unwrap(),
            (-3i32) as u32 as u64
        );
        assert_eq!(
            bin1(BinOp::Rem, I32, (-7i32) as u32 as u64, 2).unwrap(),
            (-1i32) as u32 as u64
        );
        assert_eq!(
            bin1(BinOp::Shr, I32, (-8i32) as u32 as u64, 1).unwrap(),
            (-4i32) as u32 as u64
        );
        assert_eq!(bin1(BinOp::Shr, U32, 0xffff_fff8, 1).unwrap(), 0x7fff_fffc);
        assert_eq!(bin1(BinOp::Shl, U64, 1, 63).unwrap(), 1 << 63);
        assert!(matches!(
            bin1(BinOp::Shl, U32, 1, 32),
            Err(InterpError::ShiftOverflow { amount: 32, .. })
        ));
        assert!(matches!(
            bin1(BinOp::Shr, I64, 1, u64::MAX),
            Err(InterpError::ShiftOverflow { amount: -1, .. })
        ));
        assert_eq!(bin1(BinOp::Min, I32, neg1, 3).unwrap(), neg1);
        assert_eq!(bin1(BinOp::Min, U32, neg1, 3).unwrap(), 3);
        assert_eq!(bin1(BinOp::Add, I32, 0x7fff_ffff, 1).unwrap(), m);
        assert_eq!(bin1(BinOp::Mul, U64, u64::MAX, 2).unwrap(), u64::MAX - 1);
        let mut a = [m];
        unary(UnOp::Abs, I32, &mut a).unwrap();
        assert_eq!(a[0], m);
        let mut a = [5u64];
        unary(UnOp::Not, U32, &mut a).unwrap();
        assert_eq!(a[0], 0xffff_fffa);
    }

    #[test]
    fn prmt_selects_bytes_and_replicates_signs() {
        // a = bytes [0x01, 0x82, 0x03, 0x84], b = [0x05, 0x06, 0x87, 0x08] (low first).
        let a = [0x8403_8201u64];
        let run = |sel: u16| {
            let mut y = [0x0887_0605u64];
            prmt(&a, &mut y, sel);
            y[0]
        };
        assert_eq!(run(0x3210), 0x8403_8201);
        assert_eq!(run(0x7654), 0x0887_0605);
        assert_eq!(run(0x5140), 0x0682_0501); // [a0, b0, a1, b1]
        assert_eq!(run(0x7632), 0x0887_8403); // high halves
        assert_eq!(run(0x9999), 0xffff_ffff); // sign of a1 (0x82) everywhere
        assert_eq!(run(0x0008), 0x0101_0100); // sign of a0 (0x01) is 0, then a0 three times
    }

    #[test]
    fn dp4a_reads_bytes_by_signedness_and_accumulates() {
        // Bytes (low first): a = [255, 2, 128, 1], b = [3, 255, 2, 0x80].
        let (a, b) = ([0x0180_02ffu64], [0x8002_ff03u64]);
        let run = |sa: bool, sb: bool, c: i32| {
            let mut z = [c.raw()];
            dp4a(sa, sb, &a, &b, &mut z);
            i32::from_raw(z[0])
        };
        assert_eq!(run(false, false, 0), 255 * 3 + 2 * 255 + 128 * 2 + 128);
        assert_eq!(run(true, false, 10), 10 + -3 + 2 * 255 + -128 * 2 + 128);
        assert_eq!(run(false, true, 0), 255 * 3 - 2 + 128 * 2 - 128);
        assert_eq!(run(true, true, -5), -5 + -3 + -2 + -256 + -128);
    }

    #[test]
    fn compares_are_ordered() {
        let nan = raw_f32(f32::NAN);
        let one = raw_f32(1.0);
        for (op, want) in [
            (CmpOp::Eq, false),
            (CmpOp::Ne, true),
            (CmpOp::Lt, false),
            (CmpOp::Le, false),
            (CmpOp::Gt, false),
            (CmpOp::Ge, false),
        ] {
            let mut a = [nan, one];
            compare(op, Scalar::F32, &mut a, &[one, nan]);
            assert_eq!(a, [want as u64; 2], "{op:?}");
            assert_eq!(compare_one(op, Scalar::F32, nan, one), want);
        }
        let mut a = [(-1i32) as u32 as u64];
        compare(CmpOp::Lt, Scalar::I32, &mut a, &[0]);
        assert_eq!(a[0], 1);
        let mut a = [(-1i32) as u32 as u64];
        compare(CmpOp::Lt, Scalar::U32, &mut a, &[0]);
        assert_eq!(a[0], 0);
    }
}
