//! The page pruning of the certified decode (`prune_tau`, `prune_mark`, `select_pruned`). Per
//! (sequence, KV head), the pages that may hold a support token of some query head of the
//! group, plus the last page, in the selection format of `entkv_abi::paged` (ascending, the last
//! page last).
//!
//! `page_bounds` (`crate::topk::score`) gives every full page `p` bounds `lb_p ≤ z ≤ ub_p` on
//! the scores `z = (α − 1)·score` of its `P` tokens, for every head of the group. Two facts
//! (`crate::certified`'s, at page granularity):
//! - the entmax threshold is monotone in every score, and `P` tokens scoring at least `L` alone
//!   have the threshold `L − P^{−(α−1)}` (`P·(L − τ)^{1/(α−1)} = 1`), so
//!   `τ ≥ τ_low = max_p lb_p − P^{−(α−1)}`;
//! - a page with `ub_p ≤ τ_low` has every `z ≤ τ`, so every weight 0: it can be dropped.
//!
//! The comparison is written `!(ub ≤ τ_low)`, so a NaN bound keeps its page, and `τ_low` is
//! rounded down by `2⁻²⁰` of its terms' magnitudes (its two f32 operations). On keys whose pages
//! cluster (`peaked`: a few pages aligned with the query) this keeps the aligned pages alone;
//! on iid keys page boxes are wide and every page stays.

use crate::certified::selected_walk_takes;
use crate::topk::{close_selection, load_items, row_pages};
use crate::KernelGenError;
use entkv_abi::{
    prune_mark_entry, prune_tau_entry, select_pruned_entry, PagedSpec, SelectTopkTile, PRUNE_PAGES_PER_LANE,
};
use entkv_dsl::*;

/// `P^{−(α−1)}`: how far below the smallest score of `P` tokens their own threshold lies.
pub fn page_threshold_gap(spec: &PagedSpec) -> f64 {
    (spec.page_size as f64).powf(-(spec.decode.alpha.value() - 1.0))
}

/// How far `τ_low` is rounded down, relative to its terms' magnitudes (its two f32 operations).
const TAU_LOW_SLACK: f64 = 1.0 / (1u64 << 20) as f64;

/// The kernels' `τ_low` recomputed on the host from the row's largest lower bound `best`, in f32
/// and unfused, for the checks.
pub fn host_tau_low(spec: &PagedSpec, best: f32) -> f32 {
    let gap = page_threshold_gap(spec) as f32;
    (best - gap) - (best.abs() + gap) * TAU_LOW_SLACK as f32
}

/// Whether the selection must keep a page whose upper bound is `ub` (`!(ub ≤ τ_low)`: NaN
/// keeps), or `None` within 10⁻⁶ of `τ_low`, where the GPU may fuse τ_low's two operations and
/// either verdict is right.
pub fn host_keeps(ub: f32, tau_low: f32) -> Option<bool> {
    let near = (ub - tau_low).abs() <= 1e-6 * tau_low.abs().max(1.0);
    (!near).then_some(ub > tau_low || ub.is_nan() || tau_low.is_nan())
}

/// A pruned row's selection as the checks found it.
pub struct PrunedRow {
    /// Full pages the selection counts as kept (`sel_count − 1`).
    pub kept_full: usize,
    /// Per full page: listed (rows the selected walk takes), or for the rows the full walk
    /// takes, whose list is not written, whether `τ_low` keeps it (or cannot tell).
    pub keeps: Vec<bool>,
}

/// Check one row's selection (`count` = its `sel_count`, `list` its `sel_pages` row) against
/// its full pages' upper bounds `ub` and `τ_low` recomputed on the host: a row the selected
/// walk takes (`entkv_abi::pipeline::selected_walk_takes`) lists, ascending, exactly the full
/// pages whose bound is not `≤ τ_low` and then the last page; any other row has the count of
/// those (bounds within 10⁻⁶ of `τ_low` may go either way: [`host_keeps`]) and, where
/// `unwritten` gives the poison its list started with, an untouched list before the last page.
pub fn check_pruned_row(
    pages: usize,
    count: f64,
    list: &[f64],
    ub: &[f32],
    tau_low: f32,
    unwritten: Option<f64>,
) -> Result<PrunedRow, String> {
    if !(1.0..=pages as f64).contains(&count) {
        return Err(format!("count {count} of {pages} pages"));
    }
    let n = count as usize;
    let verdicts: Vec<Option<bool>> = ub[..pages - 1].iter().map(|&u| host_keeps(u, tau_low)).collect();
    if !entkv_abi::pipeline::selected_walk_takes(n as u64, pages as u64) {
        let sure = verdicts.iter().filter(|v| **v == Some(true)).count();
        let near = verdicts.iter().filter(|v| v.is_none()).count();
        if !(sure..=sure + near).contains(&(n - 1)) {
            return Err(format!(
                "count {n}, but {sure} (+ {near} undecided) full pages clear τ_low {tau_low}"
            ));
        }
        if let Some(poison) = unwritten {
            if list[..n - 1].iter().any(|&v| v != poison) {
                return Err("the list of a row the full walk takes was written".into());
            }
        }
        return Ok(PrunedRow {
            kept_full: n - 1,
            keeps: verdicts.iter().map(|v| *v != Some(false)).collect(),
        });
    }
    let list = crate::check::page_ids(&list[..n]);
    entkv_abi::check_selection_row(&list, pages).map_err(|e| e.to_string())?;
    // Ascending to the last page: every earlier entry is a full page.
    let mut keeps = vec![false; pages - 1];
    for &j in &list[..n - 1] {
        keeps[j as usize] = true;
    }
    for (j, (verdict, &listed)) in verdicts.iter().zip(&keeps).enumerate() {
        if verdict.is_some_and(|keep| keep != listed) {
            return Err(format!(
                "page {j} (ub {}) {} against τ_low {tau_low}",
                ub[j],
                if listed { "kept" } else { "dropped" }
            ));
        }
    }
    Ok(PrunedRow {
        kept_full: n - 1,
        keeps,
    })
}

/// One CTA's slice of a (sequence, KV head) row: grid (slices, kv heads, batch). Lane `l` of
/// warp `w` holds page `start + (w·items + r)·32 + l` for item `r`, so each item of a warp is
/// one 32-page word of the bitmask and one coalesced 128-byte access.
struct Slice {
    slice: Var,
    tid: Var,
    lane: Var,
    warp: Var,
    /// Pages of the sequence (the last one still filling).
    pages: Var,
    /// Full pages (those with bounds): every page but the last.
    full: Var,
    /// `b · kv_heads + kvh` (i64): the row's index among rows.
    row_id: Var,
    /// First page of the slice.
    start: Var,
    items: u32,
}

impl Slice {
    fn new(k: &mut KernelBuilder, spec: &PagedSpec, tile: &SelectTopkTile, seq_lens: Buf) -> Slice {
        let slice = k.let_("slice", k.block_idx(Axis::X).i32());
        let kvh = k.let_("kvh", k.block_idx(Axis::Y));
        let b = k.let_("b", k.block_idx(Axis::Z));
        let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
        let tid = k.let_("tid", k.thread_idx());
        let lane = k.let_("lane", k.lane());
        let warp = k.let_("warp", k.warp());
        let (pages, full) = row_pages(k, spec, seq_lens, b);
        let row_id = k.let_("row_id", b.i64() * kv_heads.i64() + kvh.i64());
        let start = k.let_("start", slice * tile.slice_pages() as i32);
        Slice {
            slice,
            tid,
            lane,
            warp,
            pages,
            full,
            row_id,
            start,
            items: PRUNE_PAGES_PER_LANE,
        }
    }

    /// Close the row after `kept` full pages: the last page (no bounds: it is still filling)
    /// is always kept, last, and the count includes it.
    fn close(&self, k: &mut KernelBuilder, sel_pages: Buf, sel_count: Buf, row: Var, kept: Var) {
        close_selection(
            k,
            self.tid,
            (sel_pages, sel_count),
            row,
            self.row_id,
            self.pages,
            kept,
        );
    }

    /// The bitmask word lane `r` of this warp stores or loads (item `r`'s, for `r < items`):
    /// its element index in `prune_mask`, and whether the lane has one (an item, and a word
    /// that starts before the row's last full page).
    fn lane_word(&self, k: &mut KernelBuilder, max_pages: Var) -> (Var, Var) {
        let words_row = k.let_("words_row", (max_pages + 31i32) >> 5i32);
        let w = k.let_("w", self.word(0) + self.lane.i32());
        let has = k.let_(
            "has_word",
            self.lane.lt(self.items).and((w << 5i32).lt(self.full)),
        );
        (k.let_("word_at", self.row_id * words_row.i64() + w.i64()), has)
    }

    /// Index, within the row, of this warp's bitmask word for item `r`.
    fn word(&self, r: u32) -> Expr {
        (self.start >> 5i32) + (self.warp.i32() * self.items as i32 + r as i32)
    }
}

/// Slot loads of the row's lower-bound maxima each thread issues together (a 1M row has
/// thousands of slots).
const SLOT_LOADS: u32 = 4;

/// `τ_low` of a (sequence, KV head) row: the largest lower bound (the maximum of `page_bounds`'
/// per-warp maxima; all −∞ for a sequence of one page, which keeps every page) less the gap,
/// rounded down. Every thread of the block must call it.
#[allow(clippy::too_many_arguments)]
fn row_tau_low(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    lb_max: Buf,
    lb_slots: Expr,
    row_id: Var,
    tid: Var,
    threads: u32,
    red: Buf,
) -> Var {
    let slots = k.let_("lb_slots_v", lb_slots);
    let lb_row = k.let_("lb_row", row_id * slots.i64());
    let best = k.let_typed("best_lb", Scalar::F32, f64::NEG_INFINITY);
    k.for_("slot0", 0i32, slots, (threads * SLOT_LOADS) as i32, |k, base| {
        let maxima = load_items(k, lb_max, lb_row, base, slots, SLOT_LOADS, |r| {
            (tid + r * threads).i32()
        });
        for (_, valid, v) in maxima {
            k.assign(best, select(valid, best.max(v), best));
        }
    });
    let best = k.block_allreduce(Reduce::Max, best, red);
    let gap = page_threshold_gap(spec);
    k.let_("tau_low", best - gap - (best.abs() + gap) * TAU_LOW_SLACK)
}

/// `prune_tau` (before a `prune_mark` of several slices, which would each read the row's
/// thousands of maxima otherwise): grid (kv heads, batch). Parameters: `page_lb_max, lb_slots,
/// prune_tau`; writes the row's `τ_low` to `prune_tau[b · kv_heads + kvh]`.
pub fn prune_tau_kernel(spec: &PagedSpec, tile: &SelectTopkTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let threads = tile.threads;
    let mut k = KernelBuilder::new(prune_tau_entry(spec, tile), threads);
    let lb_max = k.buffer("page_lb_max", Scalar::F32, Access::Read);
    let lb_slots = k.scalar_param("lb_slots", Scalar::I32);
    let tau = k.buffer("prune_tau", Scalar::F32, Access::Write);
    let red = k.shared("red", Scalar::F32, threads / WARP);
    let kvh = k.let_("kvh", k.block_idx(Axis::X));
    let b = k.let_("b", k.block_idx(Axis::Y));
    let row_id = k.let_("row_id", b.i64() * k.grid_dim(Axis::X).i64() + kvh.i64());
    let tid = k.let_("tid", k.thread_idx());
    let tau_low = row_tau_low(&mut k, spec, lb_max, lb_slots, row_id, tid, threads, red);
    k.if_(tid.eq_(0u32), |k| k.store(tau, row_id, tau_low));
    Ok(k.finish()?)
}

/// `prune_mark`: grid (slices, kv heads, batch). Parameters: `page_ub, page_lb_max, lb_slots,
/// prune_tau, seq_lens, prune_mask, prune_counts, sel_pages, sel_count, max_pages`.
/// - Several slices: reads the row's `τ_low` from `prune_tau`, sets bit `j % 32` of word
///   `j / 32` of the row's `prune_mask` for each kept full page `j` (words past the row's full
///   pages are not written) and writes the slice's kept count to
///   `prune_counts[row · slices + slice]`; `select_pruned` compacts.
/// - One slice (the grid's x is 1): the CTA has the whole row, so it finds `τ_low` and writes
///   the selection itself (as `select_pruned` does: no list for a row the full walk takes);
///   the plan launches neither `prune_tau` nor `select_pruned`.
pub fn prune_mark_kernel(spec: &PagedSpec, tile: &SelectTopkTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let threads = tile.threads;
    let mut k = KernelBuilder::new(prune_mark_entry(spec, tile), threads);
    let ub = k.buffer("page_ub", Scalar::F32, Access::Read);
    let lb_max = k.buffer("page_lb_max", Scalar::F32, Access::Read);
    let lb_slots = k.scalar_param("lb_slots", Scalar::I32);
    let tau = k.buffer("prune_tau", Scalar::F32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let mask = k.buffer("prune_mask", Scalar::U32, Access::Write);
    let counts = k.buffer("prune_counts", Scalar::I32, Access::Write);
    let sel_pages = k.buffer("sel_pages", Scalar::I32, Access::Write);
    let sel_count = k.buffer("sel_count", Scalar::I32, Access::Write);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let max_pages = k.let_("max_pages_v", max_pages);
    let red = k.shared("red", Scalar::F32, threads / WARP);
    let scratch = k.shared("scratch", Scalar::I32, threads / WARP);

    let s = Slice::new(&mut k, spec, tile, seq_lens);
    let slices = k.let_("slices", k.grid_dim(Axis::X));
    let whole = k.let_("whole_row", slices.eq_(1u32));
    let row = k.let_("row", s.row_id * max_pages.i64());
    let kept = k.let_typed("kept", Scalar::I32, 0i32);
    // Whole CTAs past the row's full pages have nothing to mark (the condition is uniform).
    k.if_(s.start.lt(s.full), |k| {
        // The bounds' loads first: they do not wait for τ_low.
        let loaded = load_items(k, ub, row, i32c(0), s.full, s.items, |r| {
            (s.word(r) << 5i32) + s.lane.i32()
        });

        let tau_low = k.let_typed("tau_low_v", Scalar::F32, 0.0);
        k.if_else(
            whole,
            |k| {
                let t = row_tau_low(k, spec, lb_max, lb_slots, s.row_id, s.tid, threads, red);
                k.assign(tau_low, t);
            },
            |k| k.assign(tau_low, tau.at(s.row_id)),
        );

        // Lane r of each warp ends with item r's word.
        let mine = k.let_typed("my_word", Scalar::U32, 0u32);
        for (r, (_, valid, u)) in loaded.into_iter().enumerate() {
            // `!(u ≤ τ_low)`: a NaN bound keeps its page.
            let word = k.ballot(valid.and(u.le(tau_low).not()));
            k.assign(mine, select(s.lane.eq_(r as u32), word, mine));
        }
        k.if_else(
            whole,
            |k| {
                let pages = s.pages;
                let n = write_words(k, &s, mine, i32c(0), sel_pages, row, scratch, &|total| {
                    selected_walk_takes(total + 1i32, pages.e())
                });
                k.assign(kept, n);
            },
            |k| {
                // One coalesced store a warp.
                let (at, has) = s.lane_word(k, max_pages);
                k.if_(has, |k| k.store(mask, at, mine));
                let n = k.block_allreduce(Reduce::Sum, mine.e().popc().i32(), scratch);
                k.if_(s.tid.eq_(0u32), |k| {
                    k.store(counts, s.row_id * slices.i64() + s.slice.i64(), n);
                });
            },
        );
    });
    k.if_(whole, |k| s.close(k, sel_pages, sel_count, row, kept));
    Ok(k.finish()?)
}

/// `select_pruned` (after a `prune_mark` of several slices): grid (slices, kv heads, batch).
/// Parameters: `prune_mask, prune_counts, seq_lens, sel_pages, sel_count, max_pages`. Each
/// slice writes its marked pages in order at the sum of the earlier slices' counts; slice 0
/// closes the row. A row that kept more than the selected walk takes
/// (`entkv_abi::pipeline::SELECTED_WALK_SHARE`) gets its count and last page only: the full
/// walk takes it and reads no list.
pub fn select_pruned_kernel(spec: &PagedSpec, tile: &SelectTopkTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let threads = tile.threads;
    let mut k = KernelBuilder::new(select_pruned_entry(spec, tile), threads);
    let mask = k.buffer("prune_mask", Scalar::U32, Access::Read);
    let counts = k.buffer("prune_counts", Scalar::I32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let sel_pages = k.buffer("sel_pages", Scalar::I32, Access::Write);
    let sel_count = k.buffer("sel_count", Scalar::I32, Access::Write);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let max_pages = k.let_("max_pages_v", max_pages);
    let scratch = k.shared("scratch", Scalar::I32, 2 * (threads / WARP));

    let s = Slice::new(&mut k, spec, tile, seq_lens);
    let slices = k.let_("slices", k.grid_dim(Axis::X));
    let first = k.let_("first", s.slice.eq_(0i32));
    let row = k.let_("row", s.row_id * max_pages.i64());
    k.if_(first.or(s.start.lt(s.full)), |k| {
        // Lane r of each warp loads item r's word (issued before the counts' loads).
        let (at, has) = s.lane_word(k, max_pages);
        let word = k.let_typed("word", Scalar::U32, 0u32);
        k.if_(has, |k| k.assign(word, mask.at(at)));
        // Kept pages of the earlier slices and of the whole row (only the slices `prune_mark`
        // wrote: those starting before the row's last full page).
        let sp = tile.slice_pages() as i32;
        let marked = k.let_("marked", (s.full + (sp - 1)) / sp);
        let before = k.let_typed("before", Scalar::I32, 0i32);
        let all = k.let_typed("all", Scalar::I32, 0i32);
        k.for_("sl", s.tid.i32(), marked, threads as i32, |k, sl| {
            let sl = k.let_("sl_v", sl);
            let c = k.let_("c", counts.at(s.row_id * slices.i64() + sl.i64()));
            k.assign(all, all + c);
            k.assign(before, before + select(sl.lt(s.slice), c, 0i32));
        });
        let sums = k.block_allreduce_many(&[(Reduce::Sum, before.e()), (Reduce::Sum, all.e())], scratch);
        let (before, all) = (sums[0], sums[1]);
        // A row the full walk takes needs its count only (`entkv_abi::pipeline::
        // SELECTED_WALK_SHARE`): at 1M on iid keys that skips every row's 256 KB of list.
        let takes = k.let_("sel_walk_takes", selected_walk_takes(all + 1i32, s.pages.e()));
        k.if_(s.start.lt(s.full), |k| {
            write_words(k, &s, word, before.e(), sel_pages, row, scratch, &|_| takes.e());
        });
        k.if_(first, |k| s.close(k, sel_pages, sel_count, row, all));
    });
    Ok(k.finish()?)
}

/// Write the slice's marked pages to the selection row from position `before` on, in page
/// order, where `writes(slice total)` holds (block-uniform); lane r of each warp holds the word
/// of its item r (lanes past the items hold 0). A block scan of the words' counts in thread
/// order is their prefix in page order; then each word's kept lanes store with one coalesced
/// instruction. Returns the slice's count.
#[allow(clippy::too_many_arguments)]
fn write_words(
    k: &mut KernelBuilder,
    s: &Slice,
    word: Var,
    before: Expr,
    sel_pages: Buf,
    row: Var,
    scratch: Buf,
    writes: &dyn Fn(Var) -> Expr,
) -> Var {
    let (excl, total) = k.block_exclusive_scan(word.e().popc().i32(), scratch);
    let at = k.let_("at", before + excl);
    let below = k.let_("below", (u32c(1) << s.lane.e()) - 1u32);
    k.if_(writes(total), |k| {
        for r in 0..s.items {
            let wr = k.shuffle(ShuffleMode::Idx, word, r);
            let ar = k.shuffle(ShuffleMode::Idx, at, r);
            k.if_(((wr >> s.lane.e()) & 1u32).ne_(0u32), |k| {
                let pos = k.let_("pos", ar + (wr & below).popc().i32());
                k.store(sel_pages, row + pos.i64(), (s.word(r) << 5i32) + s.lane.i32());
            });
        }
    });
    total
}
