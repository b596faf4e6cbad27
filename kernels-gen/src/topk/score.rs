//! `page_score_box`: the box upper bound of every scored page, per KV head, maximised over the
//! group's query heads (spec §3, without the reference's ALiBi quirks: the bound is in score
//! units, `q·k/√d`, and each query head adds its own slope).
//!
//! Rigour: `max(q_i·min_i, q_i·max_i)` is `q_i·max_i` for `q_i ≥ 0` and `q_i·min_i` otherwise
//! (the sign trick: one bound per dimension, one FMA), and f32 rounding is monotone, so the
//! rounded product is still the larger one. The bound differs from its exact value only by the
//! rounding of `d` FMAs, the lane reduction, the 1/√d scaling and the ALiBi product.
//!
//! `page_bounds` (the certified decode's page pruning) is the same pass made rigorous, in the
//! certified decode's units `z = (α − 1)·score` (`q' = q·(α − 1)/√d`): per page the upper bound
//! `Σ max(q'_i·min_i, q'_i·max_i)` plus the page's largest ALiBi term, maximised over the group,
//! and the lower bound `Σ min(q'_i·min_i, q'_i·max_i)` plus its smallest ALiBi term, minimised
//! over the group, each widened by the certified decode's rounding slack
//! (`crate::certified::slack`, on `Σ|q'_i|·(max(|min_i|, |max_i|) + 1)`, plus `2⁻²⁰·|ALiBi|`),
//! so that every token's score as the certified decode computes it lies between them.

use super::{i64_of, load_run, pages_of};
use crate::{certified, scalar_of, KernelGenError};
use entkv_abi::{page_bounds_entry, page_score_box_entry, BoxScoreTile, PagedSpec};
use entkv_dsl::*;

/// `page_score_box`: grid (page blocks, kv heads, batch).
pub fn box_kernel(spec: &PagedSpec, tile: &BoxScoreTile) -> Result<Kernel, KernelGenError> {
    bounds_pass(spec, tile, false)
}

/// `page_bounds`: grid (page blocks, kv heads, batch); `page_score_box`'s grid and tile.
pub fn page_bounds_kernel(spec: &PagedSpec, tile: &BoxScoreTile) -> Result<Kernel, KernelGenError> {
    bounds_pass(spec, tile, true)
}

/// Either pass: `page_score_box` (`rigorous = false`: upper bounds in score units into
/// `page_scores`) or `page_bounds` (upper and lower bounds in `(α − 1)·score` units, with
/// rounding slack: the upper bounds into `page_ub`, and of the lower bounds only each warp's
/// largest into `page_lb_max`, all that the pruning's `τ_low` needs).
fn bounds_pass(spec: &PagedSpec, tile: &BoxScoreTile, rigorous: bool) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let ds = &spec.decode;
    let name = if rigorous {
        page_bounds_entry(spec, tile)
    } else {
        page_score_box_entry(spec, tile)
    };
    let mut k = KernelBuilder::new(name, tile.threads);
    let q = k.buffer("q", scalar_of(ds.q_dtype), Access::Read);
    let meta = k.buffer("meta_bounds", scalar_of(ds.kv_dtype), Access::Read);
    let block_table = k.buffer("block_table", Scalar::I32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let slopes = spec
        .alibi
        .then(|| k.buffer("alibi_slopes", Scalar::F32, Access::Read));
    let (scores, lower) = if rigorous {
        (
            k.buffer("page_ub", Scalar::F32, Access::Write),
            Some(k.buffer("page_lb_max", Scalar::F32, Access::Write)),
        )
    } else {
        (k.buffer("page_scores", Scalar::F32, Access::Write), None)
    };
    let max_pages = k.scalar_param("max_pages", Scalar::I32);

    let d = ds.head_dim;
    let group = ds.group;
    let lanes = BoxScoreTile::lanes_per_page(spec);
    let dims = d / lanes; // one 16-byte slice of each bound row
    let lane_groups = tile.threads / lanes;
    let per_block = tile.pages_per_block(spec);

    let blk = k.let_("blk", k.block_idx(Axis::X));
    let kvh = k.let_("kvh", k.block_idx(Axis::Y));
    let b = k.let_("b", k.block_idx(Axis::Z));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    let tid = k.let_("tid", k.thread_idx());
    let sub = k.let_("sub", tid % lanes);
    let lg = k.let_("lg", (tid / lanes).i32());
    let len = k.let_("len", seq_lens.at(b));
    let pages = pages_of(&mut k, spec, len);
    let scored = k.let_("scored", pages - 1i32);
    let first = k.let_("first", blk.i32() * per_block as i32);
    let mp = k.let_("mp", max_pages);
    let bt_row = k.let_("bt_row", i64_of(b) * i64_of(mp));
    let out_row = k.let_(
        "out_row",
        (i64_of(b) * i64_of(kv_heads) + i64_of(kvh)) * i64_of(mp),
    );

    // This warp's slot of `page_lb_max`: one per warp of every CTA (grid x is the page-block
    // count). Warps, not CTAs: a block reduction's barrier held each CTA until its slowest
    // warp and made the pass 10% slower.
    let warps = tile.threads / WARP;
    let lb_max_at = k.let_(
        "lb_max_at",
        ((i64_of(b) * i64_of(kv_heads) + i64_of(kvh)) * i64_of(k.grid_dim(Axis::X)) + i64_of(blk))
            * warps as i64
            + i64_of(tid / WARP),
    );
    let warp_lead = k.let_("warp_lead", (tid % WARP).eq_(0u32));
    // CTAs past this sequence's scored pages have nothing to do (uniform) but mark their
    // slots empty for the pruning's `τ_low`.
    if let Some(lb_max) = lower {
        k.if_(first.ge(scored).and(warp_lead), |k| {
            k.store(lb_max, lb_max_at, f32c(f64::NEG_INFINITY))
        });
    }
    k.if_(first.lt(scored), |k| {
        // q/√d (q' = q·(α − 1)/√d for the rigorous bounds) for this lane's dims of every
        // head of the group (scaled once, here).
        let inv_sqrt_d = if rigorous {
            ds.z_scale()
        } else {
            1.0 / (d as f64).sqrt()
        };
        let mut qs: Vec<Vec<Var>> = Vec::new();
        let mut slope: Vec<Var> = Vec::new();
        for g in 0..group {
            let h = k.let_("h", kvh * group + g);
            let at =
                (i64_of(b) * i64_of(kv_heads) * group as i64 + i64_of(h)) * d as i64 + i64_of(sub * dims);
            let raw = load_run(k, "q", q, at, dims);
            qs.push(
                raw.into_iter()
                    .map(|x| k.let_("qs", x.f32() * inv_sqrt_d))
                    .collect(),
            );
            if let Some(s) = slopes {
                let a = if rigorous { ds.alpha.value() - 1.0 } else { 1.0 };
                slope.push(k.let_("slope", s.at(h) * a));
            }
        }
        // All metadata loads of the CTA's pages first, so they are in flight together.
        let mut pages_v = Vec::new();
        for r in 0..tile.pages_per_group {
            let j = k.let_("j", first + lg + (r * lane_groups) as i32);
            let valid = k.let_("valid", j.lt(scored));
            // Page 0 is scored whenever this CTA runs, so it is a safe stand-in.
            let phys = k.let_("phys", block_table.at(bt_row + i64_of(select(valid, j, 0i32))));
            let at = k.let_(
                "meta_at",
                (i64_of(phys) * i64_of(kv_heads) + i64_of(kvh)) * (2 * d) as i64 + i64_of(sub * dims),
            );
            let lo = load_run(k, "kmin", meta, at.e(), dims);
            let hi = load_run(k, "kmax", meta, at + d as i64, dims);
            pages_v.push((j, valid, lo, hi));
        }
        // Σ_i max(q_i·min_i, q_i·max_i) over this lane's dims, per (page, head); for the
        // rigorous bounds also Σ_i min(…) and the slack's magnitude Σ_i |q_i|·(max(|min_i|,
        // |max_i|) + 1).
        let mut partial = Vec::new();
        for (_, _, lo, hi) in &pages_v {
            for qg in &qs {
                let dot = |upper: bool| {
                    qg.iter()
                        .zip(lo.iter().zip(hi))
                        .fold(f32c(0.0), |acc, (qx, (mn, mx))| {
                            let (a, b) = if upper { (*mx, *mn) } else { (*mn, *mx) };
                            fma(*qx, select(qx.ge(0.0f32), a, b).f32(), acc)
                        })
                };
                partial.push((Reduce::Sum, dot(true)));
                if rigorous {
                    partial.push((Reduce::Sum, dot(false)));
                    let mag = qg
                        .iter()
                        .zip(lo.iter().zip(hi))
                        .fold(f32c(0.0), |acc, (qx, (mn, mx))| {
                            fma(qx.abs(), mn.f32().abs().max(mx.f32().abs()) + 1.0f32, acc)
                        });
                    partial.push((Reduce::Sum, mag));
                }
            }
        }
        let per_head = if rigorous { 3 } else { 1 };
        let dots = k.warp_allreduce_width(&partial, lanes);
        let slack = certified::slack(d);
        let warp_lb = k.let_typed("warp_lb", Scalar::F32, f64::NEG_INFINITY);
        for (r, (j, valid, _, _)) in pages_v.iter().enumerate() {
            // The page's last token sits at (j+1)·P − 1, its first at j·P, the query at len − 1.
            let dpos = k.let_("dpos", ((*j + 1i32) * spec.page_size as i32 - len).f32());
            let at = |g: usize, i: usize| dots[(r * group as usize + g) * per_head + i].e();
            let mut upper = f32c(f64::NEG_INFINITY);
            let mut low = f32c(f64::INFINITY);
            if rigorous {
                let dfirst = k.let_("dfirst", (*j * spec.page_size as i32 + 1i32 - len).f32());
                for g in 0..group as usize {
                    // The largest and smallest ALiBi term over the page's tokens (either end).
                    let (u, l, alibi_mag) = match slope.get(g) {
                        Some(s) => {
                            let (x, y) = (k.let_("ab_last", *s * dpos), k.let_("ab_first", *s * dfirst));
                            (at(g, 0) + x.max(y), at(g, 1) + x.min(y), x.abs().max(y.abs()))
                        }
                        None => (at(g, 0), at(g, 1), f32c(0.0)),
                    };
                    let widen = k.let_("widen", fma(at(g, 2), slack, alibi_mag * (2.0f64).powi(-20)));
                    upper = upper.max(u + widen);
                    low = low.min(l - widen);
                }
            } else {
                for g in 0..group as usize {
                    let u = match slope.get(g) {
                        Some(s) => fma(*s, dpos, at(g, 0)),
                        None => at(g, 0),
                    };
                    upper = upper.max(u);
                }
            }
            if lower.is_some() {
                k.assign(warp_lb, select(*valid, warp_lb.max(low.clone()), warp_lb));
            }
            k.if_(valid.and(sub.eq_(0u32)), |k| {
                k.store(scores, out_row + i64_of(*j), upper)
            });
        }
        if let Some(lb_max) = lower {
            // The warp's largest lower bound (the lanes of a page agree on its bounds).
            let m = k.warp_allreduce(Reduce::Max, warp_lb);
            k.if_(warp_lead, |k| k.store(lb_max, lb_max_at, m));
        }
    });
    Ok(k.finish()?)
}
