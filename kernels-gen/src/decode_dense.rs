//! Dense (full-cache) α-entmax decode over a contiguous cache `[batch, kv_heads, n, head_dim]`,
//! one query per head. Two kernels; see `entkv_abi::dense` for the contract and why the split
//! candidates are enough for an exact result.
//!
//! Notation as in the spec: `z = (α−1)·q·k/√d` is the entmax-space score, `τ` the threshold,
//! `p_j = [z_j − τ]_+^β` with `β = 1/(α−1)`, and `o = Σ p_j v_j`.

use crate::entmax::{closed_form_tau, newton_update, threshold_terms, weight};
use crate::{scalar_of, KernelGenError};
use entkv_abi::{dense_entry_names, DecodeSpec, DenseTile, MAX_SPLITS};
use entkv_dsl::*;

/// Threshold iterations of the finish pass: the bracket at least halves every step, and closed
/// forms finish in a few steps once the active set settles, so this bound is never reached on
/// real data; it only caps adversarial inputs.
const MAX_SOLVE_ITERS: u32 = 60;
/// Relative step below which the threshold is converged (a few f32 ulps).
const SOLVE_REL_TOL: f64 = 4.0 * f32::EPSILON as f64;

/// One split's candidate segment in the workspace, for one query head of the group.
struct Segment {
    /// Element offset of the segment (i64).
    base: Var,
    /// Candidates currently in the segment (i32, block-uniform).
    count: Var,
    /// Running lower bound on the threshold of the tokens seen so far (block-uniform).
    lo: Var,
    /// Largest score seen so far (block-uniform).
    hi: Var,
    /// Next point to test as a bound (block-uniform, in `[lo, hi]`).
    probe: Var,
}

/// `decode_dense_score`: grid (splits, kv heads, batch).
pub fn score_kernel(spec: &DecodeSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let (name, _) = dense_entry_names(spec, tile);
    let mut k = KernelBuilder::new(name, tile.threads);
    if tile.score_min_blocks > 0 {
        k.set_min_blocks_per_sm(tile.score_min_blocks);
    }
    let q = k.buffer("q", scalar_of(spec.q_dtype), Access::Read);
    let keys = k.buffer("k", scalar_of(spec.kv_dtype), Access::Read);
    let cand_z = k.buffer("cand_z", Scalar::F32, Access::ReadWrite);
    let cand_idx = k.buffer("cand_idx", Scalar::I32, Access::ReadWrite);
    let cand_count = k.buffer("cand_count", Scalar::I32, Access::Write);
    let cand_lb = k.buffer("cand_lb", Scalar::F32, Access::Write);
    let n = k.scalar_param("n", Scalar::I64);
    let chunks = k.scalar_param("chunks_per_split", Scalar::I32);

    let d = spec.head_dim;
    let group = spec.group as usize;
    let lanes = tile.lanes_per_token;
    let dims = d / lanes; // dims each lane multiplies
    let vec = dims.min(16 / spec.kv_dtype.size_bytes()); // elements per 16-byte load
    let chunk_len = tile.chunk_len();
    let warps = tile.threads / WARP;
    let red = k.shared("red", Scalar::F32, warps * 2 * group as u32);
    let scan = k.shared("scan", Scalar::I32, warps);

    let split = k.let_("split", k.block_idx(Axis::X));
    let kvh = k.let_("kvh", k.block_idx(Axis::Y));
    let b = k.let_("b", k.block_idx(Axis::Z));
    let splits = k.let_("splits", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    let q_heads = k.let_("q_heads", kv_heads * spec.group);
    let tid = k.let_("tid", k.thread_idx());
    let sub = k.let_("sub", tid % lanes); // which slice of the row this lane multiplies
    let tgroup = k.let_("tgroup", tid / lanes); // which token this lane's group scores
    let owner = k.let_("owner", sub.eq_(0u32)); // one lane per token counts it
    let row0 = k.let_("row0", (b.i64() * kv_heads.i64() + kvh.i64()) * n.clone());
    let split_len = k.let_("split_len", chunks.clone().i64() * chunk_len as i64);
    let split0 = k.let_("split0", split.i64() * split_len);

    // q' = q·(α−1)/√d in f32, this lane's slice, for every head of the group.
    let scale = spec.z_scale();
    let mut q_regs: Vec<Vec<Var>> = Vec::new();
    let mut segs: Vec<Segment> = Vec::new();
    for g in 0..group {
        let h = k.let_("h", kvh * spec.group + g as u32);
        let base = k.let_("q_base", (b * q_heads + h).i64() * d as i64 + (sub * dims).i64());
        let mut regs = Vec::new();
        for c in 0..dims / vec {
            for x in k.load_vec("q", q, base + (c * vec) as i64, vec) {
                regs.push(k.let_("qs", x.f32() * scale));
            }
        }
        q_regs.push(regs);
        let seg = k.let_("seg", (b * q_heads + h).i64() * splits.i64() + split.i64());
        segs.push(Segment {
            base: k.let_("seg_base", seg * split_len),
            count: k.let_typed("count", Scalar::I32, 0),
            lo: k.let_typed("lo", Scalar::F32, f64::NEG_INFINITY),
            hi: k.let_typed("hi", Scalar::F32, f64::NEG_INFINITY),
            probe: k.let_typed("probe", Scalar::F32, f64::NEG_INFINITY),
        });
    }

    k.for_("chunk", 0i32, chunks.clone(), 1i32, |k, chunk| {
        let tok0 = k.let_("tok0", split0 + chunk.i64() * chunk_len as i64);
        // Uniform: a whole chunk past the end is skipped by every thread.
        k.if_(tok0.lt(n.clone()), |k| {
            let z = score_chunk(k, spec, tile, keys, &q_regs, row0, tok0, n.clone(), tgroup, sub);
            let (zs, toks) = (&z.0, &z.1);
            // Raise every bound to (running max − 1): τ ≥ max − 1 always.
            let maxes: Vec<(Reduce, Expr)> = zs
                .iter()
                .map(|zg| {
                    let m = zg.iter().fold(f32c(f64::NEG_INFINITY), |m, v| m.max(*v));
                    (Reduce::Max, m)
                })
                .collect();
            let m = k.block_allreduce_many(&maxes, red);
            for (s, m) in segs.iter().zip(&m) {
                k.assign(s.hi, s.hi.max(*m));
                k.assign(s.lo, s.lo.max(s.hi - 1.0f32));
                k.assign(s.probe, s.probe.max(s.lo));
            }
            // Append this chunk's tokens above the bound, in thread order.
            let added = k.let_typed("added", Scalar::I32, 0);
            for (g, s) in segs.iter().enumerate() {
                let keep: Vec<Expr> = zs[g].iter().map(|zv| owner.and(zv.gt(s.lo))).collect();
                let count = keep
                    .iter()
                    .fold(i32c(0), |c, kp| c + select(kp.clone(), 1i32, 0i32));
                let (excl, total) = k.block_exclusive_scan(count, scan);
                let pos = k.let_("pos", s.base + (s.count + excl).i64());
                for ((kp, zv), t) in keep.iter().zip(&zs[g]).zip(toks) {
                    k.if_(kp.clone(), |k| {
                        k.store(cand_z, pos, *zv);
                        k.store(cand_idx, pos, t.i32());
                        k.assign(pos, pos + 1i64);
                    });
                }
                k.assign(s.count, s.count + total);
                k.assign(added, added + total);
            }
            // Tighten the bounds over everything kept so far (a superset of the tokens above
            // the seen tokens' threshold), then drop what fell below.
            k.if_(added.gt(0i32), |k| {
                k.barrier(); // the appends above are read back below
                             // f(hi) = −1 < 0 at the running max: the upper end of this chunk's brackets.
                let his: Vec<Var> = segs.iter().map(|s| k.let_("hi_b", s.hi)).collect();
                for _ in 0..tile.newton_steps {
                    newton_over_segments(k, spec, tile, &segs, &his, cand_z, red);
                }
                for s in &segs {
                    k.if_(s.count.gt(tile.threads as i32), |k| {
                        prune(k, tile, s, cand_z, cand_idx, scan)
                    });
                }
            });
        });
    });
    for (g, s) in segs.iter().enumerate() {
        prune(&mut k, tile, s, cand_z, cand_idx, scan);
        let h = kvh * spec.group + g as u32;
        let seg = (b * q_heads + h).i64() * splits.i64() + split.i64();
        k.if_(tid.eq_(0u32), |k| {
            k.store(cand_count, seg.clone(), s.count);
            k.store(cand_lb, seg, s.lo);
        });
    }
    Ok(k.finish()?)
}

/// Score one chunk: `z[g][r]` for every head `g` of the group and token `r` of this lane group
/// (−∞ past the end), and the token indices.
#[allow(clippy::too_many_arguments)]
fn score_chunk(
    k: &mut KernelBuilder,
    spec: &DecodeSpec,
    tile: &DenseTile,
    keys: Buf,
    q_regs: &[Vec<Var>],
    row0: Var,
    tok0: Var,
    n: Expr,
    tgroup: Var,
    sub: Var,
) -> (Vec<Vec<Var>>, Vec<Var>) {
    let d = spec.head_dim;
    let lanes = tile.lanes_per_token;
    let dims = d / lanes;
    let vec = dims.min(16 / spec.kv_dtype.size_bytes());
    let token_groups = tile.threads / lanes;
    let mut z: Vec<Vec<Var>> = vec![Vec::new(); q_regs.len()];
    let mut toks = Vec::new();
    // All loads of the chunk first, so they are in flight together.
    let mut rows = Vec::new();
    for r in 0..tile.tokens_per_group {
        let t = k.let_("t", tok0 + (tgroup + r * token_groups).i64());
        let valid = k.let_("valid", t.lt(n.clone()));
        let t_load = select(valid, t, n.clone() - 1i64);
        let row = k.let_("krow", (row0 + t_load) * d as i64 + (sub * dims).i64());
        let mut kv = Vec::new();
        for c in 0..dims / vec {
            kv.extend(k.load_vec("k", keys, row + (c * vec) as i64, vec));
        }
        rows.push((t, valid, kv));
    }
    for (t, valid, kv) in rows {
        let partial: Vec<(Reduce, Expr)> = q_regs
            .iter()
            .map(|qg| {
                let dot = kv
                    .iter()
                    .zip(qg)
                    .fold(f32c(0.0), |acc, (kx, qx)| fma(*qx, kx.f32(), acc));
                (Reduce::Sum, dot)
            })
            .collect();
        let dots = k.warp_allreduce_width(&partial, lanes);
        for (g, dot) in dots.iter().enumerate() {
            z[g].push(k.let_("z", select(valid, *dot, f32c(f64::NEG_INFINITY))));
        }
        toks.push(t);
    }
    (z, toks)
}

/// One bracketed Newton step of every head's bound: evaluate `f = Σ [z − probe]_+^β − 1` over
/// the segment (which holds every seen token above `lo`, so this is the seen tokens' threshold
/// function), move `lo` up to the probe where `f ≥ 0` certifies it, and take the next probe.
fn newton_over_segments(
    k: &mut KernelBuilder,
    spec: &DecodeSpec,
    tile: &DenseTile,
    segs: &[Segment],
    his: &[Var],
    cand_z: Buf,
    red: Buf,
) {
    let tid = k.thread_idx();
    let mut sums = Vec::new();
    for s in segs {
        let s0 = k.let_typed("s0", Scalar::F32, 0.0);
        let s1 = k.let_typed("s1", Scalar::F32, 0.0);
        k.for_("i", tid.clone().i32(), s.count, tile.threads as i32, |k, i| {
            let zv = k.let_("zc", cand_z.at(s.base + i.i64()));
            let (w, w1) = threshold_terms(spec.alpha, zv, s.probe);
            k.assign(s0, s0 + w);
            k.assign(s1, s1 + w1);
        });
        sums.push((Reduce::Sum, s0.e()));
        sums.push((Reduce::Sum, s1.e()));
    }
    let tot = k.block_allreduce_many(&sums, red);
    for ((g, s), hi) in segs.iter().enumerate().zip(his) {
        let f = k.let_("f", tot[2 * g] - 1.0f32);
        let next = newton_update(k, spec.alpha, s.probe, s.lo, *hi, f, tot[2 * g + 1]);
        k.assign(s.probe, next);
    }
}

/// Compact a segment in place to the candidates above its bound (thread order kept).
fn prune(k: &mut KernelBuilder, tile: &DenseTile, s: &Segment, cand_z: Buf, cand_idx: Buf, scan: Buf) {
    let tid = k.let_("tid_p", k.thread_idx());
    let wp = k.let_typed("wp", Scalar::I32, 0);
    k.for_("w0", 0i32, s.count, tile.threads as i32, |k, w0| {
        let i = k.let_("i", w0 + tid.i32());
        let inside = k.let_("inside", i.lt(s.count));
        let at = k.let_("at", s.base + select(inside, i, 0i32).i64());
        let zv = k.let_("zp", cand_z.at(at));
        let iv = k.let_("ip", cand_idx.at(at));
        let keep = k.let_("keep", inside.and(zv.gt(s.lo)));
        // The scan's barriers order this window's reads before any of its writes; writes land
        // below the next window, so it needs no extra barrier.
        let (excl, total) = k.block_exclusive_scan(select(keep, 1i32, 0i32), scan);
        k.if_(keep, |k| {
            let dst = s.base + (wp + excl).i64();
            k.store(cand_z, dst.clone(), zv);
            k.store(cand_idx, dst, iv);
        });
        k.assign(wp, wp + total);
    });
    k.assign(s.count, wp);
    k.barrier(); // later passes read the compacted segment
}

/// Where the finish pass reads candidates from.
#[derive(Clone, Copy)]
enum Source {
    /// Gathered into shared memory, `total` of them.
    Shared { z: Buf, idx: Buf, total: Var },
    /// Straight from the workspace segments: flat candidate `i` is found by a binary search of
    /// the per-split offsets.
    Global {
        z: Buf,
        idx: Buf,
        total: Var,
        locate: Locate,
    },
}

/// Maps a flat candidate index to its workspace element (offsets of the head's splits live in
/// shared memory).
#[derive(Clone, Copy)]
struct Locate {
    offsets: Buf,
    splits: Var,
    seg0: Var,
    split_len: Var,
}

impl Locate {
    /// Workspace element of flat candidate `i` (i32): the split is the last one whose offset is
    /// ≤ i (empty splits share an offset with their successor and are skipped).
    fn element(&self, k: &mut KernelBuilder, i: Expr) -> Var {
        let i = k.let_("flat", i);
        let s = k.let_typed("split_of", Scalar::I32, 0);
        let mut step = MAX_SPLITS.next_power_of_two() / 2;
        while step > 0 {
            let probe = k.let_("probe", s + step as i32);
            let ok = probe
                .lt(self.splits)
                .and(self.offsets.at(probe.e().min(self.splits)).le(i));
            k.assign(s, select(ok, probe, s));
            step /= 2;
        }
        let j = i - self.offsets.at(s);
        k.let_("elem", (self.seg0 + s.i64()) * self.split_len + j.i64())
    }
}

impl Source {
    /// Emit `body(z, idx)` for every candidate, candidate `i` going to worker `i % workers`
    /// (`worker` is this thread's worker number).
    fn for_each(
        &self,
        k: &mut KernelBuilder,
        worker: Expr,
        workers: u32,
        body: &dyn Fn(&mut KernelBuilder, Var, Var),
    ) {
        match *self {
            Source::Shared { z, idx, total } => {
                k.for_("i", worker.i32(), total, workers as i32, |k, i| {
                    let zv = k.let_("cz", z.at(i.clone()));
                    let iv = k.let_("ci", idx.at(i));
                    body(k, zv, iv);
                });
            }
            Source::Global {
                z,
                idx,
                total,
                locate,
            } => {
                k.for_("i", worker.i32(), total, workers as i32, |k, i| {
                    let at = locate.element(k, i);
                    let zv = k.let_("cz", z.at(at));
                    let iv = k.let_("ci", idx.at(at));
                    body(k, zv, iv);
                });
            }
        }
    }
}

/// `decode_dense_finish`: grid (query heads, batch).
pub fn finish_kernel(spec: &DecodeSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let (_, name) = dense_entry_names(spec, tile);
    let threads = tile.finish_threads;
    let mut k = KernelBuilder::new(name, threads);
    // The grid is only batch × heads CTAs; without an occupancy floor ptxas trades spills for
    // occupancy this kernel can never use.
    k.set_min_blocks_per_sm(1);
    let cand_z = k.buffer("cand_z", Scalar::F32, Access::Read);
    let cand_idx = k.buffer("cand_idx", Scalar::I32, Access::Read);
    let cand_count = k.buffer("cand_count", Scalar::I32, Access::Read);
    let cand_lb = k.buffer("cand_lb", Scalar::F32, Access::Read);
    let values = k.buffer("v", scalar_of(spec.kv_dtype), Access::Read);
    let out = k.buffer("out", scalar_of(spec.out_dtype), Access::Write);
    let tau_out = k.buffer("tau", Scalar::F32, Access::Write);
    let support_out = k.buffer("support", Scalar::I32, Access::Write);
    let splits = k.scalar_param("splits", Scalar::I32);
    let split_len = k.scalar_param("split_len", Scalar::I64);
    let n = k.scalar_param("n", Scalar::I64);

    let d = spec.head_dim;
    let warps = threads / WARP;
    let cap = tile.finish_capacity;
    let row_lanes = tile.finish_row_lanes(spec);
    let vec = d / row_lanes;
    let row_groups = threads / row_lanes;
    let red = k.shared("red", Scalar::F32, warps * 5);
    let red_i = k.shared("red_i", Scalar::I32, warps * 2);
    let offsets = k.shared("offsets", Scalar::I32, MAX_SPLITS + 1);
    let sh_z = k.shared("cand_z_s", Scalar::F32, cap);
    let sh_idx = k.shared("cand_idx_s", Scalar::I32, cap);
    let acc_s = k.shared("acc_s", Scalar::F32, row_groups * d);

    let h = k.let_("h", k.block_idx(Axis::X));
    let b = k.let_("b", k.block_idx(Axis::Y));
    let q_heads = k.let_("q_heads", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", q_heads / spec.group);
    let kvh = k.let_("kvh", h / spec.group);
    let tid = k.let_("tid", k.thread_idx());
    let head = k.let_("head", (b * q_heads + h).i64());
    let seg0 = k.let_("seg0", head * splits.clone().i64());
    let splits_v = k.let_("splits_v", splits.clone());
    let split_len_v = k.let_("split_len_v", split_len);

    // Per-split offsets (exclusive scan of the counts, `splits` at a time), the total, and the
    // best split lower bound (every split's bound is ≤ τ).
    let base = k.let_typed("base", Scalar::I32, 0);
    let lb0 = k.let_typed("lb", Scalar::F32, f64::NEG_INFINITY);
    k.for_("c0", 0i32, splits_v, threads as i32, |k, c0| {
        let s = k.let_("s", c0 + tid.i32());
        let inside = k.let_("inside", s.lt(splits_v));
        let seg = k.let_("seg", seg0 + select(inside, s, 0i32).i64());
        let cnt = k.let_("cnt", select(inside, cand_count.at(seg), 0i32));
        k.assign(lb0, select(inside, lb0.max(cand_lb.at(seg)), lb0));
        let (excl, chunk_total) = k.block_exclusive_scan(cnt, red_i);
        k.if_(inside, |k| k.store(offsets, s, base + excl));
        k.assign(base, base + chunk_total);
    });
    let total = k.let_("total", base);
    k.if_(tid.eq_(0u32), |k| k.store(offsets, splits_v, total));
    k.barrier();
    let lb = k.block_allreduce(Reduce::Max, lb0, red);
    let locate = Locate {
        offsets,
        splits: splits_v,
        seg0,
        split_len: split_len_v,
    };

    let v_row0 = k.let_("v_row0", (b.i64() * kv_heads.i64() + kvh.i64()) * n);
    let ctx = FinishCtx {
        spec: *spec,
        threads,
        row_lanes,
        row_groups,
        vec,
        tid,
        lb,
        red,
        red_i,
        acc_s,
        values,
        v_row0,
        out,
        tau_out,
        support_out,
        head,
    };
    let global = Source::Global {
        z: cand_z,
        idx: cand_idx,
        total,
        locate,
    };
    k.if_else(
        total.le(cap as i32),
        |k| {
            // Stage in shared memory (flat order = split order: deterministic).
            k.for_("i", tid.i32(), total, threads as i32, |k, i| {
                let at = locate.element(k, i.clone());
                k.store(sh_z, i.clone(), cand_z.at(at));
                k.store(sh_idx, i, cand_idx.at(at));
            });
            k.barrier();
            ctx.solve_and_write(
                k,
                &Source::Shared {
                    z: sh_z,
                    idx: sh_idx,
                    total,
                },
            );
        },
        |k| ctx.solve_and_write(k, &global),
    );
    Ok(k.finish()?)
}

struct FinishCtx {
    spec: DecodeSpec,
    threads: u32,
    row_lanes: u32,
    row_groups: u32,
    vec: u32,
    tid: Var,
    lb: Var,
    red: Buf,
    red_i: Buf,
    acc_s: Buf,
    values: Buf,
    v_row0: Var,
    out: Buf,
    tau_out: Buf,
    support_out: Buf,
    head: Var,
}

impl FinishCtx {
    /// Solve τ exactly over the candidates, then write `o = Σ p_j v_j / Σ p_j`, τ and the
    /// support size.
    fn solve_and_write(&self, k: &mut KernelBuilder, src: &Source) {
        let alpha = self.spec.alpha;
        let tid = self.tid;
        let threads = self.threads;

        // The global maximum is a candidate of its split.
        let mx = k.let_typed("mx", Scalar::F32, f64::NEG_INFINITY);
        src.for_each(k, tid.e(), threads, &|k, z, _| k.assign(mx, mx.max(z)));
        let m = k.block_allreduce(Reduce::Max, mx, self.red);

        let lo = k.let_("lo", (m - 1.0f32).max(self.lb));
        let hi = k.let_("hi", m);
        let tau = k.let_("tau", lo);
        let done = k.let_("done", false);
        let it = k.let_typed("it", Scalar::I32, 0);
        k.while_(done.not().and(it.lt(MAX_SOLVE_ITERS as i32)), |k| {
            let acc: Vec<Var> = (0..5).map(|_| k.let_typed("acc", Scalar::F32, 0.0)).collect();
            src.for_each(k, tid.e(), threads, &|k, z, _| {
                let (w, w1) = threshold_terms(alpha, z, tau);
                let active = z.gt(tau);
                let u = z - m;
                k.assign(acc[0], acc[0] + w);
                k.assign(acc[1], acc[1] + w1);
                k.assign(acc[2], acc[2] + select(active.clone(), 1.0f32, 0.0f32));
                k.assign(acc[3], acc[3] + select(active.clone(), u.clone(), 0.0f32));
                k.assign(acc[4], acc[4] + select(active, u.clone() * u, 0.0f32));
            });
            let items: Vec<(Reduce, Expr)> = acc.iter().map(|a| (Reduce::Sum, a.e())).collect();
            let s = k.block_allreduce_many(&items, self.red);
            let f = k.let_("f", s[0] - 1.0f32);
            let newton = newton_update(k, alpha, tau, lo, hi, f, s[1]);
            let next = match closed_form_tau(alpha, m, s[2], s[3], s[4]) {
                Some(cf) => {
                    let cf = k.let_("tau_cf", cf);
                    let inside = cf.ge(lo).and(cf.le(hi));
                    k.let_("tau_next", select(inside, cf, newton))
                }
                None => newton,
            };
            let tol = tau.abs().max(1.0f32) * SOLVE_REL_TOL;
            let converged = (next - tau)
                .abs()
                .le(tol.clone())
                .or((hi - lo).le(tol))
                .or(f.eq_(0.0f32));
            k.assign(done, converged);
            k.assign(tau, next);
            k.assign(it, it + 1i32);
        });

        // Output: each row group accumulates p_j·v_j over its candidates in f32.
        let d = self.spec.head_dim;
        let rl = k.let_("rl", tid % self.row_lanes);
        let rg = k.let_("rg", tid / self.row_lanes);
        let acc: Vec<Var> = (0..self.vec)
            .map(|_| k.let_typed("o", Scalar::F32, 0.0))
            .collect();
        let psum = k.let_typed("psum", Scalar::F32, 0.0);
        let supp = k.let_typed("supp", Scalar::I32, 0);
        let vec = self.vec;
        src.for_each(k, rg.e(), self.row_groups, &|k, z, idx| {
            k.if_(z.gt(tau), |k| {
                let p = k.let_("p", weight(alpha, z - tau));
                let row = (self.v_row0 + idx.i64()) * d as i64 + (rl * vec).i64();
                let vals = k.load_vec("v", self.values, row, vec);
                for (a, v) in acc.iter().zip(vals) {
                    k.assign(*a, fma(p, v.f32(), *a));
                }
                k.assign(psum, psum + p);
                k.assign(supp, supp + 1i32);
            });
        });
        for (i, a) in acc.iter().enumerate() {
            k.store(self.acc_s, rg * d + rl * vec + i as u32, *a);
        }
        k.barrier();
        let first = rl.eq_(0u32);
        let ps = k.block_allreduce(Reduce::Sum, select(first.clone(), psum, 0.0f32), self.red);
        let sp = k.block_allreduce(Reduce::Sum, select(first, supp, 0i32), self.red_i);
        let out = self.out;
        let head = self.head;
        let row_groups = self.row_groups;
        let acc_s = self.acc_s;
        let out_ty = out.elem;
        k.for_("dd", tid, d, threads, |k, dd| {
            let o = k.let_typed("osum", Scalar::F32, 0.0);
            for g in 0..row_groups {
                k.assign(o, o + acc_s.at(dd.clone() + g * d));
            }
            k.store(out, head * d as i64 + dd.i64(), (o / ps).cast(out_ty));
        });
        k.if_(tid.eq_(0u32), |k| {
            k.store(self.tau_out, head, tau);
            k.store(self.support_out, head, sp);
        });
    }
}
