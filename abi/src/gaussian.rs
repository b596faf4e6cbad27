//! The Gaussian-aware page selector (spec §5): three kernels, their tile configurations,
//! signatures, entry names, launch geometry, workspace, and the host-side constants.
//!
//! Pipeline of one decode step, all on the GPU, no host synchronisation:
//!
//! 1. `page_score_moments` (module `page_score`), grid (page tiles, kv heads, batch): for every
//!    query head of the GQA group and every *full* page `p < pages − 1` of the sequence, the
//!    score moments of spec §5.1 from `meta_moments` (read through the block table; K and V are
//!    never read):
//!    `μ_p = Σ_i q_i·mean_i/√d (+ slope_h·(p·P + (P−1)/2 − (len−1)) with ALiBi)`,
//!    `σ_p = sqrt(Σ_i q_i²·std_i²/d)`, written to `page_mu`/`page_sigma`
//!    `[batch, q_heads, max_pages]` f32, and per (head, tile) the partial statistics
//!    `tile_stats[batch, q_heads, tiles, 6]` = (mean of μ, Σ(μ − mean)², Σσ², Σσ, max μ, max σ)
//!    over the tile's pages (a two-pass mean/M2 per tile, merged exactly by the next kernel, so
//!    the variance of the μ_p never suffers the E\[μ²\] − E\[μ\]² cancellation).
//! 2. `gauss_tau`, grid (q heads, batch): merges the tiles into `μ_g`, `σ_g` (law of total
//!    variance, `σ_g ≥ 1e-6`) and the mean page σ, then solves the distributional threshold
//!    equation of spec §5.2 for `τ̂` — the single Gaussian `n_stats·E[g_α(S; τ̂)] = 1`, or with
//!    ALiBi the page mixture `Σ_p P·E_{N(μ_p, σ_p²)}[g_α(S; τ̂)] = 1` — with a bracketed
//!    Newton iteration on the logarithm of the left side. Writes
//!    `head_stats[batch, q_heads, 4]` = (μ_g, σ_g, τ̂, mean σ_p).
//! 3. `select_gaussian`, grid (kv heads, batch): every CTA first computes `σ̄` = mean of `σ_g`
//!    over the (batch, head) pairs whose sequence has a full page, and from it the margin
//!    coefficient `c_z` and `z_page` (spec §5.4's automatic defaults; CTA (0, 0) also writes
//!    them to `sel_consts[4]` = (σ̄, c_z, z_page, heads counted)). The reference reads σ̄ back
//!    to the host (`.item()`, one sync per step); here it never leaves the device, and
//!    recomputing it per CTA (a mean over batch·q_heads values) costs less than the launch of
//!    a kernel of its own. Then the keep rule of spec §5.4 per query head,
//!    `(α−1)·(μ_p + z_page·σ_p) > τ_floor = τ̂ − (α−1)·Δ`, the union over the GQA group, the
//!    kept pages packed ascending followed by the last page (`sel_pages`, `sel_count`, see
//!    [`crate::paged`]), and per query head the threshold a "corrected" decode starts from
//!    (`tau_hat[batch, q_heads]` f32, τ̂ after the optional clamp of spec §5.5).
//!
//! ## What a decode can rely on
//! - `sel_count ≥ 1` and the last page is always selected, so every head attends ≥ 1 token.
//! - `tau_hat` is an *estimate* of the full-cache threshold, never a bound: it may lie above
//!   every selected score (then `Σ [z − τ̂]_+^β = 0`) or far below. It is NaN when the sequence
//!   has no full page (nothing to estimate from) or the solve failed (non-finite statistics).
//!   A decode starting from it must treat a non-finite `tau_hat`, or one with no selected score
//!   above it, as "no estimate" and start from its own max-based bracket `[M − 1, M]` instead
//!   (M = largest selected score); any finite start may also be clamped into that bracket,
//!   which always contains the exact threshold of the selected tokens. This is not
//!   hypothetical: on page-coherent keys (`KeyData::Peaked`) the suite sees it for a few
//!   percent of heads, clamp included.
//! - A head whose threshold could not be computed (NaN `τ̂`) keeps every page: the keep test is
//!   written as `!(score ≤ τ_floor)`, so NaN statistics fail safe (dense) rather than drop pages.
//!
//! ## Deviations from the reference implementation
//! - σ̄ is computed on the device (no `.item()`), over the heads that have a full page (the
//!   reference has no such heads: it scores a lone partial page, whose metadata this contract
//!   never reads).
//! - A sequence with a single (partial) page selects just that page and reports τ̂ = NaN
//!   (the reference uses the partial page's statistics).
//! - GQA: one selection per KV head, the union of its query heads' keep sets (the reference
//!   refuses GQA).
//! - α = 4/3 uses the correct third truncated moment; other α use a numerical expectation
//!   (the reference falls back to CPU bisection).
//! - The solver stops when converged (the reference runs a fixed 120 or 40 iterations).
//! - A head with a NaN τ̂ keeps every page (see above).
//!
//! ## Kept from the reference, knowingly
//! - With ALiBi, σ_p ignores the spread of the bias inside a page (`slope·(P²−1)/12` of
//!   variance), and σ_g includes the spread of the page means, which ALiBi makes large: σ̄ then
//!   lands far above the 1.5 switch and the margin `c_z·σ_g = 0.05·σ̄·σ_g` keeps nearly every
//!   page (32k-token `Peaked` data with the benchmark slopes: all pages kept, against 0.7%
//!   without ALiBi). The rule is reproduced as specified; a margin built from the mean σ_p
//!   instead of σ_g would restore selectivity.

use crate::geometry::{ceil_div, LaunchGeometry};
use crate::paged::{PagedShape, PagedSpec};
use crate::signature::{ArgKind, ArgSpec, Elem};
use crate::spec::SpecError;
use serde::{Deserialize, Serialize};

/// f32 values per (head, moments tile) in `tile_stats`.
pub const TILE_STATS: u32 = 6;
/// f32 values per query head in `head_stats`: (μ_g, σ_g, τ̂, mean σ_p).
pub const HEAD_STATS: u32 = 4;
/// f32 values of `sel_consts`: (σ̄, c_z, z_page, heads counted).
pub const SEL_CONSTS: u32 = 4;
/// Floor of σ_g (the reference's clamp).
pub const SIGMA_FLOOR: f64 = 1e-6;

/// The smallest and largest β = 1/(α−1) the selector's numerical expectation is built and
/// verified for (α from 1 + 1/32 to 17).
pub const GAUSSIAN_BETA_RANGE: (f64, f64) = (1.0 / 16.0, 32.0);

/// Reject α outside the selector's verified range (the decode kernels accept any α > 1).
pub fn check_gaussian_alpha(spec: &PagedSpec) -> Result<(), SpecError> {
    let beta = spec.decode.alpha.beta();
    let (lo, hi) = GAUSSIAN_BETA_RANGE;
    if !(lo..=hi).contains(&beta) {
        return Err(SpecError::BadTile {
            kernel: "select_gaussian",
            reason: format!(
                "α = {} gives β = {beta}; the Gaussian selector supports β in [{lo}, {hi}] \
                 (α from {} to {})",
                spec.decode.alpha,
                1.0 + 1.0 / hi,
                1.0 + 1.0 / lo
            ),
        });
    }
    Ok(())
}

fn bad_tile(kernel: &'static str, reason: String) -> SpecError {
    SpecError::BadTile { kernel, reason }
}

fn check_threads(kernel: &'static str, name: &str, t: u32) -> Result<(), SpecError> {
    if !(32..=1024).contains(&t) || t % 32 != 0 {
        return Err(bad_tile(
            kernel,
            format!("{name} = {t} must be a multiple of 32 in 32..=1024"),
        ));
    }
    Ok(())
}

/// Tile configuration of `page_score_moments` (the autotuner searches these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MomentsTile {
    /// Threads per CTA.
    pub threads: u32,
    /// Lanes sharing one page's two metadata rows (each loads `head_dim / lanes_per_page`
    /// dimensions of the mean row and of the std row).
    pub lanes_per_page: u32,
    /// Pages each lane group handles per CTA (their loads are in flight together).
    pub pages_per_group: u32,
}

impl MomentsTile {
    pub fn default_for(spec: &PagedSpec) -> MomentsTile {
        let d = spec.decode;
        // The pass is bound by the latency of its metadata loads, so each lane keeps four
        // pages' rows in flight: 128 threads, four pages a lane group, at least one 16-byte
        // vector of each row a lane and at most 8 lanes a page (16 dims at d = 128). The tuner
        // picked this shape on every workload (results/2026-11-30-jit-pool/2-wide-gqa):
        // `paper` 1.13–1.17×, `gqa` 1.3–1.45× (2% from its best), `wide` 2.0–3.0× faster than
        // the former default below.
        // 16-byte vectors in one metadata row.
        let vectors = d.head_dim / (16 / d.kv_dtype.size_bytes());
        let lanes_per_page = vectors.clamp(1, 8);
        if d.head_dim / lanes_per_page * d.group <= 64 {
            return MomentsTile {
                threads: 128,
                lanes_per_page,
                pages_per_group: 4,
            };
        }
        // Where the group's q slices would pass 64 registers a lane (d = 128, G = 8: 20 B of
        // spills, local ptxas 13), the former default: one 16-byte vector of each row a lane
        // (8·G registers of q) and one page a group.
        MomentsTile {
            threads: 256,
            lanes_per_page: vectors.clamp(1, 32),
            pages_per_group: 1,
        }
    }

    /// Pages one CTA covers.
    pub fn tile_pages(&self) -> u32 {
        self.threads / self.lanes_per_page * self.pages_per_group
    }

    /// `t128_l4_r4`.
    pub fn tag(&self) -> String {
        format!(
            "t{}_l{}_r{}",
            self.threads, self.lanes_per_page, self.pages_per_group
        )
    }

    pub fn check(&self, spec: &PagedSpec) -> Result<(), SpecError> {
        const K: &str = "page_score_moments";
        check_threads(K, "threads", self.threads)?;
        let d = spec.decode.head_dim;
        let l = self.lanes_per_page;
        if !l.is_power_of_two() || l > 32 || d % l != 0 {
            return Err(bad_tile(
                K,
                format!("lanes_per_page = {l} must be a power of two ≤ 32 dividing head_dim {d}"),
            ));
        }
        let dims = d / l;
        if dims * spec.decode.group > 128 {
            return Err(bad_tile(
                K,
                format!(
                    "{dims} dims per lane × group {} is too many q registers",
                    spec.decode.group
                ),
            ));
        }
        if !(1..=8).contains(&self.pages_per_group) {
            return Err(bad_tile(K, "pages_per_group must be in 1..=8".into()));
        }
        Ok(())
    }
}

/// Tile configuration of the `select_gaussian` module (threshold solve, σ̄, selection).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GaussTile {
    /// Threads per CTA of `gauss_tau` (one CTA per query head). Without ALiBi they only merge
    /// the moments tiles (the single-Gaussian solve is per head and scalar); with ALiBi every
    /// solver step is a pass over the head's pages.
    pub solve_threads: u32,
    /// Threads per CTA of `select_gaussian` (one CTA per KV head).
    pub select_threads: u32,
    /// Consecutive pages each selection thread tests per chunk.
    pub select_pages_per_thread: u32,
}

impl GaussTile {
    pub fn default_for(spec: &PagedSpec) -> GaussTile {
        GaussTile {
            solve_threads: if spec.alibi { 256 } else { 32 },
            select_threads: 256,
            // Long chunks (few block scans per sequence) within ~64 registers of page
            // statistics per thread: 16 (page, head) pairs.
            select_pages_per_thread: (16 / spec.decode.group).clamp(2, 8),
        }
    }

    /// `s32_t256_p8`.
    pub fn tag(&self) -> String {
        format!(
            "s{}_t{}_p{}",
            self.solve_threads, self.select_threads, self.select_pages_per_thread
        )
    }

    pub fn check(&self, spec: &PagedSpec) -> Result<(), SpecError> {
        const K: &str = "select_gaussian";
        check_threads(K, "solve_threads", self.solve_threads)?;
        check_threads(K, "select_threads", self.select_threads)?;
        if !(1..=16).contains(&self.select_pages_per_thread) {
            return Err(bad_tile(K, "select_pages_per_thread must be in 1..=16".into()));
        }
        check_gaussian_alpha(spec)
    }
}

/// The selector's knobs. Defaults are the reference's *effective* values (spec §5.4: the
/// public `safety_margin_z`/`max_quantile` arguments are overridden there).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GaussianParams {
    /// Page-max quantile when σ̄ < `sigma_switch` (0.99), and otherwise (0.995).
    pub q_max_low: f64,
    pub q_max_high: f64,
    /// σ̄ threshold between the two regimes (1.5).
    pub sigma_switch: f64,
    /// `c_z = c·σ̄` with c = 0.01 below the switch and 0.05 above.
    pub c_low: f64,
    pub c_high: f64,
    /// `tau_delta = excess_fraction · max(τ̂/(α−1) − mean_p(μ_p + excess_sigma·σ_p), 0)`.
    pub excess_fraction: f64,
    pub excess_sigma: f64,
    /// Lower the start threshold to the selected pages' median page maximum (spec §5.5).
    pub clamp_tau: bool,
    /// `z_clamp = Φ⁻¹(clamp_quantile^{1/P})`, divided by `clamp_divisor` (0.5 and 3).
    pub clamp_quantile: f64,
    pub clamp_divisor: f64,
    pub clamp_eps: f64,
}

impl Default for GaussianParams {
    fn default() -> Self {
        GaussianParams {
            q_max_low: 0.99,
            q_max_high: 0.995,
            sigma_switch: 1.5,
            c_low: 0.01,
            c_high: 0.05,
            excess_fraction: 0.2,
            excess_sigma: 1.5,
            clamp_tau: true,
            clamp_quantile: 0.5,
            clamp_divisor: 3.0,
            clamp_eps: 1e-4,
        }
    }
}

/// Host constants derived from [`GaussianParams`] and the page size (f64, passed as f32
/// kernel arguments).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GaussianConstants {
    /// `Φ⁻¹(q_max^{1/P})` for the two regimes.
    pub z_page_low: f64,
    pub z_page_high: f64,
    /// `Φ⁻¹(clamp_quantile^{1/P}) / clamp_divisor`.
    pub clamp_z: f64,
}

impl GaussianParams {
    pub fn check(&self) -> Result<(), SpecError> {
        let bad = |what: &str| bad_tile("select_gaussian", format!("parameter {what}"));
        for (name, q) in [
            ("q_max_low", self.q_max_low),
            ("q_max_high", self.q_max_high),
            ("clamp_quantile", self.clamp_quantile),
        ] {
            if !(q > 0.0 && q < 1.0) {
                return Err(bad(&format!("{name} = {q} must be in (0, 1)")));
            }
        }
        for (name, v) in [
            ("sigma_switch", self.sigma_switch),
            ("c_low", self.c_low),
            ("c_high", self.c_high),
            ("excess_fraction", self.excess_fraction),
            ("excess_sigma", self.excess_sigma),
            ("clamp_eps", self.clamp_eps),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(bad(&format!("{name} = {v} must be finite and ≥ 0")));
            }
        }
        if !(self.clamp_divisor.is_finite() && self.clamp_divisor > 0.0) {
            return Err(bad("clamp_divisor must be finite and > 0"));
        }
        Ok(())
    }

    /// The z-scores for page size `page_size`, computed in f64.
    pub fn constants(&self, page_size: u32) -> Result<GaussianConstants, SpecError> {
        self.check()?;
        Ok(GaussianConstants {
            z_page_low: z_page(self.q_max_low, page_size),
            z_page_high: z_page(self.q_max_high, page_size),
            clamp_z: z_page(self.clamp_quantile, page_size) / self.clamp_divisor,
        })
    }

    /// The regime scalars of `select_gaussian` after `max_pages`, in order: z_page_low,
    /// z_page_high, sigma_switch, c_low, c_high.
    pub fn regime_args(&self, c: &GaussianConstants) -> [f32; 5] {
        [
            c.z_page_low as f32,
            c.z_page_high as f32,
            self.sigma_switch as f32,
            self.c_low as f32,
            self.c_high as f32,
        ]
    }

    /// Float arguments of `select_gaussian` after the regime scalars: excess_fraction, excess_sigma,
    /// then (after the i32 `clamp`) clamp_z and clamp_eps.
    pub fn select_args(&self, c: &GaussianConstants) -> ([f32; 2], i32, [f32; 2]) {
        (
            [self.excess_fraction as f32, self.excess_sigma as f32],
            self.clamp_tau as i32,
            [c.clamp_z as f32, self.clamp_eps as f32],
        )
    }
}

/// `z_page = Φ⁻¹(q^{1/P})`: the q-quantile of the maximum of P iid standard normals. The upper
/// tail `1 − q^{1/P} = −expm1(ln q / P)` is formed directly, so no digits are lost to `1 − x`.
pub fn z_page(q: f64, page_size: u32) -> f64 {
    let tail = -((q.ln() / page_size as f64).exp_m1());
    normal_upper_quantile(tail)
}

// ----- float64 standard normal (host side) ------------------------------------------------

/// `φ(t)`, the standard normal density.
pub fn normal_pdf(t: f64) -> f64 {
    (-0.5 * t * t).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The Mills ratio `Q(x)/φ(x)` for `x ≥ 2`, by the backward recurrence of Laplace's continued
/// fraction `R = 1/(x + 1/(x + 2/(x + 3/(x + …))))`. All terms are positive (no cancellation);
/// `24 + 480/x²` levels reach full double precision for every `x ≥ 2` (checked against 5000
/// levels in the tests).
fn mills_ratio_cf(x: f64) -> f64 {
    let n = 24 + (480.0 / (x * x)) as usize;
    let mut r = 0.0;
    for j in (1..=n).rev() {
        r = j as f64 / (x + r);
    }
    1.0 / (x + r)
}

/// Upper tail `Q(x) = 1 − Φ(x)` with full relative precision for all x.
pub fn normal_upper_tail(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x >= 2.0 {
        return normal_pdf(x) * mills_ratio_cf(x);
    }
    if x <= -2.0 {
        return 1.0 - normal_pdf(x) * mills_ratio_cf(-x);
    }
    // |x| < 2: erf by its positive series erf(z) = 2/√π·e^{−z²}·Σ 2^n z^{2n+1}/(2n+1)!!,
    // z = x/√2 (no cancellation inside; 1 − erf loses at most a factor ~20 at |x| = 2).
    let z = x.abs() / std::f64::consts::SQRT_2;
    let (mut term, mut sum, mut n) = (z, z, 0.0);
    while term > 1e-18 * sum {
        n += 1.0;
        term *= 2.0 * z * z / (2.0 * n + 1.0);
        sum += term;
    }
    let erf = 2.0 / std::f64::consts::PI.sqrt() * (-z * z).exp() * sum;
    if x >= 0.0 {
        0.5 - 0.5 * erf
    } else {
        0.5 + 0.5 * erf
    }
}

/// `Φ(t)`, the standard normal CDF, with full relative precision in both tails.
pub fn normal_cdf(t: f64) -> f64 {
    normal_upper_tail(-t)
}

/// The `x` with `Q(x) = tail`, for `tail` in (0, 1): Newton on `ln Q` (concave, so the
/// iteration is monotone after the first step), from the logistic-style start, to full
/// double precision. NaN outside (0, 1).
pub fn normal_upper_quantile(tail: f64) -> f64 {
    if !(tail > 0.0 && tail < 1.0) {
        return f64::NAN;
    }
    if tail > 0.5 {
        return -normal_upper_quantile(1.0 - tail);
    }
    // Start from the tail's asymptotic inverse (x² ≈ −2 ln Q − ln(2π x²)).
    let l = -2.0 * tail.ln();
    let mut x = (l - (2.0 * std::f64::consts::PI * l).ln()).max(0.0).sqrt();
    for _ in 0..100 {
        let q = normal_upper_tail(x);
        // d ln Q/dx = −φ/Q.
        let step = (q.ln() - tail.ln()) / (normal_pdf(x) / q);
        x += step;
        if step.abs() <= 1e-15 * x.abs().max(1.0) {
            break;
        }
    }
    x
}

// ----- shapes, geometry, workspace ---------------------------------------------------------

/// Host-side validation of a selector call's shape (grid limits; the batch itself is checked
/// by [`crate::paged::check_batch`]).
pub fn check_gaussian_shape(spec: &PagedSpec, shape: &PagedShape) -> Result<(), SpecError> {
    if shape.batch == 0 || shape.kv_heads == 0 || shape.max_pages == 0 {
        return Err(SpecError::BadShape(format!(
            "batch, kv_heads and max_pages must be positive (got {}, {}, {})",
            shape.batch, shape.kv_heads, shape.max_pages
        )));
    }
    if shape.batch > 65_535 || shape.kv_heads > 65_535 {
        return Err(SpecError::BadShape(
            "batch and kv_heads must be ≤ 65535 (grid limits)".into(),
        ));
    }
    if shape.max_pages > i32::MAX as u32 / 2 {
        return Err(SpecError::BadShape(format!(
            "max_pages = {} is too large",
            shape.max_pages
        )));
    }
    // `page_score_moments` numbers its (page tile, KV head) blocks in 32 bits, and a tile holds
    // at least one page.
    if shape.max_pages as u64 * shape.kv_heads as u64 >= 1 << 32 {
        return Err(SpecError::BadShape(format!(
            "max_pages × kv_heads = {} × {} must be < 2^32 for the Gaussian selector",
            shape.max_pages, shape.kv_heads
        )));
    }
    let _ = shape.q_heads(spec);
    Ok(())
}

/// Moments tiles per (batch, head): enough for the longest sequence's full pages (≥ 1).
pub fn moments_tiles(tile: &MomentsTile, shape: &PagedShape) -> u32 {
    ceil_div(shape.max_pages.saturating_sub(1) as u64, tile.tile_pages() as u64).max(1) as u32
}

pub fn page_score_moments_geometry(tile: &MomentsTile, shape: &PagedShape) -> LaunchGeometry {
    LaunchGeometry {
        grid: [moments_tiles(tile, shape), shape.kv_heads, shape.batch],
        block: tile.threads,
        shared_bytes: 0,
    }
}

pub fn gauss_tau_geometry(spec: &PagedSpec, tile: &GaussTile, shape: &PagedShape) -> LaunchGeometry {
    LaunchGeometry {
        grid: [shape.q_heads(spec), shape.batch, 1],
        block: tile.solve_threads,
        shared_bytes: 0,
    }
}

pub fn select_gaussian_geometry(tile: &GaussTile, shape: &PagedShape) -> LaunchGeometry {
    LaunchGeometry {
        grid: [shape.kv_heads, shape.batch, 1],
        block: tile.select_threads,
        shared_bytes: 0,
    }
}

/// Element counts of the selector's buffers (all f32 except the selection, see
/// [`crate::paged`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GaussianWorkspace {
    /// `page_mu` and `page_sigma`, each `[batch, q_heads, max_pages]`.
    pub page_elems: u64,
    /// `tile_stats`: `[batch, q_heads, tiles, TILE_STATS]`.
    pub tile_stats_elems: u64,
    /// `head_stats`: `[batch, q_heads, HEAD_STATS]`.
    pub head_stats_elems: u64,
    /// `sel_consts`: `SEL_CONSTS`.
    pub consts_elems: u64,
    /// `tau_hat` (an output): `[batch, q_heads]`.
    pub tau_hat_elems: u64,
}

impl GaussianWorkspace {
    /// Bytes of the workspace proper (without `tau_hat`).
    pub fn bytes(&self) -> u64 {
        4 * (2 * self.page_elems + self.tile_stats_elems + self.head_stats_elems + self.consts_elems)
    }
}

pub fn gaussian_workspace(spec: &PagedSpec, tile: &MomentsTile, shape: &PagedShape) -> GaussianWorkspace {
    let heads = shape.batch as u64 * shape.q_heads(spec) as u64;
    GaussianWorkspace {
        page_elems: heads * shape.max_pages as u64,
        tile_stats_elems: heads * moments_tiles(tile, shape) as u64 * TILE_STATS as u64,
        head_stats_elems: heads * HEAD_STATS as u64,
        consts_elems: SEL_CONSTS as u64,
        tau_hat_elems: heads,
    }
}

// ----- entry names and signatures ----------------------------------------------------------

/// `page_score_moments__<spec>__<tile>`.
pub fn page_score_moments_entry(spec: &PagedSpec, tile: &MomentsTile) -> String {
    format!("page_score_moments__{}__{}", spec.tag(), tile.tag())
}

/// Entry names of the `select_gaussian` module: (`gauss_tau__…`, `select_gaussian__…`).
pub fn gauss_entry_names(spec: &PagedSpec, tile: &GaussTile) -> (String, String) {
    let suffix = format!("{}__{}", spec.tag(), tile.tag());
    (
        format!("gauss_tau__{suffix}"),
        format!("select_gaussian__{suffix}"),
    )
}

const fn buf(name: &'static str, elem: Elem, writes: bool) -> ArgSpec {
    ArgSpec {
        name,
        kind: ArgKind::Buffer { elem, writes },
    }
}

const fn scalar(name: &'static str, kind: ArgKind) -> ArgSpec {
    ArgSpec { name, kind }
}

pub fn page_score_moments_signature(spec: &PagedSpec) -> Vec<ArgSpec> {
    let mut v = vec![
        buf("q", spec.decode.q_dtype.into(), false),
        buf("meta_moments", spec.decode.kv_dtype.into(), false),
        buf("block_table", Elem::I32, false),
        buf("seq_lens", Elem::I32, false),
    ];
    if spec.alibi {
        v.push(buf("alibi_slopes", Elem::F32, false));
    }
    v.extend([
        buf("page_mu", Elem::F32, true),
        buf("page_sigma", Elem::F32, true),
        buf("tile_stats", Elem::F32, true),
        scalar("max_pages", ArgKind::I32),
    ]);
    v
}

pub fn gauss_tau_signature() -> Vec<ArgSpec> {
    vec![
        buf("tile_stats", Elem::F32, false),
        buf("page_mu", Elem::F32, false),
        buf("page_sigma", Elem::F32, false),
        buf("seq_lens", Elem::I32, false),
        buf("head_stats", Elem::F32, true),
        scalar("tiles", ArgKind::I32),
        scalar("tile_pages", ArgKind::I32),
        scalar("max_pages", ArgKind::I32),
    ]
}

pub fn select_gaussian_signature() -> Vec<ArgSpec> {
    vec![
        buf("page_mu", Elem::F32, false),
        buf("page_sigma", Elem::F32, false),
        buf("head_stats", Elem::F32, false),
        buf("seq_lens", Elem::I32, false),
        buf("sel_consts", Elem::F32, true),
        buf("sel_pages", Elem::I32, true),
        buf("sel_count", Elem::I32, true),
        buf("tau_hat", Elem::F32, true),
        scalar("max_pages", ArgKind::I32),
        scalar("z_page_low", ArgKind::F32),
        scalar("z_page_high", ArgKind::F32),
        scalar("sigma_switch", ArgKind::F32),
        scalar("c_low", ArgKind::F32),
        scalar("c_high", ArgKind::F32),
        scalar("excess_fraction", ArgKind::F32),
        scalar("excess_sigma", ArgKind::F32),
        scalar("clamp", ArgKind::I32),
        scalar("clamp_z", ArgKind::F32),
        scalar("clamp_eps", ArgKind::F32),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{DType, DecodeSpec};

    fn spec(alpha: f64, d: u32, g: u32, alibi: bool) -> PagedSpec {
        PagedSpec::new(DecodeSpec::new(alpha, d, g, DType::F16).unwrap(), 16, alibi, 4).unwrap()
    }

    #[test]
    fn normal_cdf_known_values() {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-14 * b.abs();
        assert!(close(normal_cdf(-1.0), 0.158_655_253_931_457_05));
        assert!(close(normal_cdf(-2.0), 0.022_750_131_948_179_21));
        assert!(close(normal_cdf(-5.0), 2.866_515_718_791_939e-7));
        assert!(close(normal_cdf(-10.0), 7.619_853_024_160_527e-24));
        assert!(close(normal_cdf(0.5), 0.691_462_461_274_013_1));
        assert!(close(normal_cdf(0.0), 0.5));
        // The two sides of the series/fraction switch agree.
        let (a, b) = (normal_upper_tail(2.0 - 1e-12), normal_upper_tail(2.0));
        assert!((a - b).abs() / b < 1e-10);
        // The continued fraction is converged: compare with 5000 levels.
        for i in 0..400 {
            let x = 2.0 + i as f64 * 0.1;
            let mut r = 0.0;
            for j in (1..=5000).rev() {
                r = j as f64 / (x + r);
            }
            let deep = 1.0 / (x + r);
            assert!((mills_ratio_cf(x) / deep - 1.0).abs() < 4e-16, "x = {x}");
        }
    }

    #[test]
    fn z_page_matches_the_spec_table() {
        // Spec §5.4's table (4 decimals).
        for (q, p, z) in [
            (0.995, 16, 3.4199),
            (0.99, 16, 3.2259),
            (0.995, 32, 3.6041),
            (0.995, 64, 3.7803),
        ] {
            assert!((z_page(q, p) - z).abs() < 1e-4, "{q} {p}: {}", z_page(q, p));
        }
        // z_clamp for P = 16 (spec §5.5).
        assert!((z_page(0.5, 16) - 1.7235).abs() < 1e-4);
        // Round trips.
        for tail in [0.7, 0.5, 0.1, 1e-3, 1e-9, 1e-200] {
            let x = normal_upper_quantile(tail);
            assert!((normal_upper_tail(x) / tail - 1.0).abs() < 1e-13, "{tail}");
        }
        assert!(normal_upper_quantile(0.0).is_nan() && normal_upper_quantile(1.0).is_nan());
    }

    #[test]
    fn tiles_geometry_and_workspace() {
        for (d, g) in [(32, 1), (64, 3), (128, 8)] {
            let s = spec(1.5, d, g, false);
            let t = MomentsTile::default_for(&s);
            t.check(&s).unwrap();
            GaussTile::default_for(&s).check(&s).unwrap();
            // At least one 16-byte vector of each row a lane, at most 8 lanes a page, four
            // pages a group; where q slices would pass 64 registers a lane (128 dims × 8 heads
            // over 8 lanes) one vector a lane and one page.
            let wide_group = (d, g) == (128, 8);
            assert_eq!(t.lanes_per_page, if wide_group { 16 } else { (d / 8).min(8) });
            assert_eq!(t.pages_per_group, if wide_group { 1 } else { 4 });
            assert!(d / t.lanes_per_page * g <= 64);
        }
        let s = spec(1.5, 32, 2, true);
        let t = MomentsTile::default_for(&s);
        assert_eq!(t.tile_pages(), 128);
        let shape = PagedShape {
            batch: 3,
            kv_heads: 2,
            num_pages: 100,
            max_pages: 300,
        };
        assert_eq!(moments_tiles(&t, &shape), 3);
        let one = PagedShape {
            max_pages: 1,
            ..shape
        };
        assert_eq!(moments_tiles(&t, &one), 1);
        let g = page_score_moments_geometry(&t, &shape);
        assert_eq!(g.grid, [3, 2, 3]);
        let w = gaussian_workspace(&s, &t, &shape);
        assert_eq!(w.page_elems, 3 * 4 * 300);
        assert_eq!(w.tile_stats_elems, 3 * 4 * 3 * 6);
        assert_eq!(
            gauss_tau_geometry(&s, &GaussTile::default_for(&s), &shape).grid,
            [4, 3, 1]
        );
        assert_eq!(page_score_moments_signature(&s).len(), 9);
        assert_eq!(page_score_moments_signature(&spec(1.5, 32, 2, false)).len(), 8);
        let (a, c) = gauss_entry_names(&s, &GaussTile::default_for(&s));
        assert!(a.starts_with("gauss_tau__a1p5_d32_g2") && a.ends_with("__s256_t256_p8"));
        assert!(c.starts_with("select_gaussian__") && c.contains("_alibi__"));
        assert!(page_score_moments_entry(&s, &t).starts_with("page_score_moments__"));
    }

    #[test]
    fn bad_configs_are_typed_errors() {
        let s = spec(1.5, 32, 8, false);
        let mut t = MomentsTile::default_for(&s);
        t.lanes_per_page = 3;
        assert!(matches!(t.check(&s), Err(SpecError::BadTile { .. })));
        t.lanes_per_page = 1;
        assert!(t.check(&s).is_err(), "32 dims × 8 heads of q registers");
        let mut g = GaussTile::default_for(&s);
        g.select_threads = 48;
        assert!(g.check(&s).is_err());
        let far = spec(40.0, 32, 1, false);
        assert!(GaussTile::default_for(&far).check(&far).is_err());
        let p = GaussianParams {
            q_max_low: 1.0,
            ..Default::default()
        };
        assert!(p.constants(16).is_err());
        let shape = PagedShape {
            batch: 0,
            kv_heads: 1,
            num_pages: 1,
            max_pages: 1,
        };
        assert!(check_gaussian_shape(&s, &shape).is_err());
        // The moments pass's 32-bit block numbering: max_pages × kv_heads < 2^32.
        let wide = PagedShape {
            batch: 1,
            kv_heads: 1 << 8,
            num_pages: 1,
            max_pages: (1 << 24) - 1,
        };
        check_gaussian_shape(&s, &wide).unwrap();
        let over = PagedShape {
            max_pages: 1 << 24,
            ..wide
        };
        let e = check_gaussian_shape(&s, &over).unwrap_err().to_string();
        assert!(e.contains("max_pages × kv_heads"), "{e}");
    }
}
