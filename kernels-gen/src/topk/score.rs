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
use crate::{certified, page_meta, scalar_of, KernelGenError};
use entkv_abi::{
    page_bounds_entry, page_score_box_entry, sketch_levels, BoxScoreTile, PagedSpec, BOX_ERROR_MARGIN,
    BOX_SKETCH_BITS, SKETCH_ABS_SLACK, SKETCH_REL_SLACK,
};
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
    // The rigorous bounds read the page box sketch (a quarter of the bytes), the top-k scores
    // the exact bounds (Quest's ranking).
    let meta = if rigorous {
        Meta::Sketch(k.buffer("meta_box", Scalar::U32, Access::Read))
    } else {
        Meta::Exact(k.buffer("meta_bounds", scalar_of(ds.kv_dtype), Access::Read))
    };
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
        let mut loaded = Vec::new();
        for r in 0..tile.pages_per_group {
            let j = k.let_("j", first + lg + (r * lane_groups) as i32);
            let valid = k.let_("valid", j.lt(scored));
            // Page 0 is scored whenever this CTA runs, so it is a safe stand-in.
            let phys = k.let_("phys", block_table.at(bt_row + i64_of(select(valid, j, 0i32))));
            let ph = k.let_("ph", i64_of(phys) * i64_of(kv_heads) + i64_of(kvh));
            let rows = match meta {
                Meta::Exact(buf) => {
                    let at = k.let_("meta_at", ph * (2 * d) as i64 + i64_of(sub * dims));
                    let lo = load_run(k, "kmin", buf, at.e(), dims);
                    let hi = load_run(k, "kmax", buf, at + d as i64, dims);
                    Rows::Exact(lo, hi)
                }
                Meta::Sketch(buf) => {
                    let w = spec.box_row_words() as i64;
                    // 8 codes a word: a lane of 4 dims (f32 keys) shares its word with the next.
                    // One 64-byte block a (page, head): the three loads hit one DRAM burst.
                    let words = dims.div_ceil(8);
                    let block = k.let_("box_block", ph * spec.box_block_words() as i64);
                    let at = k.let_("box_at", block + i64_of((sub * dims) / 8u32));
                    let lo = load_run(k, "bmin", buf, at.e(), words);
                    let hi = load_run(k, "bmax", buf, at + w, words);
                    let range = load_run(k, "brange", buf, block + 2 * w, 2);
                    Rows::Sketch(lo, hi, range)
                }
            };
            loaded.push((j, valid, rows));
        }
        // Sketch rows decode once every load is in flight: `b̂_i = fma(code_i, step, min)` on
        // each row's grid, and `E` bounds `|b_i − b̂_i|` on both rows (`entkv_abi::meta`).
        let mut pages_v = Vec::new();
        for (j, valid, rows) in loaded {
            let (lo, hi, err) = match rows {
                Rows::Exact(lo, hi) => (lo, hi, None),
                Rows::Sketch(lo_words, hi_words, range) => {
                    let (lo, e_lo) = decode_box_row(k, &lo_words, range[0], sub, dims);
                    let (hi, e_hi) = decode_box_row(k, &hi_words, range[1], sub, dims);
                    (lo, hi, Some(k.let_("box_err", e_lo.max(e_hi))))
                }
            };
            pages_v.push((j, valid, lo, hi, err));
        }
        // Σ_i max(q_i·min_i, q_i·max_i) over this lane's dims, per (page, head); for the
        // rigorous bounds also Σ_i min(…) and the slack's magnitude Σ_i |q_i|·(max(|min_i|,
        // |max_i|) + 1).
        let mut partial = Vec::new();
        for (_, _, lo, hi, err) in &pages_v {
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
                    // Keys lie within `err` of the decoded rows: `|k_i| ≤ max(|b̂|) + err`.
                    let one = err.map_or(f32c(1.0), |e| e + 1.0f32);
                    let mag = qg
                        .iter()
                        .zip(lo.iter().zip(hi))
                        .fold(f32c(0.0), |acc, (qx, (mn, mx))| {
                            fma(qx.abs(), mn.f32().abs().max(mx.f32().abs()) + one.clone(), acc)
                        });
                    partial.push((Reduce::Sum, mag));
                    if let Some(e) = err {
                        // `err·Σ|q'_i|`: each dimension's key can sit `err` beyond its row.
                        let q_abs = qg.iter().fold(f32c(0.0), |acc, qx| acc + qx.abs());
                        partial.push((Reduce::Sum, q_abs * *e));
                    }
                }
            }
        }
        let per_head = if rigorous { 4 } else { 1 };
        let dots = k.warp_allreduce_width(&partial, lanes);
        let slack = certified::slack(d);
        let warp_lb = k.let_typed("warp_lb", Scalar::F32, f64::NEG_INFINITY);
        for (r, (j, valid, _, _, _)) in pages_v.iter().enumerate() {
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
                    let widen = k.let_(
                        "widen",
                        fma(at(g, 2), slack, alibi_mag * (2.0f64).powi(-20)) + at(g, 3),
                    );
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

/// Which page metadata a pass reads.
#[derive(Clone, Copy)]
enum Meta {
    /// `meta_bounds`: the exact min and max rows (K dtype).
    Exact(Buf),
    /// `meta_box`: the page box sketch.
    Sketch(Buf),
}

/// One page's loaded metadata (this lane's dimensions).
enum Rows {
    Exact(Vec<Var>, Vec<Var>),
    /// Code words of the min and max rows, and the two range words.
    Sketch(Vec<Var>, Vec<Var>, Vec<Var>),
}

/// This lane's `dims` decoded values of a box sketch row (`words` from word `sub·dims/8`) and
/// the row's error bound `E`, doubled term by term (`entkv_abi::BOX_ERROR_MARGIN`).
fn decode_box_row(k: &mut KernelBuilder, words: &[Var], range: Var, sub: Var, dims: u32) -> (Vec<Var>, Var) {
    let bits = BOX_SKETCH_BITS;
    let (lo, hi) = page_meta::unpack_range(k, range);
    let step = k.let_("box_step", page_meta::emit_sketch_step(bits, lo, hi));
    let m = BOX_ERROR_MARGIN;
    let err = k.let_(
        "box_row_err",
        step * (0.5 * m)
            + (hi - lo) * (m * SKETCH_REL_SLACK)
            + lo.abs().max(hi.abs()) * (m * (2.0f64).powi(-23))
            + m * SKETCH_ABS_SLACK,
    );
    // The first code of this lane sits at bit `4·(sub·dims mod 8)` of its first word.
    let shift0 = if dims % 8 == 0 {
        u32c(0)
    } else {
        ((sub * dims) % 8u32) * bits
    };
    let vals = (0..dims)
        .map(|t| {
            let word = words[(t / 8) as usize];
            let code = (word >> (shift0.clone() + (t % 8) * bits)) & sketch_levels(bits);
            k.let_("box_v", fma(code.f32(), step, lo))
        })
        .collect();
    (vals, err)
}
