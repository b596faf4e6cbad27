//! The softmax top-k (Quest) decode: softmax attention of each query head over the tokens of its
//! KV head's selected pages, flash-decoding style.
//!
//! The selected tokens are taken in compacted order (selected page `i` holds tokens
//! `[i·P, (i+1)·P)`, the last selected page only up to the sequence's end) and cut into splits of
//! `split_len` tokens (`entkv_abi::softmax_topk_plan`). Scores are kept in base-2 units
//! (`s₂ = s·log₂e`, folded into the q scaling and the slopes) so every exponential is one `ex2`.
//!
//! 1. Score pass, one CTA per (split, kv head, batch): each lane group owns tokens of the split
//!    and loads their K and V slices with 16-byte loads interleaved across the token's lanes
//!    (every load instruction reads whole sectors). The next chunk's page lookups are issued
//!    before this chunk's arithmetic, so the block-table chain is off the critical path. Each
//!    lane keeps a running `(max, sum, acc)` per head of the group; lane groups are merged with
//!    shuffles, warps through shared memory, and the split's partials written.
//! 2. Finish pass, one CTA per (query head, batch): `M = max_s m_s`,
//!    `out = Σ_s 2^(m_s−M)·acc_s / Σ_s 2^(m_s−M)·l_s` over the splits that hold tokens.

use super::{i64_of, selected_tokens, LaneSlice};
use crate::{scalar_of, KernelGenError};
use entkv_abi::{softmax_topk_entry_names, PagedSpec, SoftmaxTopkTile};
use entkv_dsl::*;
use std::f64::consts::LOG2_E;

/// One head's running softmax state in one lane: base-2 max, sum of weights, and the weighted
/// sum of this lane's V dims (its `LaneSlice`).
struct Running {
    m: Var,
    l: Var,
    acc: Vec<Var>,
}

/// Merge `(mo, lo, acco)` into `r` by the log-sum-exp rule; empty states (max −∞) weigh 0.
fn merge(k: &mut KernelBuilder, r: &Running, mo: Expr, lo: Expr, acco: &[Expr]) {
    let ninf = f32c(f64::NEG_INFINITY);
    let mo = k.let_("mo", mo);
    let mx = k.let_("mx", r.m.max(mo));
    let wa = k.let_("wa", select(r.m.eq_(ninf.clone()), 0.0f32, (r.m - mx).exp2()));
    let wb = k.let_("wb", select(mo.eq_(ninf), 0.0f32, (mo - mx).exp2()));
    k.assign(r.l, fma(r.l, wa, lo * wb));
    for (a, o) in r.acc.iter().zip(acco) {
        k.assign(*a, fma(*a, wa, o.clone() * wb));
    }
    k.assign(r.m, mx);
}

/// `decode_softmax_topk_score`: grid (splits, kv heads, batch).
pub fn score_kernel(spec: &PagedSpec, tile: &SoftmaxTopkTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let ds = &spec.decode;
    let (name, _) = softmax_topk_entry_names(spec, tile);
    let mut k = KernelBuilder::new(name, tile.threads);
    let q = k.buffer("q", scalar_of(ds.q_dtype), Access::Read);
    let k_pool = k.buffer("k_pool", scalar_of(ds.kv_dtype), Access::Read);
    let v_pool = k.buffer("v_pool", scalar_of(ds.kv_dtype), Access::Read);
    let block_table = k.buffer("block_table", Scalar::I32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let sel_pages = k.buffer("sel_pages", Scalar::I32, Access::Read);
    let sel_count = k.buffer("sel_count", Scalar::I32, Access::Read);
    let slopes = spec
        .alibi
        .then(|| k.buffer("alibi_slopes", Scalar::F32, Access::Read));
    let part_ml = k.buffer("part_ml", Scalar::F32, Access::Write);
    let part_acc = k.buffer("part_acc", Scalar::F32, Access::Write);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let chunks = k.scalar_param("chunks_per_split", Scalar::I32);

    let d = ds.head_dim;
    let group = ds.group as usize;
    let p = spec.page_size;
    let lanes = tile.lanes_per_token;
    let slice = LaneSlice::new(d, lanes, ds.kv_dtype.size_bytes());
    let dims = slice.dims;
    let lane_groups = tile.threads / lanes;
    let chunk_len = tile.chunk_len() as i32;
    let warps = tile.threads / WARP;
    let sh_m = k.shared("part_m_s", Scalar::F32, warps * group as u32);
    let sh_l = k.shared("part_l_s", Scalar::F32, warps * group as u32);
    let sh_acc = k.shared("part_acc_s", Scalar::F32, warps * group as u32 * d);

    let split = k.let_("split", k.block_idx(Axis::X));
    let kvh = k.let_("kvh", k.block_idx(Axis::Y));
    let b = k.let_("b", k.block_idx(Axis::Z));
    let splits = k.let_("splits", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    let tid = k.let_("tid", k.thread_idx());
    let lane = k.let_("lane", k.lane());
    let warp = k.let_("warp", k.warp());
    let sub = k.let_("sub", tid % lanes);
    let tg = k.let_("tg", (tid / lanes).i32());
    let len = k.let_("len", seq_lens.at(b));
    let head_row = k.let_("head_row", i64_of(b) * i64_of(kv_heads) + i64_of(kvh));
    let count = k.let_("count", sel_count.at(head_row));
    let total = selected_tokens(&mut k, spec, len, count.e());
    let split_len = k.let_("split_len", chunks * chunk_len);
    let t0 = k.let_("t0", split.i32() * split_len);

    // Splits past this head's selection write nothing: the finish pass reads only the splits
    // that hold tokens (uniform).
    k.if_(t0.lt(total), |k| {
        let t_end = k.let_("t_end", (t0 + split_len).min(total));
        let mp = k.let_("mp", max_pages);
        let sel_row = k.let_("sel_row", head_row * i64_of(mp));
        let bt_row = k.let_("bt_row", i64_of(b) * i64_of(mp));
        let qpos = k.let_("qpos", len - 1i32);
        let scale = LOG2_E / (d as f64).sqrt();
        let mut qs: Vec<Vec<Var>> = Vec::new();
        let mut slope: Vec<Var> = Vec::new();
        let mut run: Vec<Running> = Vec::new();
        for g in 0..group {
            let h = k.let_("h", kvh * ds.group + g as u32);
            let at = (head_row * ds.group as i64 + i64_of(g as i64)) * d as i64;
            let raw = slice.load(k, "q", q, at, sub);
            qs.push(raw.into_iter().map(|x| k.let_("qs", x.f32() * scale)).collect());
            if let Some(s) = slopes {
                slope.push(k.let_("slope2", s.at(h) * LOG2_E));
            }
            run.push(Running {
                m: k.let_typed("m", Scalar::F32, f64::NEG_INFINITY),
                l: k.let_typed("l", Scalar::F32, 0.0),
                acc: (0..dims).map(|_| k.let_typed("acc", Scalar::F32, 0.0)).collect(),
            });
        }

        // Where this lane group's tokens of a chunk live: pool row start, ALiBi distance,
        // validity.
        let rows: Vec<(Var, Var, Var)> = (0..tile.tokens_per_group)
            .map(|_| {
                (
                    k.let_typed("row", Scalar::I64, 0),
                    k.let_typed("dpos", Scalar::F32, 0.0),
                    k.let_typed("valid", Scalar::Bool, false),
                )
            })
            .collect();
        let lookup = |k: &mut KernelBuilder, c0: Expr| {
            let c0 = k.let_("c0", c0);
            for (r, (row, dpos, valid)) in rows.iter().enumerate() {
                let c = k.let_("c", c0 + tg + (r as u32 * lane_groups) as i32);
                let v = k.let_("v", c.lt(t_end));
                // Invalid tokens read the split's first token instead: finite, in bounds.
                let cc = k.let_("cc", select(v, c, t0));
                let slot = k.let_("slot", cc >> (p.trailing_zeros() as i32));
                let off = k.let_("off", cc & (p as i32 - 1));
                let lp = k.let_("lp", sel_pages.at(sel_row + i64_of(slot)));
                let phys = k.let_("phys", block_table.at(bt_row + i64_of(lp)));
                k.assign(
                    *row,
                    ((i64_of(phys) * i64_of(kv_heads) + i64_of(kvh)) * p as i64 + i64_of(off)) * d as i64,
                );
                k.assign(*dpos, (lp * p as i32 + off - qpos).f32());
                k.assign(*valid, v);
            }
        };
        lookup(k, t0.e());
        k.for_("c0", t0, t_end, chunk_len, |k, c0| {
            // This chunk's K and V, all loads first.
            let mut toks = Vec::new();
            for (row, dpos, valid) in &rows {
                let kr = slice.load(k, "k", k_pool, row.e(), sub);
                let vr = slice.load(k, "v", v_pool, row.e(), sub);
                let dpos = k.let_("dpos_c", *dpos);
                let valid = k.let_("valid_c", *valid);
                toks.push((kr, vr, dpos, valid));
            }
            // The next chunk's page lookups, in flight while this chunk is computed.
            lookup(k, c0 + chunk_len);
            let partial: Vec<(Reduce, Expr)> = qs
                .iter()
                .flat_map(|qg| {
                    toks.iter().map(move |(kr, _, _, _)| {
                        let dot = kr
                            .iter()
                            .zip(qg)
                            .fold(f32c(0.0), |acc, (kx, qx)| fma(*qx, kx.f32(), acc));
                        (Reduce::Sum, dot)
                    })
                })
                .collect();
            let dots = k.warp_allreduce_width(&partial, lanes);
            let ntok = toks.len();
            for (g, st) in run.iter().enumerate() {
                let s: Vec<Var> = toks
                    .iter()
                    .enumerate()
                    .map(|(r, (_, _, dpos, valid))| {
                        let dot = dots[g * ntok + r].e();
                        let s = match slope.get(g) {
                            Some(sl) => fma(*sl, *dpos, dot),
                            None => dot,
                        };
                        k.let_("s2", select(*valid, s, f32c(f64::NEG_INFINITY)))
                    })
                    .collect();
                let cmax = s.iter().fold(st.m.e(), |m, x| m.max(*x));
                let mn = k.let_("m_new", cmax);
                // Nothing valid seen yet (max still −∞): keep the state as it is.
                let rescale = k.let_(
                    "rescale",
                    select(mn.eq_(f32c(f64::NEG_INFINITY)), 1.0f32, (st.m - mn).exp2()),
                );
                let w: Vec<Var> = s
                    .iter()
                    .zip(&toks)
                    .map(|(x, (_, _, _, valid))| k.let_("w", select(*valid, (*x - mn).exp2(), 0.0f32)))
                    .collect();
                let wsum = w.iter().fold(st.l * rescale, |a, x| a + *x);
                k.assign(st.l, wsum);
                for (i, a) in st.acc.iter().enumerate() {
                    let e = w
                        .iter()
                        .zip(&toks)
                        .fold(*a * rescale, |acc, (x, (_, vr, _, _))| fma(*x, vr[i].f32(), acc));
                    k.assign(*a, e);
                }
                k.assign(st.m, mn);
            }
        });

        // Lane groups of a warp hold the same dims: merge them pairwise by shuffles.
        let mut off = lanes;
        while off < WARP {
            for st in &run {
                let mo = k.shuffle(ShuffleMode::Xor, st.m, off);
                let lo = k.shuffle(ShuffleMode::Xor, st.l, off);
                let ao: Vec<Expr> = st
                    .acc
                    .iter()
                    .map(|a| k.shuffle(ShuffleMode::Xor, *a, off).e())
                    .collect();
                merge(k, st, mo.e(), lo.e(), &ao);
            }
            off *= 2;
        }
        k.if_(lane.lt(lanes), |k| {
            for (g, st) in run.iter().enumerate() {
                let slot = k.let_("wslot", warp * group as u32 + g as u32);
                k.if_(sub.eq_(0u32), |k| {
                    k.store(sh_m, slot, st.m);
                    k.store(sh_l, slot, st.l);
                });
                for (i, a) in st.acc.iter().enumerate() {
                    k.store(sh_acc, slot * d + slice.offset(sub, i as u32), *a);
                }
            }
        });
        k.barrier();
        // Merge the warps and write the split's partials, one (head, dim) per thread.
        let head0 = k.let_("head0", head_row * ds.group as i64);
        let nsplits = k.let_("nsplits", i64_of(splits));
        let warp_max = |k: &mut KernelBuilder, g: Expr| {
            let mx = (0..warps).fold(f32c(f64::NEG_INFINITY), |m, w| {
                m.max(sh_m.at(g.clone() + w * group as u32))
            });
            k.let_("m_split", mx)
        };
        let slots = group as u32 * d;
        k.for_("e", tid, slots, tile.threads, |k, e| {
            let g = k.let_("g", e.clone() / d);
            let i = k.let_("i", e % d);
            let mx = warp_max(k, g.e());
            let acc = (0..warps).fold(f32c(0.0), |a, w| {
                let slot = g + w * group as u32;
                fma((sh_m.at(slot.clone()) - mx).exp2(), sh_acc.at(slot * d + i), a)
            });
            let part = k.let_("part", (head0 + i64_of(g)) * nsplits + i64_of(split));
            k.store(part_acc, part * d as i64 + i64_of(i), acc);
        });
        k.for_("g", tid, group as u32, tile.threads, |k, g| {
            let g = k.let_("gg", g);
            let mx = warp_max(k, g.e());
            let l = (0..warps).fold(f32c(0.0), |a, w| {
                let slot = g + w * group as u32;
                fma((sh_m.at(slot.clone()) - mx).exp2(), sh_l.at(slot), a)
            });
            let part = k.let_("part", (head0 + i64_of(g)) * nsplits + i64_of(split));
            k.store(part_ml, part * 2i64, mx);
            k.store(part_ml, part * 2i64 + 1i64, l);
        });
    });
    Ok(k.finish()?)
}

/// `decode_softmax_topk_finish`: grid (query heads, batch).
pub fn finish_kernel(spec: &PagedSpec, tile: &SoftmaxTopkTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let ds = &spec.decode;
    let (_, name) = softmax_topk_entry_names(spec, tile);
    let threads = tile.finish_threads;
    let mut k = KernelBuilder::new(name, threads);
    let part_ml = k.buffer("part_ml", Scalar::F32, Access::Read);
    let part_acc = k.buffer("part_acc", Scalar::F32, Access::Read);
    let sel_count = k.buffer("sel_count", Scalar::I32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let out = k.buffer("out", scalar_of(ds.out_dtype), Access::Write);
    let splits = k.scalar_param("splits", Scalar::I32);
    let split_len = k.scalar_param("split_len", Scalar::I32);

    let d = ds.head_dim;
    // Threads are (split lane, dim) pairs: each sums every `split_lanes`-th split of one dim.
    let split_lanes = threads / d;
    let red = k.shared("red", Scalar::F32, threads / WARP);
    let acc_s = k.shared("acc_s", Scalar::F32, threads);
    let l_s = k.shared("l_s", Scalar::F32, split_lanes);

    let h = k.let_("h", k.block_idx(Axis::X));
    let b = k.let_("b", k.block_idx(Axis::Y));
    let q_heads = k.let_("q_heads", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", q_heads / ds.group);
    let kvh = k.let_("kvh", h / ds.group);
    let tid = k.let_("tid", k.thread_idx());
    let dim = k.let_("dim", tid % d);
    let sl = k.let_("sl", (tid / d).i32());
    let len = k.let_("len", seq_lens.at(b));
    let count = sel_count.at(i64_of(b) * i64_of(kv_heads) + i64_of(kvh));
    let total = selected_tokens(&mut k, spec, len, count);
    let sl_len = k.let_("sl_len", split_len);
    // Splits that hold tokens (every one of them wrote its partials).
    let nvalid = k.let_("nvalid", ((total + sl_len - 1i32) / sl_len).min(splits.clone()));
    let head = k.let_("head", i64_of(b) * i64_of(q_heads) + i64_of(h));
    let base = k.let_("base", head * i64_of(splits));

    let mx = k.let_typed("mx", Scalar::F32, f64::NEG_INFINITY);
    k.for_("s", tid.i32(), nvalid, threads as i32, |k, s| {
        k.assign(mx, mx.max(part_ml.at((base + i64_of(s)) * 2i64)));
    });
    let m = k.block_allreduce(Reduce::Max, mx, red);
    let acc = k.let_typed("acc", Scalar::F32, 0.0);
    let lsum = k.let_typed("lsum", Scalar::F32, 0.0);
    k.for_("s", sl, nvalid, split_lanes as i32, |k, s| {
        let at = k.let_("at", base + i64_of(s));
        let w = k.let_("w", (part_ml.at(at * 2i64) - m).exp2());
        k.assign(acc, fma(w, part_acc.at(at * d as i64 + i64_of(dim)), acc));
        k.assign(lsum, fma(w, part_ml.at(at * 2i64 + 1i64), lsum));
    });
    k.store(acc_s, tid, acc);
    k.if_(dim.eq_(0u32), |k| k.store(l_s, sl, lsum));
    k.barrier();
    k.if_(sl.eq_(0i32), |k| {
        let o = (1..split_lanes).fold(acc_s.at(dim), |a, j| a + acc_s.at(dim + j * d));
        let l = (1..split_lanes).fold(l_s.at(0u32), |a, j| a + l_s.at(j));
        k.store(out, head * d as i64 + i64_of(dim), (o / l).cast(out.elem));
    });
    Ok(k.finish()?)
}
