//! The standard normal distribution and the truncated moments of a Gaussian: float64 host
//! references and f32 DSL emitters, reusable by any kernel.
//!
//! Notation: `φ`, `Φ` the standard normal density and CDF, `Q = 1 − Φ`, and for β > 0
//!
//! ```text
//! M_β(t) = E[(t + Z)_+^β],  Z ~ N(0, 1),
//! ```
//!
//! so that for `Y ~ N(μ_Y, σ_Y²)`, `E[Y_+^β] = σ_Y^β · M_β(μ_Y/σ_Y)`. The closed forms
//! (spec §5.2, with the corrected third moment) are `M_0 = Φ`, `M_1 = tΦ + φ`,
//! `M_2 = (t² + 1)Φ + tφ`, `M_3 = (t³ + 3t)Φ + (t² + 2)φ`, and `d/dt M_β = β·M_{β−1}`.
//!
//! ## Why not the closed forms everywhere
//! For `t ≪ 0` the two terms of each closed form nearly cancel: at `t = −4` the terms of `M_3`
//! are 1600 times the result, so f32 would keep about three digits — and the root of the
//! threshold equation sits at `t ≈ −3…−6` for long contexts. Below `t = −1` (where the worst
//! cancellation, that of `M_3`, is a factor 8) the kernels therefore evaluate the same function
//! through `A_β(x) = M_β(−x)/φ(x)` (x = −t), a smooth, positive, cancellation-free function,
//! represented by a Chebyshev interpolant (below). For α without a closed form (β ∉ {1, 2, 3})
//! both sides use interpolants: `A_β` for `t < 0`, `M_β(t)/(1+t)^β` on `[0, T_R]`, and the
//! large-t expansion `M_β(t) = t^β Σ_k C(β, 2k)(2k−1)!! t^{−2k}` beyond `T_R`.
//!
//! ## The numerical expectation (generic α) and its accuracy
//! `M_β` is a fixed function of one variable once β (a specialization) is fixed, so its
//! numerical expectation is computed once, when the kernel is built, in float64: the
//! trapezoidal rule in `y = ln u` of `∫_0^∞ u^β e^{−u²/2 + tu} du` ([`ln_scaled_moment`]). The
//! integrand in `y` is entire and decays exponentially (left) and double-exponentially
//! (right), so the trapezoidal rule converges geometrically: with a step of a quarter of the
//! peak width (at most 0.1) it matches the closed forms to 1e-13 relative (tests). Chebyshev
//! interpolants of `log2 A_β` (in `q = (x − K)/(x + K)`, which compresses `[0, 40]`) and of the
//! right-side function are fitted at 65 nodes, truncated to the shortest series whose error on
//! a 401-point grid is below 2e-9 (in log2 units, i.e. 1.4e-9 relative), and the build fails
//! with a typed error if none is. The device evaluates them with Clenshaw's recurrence in f32,
//! so the device value of `log2 M_β(t)` is accurate to a few f32 ulps of `log2 M_β(t)` itself
//! (an absolute error of ~1e-7·|log2 M|), which moves the threshold by ~3e-8·|t|·σ_Y (see
//! `crate::gaussian`).
//!
//! ## Φ and φ ([`emit_pdf`], [`emit_cdf`])
//! `φ(x) = 2^{−x²·log2(e)/2}/√(2π)` with the square split exactly (`x² = p + e`, `e` from an
//! FMA) and the product by `log2(e)/2` carried in two parts, so the exponent is exact to
//! ~2^-48 relative and φ keeps full f32 relative precision far into the tail (a plain
//! `exp2(−x·x·c)` loses ~2.6e-6 at x = 10). `Q(x) = φ(x)·R(x)` with the Mills ratio `R`
//! from a Chebyshev interpolant of `R(x)·(1 + x)/√(2π)` on `[0, 16]` (interpolation error ≤ 1e-10
//! relative; beyond 16, `Q` underflows f32 anyway), and `Φ(t) = Q(−t)` or `1 − Q(t)`.
//! Measured in the interpreter over `t ∈ [−12.5, 12.5]` (the f32 normal range): `|rel err| ≤
//! 1.5e-7` for φ and `≤ 1.9e-7` for Φ, i.e. about one f32 ulp (the interpolant contributes
//! ≤ 1e-10; the rest is the five or six f32 roundings). The GPU's `ex2.approx` adds up to two
//! ulps.

use entkv_abi::{Alpha, SpecError};
use entkv_dsl::*;
use std::collections::HashMap;
use std::f64::consts::{LN_2, LOG2_E, PI};
use std::sync::{Arc, Mutex, OnceLock};

pub use entkv_abi::gaussian::{normal_cdf, normal_pdf, normal_upper_tail};

const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

// ----- float64 references ------------------------------------------------------------------

/// `ln ∫_0^∞ u^β e^{−u²/2 + t·u} du` for β > −1 and any finite t, by the trapezoidal rule in
/// `y = ln u` (integrand `exp((β+1)y − e^{2y}/2 + t e^y)`), stepping out from the peak until
/// the integrand is below e^-45 of it, with the log of the peak factored out (no overflow or
/// underflow for any t).
pub fn ln_scaled_moment(beta: f64, t: f64) -> f64 {
    let b1 = beta + 1.0;
    let root = (t * t + 4.0 * b1).sqrt();
    // Peak e^{y*} = (t + √(t² + 4(β+1)))/2, written without cancellation for t < 0.
    let v = if t >= 0.0 {
        0.5 * (t + root)
    } else {
        2.0 * b1 / (root - t)
    };
    let ys = v.ln();
    let g = |y: f64| {
        let e = y.exp();
        b1 * y - 0.5 * e * e + t * e
    };
    let gs = g(ys);
    // Peak width 1/√|g''(y*)|, g'' = −e^y·(2e^y − t) = −v·√(t² + 4(β+1)) at the peak.
    let width = 1.0 / (v * root).sqrt();
    let h = (0.25 * width).min(0.1);
    let mut sum = 1.0;
    for dir in [-1.0, 1.0] {
        let mut i = 1.0;
        loop {
            let d = g(ys + dir * i * h) - gs;
            sum += d.exp();
            if d < -45.0 {
                break;
            }
            i += 1.0;
        }
    }
    gs + (h * sum).ln()
}

/// `ln M_β(t)`: the numerical expectation (no closed form used). For `t ≥ 40` the mass of
/// `t + Z` is entirely positive, and `M_β(t) = t^β·E[(1 + Z/t)^β]` is integrated directly
/// (trapezoidal rule in z on ±38, spectrally accurate for this analytic integrand), which
/// avoids the `t²/2` cancellation of the scaled form.
pub fn ln_pos_moment(beta: f64, t: f64) -> f64 {
    if t >= 40.0 {
        let h = 0.02;
        let mut s = 0.0;
        let mut z = -38.0;
        while z <= 38.0 {
            s += (beta * (z / t).ln_1p() - 0.5 * z * z).exp();
            z += h;
        }
        return beta * t.ln() + (s * h / (2.0 * PI).sqrt()).ln();
    }
    ln_scaled_moment(beta, t) - 0.5 * t * t - 0.5 * (2.0 * PI).ln()
}

/// The closed forms `M_0 … M_3` (spec §5.2 with the corrected `M_3`), in float64. Exact
/// formulas; their terms cancel for `t ≪ 0` (1e-13 relative is left at t = −6).
pub fn pos_moment_closed(n: u32, t: f64) -> Option<f64> {
    let (p, f) = (normal_cdf(t), normal_pdf(t));
    Some(match n {
        0 => p,
        1 => t * p + f,
        2 => (t * t + 1.0) * p + t * f,
        3 => (t * t * t + 3.0 * t) * p + (t * t + 2.0) * f,
        _ => return None,
    })
}

/// `ln M_β(t)` as the references use it: the closed form where it is well conditioned in f64
/// (integer β ≤ 3 and `t ≥ −6`), the numerical expectation elsewhere.
pub fn ln_pos_moment_ref(alpha: Alpha, t: f64) -> f64 {
    match alpha.integer_beta() {
        Some(n) if (-6.0..40.0).contains(&t) => pos_moment_closed(n, t).map_or(f64::NAN, f64::ln),
        _ => ln_pos_moment(alpha.beta(), t),
    }
}

// ----- Chebyshev interpolants --------------------------------------------------------------

/// Nodes of the interpolants (Chebyshev points of the first kind).
const FIT_NODES: usize = 65;
/// Verification grid (uniform in the Chebyshev variable, endpoints included).
const FIT_GRID: usize = 401;
/// Candidate lengths of the truncated series.
const FIT_LENGTHS: [usize; 12] = [8, 12, 16, 20, 24, 28, 32, 36, 40, 48, 56, 64];

/// A Chebyshev series in `s ∈ [−1, 1]` of a function of `x ∈ [x0, x1]`, through the map
/// `q = (x − K)/(x + K)` (which spreads the nodes logarithmically over wide ranges) and the
/// affine map of `[q(x0), q(x1)]` onto `[−1, 1]`.
#[derive(Clone, Debug)]
pub struct ChebFit {
    pub x0: f64,
    pub x1: f64,
    pub k: f64,
    q0: f64,
    q1: f64,
    /// `f(s) = c_0 + Σ_{k≥1} c_k T_k(s)`.
    pub coeffs: Vec<f64>,
    /// Coefficients of `df/ds`.
    dcoeffs: Vec<f64>,
    /// Largest |fit − f| on the verification grid.
    pub max_err: f64,
}

/// Why a fit could not be built (the α is outside what the interpolants can represent).
#[derive(Clone, Debug)]
pub struct FitError {
    pub what: String,
    pub max_err: f64,
}

fn clenshaw_f64(c: &[f64], s: f64) -> f64 {
    let (mut b1, mut b2) = (0.0, 0.0);
    for &ck in c.iter().skip(1).rev() {
        let b0 = ck + 2.0 * s * b1 - b2;
        b2 = b1;
        b1 = b0;
    }
    c.first().copied().unwrap_or(0.0) + s * b1 - b2
}

/// Chebyshev coefficients of the derivative (the standard backward recurrence).
fn derivative_coeffs(c: &[f64]) -> Vec<f64> {
    let n = c.len();
    if n < 2 {
        return vec![0.0];
    }
    let mut d = vec![0.0; n + 1];
    for j in (1..n).rev() {
        d[j - 1] = d[j + 1] + 2.0 * j as f64 * c[j];
    }
    d[0] *= 0.5;
    d.truncate(n - 1);
    d
}

impl ChebFit {
    /// Interpolate `f` on `[x0, x1]` and keep the shortest series within `tol` of `f` on the
    /// verification grid.
    pub fn new(
        what: &str,
        f: &dyn Fn(f64) -> f64,
        x0: f64,
        x1: f64,
        k: f64,
        tol: f64,
    ) -> Result<ChebFit, FitError> {
        let qmap = |x: f64| (x - k) / (x + k);
        let (q0, q1) = (qmap(x0), qmap(x1));
        let x_of = |s: f64| {
            let q = q0 + (s + 1.0) * 0.5 * (q1 - q0);
            (k * (1.0 + q) / (1.0 - q)).clamp(x0, x1)
        };
        let n = FIT_NODES;
        let vals: Vec<f64> = (0..n)
            .map(|j| f(x_of((PI * (j as f64 + 0.5) / n as f64).cos())))
            .collect();
        let full: Vec<f64> = (0..n)
            .map(|m| {
                let s: f64 = (0..n)
                    .map(|j| vals[j] * (PI * m as f64 * (j as f64 + 0.5) / n as f64).cos())
                    .sum();
                s * if m == 0 { 1.0 } else { 2.0 } / n as f64
            })
            .collect();
        let grid: Vec<(f64, f64)> = (0..FIT_GRID)
            .map(|i| {
                let s = -1.0 + 2.0 * i as f64 / (FIT_GRID - 1) as f64;
                (s, f(x_of(s)))
            })
            .collect();
        let mut best = f64::INFINITY;
        for len in FIT_LENGTHS {
            let c = &full[..len.min(n)];
            let err = grid
                .iter()
                .map(|&(s, v)| (clenshaw_f64(c, s) - v).abs())
                .fold(0.0, |a: f64, e| a.max(crate::check::nan_as_inf(e)));
            best = best.min(err);
            if err <= tol {
                let coeffs = c.to_vec();
                return Ok(ChebFit {
                    x0,
                    x1,
                    k,
                    q0,
                    q1,
                    dcoeffs: derivative_coeffs(&coeffs),
                    coeffs,
                    max_err: err,
                });
            }
        }
        Err(FitError {
            what: what.to_string(),
            max_err: best,
        })
    }

    fn s_of(&self, x: f64) -> f64 {
        let q = (x - self.k) / (x + self.k);
        (2.0 * q - self.q0 - self.q1) / (self.q1 - self.q0)
    }

    /// `ds/dx`.
    fn ds_dx(&self, x: f64) -> f64 {
        2.0 / (self.q1 - self.q0) * 2.0 * self.k / ((x + self.k) * (x + self.k))
    }

    /// The interpolant at `x` (float64).
    pub fn eval(&self, x: f64) -> f64 {
        clenshaw_f64(&self.coeffs, self.s_of(x))
    }

    /// Its derivative in `x` (float64).
    pub fn eval_deriv(&self, x: f64) -> f64 {
        clenshaw_f64(&self.dcoeffs, self.s_of(x)) * self.ds_dx(x)
    }

    /// Emit the interpolant and its x-derivative at `x` (f32; the caller keeps `x` in
    /// `[x0, x1]`).
    pub fn emit(&self, k: &mut KernelBuilder, x: impl IntoExpr) -> (Var, Var) {
        let x = k.let_("cf_x", x.into_expr(Some(Scalar::F32)));
        let den = k.let_("cf_den", x + self.k);
        let q = k.let_("cf_q", (x - self.k) / den);
        let sa = 2.0 / (self.q1 - self.q0);
        let s = k.let_("cf_s", fma(q, sa, -(self.q0 + self.q1) / (self.q1 - self.q0)));
        let v = emit_clenshaw(k, &self.coeffs, s);
        let dv = emit_clenshaw(k, &self.dcoeffs, s);
        let d = k.let_("cf_dx", dv * (sa * 2.0 * self.k) / (den * den));
        (v, d)
    }

    /// Emit the interpolant only.
    pub fn emit_value(&self, k: &mut KernelBuilder, x: impl IntoExpr) -> Var {
        let x = k.let_("cf_x", x.into_expr(Some(Scalar::F32)));
        let q = k.let_("cf_q", (x - self.k) / (x + self.k));
        let sa = 2.0 / (self.q1 - self.q0);
        let s = k.let_("cf_s", fma(q, sa, -(self.q0 + self.q1) / (self.q1 - self.q0)));
        emit_clenshaw(k, &self.coeffs, s)
    }
}

/// Clenshaw's recurrence for `c_0 + Σ c_k T_k(s)` in f32 (backward-stable: the error is a few
/// ulps of the largest partial sum, which the decaying coefficients keep near `|c_0|`).
fn emit_clenshaw(k: &mut KernelBuilder, c: &[f64], s: Var) -> Var {
    match c.len() {
        0 => return k.let_typed("cheb", Scalar::F32, 0.0),
        1 => return k.let_typed("cheb", Scalar::F32, c[0]),
        _ => {}
    }
    let n = c.len();
    let two_s = k.let_("cheb_2s", s * 2.0f32);
    let mut b1 = k.let_typed("cheb_b", Scalar::F32, c[n - 1]);
    let mut b2 = f32c(0.0);
    for &ck in c[1..n - 1].iter().rev() {
        let b0 = k.let_("cheb_b", fma(two_s, b1, f32c(ck)) - b2);
        b2 = b1.e();
        b1 = b0;
    }
    k.let_("cheb", fma(s, b1, f32c(c[0])) - b2)
}

// ----- the tables a specialization needs ---------------------------------------------------

/// Largest x of the tail interpolant: `log2 φ(40) ≈ −1156`, so beyond it every use underflows.
pub const TAIL_X_MAX: f64 = 40.0;
/// Tail interpolants start here for closed-form β (closed forms cover `t ≥ −1`).
pub const CLOSED_FORM_T_MIN: f64 = -1.0;
/// Tolerance of the log2 interpolants (log2 units).
const LOG_FIT_TOL: f64 = 2e-9;

/// How `log2 M_β(t)` is evaluated for `t ≥ −x0` (the tail interpolant covers `t < −x0`).
#[derive(Clone, Debug)]
pub enum RightSide {
    /// β ∈ {1, 2, 3}: the closed form with Φ and φ, for `t ≥ −1`.
    Closed(u32),
    /// Other β: `fit(t) + β·log2(1 + t)` on `[0, t_max]`, the large-t series
    /// `β·log2 t + log2 Σ_k a_k t^{−2k}` beyond.
    Fitted {
        fit: ChebFit,
        t_max: f64,
        series: Vec<f64>,
    },
}

/// The interpolants behind `log2 M_β(t)` for one β.
#[derive(Clone, Debug)]
pub struct MomentTables {
    pub beta: f64,
    /// `log2 A_β(x) + (β+1)·log2(1 + x)` on `[x0, TAIL_X_MAX]`, `A_β(x) = M_β(−x)/φ(x)`.
    pub tail: ChebFit,
    pub right: RightSide,
}

impl MomentTables {
    /// The float64 value of what the device evaluates (the interpolants, not the reference):
    /// `log2 M_β(t)`.
    pub fn log2_moment(&self, t: f64) -> f64 {
        let beta = self.beta;
        if t < -self.tail.x0 {
            let x = -t;
            let lphi = -0.5 * x * x * LOG2_E - 0.5 * (2.0 * PI).log2();
            return lphi + self.tail.eval(x.min(TAIL_X_MAX)) - (beta + 1.0) * (1.0 + x).log2();
        }
        match &self.right {
            RightSide::Closed(n) => pos_moment_closed(*n, t).map_or(f64::NAN, f64::log2),
            RightSide::Fitted { fit, t_max, series } => {
                if t <= *t_max {
                    fit.eval(t) + beta * (1.0 + t).log2()
                } else {
                    let u = 1.0 / (t * t);
                    let s = series.iter().rev().fold(0.0, |acc, a| acc * u + a);
                    beta * t.log2() + s.log2()
                }
            }
        }
    }
}

/// Coefficients `a_k = C(β, 2k)·(2k−1)!!` of `M_β(t) ≈ t^β Σ_k a_k t^{−2k}`, up to the first
/// term below 1e-13 at `t_max` (None when the terms stop decreasing first: `t_max` too small).
fn large_t_series(beta: f64, t_max: f64) -> Option<Vec<f64>> {
    let mut a = vec![1.0];
    let mut prev = f64::INFINITY;
    for k in 1..40 {
        let kf = k as f64;
        let next = a[k - 1] * (beta - 2.0 * kf + 2.0) * (beta - 2.0 * kf + 1.0) / (2.0 * kf);
        let term = (next / t_max.powf(2.0 * kf)).abs();
        if next == 0.0 || term < 1e-13 {
            if next != 0.0 {
                a.push(next);
            }
            return Some(a);
        }
        if term > prev {
            return None;
        }
        prev = term;
        a.push(next);
    }
    None
}

fn fit_err(beta: f64, e: FitError) -> SpecError {
    SpecError::BadTile {
        kernel: "select_gaussian",
        reason: format!(
            "no Chebyshev interpolant of the Gaussian moment for β = {beta} ({}: best error {:.1e})",
            e.what, e.max_err
        ),
    }
}

fn build_tables(alpha: Alpha) -> Result<MomentTables, SpecError> {
    let beta = alpha.beta();
    let closed = alpha.integer_beta();
    let x0 = if closed.is_some() { -CLOSED_FORM_T_MIN } else { 0.0 };
    let tail_f = |x: f64| ln_scaled_moment(beta, -x) / LN_2 + (beta + 1.0) * (1.0 + x).log2();
    // K = 2 suits small β; larger β have their mass further out (K ≈ √(β+1) spreads it).
    let mut tail = Err(FitError {
        what: "tail".into(),
        max_err: f64::INFINITY,
    });
    for kk in [2.0, (beta + 1.0).sqrt().max(2.0) * 1.5, 4.0] {
        tail = ChebFit::new("tail", &tail_f, x0, TAIL_X_MAX, kk, LOG_FIT_TOL);
        if tail.is_ok() {
            break;
        }
    }
    let tail = tail.map_err(|e| fit_err(beta, e))?;
    let right = match closed {
        Some(n) => RightSide::Closed(n),
        None => {
            let mut t_max = 16.0;
            let series = loop {
                if let Some(s) = large_t_series(beta, t_max) {
                    break s;
                }
                t_max *= 1.5;
                if t_max > 1e4 {
                    return Err(fit_err(
                        beta,
                        FitError {
                            what: "large-t series".into(),
                            max_err: f64::INFINITY,
                        },
                    ));
                }
            };
            let right_f = |t: f64| ln_pos_moment(beta, t) / LN_2 - beta * (1.0 + t).log2();
            let mut fit = Err(FitError {
                what: "right".into(),
                max_err: f64::INFINITY,
            });
            for kk in [4.0, 2.0, 8.0] {
                fit = ChebFit::new("right", &right_f, 0.0, t_max, kk, LOG_FIT_TOL);
                if fit.is_ok() {
                    break;
                }
            }
            let fit = fit.map_err(|e| fit_err(beta, e))?;
            RightSide::Fitted { fit, t_max, series }
        }
    };
    let tables = MomentTables { beta, tail, right };
    // The large-t series and the seams, against the reference.
    for t in [
        -TAIL_X_MAX,
        -1.5,
        -1.0,
        -0.5,
        0.0,
        0.5,
        3.0,
        15.0,
        40.0,
        100.0,
        1e3,
    ] {
        let (got, want) = (tables.log2_moment(t), ln_pos_moment_ref(alpha, t) / LN_2);
        let err = (got - want).abs();
        if err.is_nan() || err > 1e-8 * (1.0 + want.abs()) {
            return Err(fit_err(
                beta,
                FitError {
                    what: format!("check at t = {t}: {got} vs {want}"),
                    max_err: (got - want).abs(),
                },
            ));
        }
    }
    Ok(tables)
}

/// The interpolants for α, built once per β and cached (building takes a few milliseconds).
pub fn moment_tables(alpha: Alpha) -> Result<Arc<MomentTables>, SpecError> {
    static CACHE: OnceLock<Mutex<HashMap<u64, Arc<MomentTables>>>> = OnceLock::new();
    let key = alpha.beta().to_bits();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(t) = cache.lock().map_err(|_| poisoned())?.get(&key) {
        return Ok(t.clone());
    }
    let t = Arc::new(build_tables(alpha)?);
    cache.lock().map_err(|_| poisoned())?.insert(key, t.clone());
    Ok(t)
}

fn poisoned() -> SpecError {
    SpecError::BadTile {
        kernel: "select_gaussian",
        reason: "the moment-table cache was poisoned by a panic".into(),
    }
}

/// Upper end of the Mills-ratio interpolant: `Q(16) ≈ 6e-58` underflows f32.
pub const MILLS_X_MAX: f64 = 16.0;

/// The interpolant of `R(x)·(1 + x)/√(2π)` on `[0, 16]`, `R = Q/φ` the Mills ratio: nearly
/// constant (0.40 at 0, 0.38 at 16), so Clenshaw's f32 rounding is relative to the value.
pub fn mills_fit() -> &'static ChebFit {
    static FIT: OnceLock<ChebFit> = OnceLock::new();
    FIT.get_or_init(|| {
        let f = |x: f64| normal_upper_tail(x) / normal_pdf(x) * INV_SQRT_2PI * (1.0 + x);
        // A fixed, smooth function: this cannot fail (a unit test pins the error at ≤ 4e-11,
        // i.e. ≤ 1e-10 relative).
        ChebFit::new("mills", &f, 0.0, MILLS_X_MAX, 2.0, 4e-11).unwrap_or_else(|e| {
            unreachable!("Mills-ratio interpolant: {e:?}");
        })
    })
}

// ----- DSL emitters ------------------------------------------------------------------------

/// `log2(e)/2` split into an f32 head and tail.
const HALF_LOG2E_HI: f64 = 0.721_347_5;
fn half_log2e_lo() -> f64 {
    0.5 * LOG2_E - HALF_LOG2E_HI as f32 as f64
}

/// `(y, r)` with `y + r = t²·log2(e)/2` to ~2^-48 relative: the square is split exactly with
/// an FMA (`t² = p + e`), the constant is carried as an f32 head and tail, and `r` collects
/// the exact rounding error of `p·head` and the small cross terms. `|r| ≤ ulp(y)`.
fn emit_half_square_log2e(k: &mut KernelBuilder, t: Var) -> (Var, Var) {
    let p = k.let_("hs_p", t * t);
    let e = k.let_("hs_e", fma(t, t, -p));
    let hi = HALF_LOG2E_HI as f32 as f64;
    let y = k.let_("hs_y", p * hi);
    let r = k.let_("hs_r", fma(p, hi, -y) + fma(p, half_log2e_lo(), e * hi));
    (y, r)
}

/// `2^{−(y+r)}·c = 2^{−y}·(c − c·r·ln2)` for `|r| ≪ 1` (the dropped `O(r²)` is < 1e-9).
fn emit_exp2_neg(k: &mut KernelBuilder, y: Var, r: Var, c: impl IntoExpr) -> Var {
    let c = k.let_("en_c", c.into_expr(Some(Scalar::F32)));
    k.let_("en", (-y).exp2() * fma(r * (-LN_2), c, c))
}

/// `φ(t)` in f32, with full relative precision into the tail (see the module docs).
pub fn emit_pdf(k: &mut KernelBuilder, t: impl IntoExpr) -> Var {
    let t = k.let_("pdf_t", t.into_expr(Some(Scalar::F32)));
    let (y, r) = emit_half_square_log2e(k, t);
    emit_exp2_neg(k, y, r, INV_SQRT_2PI)
}

/// `Q(x) = 1 − Φ(x)` for `x ≥ 0` in f32: `2^{−x²·log2(e)/2}·fit(x)/(1 + x)`.
pub fn emit_upper_tail(k: &mut KernelBuilder, x: impl IntoExpr) -> Var {
    let x = k.let_("tail_x", x.into_expr(Some(Scalar::F32)));
    let xc = k.let_("tail_xc", x.min(MILLS_X_MAX));
    let v = mills_fit().emit_value(k, xc);
    let (y, r) = emit_half_square_log2e(k, x);
    let q = emit_exp2_neg(k, y, r, v);
    k.let_("tail", q / (xc + 1.0f32))
}

/// `Φ(t)` in f32 with full relative precision in both tails (NaN stays NaN).
pub fn emit_cdf(k: &mut KernelBuilder, t: impl IntoExpr) -> Var {
    let t = k.let_("cdf_t", t.into_expr(Some(Scalar::F32)));
    let q = emit_upper_tail(k, t.abs());
    let v = select(t.lt(0.0f32), q, 1.0f32 - q);
    k.let_("cdf", select(t.ne_(t), t, v))
}

/// `(log2 M_β(t), d/dt log2 M_β(t))` in f32 for the β of `tables` (see the module docs for
/// the three regimes). Divergent `t` across lanes is fine: the regimes are branches.
pub fn emit_log2_moment(k: &mut KernelBuilder, tables: &MomentTables, t: impl IntoExpr) -> (Var, Var) {
    let beta = tables.beta;
    let t = k.let_("lm_t", t.into_expr(Some(Scalar::F32)));
    let l = k.let_typed("lm", Scalar::F32, 0.0);
    let dl = k.let_typed("lm_dt", Scalar::F32, 0.0);
    let x0 = tables.tail.x0;
    k.if_else(
        t.lt(-x0),
        |k| {
            // Tail: log2 φ(x) + fit(x) − (β+1)·log2(1 + x), x = −t.
            let x = k.let_("lm_x", -t);
            let xc = k.let_("lm_xc", x.min(TAIL_X_MAX));
            let (f, df) = tables.tail.emit(k, xc);
            let p = k.let_("lm_p", x * x);
            let lphi = fma(-p, 0.5 * LOG2_E, -0.5 * (2.0 * PI).log2());
            let l1p = k.let_("lm_l1p", (x + 1.0f32).log2());
            k.assign(l, lphi + f - l1p * (beta + 1.0));
            let df = select(x.gt(TAIL_X_MAX), 0.0f32, df);
            // d/dt = −d/dx.
            k.assign(dl, x * LOG2_E - df + (beta + 1.0) * LOG2_E / (x + 1.0f32));
        },
        |k| match &tables.right {
            RightSide::Closed(n) => {
                let cdf = emit_cdf(k, t);
                let pdf = emit_pdf(k, t);
                let t2 = k.let_("lm_t2", t * t);
                let (m, dm) = match n {
                    1 => (fma(t, cdf, pdf), cdf.e()),
                    2 => (fma(t2 + 1.0f32, cdf, t * pdf), fma(t, cdf, pdf) * 2.0f32),
                    _ => (
                        fma(t * (t2 + 3.0f32), cdf, (t2 + 2.0f32) * pdf),
                        fma(t2 + 1.0f32, cdf, t * pdf) * 3.0f32,
                    ),
                };
                let m = k.let_("lm_m", m);
                k.assign(l, m.log2());
                k.assign(dl, dm / (m * LN_2));
            }
            RightSide::Fitted { fit, t_max, series } => {
                k.if_else(
                    t.le(*t_max),
                    |k| {
                        let (f, df) = fit.emit(k, t);
                        k.assign(l, f + (t + 1.0f32).log2() * beta);
                        k.assign(dl, df + beta * LOG2_E / (t + 1.0f32));
                    },
                    |k| {
                        let u = k.let_("lm_u", (t * t).rcp());
                        // S(u) = Σ a_k u^k and S'(u) by Horner.
                        let mut s = f32c(0.0);
                        let mut ds = f32c(0.0);
                        for (i, a) in series.iter().enumerate().rev() {
                            if i > 0 {
                                ds = fma(ds, u, a * i as f64);
                            }
                            s = fma(s, u, *a);
                        }
                        let s = k.let_("lm_s", s);
                        // d/dt log2 S = S'(u)·(−2/t³)/(S ln2).
                        k.assign(l, t.log2() * beta + s.log2());
                        k.assign(dl, beta * LOG2_E / t - ds * u * 2.0f32 * LOG2_E / (t * s));
                    },
                );
            }
        },
    );
    (l, dl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::nan_as_inf;
    use entkv_dsl::interp::{run, Arg, HostBuffer, LaunchDims};
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    #[test]
    fn trapezoid_matches_closed_forms() {
        for n in 0..4u32 {
            let mut worst = 0.0f64;
            let mut t = -6.0;
            while t < 39.0 {
                let a = pos_moment_closed(n, t).unwrap();
                let b = ln_pos_moment(n as f64, t).exp();
                worst = worst.max(nan_as_inf((a / b - 1.0).abs()));
                t += 0.0173;
            }
            assert!(worst < 5e-12, "n = {n}: {worst:e}");
        }
        // The two methods of the numerical expectation agree where they switch (t = 40).
        for beta in [0.5, 2.0, 4.0, 2.5] {
            let scaled = ln_scaled_moment(beta, 40.0) - 800.0 - 0.5 * (2.0 * PI).ln();
            let direct = ln_pos_moment(beta, 40.0);
            assert!(
                (scaled - direct).abs() < 1e-12,
                "β = {beta}: {scaled} vs {direct}"
            );
        }
    }

    /// Monte Carlo with fixed seeds: the corrected third moment (the repo's formula is off by
    /// σ³φ(t)·... and fails), the other closed forms, and the numerical expectation for
    /// non-integer β. Tolerance: 5 standard errors of the sample mean.
    #[test]
    fn moments_match_monte_carlo() {
        let n = 2_000_000;
        let mut rng = rand::rngs::StdRng::seed_from_u64(2024);
        let z: Vec<f64> = (0..n).map(|_| StandardNormal.sample(&mut rng)).collect();
        for t in [-2.0, 0.0, 1.0, 2.0] {
            for beta in [1.0, 2.0, 3.0, 0.5, 2.5, 4.0] {
                let xs: Vec<f64> = z
                    .iter()
                    .map(|&v| if t + v > 0.0 { (t + v).powf(beta) } else { 0.0 })
                    .collect();
                let mean = xs.iter().sum::<f64>() / n as f64;
                let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
                let se = (var / n as f64).sqrt();
                let num = ln_pos_moment(beta, t).exp();
                assert!(
                    (num - mean).abs() <= 5.0 * se,
                    "β={beta} t={t}: {num} vs MC {mean} ± {se}"
                );
                if beta <= 3.0 && beta.fract() == 0.0 {
                    let cf = pos_moment_closed(beta as u32, t).unwrap();
                    assert!(
                        (cf - mean).abs() <= 5.0 * se,
                        "closed β={beta} t={t}: {cf} vs {mean}"
                    );
                }
            }
            // The repo's m3 φ-term (σ³ + 2μ²σ)φ is rejected by the same test at t = 0.
            let repo = (t * t * t + 3.0 * t) * normal_cdf(t) + (1.0 + 2.0 * t * t) * normal_pdf(t);
            let mc = z
                .iter()
                .map(|&v| if t + v > 0.0 { (t + v).powi(3) } else { 0.0 })
                .sum::<f64>()
                / n as f64;
            if t == 0.0 {
                assert!((repo - mc).abs() > 0.3, "the buggy m3 should fail at t = 0");
            }
        }
    }

    #[test]
    fn tables_build_for_the_supported_range() {
        for a in [2.0, 1.5, 4.0 / 3.0, 1.25, 1.1, 1.75, 3.0, 1.0 + 1.0 / 32.0, 17.0] {
            let alpha = Alpha::new(a).unwrap();
            let t = moment_tables(alpha).unwrap_or_else(|e| panic!("α = {a}: {e}"));
            let mut worst = 0.0f64;
            let mut x = -TAIL_X_MAX;
            while x < 200.0 {
                let want = ln_pos_moment_ref(alpha, x) / LN_2;
                worst = worst.max(nan_as_inf((t.log2_moment(x) - want).abs() / (1.0 + want.abs())));
                x += 0.0371;
            }
            assert!(worst < 1e-8, "α = {a}: {worst:e}");
            // Beyond the tail interpolant (where every use underflows) the value stays finite
            // and increasing in t.
            let far: Vec<f64> = (0..50).map(|i| t.log2_moment(-1e4 + i as f64 * 199.0)).collect();
            assert!(far.windows(2).all(|w| w[0].is_finite() && w[0] < w[1]), "α = {a}");
        }
        assert!(mills_fit().max_err <= 4e-11);
    }

    /// Runs `f(t[i]) → out[i*w ..]` for a grid of t in the interpreter.
    fn run_grid(
        ts: &[f32],
        width: usize,
        emit: &dyn Fn(&mut KernelBuilder, Var) -> Vec<Var>,
    ) -> Vec<Vec<f64>> {
        let mut k = KernelBuilder::new("grid", 32);
        let inp = k.buffer("t", Scalar::F32, Access::Read);
        let out = k.buffer("out", Scalar::F32, Access::Write);
        let n = k.scalar_param("n", Scalar::I32);
        let i = k.let_("i", k.global_thread_id().i32());
        k.if_(i.lt(n), |k| {
            let t = k.let_("t", inp.at(i));
            let vals = emit(k, t);
            for (j, v) in vals.iter().enumerate() {
                k.store(out, i * width as i32 + j as i32, *v);
            }
        });
        let kernel = k.finish().unwrap();
        let mut tb = HostBuffer::F32(ts.to_vec());
        let mut ob = HostBuffer::filled_f64(Scalar::F32, ts.len() * width, f64::NAN);
        let blocks = ts.len().div_ceil(32) as u32;
        run(
            &kernel,
            LaunchDims::linear(blocks, 32),
            &mut [Arg::Buf(&mut tb), Arg::Buf(&mut ob), Arg::scalar(ts.len() as i32)],
        )
        .unwrap();
        ob.to_f64_vec().chunks(width).map(|c| c.to_vec()).collect()
    }

    #[test]
    fn pdf_and_cdf_emitters_match_f64() {
        // f32 normals only (|t| ≤ 12.5 keeps φ and Φ above 2^-126).
        let ts: Vec<f32> = (0..2501).map(|i| -12.5 + i as f32 * 0.01).collect();
        let got = run_grid(&ts, 2, &|k, t| vec![emit_pdf(k, t), emit_cdf(k, t)]);
        let (mut e_pdf, mut e_cdf, mut at) = (0.0f64, 0.0f64, 0.0);
        for (t, g) in ts.iter().zip(&got) {
            let t = *t as f64;
            // NaN (an unwritten output keeps the grid's NaN poison) is infinitely wrong.
            e_pdf = e_pdf.max(nan_as_inf((g[0] / normal_pdf(t) - 1.0).abs()));
            let e = nan_as_inf((g[1] / normal_cdf(t) - 1.0).abs());
            if e > e_cdf {
                (e_cdf, at) = (e, t);
            }
        }
        println!("max rel err: φ {e_pdf:.2e}, Φ {e_cdf:.2e} (at t = {at})");
        assert!(e_pdf < 2e-7 && e_cdf < 2e-7, "φ {e_pdf:e} Φ {e_cdf:e}");
        let nan = run_grid(&[f32::NAN], 1, &|k, t| vec![emit_cdf(k, t)]);
        assert!(nan[0][0].is_nan());
    }

    #[test]
    fn log2_moment_emitter_matches_f64() {
        let mut ts: Vec<f32> = (0..1100).map(|i| -40.0 + i as f32 * 0.05).collect();
        ts.extend([1e3f32, 1e5, 3e6, 20.0, 16.0, 16.5]);
        for a in [2.0, 1.5, 4.0 / 3.0, 1.25, 3.0] {
            let alpha = Alpha::new(a).unwrap();
            let tables = moment_tables(alpha).unwrap();
            let got = run_grid(&ts, 2, &|k, t| {
                let (l, d) = emit_log2_moment(k, &tables, t);
                vec![l, d]
            });
            let (mut el, mut ed, mut at) = (0.0f64, 0.0f64, 0.0f64);
            for (t, g) in ts.iter().zip(&got) {
                let t = *t as f64;
                let want = ln_pos_moment_ref(alpha, t) / LN_2;
                // Absolute error in log2 units, relative to the f32 resolution of the value.
                el = el.max(nan_as_inf((g[0] - want).abs() / (1.0 + want.abs())));
                let h = 1e-4 * (1.0 + t.abs());
                let dwant =
                    (ln_pos_moment_ref(alpha, t + h) - ln_pos_moment_ref(alpha, t - h)) / (2.0 * h * LN_2);
                let e = nan_as_inf((g[1] - dwant).abs() / (1.0 + dwant.abs()));
                if e > ed {
                    (ed, at) = (e, t);
                }
            }
            println!("α = {a}: log2 M rel err {el:.2e}, derivative {ed:.2e} (at t = {at})");
            assert!(el < 6e-7, "α = {a}: {el:e}");
            assert!(ed < 1e-4, "α = {a}: {ed:e}");
        }
    }
}
