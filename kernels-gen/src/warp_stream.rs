//! A warp-local candidate stream: what [`crate::stream`] does for a block, done by every warp
//! on its own tokens, so a chunk costs a warp a few shuffles and ballots and never waits for
//! the others.
//!
//! The block stream reduces every chunk's maxima and scans its appends across the block: two
//! to three barriers a chunk, which a pass pays for by holding many tokens a lane in flight
//! (registers). A certified pass over a 4-bit per-token sketch rescores the few tokens whose
//! bound clears the running bound exactly from K inside the chunk, and that round trip stalls
//! a CTA at the next barrier unless other warps run; here nothing waits for it but its warp.
//!
//! Each warp keeps, per query head, its own segment of the split's workspace (segment
//! `split_segment·warps + warp`, `split_len / warps` long: a warp sees that many tokens a
//! split, see `entkv_abi::pipeline::segments_per_split`), a running lower bound `lo` on the
//! threshold and a bracket for Newton steps, exactly as [`crate::stream`] argues (every bound
//! is the threshold of a subset's lower bounds, so ≤ the true threshold). Warps of a CTA share
//! their bounds through shared memory: a warp publishes its bound after tightening it
//! (`atomicMax` on the f32's order-preserving integer) and reads the CTA's best once a chunk,
//! using it one chunk later so the read's latency is hidden. A subset's bound is a bound for
//! the whole sequence, so the best of them is too.
//!
//! With [`DenseTile::share_bound`] the same goes across the CTAs of a head ([`HeadBounds`]):
//! warps also publish to a global bound per query head and read it with the CTA's, so a split's
//! first chunks filter against what the head's other splits have found. Plans that cut a head
//! into many short splits (`wide`) otherwise rescore a large share of their tokens before their
//! own bounds tighten.

use crate::entmax::newton_update;
use crate::stream::{threshold_sums, CandidateBufs, ChunkScores};
use entkv_abi::{DecodeSpec, DenseTile};
use entkv_dsl::*;

/// Segment length at or below which a warp tightens after every chunk that appends: a Newton
/// sweep is then one load a lane. Past it, only once the segment has doubled since its last
/// prune, so each candidate is swept a bounded number of times however many stay above the
/// bound.
const TIGHTEN_EVERY: i32 = 2 * WARP as i32;

/// One query head's segment of this warp (every value warp-uniform).
pub struct WarpSegment {
    /// The segment's number in the workspace (i64): `split_segment·warps + warp`.
    seg: Var,
    /// Element offset of the segment (i64).
    pub base: Var,
    /// Candidates in the segment (i32).
    pub count: Var,
    /// Running lower bound on the threshold (warp-uniform: Newton steps and prunes use it).
    lo: Var,
    /// What this lane filters its tokens against (not warp-uniform): `lo`, this lane's
    /// largest lower bound less one, and the CTA's best bound, whichever is highest. Each is
    /// a lower bound on the threshold, and a lane needs no shuffle to raise its own.
    pub filter: Var,
    /// This lane's largest lower bound.
    lane_hi: Var,
    /// Largest lower bound of this warp at its last tightening: `f(hi) < 0` there.
    hi: Var,
    /// Next point to test as a bound (in `[lo, hi]`).
    probe: Var,
    /// The count past which a segment longer than [`TIGHTEN_EVERY`] is tightened again.
    tighten_at: Var,
    /// The CTA's best published bound as read at the end of the previous chunk (the integer
    /// key, see [`order_key`]).
    seen: Var,
    /// The head's best bound over every CTA (`head_bound`), as lane 0 read it at the end of the
    /// previous chunk (the integer key; other lanes hold −∞). Shuffled out when the next chunk
    /// raises its filter, so the read's round trip to L2 overlaps that chunk's scoring.
    global_seen: Var,
}

/// Per query head, the best bound on its threshold any CTA of the step has found, in global
/// memory (`head_bound`, [`order_key`]s reset to −∞ by `certified_init` before the pass):
/// a head's splits share their bounds, so a split's first chunks filter against what the
/// others have seen. `first` is the element of the group's first head (i64); head `g` of
/// the group is `first + g`.
pub struct HeadBounds {
    pub buf: Buf,
    pub first: Var,
    /// The bounds start at an estimate (`entkv_abi::seed`), not −∞: a warp reads them before
    /// its first chunk, and the bound it hands the finish pass is −∞ (its own may hold the
    /// estimate, which the finish must not take as a bound).
    pub seeded: bool,
}

impl HeadBounds {
    fn at(&self, g: usize) -> Expr {
        self.first + g as i64
    }

    /// Head `g`'s bound (its order key), read with an atomic: from L2, never a stale line of
    /// this SM's L1.
    fn read(&self, k: &mut KernelBuilder, g: usize) -> Var {
        k.atomic(AtomicOp::Max, self.buf, self.at(g), i32c(i32::MIN as i64))
    }
}

pub struct WarpStream<'a> {
    spec: &'a DecodeSpec,
    tile: &'a DenseTile,
    bufs: CandidateBufs,
    pub segs: Vec<WarpSegment>,
    /// Per head, the CTA's best bound as an order key (i32; atomics only until the final
    /// barrier).
    shared_bound: Buf,
    lane: Var,
    /// [`KernelBuilder::lanes_below`].
    below: Var,
    global: Option<HeadBounds>,
}

/// The i32 whose signed order is the f32 order of `x` (not NaN): the bits for `x ≥ +0`, the
/// bits with the magnitude flipped for negatives. Its own inverse.
pub fn order_key(x: impl IntoExpr) -> Expr {
    let bits = x.into_expr(Some(Scalar::F32)).bitcast(Scalar::I32);
    select(bits.clone().lt(0i32), bits.clone() ^ 0x7FFF_FFFFi32, bits)
}

/// The f32 of an [`order_key`].
fn from_order_key(key: impl IntoExpr) -> Expr {
    let key = key.into_expr(Some(Scalar::I32));
    select(key.clone().lt(0i32), key.clone() ^ 0x7FFF_FFFFi32, key).bitcast(Scalar::F32)
}

impl<'a> WarpStream<'a> {
    /// Declare the shared bounds and this warp's empty segment per head: `seg_index(g)` is the
    /// split segment of head `g` and `split_len` its length (i64). Every thread of the block
    /// must call this (it ends with a barrier).
    pub fn new(
        k: &mut KernelBuilder,
        spec: &'a DecodeSpec,
        tile: &'a DenseTile,
        bufs: CandidateBufs,
        seg_index: &dyn Fn(&mut KernelBuilder, u32) -> Expr,
        split_len: Var,
        global: Option<HeadBounds>,
    ) -> WarpStream<'a> {
        let warps = tile.threads / WARP;
        let shared_bound = k.shared("warp_bounds", Scalar::I32, spec.group);
        let tid = k.let_("tid_ws", k.thread_idx());
        k.if_(tid.lt(spec.group), |k| {
            k.store(shared_bound, tid, order_key(f32c(f64::NEG_INFINITY)))
        });
        let lane = k.let_("lane_ws", k.lane());
        let below = k.lanes_below();
        let warp = k.let_("warp_ws", k.warp());
        let seg_len = k.let_("warp_seg_len", split_len / warps as i64);
        let segs: Vec<WarpSegment> = (0..spec.group)
            .map(|g| {
                let seg = seg_index(k, g) * warps as i64 + warp.i64();
                let seg = k.let_("wseg", seg);
                WarpSegment {
                    seg,
                    base: k.let_("wseg_base", seg * seg_len),
                    count: k.let_typed("wcount", Scalar::I32, 0),
                    lo: k.let_typed("wlo", Scalar::F32, f64::NEG_INFINITY),
                    filter: k.let_typed("wfilter", Scalar::F32, f64::NEG_INFINITY),
                    lane_hi: k.let_typed("wlane_hi", Scalar::F32, f64::NEG_INFINITY),
                    hi: k.let_typed("whi", Scalar::F32, f64::NEG_INFINITY),
                    probe: k.let_typed("wprobe", Scalar::F32, f64::NEG_INFINITY),
                    tighten_at: k.let_typed("wtighten_at", Scalar::I32, TIGHTEN_EVERY),
                    seen: k.let_("wseen", order_key(f32c(f64::NEG_INFINITY))),
                    global_seen: k.let_("wgseen", order_key(f32c(f64::NEG_INFINITY))),
                }
            })
            .collect();
        k.barrier(); // the shared bounds are initialised before any warp publishes
        if let Some(hb) = global.as_ref().filter(|hb| hb.seeded) {
            k.if_(lane.eq_(0u32), |k| {
                for (g, s) in segs.iter().enumerate() {
                    let v = hb.read(k, g);
                    k.assign(s.global_seen, v);
                }
            });
        }
        WarpStream {
            spec,
            tile,
            bufs,
            segs,
            shared_bound,
            lane,
            below,
            global,
        }
    }

    /// Raise every head's filter with a chunk's lower bounds (`τ ≥ max − 1`, this lane's
    /// maximum) and the CTA's best bound read after the previous chunk. Then `filter` is what
    /// the chunk's tokens are checked against (e.g. which tokens to rescore). Lane-local.
    pub fn raise(&self, k: &mut KernelBuilder, bounds: &[Vec<(Var, Var)>]) {
        for (s, b) in self.segs.iter().zip(bounds) {
            let m = b.iter().fold(s.lane_hi.e(), |m, (lb, _)| m.max(*lb));
            k.assign(s.lane_hi, m);
            let mut shared = from_order_key(s.seen);
            if self.global.is_some() {
                let g = k.shuffle(ShuffleMode::Idx, s.global_seen, u32c(0));
                shared = shared.max(from_order_key(g));
            }
            k.assign(s.filter, s.filter.max(s.lane_hi - 1.0f32).max(shared));
        }
    }

    /// Append the chunk's tokens whose upper bound clears `filter` (as [`WarpStream::raise`]
    /// left it), tighten a segment that is due, and read the CTA's best bound for the next chunk.
    /// All lanes of the warp call this.
    pub fn append(&self, k: &mut KernelBuilder, chunk: &ChunkScores) {
        for (g, (s, bounds)) in self.segs.iter().zip(&chunk.bounds).enumerate() {
            let pos = k.let_("wpos", s.base + s.count.i64());
            let added = k.let_typed("wadded", Scalar::I32, 0);
            for (r, (lb, ub)) in bounds.iter().enumerate() {
                let keep = k.let_("wkeep", chunk.owner.and(ub.gt(s.filter)));
                let (rank, count) = k.warp_rank(keep, self.below);
                let bufs = self.bufs;
                k.if_(keep, |k| {
                    let at = k.let_("wat", pos + (added + rank).i64());
                    bufs.store(k, at, *lb, *ub, &|k| (chunk.position)(k, r));
                });
                k.assign(added, added + count);
            }
            k.assign(s.count, s.count + added);
            let due = s.count.le(TIGHTEN_EVERY).or(s.count.gt(s.tighten_at));
            k.if_(added.gt(0i32).and(due), |k| {
                self.gather_bound(k, s);
                self.newton(k, s);
                k.if_(s.count.gt(WARP as i32), |k| {
                    self.prune(k, s);
                    k.assign(s.tighten_at, (s.count * 2i32).max(TIGHTEN_EVERY));
                });
                k.if_(self.lane.eq_(0u32), |k| {
                    k.atomic_no_ret(AtomicOp::Max, self.shared_bound, g as u32, order_key(s.lo));
                    if let Some(hb) = &self.global {
                        k.atomic_no_ret(AtomicOp::Max, hb.buf, hb.at(g), order_key(s.lo));
                    }
                });
                k.assign(s.filter, s.filter.max(s.lo));
            });
            // Read the CTA's best bound now; it is used by the next chunk's `raise`. So is the
            // head's ([`HeadBounds::read`]).
            let seen = k.let_typed("wseen_l0", Scalar::I32, 0);
            k.if_(self.lane.eq_(0u32), |k| {
                let v = k.atomic(AtomicOp::Max, self.shared_bound, g as u32, i32c(i32::MIN as i64));
                k.assign(seen, v);
                if let Some(hb) = &self.global {
                    let v = hb.read(k, g);
                    k.assign(s.global_seen, v);
                }
            });
            let v = k.shuffle(ShuffleMode::Idx, seen, u32c(0));
            k.assign(s.seen, v);
        }
    }

    /// The warp's bound from its lanes': `hi` = the largest lower bound any lane has seen,
    /// `lo ≥ hi − 1` and ≥ every lane's filter; Newton steps start there.
    fn gather_bound(&self, k: &mut KernelBuilder, s: &WarpSegment) {
        let m = k.warp_allreduce_many(&[(Reduce::Max, s.lane_hi.e()), (Reduce::Max, s.filter.e())]);
        k.assign(s.hi, s.hi.max(m[0]));
        k.assign(s.lo, s.lo.max(s.hi - 1.0f32).max(m[1]));
        k.assign(s.probe, s.probe.max(s.lo));
    }

    /// The tile's Newton steps on a head's bound over its segment.
    fn newton(&self, k: &mut KernelBuilder, s: &WarpSegment) {
        k.warp_sync(); // lanes read the candidates other lanes appended
        let hi = k.let_("whi_b", s.hi);
        for _ in 0..self.tile.newton_steps {
            let seg = (self.bufs.lb, s.base, s.count);
            let (s0, s1) = threshold_sums(k, self.spec, seg, self.lane.i32(), WARP, s.probe);
            let tot = k.warp_allreduce_many(&[(Reduce::Sum, s0.e()), (Reduce::Sum, s1.e())]);
            let f = k.let_("wf", tot[0] - 1.0f32);
            let next = newton_update(k, self.spec.alpha, s.probe, s.lo, hi, f, tot[1]);
            k.assign(s.probe, next);
        }
    }

    /// Compact the segment in place to the candidates whose upper bound clears `lo`, a window
    /// of 32 at a time. A window's writes land at or below its reads (a warp sync between
    /// them), later windows read above them, and only this warp touches the segment.
    fn prune(&self, k: &mut KernelBuilder, s: &WarpSegment) {
        let bufs = self.bufs;
        let wp = k.let_typed("wwp", Scalar::I32, 0);
        k.for_("ww0", 0i32, s.count, WARP as i32, |k, w0| {
            let i = k.let_("wpi", w0.clone() + self.lane.i32());
            let inside = k.let_("winside", i.lt(s.count));
            let at = k.let_("wpat", s.base + select(inside, i, w0).i64());
            let (lb, ub, iv) = bufs.load(k, at);
            let keep = k.let_("wkeep_p", inside.and(ub.gt(s.lo)));
            let (rank, count) = k.warp_rank(keep, self.below);
            let count = k.let_("wkept", count);
            k.warp_sync(); // every lane's reads of the window before any lane's writes into it
            k.if_(keep, |k| {
                let dst = k.let_("wdst", s.base + (wp + rank).i64());
                bufs.store(k, dst, lb, ub, &|_| iv.e());
            });
            k.assign(wp, wp + count);
        });
        k.assign(s.count, wp);
    }

    /// After the last chunk: adopt the CTA's best bound, tighten and prune once more (nothing
    /// is published any more), and write every segment's count and bound. Every thread of the
    /// block must call this (it synchronises).
    pub fn finish(&self, k: &mut KernelBuilder) {
        k.barrier(); // every warp has published its last bound
        for (g, s) in self.segs.iter().enumerate() {
            let best = k.let_("wbest", from_order_key(self.shared_bound.at(g as u32)));
            k.assign(s.filter, s.filter.max(best));
            if let Some(hb) = &self.global {
                let v = k.let_typed("wgbest_l0", Scalar::I32, i32::MIN as i64);
                k.if_(self.lane.eq_(0u32), |k| {
                    let r = hb.read(k, g);
                    k.assign(v, r);
                });
                let v = k.shuffle(ShuffleMode::Idx, v, u32c(0));
                k.assign(s.filter, s.filter.max(from_order_key(v)));
            }
            self.gather_bound(k, s);
            k.if_(s.count.gt(0i32), |k| {
                self.newton(k, s);
                self.prune(k, s);
            });
            let bufs = self.bufs;
            k.if_(self.lane.eq_(0u32), |k| {
                k.store(bufs.count, s.seg, s.count);
                match &self.global {
                    Some(hb) if hb.seeded => k.store(bufs.bound, s.seg, f32c(f64::NEG_INFINITY)),
                    _ => k.store(bufs.bound, s.seg, s.lo),
                }
                if let Some(hb) = &self.global {
                    // For the head's CTAs still walking.
                    k.atomic_no_ret(AtomicOp::Max, hb.buf, hb.at(g), order_key(s.lo));
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_abi::DType;
    use entkv_dsl::interp::{run, Arg, HostBuffer, LaunchDims};

    /// Run a warp stream of one head over `chunks` (each `threads × tokens` exact scores, token
    /// `tid + r·threads` of the chunk at index `c·chunk + tid + r·threads`; −∞: no token) in the
    /// interpreter, races checked; returns every warp segment's `(count, bound)`.
    fn run_stream(threads: u32, tokens: u32, newton_steps: u32, chunks: &[Vec<f32>]) -> Vec<(i32, f32)> {
        let spec = DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap();
        let tile = DenseTile {
            threads,
            lanes_per_token: 1,
            tokens_per_group: tokens,
            newton_steps,
            score_min_blocks: 0,
            ctas_per_sm: 1,
            finish_threads: threads,
            finish_capacity: threads,
            share_bound: false,
            mma: false,
            seed: false,
            pruned_walk: false,
            lookahead: false,
            sketch_mma: false,
        };
        let chunk = (threads * tokens) as usize;
        let n = chunk * chunks.len();
        let mut k = KernelBuilder::new("warp_stream", threads);
        let z = k.buffer("z", Scalar::F32, Access::Read);
        let bufs = CandidateBufs::declare_bounded(&mut k);
        let seg_index = |_: &mut KernelBuilder, _: u32| i64c(0);
        let split_len = k.let_("split_len", i64c(n as i64));
        let stream = WarpStream::new(&mut k, &spec, &tile, bufs, &seg_index, split_len, None);
        let tid = k.let_("tid", k.thread_idx());
        let owner = k.let_("owner", boolc(true));
        for c in 0..chunks.len() {
            let at: Vec<Var> = (0..tokens)
                .map(|r| k.let_("at", (tid + r * threads).i32() + (c * chunk) as i32))
                .collect();
            let bounds = vec![at
                .iter()
                .map(|a| {
                    let v = k.let_("zv", z.at(*a));
                    (v, v)
                })
                .collect::<Vec<_>>()];
            stream.raise(&mut k, &bounds);
            stream.append(
                &mut k,
                &ChunkScores {
                    bounds,
                    position: &|_, r| at[r].e(),
                    owner,
                },
            );
        }
        stream.finish(&mut k);
        let kernel = k.finish().unwrap();
        let warps = (threads / WARP) as usize;
        let mut hz = HostBuffer::F32(chunks.concat());
        let (mut lb, mut ub, mut idx) = (
            HostBuffer::F32(vec![f32::NAN; n]),
            HostBuffer::F32(vec![f32::NAN; n]),
            HostBuffer::I32(vec![-7; n]),
        );
        let (mut count, mut bound) = (
            HostBuffer::I32(vec![-7; warps]),
            HostBuffer::F32(vec![f32::NAN; warps]),
        );
        run(
            &kernel,
            LaunchDims::linear(1, threads),
            &mut [
                Arg::Buf(&mut hz),
                Arg::Buf(&mut lb),
                Arg::Buf(&mut ub),
                Arg::Buf(&mut idx),
                Arg::Buf(&mut count),
                Arg::Buf(&mut bound),
            ],
        )
        .expect("no race, no fault");
        let (count, bound) = (count.as_i32().unwrap(), bound.as_f32().unwrap());
        // Every kept candidate is a token of its warp with its own score.
        let (lb, idx) = (lb.as_f32().unwrap(), idx.as_i32().unwrap());
        let all = chunks.concat();
        for (w, &cnt) in count.iter().enumerate() {
            let seg = &(0..cnt as usize).map(|i| w * n / warps + i).collect::<Vec<_>>();
            for &e in seg {
                let t = idx[e] as usize;
                assert_eq!(
                    (t % chunk) as u32 % threads / WARP,
                    w as u32,
                    "token {t} in warp {w}'s segment"
                );
                assert_eq!(lb[e], all[t], "token {t}'s score");
            }
        }
        count.iter().copied().zip(bound.iter().copied()).collect()
    }

    /// A warp publishes its bound to the CTA: warp 1 sees a 5 in the first chunk, so warp 0
    /// drops all its zeros (≤ 5 − 1), which its own tokens alone would keep (the threshold of
    /// 128 zeros is −1/√128).
    #[test]
    fn warps_share_their_bounds() {
        let mut first = vec![0.0f32; 128];
        first[32] = 5.0; // warp 1's first token
        let got = run_stream(64, 2, 2, &[first, vec![0.0; 128]]);
        assert_eq!(got[1].0, 1, "warp 1 keeps its 5 only: {got:?}");
        assert_eq!(got[0].0, 0, "warp 0 keeps none: {got:?}");
        for (_, b) in &got {
            assert!((4.0..5.0).contains(b), "bound {b} in [4, 5)");
        }
    }

    /// Ties keep every token a candidate: one warp's segment grows to 384, is pruned in place
    /// in windows of 32 when due (past 64, then each time it doubles) and keeps everything.
    #[test]
    fn long_segments_are_compacted_in_place() {
        let got = run_stream(32, 4, 2, &[vec![0.0; 128], vec![0.0; 128], vec![0.0; 128]]);
        assert_eq!(got[0].0, 384, "{got:?}");
        assert!((-1.0..0.0).contains(&got[0].1), "bound {}", got[0].1);
    }

    /// A prune drops what the bound passes: 40 at 0 and 60 at −0.9 (above max − 1) arrive
    /// first; two Newton steps lift the bound to about −0.56 and the prune keeps the 40. The
    /// last chunk's 30 zeros join them.
    #[test]
    fn prunes_drop_candidates_the_bound_passes() {
        let mut first = vec![f32::NEG_INFINITY; 128];
        for (i, v) in first.iter_mut().take(100).enumerate() {
            *v = if i < 40 { 0.0 } else { -0.9 };
        }
        let mut last = vec![f32::NEG_INFINITY; 128];
        last[..30].fill(0.0);
        let got = run_stream(32, 4, 2, &[first, last]);
        assert_eq!(got[0].0, 70, "{got:?}");
        assert!((-0.9..0.0).contains(&got[0].1), "bound {}", got[0].1);
    }
}
