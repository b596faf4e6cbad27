//! Top-k page selection and the softmax top-k (Quest) decode over the paged cache. The
//! contract (signatures, tiles, plan, geometry) is `entkv_abi::topk`; the cache and selection
//! formats are `entkv_abi::paged`.
//!
//! - [`score`]: `page_score_box`, the box upper bound of every scored page (module
//!   `page_score`).
//! - [`mod@select`]: `select_topk`, radix select of the best pages (module `select_topk`).
//! - [`softmax`]: `decode_softmax_topk_{score,finish}`, split-K softmax attention over the
//!   selected pages (module `decode_softmax_topk`).
//! - [`mod@reference`]: float64 oracles of all three.
//! - [`mod@checks`]: the [`crate::suite::KernelCheck`]s, whole pipelines as one `Program`.

pub mod checks;
pub mod reference;
pub mod score;
pub mod select;
pub mod softmax;

pub use checks::checks;

use crate::{KernelGenError, KernelModule};
use entkv_abi::{BoxScoreTile, PagedSpec, SelectTopkTile, SoftmaxTopkTile};
use entkv_dsl::{select, Axis, Buf, Expr, IntoExpr, KernelBuilder, Scalar, Var};

/// The three modules of the top-k path with default tiles. The lead merges `page_score` with
/// the Gaussian scorer's kernels of the same module.
pub fn modules(spec: &PagedSpec) -> Result<Vec<KernelModule>, KernelGenError> {
    modules_with(
        spec,
        &BoxScoreTile::default_for(spec),
        &SelectTopkTile::default_for(spec),
        &SoftmaxTopkTile::default_for(spec),
    )
}

/// The three modules for explicit tiles (the autotuner's entry point).
pub fn modules_with(
    spec: &PagedSpec,
    box_tile: &BoxScoreTile,
    select_tile: &SelectTopkTile,
    softmax_tile: &SoftmaxTopkTile,
) -> Result<Vec<KernelModule>, KernelGenError> {
    Ok(vec![
        KernelModule {
            name: "page_score",
            kernels: vec![
                score::box_kernel(spec, box_tile)?,
                score::page_bounds_kernel(spec, box_tile)?,
            ],
        },
        KernelModule {
            name: "select_topk",
            kernels: vec![
                select::select_kernel(spec, select_tile)?,
                crate::prune::prune_tau_kernel(spec, select_tile)?,
                crate::prune::prune_mark_kernel(spec, select_tile)?,
                crate::prune::select_pruned_kernel(spec, select_tile)?,
            ],
        },
        KernelModule {
            name: "decode_softmax_topk",
            kernels: vec![
                softmax::score_kernel(spec, softmax_tile)?,
                softmax::finish_kernel(spec, softmax_tile)?,
            ],
        },
    ])
}

/// Append one sweep's kept pages to a selection row in page order: `keeps` holds this
/// thread's (page, kept) pairs, consecutive pages in thread order; a block scan of the kept
/// counts places them after the `written` pages of earlier sweeps, and `written` grows by the
/// sweep's total. `scan` is the block scan's shared scratch.
pub(crate) fn append_kept(
    k: &mut KernelBuilder,
    keeps: &[(Var, Var)],
    scan: Buf,
    sel_pages: Buf,
    row: Var,
    written: Var,
) {
    let count = keeps.iter().fold(entkv_dsl::i32c(0), |acc, (_, kept)| {
        acc + entkv_dsl::select(*kept, 1i32, 0i32)
    });
    let (excl, total) = k.block_exclusive_scan(count, scan);
    let pos = k.let_("pos", written + excl);
    for (page, kept) in keeps {
        k.if_(*kept, |k| {
            k.store(sel_pages, row + pos.i64(), *page);
            k.assign(pos, pos + 1i32);
        });
    }
    k.assign(written, written + total);
}

/// Load one sweep of a row's per-page values (all loads first, so they are in flight together):
/// item `r` of this thread is page `base + offset(r)`; pages past `n` are invalid and load page
/// 0's value (sweeps only run when `n > 0`) instead. Returns (page, valid, value) per item.
pub(crate) fn load_items(
    k: &mut KernelBuilder,
    values: Buf,
    row: Var,
    base: Expr,
    n: Var,
    items: u32,
    offset: impl Fn(u32) -> Expr,
) -> Vec<(Var, Var, Var)> {
    let base = k.let_("base_i", base);
    let items: Vec<(Var, Var)> = (0..items)
        .map(|r| {
            let j = k.let_("j", base + offset(r));
            let valid = k.let_("valid", j.lt(n));
            (j, valid)
        })
        .collect();
    items
        .into_iter()
        .map(|(j, valid)| {
            let s = k.let_("score", values.at(row + select(valid, j, 0i32).i64()));
            (j, valid, s)
        })
        .collect()
}

/// `n` consecutive elements of `buf` from `index` (a multiple of the vector length) as 16-byte
/// (or shorter, when `n` is smaller) vector loads.
pub(crate) fn load_run(k: &mut KernelBuilder, name: &str, buf: Buf, index: Expr, n: u32) -> Vec<Var> {
    let vec = n.min(16 / buf.elem.size_bytes());
    let index = k.let_("run_at", index);
    let mut out = Vec::with_capacity(n as usize);
    for c in 0..n / vec {
        out.extend(k.load_vec(name, buf, index + (c * vec) as i64, vec));
    }
    out
}

/// One lane's share of a `d`-wide row that `lanes` lanes split: `vec`-element (16-byte K/V)
/// vectors interleaved across the lanes — vector `c` of lane `s` holds elements
/// `(c·lanes + s)·vec ..` — so each load instruction of a row's lanes reads one contiguous
/// `lanes·16`-byte segment (full sectors) rather than `lanes` scattered pieces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LaneSlice {
    pub lanes: u32,
    /// Elements per lane.
    pub dims: u32,
    /// Elements per vector.
    pub vec: u32,
}

impl LaneSlice {
    pub fn new(d: u32, lanes: u32, kv_elem_bytes: u32) -> LaneSlice {
        let dims = d / lanes;
        LaneSlice {
            lanes,
            dims,
            vec: dims.min(16 / kv_elem_bytes),
        }
    }

    /// Offset within the row of this lane's element `i` (`sub`: the lane's index in its group).
    pub fn offset(&self, sub: Var, i: u32) -> Expr {
        sub * self.vec + (i / self.vec * self.lanes * self.vec + i % self.vec)
    }

    /// This lane's elements of the row starting at element `row` (a multiple of the vector
    /// length), as vector loads (split further when `buf`'s elements are wider than K's).
    pub fn load(&self, k: &mut KernelBuilder, name: &str, buf: Buf, row: Expr, sub: Var) -> Vec<Var> {
        let at = k.let_("slice_at", row + i64_of(sub * self.vec));
        let mut out = Vec::with_capacity(self.dims as usize);
        for c in 0..self.dims / self.vec {
            out.extend(load_run(
                k,
                name,
                buf,
                at + (c * self.lanes * self.vec) as i64,
                self.vec,
            ));
        }
        out
    }
}

/// The (sequence, KV head) row a selection kernel writes: grid (kv heads, batch), one row of
/// `sel_pages` per CTA (format of `entkv_abi::paged`).
pub(crate) struct SelectionRow {
    pub b: Var,
    pub kvh: Var,
    pub kv_heads: Var,
    pub tid: Var,
    /// Pages of the sequence (the last one still filling).
    pub pages: Var,
    /// Full pages: those with metadata, every page but the last.
    pub full: Var,
    /// First element of the row in `sel_pages` (i64).
    pub row: Var,
}

impl SelectionRow {
    pub fn new(k: &mut KernelBuilder, spec: &PagedSpec, seq_lens: Buf, max_pages: Expr) -> SelectionRow {
        let kvh = k.let_("kvh", k.block_idx(Axis::X));
        let b = k.let_("b", k.block_idx(Axis::Y));
        let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::X));
        let tid = k.let_("tid", k.thread_idx());
        let (pages, full) = row_pages(k, spec, seq_lens, b);
        let row = k.let_("row", (b.i64() * kv_heads.i64() + kvh.i64()) * max_pages.i64());
        SelectionRow {
            b,
            kvh,
            kv_heads,
            tid,
            pages,
            full,
            row,
        }
    }

    /// Close the row after `chosen` pages: the last page, always attended, goes last, and the
    /// count includes it.
    pub fn close(&self, k: &mut KernelBuilder, sel_pages: Buf, sel_count: Buf, chosen: Var) {
        let row_id = self.b.i64() * self.kv_heads.i64() + self.kvh.i64();
        close_selection(
            k,
            self.tid,
            (sel_pages, sel_count),
            self.row,
            row_id,
            self.pages,
            chosen,
        );
    }
}

/// Pages of sequence `b` (the last one still filling) and its full pages (those with
/// metadata: every page but the last), as i32.
pub(crate) fn row_pages(k: &mut KernelBuilder, spec: &PagedSpec, seq_lens: Buf, b: Var) -> (Var, Var) {
    let len = k.let_("len", seq_lens.at(b));
    let pages = pages_of(k, spec, len);
    let full = k.let_("n", (pages - 1i32).max(0i32));
    (pages, full)
}

/// Close selection row `row_id` (its first element `row`) after `chosen` pages: thread 0 puts
/// the last page, always attended, last, and a count that includes it.
pub(crate) fn close_selection(
    k: &mut KernelBuilder,
    tid: Var,
    (sel_pages, sel_count): (Buf, Buf),
    row: Var,
    row_id: impl IntoExpr,
    pages: Var,
    chosen: Var,
) {
    let row_id = row_id.into_expr(None);
    k.if_(tid.eq_(0u32), |k| {
        k.store(sel_pages, row + chosen.i64(), pages - 1i32);
        k.store(sel_count, row_id, chosen + 1i32);
    });
}

/// Pages of a sequence of `len` tokens (`len ≥ 1` by the batch contract), as i32.
pub(crate) fn pages_of(k: &mut KernelBuilder, spec: &PagedSpec, len: Var) -> Var {
    let p = spec.page_size;
    // P is a power of two and len ≥ 1, so the shift is the ceiling division.
    k.let_("pages", (len + (p as i32 - 1)) >> (p.trailing_zeros() as i32))
}

/// Tokens of a selection of `count` pages (the last one holding the sequence's tail): the
/// length of the compacted token list both softmax passes split.
pub(crate) fn selected_tokens(k: &mut KernelBuilder, spec: &PagedSpec, len: Var, count: Expr) -> Var {
    let p = spec.page_size as i32;
    let pages = pages_of(k, spec, len);
    let last_len = k.let_("last_len", len - (pages - 1i32) * p);
    k.let_("sel_tokens", (count - 1i32) * p + last_len)
}

/// Widen an index to i64: pool, metadata and workspace offsets can pass 2³¹ elements.
pub(crate) fn i64_of(e: impl IntoExpr) -> Expr {
    e.into_expr(None).cast(Scalar::I64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_abi::{
        page_score_box_signature, select_topk_signature, softmax_topk_finish_signature,
        softmax_topk_score_signature, ArgKind, ArgSpec, DType, DecodeSpec, Elem,
    };
    use entkv_dsl::ir::ParamKind;
    use entkv_dsl::{Access, Kernel};

    fn elem_of(s: Scalar) -> Elem {
        match s {
            Scalar::F16 => Elem::F16,
            Scalar::BF16 => Elem::BF16,
            Scalar::F32 => Elem::F32,
            Scalar::I32 => Elem::I32,
            Scalar::U32 => Elem::U32,
            Scalar::I64 => Elem::I64,
            other => panic!("no boundary element type for {other}"),
        }
    }

    /// The kernel's parameters, as the abi describes them.
    fn params(k: &Kernel) -> Vec<(String, ArgKind)> {
        k.params
            .iter()
            .map(|p| {
                let kind = match &p.kind {
                    ParamKind::Buffer { elem, access } => ArgKind::Buffer {
                        elem: elem_of(*elem),
                        writes: *access != Access::Read,
                    },
                    ParamKind::Scalar(Scalar::I32) => ArgKind::I32,
                    ParamKind::Scalar(Scalar::I64) => ArgKind::I64,
                    ParamKind::Scalar(Scalar::F32) => ArgKind::F32,
                    ParamKind::Scalar(other) => panic!("scalar parameter of type {other}"),
                };
                (p.name.clone(), kind)
            })
            .collect()
    }

    fn abi(sig: Vec<ArgSpec>) -> Vec<(String, ArgKind)> {
        sig.into_iter().map(|a| (a.name.to_string(), a.kind)).collect()
    }

    #[test]
    fn kernels_declare_the_abi_signatures_in_order() {
        for (g, dtype, alibi) in [(1, DType::F16, false), (3, DType::BF16, true)] {
            let spec = PagedSpec::new(DecodeSpec::new(2.0, 64, g, dtype).unwrap(), 32, alibi, 4).unwrap();
            let m = modules(&spec).unwrap();
            let names: Vec<&str> = m.iter().map(|m| m.name).collect();
            assert_eq!(names, ["page_score", "select_topk", "decode_softmax_topk"]);
            assert_eq!(params(&m[0].kernels[0]), abi(page_score_box_signature(&spec)));
            assert_eq!(params(&m[1].kernels[0]), abi(select_topk_signature(&spec)));
            assert_eq!(params(&m[2].kernels[0]), abi(softmax_topk_score_signature(&spec)));
            assert_eq!(
                params(&m[2].kernels[1]),
                abi(softmax_topk_finish_signature(&spec))
            );
        }
    }

    #[test]
    fn bad_tiles_are_typed_errors() {
        let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
        let mut t = SelectTopkTile::default_for(&spec);
        t.items_per_thread = 0;
        let e = modules_with(
            &spec,
            &BoxScoreTile::default_for(&spec),
            &t,
            &SoftmaxTopkTile::default_for(&spec),
        )
        .unwrap_err();
        assert!(matches!(e, KernelGenError::Spec(_)), "{e}");
    }
}
