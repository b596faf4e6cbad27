//! The candidate stream of a score pass: per query head, a running lower bound on the entmax
//! threshold of the tokens seen so far and the *candidates* that may still be in the support,
//! kept in the split's workspace segment and pruned as the bound rises.
//!
//! Each token arrives with a lower and an upper bound on its entmax-space score (`lb ≤ z ≤ ub`;
//! both are `z` itself for exact scores). The bound is a lower bound on the threshold of the
//! *lower bounds* — which is ≤ the true threshold, because the threshold is monotone in every
//! score — and a token is kept while its upper bound exceeds it. So the kept set always contains
//! every token whose true score can exceed the threshold of the whole sequence:
//! - `lo ≥ max(lb) − 1` (the largest score alone forces `τ ≥ max − 1`);
//! - Newton steps on the seen tokens' `f(τ) = Σ [lb − τ]_+^β − 1` (evaluated over the segment,
//!   which holds every seen token with `lb > lo`) move `lo` only to points where `f ≥ 0` was
//!   computed; for α ≤ 2 `f` is convex and Newton from below never passes the root, and the
//!   bracket handles other α;
//! - a subset's threshold never exceeds the whole's, so a split's bound is a bound for the whole
//!   sequence.

use crate::entmax::{newton_update, threshold_terms};
use entkv_abi::{DecodeSpec, DenseTile};
use entkv_dsl::*;

/// One query head's segment in the workspace.
pub struct Segment {
    /// Element offset of the segment (i64).
    pub base: Var,
    /// Candidates in the segment (i32, block-uniform).
    pub count: Var,
    /// Running lower bound on the threshold (block-uniform).
    pub lo: Var,
    /// Largest lower bound seen (block-uniform): `f(hi) < 0` there.
    pub hi: Var,
    /// Next point to test as a bound (block-uniform, in `[lo, hi]`).
    pub probe: Var,
}

/// Workspace buffers of the candidates: lower bound (the score itself for exact scores),
/// optional upper bound, and token position.
#[derive(Clone, Copy)]
pub struct CandidateBufs {
    pub lb: Buf,
    pub ub: Option<Buf>,
    pub idx: Buf,
    pub count: Buf,
    pub bound: Buf,
}

impl CandidateBufs {
    /// The workspace buffers of a stream whose candidates carry both bounds (the certified
    /// pass), in parameter order: `cand_lb, cand_ub, cand_idx, cand_count, cand_bound`.
    pub fn declare_bounded(k: &mut KernelBuilder) -> CandidateBufs {
        CandidateBufs {
            lb: k.buffer("cand_lb", Scalar::F32, Access::ReadWrite),
            ub: Some(k.buffer("cand_ub", Scalar::F32, Access::ReadWrite)),
            idx: k.buffer("cand_idx", Scalar::I32, Access::ReadWrite),
            count: k.buffer("cand_count", Scalar::I32, Access::Write),
            bound: k.buffer("cand_bound", Scalar::F32, Access::Write),
        }
    }

    /// The candidate at element `at`: `(lb, ub, position)` (`ub` is `lb` without upper bounds).
    pub fn load(&self, k: &mut KernelBuilder, at: Var) -> (Var, Var, Var) {
        let lb = k.let_("cand_lbv", self.lb.at(at));
        let ub = match self.ub {
            Some(u) => k.let_("cand_ubv", u.at(at)),
            None => lb,
        };
        (lb, ub, k.let_("cand_idxv", self.idx.at(at)))
    }

    /// Store a candidate at element `at`: its bounds, then its position, which `position`
    /// evaluates only here (it may be a memory lookup).
    pub fn store(
        &self,
        k: &mut KernelBuilder,
        at: Var,
        lb: Var,
        ub: Var,
        position: &dyn Fn(&mut KernelBuilder) -> Expr,
    ) {
        k.store(self.lb, at, lb);
        if let Some(u) = self.ub {
            k.store(u, at, ub);
        }
        let t = position(k);
        k.store(self.idx, at, t);
    }
}

/// One chunk's tokens for one head: `(lower, upper)` score bounds per token of this lane
/// group (−∞ for invalid tokens), the token positions, and whether this lane counts them.
pub struct ChunkScores<'p> {
    pub bounds: Vec<Vec<(Var, Var)>>,
    /// The position of token `r` (i32), evaluated only where that token is appended: the few
    /// candidates, not every token. A layout whose positions take a memory lookup (a
    /// selection) then keeps no position registers across the chunk's reductions.
    pub position: &'p dyn Fn(&mut KernelBuilder, usize) -> Expr,
    pub owner: Var,
}

/// This worker's share of `(Σ x^β, Σ x^(β−1))`, `x = z − probe` over the scores above `probe`,
/// of the segment `(scores, base, count)` (elements `base + i`, `i` from `first` in steps of
/// `workers`): the terms of a bracketed Newton step on a stream's bound, before the reduction.
pub(crate) fn threshold_sums(
    k: &mut KernelBuilder,
    spec: &DecodeSpec,
    (scores, base, count): (Buf, Var, Var),
    first: Expr,
    workers: u32,
    probe: Var,
) -> (Var, Var) {
    let s0 = k.let_typed("s0", Scalar::F32, 0.0);
    let s1 = k.let_typed("s1", Scalar::F32, 0.0);
    k.for_("i", first, count, workers as i32, |k, i| {
        let zv = k.let_("zc", scores.at(base + i.i64()));
        let (w, w1) = threshold_terms(spec.alpha, zv, probe);
        k.assign(s0, s0 + w);
        k.assign(s1, s1 + w1);
    });
    (s0, s1)
}

pub struct Stream<'a> {
    pub spec: &'a DecodeSpec,
    pub tile: &'a DenseTile,
    pub bufs: CandidateBufs,
    pub segs: Vec<Segment>,
    /// Shared scratch: `warps × 2 × group` f32 and `warps` i32. Only the block collectives
    /// below use them, so they skip their leading barriers (`*_reusing`).
    pub red: Buf,
    pub scan: Buf,
    /// With [`Tightening::Gated`]: candidates appended since the bounds were last tightened
    /// (block-uniform).
    pending: Option<Var>,
}

/// When a stream tightens its bounds (Newton steps on every head's segment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tightening {
    /// After every chunk that appends.
    EveryChunk,
    /// Once `Stream::tighten_after` candidates were appended since the last time (over the
    /// group's heads), and once more before a split's final prune if any were.
    Gated,
}

impl Tightening {
    /// The score passes' rule: gated for a GQA group without ALiBi. A tightening's Newton
    /// steps sweep G segments and reduce 2G sums, and the bounds they buy are per head. On an
    /// H100 (results/2026-12-06-tighten) gating took `gqa`'s dense and Gaussian steps 5–8%
    /// faster at 128k and 1M (top-k 5% at 1M) and `wide`'s 3–4% (top-k 2% at 1M); top-k at
    /// 128k and every step at 32k stayed within +1.6%. With one head (`paper`) it changed
    /// nothing but dense at 1M, 10% slower. With ALiBi the one register it holds spilled a
    /// group's pass that sits at 128 (d = 32, G = 4, bf16: 148 B; tests/emit_ptxas).
    pub fn for_score_pass(spec: &DecodeSpec, alibi: bool) -> Tightening {
        if spec.group >= 2 && !alibi {
            Tightening::Gated
        } else {
            Tightening::EveryChunk
        }
    }
}

/// The fewest candidates a [`Tightening::Gated`] stream lets pile up before it tightens.
pub const TIGHTEN_AFTER: i32 = 32;

impl<'a> Stream<'a> {
    /// Declare the shared scratch and one empty segment per head; `seg_index(g)` is the
    /// segment number of head `g` and `seg_len` the segment capacity (i64). Segments are
    /// tightened after every chunk that appends: the passes using this stream keep them short
    /// (a pass whose segments outgrow the block streams per warp, [`crate::warp_stream`], and
    /// gates its tightening there).
    pub fn new(
        k: &mut KernelBuilder,
        spec: &'a DecodeSpec,
        tile: &'a DenseTile,
        bufs: CandidateBufs,
        seg_index: &dyn Fn(&mut KernelBuilder, u32) -> Expr,
        seg_len: Var,
        tightening: Tightening,
    ) -> Stream<'a> {
        let warps = tile.threads / WARP;
        let red = k.shared("red", Scalar::F32, warps * 2 * spec.group);
        let scan = k.shared("scan", Scalar::I32, warps);
        let segs = (0..spec.group)
            .map(|g| {
                let seg = seg_index(k, g);
                Segment {
                    base: k.let_("seg_base", seg * seg_len),
                    count: k.let_typed("count", Scalar::I32, 0),
                    lo: k.let_typed("lo", Scalar::F32, f64::NEG_INFINITY),
                    hi: k.let_typed("hi", Scalar::F32, f64::NEG_INFINITY),
                    probe: k.let_typed("probe", Scalar::F32, f64::NEG_INFINITY),
                }
            })
            .collect();
        Stream {
            spec,
            tile,
            bufs,
            segs,
            red,
            scan,
            pending: (tightening == Tightening::Gated).then(|| k.let_typed("pending", Scalar::I32, 0)),
        }
    }

    /// Take one chunk: raise the bounds, append the chunk's candidates, tighten and prune.
    /// Every thread of the block must call this (it synchronises).
    pub fn push(&self, k: &mut KernelBuilder, chunk: &ChunkScores) {
        // lo ≥ max − 1.
        let maxes: Vec<(Reduce, Expr)> = chunk
            .bounds
            .iter()
            .map(|b| {
                let m = b.iter().fold(f32c(f64::NEG_INFINITY), |m, (lb, _)| m.max(*lb));
                (Reduce::Max, m)
            })
            .collect();
        let m = k.block_allreduce_many_reusing(&maxes, self.red);
        for (s, m) in self.segs.iter().zip(&m) {
            k.assign(s.hi, s.hi.max(*m));
            k.assign(s.lo, s.lo.max(s.hi - 1.0f32));
            k.assign(s.probe, s.probe.max(s.lo));
        }
        // Append the tokens whose upper bound clears the bound, in thread order.
        let added = k.let_typed("added", Scalar::I32, 0);
        let keeps: Vec<Vec<Expr>> = self
            .segs
            .iter()
            .zip(&chunk.bounds)
            .map(|(s, bounds)| {
                bounds
                    .iter()
                    .map(|(_, ub)| chunk.owner.and(ub.gt(s.lo)))
                    .collect()
            })
            .collect();
        let counts: Vec<Expr> = keeps
            .iter()
            .map(|keep| {
                keep.iter()
                    .fold(i32c(0), |c, kp| c + select(kp.clone(), 1i32, 0i32))
            })
            .collect();
        let offsets = self.scan_counts(k, &counts);
        for (g, s) in self.segs.iter().enumerate() {
            let keep = &keeps[g];
            let (excl, total) = offsets[g];
            let pos = k.let_("pos", s.base + (s.count + excl).i64());
            for (r, (kp, (lb, ub))) in keep.iter().zip(&chunk.bounds[g]).enumerate() {
                let bufs = self.bufs;
                k.if_(kp.clone(), |k| {
                    bufs.store(k, pos, *lb, *ub, &|k| (chunk.position)(k, r));
                    k.assign(pos, pos + 1i64);
                });
            }
            k.assign(s.count, s.count + total);
            k.assign(added, added + total);
        }
        // Tighten after every chunk that appends, or for a group once enough candidates piled
        // up (a Newton sweep is one load a thread while a segment fits the block).
        let due = match self.pending {
            Some(pending) => {
                k.assign(pending, pending + added);
                pending.ge(self.tighten_after())
            }
            None => added.gt(0i32),
        };
        let threads = self.tile.threads as i32;
        k.if_(due, |k| {
            self.tighten(k);
            for s in &self.segs {
                k.if_(s.count.gt(threads), |k| self.prune(k, s));
            }
        });
    }

    /// Candidates a gated stream lets pile up: one per 16 scores a chunk (chunk length × G), at
    /// least [`TIGHTEN_AFTER`], so it tightens about as often per chunk whatever the tile.
    /// Against 32 for every tile (H100, results/2026-12-06-tighten/4-scaled-gqa), `gqa`'s
    /// tiles (192 and 128) took its steps 2–4% faster at 32k and 128k and up to 1% at 1M (top-k
    /// at 32k +1.3%); `wide`'s 128-token chunks of four heads give 32 again. 1-ab had measured
    /// 128 for every tile up to 2 points faster than 32 on `gqa` and slower on `wide`.
    fn tighten_after(&self) -> i32 {
        TIGHTEN_AFTER.max((self.tile.chunk_len() * self.spec.group / 16) as i32)
    }

    /// The tile's Newton steps on every head's bound, over the segments as they are.
    fn tighten(&self, k: &mut KernelBuilder) {
        k.barrier(); // the appends are read back below
        let his: Vec<Var> = self.segs.iter().map(|s| k.let_("hi_b", s.hi)).collect();
        for _ in 0..self.tile.newton_steps {
            self.newton(k, &his);
        }
        if let Some(pending) = self.pending {
            k.assign(pending, 0i32);
        }
    }

    /// Every head's `(exclusive offset, block total)` of its per-thread `counts`. Two heads
    /// share one block scan (16-bit halves of an i32: a head appends at most `chunk_len`
    /// tokens a chunk), halving the scans' barriers for a GQA group.
    fn scan_counts(&self, k: &mut KernelBuilder, counts: &[Expr]) -> Vec<(Var, Var)> {
        if self.tile.chunk_len() >= 1 << 15 {
            return counts
                .iter()
                .map(|c| k.block_exclusive_scan_reusing(c.clone(), self.scan))
                .collect();
        }
        let mut out = Vec::new();
        for pair in counts.chunks(2) {
            match pair {
                [a, b] => {
                    let (excl, total) =
                        k.block_exclusive_scan_reusing(a.clone() + b.clone() * 65536i32, self.scan);
                    out.push((
                        k.let_("excl_lo", excl & 0xFFFFi32),
                        k.let_("total_lo", total & 0xFFFFi32),
                    ));
                    out.push((
                        k.let_("excl_hi", excl >> 16i32),
                        k.let_("total_hi", total >> 16i32),
                    ));
                }
                [a] => out.push(k.block_exclusive_scan_reusing(a.clone(), self.scan)),
                _ => unreachable!("chunks of two"),
            }
        }
        out
    }

    /// One bracketed Newton step of every head's bound.
    fn newton(&self, k: &mut KernelBuilder, his: &[Var]) {
        let tid = k.thread_idx();
        let mut sums = Vec::new();
        for s in &self.segs {
            let seg = (self.bufs.lb, s.base, s.count);
            let (s0, s1) = threshold_sums(k, self.spec, seg, tid.clone().i32(), self.tile.threads, s.probe);
            sums.push((Reduce::Sum, s0.e()));
            sums.push((Reduce::Sum, s1.e()));
        }
        let tot = k.block_allreduce_many_reusing(&sums, self.red);
        for ((g, s), hi) in self.segs.iter().enumerate().zip(his) {
            let f = k.let_("f", tot[2 * g] - 1.0f32);
            let next = newton_update(k, self.spec.alpha, s.probe, s.lo, *hi, f, tot[2 * g + 1]);
            k.assign(s.probe, next);
        }
    }

    /// Compact a segment in place to the candidates whose upper bound clears the bound.
    fn prune(&self, k: &mut KernelBuilder, s: &Segment) {
        let tid = k.let_("tid_p", k.thread_idx());
        let wp = k.let_typed("wp", Scalar::I32, 0);
        let bufs = self.bufs;
        let scan = self.scan;
        k.for_("w0", 0i32, s.count, self.tile.threads as i32, |k, w0| {
            let i = k.let_("i", w0.clone() + tid.i32());
            let inside = k.let_("inside", i.lt(s.count));
            // Lanes past the end read the window's first element: earlier windows' writes
            // land below it, so even a discarded read never meets a write of this epoch.
            let at = k.let_("at", s.base + select(inside, i, w0).i64());
            let (lb, ub, iv) = bufs.load(k, at);
            let keep = k.let_("keep", inside.and(ub.gt(s.lo)));
            // The scan's barriers order this window's reads before any of its writes; writes
            // land below the next window, so it needs no extra barrier.
            let (excl, total) = k.block_exclusive_scan_reusing(select(keep, 1i32, 0i32), scan);
            k.if_(keep, |k| {
                let dst = k.let_("dst", s.base + (wp + excl).i64());
                bufs.store(k, dst, lb, ub, &|_| iv.e());
            });
            k.assign(wp, wp + total);
        });
        k.assign(s.count, wp);
        k.barrier(); // later passes read the compacted segment
    }

    /// Final prune and the per-split count and bound (segment number `seg_index(g)`).
    pub fn finish(&self, k: &mut KernelBuilder, seg_index: &dyn Fn(&mut KernelBuilder, u32) -> Expr) {
        // A group's candidates appended since its last tightening: tighten before the final
        // prune, so the finish pass gets the bound the per-chunk rule would have left.
        if let Some(pending) = self.pending {
            k.if_(pending.gt(0i32), |k| self.tighten(k));
        }
        let tid = k.let_("tid_f", k.thread_idx());
        for (g, s) in self.segs.iter().enumerate() {
            self.prune(k, s);
            let seg = seg_index(k, g as u32);
            let bufs = self.bufs;
            k.if_(tid.eq_(0u32), |k| {
                k.store(bufs.count, seg.clone(), s.count);
                k.store(bufs.bound, seg, s.lo);
            });
        }
    }
}
