//! Exact α-entmax decode, one query per head: a score pass that streams each (sequence, KV
//! head)'s tokens once per GQA group and keeps the candidates that can be in the support
//! (`stream`), and a finish pass that solves the threshold exactly over them and writes
//! `o = Σ p_j v_j / Σ p_j` (`finish`). The same two kernels serve three token sources
//! (`tokens::Layout`): a contiguous cache (the spine), every page of a paged cache
//! (`decode_dense`), and the selected pages of a paged cache (`decode_sparse`).
//!
//! Notation as in the spec: `z = (α−1)·(q·k/√d + alibi)` is the entmax-space score, `τ` the
//! threshold, `p_j = [z_j − τ]_+^β` with `β = 1/(α−1)`.

use crate::finish::{gather, solve_tau, write_output, CandInputs, OutputBufs, Scratch, Source};
use crate::stream::{CandidateBufs, ChunkScores, Stream, Tightening};
use crate::tokens::{
    chunk_offset, load_queries, load_queries_mma, score_chunk, score_chunk_mma, Lanes, Layout, PageBufs,
    TokenSource,
};
use crate::{scalar_of, KernelGenError};
use entkv_abi::{paged_decode_entry_names, DecodeSpec, DenseTile, PagedSpec};
use entkv_dsl::*;

/// Score pass: grid (splits, kv heads, batch). Parameters, in order:
/// - contiguous: `q, k, cand_z, cand_idx, cand_count, cand_lb, n, chunks_per_split`;
/// - paged: `q, k_pool, block_table, seq_lens, [alibi_slopes], cand_z, cand_idx, cand_count,
///   cand_lb, max_pages, chunks_per_split`;
/// - selected: as paged with `sel_pages, sel_count` after `seq_lens`.
pub fn score_kernel(
    name: String,
    layout: Layout,
    spec: &DecodeSpec,
    alibi: bool,
    tile: &DenseTile,
) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let mut k = KernelBuilder::new(name, tile.threads);
    if tile.score_min_blocks > 0 {
        k.set_min_blocks_per_sm(tile.score_min_blocks);
    } else if matches!(layout, Layout::Selected { .. }) && spec.head_dim >= 128 {
        // Left to itself ptxas caps the selection's score pass at 80 registers and spills at
        // d = 128, P = 64 (tests/emit_ptxas). At d = 128 a 256-thread CTA needs over 100
        // registers whatever the cap, so an explicit floor of one CTA costs no occupancy.
        k.set_min_blocks_per_sm(1);
    }
    let kv = scalar_of(spec.kv_dtype);
    let q = k.buffer("q", scalar_of(spec.q_dtype), Access::Read);
    let (keys, page_bufs, slopes);
    match layout {
        Layout::Contiguous => {
            keys = k.buffer("k", kv, Access::Read);
            page_bufs = None;
            slopes = None;
        }
        Layout::Paged { .. } | Layout::Selected { .. } => {
            keys = k.buffer("k_pool", kv, Access::Read);
            let block_table = k.buffer("block_table", Scalar::I32, Access::Read);
            let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
            let sel = if let Layout::Selected { .. } = layout {
                let pages = k.buffer("sel_pages", Scalar::I32, Access::Read);
                let count = k.buffer("sel_count", Scalar::I32, Access::Read);
                Some((pages, count))
            } else {
                None
            };
            slopes = alibi.then(|| k.buffer("alibi_slopes", Scalar::F32, Access::Read));
            page_bufs = Some((block_table, seq_lens, sel));
        }
    }
    let bufs = CandidateBufs {
        lb: k.buffer("cand_z", Scalar::F32, Access::ReadWrite),
        ub: None,
        idx: k.buffer("cand_idx", Scalar::I32, Access::ReadWrite),
        count: k.buffer("cand_count", Scalar::I32, Access::Write),
        bound: k.buffer("cand_lb", Scalar::F32, Access::Write),
    };
    let (n, max_pages) = match layout {
        Layout::Contiguous => (Some(k.scalar_param("n", Scalar::I64)), None),
        _ => (None, Some(k.scalar_param("max_pages", Scalar::I32))),
    };
    let chunks = k.scalar_param("chunks_per_split", Scalar::I32);

    let split = k.let_("split", k.block_idx(Axis::X));
    let kvh = k.let_("kvh", k.block_idx(Axis::Y));
    let b = k.let_("b", k.block_idx(Axis::Z));
    let splits = k.let_("splits", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    let q_heads = k.let_("q_heads", kv_heads * spec.group);
    let n = n.map(|n| k.let_("n", n));
    let pages = match (page_bufs, max_pages) {
        (Some((block_table, seq_lens, sel)), Some(mp)) => Some(PageBufs {
            block_table,
            seq_lens,
            sel,
            max_pages: k.let_("max_pages", mp),
        }),
        _ => None,
    };
    let src = TokenSource::new(&mut k, layout, spec.head_dim, b, kvh, kv_heads, n, pages);
    let lanes = Lanes::new(&mut k, spec, tile);
    let owner = k.let_("owner", lanes.sub.eq_(0u32)); // one lane per token counts it
    let qr = if tile.mma {
        load_queries_mma(&mut k, spec, q, slopes, b, kvh, q_heads)
    } else {
        load_queries(&mut k, spec, &lanes, q, slopes, b, kvh, q_heads)
    };
    let chunk_len = tile.chunk_len();
    // A split's workspace holds `chunks_per_split` chunks' candidates.
    let split_len = k.let_("split_len", chunks.clone().i64() * chunk_len as i64);

    let seg_index = |k: &mut KernelBuilder, g: u32| -> Expr {
        let h = kvh * spec.group + g;
        let _ = k;
        (b * q_heads + h).i64() * splits.i64() + split.i64()
    };
    let tightening = Tightening::for_score_pass(spec, alibi);
    let stream = Stream::new(&mut k, spec, tile, bufs, &seg_index, split_len, tightening);
    // A selection's pages are looked up once per chunk into shared memory
    // (`TokenSource::stage`, `stage_at`) when its chunks are page-aligned; the dense walk
    // reads its block table per token, which measured faster there at 128k and 1M.
    let staged = src.chunk_pages(&mut k, chunk_len);
    // Which chunks this split walks: [c_first, c_end) in iteration indices.
    let (c_first, c_end) = if staged.is_some() {
        src.selection_run(&mut k, split, splits, chunks.clone(), chunk_len)
    } else {
        // Every sequence of a dense walk is as long as planned or shorter: contiguous splits.
        (k.let_("c_first", split.i64() * split_len), src.len)
    };
    // The first chunk's pages are looked up before the walk, each later chunk's while the one
    // before it is scored: always with f16 keys, one head a group and no ALiBi, elsewhere on
    // tiles that ask for it (`DenseTile::lookahead`: there the registers it holds across a
    // chunk spilled on some tiles, and at d = 32 bf16 took the pass from 62 to 94 registers).
    // Walks without it look each chunk's pages up when it starts (`stage_at`).
    let ahead = tile.page_lookahead(spec, alibi);
    let lookahead = staged.filter(|_| ahead).map(|cp| {
        let la = src.lookahead(&mut k, &cp, tile.threads);
        k.if_(c_first.lt(c_end), |k| {
            src.fetch_logical(k, &cp, &la, c_first.e());
            src.fetch_physical(k, &cp, &la, c_first.e());
        });
        (cp, la)
    });
    k.for_("chunk", 0i32, chunks, 1i32, |k, chunk| {
        let c0 = k.let_("c0", c_first + chunk.i64() * chunk_len as i64);
        // Uniform: a chunk past this split's run is skipped by every thread.
        k.if_(c0.lt(c_end), |k| {
            // The next chunk, when this walk looks ahead and this is not its run's last.
            let mut next = None;
            match (&lookahead, &staged) {
                (Some((cp, la)), _) => {
                    let c_next = k.let_("c_next", c0 + chunk_len as i64);
                    let has_next = k.let_("has_next", c_next.lt(c_end));
                    src.stage(k, cp, la);
                    k.if_(has_next, |k| src.fetch_logical(k, cp, la, c_next.e()));
                    next = Some((c_next, has_next));
                }
                (None, Some(cp)) => src.stage_at(k, cp, c0, tile.threads),
                (None, None) => {}
            }
            let score = if tile.mma { score_chunk_mma } else { score_chunk };
            let (z, t) = score(k, tile, &lanes, &src, keys, &qr, c0, staged.as_ref());
            if let (Some((cp, la)), Some((c_next, has_next))) = (&lookahead, next) {
                k.if_(has_next, |k| src.fetch_physical(k, cp, la, c_next.e()));
            }
            let bounds = z.iter().map(|zg| zg.iter().map(|&v| (v, v)).collect()).collect();
            // A staged chunk's candidates look their positions up again when appended (a
            // shared-memory read) rather than keeping every token's in registers.
            let position = |k: &mut KernelBuilder, r: usize| match &staged {
                Some(cp) => {
                    let off = k.let_("cand_off", chunk_offset(&lanes, r as u32));
                    let c = k.let_("cand_c", c0 + off.i64());
                    src.staged_position(k, cp, c, off).i32()
                }
                None => t[r].i32(),
            };
            stream.push(
                k,
                &ChunkScores {
                    bounds,
                    position: &position,
                    owner,
                },
            );
        });
    });
    stream.finish(&mut k, &seg_index);
    Ok(k.finish()?)
}

/// Finish pass: grid (query heads, batch). Parameters, in order:
/// - contiguous: `cand_z, cand_idx, cand_count, cand_lb, v, out, tau, support, splits,
///   split_len, n`;
/// - paged and selected: `cand_z, cand_idx, cand_count, cand_lb, v_pool, block_table, seq_lens,
///   out, tau, support, splits, split_len, max_pages`.
pub fn finish_kernel(
    name: String,
    layout: Layout,
    spec: &DecodeSpec,
    tile: &DenseTile,
) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let threads = tile.finish_threads;
    let mut k = KernelBuilder::new(name, threads);
    // The grid is only batch × heads CTAs; without an occupancy floor ptxas trades spills for
    // occupancy this kernel can never use.
    k.set_min_blocks_per_sm(1);
    let inputs = CandInputs {
        z: k.buffer("cand_z", Scalar::F32, Access::Read),
        ub: None,
        idx: k.buffer("cand_idx", Scalar::I32, Access::Read),
        count: k.buffer("cand_count", Scalar::I32, Access::Read),
        bound: k.buffer("cand_lb", Scalar::F32, Access::Read),
    };
    let kv = scalar_of(spec.kv_dtype);
    let (values, paged) = match layout {
        Layout::Contiguous => (k.buffer("v", kv, Access::Read), None),
        _ => {
            let v = k.buffer("v_pool", kv, Access::Read);
            let bt = k.buffer("block_table", Scalar::I32, Access::Read);
            let sl = k.buffer("seq_lens", Scalar::I32, Access::Read);
            (v, Some((bt, sl)))
        }
    };
    let outs_b = (
        k.buffer("out", scalar_of(spec.out_dtype), Access::Write),
        k.buffer("tau", Scalar::F32, Access::Write),
        k.buffer("support", Scalar::I32, Access::Write),
    );
    let splits = k.scalar_param("splits", Scalar::I32);
    let split_len = k.scalar_param("split_len", Scalar::I64);
    let (n, max_pages) = match layout {
        Layout::Contiguous => (Some(k.scalar_param("n", Scalar::I64)), None),
        _ => (None, Some(k.scalar_param("max_pages", Scalar::I32))),
    };

    let scratch = Scratch::new(&mut k, spec);
    let h = k.let_("h", k.block_idx(Axis::X));
    let b = k.let_("b", k.block_idx(Axis::Y));
    let q_heads = k.let_("q_heads", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", q_heads / spec.group);
    let kvh = k.let_("kvh", h / spec.group);
    let head = k.let_("head", (b * q_heads + h).i64());
    let n = n.map(|n| k.let_("n", n));
    // Candidates store logical positions, so V rows are found like a full walk's.
    let row_layout = match layout {
        Layout::Selected { page_size } => Layout::Paged { page_size },
        l => l,
    };
    let pages = match (paged, max_pages) {
        (Some((block_table, seq_lens)), Some(mp)) => Some(PageBufs {
            block_table,
            seq_lens,
            sel: None,
            max_pages: k.let_("max_pages", mp),
        }),
        _ => None,
    };
    let v_rows = TokenSource::new(&mut k, row_layout, spec.head_dim, b, kvh, kv_heads, n, pages);

    let g = gather(
        &mut k,
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
    let run = |k: &mut KernelBuilder, src: &Source| {
        let tau = solve_tau(k, spec, src, g.bound, scratch.red);
        write_output(k, spec, src, tau, values, &v_rows, outs, &scratch);
    };
    k.if_else(
        g.total.le(g.capacity as i32),
        |k| {
            g.stage(k);
            run(k, &g.staged);
        },
        |k| run(k, &g.global),
    );
    Ok(k.finish()?)
}

/// The contiguous-cache decode pair (the spine's `decode_dense` over `[batch, kv_heads, n, d]`).
pub fn contiguous_kernels(spec: &DecodeSpec, tile: &DenseTile) -> Result<[Kernel; 2], KernelGenError> {
    let (score, finish) = entkv_abi::dense_entry_names(spec, tile);
    Ok([
        score_kernel(score, Layout::Contiguous, spec, false, tile)?,
        finish_kernel(finish, Layout::Contiguous, spec, tile)?,
    ])
}

/// The paged decode pair: over every page (`decode_dense`) or the selected pages
/// (`decode_sparse`).
pub fn paged_kernels(
    spec: &PagedSpec,
    tile: &DenseTile,
    selected: bool,
) -> Result<[Kernel; 2], KernelGenError> {
    let (score, finish) = paged_decode_entry_names(spec, tile, selected);
    let p = spec.page_size;
    let layout = if selected {
        Layout::Selected { page_size: p }
    } else {
        Layout::Paged { page_size: p }
    };
    Ok([
        score_kernel(score, layout, &spec.decode, spec.alibi, tile)?,
        finish_kernel(finish, layout, &spec.decode, tile)?,
    ])
}
