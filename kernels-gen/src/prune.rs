//! `select_pruned`: the page pruning of the certified decode. Per (sequence, KV head), the pages
//! that may hold a support token of some query head of the group, plus the last page, in the
//! selection format of `entkv_abi::paged` (ascending, the last page last).
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

use crate::topk::{append_kept, load_items, SelectionRow};
use crate::KernelGenError;
use entkv_abi::{select_pruned_entry, PagedSpec, SelectTopkTile};
use entkv_dsl::*;

/// `P^{−(α−1)}`: how far below the smallest score of `P` tokens their own threshold lies.
pub fn page_threshold_gap(spec: &PagedSpec) -> f64 {
    (spec.page_size as f64).powf(-(spec.decode.alpha.value() - 1.0))
}

/// `select_pruned`: grid (kv heads, batch). Parameters: `page_ub, page_lb_max, lb_slots,
/// seq_lens, sel_pages, sel_count, max_pages`.
pub fn select_pruned_kernel(spec: &PagedSpec, tile: &SelectTopkTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let threads = tile.threads;
    let items = tile.items_per_thread;
    let sweep = (threads * items) as i32;
    let mut k = KernelBuilder::new(select_pruned_entry(spec, tile), threads);
    let ub = k.buffer("page_ub", Scalar::F32, Access::Read);
    let lb_max = k.buffer("page_lb_max", Scalar::F32, Access::Read);
    let lb_slots = k.scalar_param("lb_slots", Scalar::I32);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let sel_pages = k.buffer("sel_pages", Scalar::I32, Access::Write);
    let sel_count = k.buffer("sel_count", Scalar::I32, Access::Write);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let red = k.shared("red", Scalar::F32, threads / WARP);
    let scan = k.shared("scan", Scalar::I32, threads / WARP);

    let sel = SelectionRow::new(&mut k, spec, seq_lens, max_pages);
    // Full pages (every page but the last) have bounds.
    let (tid, n, row) = (sel.tid, sel.full, sel.row);

    // τ_low from the largest lower bound, the maximum of `page_bounds`' per-warp maxima (a
    // sequence of one page has none: −∞ keeps all).
    let slots = k.let_("lb_slots_v", lb_slots);
    let lb_row = k.let_(
        "lb_row",
        (sel.b.i64() * sel.kv_heads.i64() + sel.kvh.i64()) * slots.i64(),
    );
    let best = k.let_typed("best_lb", Scalar::F32, f64::NEG_INFINITY);
    k.for_("slot", tid.i32(), slots, threads as i32, |k, slot| {
        k.assign(best, best.max(lb_max.at(lb_row + slot.i64())));
    });
    let best = k.block_allreduce(Reduce::Max, best, red);
    let gap = page_threshold_gap(spec);
    let tau_low = k.let_("tau_low", best - gap - (best.abs() + gap) * (2.0f64).powi(-20));

    // Order-preserving compaction: thread t tests `items` consecutive pages of each sweep.
    let written = k.let_typed("written", Scalar::I32, 0);
    k.for_("base", 0i32, n, sweep, |k, base| {
        let loaded = load_items(k, ub, row, base, n, items, |r| (tid * items).i32() + r as i32);
        let keeps: Vec<(Var, Var)> = loaded
            .into_iter()
            .map(|(j, valid, u)| (j, k.let_("keep", valid.and(u.le(tau_low).not()))))
            .collect();
        append_kept(k, &keeps, scan, sel_pages, row, written);
    });
    // The last page (no bounds: it is still filling) is always kept, last.
    sel.close(&mut k, sel_pages, sel_count, written);
    Ok(k.finish()?)
}
