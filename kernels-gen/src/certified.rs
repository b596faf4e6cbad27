//! Certified-exact sparse decode: the output equals full-cache entmax (up to f32 rounding) on
//! every input, while reading K and V only for a small certified superset of the support.
//!
//! Two facts (issue #3): (a) the entmax threshold is monotone in every score, so for lower
//! bounds `lb_j ≤ z_j` the threshold of the lower bounds `τ_lb ≤ τ`; (b) a token with
//! `ub_j ≤ τ_lb` has `z_j ≤ τ`, so `p_j = 0`. Bounds come from the quantized key sketch
//! (`entkv_abi::paged`): with `k̂_i = min_i + code_i·step_i` and `|k_i − k̂_i| ≤ step_i/2`,
//!
//! ```text
//! ŝ_j = Σ_i q'_i·k̂_i = Σ_i q'_i·min_i + Σ_i (q'_i·step_i)·code_i
//! |z_j − ŝ_j| ≤ ε_p = Σ_i |q'_i|·step_i/2                  (q' = q·(α−1)/√d)
//! ```
//!
//! plus a slack that covers f32 rounding in ŝ, in ε and in the exact score the decode computes
//! later (see [`slack`]). The last page of each sequence (never sketched) is scored exactly.
//!
//! 1. `select_certified` (grid (splits, kv heads, batch)) streams every token once per GQA group
//!    reading its sketch row (d·bits/8 bytes) and, once per chunk, its pages' min/max, and keeps
//!    in its workspace segment the tokens whose upper bound clears a running lower bound on
//!    `τ_lb` (`stream`). `ŝ` is computed in integers (`dp4a` on the packed codes against
//!    per-page integer weights, see `BoundCtx::page_terms`), the exact path only in the chunk
//!    that reaches the last page.
//! 2. `decode_certified` (grid (query heads, batch)) solves `τ_lb` exactly over the candidates'
//!    lower bounds, keeps the tokens with `ub > τ_lb` (less the solver's tolerance), rescores
//!    them exactly from K (64-byte rows), solves `τ` exactly over the kept set — which contains
//!    the support, so this is the full-cache `τ` — and writes `o = Σ p_j v_j / Σ p_j`, `τ`, the
//!    support size and the number of kept tokens. After a pass that rescores (4-bit sketches)
//!    the candidates are exact already: `τ_lb` is `τ`, and the rescoring and second solve are
//!    skipped.

use crate::finish::{gather, solve_tau, solver_cut, write_output, CandInputs, OutputBufs, Scratch, Source};
use crate::page_meta;
use crate::seed::RepairGate;
use crate::stream::{CandidateBufs, ChunkScores, Stream, Tightening};
use crate::tokens::{
    entmax_score, load_queries, load_queries_mma, slope, Lanes, Layout, MmaQuery, PageBufs, QueryRegs,
    TokenSource, WarpMma,
};
use crate::warp_stream::{order_key, HeadBounds, WarpStream};
use crate::{scalar_of, KernelGenError};
use entkv_abi::pipeline::SELECTED_WALK_SHARE;
use entkv_abi::{sketch_inv_levels, sketch_levels, DType, DecodeKind, DenseTile, PagedSpec};
use entkv_dsl::*;

/// Relative slack on a page's `Σ|q'_i|·(max(|min_i|, |max_i|) + 1)` that covers f32 rounding:
/// the d-term dot products giving `ŝ` and the exact score (`≤ (d+2)·2⁻²⁴` relative each), the
/// sketch's own rounding (`2⁻²²·(max − min) + 2⁻¹²⁶`, `entkv_abi::sketch_error_bound`), and the
/// additions of ε, the slack and ALiBi (a few ulps). `8·(d+2)·2⁻²⁴ + 2⁻²⁰` is at least twice all
/// of them.
pub fn slack(head_dim: u32) -> f64 {
    8.0 * (head_dim as f64 + 2.0) * (2.0f64).powi(-24) + (2.0f64).powi(-20)
}

pub use entkv_abi::pipeline::certified_entry_names as entry_names;

/// `select_certified`: grid (splits, kv heads, batch). Parameters: `q, k_pool, block_table,
/// seq_lens, meta_bounds, sketch, [alibi_slopes], cand_lb, cand_ub, cand_idx, cand_count,
/// cand_bound, [head_bound] (shared bounds), [repair, gate] (seeded), max_pages,
/// chunks_per_split`.
pub fn select_kernel(spec: &PagedSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    score_pass(spec, tile, Walk::Full, refines(spec))
}

/// `certified_init`: every query head's shared threshold bound (`head_bound`, an
/// order-preserving i32 of an f32) set to −∞ before a pass over a per-token grid raises them.
/// Grid: enough blocks of [`entkv_abi::pipeline::CERTIFIED_INIT_THREADS`] for `heads`.
/// Parameters: `head_bound, heads`.
pub fn init_kernel(spec: &PagedSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    tile.check_for(spec, DecodeKind::Certified)?;
    let threads = entkv_abi::pipeline::CERTIFIED_INIT_THREADS;
    let mut k = KernelBuilder::new(entkv_abi::pipeline::certified_init_entry(spec, tile), threads);
    let head_bound = k.buffer("head_bound", Scalar::I32, Access::Write);
    let heads = k.scalar_param("heads", Scalar::I32);
    let h = k.let_("h", k.block_idx(Axis::X) * threads + k.thread_idx());
    k.if_(h.lt(heads.u32()), |k| {
        k.store(head_bound, h.i64(), order_key(f32c(f64::NEG_INFINITY)))
    });
    Ok(k.finish()?)
}

/// The kernels a tile adds to the certified family's: the seed's three (`crate::seed`) when
/// its shared head bounds start at an estimate (and the page-pruned walk's sample pass when it
/// serves that walk seeded), else [`init_kernel`] when its splits share head bounds, none
/// otherwise.
pub fn tile_extra_kernels(spec: &PagedSpec, tile: &DenseTile) -> Result<Vec<Kernel>, KernelGenError> {
    if tile.seed {
        let mut v = vec![
            crate::seed::scores_kernel(spec, tile, false)?,
            crate::seed::estimate_kernel(spec, tile)?,
            crate::seed::verify_kernel(spec, tile)?,
        ];
        if tile.pruned_walk {
            v.push(crate::seed::scores_kernel(spec, tile, true)?);
        }
        Ok(v)
    } else if tile.share_bound {
        Ok(vec![init_kernel(spec, tile)?])
    } else {
        Ok(Vec::new())
    }
}

/// [`select_kernel`] without rescoring, for checks: its candidates carry their sketch bounds,
/// which must hold against every token's float64 score. Entry [`unrefined_entry`].
pub fn unrefined_select_kernel(spec: &PagedSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    score_pass(spec, tile, Walk::Full, false)
}

/// `select_certified_bounds__<spec+sketch>__<tile>`: [`unrefined_select_kernel`]'s entry, apart
/// from the shipped pass's so that a GPU module can hold both.
pub fn unrefined_entry(spec: &PagedSpec, tile: &DenseTile) -> String {
    format!("select_certified_bounds__{}__{}", spec.sketch_tag(), tile.tag())
}

/// `select_certified_sel`: [`select_kernel`] over the pages in `sel_pages`/`sel_count` (the last
/// page last), iteration index `c` standing for token `c mod P` of selected page `⌊c/P⌋`, for
/// the (sequence, KV head) pairs whose selection is short (`Walk::Selected`). Parameters:
/// `q, k_pool, block_table, seq_lens, sel_pages, sel_count, meta_bounds, sketch,
/// [alibi_slopes], cand_lb, cand_ub, cand_idx, cand_count, cand_bound, [head_bound],
/// [repair, gate] (`DenseTile::pruned_walk`), max_pages, chunks_per_split`.
pub fn selected_select_kernel(spec: &PagedSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    score_pass(spec, tile, Walk::Selected, refines(spec))
}

/// `select_certified_rest`: [`select_kernel`] for the (sequence, KV head) pairs whose selection
/// is long (`Walk::Rest`). Parameters: those of [`select_kernel`] with `sel_count` after
/// `seq_lens`.
pub fn rest_select_kernel(spec: &PagedSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    score_pass(spec, tile, Walk::Rest, refines(spec))
}

/// The page-pruned walk's score passes ([`selected_select_kernel`], [`rest_select_kernel`]) of a
/// tile that serves that walk (`DenseTile::serves_pruned_walk`), none for one that does not.
pub fn pruned_walk_kernels(spec: &PagedSpec, tile: &DenseTile) -> Result<Vec<Kernel>, KernelGenError> {
    if !tile.serves_pruned_walk() {
        return Ok(Vec::new());
    }
    Ok(vec![
        selected_select_kernel(spec, tile)?,
        rest_select_kernel(spec, tile)?,
    ])
}

/// Which tokens a certified score pass walks. After page pruning both [`Walk::Selected`] and
/// [`Walk::Rest`] run, each on the (sequence, KV head) pairs the other skips: where the pruning
/// kept more than 3/4 of the pages, the full walk (four CTAs per SM, no selection lookups;
/// 1.3× faster per token at 1M, results/2026-11-30-pruned) beats the selected one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Walk {
    /// Every token of every sequence (`select_certified`).
    Full,
    /// The selected pages of the pairs that kept at most 3/4 of their pages.
    Selected,
    /// Every token of the pairs that kept more.
    Rest,
}

/// Whether the selected walk takes a (sequence, KV head) pair whose pruning kept `kept` of its
/// `pages` pages (i32; `entkv_abi::pipeline::selected_walk_takes` on the host): at most
/// [`SELECTED_WALK_SHARE`] of them.
pub(crate) fn selected_walk_takes(kept: Expr, pages: Expr) -> Expr {
    let (num, den) = SELECTED_WALK_SHARE;
    (kept * den as i32).le(pages * num as i32)
}

/// [`selected_walk_takes`] for pair (`b`, `kvh`) of a sequence of `seq_len` tokens, from the
/// count its pruning wrote to `sel_count`: the test that splits the pairs between the two
/// walks' passes, and that the seeded page-pruned walk's sample pass skips by.
pub(crate) fn pair_takes_selected_walk(
    sel_count: Buf,
    b: Var,
    kv_heads: Var,
    kvh: Var,
    seq_len: Var,
    page_size: u32,
) -> Expr {
    let kept = sel_count.at(b.i64() * kv_heads.i64() + kvh.i64());
    let pages = (seq_len + (page_size as i64 - 1)) / page_size as i64;
    selected_walk_takes(kept, pages.i32())
}

/// Whether the score pass rescores from K the tokens whose sketch bound clears the running
/// bound (`RescoreQueue`): with 4-bit sketches. Their bounds are ~17× wider than 8-bit
/// ones, so ~1% of the tokens clear the bound, and kept as bounds they made the stream and the
/// finish pass the cost of the step (results/2026-11-30-stream-gate).
pub fn refines(spec: &PagedSpec) -> bool {
    spec.sketch_token_grid()
}

fn score_pass(
    spec: &PagedSpec,
    tile: &DenseTile,
    walk_kind: Walk,
    refine: bool,
) -> Result<Kernel, KernelGenError> {
    let ds = &spec.decode;
    tile.check_for(spec, DecodeKind::Certified)?;
    let selected = walk_kind == Walk::Selected;
    let name = match walk_kind {
        Walk::Full if !refine && refines(spec) => unrefined_entry(spec, tile),
        Walk::Full => entry_names(spec, tile).0,
        Walk::Selected => entkv_abi::pipeline::certified_selected_entry(spec, tile),
        Walk::Rest => entkv_abi::pipeline::certified_rest_entry(spec, tile),
    };
    let mut k = KernelBuilder::new(name, tile.threads);
    // The checks-only pass (no rescoring, exact last page) is never timed: no occupancy floor,
    // so the registers of its exact tail never spill (8 B at the 4-bit default tile under the
    // driver's JIT).
    let checks_only = !refine && refines(spec);
    if tile.score_min_blocks > 0 && !checks_only {
        // The selected walk looks every token's page up in the selection: at four CTAs per SM
        // (128 registers) it spills (44 bytes at d = 32, local ptxas 12.9), so it runs at most
        // three.
        let floor = if selected {
            tile.score_min_blocks.min(3)
        } else {
            tile.score_min_blocks
        };
        k.set_min_blocks_per_sm(floor);
    }
    let kv = scalar_of(ds.kv_dtype);
    let q = k.buffer("q", scalar_of(ds.q_dtype), Access::Read);
    let keys = k.buffer("k_pool", kv, Access::Read);
    let block_table = k.buffer("block_table", Scalar::I32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let sel_pages = selected.then(|| k.buffer("sel_pages", Scalar::I32, Access::Read));
    let sel_count = (walk_kind != Walk::Full).then(|| k.buffer("sel_count", Scalar::I32, Access::Read));
    let sel = sel_pages.zip(sel_count);
    let bounds_buf = k.buffer("meta_bounds", kv, Access::Read);
    let sketch = k.buffer("sketch", Scalar::U32, Access::Read);
    let slopes = spec
        .alibi
        .then(|| k.buffer("alibi_slopes", Scalar::F32, Access::Read));
    let bufs = CandidateBufs::declare_bounded(&mut k);
    let grid = spec.sketch_token_grid();
    let head_bound = tile
        .share_bound
        .then(|| k.buffer("head_bound", Scalar::I32, Access::ReadWrite));
    // A seeded walk runs twice a step (`entkv_abi::seed`): first every CTA (gate 0), then
    // those of the pairs `certified_verify` flagged (gate 1). The page-pruned walk's passes
    // are seeded where the tile serves that walk seeded (`_pw`).
    let seeded = tile.seed && (walk_kind == Walk::Full || tile.pruned_walk);
    let repair_gate = seeded.then(|| RepairGate::declare(&mut k));
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let chunks_param = k.scalar_param("chunks_per_split", Scalar::I32);
    let chunks = k.let_("chunks", chunks_param);

    let split = k.let_("split", k.block_idx(Axis::X));
    let kvh = k.let_("kvh", k.block_idx(Axis::Y));
    let b = k.let_("b", k.block_idx(Axis::Z));
    let splits = k.let_("splits", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    let q_heads = k.let_("q_heads", kv_heads * ds.group);
    let pages = PageBufs {
        block_table,
        seq_lens,
        sel,
        max_pages: k.let_("max_pages", max_pages),
    };
    let p = spec.page_size;
    let layout = if selected {
        Layout::Selected { page_size: p }
    } else {
        Layout::Paged { page_size: p }
    };
    let src = TokenSource::new(&mut k, layout, ds.head_dim, b, kvh, kv_heads, None, Some(pages));
    let walk_gate = sel_count.map(|count| {
        let takes = pair_takes_selected_walk(count, b, kv_heads, kvh, src.seq_len, p);
        k.let_("walks_row", if selected { takes } else { takes.not() })
    });
    let repair_gate = repair_gate.map(|g| g.runs(&mut k, b, kv_heads, kvh));
    let walk_gate = match (walk_gate, repair_gate) {
        (Some(w), Some(r)) => Some(k.let_("runs_cta", w.and(r))),
        (w, r) => w.or(r),
    };
    // A gated CTA (a pair the pass skips: the seeded repair launch's unflagged pairs, the other
    // walk's pairs) returns before its prologue: q, the page terms and the stream's shared
    // state cost the gated-off grid of a seeded step's repair launch 15 µs on `wide` at 128k
    // (results/2026-12-06-h200/2-ncu-steps), where the flag load alone is a round trip.
    let pass = |k: &mut KernelBuilder| -> Result<(), KernelGenError> {
        let lanes = Lanes::new(k, ds, tile);
        let owner = k.let_("owner", lanes.sub.eq_(0u32));
        let qr = load_queries(k, ds, &lanes, q, slopes, b, kvh, q_heads);
        // Tokens before the last page have a sketch; the last page is scored exactly. It starts at
        // position `sketched`, and at iteration index `tail_start` (the last selected page's).
        let sketched = k.let_("sketched", (src.seq_len - 1i64) / p as i64 * p as i64);
        let tail_start = if selected {
            k.let_("tail_start", src.len - p as i64)
        } else {
            sketched
        };
        let chunk_len = tile.chunk_len();
        let split_len = k.let_("split_len", chunks.i64() * chunk_len as i64);
        // Which iteration indices this split walks: its plan's range, for the selected walk too.
        // Dealing a short selection out in runs over the splits (`TokenSource::selection_run`, as
        // the sparse decode does) measured slower on `peaked` at 1M (score + finish 0.18 → 0.33 ms,
        // results/2026-11-30-pruned/runs-63a44dc): each run's bound sees two chunks, so the finish
        // pass gets many more candidates; one CTA walking the whole short selection prunes it.
        let c_split = k.let_("c_split", split.i64() * split_len);
        let c_end = src.len;
        let seg_index = |_: &mut KernelBuilder, g: u32| -> Expr {
            (b * q_heads + (kvh * ds.group + g)).i64() * splits.i64() + split.i64()
        };
        // A per-token grid (4-bit sketches) streams warp-locally: ~1% of its tokens clear the
        // running bound and are rescored from K in batches (`RescoreQueue`), and no other
        // warp waits for that round trip (`warp_stream`). The 8-bit pass keeps the block stream.
        let streams = if grid {
            // One index for the group (its first head's); head `g` is `g` past it. A 64-bit
            // index a head spilled GQA 8 (results/2026-12-01-exact-finish/4-head-bound-ab).
            let global = head_bound.map(|buf| HeadBounds {
                buf,
                first: k.let_("head_at", (b * q_heads + kvh * ds.group).i64()),
                seeded,
            });
            Streams::Warp(WarpStream::new(k, ds, tile, bufs, &seg_index, split_len, global))
        } else {
            // Tightening after every appending chunk: gating was timed on the decode passes only.
            Streams::Block(Stream::new(
                k,
                ds,
                tile,
                bufs,
                &seg_index,
                split_len,
                Tightening::EveryChunk,
            ))
        };
        // The chunk's pages' affine terms, computed once per page and head (not per token).
        let p = spec.page_size;
        if chunk_len % p != 0 && p % chunk_len != 0 {
            return Err(entkv_abi::SpecError::BadTile {
                kernel: "select_certified",
                reason: format!("chunk of {chunk_len} tokens must divide or be a multiple of page size {p}"),
            }
            .into());
        }
        // A per-token grid needs one set of terms per head for the whole pass.
        let ppc = if grid { 1 } else { (chunk_len / p).max(1) };
        let terms = Terms::declare(k, spec, ppc, tile.threads, &qr);
        // Rescoring on the tensor cores (`_tc`, 4-bit sketches only; the checks-only pass rescores
        // nothing).
        let mma = (tile.mma && refine && grid).then(|| {
            let init = load_queries_mma(k, ds, q, slopes, b, kvh, q_heads)
                .mma
                .expect("load_queries_mma fills the fragments");
            MmaRescore::declare(k, ds.head_dim, init)
        });
        // The sketch sums on the tensor cores (`_im`) where this walk looks its tokens' pages up
        // (the full walk and the rest walk); the selected walk keeps `dp4a`.
        let sketch_mma =
            (tile.sketch_mma && grid && !selected).then(|| SketchMma::declare(k, ds, tile.threads));
        let ctx = BoundCtx {
            spec,
            lanes,
            src,
            keys,
            bounds: bounds_buf,
            sketch,
            sketched,
            slack: slack(ds.head_dim),
            terms,
            mma,
            sketch_mma,
        };
        let err = std::cell::Cell::new(None);
        // Per token and head `(lb, ub)` and the token positions, written by either body below.
        let neg_inf = f64::NEG_INFINITY;
        let bounds: Vec<Vec<(Var, Var)>> = (0..ds.group)
            .map(|_| {
                (0..tile.tokens_per_group)
                    .map(|_| {
                        (
                            k.let_typed("lbv", Scalar::F32, neg_inf),
                            k.let_typed("ubv", Scalar::F32, neg_inf),
                        )
                    })
                    .collect()
            })
            .collect();
        // Loop-carried: a chunk's tokens and their sketch words. They are loaded one chunk ahead,
        // right after the current chunk is scored, so the loads fly during the stream's block
        // reductions and the next chunk's page terms (registers are the words the scoring just
        // consumed). The shipped full walk over a per-token grid (`interleaved`) loads each token
        // of the next chunk as soon as the current one is scored instead.
        let n_words = lanes.dims * spec.sketch_bits / 32;
        let interleaved = refine && grid && !selected;
        let tokens: Vec<ChunkToken> = (0..tile.tokens_per_group)
            .map(|r| {
                let local = (lanes.tgroup + r * lanes.token_groups).i64();
                ChunkToken {
                    t: k.let_typed("t32", Scalar::I32, 0i32),
                    valid: k.let_typed("valid", Scalar::Bool, false),
                    page_in_chunk: k.let_("pic", (local / p as i64).i32().min(ppc as i32 - 1)),
                    words: (0..n_words)
                        .map(|_| k.let_typed("skw", Scalar::U32, 0u32))
                        .collect(),
                    range: grid.then(|| k.let_typed("skr", Scalar::U32, 0u32)),
                    norm: spec.sketch_norm().then(|| k.let_typed("skn", Scalar::U32, 0u32)),
                }
            })
            .collect();
        let positions: Vec<Var> = (0..tile.tokens_per_group)
            .map(|_| k.let_typed("pos", Scalar::I32, 0i32))
            .collect();
        // A full walk over a per-token grid looks its pages up a chunk before it loads their
        // sketch rows (`pages`, the pool page of each token of the chunk after next): a chunk's
        // sketch loads then wait for one round trip, not for a block-table load and then the row.
        // The warp stream leaves little work between a chunk's loads and their use. A selected
        // walk finds positions through the selection, and the 8-bit pass hides its loads behind
        // the block stream and the page terms (a register a token more spilled it at d = 128,
        // G = 4): both keep one-stage loads.
        let pages: Vec<Var> = (0..if selected || !grid {
            0
        } else {
            tile.tokens_per_group
        })
            .map(|_| k.let_typed("pg_ahead", Scalar::I32, 0i32))
            .collect();
        // Positions of the full walk in 32 bits (plans refuse sequences of 2³¹ tokens): every
        // 64-bit operation is two or three instructions, and this address arithmetic runs for
        // every token.
        let look_up_pages = |k: &mut KernelBuilder, c0: Expr| {
            let c0 = k.let_("c0_pages", c0.i32());
            let len = k.let_("len32", src.len.i32());
            for (r, page) in pages.iter().enumerate() {
                let local = (lanes.tgroup + r as u32 * lanes.token_groups).i32();
                let c = k.let_("ci_p", c0 + local);
                // Unsigned: a chunk past 2³¹ − 1 wraps negative.
                let t = select(c.u32().lt(len.u32()), c, 0i32);
                let p = src.phys_page(k, t);
                k.assign(*page, p);
            }
        };
        // Token `r` of the chunk at `c0` into its registers (token `r` of a lane group is the
        // chunk's `tgroup + r·token_groups`: a warp's loads of one `r` are whole rows of 32 tokens).
        let load_token = |k: &mut KernelBuilder, c0: Expr, r: usize| {
            let tok = &tokens[r];
            let (t, valid, words, range_at, norm_at) = match pages.get(r) {
                // The looked-up page is token 0's where this one is out of range, as `t` is.
                Some(page) => {
                    let local = (lanes.tgroup + r as u32 * lanes.token_groups).i32();
                    let c = k.let_("ci", c0.i32() + local);
                    let valid = k.let_("valid_n", c.u32().lt(src.len.u32()));
                    let t = k.let_("t", select(valid, c, 0i32).i64());
                    let block = k.let_("sk_block", ctx.src.page_block(page.e()));
                    let slot = k.let_("sk_slot", (c & (spec.page_size as i32 - 1)).i64());
                    let words = match &ctx.sketch_mma {
                        // The A words of the round: rows of the warp's other tokens, whose
                        // pages their owners looked up.
                        Some(sm) => {
                            let code_at = |k: &mut KernelBuilder, owner: Expr| -> Expr {
                                let page = k.shuffle(ShuffleMode::Idx, *page, owner.clone());
                                // The owner's iteration index: this lane's, moved by their lanes'.
                                let c = k.let_("ci_im", c + owner.i32() - sm.lane.i32());
                                let block = ctx.src.page_block(page.e());
                                page_meta::sketch_code_in(
                                    spec,
                                    block,
                                    (c & (spec.page_size as i32 - 1)).i64(),
                                )
                            };
                            sm.load_words(k, spec, ctx.sketch, &code_at)
                        }
                        None => ctx.sketch_words(k, page_meta::sketch_code_in(spec, block.e(), slot.e())),
                    };
                    (
                        t,
                        valid,
                        words,
                        page_meta::sketch_range_in(spec, block.e(), slot.e()),
                        page_meta::sketch_norm_in(spec, block.e(), slot.e()),
                    )
                }
                None => {
                    let local = (lanes.tgroup + r as u32 * lanes.token_groups).i64();
                    let c = k.let_("ci", c0 + local);
                    let in_range = k.let_("in_range", c.lt(src.len));
                    let t = src.position(k, select(in_range, c, 0i64).into_expr(None));
                    let valid = k.let_("valid_n", src.valid(c, t));
                    let t = k.let_("t", select(valid, t, 0i64));
                    let row = ctx.src.row(k, t.e());
                    let sketch_row = k.let_("sketch_row", row >> ds.head_dim.trailing_zeros() as i64);
                    (
                        t,
                        valid,
                        ctx.sketch_words(k, page_meta::sketch_code_at(spec, sketch_row)),
                        page_meta::sketch_range_at(spec, sketch_row),
                        page_meta::sketch_norm_at(spec, sketch_row),
                    )
                }
            };
            match words {
                Ok(words) => {
                    k.assign(tok.t, t.i32());
                    k.assign(tok.valid, valid);
                    for (dst, w) in tok.words.iter().zip(words) {
                        k.assign(*dst, w);
                    }
                    if let Some(r) = tok.range {
                        let w = k.let_("range_word", ctx.sketch.at(range_at));
                        k.assign(r, w);
                    }
                    if let Some(n) = tok.norm {
                        let w = k.let_("norm_word", ctx.sketch.at(norm_at));
                        k.assign(n, w);
                    }
                }
                Err(e) => {
                    err.replace(Some(e));
                }
            }
        };
        let load_chunk = |k: &mut KernelBuilder, c0: Var| {
            for r in 0..tokens.len() {
                load_token(k, c0.e(), r);
            }
        };
        let queue = (refine && grid).then(|| RescoreQueue::new(k, tile, &lanes));
        // A queued batch: each lane group's token rescored exactly, raising the filter and
        // appended where it clears it.
        let rescore_batch = |k: &mut KernelBuilder, t: Var, active: Var| {
            let Streams::Warp(ws) = &streams else {
                unreachable!("only the warp stream queues rescorings");
            };
            let z = ctx.rescore(k, &qr, t, active);
            let bounds: Vec<Vec<(Var, Var)>> = z.iter().map(|z| vec![(*z, *z)]).collect();
            ws.raise(k, &bounds);
            let appender = k.let_("q_owner", owner.and(active));
            ws.append(
                k,
                &ChunkScores {
                    bounds,
                    position: &|_, _| t.e(),
                    owner: appender,
                },
            );
        };
        // A (sequence, KV head) whose pruning kept most pages is walked in full by
        // `select_certified_rest` (see [`Walk`]); the other pass skips it (CTA-uniform), stream
        // flush included, so each workspace segment has one writer.
        let walk = |k: &mut KernelBuilder| {
            if grid {
                ctx.query_terms(k, &qr);
            }
            k.if_(c_split.lt(c_end), |k| {
                look_up_pages(k, c_split.e());
                load_chunk(k, c_split);
                look_up_pages(k, c_split + chunk_len as i64);
            });
            k.for_("chunk", 0i32, chunks, 1i32, |k, chunk| {
                let chunk = k.let_("chunk_i", chunk);
                let c0 = k.let_("c0", c_split + chunk.i64() * chunk_len as i64);
                k.if_(c0.lt(c_end), |k| {
                    if !grid {
                        ctx.page_terms(k, &qr, c0);
                    }
                    // Only the chunk that reaches the last page (never sketched) scores tokens exactly
                    // from K; every other chunk reads the sketch alone (block-uniform branch).
                    let score = |k: &mut KernelBuilder, tail: Tail, reload: Option<&TokenLoad>| {
                        for (r, tok) in tokens.iter().enumerate() {
                            let sums = ctx.sketch_mma.as_ref().map(|sm| sm.sums(k, &tok.words));
                            let bounds_r = ctx.token_bounds(k, &qr, tok, tail, sums.as_deref());
                            for (g, (lb, ub)) in bounds_r.into_iter().enumerate() {
                                k.assign(bounds[g][r].0, lb);
                                k.assign(bounds[g][r].1, ub);
                            }
                            k.assign(positions[r], tok.t);
                            if let Some(reload) = reload {
                                reload(k, r);
                            }
                        }
                    };
                    if interleaved {
                        // Each token's registers take the next chunk's token as soon as it is
                        // scored, so a lane's loads fly while it scores (the pass waits on its
                        // loads: ncu's long-scoreboard stalls are 65% of a warp's cycles). The
                        // chunk after the split's last loads too (in-pool addresses, unused).
                        let c1 = c0 + chunk_len as i64;
                        let reload = |k: &mut KernelBuilder, r: usize| load_token(k, c1.clone(), r);
                        score(k, Tail::Open, Some(&reload));
                    } else if refine {
                        score(k, Tail::Open, None);
                    } else {
                        let tail = k.let_("tail", (c0 + chunk_len as i64).gt(tail_start));
                        k.if_else(
                            tail,
                            |k| score(k, Tail::Exact, None),
                            |k| score(k, Tail::Absent, None),
                        );
                    }
                    if let Streams::Warp(ws) = &streams {
                        ws.raise(k, &bounds);
                    }
                    // Whether token `r` needs rescoring: its bound clears the filter for some head
                    // (checked before the next chunk's loads reuse the token registers).
                    let need: Vec<Var> = match (&streams, &queue) {
                        (Streams::Warp(ws), Some(_)) => (0..tile.tokens_per_group as usize)
                            .map(|r| {
                                let clears = ws
                                    .segs
                                    .iter()
                                    .zip(&bounds)
                                    .fold(boolc(false), |acc, (s, b)| acc.or(b[r].1.gt(s.filter)));
                                k.let_("need", owner.and(clears))
                            })
                            .collect(),
                        _ => Vec::new(),
                    };
                    // The next chunk's loads fly during the rescoring's round trip and the stream.
                    let c1 = k.let_("c1", c0 + chunk_len as i64);
                    let more = k.let_("more", (chunk + 1i32).lt(chunks).and(c1.lt(c_end)));
                    k.if_(more, |k| {
                        if !interleaved {
                            load_chunk(k, c1);
                        }
                        look_up_pages(k, c1 + chunk_len as i64);
                    });
                    let scores = ChunkScores {
                        bounds: bounds.clone(),
                        position: &|_, r| positions[r].e(),
                        owner,
                    };
                    match (&streams, &queue) {
                        // A token that clears the filter is queued for rescoring, and one that does
                        // not would not be appended: nothing is appended from the sketch.
                        (Streams::Warp(_), Some(q)) => {
                            q.push(k, &need, &positions);
                            q.drain(k, false, &rescore_batch);
                        }
                        (Streams::Warp(ws), None) => ws.append(k, &scores),
                        (Streams::Block(bs), _) => bs.push(k, &scores),
                    }
                });
            });
            if let Some(q) = &queue {
                q.drain(k, true, &rescore_batch);
            }
            match &streams {
                Streams::Warp(ws) => ws.finish(k),
                Streams::Block(bs) => bs.finish(k, &seg_index),
            }
        };
        walk(k);
        match err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    };
    match walk_gate {
        Some(gate) => {
            let mut res = Ok(());
            k.if_(gate, |k| res = pass(k));
            res?
        }
        None => pass(&mut k)?,
    }
    Ok(k.finish()?)
}

/// Loads token `r` of a chunk into its registers.
type TokenLoad<'a> = dyn Fn(&mut KernelBuilder, usize) + 'a;

/// What [`BoundCtx::token_bounds`] gives the tokens of the last page, which have no sketch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tail {
    /// No token of the chunk is in the last page.
    Absent,
    /// Their exact scores, from K.
    Exact,
    /// `(−∞, +∞)`: every bound clears them, so a rescoring pass ([`RescoreQueue`]) scores
    /// them exactly with the tokens it rescores anyway. The exact path's K row and q' registers
    /// (80 against 40 at one token a lane, d = 32) then never coexist with the stream's.
    Open,
}

/// The candidate stream of a score pass: warp-local over a per-token grid, block-wide over
/// the 8-bit per-page grid.
enum Streams<'a> {
    Warp(WarpStream<'a>),
    Block(Stream<'a>),
}

/// The tokens a certified pass rescores from K (those whose sketch bound clears the filter),
/// queued per warp in shared memory and rescored a batch at a time, one token a lane group.
/// Rescoring each chunk's few such tokens where they arise ran the warp through a whole
/// rescoring for one or two lanes: at `paper` 1M a third of a warp's chunks did, and that
/// was a quarter of the pass's instructions.
struct RescoreQueue {
    slots: Buf,
    /// This warp's first slot (u32).
    base: Var,
    /// Queued tokens (i32, warp-uniform).
    n: Var,
    /// Tokens a batch rescores: one a lane group of the warp.
    batch: u32,
    lane_group: Var,
    /// [`KernelBuilder::lanes_below`].
    below: Var,
}

impl RescoreQueue {
    fn new(k: &mut KernelBuilder, tile: &DenseTile, lanes: &Lanes) -> RescoreQueue {
        let batch = WARP / lanes.lanes;
        // A chunk queues at most `batch` tokens a token slot, and a drain leaves fewer than
        // `batch`.
        let cap = batch * (tile.tokens_per_group + 1);
        let warps = tile.threads / WARP;
        let slots = k.shared("rescore_queue", Scalar::I32, warps * cap);
        let lane = k.let_("lane_q", k.lane());
        RescoreQueue {
            slots,
            base: k.let_("queue_base", k.warp() * cap),
            n: k.let_typed("queued", Scalar::I32, 0),
            batch,
            lane_group: k.let_("lane_group", lane / lanes.lanes),
            below: k.lanes_below(),
        }
    }

    /// Queue the tokens at `positions` (i32) whose `need` holds (one lane of each group).
    fn push(&self, k: &mut KernelBuilder, need: &[Var], positions: &[Var]) {
        for (nd, pos) in need.iter().zip(positions) {
            let (rank, count) = k.warp_rank(*nd, self.below);
            k.if_(*nd, |k| {
                let at = self.base + (self.n + rank).u32();
                k.store(self.slots, at, *pos);
            });
            k.assign(self.n, self.n + count);
        }
    }

    /// Rescore batches while a whole one is queued (`all`: until none is), appending what
    /// clears the filter to the stream.
    fn drain(&self, k: &mut KernelBuilder, all: bool, rescore: &dyn Fn(&mut KernelBuilder, Var, Var)) {
        let batch = self.batch as i32;
        let more = if all { self.n.gt(0i32) } else { self.n.ge(batch) };
        k.while_(more, |k| {
            k.warp_sync(); // the pushes' stores before other lanes read them
            let take = k.let_("take", self.n.min(batch));
            let active = k.let_("q_active", self.lane_group.i32().lt(take));
            let at = self.base + (self.n - take + select(active, self.lane_group.i32(), 0i32)).u32();
            let t = k.let_("q_t", self.slots.at(at));
            k.warp_sync(); // the reads before later pushes overwrite the slots
            k.assign(self.n, self.n - take);
            rescore(k, t, active);
        });
    }
}

/// One token of a lane group's chunk: position (i32, 0 when invalid), validity, page within
/// the chunk and this lane's raw sketch words — what stays in registers between chunks (the K
/// row offset is recomputed in the tail chunk instead).
struct ChunkToken {
    t: Var,
    valid: Var,
    page_in_chunk: Var,
    words: Vec<Var>,
    /// The token's range word (per-token grid).
    range: Option<Var>,
    /// The token's norm word (`PagedSpec::sketch_norm`).
    norm: Option<Var>,
}

struct BoundCtx<'a> {
    spec: &'a PagedSpec,
    lanes: Lanes,
    src: TokenSource,
    keys: Buf,
    bounds: Buf,
    sketch: Buf,
    sketched: Var,
    slack: f64,
    terms: Terms,
    /// Rescoring on the tensor cores ([`DenseTile::mma`]).
    mma: Option<MmaRescore>,
    /// The sketch sums on the tensor cores ([`DenseTile::sketch_mma`]).
    sketch_mma: Option<SketchMma>,
}

/// q's B fragments for rescoring on the tensor cores ([`WarpMma`]). They are the same for every
/// warp, so warp 0 stages them in shared memory once (with [`BoundCtx::query_terms`], before
/// its barrier) and a batch loads them as it needs them: the pass keeps no q register across
/// its chunks (16 at `wide`, where registers are what it is short of).
struct MmaRescore {
    warp: WarpMma,
    /// `[product][lane][4]` q-dtype elements: a warp's load of one product is 256 contiguous
    /// bytes.
    frags: Buf,
    /// This lane's fragments as loaded, until staged.
    init: MmaQuery,
}

impl MmaRescore {
    /// The staging buffer for `init`, this lane's fragments as `load_queries_mma` loaded them.
    fn declare(k: &mut KernelBuilder, head_dim: u32, init: MmaQuery) -> MmaRescore {
        let elem = init.b[0][0].ty;
        let frags = k.shared("q_frags", elem, init.b.len() as u32 * WARP * 4);
        MmaRescore {
            warp: WarpMma::new(k, head_dim),
            frags,
            init,
        }
    }

    /// Element offset of product `j`'s four elements for this lane.
    fn at(&self, k: &mut KernelBuilder, j: usize) -> Var {
        k.let_("qf_at", (k.lane() + j as u32 * WARP) * 4u32)
    }

    /// Warp 0 writes the fragments (the caller's barrier publishes them).
    fn stage(&self, k: &mut KernelBuilder) {
        let warp0 = k.let_("qf_warp0", k.thread_idx().lt(WARP));
        k.if_(warp0, |k| {
            for (j, b) in self.init.b.iter().enumerate() {
                let at = self.at(k, j);
                k.store_vec(self.frags, at, b.iter().map(|v| v.e()).collect());
            }
        });
    }

    /// The fragments, from shared memory.
    fn query(&self, k: &mut KernelBuilder) -> MmaQuery {
        let b = (0..self.init.b.len())
            .map(|j| {
                let at = self.at(k, j);
                let v = k.load_vec("qf", self.frags, at, 4);
                [v[0], v[1], v[2], v[3]]
            })
            .collect();
        MmaQuery {
            b,
            scale: self.init.scale,
        }
    }
}

/// The sketch sums `S = Σ_i m_i·code_i` of a warp's 32 tokens a round on the integer tensor
/// cores ([`DenseTile::sketch_mma`]): `mma.sync` m16n8k32 with A = codes (16 tokens × 32
/// dimensions, unsigned bytes) and B = weights (32 dimensions × 8 columns: head `h`'s signed
/// high bytes in column `2h`, its low bytes in `2h + 1`, zero past the group), two 16-token
/// tiles a round and `d/32` k-steps a tile.
///
/// - A dot product does not care about the order of its dimensions, so lane `(g, t)` (group
///   `g = lane/4`, `t = lane mod 4`) loads the `t`-th quarter of the sketch rows of tiles'
///   tokens `g` and `g + 8` (`d/32` words each, one vector load), and k-step `s` takes their
///   word `s`: its even nibbles as A's columns `4t..4t+3`, its odd ones as `16+4t..`. B's
///   rows follow the same dimensions, held in registers for the whole pass ([`Self::b`]).
/// - Codes enter as `16·code` (`(w << 4) & 0xF0F0F0F0` and `w & 0xF0F0F0F0`), so
///   `256·D[2h] + D[2h+1] = 16·S`, [`code_dot`]'s value to the bit (|16·S| < 2³¹ as there).
/// - The accumulator holds tokens `g`, `g + 8` of head `t` (columns `2t`, `2t + 1`): lanes
///   `t < G` write them to a warp-private `[token][head]` i32 array, and each token's owner
///   (chunk token `lane + 32·r` of the warp) reads its heads back.
struct SketchMma {
    /// Per k-step, this lane's two B words (column `lane / 4`).
    b: Vec<[Var; 2]>,
    /// `[warp][32 tokens][G]` i32.
    sums: Buf,
    /// This warp's first element of `sums`.
    warp_base: Var,
    /// `(lane / 4, lane mod 4)`.
    g: Var,
    t: Var,
    lane: Var,
    group: u32,
    head_dim: u32,
}

impl SketchMma {
    fn declare(k: &mut KernelBuilder, ds: &entkv_abi::DecodeSpec, threads: u32) -> SketchMma {
        let steps = ds.head_dim / entkv_dsl::mma::int8::K;
        let b = (0..steps)
            .map(|_| [0, 1].map(|_| k.let_typed("imb", Scalar::U32, 0u32)))
            .collect();
        let sums = k.shared("sketch_sums", Scalar::I32, threads * ds.group);
        let lane = k.let_("lane_im", k.lane());
        SketchMma {
            b,
            sums,
            warp_base: k.let_("im_base", k.warp() * (WARP * ds.group)),
            g: k.let_("im_g", lane / 4u32),
            t: k.let_("im_t", lane % 4u32),
            lane,
            group: ds.group,
            head_dim: ds.head_dim,
        }
    }

    /// This lane's B fragments from the group's packed weights (`words`: per head `d/4` high
    /// words then `d/4` low words, [`byte_word_dims`] order), once the barrier that ends
    /// [`BoundCtx::query_terms`] published them.
    fn load_weights(&self, k: &mut KernelBuilder, words: Buf) {
        let d = self.head_dim;
        let steps = self.b.len() as u32;
        let head = k.let_("im_head", self.g / 2u32);
        let used = k.let_("im_used", head.lt(self.group));
        // Word `2W` and `2W + 1` of the head's high (column 2h) or low (2h + 1) bytes, with
        // `W = t·steps + s` the sketch word k-step `s` takes: byte words `2W` (even dimensions)
        // and `2W + 1` (odd).
        let at = k.let_(
            "im_b_at",
            select(used, head, 0u32) * (d / 2) + self.g % 2u32 * (d / 4) + self.t * (2 * steps),
        );
        let n = 2 * steps;
        let vec = n.min(4);
        let mut loaded = Vec::new();
        for off in (0..n).step_by(vec as usize) {
            loaded.extend(k.load_vec("im_w", words, at + off, vec));
        }
        for (s, pair) in self.b.iter().enumerate() {
            for (j, dst) in pair.iter().enumerate() {
                k.assign(*dst, select(used, loaded[2 * s + j], 0u32));
            }
        }
    }

    /// Row `(tile, half)` of this lane's A words in a round's word list (`d/32` words each).
    fn row_words<'w>(&self, words: &'w [Var], tile: usize, half: usize) -> &'w [Var] {
        let steps = self.b.len();
        &words[(2 * tile + half) * steps..(2 * tile + half + 1) * steps]
    }

    /// The warp lane that owns row `(tile, half)` of this lane's A words: the round's token
    /// `16·tile + 8·half + g`.
    fn owner(&self, tile: u32, half: u32) -> Expr {
        self.g + (16 * tile + 8 * half)
    }

    /// This lane's A words of a round: for each of the two tiles, the `t`-th quarter of the
    /// sketch rows of tokens `g` and `g + 8`. `code_at(k, owner)` gives the first code word of
    /// the row of the round's token `owner` (a warp lane index, u32).
    fn load_words(
        &self,
        k: &mut KernelBuilder,
        spec: &PagedSpec,
        sketch: Buf,
        code_at: &dyn Fn(&mut KernelBuilder, Expr) -> Expr,
    ) -> Result<Vec<Var>, KernelGenError> {
        let quarter = self.head_dim / 4;
        let first = k.let_("im_first", self.t * quarter);
        let mut words = Vec::new();
        for tile in 0..2 {
            for half in 0..2 {
                let owner = k.let_("im_owner", self.owner(tile, half));
                let at = code_at(k, owner.e());
                words.extend(page_meta::emit_sketch_words_from(
                    k, spec, sketch, at, first, quarter,
                )?);
            }
        }
        Ok(words)
    }

    /// `16·S` of every head for this lane's own token of the round whose A words are `words`
    /// (warp-uniform: every lane of the warp calls it together).
    fn sums(&self, k: &mut KernelBuilder, words: &[Var]) -> Vec<Var> {
        let high = 0xF0F0_F0F0u32;
        let mut out = Vec::new();
        for tile in 0..2 {
            let mut c: Vec<Expr> = vec![i32c(0); 4];
            for (s, b) in self.b.iter().enumerate() {
                let (w_g, w_g8) = (
                    self.row_words(words, tile, 0)[s],
                    self.row_words(words, tile, 1)[s],
                );
                let a = [
                    (w_g << 4u32) & high,
                    (w_g8 << 4u32) & high,
                    w_g & high,
                    w_g8 & high,
                ];
                let b = [b[0].e(), b[1].e()];
                c = k.mma_i8(&a, false, &b, true, &c).iter().map(|v| v.e()).collect();
            }
            // Head t's `16·S` of tokens g and g + 8.
            out.push(k.let_("im_s", c[0].clone() * 256i32 + c[1].clone()));
            out.push(k.let_("im_s8", c[2].clone() * 256i32 + c[3].clone()));
        }
        let group = self.group;
        // The previous round's reads of `sums` before these writes.
        k.warp_sync();
        let store = |k: &mut KernelBuilder| {
            for tile in 0..2u32 {
                for half in 0..2u32 {
                    let at = self.warp_base + self.owner(tile, half) * group + self.t;
                    k.store(self.sums, at, out[(2 * tile + half) as usize]);
                }
            }
        };
        if group == 4 {
            store(k);
        } else {
            let writes = k.let_("im_writes", self.t.lt(group));
            k.if_(writes, store);
        }
        k.warp_sync();
        let at = k.let_("im_at", self.warp_base + self.lane * group);
        if matches!(group, 1 | 2 | 4) {
            k.load_vec("im_sum", self.sums, at, group)
        } else {
            (0..group)
                .map(|h| k.let_("im_sum", self.sums.at(at + h)))
                .collect()
        }
    }
}

/// Largest |integer weight|: weights are `m_i = rint(w_i/scale)` with `scale = max|w_i|/M`, split
/// into two signed bytes (`m = 256·hi + lo`, `lo` in −128..=127) for two `dp4a` chains or two
/// columns of an integer `mma` ([`SketchMma`]), which take one signedness for all of B.
/// `hi ≤ 127` needs `m ≤ 127·256 + 127`.
pub(crate) const WEIGHT_MAX: f64 = 32639.0;

/// Largest `max|w_i|` of a page whose weights are all zero (see [`BoundCtx::page_terms`]).
const WEIGHT_FLOOR: f64 = 7.888609052210118e-31; // 2⁻¹⁰⁰

/// `1.5·2²³ + 128`: for |x| < 2²², the f32 `x + MAGIC` holds `rint(x) + 128` in its low
/// mantissa bits, so its bytes 0 and 1 are the two's-complement low and high bytes of
/// `rint(x) + 128`: byte 1 is the balanced high byte `hi` of `m = rint(x)` and byte 0 is
/// `lo + 128` (`lo = m − 256·hi`).
const ROUND_MAGIC: f64 = 12_583_040.0;

/// Shared-memory page terms of one chunk, per (page in chunk, head): the integer weights
/// `m_i ≈ q'_i·step_i/scale` as packed signed bytes (`hi` words, then `lo` words, one per byte word of
/// the sketch, see [`byte_word_dims`]), `scale`, `base = Σ q'_i·min_i` and the half-width `ε`.
/// A page's dimensions are split over `split` adjacent lanes (whole 8-dimension blocks each).
struct Terms {
    words: Buf,
    scale: Buf,
    base: Buf,
    eps: Buf,
    pages: u32,
    split: u32,
    /// Per head, this lane's slice of q' and the whole row's `Σ|q'_i|`, held for the whole pass
    /// when they are few registers (at most 16 a lane); read again for every page otherwise.
    queries: Option<Vec<(Vec<Var>, Var)>>,
    /// Per-token grid: per head `Σ|q'_i|` (the other buffers hold the weights of q' itself,
    /// `base = Σ q'_i` and the coefficient of the token's step in `ε`, see
    /// [`BoundCtx::query_terms`]).
    qabs: Option<Buf>,
    /// Per-token grid: the scalar terms of each head, held in registers.
    held: Option<Vec<HeldTerms>>,
    /// With norm words: per head `[half, quant, qnorm]` ([`NormTerms`]).
    norm: Option<Buf>,
    /// Per-token grid: q' of every head in f32 (`[group, d]`), for the rescoring: a row of it
    /// from global memory is f16 loads, conversions and a scaling a dimension.
    q: Option<Buf>,
}

/// A per-token grid's scalar terms of one head ([`BoundCtx::query_terms`]).
#[derive(Clone, Copy)]
struct HeldTerms {
    /// `scale` times [`code_dot_unit`].
    scale: Var,
    base: Var,
    eps: Var,
    /// `Σ|q'_i|·slack`.
    qabs_slack: Var,
    /// With norm words (`PagedSpec::sketch_norm`): `eps`'s two parts and `‖q'‖₂`.
    norm: Option<NormTerms>,
}

/// A head's terms for the residual-norm bound (`PagedSpec::sketch_norm`): a token's
/// `|Σ q'_i·(k_i − k̂_i)| ≤ min(step·half, qnorm·r)` (`r` its norm word, Cauchy–Schwarz), to
/// which `step·quant` (the integer weights' error) is added as to the L1 bound.
#[derive(Clone, Copy)]
struct NormTerms {
    /// `Σ|q'_i|/2`, grown by 10⁻⁶.
    half: Var,
    /// `E`, [`PackedWeights::quant_term`].
    quant: Var,
    /// `‖q'‖₂` rounded up (+∞ where its square is below 2⁻¹⁰⁰).
    qnorm: Var,
}

/// Most q' registers a lane holds across the pass for the page terms.
const HELD_QUERY_REGS: u32 = 16;

/// The four head dimensions whose codes byte word `bw` of a sketch row holds. 8-bit codes are
/// bytes already (word `bw`); 4-bit words are split into their even nibbles
/// (`w & 0x0F0F0F0F`) and odd nibbles (`w & 0xF0F0F0F0`, [`code_dot`]), byte words `2j` and
/// `2j + 1`.
fn byte_word_dims(bits: u32, bw: u32) -> [u32; 4] {
    match bits {
        8 => [4 * bw, 4 * bw + 1, 4 * bw + 2, 4 * bw + 3],
        _ => {
            let (j, odd) = (bw / 2, bw % 2);
            [0, 1, 2, 3].map(|b| 8 * j + 2 * b + odd)
        }
    }
}

/// `Σ_i m_i·code_i` over a lane's raw sketch words, times [`code_dot_unit`]`⁻¹`, exactly in
/// integers: the weights are two signed bytes (`m = 256·hi + lo`, words in
/// [`byte_word_dims`] order), one `dp4a` chain per byte, each partial sum shifted up before the
/// next chain continues it instead of being added at the end. 4-bit words give their odd
/// nibbles in place (`w & 0xF0F0F0F0`, bytes `16·code`): one mask instead of a shift and a
/// mask, the factor 16 taken up by the shifts, so the chains sum to `16·S`. Every partial sum
/// stays below `16·32768·15·d ≤ 2³⁰` (4-bit) or `32768·255·d < 2³¹` (8-bit) in magnitude for
/// d ≤ 128.
fn code_dot(bits: u32, hi: &[Var], lo: &[Var], words: &[Var]) -> Expr {
    let chain = |acc: Expr, weights: &[Var], bytes: &[Expr], signed: bool| {
        weights
            .iter()
            .zip(bytes)
            .fold(acc, |acc, (w, c)| dp4a(*w, signed, c.clone(), false, acc))
    };
    match bits {
        8 => {
            let bytes: Vec<Expr> = words.iter().map(|w| w.e()).collect();
            let s_hi = chain(i32c(0), hi, &bytes, true);
            chain(s_hi * 256i32, lo, &bytes, true)
        }
        _ => {
            let even: Vec<Expr> = words.iter().map(|w| *w & 0x0F0F_0F0Fu32).collect();
            let odd16: Vec<Expr> = words.iter().map(|w| *w & 0xF0F0_F0F0u32).collect();
            let evens = |v: &[Var]| v.iter().step_by(2).copied().collect::<Vec<_>>();
            let odds = |v: &[Var]| v.iter().skip(1).step_by(2).copied().collect::<Vec<_>>();
            let acc = chain(i32c(0), &evens(hi), &even, true); // S_hi over even dims
            let acc = chain(acc * 16i32, &odds(hi), &odd16, true); // 16·S_hi
            let acc = chain(acc * 16i32, &evens(lo), &even, true); // 256·S_hi + even S_lo
            chain(acc * 16i32, &odds(lo), &odd16, true)
        }
    }
}

/// What one unit of [`code_dot`] is worth in `Σ_i m_i·code_i`: 1/16 for 4-bit sketches.
fn code_dot_unit(bits: u32) -> f64 {
    if bits == 8 {
        1.0
    } else {
        1.0 / 16.0
    }
}

/// A weight vector quantized for `dp4a` ([`pack_weights`]).
struct PackedWeights {
    /// `max|w_i|/M` ([`WEIGHT_MAX`]).
    scale: Var,
    /// Whether `max|w_i| ≤ 2⁻¹⁰⁰` (all weights zero, `ε` covers all of `Σ w_i·code_i`).
    tiny: Var,
    wmax: Var,
    /// The integer weights' high and low bytes (both signed), one word per byte word of the
    /// sketch.
    hi: Vec<Expr>,
    lo: Vec<Expr>,
}

impl PackedWeights {
    /// `E = levels·d·(scale/2 + 2⁻²¹·max|w|)` (or `levels·d·max|w|` when tiny), the bound on
    /// `|Σ (w_i − m_i·scale)·code_i|` (see [`BoundCtx::page_terms`]).
    fn quant_term(&self, levels: f64, d: u32) -> Expr {
        let per_code = select(
            self.tiny,
            self.wmax.e(),
            self.scale * 0.5f32 + self.wmax * (2.0f64).powi(-21),
        );
        per_code * (levels * d as f64 * (1.0 + 1e-6))
    }
}

/// Quantize this lane's weights `w` (whole byte words of the sketch, [`byte_word_dims`]) given
/// the row's `max|w_i|`: `m_i = rint(w_i·M/max|w|)` ([`WEIGHT_MAX`]) from
/// `fma(w_i, 1/scale, 1.5·2²³ + 128)`, whose bytes 1 and 0 are `m_i`'s signed high byte and its
/// low byte plus 128 ([`ROUND_MAGIC`]), packed four to a word with `prmt` (the low bytes' 128
/// taken off with one xor a word).
fn pack_weights(k: &mut KernelBuilder, bits: u32, w: &[Var], wmax: Var) -> PackedWeights {
    let scale = k.let_("scale", wmax * (1.0 / WEIGHT_MAX));
    // Below 2⁻¹⁰⁰ `M/max|w|` could overflow (bf16 keys reach 1e-38): such a row gets zero
    // weights, and ε covers all of `Σ w_i·code_i` instead.
    let tiny = k.let_("tiny", wmax.le(WEIGHT_FLOOR));
    let inv = k.let_("inv", select(tiny, f32c(0.0), wmax.rcp() * WEIGHT_MAX));
    // Bytes 0 and 1 of `rint(w·inv) + 1.5·2²³ + 128` are `lo + 128` and `hi`.
    let y: Vec<Var> = w
        .iter()
        .map(|x| k.let_("mq", fma(*x, inv, ROUND_MAGIC).bitcast(Scalar::U32)))
        .collect();
    let (mut hi, mut lo) = (Vec::new(), Vec::new());
    for local in 0..w.len() as u32 / 4 {
        let [a, b, c, e] = byte_word_dims(bits, local).map(|dim| y[dim as usize]);
        let ab = k.let_("p_ab", prmt(a, b, 0x5140));
        let ce = k.let_("p_ce", prmt(c, e, 0x5140));
        lo.push(prmt(ab, ce, 0x5410) ^ 0x8080_8080u32);
        hi.push(prmt(ab, ce, 0x7632));
    }
    PackedWeights {
        scale,
        tiny,
        wmax,
        hi,
        lo,
    }
}

impl Terms {
    fn declare(k: &mut KernelBuilder, spec: &PagedSpec, pages: u32, threads: u32, qr: &QueryRegs) -> Terms {
        let ds = &spec.decode;
        let (group, d) = (ds.group, ds.head_dim);
        // Lanes own whole 8-dimension blocks, so every byte word's weights are packed by one.
        let split = (threads / pages).clamp(1, d / 8);
        let heads = pages * group;
        let dims = d / split;
        // q' is held across the pass where it is at most HELD_QUERY_REGS registers a lane,
        // except with bf16 keys and 4-bit sketches: holding it there spilled 4 B (four CTAs an
        // SM, local ptxas sweep over α × P × dtype × ALiBi × width at d = 32); they reload it.
        let bf16_4bit = ds.kv_dtype == DType::BF16 && spec.sketch_bits == 4;
        let grid = spec.sketch_token_grid();
        // A per-token grid computes its terms once, so it holds no q'.
        let queries = (!grid && !bf16_4bit && dims * group <= HELD_QUERY_REGS).then(|| {
            let first = k.let_("first_q", k.thread_idx() % split * dims);
            (0..group as usize)
                .map(|g| query_slice(k, qr, g, first, dims, split))
                .collect()
        });
        // A per-token grid's scalar terms, per head, in registers for the whole pass: loop-
        // invariant shared loads are reloaded for every token otherwise (the loop's atomics on
        // shared memory keep the compiler from hoisting them).
        let held = grid.then(|| {
            (0..group)
                .map(|_| HeldTerms {
                    scale: k.let_typed("h_scale", Scalar::F32, 0.0),
                    base: k.let_typed("h_base", Scalar::F32, 0.0),
                    eps: k.let_typed("h_eps", Scalar::F32, 0.0),
                    qabs_slack: k.let_typed("h_qabs_slack", Scalar::F32, 0.0),
                    norm: spec.sketch_norm().then(|| NormTerms {
                        half: k.let_typed("h_half", Scalar::F32, 0.0),
                        quant: k.let_typed("h_quant", Scalar::F32, 0.0),
                        qnorm: k.let_typed("h_qnorm", Scalar::F32, 0.0),
                    }),
                })
                .collect()
        });
        Terms {
            queries,
            held,
            words: k.shared("terms_words", Scalar::U32, heads * d / 2),
            scale: k.shared("terms_scale", Scalar::F32, heads),
            base: k.shared("terms_base", Scalar::F32, heads),
            eps: k.shared("terms_eps", Scalar::F32, heads),
            qabs: grid.then(|| k.shared("terms_qabs", Scalar::F32, heads)),
            norm: spec
                .sketch_norm()
                .then(|| k.shared("terms_norm", Scalar::F32, 3 * group)),
            q: grid.then(|| k.shared("terms_q", Scalar::F32, group * d)),
            pages,
            split,
        }
    }
}

/// Head `g`'s q' at dimensions `first .. first + dims` and `Σ|q'_i|` over the whole row (summed
/// over the `split` adjacent lanes that hold the row's slices).
fn query_slice(
    k: &mut KernelBuilder,
    qr: &QueryRegs,
    g: usize,
    first: Var,
    dims: u32,
    split: u32,
) -> (Vec<Var>, Var) {
    let q = qr.full[g].slice(k, first, dims);
    let abs = q.iter().fold(f32c(0.0), |acc, x| acc + x.abs());
    let abs = k.warp_allreduce_width(&[(Reduce::Sum, abs)], split)[0];
    (q, abs)
}

impl BoundCtx<'_> {
    /// `(lb, ub)` of token `t` (in chunk page `page_in_chunk`) for every head of the group (−∞
    /// when invalid): `ŝ ∓ ε` from the sketch and the chunk's page terms; for tokens of the last
    /// page (never sketched) per `tail`. K loads are predicated and the lane reductions run
    /// outside any branch, so lanes of different tokens in one warp may take different paths.
    ///
    /// `ŝ = base + scale·S` with the integer `S = Σ_i m_i·code_i = 256·Σ hi_i·code_i + Σ lo_i·code_i`
    /// from `dp4a`s ([`code_dot`]), or given per head as `sums` ([`SketchMma::sums`], the same
    /// integers): exact (|S| < 2³¹ for every supported d and width), then rounded once to f32.
    fn token_bounds(
        &self,
        k: &mut KernelBuilder,
        qr: &QueryRegs,
        tok: &ChunkToken,
        tail: Tail,
        sums: Option<&[Var]>,
    ) -> Vec<(Var, Var)> {
        let exact_tail = tail == Tail::Exact;
        let ds = &self.spec.decode;
        let (group, d) = (ds.group as usize, ds.head_dim);
        let (valid, page_in_chunk) = (tok.valid, tok.page_in_chunk);
        let t = k.let_("t", tok.t.i64());
        let exact_rows = exact_tail.then(|| {
            let row = self.src.row(k, t.e());
            let in_sketch = k.let_("in_sketch", t.lt(self.sketched));
            let kv = load_row_if(k, &self.lanes, self.keys, row, in_sketch.not());
            (in_sketch, kv)
        });
        let slots: Vec<Var> = (0..group)
            .map(|g| k.let_("slot", page_in_chunk.u32() * ds.group + g as u32))
            .collect();
        let lane_bws = self.lanes.dims / 4;
        let mut partial = Vec::new();
        for (g, slot) in slots.iter().enumerate() {
            if let Some(sums) = sums {
                partial.push((Reduce::Sum, sums[g].e()));
            } else {
                let w0 = k.let_("w0", *slot * (d / 2) + self.lanes.sub * lane_bws);
                let (mut hi, mut lo) = (Vec::new(), Vec::new());
                for off in (0..lane_bws).step_by(4) {
                    let n = (lane_bws - off).min(4);
                    hi.extend(k.load_vec("whi", self.terms.words, w0 + off, n));
                    lo.extend(k.load_vec("wlo", self.terms.words, w0 + (d / 4 + off), n));
                }
                partial.push((Reduce::Sum, code_dot(self.spec.sketch_bits, &hi, &lo, &tok.words)));
            }
            if let Some((_, kv)) = &exact_rows {
                // q' is read again here (once per tail chunk) rather than held in registers for
                // the whole pass: a GQA group's q slices would cost d·G/lanes registers.
                let first = k.let_("qdim", self.lanes.sub * self.lanes.dims);
                let exact = kv.iter().enumerate().fold(f32c(0.0), |acc, (i, kx)| {
                    fma(qr.full[g].at(first + i as u32), kx.f32(), acc)
                });
                partial.push((Reduce::Sum, exact));
            }
        }
        let tot = k.warp_allreduce_width(&partial, self.lanes.lanes);
        let per_head = partial.len() / group;
        (0..group)
            .map(|g| {
                let alibi = self.src.alibi_term(qr.alibi[g], t).map(|a| k.let_("alibi", a));
                let plus_alibi = |x: Expr| match alibi {
                    Some(a) => x + a,
                    None => x,
                };
                // The page's terms are the same for every lane (broadcast shared loads).
                let (s, eps) = match (tok.range, &self.terms.held) {
                    (Some(range), Some(held)) => {
                        let h = held[g];
                        let (lo, hi) = page_meta::unpack_range(k, range);
                        let step = k.let_(
                            "tstep",
                            page_meta::emit_sketch_step(self.spec.sketch_bits, lo, hi),
                        );
                        let scaled = h.scale * tot[per_head * g].f32();
                        let s = k.let_("shat", fma(step, scaled, lo * h.base));
                        let mag = fma(lo.abs().max(hi.abs()), h.qabs_slack, h.qabs_slack);
                        let eps = match (tok.norm, h.norm) {
                            (Some(word), Some(n)) => {
                                // The smaller of the L1 and the residual-norm bound (`l2` is
                                // NaN or +∞ where it does not hold: the comparison keeps L1).
                                let l1 = k.let_("l1", step * n.half);
                                let l2 = k.let_("l2", n.qnorm * word.e().bitcast(Scalar::F32));
                                let e = select(l2.lt(l1), l2, l1);
                                k.let_("eps", fma(step, n.quant, e) + mag)
                            }
                            _ => k.let_("eps", fma(step, h.eps, mag)),
                        };
                        (s, eps)
                    }
                    _ => {
                        let unit = code_dot_unit(self.spec.sketch_bits);
                        let s = k.let_(
                            "shat",
                            fma(
                                self.terms.scale.at(slots[g]) * unit,
                                tot[per_head * g].f32(),
                                self.terms.base.at(slots[g]),
                            ),
                        );
                        (s, k.let_("eps", self.terms.eps.at(slots[g])))
                    }
                };
                let (mut lb, mut ub) = (plus_alibi(s - eps), plus_alibi(s + eps));
                if let Some((in_sketch, _)) = &exact_rows {
                    let z = k.let_("zx", plus_alibi(tot[per_head * g + 1].e()));
                    lb = select(*in_sketch, lb, z);
                    ub = select(*in_sketch, ub, z);
                }
                if tail == Tail::Open {
                    // The stale sketch words of the last page may decode to anything, NaN too.
                    let in_sketch = tok.t.lt(self.sketched.i32());
                    lb = select(in_sketch.clone(), lb, f32c(f64::NEG_INFINITY));
                    ub = select(in_sketch, ub, f32c(f64::INFINITY));
                }
                (
                    k.let_("lbv", select(valid, lb, f32c(f64::NEG_INFINITY))),
                    k.let_("ubv", select(valid, ub, f32c(f64::NEG_INFINITY))),
                )
            })
            .collect()
    }

    /// The exact score of token `t` (i32) for every head, for the lanes whose group is
    /// `active` (the others get −∞; the lane reduction runs with the whole warp). Only active
    /// lanes load: row values loaded under a branch and used after it would each be merged with
    /// their other-branch value (two byte permutes a half).
    fn rescore(&self, k: &mut KernelBuilder, qr: &QueryRegs, t: Var, active: Var) -> Vec<Var> {
        let ds = &self.spec.decode;
        let group = ds.group as usize;
        let t = k.let_("t_r", t.i64());
        if let Some(m) = &self.mma {
            // The warp's 32 tokens as A tiles: every lane loads, an inactive one its queue's
            // first token (in the pool, discarded).
            let row = self.src.row(k, t.e());
            let mq = m.query(k);
            let mut z = Vec::new();
            m.warp.row_dots(k, self.keys, &mq, group, row, true, |k, g, dot| {
                z.push(entmax_score(k, &self.src, qr.alibi[g], dot, t, active));
            });
            return z;
        }
        let first = k.let_("qdim_r", self.lanes.sub * self.lanes.dims);
        // Only a pass over a per-token grid rescores, and it stages q' in shared f32.
        let qs = self.terms.q.expect("a per-token grid stages q'");
        let dots: Vec<Var> = (0..group)
            .map(|_| k.let_typed("dot_r", Scalar::F32, 0.0))
            .collect();
        let vec = self.lanes.vec;
        let parts = self.lanes.dims / vec;
        // Up to 64 bytes of the row in flight at once (one round trip for a d = 32 f16 row a
        // lane), each batch consumed before the next loads.
        let batch = (64 / (vec * self.keys.elem.size_bytes())).max(1);
        k.if_(active, |k| {
            let row = self.src.row(k, t.e());
            for first_part in (0..parts).step_by(batch as usize) {
                let these: Vec<u32> = (first_part..parts.min(first_part + batch)).collect();
                let vals: Vec<Vec<Var>> = these
                    .iter()
                    .map(|part| k.load_vec("kr", self.keys, row + (first + part * vec).i64(), vec))
                    .collect();
                for (part, vs) in these.iter().zip(&vals) {
                    for (g, dot) in dots.iter().enumerate() {
                        let at = k.let_("qs_at", first + (g as u32 * ds.head_dim + part * vec));
                        let q: Vec<Var> = (0..vec)
                            .step_by(4)
                            .flat_map(|j| k.load_vec("qs", qs, at + j, 4.min(vec)))
                            .collect();
                        let acc = vs
                            .iter()
                            .zip(&q)
                            .fold(dot.e(), |acc, (kx, qx)| fma(*qx, kx.f32(), acc));
                        k.assign(*dot, acc);
                    }
                }
            }
        });
        let partial: Vec<(Reduce, Expr)> = dots.iter().map(|d| (Reduce::Sum, d.e())).collect();
        let tot = k.warp_allreduce_width(&partial, self.lanes.lanes);
        (0..group)
            .map(|g| entmax_score(k, &self.src, qr.alibi[g], tot[g].e(), t, active))
            .collect()
    }

    /// The terms of the chunk's pages (starting at token `c0`) for every head, into shared
    /// memory. With `w_i = q'_i·step_i`:
    /// - `base = Σ q'_i·min_i`;
    /// - `scale = max|w_i|/M` and integer weights `m_i = rint(w_i/scale)` (|m_i| ≤ M =
    ///   [`WEIGHT_MAX`]),
    ///   or all zero when `max|w_i| ≤ 2⁻¹⁰⁰` (then `E = levels·d·max|w|`);
    /// - `ε = Σ|w_i|/2 + slack·Σ|q'_i|·(max_i max(|min_i|, |max_i|) + 1) + E`, where
    ///   `E = levels·d·(scale/2 + 2⁻²¹·max|w|)` bounds `|Σ (w_i − m_i·scale)·code_i|`:
    ///   `|w_i − m_i·scale| ≤ scale/2` from rounding to the nearest integer, plus the f32
    ///   rounding of `1/scale` (as `M·(1/max|w|)`) and of `scale` itself (≤ 4 ulps of
    ///   `|w_i|`; the product with `w_i` is exact inside the fma). The slack term
    ///   bounds the rounding of `ŝ` and of the exact score ([`slack`]) through the page's
    ///   largest bound, which is cheaper than per dimension and only looser.
    ///
    /// One phase: the `split` adjacent lanes of a page each take a slice of its dimensions,
    /// combine their sums with shuffles, then quantize and pack their slice. `m_i` comes from
    /// `fma(w_i, 1/scale, 1.5·2²³)`, whose low bytes are `m_i`'s, and `prmt` packs four of them
    /// into a `hi` and a `lo` word. Pages past the sequence get zero terms; the last page's
    /// terms (stale metadata) are computed but never used. One barrier at the end: the previous
    /// chunk's readers are past the stream's barriers before these writes.
    fn page_terms(&self, k: &mut KernelBuilder, qr: &QueryRegs, c0: Var) {
        let ds = &self.spec.decode;
        let (d, p) = (ds.head_dim, self.spec.page_size as i64);
        let tm = &self.terms;
        let dims = d / tm.split;
        let bits = self.spec.sketch_bits;
        let inv_levels = sketch_inv_levels(bits) as f64;
        let levels = sketch_levels(bits) as f64;
        let threads = k.block_threads();
        let per_round = threads / tm.split;
        let tid = k.let_("tid_t", k.thread_idx());
        let sub = k.let_("sub_t", tid % tm.split);
        let first = k.let_("first_t", sub * dims);
        let kv = self.bounds.elem;
        let vec = (16 / kv.size_bytes()).min(dims);
        for round in 0..tm.pages.div_ceil(per_round) {
            let pi = k.let_("pi", tid / tm.split + round * per_round);
            let lp = k.let_("lp", c0 / p + pi.i64());
            let used = k.let_("used", pi.lt(tm.pages));
            let active = k.let_("active", used.and((lp * p).lt(self.src.len)));
            let lp = self.src.logical_page(k, lp, active);
            // This lane's slice of the page's bounds (zeros past the sequence).
            let mn: Vec<Var> = (0..dims).map(|_| k.let_typed("tmn", kv, 0.0)).collect();
            let mx: Vec<Var> = (0..dims).map(|_| k.let_typed("tmx", kv, 0.0)).collect();
            k.if_(active, |k| {
                let meta = self.src.meta_row(k, lp.e());
                let at = k.let_("tb_at", meta + first.i64());
                for j in (0..dims).step_by(vec as usize) {
                    let lo = k.load_vec("bmn", self.bounds, at + j as i64, vec);
                    let hi = k.load_vec("bmx", self.bounds, at + (d + j) as i64, vec);
                    for i in 0..vec as usize {
                        k.assign(mn[j as usize + i], lo[i]);
                        k.assign(mx[j as usize + i], hi[i]);
                    }
                }
            });
            let mn: Vec<Var> = mn.iter().map(|x| k.let_("mnf", x.f32())).collect();
            let mx: Vec<Var> = mx.iter().map(|x| k.let_("mxf", x.f32())).collect();
            let bound_abs = mn
                .iter()
                .zip(&mx)
                .fold(f32c(0.0), |m, (a, b)| m.max(a.abs()).max(b.abs()));
            let bound_abs = k.let_("babs", bound_abs);
            for g in 0..ds.group {
                let (q, qabs) = match &tm.queries {
                    Some(held) => held[g as usize].clone(),
                    None => query_slice(k, qr, g as usize, first, dims, tm.split),
                };
                let w: Vec<Var> = (0..dims as usize)
                    .map(|i| k.let_("tw", q[i] * ((mx[i] - mn[i]) * inv_levels)))
                    .collect();
                let base = (0..dims as usize).fold(f32c(0.0), |acc, i| fma(q[i], mn[i], acc));
                let half = w.iter().fold(f32c(0.0), |acc, x| acc + x.abs());
                let wmax = w.iter().fold(f32c(0.0), |acc, x| acc.max(x.abs()));
                let sums = k.warp_allreduce_width(
                    &[
                        (Reduce::Sum, base),
                        (Reduce::Sum, half),
                        (Reduce::Max, wmax),
                        (Reduce::Max, bound_abs.e()),
                    ],
                    tm.split,
                );
                let (base, half, wmax, babs) = (sums[0], sums[1], sums[2], sums[3]);
                let slot = k.let_("slot_q", pi * ds.group + g);
                let pw = pack_weights(k, bits, &w, wmax);
                let (scale, hi, lo) = (pw.scale, pw.hi.clone(), pw.lo.clone());
                k.if_(used, |k| {
                    let at = k.let_("wq_at", slot * (d / 2) + sub * (dims / 4));
                    page_meta::store_run(k, tm.words, at.e(), &hi);
                    page_meta::store_run(k, tm.words, at + d / 4, &lo);
                    k.if_(sub.eq_(0u32), |k| {
                        let quant = pw.quant_term(levels, d);
                        let mag = qabs * (babs + 1.0f32) * self.slack;
                        k.store(tm.base, slot, base);
                        k.store(tm.eps, slot, half * (0.5 * (1.0 + 1e-6)) + mag + quant);
                        k.store(tm.scale, slot, scale);
                    });
                });
            }
        }
        k.barrier();
    }

    /// The terms of a per-token grid, once per pass, for every head: the integer weights of q'
    /// itself (the page terms' code with `w = q'`), `base = Σ q'_i`, `Σ|q'_i|` and the
    /// coefficient of the token's step in `ε`, `Σ|q'_i|/2 + E` (`E` as in
    /// [`BoundCtx::page_terms`]). A token then has `ŝ = min·Σq' + step·scale·S` (`S` from [`code_dot`]) and
    /// `ε = step·(Σ|q'|/2 + E) + slack·Σ|q'|·(max(|min|, |max|) + 1)` from its range word:
    /// `k̂_i = min + code_i·step` and `|k_i − k̂_i| ≤ step/2 + 2⁻²²·(max − min) + 2⁻¹²⁶`
    /// (`entkv_abi::meta`), whose last two terms the slack covers as for a page's grid. Ends
    /// with a barrier.
    fn query_terms(&self, k: &mut KernelBuilder, qr: &QueryRegs) {
        let ds = &self.spec.decode;
        let d = ds.head_dim;
        let tm = &self.terms;
        let qabs_buf = tm.qabs.expect("a per-token grid declares Σ|q'|");
        let dims = d / tm.split;
        let levels = sketch_levels(self.spec.sketch_bits) as f64;
        let tid = k.let_("tid_t", k.thread_idx());
        let sub = k.let_("sub_t", tid % tm.split);
        let used = k.let_("used_t", tid.lt(tm.split));
        let first = k.let_("first_t", sub * dims);
        for g in 0..ds.group {
            let (q, qabs) = query_slice(k, qr, g as usize, first, dims, tm.split);
            let sum = q.iter().fold(f32c(0.0), |acc, x| acc + *x);
            let wmax = q.iter().fold(f32c(0.0), |acc, x| acc.max(x.abs()));
            let mut items = vec![(Reduce::Sum, sum), (Reduce::Max, wmax)];
            if tm.norm.is_some() {
                items.push((Reduce::Sum, q.iter().fold(f32c(0.0), |acc, x| fma(*x, *x, acc))));
            }
            let sums = k.warp_allreduce_width(&items, tm.split);
            let pw = pack_weights(k, self.spec.sketch_bits, &q, sums[1]);
            k.if_(used, |k| {
                if let Some(qs) = tm.q {
                    let vals: Vec<Expr> = q.iter().map(|x| x.e()).collect();
                    page_meta::store_run(k, qs, first + g * d, &vals);
                }
                let at = k.let_("wq_at", g * (d / 2) + sub * (dims / 4));
                page_meta::store_run(k, tm.words, at.e(), &pw.hi);
                page_meta::store_run(k, tm.words, at + d / 4, &pw.lo);
                k.if_(sub.eq_(0u32), |k| {
                    let half = k.let_("half", qabs * (0.5 * (1.0 + 1e-6)));
                    let quant = k.let_("quant", pw.quant_term(levels, d));
                    k.store(tm.base, g, sums[0]);
                    k.store(tm.eps, g, half + quant);
                    k.store(tm.scale, g, pw.scale);
                    k.store(qabs_buf, g, qabs);
                    if let Some(nb) = tm.norm {
                        // `‖q'‖₂` up by `(d + 8)·2⁻²³` (the squares' sum, the root and the
                        // product with `r`); +∞ (the L1 bound alone) where the squares could
                        // have underflowed.
                        let sq = sums[2];
                        let up = 1.0 + (d as f64 + 8.0) * (2.0f64).powi(-23);
                        let qnorm = select(sq.ge((2.0f64).powi(-100)), sq.sqrt() * up, f32c(f64::INFINITY));
                        k.store(nb, 3 * g, half);
                        k.store(nb, 3 * g + 1, quant);
                        k.store(nb, 3 * g + 2, qnorm);
                    }
                });
            });
        }
        if let Some(m) = &self.mma {
            m.stage(k);
        }
        k.barrier();
        if let Some(sm) = &self.sketch_mma {
            sm.load_weights(k, tm.words);
        }
        let unit = code_dot_unit(self.spec.sketch_bits);
        for (g, h) in tm.held.iter().flatten().enumerate() {
            let g = g as u32;
            k.assign(h.scale, tm.scale.at(g) * unit);
            k.assign(h.base, tm.base.at(g));
            k.assign(h.eps, tm.eps.at(g));
            k.assign(h.qabs_slack, qabs_buf.at(g) * self.slack);
            if let (Some(n), Some(nb)) = (h.norm, tm.norm) {
                k.assign(n.half, nb.at(3 * g));
                k.assign(n.quant, nb.at(3 * g + 1));
                k.assign(n.qnorm, nb.at(3 * g + 2));
            }
        }
    }

    /// This lane's raw sketch words of the token whose code row starts at word `code_at` (i64).
    /// Loaded for every token (the last page's sketch rows exist in the pool, their
    /// codes are simply not used), so no load sits in a divergent branch.
    fn sketch_words(&self, k: &mut KernelBuilder, code_at: Expr) -> Result<Vec<Var>, KernelGenError> {
        let first = self.lanes.sub * self.lanes.dims;
        page_meta::emit_sketch_words_from(k, self.spec, self.sketch, code_at, first, self.lanes.dims)
    }
}

/// This lane's slice of a K-dtype row starting at element `row`, loaded only when `cond`
/// (zeros otherwise), with 16-byte loads.
fn load_row_if(k: &mut KernelBuilder, lanes: &Lanes, buf: Buf, row: Var, cond: Expr) -> Vec<Var> {
    let vals: Vec<Var> = (0..lanes.dims)
        .map(|_| k.let_typed("rv", buf.elem, 0.0))
        .collect();
    let lane_off = (lanes.sub * lanes.dims).i64();
    k.if_(cond, |k| {
        for part in 0..lanes.dims / lanes.vec {
            let at = row + lane_off.clone() + (part * lanes.vec) as i64;
            for (j, v) in k.load_vec("r", buf, at, lanes.vec).into_iter().enumerate() {
                k.assign(vals[(part * lanes.vec) as usize + j], v);
            }
        }
    });
    vals
}

/// `decode_certified`: grid (query heads, batch). Parameters: `q, k_pool, v_pool, block_table,
/// seq_lens, [alibi_slopes], cand_lb, cand_ub, cand_idx, cand_count, cand_bound, out, tau,
/// support, kept, [repair, gate] (seeded), splits, split_len, max_pages`.
pub fn decode_kernel(spec: &PagedSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    let ds = &spec.decode;
    tile.check_for(spec, DecodeKind::Certified)?;
    let (_, name) = entry_names(spec, tile);
    let threads = tile.finish_threads;
    let mut k = KernelBuilder::new(name, threads);
    k.set_min_blocks_per_sm(1);
    let kv = scalar_of(ds.kv_dtype);
    let q = k.buffer("q", scalar_of(ds.q_dtype), Access::Read);
    let keys = k.buffer("k_pool", kv, Access::Read);
    let values = k.buffer("v_pool", kv, Access::Read);
    let block_table = k.buffer("block_table", Scalar::I32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let slopes = spec
        .alibi
        .then(|| k.buffer("alibi_slopes", Scalar::F32, Access::Read));
    // A pass that rescores (4-bit sketches) appends exact scores only, so the threshold of the
    // candidates' lower bounds is already τ: no rescoring round (no q' here), no second solve.
    let exact = refines(spec);
    // The lower bounds are overwritten with exact scores (or −∞) once τ_lb is known, unless
    // they are exact already (then read-only: loads through the non-coherent cache).
    let lb_access = if exact { Access::Read } else { Access::ReadWrite };
    let inputs = CandInputs {
        z: k.buffer("cand_lb", Scalar::F32, lb_access),
        ub: Some(k.buffer("cand_ub", Scalar::F32, Access::Read)),
        idx: k.buffer("cand_idx", Scalar::I32, Access::Read),
        count: k.buffer("cand_count", Scalar::I32, Access::Read),
        bound: k.buffer("cand_bound", Scalar::F32, Access::Read),
    };
    let outs_b = (
        k.buffer("out", scalar_of(ds.out_dtype), Access::Write),
        k.buffer("tau", Scalar::F32, Access::Write),
        k.buffer("support", Scalar::I32, Access::Write),
        k.buffer("kept", Scalar::I32, Access::Write),
    );
    // A seeded tile's finish runs twice a step, as its pass does: every head (gate 0), then
    // the heads of the flagged pairs (gate 1).
    let repair_gate = tile.seed.then(|| RepairGate::declare(&mut k));
    let splits = k.scalar_param("splits", Scalar::I32);
    let split_len = k.scalar_param("split_len", Scalar::I64);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);

    let scratch = Scratch::new(&mut k, ds);
    let h = k.let_("h", k.block_idx(Axis::X));
    let b = k.let_("b", k.block_idx(Axis::Y));
    let q_heads = k.let_("q_heads", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", q_heads / ds.group);
    let kvh = k.let_("kvh", h / ds.group);
    let head = k.let_("head", (b * q_heads + h).i64());
    let pages = PageBufs {
        block_table,
        seq_lens,
        sel: None,
        max_pages: k.let_("max_pages", max_pages),
    };
    let rows = TokenSource::new(
        &mut k,
        Layout::Paged {
            page_size: spec.page_size,
        },
        ds.head_dim,
        b,
        kvh,
        kv_heads,
        None,
        Some(pages),
    );
    // Rescoring: row groups of `row_lanes` lanes share a K row (16-byte loads); each lane holds
    // its slice of this head's q'.
    let row_lanes = (ds.head_dim * ds.kv_dtype.size_bytes() / 16).max(1);
    let dims = ds.head_dim / row_lanes;
    let tid = k.let_("tid", k.thread_idx());
    let rl = k.let_("rl", tid % row_lanes);
    let rg = k.let_("rg", tid / row_lanes);
    let row_groups = threads / row_lanes;
    let (qs, slope) = if exact {
        (Vec::new(), None)
    } else {
        let qbase = k.let_("qbase", head * ds.head_dim as i64 + (rl * dims).i64());
        let qs: Vec<Var> = k
            .load_vec("q", q, qbase, dims)
            .into_iter()
            .map(|x| x.f32() * ds.z_scale())
            .collect::<Vec<_>>()
            .into_iter()
            .map(|e| k.let_("qs", e))
            .collect();
        let slope = slope(&mut k, ds, slopes, h);
        (qs, slope)
    };

    let body = |k: &mut KernelBuilder| {
        let g = gather(
            k,
            inputs,
            head,
            splits,
            split_len,
            tile.finish_capacity,
            scratch.red_i,
        );
        let outs = OutputBufs {
            out: outs_b.0,
            tau: outs_b.1,
            support: outs_b.2,
            head,
        };
        let kept_out = outs_b.3;
        let run = |k: &mut KernelBuilder, src: &Source| {
            let lb_store = src.scores();
            // 1. τ_lb, the threshold of the lower bounds (≤ τ).
            let tau_lb = solve_tau(k, ds, src, g.bound, scratch.red);
            // 2. Keep what can clear it (less the solver's tolerance), rescoring exactly; the rest
            //    leaves the active set.
            let cut = k.let_("cut", solver_cut(tau_lb.e()));
            let (tau, kept_total) = if exact {
                // Only the count of what clears the cut, for `kept`.
                let mine = k.let_typed("kept_mine", Scalar::I32, 0);
                src.for_each(k, tid.e(), threads, &|k, c| {
                    k.assign(mine, mine + select(c.ub.gt(cut), 1i32, 0i32))
                });
                (tau_lb, k.block_allreduce(Reduce::Sum, mine, scratch.red_i))
            } else {
                // Only the kept candidates load K rows: the others leave the active set here, and the
                // kept ones (a few of them) are compacted, then rescored in rounds of `row_groups`
                // (each round's lane reduction runs with the whole warp).
                let kept_total = src.for_each_where(
                    k,
                    scratch.list,
                    scratch.red_i,
                    rg.e(),
                    row_groups,
                    &|k, at, c| {
                        let keep = k.let_("keep", c.ub.gt(cut));
                        k.if_(keep.not(), |k| k.store(lb_store, at, f32c(f64::NEG_INFINITY)));
                        keep.e()
                    },
                    &|k, i, inside| {
                        let at = src.element(k, i.e());
                        let at = k.let_("k_at", at);
                        let idx = src.read_idx_at(k, at.e());
                        let row = rows.row(k, idx.i64());
                        let kvals: Vec<Var> = (0..dims).map(|_| k.let_typed("kr", keys.elem, 0.0)).collect();
                        k.if_(inside, |k| {
                            for (j, v) in k
                                .load_vec("k", keys, row + (rl * dims).i64(), dims)
                                .into_iter()
                                .enumerate()
                            {
                                k.assign(kvals[j], v);
                            }
                        });
                        let dot = kvals
                            .iter()
                            .zip(&qs)
                            .fold(f32c(0.0), |a, (kx, qx)| fma(*qx, kx.f32(), a));
                        let dots = k.warp_allreduce_width(&[(Reduce::Sum, dot)], row_lanes);
                        let alibi = match slope {
                            Some(s) => s * (idx.i64() - (rows.seq_len - 1i64)).f32(),
                            None => f32c(0.0),
                        };
                        k.if_(inside.and(rl.eq_(0u32)), |k| {
                            k.store(lb_store, at, dots[0] + alibi)
                        });
                    },
                );
                // 3. τ over the kept set (which holds the support), starting from τ_lb ≤ τ.
                (solve_tau(k, ds, src, tau_lb, scratch.red), kept_total)
            };
            write_output(k, ds, src, tau, values, &rows, outs, &scratch);
            let tid0 = k.thread_idx().eq_(0u32);
            k.if_(tid0, |k| k.store(kept_out, head, kept_total));
        };
        k.if_else(
            g.total.le(g.capacity as i32),
            |k| {
                g.stage(k);
                run(k, &g.staged);
            },
            |k| run(k, &g.global),
        )
    };
    match repair_gate {
        Some(g) => {
            let runs = g.runs(&mut k, b, kv_heads, kvh);
            k.if_(runs, body);
        }
        None => body(&mut k),
    }
    Ok(k.finish()?)
}
