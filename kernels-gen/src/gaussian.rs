//! The Gaussian-aware page selector (spec §5; contract, geometry and deviations in
//! `entkv_abi::gaussian`): `page_score_moments` (module `page_score`), then `gauss_tau` and
//! `select_gaussian` (module `select_gaussian`, which also computes σ̄), their float64
//! references, and the suite checks.
//!
//! Notation: `a = α − 1`, `β = 1/a`, z-space = `a`·(score); `M_β(t) = E[(t + Z)_+^β]`
//! ([`crate::normal`]).
//!
//! ## The threshold solve
//! The equation `Σ_c w_c·E[(a·S_c − τ)_+^β] = 1` (one component `w = n_stats`,
//! `S ~ N(μ_g, σ_g²)` without ALiBi; one per page, `w = P`, `S ~ N(μ_p, σ_p²)`, with ALiBi) is
//! solved for the logarithm of its left side,
//!
//! ```text
//! Λ(τ) = log2 Σ_c 2^{log2 w_c + β·log2 s_c + log2 M_β((m_c − τ)/s_c)} = 0,
//! m_c = a·μ_c, s_c = a·σ_c   (the component's mean and std in z-space)
//! ```
//!
//! which is decreasing in τ, and for the single Gaussian concave (log M_β is concave: M_β is
//! the convolution of the log-concave `x_+^β` with a Gaussian). Logs keep every quantity in
//! range (the left side spans hundreds of orders of magnitude over a bracket) and make Newton
//! nearly exact in the Gaussian tail, where `log M_β(t) ≈ −t²/2`.
//! - Bracket, valid by construction: `E[(c + σZ)_+^β] ≥ c^β/2` for `c ≥ 0`, so at
//!   `lo = max_c m_c − (2/w)^{1/β}` the largest component alone reaches 1 (`Λ(lo) ≥ 0`); at
//!   `hi = max_c(m_c) + 40·max_c σ_c` every component is `w·σ^β·M_β(−40)` ≈ 2^-1150 (`Λ < 0`).
//!   Both ends are checked, and expanded (doubling) if rounding or non-finite data break them.
//! - Newton steps on Λ from the lower end; a step leaving the bracket is replaced by the
//!   midpoint; every evaluation shrinks the bracket. Stops when a step or the bracket is below
//!   `2^-21·max(|τ|, σ)` (σ = σ_Y = a·σ_g, or `a·σ_g` for the mixture): 5–8 evaluations in
//!   every test (two of them the bracket checks), at most 200.
//! - Accuracy against the float64 bisection on the exact expectation: the device evaluates
//!   `log2 M_β` to a few ulps of itself, which moves τ̂ by ~3e-8·|t*|·σ_Y (t* ≈ −3…−8 at the
//!   root for long contexts). Given exact statistics (the solver test) τ̂ is within
//!   `2e-7·(|τ̂| + a·(σ_g + |μ_g|))` of the reference, at n from 16 to 2^30 and σ from 1e-6 to
//!   300. In the pipeline the statistics feeding it (μ_g, σ_g: f32 dot products and tree
//!   reductions) carry ~1e-6 relative error, which moves τ̂ by `a·(δμ_g + |t*|·δσ_g)`.
//!
//! ## Check tolerances (f32 device vs float64 reference on identical, already-rounded inputs)
//! - `μ_p`: `(d + 4)·2⁻²⁴·(Σ_i |q_i·mean_i|/√d + |ALiBi term|)` (a d-term f32 dot product).
//! - `σ_p`: `(d + 8)·2⁻²⁴·σ_p` (a d-term sum of squares and a square root).
//! - `μ_g`, `σ_g`, mean σ_p: `2e-6·(σ_g + mean|μ_p|) + max_p tol(μ_p)`; σ̄: `2e-6·σ̄ +
//!   max tol(μ_p)` (rounding noise of the μ_p adds variance to σ_g², visible when σ_p is
//!   tiny, as with tied keys).
//! - τ̂: `1e-5·a·(σ_g + mean|μ_p|) + 1e-6·|τ̂|`; `tau_hat` (after the clamp) the same plus
//!   the page tolerances. Every check observes at most 5% of every tolerance in the
//!   interpreter, which leaves room for the GPU's approximate `ex2`/`lg2`.
//! - Selection: equal to the reference except pages whose reference score
//!   `a·(μ_p + z_page·σ_p)` lies within `3·tol(τ̂) + a·(tol μ_p + z_page·tol σ_p)` of a group
//!   head's `τ_floor` (either decision is right up to rounding there); always ascending, the
//!   last page last, `sel_count` = the list's length.

use crate::data::Tensor;
use crate::decode_checks::host_tensor;
use crate::entmax::inside_or_midpoint;
use crate::normal::{emit_log2_moment, ln_pos_moment_ref, moment_tables};
use crate::paged_data::{paged_reference, KeyData, PagedCase, PagedInputs};
use crate::pipelines::{self, Pipeline};
use crate::program::Program;
use crate::suite::{KernelCheck, Outcome, SuiteError};
use crate::topk::{append_kept, SelectionRow};
use crate::{scalar_of, KernelGenError, KernelModule};
use entkv_abi::gaussian::*;
use entkv_abi::{check_batch, Alpha, DType, DecodeSpec, PagedShape, PagedSpec};
use entkv_dsl::interp::HostBuffer;
use entkv_dsl::*;

/// Most solver iterations (end checks, expansions and Newton/bisection steps together).
const MAX_SOLVE_ITERS: i32 = 200;
/// Converged when a step or the bracket is below this fraction of `max(|τ|, σ)`.
const SOLVE_REL_TOL: f64 = 1.0 / 2_097_152.0;
/// Floor of a page's z-space σ in the mixture (σ = 0 would make `t` infinite).
const MIX_SIGMA_FLOOR: f64 = 1e-20;
/// Distance of the upper bracket end, in σ.
const BRACKET_T: f64 = 40.0;

// ----- kernels -----------------------------------------------------------------------------

/// `page_score_moments`: grid (tiles, kv heads, batch).
pub fn moments_kernel(spec: &PagedSpec, tile: &MomentsTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let ds = &spec.decode;
    let (d, group, psize) = (ds.head_dim, ds.group, spec.page_size as i32);
    let mut k = KernelBuilder::new(page_score_moments_entry(spec, tile), tile.threads);
    let q = k.buffer("q", scalar_of(ds.q_dtype), Access::Read);
    let meta = k.buffer("meta_moments", scalar_of(ds.kv_dtype), Access::Read);
    let block_table = k.buffer("block_table", Scalar::I32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let slopes = spec
        .alibi
        .then(|| k.buffer("alibi_slopes", Scalar::F32, Access::Read));
    let page_mu = k.buffer("page_mu", Scalar::F32, Access::Write);
    let page_sigma = k.buffer("page_sigma", Scalar::F32, Access::Write);
    let tile_stats = k.buffer("tile_stats", Scalar::F32, Access::Write);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);

    let lanes = tile.lanes_per_page;
    let dims = d / lanes;
    let kvec = dims.min(16 / ds.kv_dtype.size_bytes());
    let qvec = dims.min(16 / ds.q_dtype.size_bytes());
    let lane_groups = tile.threads / lanes;
    let tile_pages = tile.tile_pages() as i32;
    let red = k.shared("red", Scalar::F32, tile.threads / WARP * 5 * group);

    // The grid is (tiles, kv heads, batch), but CTAs take (tile, kv head) pairs KV head
    // fastest, so CTAs launched together read the same pages' block-table entries and the
    // neighbouring metadata rows of every head (as the box pass does with heads on grid x).
    // A remap, not another grid: the launch geometry, and bundles built before, stay as they are.
    let tiles = k.let_("tiles", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    // 32-bit (`check_gaussian_shape` keeps max_pages × kv heads below 2^32; a 64-bit division
    // is a ptxas subroutine with a stack frame).
    let linear = k.let_("linear", k.block_idx(Axis::X) + k.block_idx(Axis::Y) * tiles);
    let tile_ix = k.let_("tile", (linear / kv_heads).i32());
    let kvh = k.let_("kvh", linear % kv_heads);
    let b = k.let_("b", k.block_idx(Axis::Z));
    let q_heads = k.let_("q_heads", kv_heads * group);
    let tid = k.let_("tid", k.thread_idx());
    let sub = k.let_("sub", tid % lanes);
    let grp = k.let_("grp", (tid / lanes).i32());
    let len = k.let_("len", seq_lens.at(b));
    // Full pages: every page but the last (which may be partial and is always attended).
    let stats = k.let_("stats", (len + (psize - 1)) / psize - 1i32);
    let p0 = k.let_("p0", tile_ix * tile_pages);
    // Uniform: a tile past the sequence's full pages has nothing to do.
    k.if_(p0.lt(stats), |k| {
        // q/√d, this lane's slice, for every head of the group.
        let inv_sqrt_d = 1.0 / (d as f64).sqrt();
        let mut qs: Vec<Vec<Var>> = Vec::new();
        let mut head_slopes = Vec::new();
        for g in 0..group {
            let h = k.let_("h", kvh * group + g);
            if let Some(sl) = slopes {
                head_slopes.push(k.let_("slope", sl.at(h)));
            }
            let base = k.let_("q_base", (b * q_heads + h).i64() * d as i64 + (sub * dims).i64());
            let mut regs = Vec::new();
            for c in 0..dims / qvec {
                for x in k.load_vec("q", q, base + (c * qvec) as i64, qvec) {
                    regs.push(k.let_("qs", x.f32() * inv_sqrt_d));
                }
            }
            qs.push(regs);
        }
        // Every page's two metadata rows first, so the loads are in flight together. Pages
        // past the full ones load page 0 (always a full page here) and are discarded.
        let mut pages = Vec::new();
        for r in 0..tile.pages_per_group {
            let p = k.let_("p", p0 + grp + (r * lane_groups) as i32);
            let valid = k.let_("valid", p.lt(stats));
            let pc = select(valid, p, 0i32);
            let phys = k.let_(
                "phys",
                block_table.at(b.i64() * max_pages.clone().i64() + pc.i64()),
            );
            let row = k.let_(
                "mrow",
                (phys.i64() * kv_heads.i64() + kvh.i64()) * (2 * d) as i64 + (sub * dims).i64(),
            );
            let mut mean = Vec::new();
            let mut std = Vec::new();
            for c in 0..dims / kvec {
                mean.extend(k.load_vec("mean", meta, row + (c * kvec) as i64, kvec));
            }
            for c in 0..dims / kvec {
                std.extend(k.load_vec("std", meta, row + (d + c * kvec) as i64, kvec));
            }
            pages.push((p, valid, mean, std));
        }
        // (write, per head (μ_p, σ_p, σ_p²)) per page.
        let mut vals = Vec::new();
        for (p, valid, mean, std) in pages {
            let items: Vec<(Reduce, Expr)> = qs
                .iter()
                .flat_map(|qg| {
                    let mu = mean
                        .iter()
                        .zip(qg)
                        .fold(f32c(0.0), |acc, (m, qv)| fma(*qv, m.f32(), acc));
                    let s2 = std.iter().zip(qg).fold(f32c(0.0), |acc, (s, qv)| {
                        let v = *qv * s.f32();
                        fma(v.clone(), v, acc)
                    });
                    [(Reduce::Sum, mu), (Reduce::Sum, s2)]
                })
                .collect();
            let tot = k.warp_allreduce_width(&items, lanes);
            let write = k.let_("write", valid.and(sub.eq_(0u32)));
            let mut per_head = Vec::new();
            for g in 0..group {
                let h = k.let_("h", kvh * group + g);
                let mut mu = tot[2 * g as usize].e();
                if let Some(slope) = head_slopes.get(g as usize) {
                    // ALiBi at the page's mean position (spec §5.1): p·P + (P−1)/2 − (len − 1),
                    // formed in integers first so it is exact in f32 below 2^24 tokens. (The
                    // reference clamps the position to n_stats − 1; for full pages it never
                    // binds.)
                    let off = (p * psize - (len - 1i32)).f32() + (psize - 1) as f64 * 0.5;
                    mu = fma(*slope, off, mu);
                }
                let mu = k.let_("mu_p", mu);
                let s2 = tot[2 * g as usize + 1];
                let sigma = k.let_("sigma_p", s2.sqrt());
                let at = k.let_("at", (b * q_heads + h).i64() * max_pages.clone().i64() + p.i64());
                k.if_(write, |k| {
                    k.store(page_mu, at, mu);
                    k.store(page_sigma, at, sigma);
                });
                per_head.push((mu, sigma, s2));
            }
            vals.push((write, per_head));
        }
        // Per-head partial statistics of this tile: Σμ, Σσ², Σσ, max μ, max σ, then the
        // centred Σ(μ − mean)² (two passes over registers: no cancellation).
        let mut items = Vec::new();
        for g in 0..group as usize {
            let ninf = f32c(f64::NEG_INFINITY);
            let (mut s_mu, mut s_s2, mut s_s1, mut m_mu, mut m_s) =
                (f32c(0.0), f32c(0.0), f32c(0.0), ninf.clone(), ninf.clone());
            for (write, per_head) in &vals {
                let (mu, sigma, s2) = per_head[g];
                s_mu = s_mu + select(*write, mu, 0.0f32);
                s_s2 = s_s2 + select(*write, s2, 0.0f32);
                s_s1 = s_s1 + select(*write, sigma, 0.0f32);
                m_mu = m_mu.max(select(*write, mu, ninf.clone()));
                m_s = m_s.max(select(*write, sigma, ninf.clone()));
            }
            items.extend([
                (Reduce::Sum, s_mu),
                (Reduce::Sum, s_s2),
                (Reduce::Sum, s_s1),
                (Reduce::Max, m_mu),
                (Reduce::Max, m_s),
            ]);
        }
        let tot = k.block_allreduce_many(&items, red);
        let n_t = k.let_("n_t", (stats - p0).min(tile_pages).f32());
        let means: Vec<Var> = (0..group as usize)
            .map(|g| k.let_("mean_t", tot[5 * g] / n_t))
            .collect();
        let centred: Vec<(Reduce, Expr)> = (0..group as usize)
            .map(|g| {
                let e = vals.iter().fold(f32c(0.0), |acc, (write, per_head)| {
                    let dmu = per_head[g].0 - means[g];
                    acc + select(*write, dmu.clone() * dmu, 0.0f32)
                });
                (Reduce::Sum, e)
            })
            .collect();
        let m2 = k.block_allreduce_many(&centred, red);
        k.if_(tid.eq_(0u32), |k| {
            for g in 0..group as usize {
                let h = kvh * group + g as u32;
                let base = k.let_(
                    "ts_base",
                    ((b * q_heads + h).i64() * tiles.i64() + tile_ix.i64()) * TILE_STATS as i64,
                );
                let outs = [
                    means[g].e(),
                    m2[g].e(),
                    tot[5 * g + 1].e(),
                    tot[5 * g + 2].e(),
                    tot[5 * g + 3].e(),
                    tot[5 * g + 4].e(),
                ];
                for (i, v) in outs.into_iter().enumerate() {
                    k.store(tile_stats, base + i as i64, v);
                }
            }
        });
    });
    Ok(k.finish()?)
}

/// Safeguarded Newton on `Λ(τ) = 0` (decreasing in τ) from a bracket `[lo0, hi0]` that is
/// checked and, if needed, expanded first; `eval(τ)` returns `(Λ, dΛ/dτ)` and must be
/// block-uniform (it is emitted once, inside one loop). Returns τ — NaN when no bracket could
/// be established (non-finite data) — and the number of evaluations.
fn solve_threshold(
    k: &mut KernelBuilder,
    lo0: Expr,
    hi0: Expr,
    scale: Var,
    eval: &dyn Fn(&mut KernelBuilder, Var) -> (Expr, Expr),
) -> (Var, Var) {
    let lo = k.let_("s_lo", lo0);
    let hi = k.let_("s_hi", hi0);
    let w = k.let_("s_w", (hi - lo).max(scale));
    let x = k.let_("s_x", lo);
    let lam_lo = k.let_typed("s_lam_lo", Scalar::F32, 0.0);
    let d_lo = k.let_typed("s_d_lo", Scalar::F32, 0.0);
    // 0: checking lo; 1: checking hi; 2: Newton inside the bracket.
    let phase = k.let_typed("s_phase", Scalar::I32, 0);
    let it = k.let_typed("s_it", Scalar::I32, 0);
    let done = k.let_("s_done", false);
    k.while_(done.not().and(it.lt(MAX_SOLVE_ITERS)), |k| {
        let (l, dl) = eval(k, x);
        let lam = k.let_("s_lam", l);
        let dlam = k.let_("s_dlam", dl);
        let pos = k.let_("s_pos", lam.ge(0.0f32));
        k.if_else(
            phase.eq_(0i32),
            |k| {
                k.if_else(
                    pos,
                    |k| {
                        k.assign(lam_lo, lam);
                        k.assign(d_lo, dlam);
                        k.assign(phase, 1i32);
                        k.assign(x, hi);
                    },
                    |k| {
                        // lo is right of the root: it bounds it from above; step lo down.
                        k.assign(hi, hi.min(x));
                        k.assign(lo, x - w);
                        k.assign(w, w * 2.0f32);
                        k.assign(x, lo);
                    },
                );
            },
            |k| {
                k.if_else(
                    phase.eq_(1i32),
                    |k| {
                        k.if_else(
                            pos,
                            |k| {
                                // hi is left of the root: it is the new lo; step hi up.
                                k.assign(lo, x);
                                k.assign(lam_lo, lam);
                                k.assign(d_lo, dlam);
                                k.assign(hi, x + w);
                                k.assign(w, w * 2.0f32);
                                k.assign(x, hi);
                            },
                            |k| {
                                k.assign(phase, 2i32);
                                let cand = k.let_("s_cand", lo - lam_lo / d_lo);
                                let next = inside_or_midpoint(k, cand, lo, hi);
                                k.assign(x, next);
                            },
                        );
                    },
                    |k| {
                        k.assign(lo, select(pos, x, lo));
                        k.assign(hi, select(pos, hi, x));
                        let cand = k.let_("s_cand", x - lam / dlam);
                        let next = inside_or_midpoint(k, cand, lo, hi);
                        let tol = k.let_("s_tol", x.abs().max(scale) * SOLVE_REL_TOL);
                        k.assign(
                            done,
                            (next - x).abs().le(tol).or((hi - lo).le(tol)).or(lam.eq_(0.0f32)),
                        );
                        k.assign(x, next);
                    },
                );
            },
        );
        k.assign(it, it + 1i32);
    });
    (k.let_("s_tau", select(phase.eq_(2i32), x, f32c(f64::NAN))), it)
}

/// The kernels of module `select_gaussian`: `gauss_tau`, `select_gaussian`.
pub fn select_module_kernels(spec: &PagedSpec, tile: &GaussTile) -> Result<Vec<Kernel>, KernelGenError> {
    Ok(vec![tau_kernel(spec, tile)?, select_kernel(spec, tile)?])
}

/// `gauss_tau`: grid (q heads, batch).
pub fn tau_kernel(spec: &PagedSpec, tile: &GaussTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let tables = moment_tables(spec.decode.alpha)?;
    let (name, _) = gauss_entry_names(spec, tile);
    let threads = tile.solve_threads;
    let mut k = KernelBuilder::new(name, threads);
    let tile_stats = k.buffer("tile_stats", Scalar::F32, Access::Read);
    let page_mu = k.buffer("page_mu", Scalar::F32, Access::Read);
    let page_sigma = k.buffer("page_sigma", Scalar::F32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let head_stats = k.buffer("head_stats", Scalar::F32, Access::Write);
    let tiles = k.scalar_param("tiles", Scalar::I32);
    let tile_pages = k.scalar_param("tile_pages", Scalar::I32);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let red = k.shared("red", Scalar::F32, threads / WARP * 5);

    let a = spec.decode.alpha.value() - 1.0;
    let beta = spec.decode.alpha.beta();
    let psize = spec.page_size as i32;
    let h = k.let_("h", k.block_idx(Axis::X));
    let b = k.let_("b", k.block_idx(Axis::Y));
    let q_heads = k.let_("q_heads", k.grid_dim(Axis::X));
    let head = k.let_("head", (b * q_heads + h).i64());
    let tid = k.let_("tid", k.thread_idx());
    let len = k.let_("len", seq_lens.at(b));
    let stats = k.let_("stats", (len + (psize - 1)) / psize - 1i32);
    let out = k.let_("out", head * HEAD_STATS as i64);
    let tiles = k.let_("tiles_v", tiles);
    let tile_pages = k.let_("tile_pages_v", tile_pages);
    k.if_else(
        stats.gt(0i32),
        |k| {
            // Merge the moments tiles: mean and M2 by Chan's exact combination.
            let ntiles = k.let_("ntiles", (stats + tile_pages - 1i32) / tile_pages);
            let acc: Vec<Var> = [0.0, 0.0, 0.0, f64::NEG_INFINITY, f64::NEG_INFINITY]
                .iter()
                .map(|&v| k.let_typed("acc", Scalar::F32, v))
                .collect();
            let tile_n = |t: Expr| (stats - t * tile_pages).min(tile_pages).f32();
            k.for_("t", tid.i32(), ntiles, threads as i32, |k, t| {
                let base = k.let_("ts", (head * tiles.i64() + t.clone().i64()) * TILE_STATS as i64);
                let n_t = k.let_("n_t", tile_n(t));
                k.assign(acc[0], fma(n_t, tile_stats.at(base), acc[0]));
                k.assign(acc[1], acc[1] + tile_stats.at(base + 2i64));
                k.assign(acc[2], acc[2] + tile_stats.at(base + 3i64));
                k.assign(acc[3], acc[3].max(tile_stats.at(base + 4i64)));
                k.assign(acc[4], acc[4].max(tile_stats.at(base + 5i64)));
            });
            let ops = [Reduce::Sum, Reduce::Sum, Reduce::Sum, Reduce::Max, Reduce::Max];
            let items: Vec<(Reduce, Expr)> = ops.iter().zip(&acc).map(|(o, v)| (*o, v.e())).collect();
            let tot = k.block_allreduce_many(&items, red);
            let nf = k.let_("nf", stats.f32());
            let mu_g = k.let_("mu_g", tot[0] / nf);
            let m2 = k.let_typed("m2", Scalar::F32, 0.0);
            k.for_("t", tid.i32(), ntiles, threads as i32, |k, t| {
                let base = k.let_("ts", (head * tiles.i64() + t.clone().i64()) * TILE_STATS as i64);
                let n_t = k.let_("n_t", tile_n(t));
                let dm = k.let_("dm", tile_stats.at(base) - mu_g);
                k.assign(m2, m2 + tile_stats.at(base + 1i64) + n_t * dm * dm);
            });
            let m2 = k.block_allreduce(Reduce::Sum, m2, red);
            // Law of total variance over the stats pages (equal weights), σ_g ≥ 1e-6.
            let sigma_g = k.let_("sigma_g", ((tot[1] + m2) / nf).sqrt().max(SIGMA_FLOOR));
            let mean_sigma = k.let_("mean_sigma", tot[2] / nf);
            let tau = if spec.alibi {
                // Page mixture: Λ(τ) = log2 Σ_p 2^{log2 P + β log2 σ_p + log2 M_β(t_p)}.
                let scale = k.let_("scale", sigma_g * a);
                let mx = k.let_("max_m", tot[3] * a);
                let sx = k.let_("max_s", (tot[4] * a).max(MIX_SIGMA_FLOOR));
                let lw = (psize as f64).log2();
                let lo = mx - ((1.0 - lw) / beta).exp2();
                let hi = fma(sx, BRACKET_T, mx);
                let (tau, _) = solve_threshold(k, lo, hi, scale, &|k, x| {
                    let s = k.let_typed("mix_s", Scalar::F32, 0.0);
                    let ds = k.let_typed("mix_d", Scalar::F32, 0.0);
                    k.for_("p", tid.i32(), stats, threads as i32, |k, p| {
                        let at = k.let_("at", head * max_pages.clone().i64() + p.i64());
                        let m = k.let_("m", page_mu.at(at.e()) * a);
                        let sg = k.let_("sg", (page_sigma.at(at) * a).max(MIX_SIGMA_FLOOR));
                        let (l, dl) = emit_log2_moment(k, &tables, (m - x) / sg);
                        let w = k.let_("w", (fma(sg.log2(), beta, lw) + l).exp2());
                        k.assign(s, s + w);
                        k.assign(ds, ds - w * dl / sg);
                    });
                    let tot = k.block_allreduce_many(&[(Reduce::Sum, s.e()), (Reduce::Sum, ds.e())], red);
                    (tot[0].log2(), tot[1] / tot[0])
                });
                tau
            } else {
                // Single Gaussian: Λ(τ) = log2 n + β log2 σ_Y + log2 M_β((a·μ_g − τ)/σ_Y).
                let sy = k.let_("sigma_y", sigma_g * a);
                let m = k.let_("m", mu_g * a);
                let ln = k.let_("log2_n", (stats * psize).f32().log2());
                let lw = k.let_("lw", fma(sy.log2(), beta, ln));
                let lo = m - ((1.0f32 - ln) / beta).exp2();
                let hi = fma(sy, BRACKET_T, m);
                let (tau, _) = solve_threshold(k, lo, hi, sy, &|k, x| {
                    let (l, dl) = emit_log2_moment(k, &tables, (m - x) / sy);
                    (lw + l, -dl / sy)
                });
                tau
            };
            k.if_(tid.eq_(0u32), |k| {
                k.store(head_stats, out, mu_g);
                k.store(head_stats, out + 1i64, sigma_g);
                k.store(head_stats, out + 2i64, tau);
                k.store(head_stats, out + 3i64, mean_sigma);
            });
        },
        |k| {
            // No full page: nothing to estimate from.
            k.if_(tid.eq_(0u32), |k| {
                for i in 0..HEAD_STATS as i64 {
                    k.store(head_stats, out + i, f32c(f64::NAN));
                }
            });
        },
    );
    Ok(k.finish()?)
}

/// The most (page, head) pairs of μ and σ a `select_gaussian` thread carries into the next
/// chunk.
const PREFETCH_PAIRS: u32 = 16;

/// `select_gaussian`: grid (kv heads, batch).
pub fn select_kernel(spec: &PagedSpec, tile: &GaussTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let (_, name) = gauss_entry_names(spec, tile);
    let threads = tile.select_threads;
    let per = tile.select_pages_per_thread;
    let group = spec.decode.group;
    let a = spec.decode.alpha.value() - 1.0;
    let psize = spec.page_size as i32;
    let mut k = KernelBuilder::new(name, threads);
    // One CTA per (sequence, KV head): occupancy is never the limit, and without a floor
    // ptxas capped GQA 3 at 48 registers and spilled.
    k.set_min_blocks_per_sm(1);
    let page_mu = k.buffer("page_mu", Scalar::F32, Access::Read);
    let page_sigma = k.buffer("page_sigma", Scalar::F32, Access::Read);
    let head_stats = k.buffer("head_stats", Scalar::F32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let consts = k.buffer("sel_consts", Scalar::F32, Access::Write);
    let sel_pages = k.buffer("sel_pages", Scalar::I32, Access::Write);
    let sel_count = k.buffer("sel_count", Scalar::I32, Access::Write);
    let tau_hat = k.buffer("tau_hat", Scalar::F32, Access::Write);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let z_lo = k.scalar_param("z_page_low", Scalar::F32);
    let z_hi = k.scalar_param("z_page_high", Scalar::F32);
    let switch = k.scalar_param("sigma_switch", Scalar::F32);
    let c_lo = k.scalar_param("c_low", Scalar::F32);
    let c_hi = k.scalar_param("c_high", Scalar::F32);
    let excess_fraction = k.scalar_param("excess_fraction", Scalar::F32);
    let excess_sigma = k.scalar_param("excess_sigma", Scalar::F32);
    let clamp = k.scalar_param("clamp", Scalar::I32);
    let clamp_z = k.scalar_param("clamp_z", Scalar::F32);
    let clamp_eps = k.scalar_param("clamp_eps", Scalar::F32);
    let scan = k.shared("scan", Scalar::I32, threads / WARP);
    let red = k.shared("red", Scalar::F32, threads / WARP * group.max(2));

    let mp = k.let_("mp", max_pages.i64());
    let sel = SelectionRow::new(&mut k, spec, seq_lens, mp.e());
    let (kvh, b, kv_heads, tid) = (sel.kvh, sel.b, sel.kv_heads, sel.tid);
    let q_heads = k.let_("q_heads", kv_heads * group);
    // Full pages: those with moments.
    let stats = sel.full;

    // σ̄ over every (batch, head) pair with a full page, and the regime it picks. Every CTA
    // sums the same values in the same order, so all of them agree bit for bit.
    let batch = k.let_("batch", k.grid_dim(Axis::Y));
    let all_heads = k.let_("all_heads", (q_heads * batch).i32());
    let s = k.let_typed("s", Scalar::F32, 0.0);
    let c = k.let_typed("c", Scalar::F32, 0.0);
    k.for_("i", tid.i32(), all_heads, threads as i32, |k, i| {
        let has = k.let_("has", seq_lens.at(i.clone() / q_heads.i32()).gt(psize));
        let sg = head_stats.at(i.i64() * HEAD_STATS as i64 + 1i64);
        k.assign(s, s + select(has, sg, 0.0f32));
        k.assign(c, c + select(has, 1.0f32, 0.0f32));
    });
    let tot = k.block_allreduce_many(&[(Reduce::Sum, s.e()), (Reduce::Sum, c.e())], red);
    let sbar = k.let_("sbar", tot[0] / tot[1]);
    // Reference: σ̄ < switch → (c_low, q_max_low), otherwise the high pair.
    let high = k.let_("high", sbar.ge(switch));
    let c_z = k.let_("c_z", select(high, c_hi, c_lo) * sbar);
    let z_page = select(high, z_hi, z_lo);
    k.if_(kvh.eq_(0i32).and(b.eq_(0i32)).and(tid.eq_(0u32)), |k| {
        k.store(consts, 0i32, sbar);
        k.store(consts, 1i32, c_z);
        k.store(consts, 2i32, z_page.clone());
        k.store(consts, 3i32, tot[1]);
    });
    let clamp_z = k.let_("clamp_zv", clamp_z);

    struct Head {
        h: Expr,
        row: Var,
        tau: Var,
        floor: Var,
        cap: Var,
    }
    let mut heads = Vec::new();
    for g in 0..group {
        let h = kvh * group + g;
        let row = k.let_("row", (b * q_heads + h.clone()).i64());
        let hs = k.let_("hs", row * HEAD_STATS as i64);
        let mu_g = k.let_("mu_g", head_stats.at(hs));
        let sigma_g = k.let_("sigma_g", head_stats.at(hs + 1i64));
        let tau = k.let_("tau", head_stats.at(hs + 2i64));
        let mean_sigma = k.let_("mean_sigma", head_stats.at(hs + 3i64));
        // Δ = max(c_z·σ_g, f·max(τ̂/a − mean_p(μ_p + 1.5σ_p), 0)); τ_floor = τ̂ − a·Δ.
        let excess = (tau / a - fma(excess_sigma.clone(), mean_sigma, mu_g)).max(0.0f32);
        let delta = (c_z * sigma_g).max(excess_fraction.clone() * excess);
        let floor = k.let_("floor", tau - delta * a);
        let cap = k.let_typed("cap", Scalar::F32, f64::NEG_INFINITY);
        heads.push(Head {
            h,
            row,
            tau,
            floor,
            cap,
        });
    }

    let out_row = sel.row;
    let written = k.let_typed("written", Scalar::I32, 0);
    let chunk = (threads * per) as i32;
    // Each (page, head)'s (μ, σ) of this thread's pages of the chunk from `c0`; the next chunk's
    // are loaded before this chunk's tests and scan, so that their round trip overlaps them.
    let load_chunk = |k: &mut KernelBuilder, c0: Expr| -> Vec<Vec<(Var, Var)>> {
        let first = k.let_("first", c0 + tid.i32() * per as i32);
        (0..per as i32)
            .map(|r| {
                let p = k.let_("p", first + r);
                let pc = k.let_("pc", select(p.lt(stats), p, 0i32).i64());
                heads
                    .iter()
                    .map(|hd| {
                        let at = hd.row * mp + pc;
                        (
                            k.let_("mu", page_mu.at(at.clone())),
                            k.let_("sg", page_sigma.at(at)),
                        )
                    })
                    .collect()
            })
            .collect()
    };
    // Up to PREFETCH_PAIRS (page, head) pairs a thread; more spilled (local ptxas 13: 268 B at
    // G 4 × 8 pages, 512 threads), and they have as many loads in flight already.
    let next = (per * group <= PREFETCH_PAIRS).then(|| load_chunk(&mut k, i32c(0)));
    k.for_("c0", 0i32, stats, chunk, |k, c0| {
        let current: Vec<Vec<(Var, Var)>> = match &next {
            None => load_chunk(k, c0.clone()),
            Some(next) => {
                let current = next
                    .iter()
                    .map(|page| {
                        page.iter()
                            .map(|&(mu, sg)| (k.let_("cur_mu", mu), k.let_("cur_sg", sg)))
                            .collect()
                    })
                    .collect();
                let after = k.let_("after", c0.clone() + chunk);
                k.if_(after.lt(stats), |k| {
                    for (page, loaded) in next.iter().zip(load_chunk(k, after.e())) {
                        for (&(mu, sg), (lmu, lsg)) in page.iter().zip(loaded) {
                            k.assign(mu, lmu);
                            k.assign(sg, lsg);
                        }
                    }
                });
                current
            }
        };
        let first = k.let_("first", c0 + tid.i32() * per as i32);
        let mut keeps = Vec::new();
        for (r, page) in current.iter().enumerate() {
            let p = k.let_("p", first + r as i32);
            let valid = k.let_("valid", p.lt(stats));
            let any = k.let_("any", false);
            for (hd, &(mu, sg)) in heads.iter().zip(page) {
                // Written `!(score ≤ floor)`: a NaN threshold keeps the page (fail safe).
                let keep = k.let_(
                    "keep",
                    valid.and((fma(z_page.clone(), sg, mu) * a).le(hd.floor).not()),
                );
                k.assign(any, any.or(keep));
                k.assign(hd.cap, select(keep, hd.cap.max(fma(clamp_z, sg, mu)), hd.cap));
            }
            keeps.push((p, any));
        }
        append_kept(k, &keeps, scan, sel_pages, out_row, written);
    });
    sel.close(&mut k, sel_pages, sel_count, written);
    // The clamp of spec §5.5 per head, over the pages that head kept.
    let caps: Vec<(Reduce, Expr)> = heads.iter().map(|hd| (Reduce::Max, hd.cap.e())).collect();
    let caps = k.block_allreduce_many(&caps, red);
    for (hd, cap) in heads.iter().zip(caps) {
        let up = (cap * a - clamp_eps.clone()).max(hd.floor);
        let apply = clamp
            .clone()
            .ne_(0i32)
            .and(cap.gt(f64::NEG_INFINITY))
            .and(hd.tau.eq_(hd.tau));
        let start = select(apply, hd.tau.min(up), hd.tau);
        let at = (b * q_heads + hd.h.clone()).i64();
        k.if_(tid.eq_(0u32), |k| k.store(tau_hat, at, start));
    }
    Ok(k.finish()?)
}

/// Module `page_score` (the moments kernel; the lead merges it with the box scorer) and module
/// `select_gaussian`, with default tiles.
pub fn modules(spec: &PagedSpec) -> Result<Vec<KernelModule>, KernelGenError> {
    let mt = MomentsTile::default_for(spec);
    let gt = GaussTile::default_for(spec);
    Ok(vec![
        KernelModule {
            name: "page_score",
            kernels: vec![moments_kernel(spec, &mt)?],
        },
        KernelModule {
            name: "select_gaussian",
            kernels: select_module_kernels(spec, &gt)?,
        },
    ])
}

// ----- the calls of one selection ----------------------------------------------------------

/// One Gaussian selection (`entkv_abi::pipeline::gaussian_select_calls`) with its four
/// kernels generated for these tiles. Inputs: `q`, `meta_moments`, `block_table`, `seq_lens`
/// (and `alibi_slopes` with ALiBi); outputs `sel_pages`, `sel_count`, `tau_hat`.
pub fn pipeline(
    spec: &PagedSpec,
    mtile: &MomentsTile,
    gtile: &GaussTile,
    params: &GaussianParams,
    shape: &PagedShape,
) -> Result<Pipeline, KernelGenError> {
    let kernels = vec![
        moments_kernel(spec, mtile)?,
        tau_kernel(spec, gtile)?,
        select_kernel(spec, gtile)?,
    ];
    pipelines::gaussian_with(spec, mtile, gtile, params, shape, kernels)
}

// ----- float64 references ------------------------------------------------------------------

/// `meta_moments` (layout in `entkv_abi::paged`) of every full page of every sequence, from
/// the stored keys, in float64, rounded to the K dtype: per dimension the mean and the
/// population standard deviation clamped to ≥ 1e-6. Every other entry (pool pages no sequence
/// owns, last pages) is NaN, so a kernel that reads one fails its check.
pub fn host_meta_moments(spec: &PagedSpec, x: &PagedInputs) -> Tensor {
    let (p, d) = (spec.page_size as usize, spec.decode.head_dim as usize);
    let hkv = x.shape.kv_heads as usize;
    let mut meta = vec![f64::NAN; x.shape.meta_elems(spec) as usize];
    for (b, &len) in x.seq_lens.iter().enumerate() {
        let pages = (len as usize).div_ceil(p);
        for j in 0..pages.saturating_sub(1) {
            let phys = x.block_table[b * x.shape.max_pages as usize + j] as usize;
            for kvh in 0..hkv {
                let base = (phys * hkv + kvh) * p * d;
                for i in 0..d {
                    let col = |s: usize| x.k_pool.values[base + s * d + i];
                    let mean = (0..p).map(col).sum::<f64>() / p as f64;
                    let var = (0..p).map(|s| (col(s) - mean).powi(2)).sum::<f64>() / p as f64;
                    let at = (phys * hkv + kvh) * 2 * d + i;
                    meta[at] = mean;
                    meta[at + d] = var.sqrt().max(1e-6);
                }
            }
        }
    }
    Tensor::from_f64(spec.decode.kv_dtype, &meta)
}

/// `ln Σ_c exp(ln w_c + β ln σ_c + ln M_β((m_c − τ)/σ_c))` (components in z units).
fn ln_mixture(alpha: Alpha, comps: &[(f64, f64, f64)], tau: f64) -> f64 {
    let beta = alpha.beta();
    let terms: Vec<f64> = comps
        .iter()
        .map(|&(w, m, s)| w.ln() + beta * s.ln() + ln_pos_moment_ref(alpha, (m - tau) / s))
        .collect();
    let mx = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !mx.is_finite() {
        return mx;
    }
    mx + terms.iter().map(|t| (t - mx).exp()).sum::<f64>().ln()
}

/// τ̂ solving `Σ_c w_c·E[(m_c + σ_c Z − τ)_+^β] = 1` by bisection on the exact expectation, in
/// float64. Components are (weight, z-space mean, z-space σ).
pub fn solve_tau_ref(alpha: Alpha, comps: &[(f64, f64, f64)]) -> f64 {
    let beta = alpha.beta();
    let mut lo = comps
        .iter()
        .map(|&(w, m, _)| m - (2.0 / w).powf(1.0 / beta))
        .fold(f64::NEG_INFINITY, f64::max);
    let mut hi = comps
        .iter()
        .map(|&(_, m, s)| m + BRACKET_T * s)
        .fold(f64::NEG_INFINITY, f64::max);
    let scale = comps.iter().map(|c| c.2).fold(0.0, f64::max).max(1e-300);
    let mut w = (hi - lo).max(scale);
    for _ in 0..200 {
        if ln_mixture(alpha, comps, lo) >= 0.0 {
            break;
        }
        lo -= w;
        w *= 2.0;
    }
    for _ in 0..200 {
        if ln_mixture(alpha, comps, hi) < 0.0 {
            break;
        }
        hi += w;
        w *= 2.0;
    }
    for _ in 0..80 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if ln_mixture(alpha, comps, mid) >= 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// One query head's reference.
#[derive(Clone, Debug)]
pub struct HeadGauss {
    /// Full pages (those scored).
    pub stats_pages: usize,
    pub mu: Vec<f64>,
    pub sigma: Vec<f64>,
    /// `Σ_i |q_i·mean_i|/√d + |ALiBi term|` per page (scale of μ_p's rounding).
    pub mu_mag: Vec<f64>,
    pub mu_g: f64,
    pub sigma_g: f64,
    pub mean_sigma: f64,
    pub tau_hat: f64,
    pub tau_floor: f64,
    /// `a·(μ_p + z_page·σ_p)` per page.
    pub score: Vec<f64>,
    pub keep: Vec<bool>,
    /// `tau_hat` after the clamp.
    pub tau_start: f64,
}

/// The whole selection in float64.
#[derive(Clone, Debug)]
pub struct GaussianReference {
    /// Per (batch, query head).
    pub heads: Vec<HeadGauss>,
    /// Heads with a full page: those σ̄ averages.
    pub heads_counted: usize,
    pub sigma_bar: f64,
    pub c_z: f64,
    pub z_page: f64,
    /// Per (batch, kv head): the selected pages, ascending, the last page last.
    pub selections: Vec<Vec<i32>>,
}

pub fn gaussian_reference(
    spec: &PagedSpec,
    params: &GaussianParams,
    x: &PagedInputs,
    meta: &Tensor,
) -> Result<GaussianReference, SuiteError> {
    let consts = params
        .constants(spec.page_size)
        .map_err(|e| SuiteError::Other(e.to_string()))?;
    let ds = &spec.decode;
    let alpha = ds.alpha;
    let a = alpha.value() - 1.0;
    let (p, d, group) = (spec.page_size as usize, ds.head_dim as usize, ds.group as usize);
    let hkv = x.shape.kv_heads as usize;
    let q_heads = hkv * group;
    let mut heads = Vec::new();
    for (b, &len) in x.seq_lens.iter().enumerate() {
        let pages = (len as usize).div_ceil(p);
        let stats = pages - 1;
        for h in 0..q_heads {
            let kvh = h / group;
            let q = &x.q.values[(b * q_heads + h) * d..][..d];
            let (mut mu, mut sigma, mut mag) = (Vec::new(), Vec::new(), Vec::new());
            for j in 0..stats {
                let phys = x.block_table[b * x.shape.max_pages as usize + j] as usize;
                let row = (phys * hkv + kvh) * 2 * d;
                let mean = &meta.values[row..row + d];
                let std = &meta.values[row + d..row + 2 * d];
                let sd = (d as f64).sqrt();
                let mut m = q.iter().zip(mean).map(|(a, b)| a * b).sum::<f64>() / sd;
                let mut mg = q.iter().zip(mean).map(|(a, b)| (a * b).abs()).sum::<f64>() / sd;
                let s2 = q.iter().zip(std).map(|(a, b)| (a * b).powi(2)).sum::<f64>() / d as f64;
                if let Some(&slope) = x.alibi_slopes.get(h) {
                    let off = (j * p) as f64 + (p as f64 - 1.0) / 2.0 - (len as f64 - 1.0);
                    m += slope as f64 * off;
                    mg += (slope as f64 * off).abs();
                }
                mu.push(m);
                sigma.push(s2.sqrt());
                mag.push(mg);
            }
            let n = stats as f64;
            let (mut mu_g, mut sigma_g, mut mean_sigma, mut tau_hat) =
                (f64::NAN, f64::NAN, f64::NAN, f64::NAN);
            if stats > 0 {
                mu_g = mu.iter().sum::<f64>() / n;
                let var = mu.iter().map(|m| (m - mu_g).powi(2)).sum::<f64>() / n;
                let s2 = sigma.iter().map(|s| s * s).sum::<f64>() / n;
                sigma_g = (s2 + var).sqrt().max(SIGMA_FLOOR);
                mean_sigma = sigma.iter().sum::<f64>() / n;
                let comps: Vec<(f64, f64, f64)> = if spec.alibi {
                    mu.iter()
                        .zip(&sigma)
                        .map(|(&m, &s)| (p as f64, a * m, (a * s).max(MIX_SIGMA_FLOOR)))
                        .collect()
                } else {
                    vec![((stats * p) as f64, a * mu_g, a * sigma_g)]
                };
                tau_hat = solve_tau_ref(alpha, &comps);
            }
            heads.push(HeadGauss {
                stats_pages: stats,
                mu,
                sigma,
                mu_mag: mag,
                mu_g,
                sigma_g,
                mean_sigma,
                tau_hat,
                tau_floor: f64::NAN,
                score: Vec::new(),
                keep: Vec::new(),
                tau_start: f64::NAN,
            });
        }
    }
    // σ̄ over the heads with a full page, then the regime's coefficients.
    let counted: Vec<f64> = heads
        .iter()
        .filter(|h| h.stats_pages > 0)
        .map(|h| h.sigma_g)
        .collect();
    let sigma_bar = counted.iter().sum::<f64>() / counted.len() as f64;
    let high = sigma_bar >= params.sigma_switch;
    let (c, z_page) = if high {
        (params.c_high, consts.z_page_high)
    } else {
        (params.c_low, consts.z_page_low)
    };
    let c_z = c * sigma_bar;
    for hd in heads.iter_mut() {
        let excess = (hd.tau_hat / a - (hd.mu_g + params.excess_sigma * hd.mean_sigma)).max(0.0);
        let delta = (c_z * hd.sigma_g).max(params.excess_fraction * excess);
        hd.tau_floor = hd.tau_hat - a * delta;
        hd.score = hd
            .mu
            .iter()
            .zip(&hd.sigma)
            .map(|(m, s)| a * (m + z_page * s))
            .collect();
        // As on the device: a NaN threshold (or score) keeps the page.
        let floor = hd.tau_floor;
        hd.keep = hd
            .score
            .iter()
            .map(|&s| s > floor || s.is_nan() || floor.is_nan())
            .collect();
        let cap = hd
            .mu
            .iter()
            .zip(&hd.sigma)
            .zip(&hd.keep)
            .filter(|(_, &k)| k)
            .map(|((m, s), _)| m + consts.clamp_z * s)
            .fold(f64::NEG_INFINITY, f64::max);
        hd.tau_start = if params.clamp_tau && cap > f64::NEG_INFINITY && !hd.tau_hat.is_nan() {
            hd.tau_hat.min((a * cap - params.clamp_eps).max(hd.tau_floor))
        } else {
            hd.tau_hat
        };
    }
    let mut selections = Vec::new();
    for (b, &len) in x.seq_lens.iter().enumerate() {
        let pages = (len as usize).div_ceil(p);
        for kvh in 0..hkv {
            let mut sel: Vec<i32> = (0..pages - 1)
                .filter(|&j| (0..group).any(|g| heads[b * q_heads + kvh * group + g].keep[j]))
                .map(|j| j as i32)
                .collect();
            sel.push(pages as i32 - 1);
            selections.push(sel);
        }
    }
    let heads_counted = counted.len();
    Ok(GaussianReference {
        heads,
        heads_counted,
        sigma_bar,
        c_z,
        z_page,
        selections,
    })
}

// ----- checks ------------------------------------------------------------------------------

/// One selection run (all four kernels) against the float64 reference.
#[derive(Clone, Debug)]
pub struct GaussianCheck {
    pub case: PagedCase,
    pub params: GaussianParams,
    pub mtile: MomentsTile,
    pub gtile: GaussTile,
}

impl GaussianCheck {
    pub fn new(case: PagedCase) -> GaussianCheck {
        GaussianCheck {
            mtile: MomentsTile::default_for(&case.spec),
            gtile: GaussTile::default_for(&case.spec),
            params: GaussianParams::default(),
            case,
        }
    }

    fn inputs(&self) -> Result<(PagedInputs, Tensor), SuiteError> {
        let x = self.case.inputs();
        check_batch(&self.case.spec, &x.shape, &x.seq_lens, &x.block_table)
            .map_err(|e| SuiteError::Other(e.to_string()))?;
        let meta = host_meta_moments(&self.case.spec, &x);
        Ok((x, meta))
    }
}

/// The numbers behind a verdict: worst error/tolerance ratios and the failures.
#[derive(Default)]
struct Tally {
    worst: Vec<(&'static str, f64)>,
    failures: Vec<String>,
}

impl Tally {
    fn ratio(&mut self, what: &'static str, err: f64, tol: f64, ctx: impl FnOnce() -> String) {
        let r = crate::check::error_ratio(err, tol);
        match self.worst.iter_mut().find(|(n, _)| *n == what) {
            Some(w) => w.1 = w.1.max(r),
            None => self.worst.push((what, r)),
        }
        if r > 1.0 && self.failures.len() < 8 {
            self.failures
                .push(format!("{what}: {} (err {err:.3e}, tol {tol:.3e})", ctx()));
        }
    }
    fn fail(&mut self, msg: String) {
        if self.failures.len() < 8 {
            self.failures.push(msg);
        }
    }
}

/// The poison of outputs whose expected value may be NaN: finite, and far from any statistic
/// or threshold of the test data.
const FINITE_POISON: f64 = -1.0e30;

/// Both NaN, or `|a − b| ≤ tol`; NaN-ness mismatch is an infinite error.
fn nan_aware(a: f64, b: f64) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => 0.0,
        (false, false) => (a - b).abs(),
        _ => f64::INFINITY,
    }
}

impl KernelCheck for GaussianCheck {
    fn name(&self) -> String {
        let s = &self.case.spec;
        format!(
            "select_gaussian α={} d={} g={} P={} {}{} lens={:?} {:?} seed={} {} {}",
            s.decode.alpha,
            s.decode.head_dim,
            s.decode.group,
            s.page_size,
            s.decode.kv_dtype,
            if s.alibi { " alibi" } else { "" },
            self.case.seq_lens,
            self.case.data,
            self.case.seed,
            self.mtile.tag(),
            self.gtile.tag()
        )
    }

    fn program(&self) -> Result<Program, SuiteError> {
        let (x, meta) = self.inputs()?;
        let pipeline = pipeline(&self.case.spec, &self.mtile, &self.gtile, &self.params, &x.shape)?;
        let mut p = Program::new();
        p.buffer("q", host_tensor(&x.q));
        p.buffer("meta_moments", host_tensor(&meta));
        p.buffer("block_table", HostBuffer::I32(x.block_table.clone()));
        p.buffer("seq_lens", HostBuffer::I32(x.seq_lens.clone()));
        if self.case.spec.alibi {
            p.buffer("alibi_slopes", HostBuffer::F32(x.alibi_slopes.clone()));
        }
        pipeline.add_to(&mut p);
        // A head without a full page has NaN statistics and start threshold in the reference,
        // and NaN is also the float poison: these two get a finite poison, so a slot the
        // kernels leave unwritten fails instead of matching.
        for name in ["head_stats", "tau_hat"] {
            let len = p.get(name).len();
            p.buffer(name, HostBuffer::filled_f64(Scalar::F32, len, FINITE_POISON));
        }
        Ok(p)
    }

    fn verify(&self, ran: &Program) -> Outcome {
        let spec = &self.case.spec;
        let (x, meta) = match self.inputs() {
            Ok(v) => v,
            Err(e) => return Outcome::new(false, e.to_string()),
        };
        let r = match gaussian_reference(spec, &self.params, &x, &meta) {
            Ok(r) => r,
            Err(e) => return Outcome::new(false, e.to_string()),
        };
        let a = spec.decode.alpha.value() - 1.0;
        let d = spec.decode.head_dim as f64;
        let u = f64::powi(2.0, -24);
        let mp = x.shape.max_pages as usize;
        let group = spec.decode.group as usize;
        let hkv = x.shape.kv_heads as usize;
        let page_mu = ran.get("page_mu").to_f64_vec();
        let page_sigma = ran.get("page_sigma").to_f64_vec();
        let head_stats = ran.get("head_stats").to_f64_vec();
        let consts = ran.get("sel_consts").to_f64_vec();
        let tau_hat = ran.get("tau_hat").to_f64_vec();
        let sel_pages = ran.get("sel_pages").to_f64_vec();
        let sel_count = ran.get("sel_count").to_f64_vec();
        let mut t = Tally::default();

        // σ̄ and the regime.
        if (r.sigma_bar - self.params.sigma_switch).abs() <= 1e-4 * r.sigma_bar {
            t.fail(format!(
                "σ̄ = {} sits on the regime switch: inconclusive data",
                r.sigma_bar
            ));
        }
        // σ̄ inherits the rounding of the μ_p (their f32 noise adds variance to σ_g² — visible
        // when σ_p is tiny, as with tied keys), so its allowance includes the largest μ_p
        // tolerance.
        let max_tol_mu = r
            .heads
            .iter()
            .flat_map(|h| h.mu_mag.iter())
            .fold(0.0f64, |m, &v| m.max((d + 4.0) * u * v));
        if consts[3] != r.heads_counted as f64 {
            t.fail(format!(
                "heads counted for σ̄: {} vs {}",
                consts[3], r.heads_counted
            ));
        }
        if r.sigma_bar.is_finite() {
            let tol_sbar = 2e-6 * r.sigma_bar + max_tol_mu;
            t.ratio("sigma_bar", (consts[0] - r.sigma_bar).abs(), tol_sbar, || {
                format!("σ̄ {} vs {}", consts[0], r.sigma_bar)
            });
            // c_z = c·σ̄: σ̄'s error times the larger c, plus one more f32 rounding.
            let c = self.params.c_high.max(self.params.c_low);
            let tol_cz = c * tol_sbar + 1e-7 * r.c_z.abs();
            t.ratio("c_z", (consts[1] - r.c_z).abs(), tol_cz, || {
                format!("c_z {} vs {}", consts[1], r.c_z)
            });
            t.ratio("z_page", (consts[2] - r.z_page).abs(), 1e-6 * r.z_page, || {
                format!("z_page {} vs {}", consts[2], r.z_page)
            });
        }

        let mut tau_tols = Vec::new();
        let mut page_tols: Vec<Vec<(f64, f64)>> = Vec::new();
        for (i, hd) in r.heads.iter().enumerate() {
            let row = i * mp;
            let mut tols = Vec::new();
            for j in 0..hd.stats_pages {
                let tol_mu = (d + 4.0) * u * hd.mu_mag[j] + 1e-30;
                let tol_s = (d + 8.0) * u * hd.sigma[j] + 1e-30;
                t.ratio("mu_p", (page_mu[row + j] - hd.mu[j]).abs(), tol_mu, || {
                    format!("head {i} page {j}")
                });
                t.ratio(
                    "sigma_p",
                    (page_sigma[row + j] - hd.sigma[j]).abs(),
                    tol_s,
                    || format!("head {i} page {j}"),
                );
                tols.push((tol_mu, tol_s));
            }
            let hs = &head_stats[i * HEAD_STATS as usize..][..HEAD_STATS as usize];
            let mean_abs = hd.mu.iter().map(|m| m.abs()).sum::<f64>() / hd.stats_pages.max(1) as f64;
            let scale = hd.sigma_g + mean_abs;
            let head_tol_mu = tols.iter().map(|p| p.0).fold(0.0f64, f64::max);
            let tol_g = 2e-6 * scale + head_tol_mu;
            let tol_tau = 1e-5 * a * scale + 1e-6 * hd.tau_hat.abs();
            tau_tols.push(tol_tau);
            let ctx = || format!("head {i}");
            t.ratio("mu_g", nan_aware(hs[0], hd.mu_g), tol_g, ctx);
            t.ratio("sigma_g", nan_aware(hs[1], hd.sigma_g), tol_g, ctx);
            t.ratio("mean_sigma", nan_aware(hs[3], hd.mean_sigma), tol_g, ctx);
            t.ratio("tau", nan_aware(hs[2], hd.tau_hat), tol_tau, || {
                format!("head {i}: τ̂ {} vs {}", hs[2], hd.tau_hat)
            });
            page_tols.push(tols);
        }

        // Whether page j's keep decision for head i is within rounding of its threshold.
        let near_floor = |i: usize, j: usize| {
            let hd = &r.heads[i];
            let (tm, ts) = page_tols[i][j];
            (hd.score[j] - hd.tau_floor).abs() <= 3.0 * tau_tols[i] + a * (tm + r.z_page * ts)
        };

        // Selections, per (batch, kv head).
        let (mut selected, mut total, mut ambiguous_pages) = (0usize, 0usize, 0usize);
        for (bk, want) in r.selections.iter().enumerate() {
            let b = bk / hkv;
            let kvh = bk % hkv;
            let cnt = sel_count[bk];
            let pages = want.last().map_or(0, |&l| l as usize + 1);
            if !(cnt >= 1.0 && cnt <= pages as f64) {
                t.fail(format!("(b {b}, kvh {kvh}): sel_count {cnt} for {pages} pages"));
                continue;
            }
            let got = crate::check::page_ids(&sel_pages[bk * mp..][..cnt as usize]);
            selected += got.len();
            total += pages;
            if let Err(e) = entkv_abi::check_selection_row(&got, pages) {
                t.fail(format!("(b {b}, kvh {kvh}): {e}"));
                continue;
            }
            let got: Vec<i32> = got.iter().map(|&j| j as i32).collect();
            let hs: Vec<usize> = (0..group).map(|g| b * hkv * group + kvh * group + g).collect();
            let mask = |list: &[i32]| {
                let mut m = vec![false; pages];
                list.iter().for_each(|&j| m[j as usize] = true);
                m
            };
            let (got_mask, want_mask) = (mask(&got), mask(want));
            for j in 0..pages - 1 {
                let (g_in, w_in) = (got_mask[j], want_mask[j]);
                let ambiguous = hs.iter().any(|&i| near_floor(i, j));
                ambiguous_pages += ambiguous as usize;
                if g_in != w_in && !ambiguous {
                    t.fail(format!(
                        "(b {b}, kvh {kvh}) page {j}: device {} it, reference {}",
                        if g_in { "keeps" } else { "drops" },
                        if w_in { "keeps" } else { "drops" }
                    ));
                }
            }
            // The start threshold of each head (skipped where an ambiguous page could move the
            // clamp's maximum).
            for &i in &hs {
                let hd = &r.heads[i];
                if !(0..hd.stats_pages).any(|j| near_floor(i, j)) {
                    let tm = page_tols[i].iter().map(|p| p.0 + p.1).fold(0.0, f64::max);
                    let tol = tau_tols[i] + a * (tm * (1.0 + self.params.clamp_eps)) + 1e-6;
                    t.ratio("tau_hat", nan_aware(tau_hat[i], hd.tau_start), tol, || {
                        format!("head {i}: {} vs {}", tau_hat[i], hd.tau_start)
                    });
                }
            }
        }

        // Informative (small cases only: it needs full-cache attention in float64): how much of
        // the full-cache support the selection holds, and how often the start threshold is
        // above every selected score (a decode starting from it must then fall back to its own
        // bracket, see `entkv_abi::gaussian`).
        let token_heads: u64 = x.seq_lens.iter().map(|&l| l as u64).sum::<u64>() * (hkv * group) as u64;
        let diagnostics = if token_heads <= 1 << 24 {
            let full = paged_reference(spec, &x);
            let (mut in_sel, mut support, mut above_all) = (0usize, 0usize, 0usize);
            let p = spec.page_size as usize;
            for (i, h) in full.heads.iter().enumerate() {
                let b = i / (hkv * group);
                let kvh = (i / group) % hkv;
                let mut sel = vec![false; h.z.len().div_ceil(p)];
                r.selections[b * hkv + kvh]
                    .iter()
                    .for_each(|&j| sel[j as usize] = true);
                let mut top = f64::NEG_INFINITY;
                for (tok, &z) in h.z.iter().enumerate() {
                    let selected = sel[tok / p];
                    if selected {
                        top = top.max(z);
                    }
                    if z > h.tau {
                        support += 1;
                        in_sel += selected as usize;
                    }
                }
                above_all += (tau_hat[i] >= top) as usize;
            }
            format!(
                "; support recall {in_sel}/{support}; tau_hat above every selected score in \
                 {above_all}/{} heads",
                full.heads.len()
            )
        } else {
            String::new()
        };
        let worst: Vec<String> = t.worst.iter().map(|(n, v)| format!("{n} {v:.2}")).collect();
        let detail = format!(
            "err/tol: {}; σ̄ {:.4}; pages kept {selected}/{total} ({ambiguous_pages} within rounding of \
             the threshold){diagnostics}{}",
            worst.join(", "),
            r.sigma_bar,
            if t.failures.is_empty() {
                String::new()
            } else {
                format!("; FAILURES: {}", t.failures.join(" | "))
            }
        );
        Outcome::new(t.failures.is_empty(), detail)
    }
}

#[allow(clippy::too_many_arguments)]
fn case(
    alpha: f64,
    d: u32,
    group: u32,
    page: u32,
    dtype: DType,
    alibi: bool,
    lens: &[u32],
    data: KeyData,
    seed: u64,
) -> GaussianCheck {
    let decode = DecodeSpec::new(alpha, d, group, dtype).unwrap_or_else(|e| unreachable!("{e}"));
    let spec = PagedSpec::new(decode, page, alibi, 4).unwrap_or_else(|e| unreachable!("{e}"));
    GaussianCheck::new(PagedCase::new(
        spec,
        if group >= 4 { 1 } else { 2 },
        lens,
        data,
        seed,
    ))
}

/// The suite's Gaussian-selector checks: every axis value (α 2, 3/2, 4/3, 1.25; d 32/64/128;
/// P 16/32/64; f16/bf16; GQA 1/2/3/4/8; ALiBi on/off), one-page, two-page and partial last
/// pages, different lengths in a batch, pages scattered over the pool (always), `Normal` and
/// `Peaked` keys, plus `Extreme` (σ̄ above the switch), `Ties` (σ at its floor) and `Dominant`,
/// and small tiles that split sequences over several moments tiles and selection chunks.
pub fn checks() -> Vec<Box<dyn KernelCheck>> {
    use DType::{BF16, F16, F32};
    use KeyData::*;
    let mut v = vec![
        case(1.5, 32, 1, 16, F16, false, &[1, 16, 17, 40, 300, 1000], Normal, 1),
        case(2.0, 64, 2, 32, BF16, true, &[33, 700, 64, 1500], Peaked, 2),
        case(4.0 / 3.0, 128, 3, 64, F16, false, &[200, 2000], Peaked, 3),
        case(1.25, 32, 4, 16, BF16, true, &[500, 129], Normal, 4),
        case(1.5, 64, 8, 16, F16, true, &[1000], Peaked, 5),
        case(2.0, 32, 1, 64, BF16, false, &[4000, 65], Normal, 6),
        case(1.25, 128, 2, 32, F16, false, &[1200, 65], Peaked, 7),
        case(4.0 / 3.0, 32, 4, 32, BF16, true, &[900, 31], Normal, 8),
        case(1.5, 32, 1, 16, F16, true, &[2500, 17], Peaked, 9),
        case(1.5, 32, 2, 16, F16, false, &[3000], Peaked, 10),
        case(1.5, 32, 1, 16, F16, false, &[800, 200], Extreme, 11),
        case(2.0, 32, 2, 16, BF16, false, &[600], Ties, 12),
        case(1.5, 64, 1, 16, BF16, true, &[700, 50], Dominant, 13),
        case(4.0 / 3.0, 64, 1, 16, F16, false, &[16, 32], Normal, 14),
        // Longer and more varied batches.
        case(1.5, 32, 3, 16, F16, true, &[4100, 1, 333, 1600], Peaked, 15),
        case(1.25, 64, 1, 64, BF16, true, &[3000, 640], Extreme, 16),
        case(2.0, 128, 8, 32, F16, true, &[2000, 100], Normal, 17),
        case(
            4.0 / 3.0,
            32,
            2,
            64,
            BF16,
            false,
            &[6000, 128, 64, 65],
            Peaked,
            18,
        ),
        case(1.5, 32, 1, 16, F32, false, &[1500, 48], Peaked, 19),
    ];
    // Small tiles: several moments tiles per sequence, several selection chunks, and a
    // multi-warp solve without ALiBi.
    for (alpha, alibi) in [(1.5, false), (1.25, true)] {
        let mut c = case(alpha, 32, 2, 16, F16, alibi, &[1100, 300], Peaked, 20);
        c.mtile = MomentsTile {
            threads: 64,
            lanes_per_page: 4,
            pages_per_group: 1,
        };
        c.gtile = GaussTile {
            solve_threads: 64,
            select_threads: 32,
            select_pages_per_thread: 1,
        };
        v.push(c);
    }
    v.into_iter()
        .map(|c| Box::new(c) as Box<dyn KernelCheck>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_dsl::interp::{run, Arg, LaunchDims};

    /// The threshold solver alone on synthetic single-Gaussian inputs, including extreme
    /// sizes and scales, against the float64 bisection.
    #[test]
    fn single_gaussian_solver_matches_f64() {
        for a_val in [2.0, 1.5, 4.0 / 3.0, 1.25] {
            let alpha = Alpha::new(a_val).unwrap();
            let tables = moment_tables(alpha).unwrap();
            let a = a_val - 1.0;
            let beta = alpha.beta();
            let mut k = KernelBuilder::new("solve", 32);
            let inp = k.buffer("inp", Scalar::F32, Access::Read);
            let out = k.buffer("out", Scalar::F32, Access::Write);
            let i = k.let_("i", k.block_idx(Axis::X).i64());
            let mu = k.let_("mu", inp.at(i * 3i64));
            let sg = k.let_("sg", inp.at(i * 3i64 + 1i64));
            let n = k.let_("n", inp.at(i * 3i64 + 2i64));
            let sy = k.let_("sy", sg * a);
            let m = k.let_("m", mu * a);
            let ln = k.let_("ln", n.log2());
            let lw = k.let_("lw", fma(sy.log2(), beta, ln));
            let lo = m - ((1.0f32 - ln) / beta).exp2();
            let hi = fma(sy, BRACKET_T, m);
            let (tau, evals) = solve_threshold(&mut k, lo, hi, sy, &|k, x| {
                let (l, dl) = emit_log2_moment(k, &tables, (m - x) / sy);
                (lw + l, -dl / sy)
            });
            k.if_(k.thread_idx().eq_(0u32), |k| {
                k.store(out, i * 2i64, tau);
                k.store(out, i * 2i64 + 1i64, evals.f32());
            });
            let kernel = k.finish().unwrap();
            let cases: Vec<(f64, f64, f64)> = vec![
                (0.0, 1.0, 16.0),
                (0.3, 1.0, 1024.0),
                (-2.0, 0.7, 65536.0),
                (1.0, 1.0, 1048576.0),
                (5.0, 300.0, 1048576.0),
                (0.2, 1e-6, 4096.0),
                (0.0, 1e-3, 2.0f64.powi(30)),
                (100.0, 0.01, 32.0),
                (-50.0, 20.0, 100_000.0),
            ];
            let flat: Vec<f32> = cases
                .iter()
                .flat_map(|&(a, b, c)| [a as f32, b as f32, c as f32])
                .collect();
            let mut ib = HostBuffer::F32(flat.clone());
            let mut ob = HostBuffer::filled_f64(Scalar::F32, 2 * cases.len(), f64::NAN);
            run(
                &kernel,
                LaunchDims::linear(cases.len() as u32, 32),
                &mut [Arg::Buf(&mut ib), Arg::Buf(&mut ob)],
            )
            .unwrap();
            let got = ob.to_f64_vec();
            for (ci, c) in flat.chunks(3).enumerate() {
                let (mu, sg, n) = (c[0] as f64, c[1] as f64, c[2] as f64);
                let want = solve_tau_ref(alpha, &[(n, a * mu, a * sg)]);
                let (tau, evals) = (got[2 * ci], got[2 * ci + 1]);
                let err = (tau - want).abs();
                // τ̂ = a·μ − σ_Y·t*: the f32 rounding of a·μ is relative to |a·μ|, not |τ̂|.
                let tol = 2e-6 * (want.abs() + a * (sg + mu.abs()));
                println!(
                    "α={a_val} μ={mu} σ={sg} n={n}: τ̂ {tau} vs {want} (err {err:.2e}, tol {tol:.2e}), \
                     {evals} evaluations"
                );
                assert!(err <= tol, "α={a_val} case {ci}: {tau} vs {want}");
                // Early exit: two end checks and a handful of Newton steps.
                assert!(evals <= 16.0, "α={a_val} case {ci}: {evals} evaluations");
            }
        }
    }

    #[test]
    fn host_meta_matches_definition() {
        let c = case(1.5, 32, 1, 16, DType::F16, false, &[40], KeyData::Normal, 1).case;
        let x = c.inputs();
        let meta = host_meta_moments(&c.spec, &x);
        // Two full pages have metadata, the last page and the spare pages are NaN.
        let finite = meta.values.iter().filter(|v| v.is_finite()).count();
        assert_eq!(finite, 2 * 2 * 2 * 32);
        let phys = x.block_table[0] as usize;
        let col: Vec<f64> = (0..16)
            .map(|s| x.k_pool.values[((phys * 2) * 16 + s) * 32])
            .collect();
        let mean = col.iter().sum::<f64>() / 16.0;
        let got = meta.values[(phys * 2) * 64];
        assert!((got - mean).abs() <= 1e-3 * (1.0 + mean.abs()));
    }
}
