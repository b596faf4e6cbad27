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
//!
//! `page_bounds` reads the page box sketch (`meta_box`, `entkv_abi::meta`) instead of the exact
//! rows: 4-bit codes rounded outward on each row's grid `g(c) = lo + c·s`, so, with
//! `q⁺ = max(q', 0)`, `q⁻ = max(−q', 0)`,
//! `Σ q⁺_i·max_i − Σ q⁻_i·min_i ≤ lo_max·Σq⁺ + s_max·Σ q⁺_i·c_i − lo_min·Σq⁻ − s_min·Σ q⁻_i·c_i`
//! (and the mirror image for the lower bound). The code sums are integer dot products (`dp4a`):
//! each lane scales its part of `q⁺`, `q⁻` by a power of two `w` (exact) to integers in
//! `0..=255`, rounded up where the sum is added and down where it is subtracted, so the integer
//! bound is still a bound (codes are ≥ 0). Decoding costs a few integer operations a word
//! instead of a conversion and two FMAs a dimension, and the pass reads 64 bytes a (page, head)
//! instead of 128. The slack's magnitude becomes `(Σ|q'_i| + Σ_lanes dims·w)·(M + 1)` with
//! `M = max(|lo_min|, |hi_max|)` (every key lies in `[lo_min, hi_max]`), and the widening gains
//! [`BOX_WIDEN`] of it for the codes' `ε` and this pass's own f32 arithmetic.

use super::{i64_of, load_run, pages_of};
use crate::{certified, page_meta, scalar_of, KernelGenError};
use entkv_abi::{
    page_bounds_entry, page_bounds_lanes, page_score_box_entry, BoxScoreTile, PagedSpec, BOX_BITS,
    PAGE_BOUNDS_ROUNDS,
};
use entkv_dsl::*;

/// Relative widening of `page_bounds` on the slack's magnitude for the page box sketch: its
/// codes' `ε` (`2⁻²⁰·(hi − lo) ≤ 2⁻¹⁹·M` a dimension) and the f32 evaluation of the lane terms
/// (four terms of at most `2M·(Σ|q'| + dims·w)` each, about ten roundings, then the lane
/// reduction) stay below `2⁻¹⁷·(M + 1)·(Σ|q'| + Σ dims·w)`; `2⁻¹⁶` is twice that.
pub const BOX_WIDEN: f64 = 1.0 / 65_536.0;

/// `page_score_box`: grid (kv heads, page blocks, batch) (`entkv_abi::page_score_box_geometry`).
pub fn box_kernel(spec: &PagedSpec, tile: &BoxScoreTile) -> Result<Kernel, KernelGenError> {
    bounds_pass(spec, tile, false)
}

/// `page_bounds`: grid (kv heads, page blocks, batch); `page_score_box`'s tile.
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
    let meta = if rigorous {
        k.buffer("meta_box", Scalar::U32, Access::Read)
    } else {
        k.buffer("meta_bounds", scalar_of(ds.kv_dtype), Access::Read)
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
    // `page_bounds` takes `H = 2^heads_log2` KV heads a block (`entkv_abi::page_bounds_heads`).
    let heads_log2 = rigorous.then(|| {
        let v = k.scalar_param("heads_log2", Scalar::I32);
        k.let_("heads_log2_v", v.u32())
    });

    let d = ds.head_dim;
    let group = ds.group;
    // Lanes a page: the box pass reads one 16-byte slice of each bound row a lane; the rigorous
    // pass reads code word pairs (`entkv_abi::page_bounds_lanes`).
    let lanes = if rigorous {
        page_bounds_lanes(spec)
    } else {
        BoxScoreTile::lanes_per_page(spec)
    };
    let dims = d / lanes;
    let lane_groups = tile.threads / lanes;
    // The rigorous pass takes its pages in rounds of `pages_per_group` a lane group, one after
    // the other, so its integer weights are computed once for all of them.
    let (per_block, pages_per_group, rounds) = if rigorous {
        (
            tile.bounds_pages_per_block(spec),
            tile.bounds_pages_per_group(spec),
            PAGE_BOUNDS_ROUNDS,
        )
    } else {
        (tile.pages_per_block(spec), tile.pages_per_group, 1)
    };

    let blk = k.let_("blk", k.block_idx(Axis::Y));
    let b = k.let_("b", k.block_idx(Axis::Z));
    let tid = k.let_("tid", k.thread_idx());
    let sub = k.let_("sub", tid % lanes);
    let lg = k.let_("lg", tid / lanes);
    // The lane group's KV head and its slot among the block's lane groups of that head: with
    // `H` heads a block, lane group `g` takes head `g mod H`, so a warp's loads read the blocks
    // of `H` heads of a page together; the page pass takes one head a block.
    let (kv_heads, kvh, slot, slots, per_head) = match heads_log2 {
        Some(hl) => (
            k.let_("kv_heads", k.grid_dim(Axis::X) << hl.e()),
            k.let_(
                "kvh",
                (k.block_idx(Axis::X) << hl.e()) + (lg & ((u32c(1) << hl.e()) - 1u32)),
            ),
            k.let_("slot", (lg >> hl.e()).i32()),
            k.let_("slots", i32c(lane_groups as i64) >> hl.i32()),
            k.let_("per_head", i32c(per_block as i64) >> hl.i32()),
        ),
        None => (
            k.let_("kv_heads", k.grid_dim(Axis::X)),
            k.let_("kvh", k.block_idx(Axis::X)),
            k.let_("slot", lg.i32()),
            k.let_("slots", i32c(lane_groups as i64)),
            k.let_("per_head", i32c(per_block as i64)),
        ),
    };
    let len = k.let_("len", seq_lens.at(b));
    let pages = pages_of(&mut k, spec, len);
    let scored = k.let_("scored", pages - 1i32);
    let first = k.let_("first", blk.i32() * per_head);
    let mp = k.let_("mp", max_pages);
    let bt_row = k.let_("bt_row", i64_of(b) * i64_of(mp));
    let out_row = k.let_(
        "out_row",
        (i64_of(b) * i64_of(kv_heads) + i64_of(kvh)) * i64_of(mp),
    );

    // This warp's slot of `page_lb_max` for the lane's head: one per warp of every CTA and head
    // (grid y is the page-block count). Warps, not CTAs: a block reduction's barrier held each
    // CTA until its slowest warp and made the pass 10% slower. The warp's first `H` lane groups
    // (one a head) write them.
    let warps = tile.threads / WARP;
    let lb_max_at = k.let_(
        "lb_max_at",
        ((i64_of(b) * i64_of(kv_heads) + i64_of(kvh)) * i64_of(k.grid_dim(Axis::Y)) + i64_of(blk))
            * warps as i64
            + i64_of(tid / WARP),
    );
    let warp_lead = match heads_log2 {
        Some(hl) => k.let_(
            "warp_lead",
            sub.eq_(0u32).and(((tid % WARP) / lanes).lt(u32c(1) << hl.e())),
        ),
        None => k.let_("warp_lead", (tid % WARP).eq_(0u32)),
    };
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
        // The rigorous pass's integer query weights, once per CTA for all its rounds.
        let weights: Vec<BoxWeights> = if rigorous {
            qs.iter().map(|qg| box_weights(k, qg, lanes)).collect()
        } else {
            Vec::new()
        };
        let slack = certified::slack(d) + BOX_WIDEN;
        let warp_lb = k.let_typed("warp_lb", Scalar::F32, f64::NEG_INFINITY);
        // Slot `r` of `round`: the page index, whether it is scored, and its block-table entry
        // (page 0 is scored whenever this CTA runs, so it is a safe stand-in).
        let round_slots = |k: &mut KernelBuilder, round: u32| -> Vec<(Var, Var, Var)> {
            (0..pages_per_group)
                .map(|r| {
                    let j = k.let_("j", first + slot + slots * (round * pages_per_group + r) as i32);
                    let valid = k.let_("valid", j.lt(scored));
                    let phys = k.let_("phys", block_table.at(bt_row + i64_of(select(valid, j, 0i32))));
                    (j, valid, phys)
                })
                .collect()
        };
        // A round's block-table entries are loaded during the round before it, so its metadata
        // loads wait on one round trip, not two (`page_bounds` at `paper` 1M: 0.427 → 0.358 ms,
        // results/2026-12-03-page-pass-order). Loading every round's entries first was as fast
        // at 1M but spilled at GQA 2 with ALiBi; one round ahead costs `pages_per_group`
        // registers.
        let mut next_slots = round_slots(k, 0);
        for round in 0..rounds {
            // All metadata loads of the CTA's pages first, so they are in flight together.
            let slots = std::mem::take(&mut next_slots);
            let mut pages_v = Vec::new();
            for (j, valid, phys) in slots {
                let rows = if rigorous {
                    // One 64-byte block a (page, head): this lane's min and max code words, then
                    // both range words.
                    let block = k.let_(
                        "box_block",
                        (i64_of(phys) * i64_of(kv_heads) + i64_of(kvh)) * spec.box_block_words() as i64,
                    );
                    let codes = load_run(k, "bcode", meta, block + i64_of(sub * (dims / 4)), dims / 4);
                    let range = k.load_vec("brange", meta, block + spec.box_code_words() as i64, 2);
                    (codes, range)
                } else {
                    let at = k.let_(
                        "meta_at",
                        (i64_of(phys) * i64_of(kv_heads) + i64_of(kvh)) * (2 * d) as i64 + i64_of(sub * dims),
                    );
                    let lo = load_run(k, "kmin", meta, at.e(), dims);
                    let hi = load_run(k, "kmax", meta, at + d as i64, dims);
                    (lo, hi)
                };
                pages_v.push((j, valid, rows));
            }
            // The next round's entries, in flight while this round's sums are computed.
            if round + 1 < rounds {
                next_slots = round_slots(k, round + 1);
            }
            // Per (page, head): Σ_i max(q_i·min_i, q_i·max_i) over this lane's dims; for the
            // rigorous bounds the box sketch's upper and lower sums instead, and the page's `M`.
            let mut partial = Vec::new();
            let mut page_m = Vec::new();
            for (_, _, (a, b)) in &pages_v {
                if rigorous {
                    let page = box_page(k, a, b);
                    page_m.push(page.m);
                    for w in &weights {
                        let (u, l) = page.sums(k, w);
                        partial.push((Reduce::Sum, u));
                        partial.push((Reduce::Sum, l));
                    }
                    continue;
                }
                for qg in &qs {
                    let dot = qg
                        .iter()
                        .zip(a.iter().zip(b))
                        .fold(f32c(0.0), |acc, (qx, (mn, mx))| {
                            fma(*qx, select(qx.ge(0.0f32), *mx, *mn).f32(), acc)
                        });
                    partial.push((Reduce::Sum, dot));
                }
            }
            let per_head = if rigorous { 2 } else { 1 };
            let dots = k.warp_allreduce_width(&partial, lanes);
            for (r, (j, valid, _)) in pages_v.iter().enumerate() {
                // The page's last token sits at (j+1)·P − 1, its first at j·P, the query at len − 1.
                let dpos = k.let_("dpos", ((*j + 1i32) * spec.page_size as i32 - len).f32());
                let at = |g: usize, i: usize| dots[(r * group as usize + g) * per_head + i].e();
                let mut upper = f32c(f64::NEG_INFINITY);
                let mut low = f32c(f64::INFINITY);
                if rigorous {
                    let dfirst = k.let_("dfirst", (*j * spec.page_size as i32 + 1i32 - len).f32());
                    for (g, wg) in weights.iter().enumerate() {
                        // The largest and smallest ALiBi term over the page's tokens (either end).
                        let (u, l, alibi_mag) = match slope.get(g) {
                            Some(s) => {
                                let (x, y) = (k.let_("ab_last", *s * dpos), k.let_("ab_first", *s * dfirst));
                                (at(g, 0) + x.max(y), at(g, 1) + x.min(y), x.abs().max(y.abs()))
                            }
                            None => (at(g, 0), at(g, 1), f32c(0.0)),
                        };
                        let mag = (page_m[r] + 1.0f32) * wg.qmag;
                        let widen = k.let_("widen", fma(mag, slack, alibi_mag * (2.0f64).powi(-20)));
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
        }
        if let (Some(lb_max), Some(hl)) = (lower, heads_log2) {
            // The warp's largest lower bound of each head: over its lane groups of that head,
            // `H` lane groups apart (the lanes of a page agree on its bounds).
            let stride_log = hl + lanes.trailing_zeros();
            let m = k.warp_allreduce_strided_dyn(&[(Reduce::Max, warp_lb.e())], stride_log, lanes)[0];
            k.if_(warp_lead, |k| k.store(lb_max, lb_max_at, m));
        }
    });
    Ok(k.finish()?)
}

/// One lane's integer weights of one query head for the page box sketch: `q⁺`, `q⁻` of its
/// dims over a power of two `w`, rounded up and down, packed a byte a dimension, per 8-dim
/// chunk (even dims in one word, odd in the other: the nibble split of a code word), with their
/// float sums.
struct BoxWeights {
    /// Per chunk `[even, odd]` words of ⌈q⁺/w⌉, ⌊q⁺/w⌋, ⌈q⁻/w⌉, ⌊q⁻/w⌋.
    pos_up: Vec<[Var; 2]>,
    pos_down: Vec<[Var; 2]>,
    neg_up: Vec<[Var; 2]>,
    neg_down: Vec<[Var; 2]>,
    w: Var,
    /// Σ q⁺, Σ q⁻ over this lane's dims.
    pos_sum: Var,
    neg_sum: Var,
    /// Σ|q'_i| + dims·w over the page's lanes (the same in each).
    qmag: Var,
}

/// [`BoxWeights`] of this lane's part `qg` (f32 `q'`, a multiple of 8 dims) of one head. `w` is
/// the smallest power of two with `max|q'_i|/w ≤ 254` (floored at 2⁻¹⁰⁰ so a zero query still
/// has one), so every scaled weight is exact and at most 255; a positive `q'` gets at least 1
/// when rounded up.
fn box_weights(k: &mut KernelBuilder, qg: &[Var], lanes: u32) -> BoxWeights {
    let m = qg.iter().fold(f32c((2.0f64).powi(-100)), |m, x| m.max(x.abs()));
    let x = k.let_("wq_x", m * (1.0 / 254.0));
    // Round `x` up to a power of two: bump the exponent unless the mantissa is zero.
    let w_bits = k.let_(
        "wq_bits",
        (x.e().bitcast(Scalar::U32) + 0x007F_FFFFu32) & 0x7F80_0000u32,
    );
    let w = k.let_("wq", w_bits.e().bitcast(Scalar::F32));
    let inv = k.let_("wq_inv", (u32c(254 << 23) - w_bits).bitcast(Scalar::F32));
    let parts: Vec<(Var, Var)> = qg
        .iter()
        .map(|x| (k.let_("qp", x.max(0.0f32)), k.let_("qn", (-x.e()).max(0.0f32))))
        .collect();
    // At most 254 (by the choice of `w`), so no clamp that could round a weight down.
    let scaled = |v: Var, up: bool| -> Expr {
        let t = v * inv;
        let c = if up {
            select(v.gt(0.0f32), t.ceil().max(1.0f32), 0.0f32)
        } else {
            t.floor()
        };
        c.cast(Scalar::U32)
    };
    let pack = |k: &mut KernelBuilder, neg: bool, up: bool| -> Vec<[Var; 2]> {
        let codes: Vec<Expr> = parts
            .iter()
            .map(|(p, n)| scaled(if neg { *n } else { *p }, up))
            .collect();
        codes
            .chunks(8)
            .map(|chunk| {
                [0usize, 1].map(|par| {
                    let word = chunk
                        .iter()
                        .skip(par)
                        .step_by(2)
                        .enumerate()
                        .fold(u32c(0), |acc, (b, c)| acc | (c.clone() << (8 * b as u32)));
                    k.let_("wq_word", word)
                })
            })
            .collect()
    };
    let pos_up = pack(k, false, true);
    let pos_down = pack(k, false, false);
    let neg_up = pack(k, true, true);
    let neg_down = pack(k, true, false);
    let pos_sum = k.let_("qp_sum", parts.iter().fold(f32c(0.0), |a, (p, _)| a + *p));
    let neg_sum = k.let_("qn_sum", parts.iter().fold(f32c(0.0), |a, (_, n)| a + *n));
    let lane_mag = qg.iter().fold(f32c(0.0), |a, x| a + x.abs()) + w * qg.len() as f64;
    let qmag = k.warp_allreduce_width(&[(Reduce::Sum, lane_mag)], lanes)[0];
    BoxWeights {
        pos_up,
        pos_down,
        neg_up,
        neg_down,
        w,
        pos_sum,
        neg_sum,
        qmag,
    }
}

/// One page's box sketch as this lane sees it: per 8-dim chunk the code nibbles split into even
/// and odd bytes, both rows' grids, and `M`.
struct BoxPage {
    min_codes: Vec<[Var; 2]>,
    max_codes: Vec<[Var; 2]>,
    min_lo: Var,
    min_step: Var,
    max_lo: Var,
    max_step: Var,
    m: Var,
}

/// Decode a loaded block: `codes` (this lane's min and max code words, a pair a chunk) and
/// `range` (both range words).
fn box_page(k: &mut KernelBuilder, codes: &[Var], range: &[Var]) -> BoxPage {
    let split = |k: &mut KernelBuilder, word: Var| -> [Var; 2] {
        [
            k.let_("bc_even", word & 0x0F0F_0F0Fu32),
            k.let_("bc_odd", (word >> 4u32) & 0x0F0F_0F0Fu32),
        ]
    };
    let min_codes = codes.chunks(2).map(|p| split(k, p[0])).collect();
    let max_codes = codes.chunks(2).map(|p| split(k, p[1])).collect();
    let (min_lo, min_hi) = page_meta::unpack_range(k, range[0]);
    let (max_lo, max_hi) = page_meta::unpack_range(k, range[1]);
    let min_step = k.let_("bmin_step", page_meta::emit_sketch_step(BOX_BITS, min_lo, min_hi));
    let max_step = k.let_("bmax_step", page_meta::emit_sketch_step(BOX_BITS, max_lo, max_hi));
    let m = k.let_("box_m", min_lo.abs().max(max_hi.abs()));
    BoxPage {
        min_codes,
        max_codes,
        min_lo,
        min_step,
        max_lo,
        max_step,
        m,
    }
}

impl BoxPage {
    /// This lane's parts of the upper and the lower bound for one head's weights.
    fn sums(&self, k: &mut KernelBuilder, w: &BoxWeights) -> (Expr, Expr) {
        let dot = |k: &mut KernelBuilder, c: &[[Var; 2]], q: &[[Var; 2]]| -> Var {
            let sum = c.iter().zip(q).fold(i32c(0), |acc, (c, q)| {
                dp4a(c[1], false, q[1], false, dp4a(c[0], false, q[0], false, acc))
            });
            k.let_("bdot", sum.f32())
        };
        let max_up = dot(k, &self.max_codes, &w.pos_up); // Σ⌈q⁺/w⌉·cmax
        let min_down = dot(k, &self.min_codes, &w.neg_down); // Σ⌊q⁻/w⌋·cmin
        let min_pos = dot(k, &self.min_codes, &w.pos_down); // Σ⌊q⁺/w⌋·cmin
        let max_neg = dot(k, &self.max_codes, &w.neg_up); // Σ⌈q⁻/w⌉·cmax

        // `s·w` is exact (w a power of two).
        let (smin, smax) = (
            k.let_("bsw_min", self.min_step * w.w),
            k.let_("bsw_max", self.max_step * w.w),
        );
        let upper = fma(smax, max_up, self.max_lo * w.pos_sum) - fma(smin, min_down, self.min_lo * w.neg_sum);
        let lower = fma(smin, min_pos, self.min_lo * w.pos_sum) - fma(smax, max_neg, self.max_lo * w.neg_sum);
        (upper, lower)
    }
}
