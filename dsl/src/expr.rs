//! Building expressions: literals that adopt the type of what they meet, operator overloading,
//! and the math/compare/cast methods kernels are written with.
//!
//! Building an expression never fails; type errors are reported by [`crate::validate`] when the
//! kernel is finished, with the kernel name and a path to the offending statement.

use crate::ir::*;
use std::ops;

/// A register variable handle. Cheap to copy; converts into an [`Expr`] that reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Var {
    pub id: VarId,
    pub ty: Scalar,
}

impl Var {
    /// An expression reading this register.
    pub fn e(self) -> Expr {
        Expr::new(ExprKind::Var(self.id), self.ty)
    }
}

/// A global buffer parameter or shared-memory array handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Buf {
    pub mem: Mem,
    pub elem: Scalar,
}

impl Buf {
    /// Scalar load of element `index`.
    pub fn at(self, index: impl IntoExpr) -> Expr {
        Expr::new(ExprKind::Load(self.mem, index.into_expr(None)), self.elem)
    }
}

/// Anything that can become an expression. Rust numeric literals are *weak*: given a type hint
/// (the other operand's type) they take that type when it is compatible (an integer literal
/// becomes any integer or float type, a float literal any float type).
pub trait IntoExpr {
    fn into_expr(self, hint: Option<Scalar>) -> Expr;
}

impl IntoExpr for Expr {
    fn into_expr(self, _hint: Option<Scalar>) -> Expr {
        self
    }
}
impl IntoExpr for &Expr {
    fn into_expr(self, _hint: Option<Scalar>) -> Expr {
        self.clone()
    }
}
impl IntoExpr for Var {
    fn into_expr(self, _hint: Option<Scalar>) -> Expr {
        self.e()
    }
}
impl IntoExpr for &Var {
    fn into_expr(self, _hint: Option<Scalar>) -> Expr {
        self.e()
    }
}
impl IntoExpr for bool {
    fn into_expr(self, _hint: Option<Scalar>) -> Expr {
        Expr::new(ExprKind::Lit(Lit::Bool(self)), Scalar::Bool)
    }
}

fn int_lit(v: i64, hint: Option<Scalar>, default: Scalar) -> Expr {
    match hint {
        Some(t) if t.is_int() => Expr::new(ExprKind::Lit(Lit::Int(v)), t),
        Some(t) if t.is_float() => Expr::new(ExprKind::Lit(Lit::Float(v as f64)), t),
        _ => Expr::new(ExprKind::Lit(Lit::Int(v)), default),
    }
}

fn float_lit(v: f64, hint: Option<Scalar>) -> Expr {
    match hint {
        Some(t) if t.is_float() => Expr::new(ExprKind::Lit(Lit::Float(v)), t),
        _ => Expr::new(ExprKind::Lit(Lit::Float(v)), Scalar::F32),
    }
}

macro_rules! int_into_expr {
    ($($t:ty => $default:expr),*) => {$(
        impl IntoExpr for $t {
            fn into_expr(self, hint: Option<Scalar>) -> Expr {
                int_lit(self as i64, hint, $default)
            }
        }
    )*};
}
int_into_expr!(i32 => Scalar::I32, u32 => Scalar::U32, i64 => Scalar::I64, u64 => Scalar::U64, usize => Scalar::I64);

impl IntoExpr for f32 {
    fn into_expr(self, hint: Option<Scalar>) -> Expr {
        float_lit(self as f64, hint)
    }
}
impl IntoExpr for f64 {
    fn into_expr(self, hint: Option<Scalar>) -> Expr {
        float_lit(self, hint)
    }
}

/// A literal of an explicit type.
pub fn lit(ty: Scalar, v: f64) -> Expr {
    match ty {
        Scalar::Bool => Expr::new(ExprKind::Lit(Lit::Bool(v != 0.0)), ty),
        t if t.is_int() => Expr::new(ExprKind::Lit(Lit::Int(v as i64)), ty),
        _ => Expr::new(ExprKind::Lit(Lit::Float(v)), ty),
    }
}
pub fn f32c(v: f64) -> Expr {
    lit(Scalar::F32, v)
}
pub fn i32c(v: i64) -> Expr {
    Expr::new(ExprKind::Lit(Lit::Int(v)), Scalar::I32)
}
pub fn u32c(v: u64) -> Expr {
    Expr::new(ExprKind::Lit(Lit::Int(v as i64)), Scalar::U32)
}
pub fn i64c(v: i64) -> Expr {
    Expr::new(ExprKind::Lit(Lit::Int(v)), Scalar::I64)
}
pub fn boolc(v: bool) -> Expr {
    v.into_expr(None)
}

/// Build `op(a, b)`. Weak literals on either side adopt the other side's type.
pub fn binary(op: BinOp, a: impl IntoExpr, b: impl IntoExpr) -> Expr {
    let (a, b) = unify(a, b);
    let ty = a.ty();
    Expr::new(ExprKind::Binary(op, a, b), ty)
}

pub fn cmp(op: CmpOp, a: impl IntoExpr, b: impl IntoExpr) -> Expr {
    let (a, b) = unify(a, b);
    Expr::new(ExprKind::Cmp(op, a, b), Scalar::Bool)
}

/// `cond ? a : b`.
pub fn select(cond: impl IntoExpr, a: impl IntoExpr, b: impl IntoExpr) -> Expr {
    let cond = cond.into_expr(Some(Scalar::Bool));
    let (a, b) = unify(a, b);
    let ty = a.ty();
    Expr::new(ExprKind::Select(cond, a, b), ty)
}

/// `a * b + c`, rounded once.
pub fn fma(a: impl IntoExpr, b: impl IntoExpr, c: impl IntoExpr) -> Expr {
    let (a, b) = unify(a, b);
    let c = c.into_expr(Some(a.ty()));
    let ty = a.ty();
    Expr::new(ExprKind::Fma(a, b, c), ty)
}

/// `c + Σ_k a[k]·b[k]` over the four bytes of `a` and `b` (u32; bytes signed per flag), in i32:
/// PTX `dp4a`. Exact while the sum fits i32.
pub fn dp4a(a: impl IntoExpr, a_signed: bool, b: impl IntoExpr, b_signed: bool, c: impl IntoExpr) -> Expr {
    Expr::new(
        ExprKind::Dp4a {
            a_signed,
            b_signed,
            a: a.into_expr(Some(Scalar::U32)),
            b: b.into_expr(Some(Scalar::U32)),
            c: c.into_expr(Some(Scalar::I32)),
        },
        Scalar::I32,
    )
}

/// Byte permute of `a` (bytes 0–3) and `b` (bytes 4–7), u32: PTX `prmt.b32` with a constant
/// selector (see [`ExprKind::Prmt`]). `prmt(a, b, 0x5410)` takes the low halves of `a` and `b`.
pub fn prmt(a: impl IntoExpr, b: impl IntoExpr, selector: u16) -> Expr {
    Expr::new(
        ExprKind::Prmt {
            a: a.into_expr(Some(Scalar::U32)),
            b: b.into_expr(Some(Scalar::U32)),
            selector,
        },
        Scalar::U32,
    )
}

/// Resolve weak literals: an `Expr`/`Var` side fixes the type for a literal side. Two literals
/// resolve independently (each to its default).
fn unify(a: impl IntoExpr, b: impl IntoExpr) -> (Expr, Expr) {
    // Resolve `a` without a hint first; if it turned out to be a plain literal, let `b` decide.
    let a0 = a.into_expr(None);
    let b0 = b.into_expr(Some(a0.ty()));
    if is_literal(&a0) && !is_literal(&b0) && a0.ty() != b0.ty() {
        let a1 = retype_literal(&a0, b0.ty());
        return (a1, b0);
    }
    (a0, b0)
}

fn is_literal(e: &Expr) -> bool {
    matches!(e.kind(), ExprKind::Lit(_))
}

fn retype_literal(e: &Expr, ty: Scalar) -> Expr {
    match e.kind() {
        ExprKind::Lit(Lit::Int(v)) => int_lit(*v, Some(ty), e.ty()),
        ExprKind::Lit(Lit::Float(v)) if ty.is_float() => float_lit(*v, Some(ty)),
        _ => e.clone(),
    }
}

impl Expr {
    fn unary(self, op: UnOp) -> Expr {
        let ty = self.ty();
        Expr::new(ExprKind::Unary(op, self), ty)
    }
    pub fn abs(self) -> Expr {
        self.unary(UnOp::Abs)
    }
    pub fn sqrt(self) -> Expr {
        self.unary(UnOp::Sqrt)
    }
    pub fn rcp(self) -> Expr {
        self.unary(UnOp::Rcp)
    }
    pub fn exp2(self) -> Expr {
        self.unary(UnOp::Exp2)
    }
    pub fn log2(self) -> Expr {
        self.unary(UnOp::Log2)
    }
    pub fn floor(self) -> Expr {
        self.unary(UnOp::Floor)
    }
    pub fn ceil(self) -> Expr {
        self.unary(UnOp::Ceil)
    }
    /// Set bits of a `u32`.
    pub fn popc(self) -> Expr {
        self.unary(UnOp::Popc)
    }
    /// Logical not (`Bool`) or bitwise not (integers).
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Expr {
        self.unary(UnOp::Not)
    }
    pub fn min(self, o: impl IntoExpr) -> Expr {
        binary(BinOp::Min, self, o)
    }
    pub fn max(self, o: impl IntoExpr) -> Expr {
        binary(BinOp::Max, self, o)
    }
    pub fn and(self, o: impl IntoExpr) -> Expr {
        binary(BinOp::And, self, o)
    }
    pub fn or(self, o: impl IntoExpr) -> Expr {
        binary(BinOp::Or, self, o)
    }
    pub fn lt(self, o: impl IntoExpr) -> Expr {
        cmp(CmpOp::Lt, self, o)
    }
    pub fn le(self, o: impl IntoExpr) -> Expr {
        cmp(CmpOp::Le, self, o)
    }
    pub fn gt(self, o: impl IntoExpr) -> Expr {
        cmp(CmpOp::Gt, self, o)
    }
    pub fn ge(self, o: impl IntoExpr) -> Expr {
        cmp(CmpOp::Ge, self, o)
    }
    pub fn eq_(self, o: impl IntoExpr) -> Expr {
        cmp(CmpOp::Eq, self, o)
    }
    pub fn ne_(self, o: impl IntoExpr) -> Expr {
        cmp(CmpOp::Ne, self, o)
    }
    /// Numeric conversion (see [`ExprKind::Cast`]). A no-op when the type already matches.
    pub fn cast(self, ty: Scalar) -> Expr {
        if self.ty() == ty {
            return self;
        }
        Expr::new(ExprKind::Cast(ty, self), ty)
    }
    pub fn bitcast(self, ty: Scalar) -> Expr {
        if self.ty() == ty {
            return self;
        }
        Expr::new(ExprKind::Bitcast(ty, self), ty)
    }
    pub fn f32(self) -> Expr {
        self.cast(Scalar::F32)
    }
    pub fn i64(self) -> Expr {
        self.cast(Scalar::I64)
    }
    pub fn i32(self) -> Expr {
        self.cast(Scalar::I32)
    }
    pub fn u32(self) -> Expr {
        self.cast(Scalar::U32)
    }
}

// Methods on `Var` forward to its expression so kernels can write `acc.max(x)` directly.
impl Var {
    pub fn abs(self) -> Expr {
        self.e().abs()
    }
    pub fn sqrt(self) -> Expr {
        self.e().sqrt()
    }
    pub fn rcp(self) -> Expr {
        self.e().rcp()
    }
    pub fn exp2(self) -> Expr {
        self.e().exp2()
    }
    pub fn log2(self) -> Expr {
        self.e().log2()
    }
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Expr {
        self.e().not()
    }
    pub fn min(self, o: impl IntoExpr) -> Expr {
        self.e().min(o)
    }
    pub fn max(self, o: impl IntoExpr) -> Expr {
        self.e().max(o)
    }
    pub fn and(self, o: impl IntoExpr) -> Expr {
        self.e().and(o)
    }
    pub fn or(self, o: impl IntoExpr) -> Expr {
        self.e().or(o)
    }
    pub fn lt(self, o: impl IntoExpr) -> Expr {
        self.e().lt(o)
    }
    pub fn le(self, o: impl IntoExpr) -> Expr {
        self.e().le(o)
    }
    pub fn gt(self, o: impl IntoExpr) -> Expr {
        self.e().gt(o)
    }
    pub fn ge(self, o: impl IntoExpr) -> Expr {
        self.e().ge(o)
    }
    pub fn eq_(self, o: impl IntoExpr) -> Expr {
        self.e().eq_(o)
    }
    pub fn ne_(self, o: impl IntoExpr) -> Expr {
        self.e().ne_(o)
    }
    pub fn cast(self, ty: Scalar) -> Expr {
        self.e().cast(ty)
    }
    pub fn f32(self) -> Expr {
        self.e().f32()
    }
    pub fn i64(self) -> Expr {
        self.e().i64()
    }
    pub fn i32(self) -> Expr {
        self.e().i32()
    }
    pub fn u32(self) -> Expr {
        self.e().u32()
    }
}

macro_rules! impl_binops {
    ($lhs:ty) => {
        impl_binops!(@op $lhs, Add, add, BinOp::Add);
        impl_binops!(@op $lhs, Sub, sub, BinOp::Sub);
        impl_binops!(@op $lhs, Mul, mul, BinOp::Mul);
        impl_binops!(@op $lhs, Div, div, BinOp::Div);
        impl_binops!(@op $lhs, Rem, rem, BinOp::Rem);
        impl_binops!(@op $lhs, BitAnd, bitand, BinOp::And);
        impl_binops!(@op $lhs, BitOr, bitor, BinOp::Or);
        impl_binops!(@op $lhs, BitXor, bitxor, BinOp::Xor);
        impl_binops!(@op $lhs, Shl, shl, BinOp::Shl);
        impl_binops!(@op $lhs, Shr, shr, BinOp::Shr);
        impl ops::Neg for $lhs {
            type Output = Expr;
            fn neg(self) -> Expr {
                let e = self.into_expr(None);
                let ty = e.ty();
                Expr::new(ExprKind::Unary(UnOp::Neg, e), ty)
            }
        }
    };
    (@op $lhs:ty, $tr:ident, $m:ident, $op:expr) => {
        impl<R: IntoExpr> ops::$tr<R> for $lhs {
            type Output = Expr;
            fn $m(self, rhs: R) -> Expr {
                binary($op, self, rhs)
            }
        }
    };
}
impl_binops!(Expr);
impl_binops!(&Expr);
impl_binops!(Var);

// Literal on the left: `1.0 - x`, `2 * i`.
macro_rules! impl_lit_lhs {
    ($($t:ty),*) => {$(
        impl_lit_lhs!(@op $t, Add, add, BinOp::Add);
        impl_lit_lhs!(@op $t, Sub, sub, BinOp::Sub);
        impl_lit_lhs!(@op $t, Mul, mul, BinOp::Mul);
        impl_lit_lhs!(@op $t, Div, div, BinOp::Div);
    )*};
    (@op $t:ty, $tr:ident, $m:ident, $op:expr) => {
        impl ops::$tr<Expr> for $t {
            type Output = Expr;
            fn $m(self, rhs: Expr) -> Expr {
                binary($op, self, rhs)
            }
        }
        impl ops::$tr<Var> for $t {
            type Output = Expr;
            fn $m(self, rhs: Var) -> Expr {
                binary($op, self, rhs)
            }
        }
    };
}
impl_lit_lhs!(f32, f64, i32, u32, i64, usize);
