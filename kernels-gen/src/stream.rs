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
    /// In a gated stream (see [`Stream::new`]), the count above which a segment longer than
    /// the block is tightened again (i32, block-uniform).
    pub tighten_at: Option<Var>,
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
    /// Whether this is the split's last chunk (a gated stream tightens after it).
    pub last: Expr,
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
}

impl<'a> Stream<'a> {
    /// Declare the shared scratch and one empty segment per head; `seg_index(g)` is the
    /// segment number of head `g` and `seg_len` the segment capacity (i64).
    ///
    /// `gated`: tighten a segment longer than the block only when it has doubled since its
    /// last prune, so each candidate is swept a bounded number of times however many stay
    /// above the bound; otherwise on every chunk that appends. Gate a pass whose segments
    /// outgrow the block (the certified pass with 4-bit sketches keeps ~1% of the tokens,
    /// 1.3k a split at `paper` 1M, and swept them every chunk). Passes whose segments fit
    /// leave it off and keep their code: the 8-bit certified pass runs at its register limit,
    /// where variants of the gate made ptxas 13 spill it (up to 64 B).
    pub fn new(
        k: &mut KernelBuilder,
        spec: &'a DecodeSpec,
        tile: &'a DenseTile,
        bufs: CandidateBufs,
        seg_index: &dyn Fn(&mut KernelBuilder, u32) -> Expr,
        seg_len: Var,
        gated: bool,
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
                    tighten_at: gated.then(|| k.let_typed("tighten_at", Scalar::I32, tile.threads as i32)),
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
                    k.store(bufs.lb, pos, *lb);
                    if let Some(u) = bufs.ub {
                        k.store(u, pos, *ub);
                    }
                    let t = (chunk.position)(k, r);
                    k.store(bufs.idx, pos, t);
                    k.assign(pos, pos + 1i64);
                });
            }
            k.assign(s.count, s.count + total);
            k.assign(added, added + total);
        }
        // Tighten while a segment fits the block (a Newton sweep is one load a thread); a
        // gated segment longer than that only once it has doubled since its last prune, and
        // after the last chunk, appends or not: the final prune then uses a recent bound and
        // reads only appends a barrier has ordered.
        let threads = self.tile.threads as i32;
        let gated = self.segs.iter().any(|s| s.tighten_at.is_some());
        let tighten = if gated {
            let due = self.segs.iter().fold(boolc(false), |d, s| match s.tighten_at {
                Some(at) => d.or(s.count.le(threads).or(s.count.gt(at))),
                None => d,
            });
            added.gt(0i32).and(due).or(chunk.last.clone())
        } else {
            added.gt(0i32)
        };
        k.if_(tighten, |k| {
            k.barrier(); // the appends above are read back below
            let his: Vec<Var> = self.segs.iter().map(|s| k.let_("hi_b", s.hi)).collect();
            for _ in 0..self.tile.newton_steps {
                self.newton(k, &his);
            }
            for s in &self.segs {
                k.if_(s.count.gt(threads), |k| {
                    self.prune(k, s);
                    if let Some(at) = s.tighten_at {
                        k.assign(at, (s.count * 2i32).max(threads));
                    }
                });
            }
        });
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
            let s0 = k.let_typed("s0", Scalar::F32, 0.0);
            let s1 = k.let_typed("s1", Scalar::F32, 0.0);
            let lb_buf = self.bufs.lb;
            k.for_(
                "i",
                tid.clone().i32(),
                s.count,
                self.tile.threads as i32,
                |k, i| {
                    let zv = k.let_("zc", lb_buf.at(s.base + i.i64()));
                    let (w, w1) = threshold_terms(self.spec.alpha, zv, s.probe);
                    k.assign(s0, s0 + w);
                    k.assign(s1, s1 + w1);
                },
            );
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
            let lb = k.let_("lbp", bufs.lb.at(at));
            let ub = match bufs.ub {
                Some(u) => k.let_("ubp", u.at(at)),
                None => lb,
            };
            let iv = k.let_("ip", bufs.idx.at(at));
            let keep = k.let_("keep", inside.and(ub.gt(s.lo)));
            // The scan's barriers order this window's reads before any of its writes; writes
            // land below the next window, so it needs no extra barrier.
            let (excl, total) = k.block_exclusive_scan_reusing(select(keep, 1i32, 0i32), scan);
            k.if_(keep, |k| {
                let dst = k.let_("dst", s.base + (wp + excl).i64());
                k.store(bufs.lb, dst, lb);
                if let Some(u) = bufs.ub {
                    k.store(u, dst, ub);
                }
                k.store(bufs.idx, dst, iv);
            });
            k.assign(wp, wp + total);
        });
        k.assign(s.count, wp);
        k.barrier(); // later passes read the compacted segment
    }

    /// Final prune and the per-split count and bound (segment number `seg_index(g)`).
    pub fn finish(&self, k: &mut KernelBuilder, seg_index: &dyn Fn(&mut KernelBuilder, u32) -> Expr) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_abi::DType;
    use entkv_dsl::interp::{run, Arg, HostBuffer, LaunchDims};

    const THREADS: u32 = 64;
    const CHUNK: usize = 128; // one lane a token, two tokens a lane

    /// Run a gated stream of one head over two chunks of scores (−∞: no token) in the
    /// interpreter, races checked; returns the final count and bound.
    fn run_gated(
        chunks: [&[f32]; 2],
        newton_steps: u32,
    ) -> Result<(i32, f32), entkv_dsl::interp::InterpError> {
        let spec = DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap();
        let tile = DenseTile {
            threads: THREADS,
            lanes_per_token: 1,
            tokens_per_group: 2,
            newton_steps,
            score_min_blocks: 0,
            ctas_per_sm: 1,
            finish_threads: THREADS,
            finish_capacity: THREADS,
        };
        let mut k = KernelBuilder::new("gated_stream", THREADS);
        let z = k.buffer("z", Scalar::F32, Access::Read);
        let bufs = CandidateBufs::declare_bounded(&mut k);
        let seg_index = |_: &mut KernelBuilder, _: u32| i64c(0);
        let seg_len = k.let_("seg_len", i64c(2 * CHUNK as i64));
        let stream = Stream::new(&mut k, &spec, &tile, bufs, &seg_index, seg_len, true);
        let tid = k.let_("tid", k.thread_idx());
        let owner = k.let_("owner", boolc(true));
        for c in 0..2usize {
            let at: Vec<Var> = (0..2u32)
                .map(|r| k.let_("at", (tid + r * THREADS).i32() + (c * CHUNK) as i32))
                .collect();
            let bounds = vec![at
                .iter()
                .map(|a| {
                    let v = k.let_("zv", z.at(*a));
                    (v, v)
                })
                .collect()];
            stream.push(
                &mut k,
                &ChunkScores {
                    bounds,
                    position: &|_, r| at[r].e(),
                    owner,
                    last: boolc(c == 1),
                },
            );
        }
        stream.finish(&mut k, &seg_index);
        let kernel = k.finish().unwrap();
        let mut zs = vec![f32::NEG_INFINITY; 2 * CHUNK];
        for (c, scores) in chunks.iter().enumerate() {
            zs[c * CHUNK..][..scores.len()].copy_from_slice(scores);
        }
        let n = 2 * CHUNK;
        let (mut hz, mut lb, mut ub, mut idx) = (
            HostBuffer::F32(zs),
            HostBuffer::F32(vec![f32::NAN; n]),
            HostBuffer::F32(vec![f32::NAN; n]),
            HostBuffer::I32(vec![-7; n]),
        );
        let (mut count, mut bound) = (HostBuffer::I32(vec![-7]), HostBuffer::F32(vec![f32::NAN]));
        run(
            &kernel,
            LaunchDims::linear(1, THREADS),
            &mut [
                Arg::Buf(&mut hz),
                Arg::Buf(&mut lb),
                Arg::Buf(&mut ub),
                Arg::Buf(&mut idx),
                Arg::Buf(&mut count),
                Arg::Buf(&mut bound),
            ],
        )?;
        Ok((count.as_i32().unwrap()[0], bound.as_f32().unwrap()[0]))
    }

    /// The first chunk appends 100 candidates (40 at 0, 60 at −0.9: above `max − 1`), the last
    /// 30 more at 0 from warp 0.
    fn two_chunks() -> (Vec<f32>, Vec<f32>) {
        let mut first = vec![0.0f32; 40];
        first.resize(100, -0.9);
        (first, vec![0.0; 30])
    }

    /// Two Newton steps lift the bound to about −0.56 in the first chunk, and its prune keeps
    /// the 40 at 0: more than half the block, so the gate opens again only past 80. The last
    /// chunk's appends (positions 40..69) leave the segment (70) longer than the block but not
    /// due. Only the tightening forced after the last chunk puts a barrier between them and the
    /// final prune's first window, where warp 1 reads positions 40..63 (a race otherwise).
    #[test]
    fn gated_stream_orders_the_last_appends_before_the_final_prune() {
        let (first, last) = two_chunks();
        let (count, bound) = run_gated([&first, &last], 2).expect("no race, no fault");
        assert_eq!(count, 70, "the 70 candidates at 0 stay");
        assert!(bound.is_finite() && (-0.9..0.0).contains(&bound), "bound {bound}");
    }

    /// With one Newton step the first chunk's prune still uses `max − 1` (a step moves the
    /// bound only to a point it has evaluated) and keeps all 100, so the gate opens again only
    /// past 200. The tightening after the last chunk is what raises the bound past −0.9 before
    /// the final prune, which then drops the 60.
    #[test]
    fn gated_stream_prunes_with_a_bound_tightened_after_the_last_chunk() {
        let (first, last) = two_chunks();
        let (count, bound) = run_gated([&first, &last], 1).expect("no race, no fault");
        assert_eq!(count, 70, "the 60 candidates at −0.9 are dropped");
        assert!(bound.is_finite() && (-0.9..0.0).contains(&bound), "bound {bound}");
    }
}
