//! Top-k page selection over the paged cache (`crate::paged`) and the softmax top-k (Quest)
//! decode the paper compares against. Four kernels:
//!
//! 1. `page_score_box`, grid (kv heads, page blocks, batch): for every logical page
//!    `j < pages − 1` of a sequence (the last page is never scored) and every KV head, the box
//!    upper bound of the scores of the page's tokens, maximised over the query heads of the GQA
//!    group:
//!    `U = max_h [Σ_i max(q_i·min_i, q_i·max_i)/√d + slope_h·((j+1)·P − 1 − (len − 1))]`
//!    (the ALiBi term only with ALiBi; it is the page's last, largest position, so the term is an
//!    upper bound too). Read from `meta_bounds` through the block table; written to the
//!    `page_scores` workspace `[batch, kv_heads, max_pages]` f32 (entries `≥ pages − 1` are left
//!    untouched). Score units: no `(α−1)` factor.
//! 2. `select_topk`, grid (kv heads, batch): keeps the `min(budget_pages, pages − 1)` pages with
//!    the largest bounds (ties broken by the lower page index) by a radix select on the f32
//!    score bits, and writes the selection in the `crate::paged` format (ascending, the last
//!    page appended last, `sel_count = kept + 1`). `budget_pages` is a kernel argument, so one
//!    launch serves any budget and nothing waits for the host.
//! 3. `decode_softmax_topk_score`, grid (splits, kv heads, batch): softmax attention
//!    (`s = q·k/√d + ALiBi`, fp32) of every query head of the group over one split of the
//!    selected tokens (compacted order: the selected pages' tokens, the last page only up to
//!    `len`), written as a per-split `(max, sum, acc[d])` in base-2 units. K and V are read once
//!    per group.
//! 4. `decode_softmax_topk_finish`, grid (query heads, batch): merges a head's splits with the
//!    log-sum-exp rule and writes `out[b, h, :] = acc / sum`.

use crate::geometry::{ceil_div, LaunchGeometry};
use crate::paged::{PagedShape, PagedSpec};
use crate::signature::{ArgKind, ArgSpec, Elem};
use crate::spec::SpecError;
use crate::{dense_plan, DenseShape, DenseTile};
use serde::{Deserialize, Serialize};

/// Bits of the score key resolved per radix pass of `select_topk` (4 passes for 32 bits).
pub const RADIX_BITS: u32 = 8;
/// Histogram bins per radix pass.
pub const RADIX_BINS: u32 = 1 << RADIX_BITS;
/// Most threads a CTA may have (and the largest shared-memory footprint it may take).
const MAX_THREADS: u32 = 1024;
const MAX_STATIC_SHARED_BYTES: u32 = 48 * 1024;

fn check_threads(kernel: &'static str, name: &str, t: u32, min: u32) -> Result<(), SpecError> {
    if t < min || t > MAX_THREADS || t % 32 != 0 {
        return Err(SpecError::BadTile {
            kernel,
            reason: format!("{name} = {t} must be a multiple of 32 in {min}..={MAX_THREADS}"),
        });
    }
    Ok(())
}

fn buf(name: &'static str, elem: Elem, writes: bool) -> ArgSpec {
    ArgSpec {
        name,
        kind: ArgKind::Buffer { elem, writes },
    }
}

fn scalar(name: &'static str, kind: ArgKind) -> ArgSpec {
    ArgSpec { name, kind }
}

/// Elements of one 16-byte vector of K-dtype values.
fn kv_vec(spec: &PagedSpec) -> u32 {
    16 / spec.decode.kv_dtype.size_bytes()
}

// ---------------------------------------------------------------------------------------------
// page_score_box

/// Tile of `page_score_box`. A page's metadata block (`2·d` K-dtype values: the min row, then
/// the max row) is read by `lanes_per_page` lanes, each loading the same 16-byte slice of both
/// rows, so the block is read in full, coalesced lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BoxScoreTile {
    pub threads: u32,
    /// Pages each lane group scores per CTA (their loads are issued together).
    pub pages_per_group: u32,
}

impl BoxScoreTile {
    pub fn default_for(_spec: &PagedSpec) -> BoxScoreTile {
        // Two pages per group keep four 16-byte loads in flight per lane; with 256 threads a
        // CTA scores 128 pages at d = 32 (f16), so even a 32k context fills the GPU.
        BoxScoreTile {
            threads: 256,
            pages_per_group: 2,
        }
    }

    /// Lanes that share one page: `d` dims in 16-byte slices.
    pub fn lanes_per_page(spec: &PagedSpec) -> u32 {
        spec.decode.head_dim / kv_vec(spec)
    }

    /// Pages one CTA scores.
    pub fn pages_per_block(&self, spec: &PagedSpec) -> u32 {
        self.threads / Self::lanes_per_page(spec) * self.pages_per_group
    }

    /// Pages a lane group of `page_bounds` takes: [`page_bounds_depth`] times
    /// `pages_per_group`.
    pub fn bounds_pages_per_group(&self, spec: &PagedSpec) -> u32 {
        self.pages_per_group * page_bounds_depth(spec)
    }

    /// Pages one CTA of `page_bounds` bounds ([`page_bounds_lanes`] threads a page,
    /// [`PAGE_BOUNDS_ROUNDS`] rounds).
    pub fn bounds_pages_per_block(&self, spec: &PagedSpec) -> u32 {
        self.threads / page_bounds_lanes(spec) * self.bounds_pages_per_group(spec) * PAGE_BOUNDS_ROUNDS
    }

    /// `t256_r2`.
    pub fn tag(&self) -> String {
        format!("t{}_r{}", self.threads, self.pages_per_group)
    }

    pub fn check(&self, spec: &PagedSpec) -> Result<(), SpecError> {
        check_threads("page_score_box", "threads", self.threads, 32)?;
        if !(1..=8).contains(&self.pages_per_group) {
            return Err(SpecError::BadTile {
                kernel: "page_score_box",
                reason: format!("pages_per_group = {} must be in 1..=8", self.pages_per_group),
            });
        }
        let lanes = Self::lanes_per_page(spec);
        if !lanes.is_power_of_two() || lanes > 32 {
            return Err(SpecError::BadTile {
                kernel: "page_score_box",
                reason: format!("{lanes} lanes per page (d / 16-byte vector) must be a power of two ≤ 32"),
            });
        }
        Ok(())
    }
}

/// `page_score_box__<spec>__<tile>`.
pub fn page_score_box_entry(spec: &PagedSpec, tile: &BoxScoreTile) -> String {
    format!("page_score_box__{}__{}", spec.tag(), tile.tag())
}

/// `q [batch, q_heads, d]`, `meta_bounds`, `block_table`, `seq_lens`, (`alibi_slopes
/// [q_heads]` with ALiBi), `page_scores [batch, kv_heads, max_pages]` (written), `max_pages`
/// (the block table's row length).
pub fn page_score_box_signature(spec: &PagedSpec) -> Vec<ArgSpec> {
    let mut v = vec![
        buf("q", spec.decode.q_dtype.into(), false),
        buf("meta_bounds", spec.decode.kv_dtype.into(), false),
        buf("block_table", Elem::I32, false),
        buf("seq_lens", Elem::I32, false),
    ];
    if spec.alibi {
        v.push(buf("alibi_slopes", Elem::F32, false));
    }
    v.push(buf("page_scores", Elem::F32, true));
    v.push(scalar("max_pages", ArgKind::I32));
    v
}

/// Grid (kv heads, page blocks over `max_pages − 1` pages, batch). CTAs past a sequence's
/// scored pages exit at once, so the grid needs only the static shape, never the lengths.
pub fn page_score_box_geometry(spec: &PagedSpec, tile: &BoxScoreTile, shape: &PagedShape) -> LaunchGeometry {
    page_blocks_geometry(tile, shape, tile.pages_per_block(spec))
}

/// Grid (kv heads, blocks of `per_block` scored pages, batch) at the box tile's threads: both
/// page passes'. KV heads on x: the CTAs that run together read the same pages of every head,
/// so the block-table entries they load are shared in L1/L2 (top-k's box pass at `paper` 1M:
/// 0.436 → 0.415 ms, results/2026-12-03-page-pass-order). Page blocks on y, so at most 65535
/// of them (the default tile covers 32 pages a block at d = 128, 128 at d = 32); a larger
/// cache is refused at launch validation.
fn page_blocks_geometry(tile: &BoxScoreTile, shape: &PagedShape, per_block: u32) -> LaunchGeometry {
    let blocks = scored_page_blocks(shape, per_block);
    LaunchGeometry {
        grid: [shape.kv_heads, blocks, shape.batch],
        block: tile.threads,
        shared_bytes: 0,
    }
}

/// Page blocks of a page pass's grid (its y axis).
pub fn page_pass_blocks(g: &LaunchGeometry) -> u32 {
    g.grid[1]
}

/// Rounds of pages a CTA of `page_bounds` takes one after the other: its integer query weights
/// (a few hundred operations a lane, by count of the generator's code) are computed once for
/// all of them. With one round the pass was issue-heavy (ncu at 20313e6: IPC 1.9, issue slots
/// 47% busy, 0.469 ms at `paper` 1M; results/2026-12-02-box-dp4a/3-lanes); four rounds took it
/// to 0.422 ms (4-rounds).
pub const PAGE_BOUNDS_ROUNDS: u32 = 4;

/// Threads of `page_bounds` a (page, KV head): as few as keep a lane's integer query weights
/// (`head_dim/lanes` registers a head of the group) at 16, at most one a code word pair
/// (`head_dim/8`); two at `paper`. Its page box sketch is plain u32 words, so unlike
/// `page_score_box` the K dtype does not matter. With four lanes a page at `paper` (the box
/// pass's mapping) every lane decoded the page's range words, reduced its sums over the lanes
/// and ran the page's epilogue: the pass took 0.445 ms at 1M, as long as the f16 box pass with
/// twice the bytes (results/2026-12-02-box-dp4a/2-depth). One lane a page held 168 registers.
pub fn page_bounds_lanes(spec: &PagedSpec) -> u32 {
    let d = spec.decode.head_dim;
    (d * spec.decode.group)
        .div_ceil(16)
        .next_power_of_two()
        .min(d / 8)
}

/// How many more pages a lane group of `page_bounds` keeps in flight than the box tile's
/// `pages_per_group`: 4 over its lanes a page, at least 1. At four lanes a page and the box
/// tile's depth the 64-byte blocks were latency-bound (0.588 ms at `paper` 1M, DRAM at 30% of
/// peak, results/2026-12-02-box-dp4a/1-checks-bench); twice that depth gave 0.445 ms, four
/// times the same, eight times 0.75 ms (151 registers: one CTA an SM; 2-depth).
pub fn page_bounds_depth(spec: &PagedSpec) -> u32 {
    (4 / page_bounds_lanes(spec)).max(1)
}

/// KV heads one CTA of `page_bounds` bounds together (a power of two): lane group `g` takes head
/// `g mod H` of the CTA's heads, so each load instruction of a warp reads `H` heads' 64-byte
/// blocks of one page, `64·H` contiguous bytes (the page box sketch is laid out page by page).
/// A 64-byte block alone is what the H200 reads worst: random 64-byte rows of an 805 MB pool
/// read at 2.2 TB/s, the blocks of 2, 8 or 24 heads of a page together at 3.5, 3.6 and 3.7
/// (`page_bounds` at `paper` 1M with one head a CTA: 0.355 ms, 2.3 TB/s;
/// results/2026-12-03-page-access). The largest power of two ≤ 8 that divides the KV heads and
/// leaves every warp all `H` heads (at most its lane groups), so every warp publishes one
/// lower-bound maximum a head.
pub fn page_bounds_heads(spec: &PagedSpec, shape: &PagedShape) -> u32 {
    let divides = 1u32 << shape.kv_heads.max(1).trailing_zeros().min(3);
    divides.min(32 / page_bounds_lanes(spec)).max(1)
}

/// Grid of `page_bounds`: (KV heads / [`page_bounds_heads`], page blocks, batch) at the box
/// tile's threads; a block bounds [`BoxScoreTile::bounds_pages_per_block`] / `H` pages of each
/// of its heads.
pub fn page_bounds_geometry(spec: &PagedSpec, tile: &BoxScoreTile, shape: &PagedShape) -> LaunchGeometry {
    let heads = page_bounds_heads(spec, shape);
    let mut g = page_blocks_geometry(tile, shape, tile.bounds_pages_per_block(spec) / heads);
    g.grid[0] /= heads;
    g
}

/// Elements of the `page_scores` workspace (f32).
pub fn page_scores_elems(shape: &PagedShape) -> u64 {
    shape.selection_elems()
}

// ---------------------------------------------------------------------------------------------
// select_topk

/// Pages each thread of the page pruning (`prune_mark`, `select_pruned`) takes, whatever the
/// top-k's `items_per_thread`: the pruning streams 4-byte bounds once, and 16 loads a lane in
/// flight beat 8 (`paper`, t512: 1M 50 → 46 µs, 128k in one slice 19 → 10 µs).
pub const PRUNE_PAGES_PER_LANE: u32 = 16;

/// Tile of `select_topk`: one CTA per (batch, kv head) loops over the pages, so any page count
/// works with a fixed `RADIX_BINS`-entry shared histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SelectTopkTile {
    /// At least `RADIX_BINS`: the bin search gives every thread at most one bin.
    pub threads: u32,
    /// Scores each thread loads per iteration (independent loads in flight).
    pub items_per_thread: u32,
}

impl SelectTopkTile {
    pub fn default_for(_spec: &PagedSpec) -> SelectTopkTile {
        // 512 × 8 = 4096 pages per sweep: a 1M context (65535 scored pages) takes 16 sweeps per
        // pass. The grid is only batch × kv heads CTAs, so each needs many loads in flight
        // (16 KB per sweep; the scores were just written and sit in L2).
        SelectTopkTile {
            threads: 512,
            items_per_thread: 8,
        }
    }

    /// Pages one CTA of the page pruning handles: [`PRUNE_PAGES_PER_LANE`] a thread.
    pub fn slice_pages(&self) -> u32 {
        self.threads * PRUNE_PAGES_PER_LANE
    }

    /// `t512_i8`.
    pub fn tag(&self) -> String {
        format!("t{}_i{}", self.threads, self.items_per_thread)
    }

    pub fn check(&self, _spec: &PagedSpec) -> Result<(), SpecError> {
        check_threads("select_topk", "threads", self.threads, RADIX_BINS)?;
        if !(1..=16).contains(&self.items_per_thread) {
            return Err(SpecError::BadTile {
                kernel: "select_topk",
                reason: format!("items_per_thread = {} must be in 1..=16", self.items_per_thread),
            });
        }
        Ok(())
    }
}

/// `page_bounds__<spec+sketch>__<tile>`: the box bounds of `page_score_box` made rigorous for
/// the certified decode (upper and lower, with rounding slack, in its `(α − 1)·score` units).
/// It reads the page box sketch (`meta_box`, `crate::meta`) instead of `meta_bounds`: half the
/// bytes, and integer dot products. The sketch width is in the name because the bounds go with
/// the certified family's bundle rows, not because the kernel reads the key sketch.
pub fn page_bounds_entry(spec: &PagedSpec, tile: &BoxScoreTile) -> String {
    format!("page_bounds__{}__{}", spec.sketch_tag(), tile.tag())
}

/// `prune_tau__<spec+sketch>__<tile>`: the lower bound `τ_low` on each row's entmax threshold,
/// for a `prune_mark` whose rows span several slices.
pub fn prune_tau_entry(spec: &PagedSpec, tile: &SelectTopkTile) -> String {
    format!("prune_tau__{}__{}", spec.sketch_tag(), tile.tag())
}

/// `prune_mark__<spec+sketch>__<tile>`: marks, in a bitmask, the pages whose upper bound clears
/// a certified lower bound on the entmax threshold, and counts them per slice of
/// [`SelectTopkTile::slice_pages`] pages.
pub fn prune_mark_entry(spec: &PagedSpec, tile: &SelectTopkTile) -> String {
    format!("prune_mark__{}__{}", spec.sketch_tag(), tile.tag())
}

/// `select_pruned__<spec+sketch>__<tile>`: compacts `prune_mark`'s pages into the selection,
/// each slice at the sum of the counts before it.
pub fn select_pruned_entry(spec: &PagedSpec, tile: &SelectTopkTile) -> String {
    format!("select_pruned__{}__{}", spec.sketch_tag(), tile.tag())
}

/// Grid of `prune_mark` and `select_pruned`: (slices, kv heads, batch), one CTA per slice of
/// a row's scored pages (at least one, so a sequence of one page still gets its row closed).
pub fn prune_geometry(tile: &SelectTopkTile, shape: &PagedShape) -> LaunchGeometry {
    LaunchGeometry {
        grid: [prune_slices(tile, shape), shape.kv_heads, shape.batch],
        block: tile.threads,
        shared_bytes: 0,
    }
}

/// Slices of [`SelectTopkTile::slice_pages`] pages that cover a row's scored pages.
pub fn prune_slices(tile: &SelectTopkTile, shape: &PagedShape) -> u32 {
    scored_page_blocks(shape, tile.slice_pages())
}

/// Blocks of `per_block` pages that cover a row's scored pages (all but the last of
/// `max_pages`), at least one.
fn scored_page_blocks(shape: &PagedShape, per_block: u32) -> u32 {
    let scored = shape.max_pages.saturating_sub(1) as u64;
    ceil_div(scored, per_block as u64).max(1) as u32
}

/// Words of one row of `prune_mark`'s bitmask (a bit a page).
pub fn prune_mask_words(shape: &PagedShape) -> u32 {
    shape.max_pages.div_ceil(32)
}

/// `select_topk__<spec>__<tile>`.
pub fn select_topk_entry(spec: &PagedSpec, tile: &SelectTopkTile) -> String {
    format!("select_topk__{}__{}", spec.tag(), tile.tag())
}

/// `page_scores`, `seq_lens`, `sel_pages` and `sel_count` (written), `max_pages`,
/// `budget_pages` (pages to keep besides the last one; negative counts as 0).
pub fn select_topk_signature(_spec: &PagedSpec) -> Vec<ArgSpec> {
    vec![
        buf("page_scores", Elem::F32, false),
        buf("seq_lens", Elem::I32, false),
        buf("sel_pages", Elem::I32, true),
        buf("sel_count", Elem::I32, true),
        scalar("max_pages", ArgKind::I32),
        scalar("budget_pages", ArgKind::I32),
    ]
}

/// Grid (kv heads, batch).
pub fn select_topk_geometry(tile: &SelectTopkTile, shape: &PagedShape) -> LaunchGeometry {
    LaunchGeometry {
        grid: [shape.kv_heads, shape.batch, 1],
        block: tile.threads,
        shared_bytes: 0,
    }
}

// ---------------------------------------------------------------------------------------------
// decode_softmax_topk

/// Tile of the softmax top-k decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SoftmaxTopkTile {
    /// Threads per CTA of the score pass.
    pub threads: u32,
    /// Lanes sharing one token (each loads `d / lanes_per_token` dims of its K and V rows).
    pub lanes_per_token: u32,
    /// Tokens each lane group handles per chunk (their K and V loads are issued together).
    pub tokens_per_group: u32,
    /// Score CTAs per SM the split plan aims for, times four waves (as `dense_plan`).
    pub ctas_per_sm: u32,
    /// Threads per CTA of the finish pass (a multiple of `d`: threads = dims × split lanes).
    pub finish_threads: u32,
}

impl SoftmaxTopkTile {
    pub fn default_for(spec: &PagedSpec) -> SoftmaxTopkTile {
        let d = spec.decode.head_dim;
        let g = spec.decode.group;
        // Each lane keeps q and the running output for its dims of every head of the group
        // (2·G·d/lanes registers): aim for 32 of them, but keep at least one 16-byte load per
        // row (d/lanes ≥ 8 dims for 16-bit K/V).
        let lanes_per_token = (d * g / 16)
            .next_power_of_two()
            .clamp(1, (d / kv_vec(spec)).max(1));
        SoftmaxTopkTile {
            threads: 256,
            lanes_per_token,
            // Four tokens' K and V slices in flight per lane (32 registers of loads at 8 dims per
            // lane), two for groups of 4 and 8, whose q and running outputs take 64 and 128
            // registers (ptxas: G = 4 at d = 128 spills with four; G = 8 uses ~220 with two).
            // With 256 threads that keeps 32–128 KB of K/V loads in flight per SM.
            tokens_per_group: if g <= 3 { 4 } else { 2 },
            ctas_per_sm: 3,
            finish_threads: 128,
        }
    }

    /// Tokens one score CTA covers per chunk.
    pub fn chunk_len(&self) -> u32 {
        self.threads / self.lanes_per_token * self.tokens_per_group
    }

    /// Static shared memory of the score pass: per warp and head, `(max, sum, acc[d])`.
    pub fn score_shared_bytes(&self, spec: &PagedSpec) -> u32 {
        self.threads / 32 * spec.decode.group * (spec.decode.head_dim + 2) * 4
    }

    /// `t256_l2_r4_c3_f128`.
    pub fn tag(&self) -> String {
        format!(
            "t{}_l{}_r{}_c{}_f{}",
            self.threads, self.lanes_per_token, self.tokens_per_group, self.ctas_per_sm, self.finish_threads
        )
    }

    pub fn check(&self, spec: &PagedSpec) -> Result<(), SpecError> {
        let kernel = "decode_softmax_topk";
        let bad = |reason: String| SpecError::BadTile { kernel, reason };
        let d = spec.decode.head_dim;
        check_threads(kernel, "threads", self.threads, 32)?;
        check_threads(kernel, "finish_threads", self.finish_threads, 32)?;
        if self.finish_threads % d != 0 {
            return Err(bad(format!(
                "finish_threads = {} must be a multiple of head_dim = {d}",
                self.finish_threads
            )));
        }
        let l = self.lanes_per_token;
        if !l.is_power_of_two() || l > 32 || d % l != 0 {
            return Err(bad(format!(
                "lanes_per_token = {l} must be a power of two ≤ 32 dividing head_dim {d}"
            )));
        }
        if d / l * spec.decode.kv_dtype.size_bytes() > 128 {
            return Err(bad(format!("{} dims per lane is too many registers", d / l)));
        }
        // In u64: a bundle's row may hold any u32, and a wrapped product would pass.
        let per_lane = u64::from(self.tokens_per_group) * u64::from(spec.decode.group);
        if !(1..=32).contains(&per_lane) {
            return Err(bad(format!(
                "tokens_per_group × group = {per_lane} must be in 1..=32 (registers)"
            )));
        }
        if !(1..=32).contains(&self.ctas_per_sm) {
            return Err(bad(format!(
                "ctas_per_sm = {} must be in 1..=32",
                self.ctas_per_sm
            )));
        }
        if self.score_shared_bytes(spec) > MAX_STATIC_SHARED_BYTES {
            return Err(bad(format!(
                "{} bytes of per-warp partials exceed the static shared memory",
                self.score_shared_bytes(spec)
            )));
        }
        Ok(())
    }
}

/// How one softmax top-k call is cut into splits of the compacted selected tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftmaxTopkPlan {
    /// The budget the plan was made for: pass the same value to `select_topk`, or the splits may
    /// not cover the selection.
    pub budget_pages: i32,
    pub chunks_per_split: u32,
    pub splits: u32,
    /// `chunks_per_split × chunk_len` tokens.
    pub split_len: u32,
}

/// Split the largest selection the budget allows (`min(budget, max_pages − 1) + 1` pages) like
/// [`dense_plan`] splits a dense context: splits as long as possible while about four waves of
/// `ctas_per_sm` CTAs per SM run, at most `MAX_SPLITS` per head. Only the static shape and the
/// budget enter, so no selection count has to come back to the host; heads with smaller
/// selections (short sequences) leave their trailing splits idle.
pub fn softmax_topk_plan(
    spec: &PagedSpec,
    tile: &SoftmaxTopkTile,
    shape: &PagedShape,
    budget_pages: i32,
    sm_count: u32,
) -> Result<SoftmaxTopkPlan, SpecError> {
    if shape.max_pages == 0 {
        return Err(SpecError::BadShape("max_pages must be positive".into()));
    }
    let kept = budget_pages.max(0) as u64;
    let max_sel_pages = kept.min(shape.max_pages as u64 - 1) + 1;
    // The dense plan's arithmetic over a tile of the same chunk length and occupancy target.
    let as_dense = DenseTile {
        threads: tile.threads,
        lanes_per_token: tile.lanes_per_token,
        tokens_per_group: tile.tokens_per_group,
        ctas_per_sm: tile.ctas_per_sm,
        ..DenseTile::default_for(&spec.decode)
    };
    let p = dense_plan(
        &as_dense,
        &DenseShape {
            batch: shape.batch,
            kv_heads: shape.kv_heads,
            n: max_sel_pages * spec.page_size as u64,
        },
        sm_count,
    )?;
    Ok(SoftmaxTopkPlan {
        budget_pages,
        chunks_per_split: p.chunks_per_split,
        splits: p.splits,
        split_len: p.split_len as u32,
    })
}

/// Element counts of the per-split partials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftmaxTopkWorkspace {
    /// `part_ml` (f32): `[batch, q_heads, splits, 2]`, the split's max and sum (base-2 units).
    pub ml_elems: u64,
    /// `part_acc` (f32): `[batch, q_heads, splits, d]`, `Σ 2^(s−max)·v`.
    pub acc_elems: u64,
}

impl SoftmaxTopkWorkspace {
    pub fn bytes(&self) -> u64 {
        (self.ml_elems + self.acc_elems) * 4
    }
}

pub fn softmax_topk_workspace(
    spec: &PagedSpec,
    shape: &PagedShape,
    plan: &SoftmaxTopkPlan,
) -> SoftmaxTopkWorkspace {
    let parts = shape.batch as u64 * shape.q_heads(spec) as u64 * plan.splits as u64;
    SoftmaxTopkWorkspace {
        ml_elems: parts * 2,
        acc_elems: parts * spec.decode.head_dim as u64,
    }
}

/// `decode_softmax_topk_score__<spec>__<tile>` and `decode_softmax_topk_finish__<spec>__<tile>`.
pub fn softmax_topk_entry_names(spec: &PagedSpec, tile: &SoftmaxTopkTile) -> (String, String) {
    let suffix = format!("{}__{}", spec.tag(), tile.tag());
    (
        format!("decode_softmax_topk_score__{suffix}"),
        format!("decode_softmax_topk_finish__{suffix}"),
    )
}

/// `q`, `k_pool`, `v_pool`, `block_table`, `seq_lens`, `sel_pages`, `sel_count`,
/// (`alibi_slopes`), `part_ml` and `part_acc` (written), `max_pages`, `chunks_per_split`.
pub fn softmax_topk_score_signature(spec: &PagedSpec) -> Vec<ArgSpec> {
    let kv: Elem = spec.decode.kv_dtype.into();
    let mut v = vec![
        buf("q", spec.decode.q_dtype.into(), false),
        buf("k_pool", kv, false),
        buf("v_pool", kv, false),
        buf("block_table", Elem::I32, false),
        buf("seq_lens", Elem::I32, false),
        buf("sel_pages", Elem::I32, false),
        buf("sel_count", Elem::I32, false),
    ];
    if spec.alibi {
        v.push(buf("alibi_slopes", Elem::F32, false));
    }
    v.extend([
        buf("part_ml", Elem::F32, true),
        buf("part_acc", Elem::F32, true),
        scalar("max_pages", ArgKind::I32),
        scalar("chunks_per_split", ArgKind::I32),
    ]);
    v
}

/// `part_ml`, `part_acc`, `sel_count`, `seq_lens`, `out [batch, q_heads, d]` (written),
/// `splits` (the workspace's split stride, the score pass's grid x), `split_len`.
pub fn softmax_topk_finish_signature(spec: &PagedSpec) -> Vec<ArgSpec> {
    vec![
        buf("part_ml", Elem::F32, false),
        buf("part_acc", Elem::F32, false),
        buf("sel_count", Elem::I32, false),
        buf("seq_lens", Elem::I32, false),
        buf("out", spec.decode.out_dtype.into(), true),
        scalar("splits", ArgKind::I32),
        scalar("split_len", ArgKind::I32),
    ]
}

/// Grid (splits, kv heads, batch).
pub fn softmax_topk_score_geometry(
    tile: &SoftmaxTopkTile,
    shape: &PagedShape,
    plan: &SoftmaxTopkPlan,
) -> LaunchGeometry {
    LaunchGeometry {
        grid: [plan.splits, shape.kv_heads, shape.batch],
        block: tile.threads,
        shared_bytes: 0,
    }
}

/// Grid (query heads, batch).
pub fn softmax_topk_finish_geometry(
    spec: &PagedSpec,
    tile: &SoftmaxTopkTile,
    shape: &PagedShape,
) -> LaunchGeometry {
    LaunchGeometry {
        grid: [shape.q_heads(spec), shape.batch, 1],
        block: tile.finish_threads,
        shared_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{DType, DecodeSpec, SUPPORTED_GROUPS, SUPPORTED_HEAD_DIMS, SUPPORTED_PAGE_SIZES};

    fn spec(d: u32, g: u32, p: u32, dtype: DType) -> PagedSpec {
        PagedSpec::new(DecodeSpec::new(1.5, d, g, dtype).unwrap(), p, true, 4).unwrap()
    }

    #[test]
    fn default_tiles_are_valid_for_every_spec() {
        for d in SUPPORTED_HEAD_DIMS {
            for g in SUPPORTED_GROUPS {
                for p in SUPPORTED_PAGE_SIZES {
                    for dt in [DType::F16, DType::BF16, DType::F32] {
                        let s = spec(d, g, p, dt);
                        BoxScoreTile::default_for(&s).check(&s).unwrap();
                        SelectTopkTile::default_for(&s).check(&s).unwrap();
                        SoftmaxTopkTile::default_for(&s).check(&s).unwrap();
                    }
                }
            }
        }
    }

    #[test]
    fn bad_tiles_name_the_problem() {
        let s = spec(32, 1, 16, DType::F16);
        let e = |r: Result<(), SpecError>| r.unwrap_err().to_string();
        let mut b = BoxScoreTile::default_for(&s);
        b.pages_per_group = 0;
        assert!(e(b.check(&s)).contains("pages_per_group"));
        let mut t = SelectTopkTile::default_for(&s);
        t.threads = 128;
        assert!(e(t.check(&s)).contains("threads = 128"));
        let s64 = spec(64, 1, 16, DType::F16);
        let mut t = SoftmaxTopkTile::default_for(&s64);
        t.finish_threads = 96;
        assert!(e(t.check(&s64)).contains("multiple of head_dim"));
        let s8 = spec(128, 8, 16, DType::F16);
        let mut t = SoftmaxTopkTile::default_for(&s8);
        t.threads = 1024;
        assert!(e(t.check(&s8)).contains("shared memory"));
        // A bundle row's 2³¹ tokens a group times group 2 wraps to 0 in u32.
        let s2 = spec(32, 2, 16, DType::F16);
        let mut t = SoftmaxTopkTile::default_for(&s2);
        t.tokens_per_group = 1 << 31;
        assert!(e(t.check(&s2)).contains("tokens_per_group × group = 4294967296"));
    }

    #[test]
    fn names_and_signatures() {
        let s = spec(32, 2, 16, DType::F16);
        let b = BoxScoreTile::default_for(&s);
        assert_eq!(
            page_score_box_entry(&s, &b),
            "page_score_box__a1p5_d32_g2_f16q_f16kv_f32o_p16_alibi__t256_r2"
        );
        assert_eq!(page_score_box_signature(&s).len(), 7);
        let mut nb = s;
        nb.alibi = false;
        assert_eq!(page_score_box_signature(&nb).len(), 6);
        let t = SoftmaxTopkTile::default_for(&s);
        let (a, f) = softmax_topk_entry_names(&s, &t);
        assert!(
            a.starts_with("decode_softmax_topk_score__") && f.starts_with("decode_softmax_topk_finish__")
        );
        assert!(select_topk_entry(&s, &SelectTopkTile::default_for(&s)).starts_with("select_topk__"));
    }

    #[test]
    fn plan_covers_the_largest_selection() {
        let s = spec(32, 1, 16, DType::F16);
        let t = SoftmaxTopkTile::default_for(&s);
        for (max_pages, budget, batch, heads) in [
            (1u32, 5i32, 1u32, 1u32),
            (65_536, 16_384, 8, 24),
            (65_536, -3, 8, 24),
            (300, 1_000_000, 2, 3),
        ] {
            let shape = PagedShape {
                batch,
                kv_heads: heads,
                num_pages: max_pages * batch,
                max_pages,
            };
            let p = softmax_topk_plan(&s, &t, &shape, budget, 132).unwrap();
            let pages = (budget.max(0) as u64).min(max_pages as u64 - 1) + 1;
            let tokens = pages * 16;
            assert!(p.splits as u64 * p.split_len as u64 >= tokens, "{p:?}");
            assert!((p.splits as u64 - 1) * (p.split_len as u64) < tokens, "{p:?}");
            assert_eq!(p.split_len, p.chunks_per_split * t.chunk_len());
            let ws = softmax_topk_workspace(&s, &shape, &p);
            assert_eq!(ws.acc_elems, ws.ml_elems / 2 * 32);
        }
        let zero = PagedShape {
            batch: 1,
            kv_heads: 1,
            num_pages: 1,
            max_pages: 0,
        };
        assert!(softmax_topk_plan(&s, &t, &zero, 1, 132).is_err());
    }

    #[test]
    fn bounds_blocks_take_several_heads_and_cover_every_page() {
        // (d, group, kv heads) → heads a block: a power of two dividing the KV heads, ≤ 8,
        // and at most a warp's lane groups (2, 4, 8 and 16 lanes a page here).
        for (d, g, kv, want) in [
            (32, 1, 24, 8),
            (32, 1, 12, 4),
            (32, 1, 3, 1),
            (32, 1, 1, 1),
            (32, 4, 8, 8),
            (64, 2, 16, 4),
            (128, 4, 8, 2),
        ] {
            let s = spec(d, g, 16, DType::F16);
            let t = BoxScoreTile::default_for(&s);
            for max_pages in [1u32, 2, 129, 65_537] {
                let shape = PagedShape {
                    batch: 2,
                    kv_heads: kv,
                    num_pages: 10,
                    max_pages,
                };
                let h = page_bounds_heads(&s, &shape);
                assert_eq!(h, want, "d {d} g {g} kv {kv}");
                assert!(h * page_bounds_lanes(&s) <= 32);
                let geo = page_bounds_geometry(&s, &t, &shape);
                assert_eq!(geo.grid, [kv / h, geo.grid[1], 2]);
                let per_head = (t.bounds_pages_per_block(&s) / h) as u64;
                assert!(page_pass_blocks(&geo) as u64 * per_head >= (max_pages - 1) as u64);
                assert!(
                    page_pass_blocks(&geo) == 1
                        || (page_pass_blocks(&geo) as u64 - 1) * per_head < (max_pages - 1) as u64
                );
            }
        }
    }

    #[test]
    fn score_grid_covers_every_scored_page() {
        for d in SUPPORTED_HEAD_DIMS {
            let s = spec(d, 1, 16, DType::BF16);
            let t = BoxScoreTile::default_for(&s);
            for max_pages in [1u32, 2, 129, 65_537] {
                let shape = PagedShape {
                    batch: 2,
                    kv_heads: 3,
                    num_pages: 10,
                    max_pages,
                };
                let g = page_score_box_geometry(&s, &t, &shape);
                assert!(page_pass_blocks(&g) as u64 * t.pages_per_block(&s) as u64 >= (max_pages - 1) as u64);
                assert_eq!(g.grid[2], 2);
                assert_eq!(g.grid[0] * g.grid[1], 3 * page_pass_blocks(&g));
            }
        }
    }
}
