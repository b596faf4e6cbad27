//! Entmax math as DSL emitters: the one place where the kernels' `[z − τ]_+^β` and its
//! derivatives are written. α is a specialization, so each function folds to the cheapest form:
//! a product for β ∈ {1, 2, 3}, `exp2(β·log2 x)` otherwise.
//!
//! All functions take `x = z − τ` and are only meaningful for `x > 0`; callers select them
//! under `z > τ` (the mask is strict, as in the reference).

use entkv_abi::Alpha;
use entkv_dsl::{f32c, select, Expr, IntoExpr, KernelBuilder, Var};

/// `x^p` for `x > 0`, folded for small integer `p`.
fn pow(x: Expr, p: f64) -> Expr {
    if p == 0.0 {
        f32c(1.0)
    } else if p == 1.0 {
        x
    } else if p == 2.0 {
        x.clone() * x
    } else if p == 3.0 {
        x.clone() * x.clone() * x
    } else {
        (x.log2() * p).exp2()
    }
}

/// The entmax weight `x^β`.
pub fn weight(alpha: Alpha, x: Expr) -> Expr {
    pow(x, alpha.beta())
}

/// `x^(β−1)`, i.e. `−f'(τ)/β` per token.
pub fn weight_d1(alpha: Alpha, x: Expr) -> Expr {
    pow(x, alpha.beta() - 1.0)
}

/// Per-token terms of the threshold function's value and slope at `tau`, zero for tokens at or
/// below `tau`: `(x^β, x^(β−1))` with `x = z − τ`.
pub fn threshold_terms(alpha: Alpha, z: impl IntoExpr, tau: impl IntoExpr) -> (Expr, Expr) {
    let z = z.into_expr(None);
    let tau = tau.into_expr(None);
    let above = z.clone().gt(tau.clone());
    // Clamp so that the discarded branch never evaluates log2 of a negative number.
    let x = (z - tau).max(0.0f32);
    (
        select(above.clone(), weight(alpha, x.clone()), 0.0f32),
        select(above, weight_d1(alpha, x), 0.0f32),
    )
}

/// One safeguarded Newton update of the threshold `tau` inside the bracket `[lo, hi]`, given
/// `f = Σ x^β − 1` and `s1 = Σ x^(β−1)` at `tau` (block-uniform values).
///
/// `f ≥ 0` means `tau ≤ τ*` (the sum is decreasing in τ), so `tau` becomes the new `lo`;
/// otherwise the new `hi`. The Newton step `τ + f/(β·s1)` is taken when it stays inside the
/// bracket, else the midpoint. For β ≥ 1 (α ≤ 2) the sum is convex in τ, so Newton
/// from a point with `f ≥ 0` never passes τ*: every `lo` is a rigorous lower bound.
pub fn newton_update(
    k: &mut KernelBuilder,
    alpha: Alpha,
    tau: Var,
    lo: Var,
    hi: Var,
    f: Var,
    s1: Var,
) -> Var {
    let ok = f.ge(0.0f32);
    k.assign(lo, select(ok.clone(), tau, lo));
    k.assign(hi, select(ok, hi, tau));
    let step = f / (s1 * alpha.beta());
    let cand = k.let_("tau_newton", tau + step);
    inside_or_midpoint(k, cand, lo, hi)
}

/// `cand` if it lies inside `[lo, hi]`, else the bracket's midpoint. (A candidate equal to a
/// bracket end is kept: Newton returns `τ` itself when `f(τ) = 0`, and jumping to the midpoint
/// there would leave the root.)
pub fn inside_or_midpoint(k: &mut KernelBuilder, cand: Var, lo: Var, hi: Var) -> Var {
    let inside = cand.ge(lo).and(cand.le(hi));
    k.let_("tau_next", select(inside, cand, (lo + hi) * 0.5f32))
}

/// The exact threshold over an active set, when α has a closed form (spec §1.3): given the
/// active count `cnt`, `su = Σ (z − m)` and `su2 = Σ (z − m)²` over the active tokens, shifted by
/// `m` (the max) for accuracy, returns `Some(expression)` for α = 2 and α = 3/2, whose value is
/// NaN when the quadratic has no real root.
pub fn closed_form_tau(alpha: Alpha, m: Var, cnt: Var, su: Var, su2: Var) -> Option<Expr> {
    match alpha {
        Alpha::Two => Some(m + (su - 1.0f32) / cnt),
        Alpha::ThreeHalves => {
            let mean = su / cnt;
            let ss = su2 - su * mean.clone();
            // sqrt of a negative number is NaN, which the bracket test rejects.
            Some(m + mean - ((1.0f32 - ss) / cnt).sqrt())
        }
        _ => None,
    }
}
