//! Warp and block collectives built from the IR's primitives (shuffles, shared memory,
//! barriers). They are ordinary builder code, so the interpreter and the backend get them for
//! free and the sanitizer checks them like any kernel code.
//!
//! Reductions combine values in a fixed order (butterfly within a warp, then warps in index
//! order), so results are deterministic run to run.

use crate::builder::{KernelBuilder, WARP};
use crate::expr::*;
use crate::ir::*;

/// An associative, commutative combining operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    Sum,
    Max,
    Min,
}

impl Reduce {
    pub fn combine(self, a: impl IntoExpr, b: impl IntoExpr) -> Expr {
        match self {
            Reduce::Sum => binary(BinOp::Add, a, b),
            Reduce::Max => binary(BinOp::Max, a, b),
            Reduce::Min => binary(BinOp::Min, a, b),
        }
    }
    /// The neutral element for `ty`.
    pub fn identity(self, ty: Scalar) -> Expr {
        match (self, ty) {
            (Reduce::Sum, t) => lit(t, 0.0),
            (Reduce::Max, Scalar::F32) => f32c(f64::NEG_INFINITY),
            (Reduce::Min, Scalar::F32) => f32c(f64::INFINITY),
            (Reduce::Max, Scalar::I32) => i32c(i32::MIN as i64),
            (Reduce::Min, Scalar::I32) => i32c(i32::MAX as i64),
            (Reduce::Max, Scalar::U32) => u32c(0),
            (Reduce::Min, Scalar::U32) => u32c(u32::MAX as u64),
            (op, t) => panic!("no identity for {op:?} on {t}"),
        }
    }
}

impl KernelBuilder {
    /// Reduce a 32-bit value across the warp; every lane receives the result.
    pub fn warp_allreduce(&mut self, op: Reduce, value: impl IntoExpr) -> Var {
        self.warp_allreduce_many(&[(op, value.into_expr(None))]).remove(0)
    }

    /// Reduce several values across the warp at once (interleaved shuffles, more parallelism).
    pub fn warp_allreduce_many(&mut self, items: &[(Reduce, Expr)]) -> Vec<Var> {
        self.warp_allreduce_width(items, WARP)
    }

    /// Reduce within aligned groups of `width` lanes (a power of two ≤ 32); every lane of a group
    /// receives its group's result.
    pub fn warp_allreduce_width(&mut self, items: &[(Reduce, Expr)], width: u32) -> Vec<Var> {
        assert!(width.is_power_of_two() && width <= WARP, "group width {width}");
        let offsets: Vec<u32> = (0..width.trailing_zeros()).rev().map(|b| 1 << b).collect();
        self.xor_reduce(items, &offsets, None)
    }

    /// Reduce across the lanes whose indices agree modulo `stride` (a power of two ≤ 32): lane
    /// `l` receives the reduction over lanes `l mod stride + k·stride`. `stride = 1` is
    /// [`Self::warp_allreduce_many`]; a runtime `stride_log` (see
    /// [`Self::warp_allreduce_strided_dyn`]) serves strides known at launch only.
    pub fn warp_allreduce_strided(&mut self, items: &[(Reduce, Expr)], stride: u32) -> Vec<Var> {
        assert!(stride.is_power_of_two() && stride <= WARP, "stride {stride}");
        let offsets = strided_offsets(stride);
        self.xor_reduce(items, &offsets, None)
    }

    /// [`Self::warp_allreduce_strided`] with the stride `1 << stride_log` a runtime value
    /// (`stride_log` a u32 expression below 6): every offset from `min_stride` up runs its
    /// shuffle, and its result counts only at offsets of at least the stride.
    pub fn warp_allreduce_strided_dyn(
        &mut self,
        items: &[(Reduce, Expr)],
        stride_log: Expr,
        min_stride: u32,
    ) -> Vec<Var> {
        assert!(
            min_stride.is_power_of_two() && min_stride <= WARP,
            "stride {min_stride}"
        );
        let stride = self.let_("red_stride", u32c(1) << stride_log.u32());
        let offsets = strided_offsets(min_stride);
        self.xor_reduce(items, &offsets, Some(stride))
    }

    /// The butterfly under the warp reductions: bind `items`, then at each of `offsets` combine
    /// every value with lane `lane ^ offset`'s — where `stride` is given, only at offsets of at
    /// least it.
    fn xor_reduce(&mut self, items: &[(Reduce, Expr)], offsets: &[u32], stride: Option<Var>) -> Vec<Var> {
        let acc: Vec<Var> = items.iter().map(|(_, e)| self.let_("red", e.clone())).collect();
        for &offset in offsets {
            let on = stride.map(|s| self.let_("red_on", s.le(offset)));
            let recv: Vec<Var> = acc
                .iter()
                .map(|a| self.shuffle(ShuffleMode::Xor, *a, u32c(offset as u64)))
                .collect();
            for ((a, r), (op, _)) in acc.iter().zip(&recv).zip(items) {
                let combined = op.combine(*a, *r);
                self.assign(
                    *a,
                    match on {
                        Some(on) => select(on, combined, *a),
                        None => combined,
                    },
                );
            }
        }
        acc
    }

    /// Reduce values across the whole block; every thread receives the results.
    ///
    /// `scratch` is a shared array of at least `warps × items` elements of the items' type
    /// (all items must share one type). The call begins and ends with a barrier, so `scratch`
    /// may be reused right after, and every thread of the block must make the call.
    pub fn block_allreduce_many(&mut self, items: &[(Reduce, Expr)], scratch: Buf) -> Vec<Var> {
        self.block_allreduce_inner(items, scratch, true)
    }

    /// [`Self::block_allreduce_many`] without its leading barrier, for a `scratch` that only
    /// block collectives use: each of them ends with a barrier after its reads, so no warp can
    /// still be reading it.
    pub fn block_allreduce_many_reusing(&mut self, items: &[(Reduce, Expr)], scratch: Buf) -> Vec<Var> {
        self.block_allreduce_inner(items, scratch, false)
    }

    fn block_allreduce_inner(&mut self, items: &[(Reduce, Expr)], scratch: Buf, lead: bool) -> Vec<Var> {
        let warps = self.warps_per_block();
        let partial = self.warp_allreduce_many(items);
        if warps == 1 {
            return partial;
        }
        let n = items.len() as u32;
        let lane = self.let_("lane", self.lane());
        let warp = self.let_("warp", self.warp());
        // Barrier first: an earlier use of `scratch` may still be read by other warps.
        if lead {
            self.barrier();
        }
        let p = partial.clone();
        self.if_(lane.eq_(0u32), |k| {
            for (i, v) in p.iter().enumerate() {
                k.store(scratch, warp * n + i as u32, *v);
            }
        });
        self.barrier();
        // Every warp reduces the per-warp partials itself, so no second broadcast is needed.
        let mut gathered = Vec::with_capacity(items.len());
        for (i, (op, e)) in items.iter().enumerate() {
            let v = self.let_typed("wpart", e.ty(), op.identity(e.ty()));
            self.if_(lane.lt(warps), |k| k.assign(v, scratch.at(lane * n + i as u32)));
            gathered.push((*op, v.e()));
        }
        // Full-warp butterfly: lanes past `warps` hold the identity, and every lane must end
        // with the total (a narrower butterfly would leave the upper lane groups with only
        // identities).
        let out = self.warp_allreduce_width(&gathered, WARP);
        self.barrier();
        out
    }

    pub fn block_allreduce(&mut self, op: Reduce, value: impl IntoExpr, scratch: Buf) -> Var {
        self.block_allreduce_many(&[(op, value.into_expr(None))], scratch)
            .remove(0)
    }

    /// The bits of the lanes below this one (`U32`), for [`Self::warp_rank`]: bound once where a
    /// kernel starts, so the ranks of a loop share it.
    pub fn lanes_below(&mut self) -> Var {
        let lane = self.lane();
        self.let_("lanes_below", (u32c(1) << lane) - 1u32)
    }

    /// Warp compaction: `(rank, count)` (both i32) where `count` is how many lanes of the warp
    /// have `pred` and `rank` how many of the lanes below this one do — the slot of this lane's
    /// item when the lanes with `pred` append theirs in lane order. `below` is
    /// [`Self::lanes_below`]. One ballot; every lane of the warp must make the call.
    pub fn warp_rank(&mut self, pred: impl IntoExpr, below: Var) -> (Expr, Expr) {
        let mask = self.ballot(pred);
        ((mask & below).popc().i32(), mask.e().popc().i32())
    }

    /// Inclusive prefix sum of a `U32`/`I32` value across the warp.
    pub fn warp_inclusive_scan(&mut self, value: impl IntoExpr) -> Var {
        let acc = self.let_("scan", value);
        let lane = self.let_("lane", self.lane());
        let mut offset = 1u32;
        while offset < WARP {
            let r = self.shuffle(ShuffleMode::Up, acc, u32c(offset as u64));
            self.if_(lane.ge(offset), |k| k.assign(acc, acc + r));
            offset *= 2;
        }
        acc
    }

    /// Exclusive prefix sum of a `U32`/`I32` value across the block, in thread order.
    /// Returns `(exclusive, total)`; `scratch` needs at least `warps` elements of the value's type.
    /// Begins and ends with a barrier; every thread must make the call.
    pub fn block_exclusive_scan(&mut self, value: impl IntoExpr, scratch: Buf) -> (Var, Var) {
        self.block_exclusive_scan_inner(value, scratch, true)
    }

    /// [`Self::block_exclusive_scan`] without its leading barrier, for a `scratch` that only
    /// block collectives use (see [`Self::block_allreduce_many_reusing`]).
    pub fn block_exclusive_scan_reusing(&mut self, value: impl IntoExpr, scratch: Buf) -> (Var, Var) {
        self.block_exclusive_scan_inner(value, scratch, false)
    }

    fn block_exclusive_scan_inner(&mut self, value: impl IntoExpr, scratch: Buf, lead: bool) -> (Var, Var) {
        let value = self.let_("scan_in", value);
        let ty = value.ty;
        let incl = self.warp_inclusive_scan(value);
        let warps = self.warps_per_block();
        if warps == 1 {
            let total = self.shuffle(ShuffleMode::Idx, incl, u32c(31));
            let excl = self.let_("excl", incl - value);
            return (excl, total);
        }
        let lane = self.let_("lane", self.lane());
        let warp = self.let_("warp", self.warp());
        if lead {
            self.barrier();
        }
        self.if_(lane.eq_(WARP - 1), |k| k.store(scratch, warp, incl));
        self.barrier();
        // Each warp scans the per-warp totals itself (warps ≤ 32).
        let wt = self.let_typed("warp_total", ty, 0);
        self.if_(lane.lt(warps), |k| k.assign(wt, scratch.at(lane)));
        let wincl = self.warp_inclusive_scan(wt);
        let total = self.shuffle(ShuffleMode::Idx, wincl, u32c(warps as u64 - 1));
        // Exclusive offset of this warp = inclusive scan at lane `warp` minus that warp's total.
        let before = self.shuffle(ShuffleMode::Idx, wincl - wt, warp.e());
        let excl = self.let_("excl", before + incl - value);
        self.barrier();
        (excl, total)
    }
}

/// Offsets `stride, 2·stride, …, 16`: the butterfly steps that combine lanes of one residue
/// modulo `stride`.
fn strided_offsets(stride: u32) -> Vec<u32> {
    std::iter::successors(Some(stride), |o| Some(o * 2))
        .take_while(|&o| o < WARP)
        .collect()
}
