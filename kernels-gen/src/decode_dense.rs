//! Dense (full-cache) α-entmax decode over a contiguous cache `[batch, kv_heads, n, head_dim]`,
//! one query per head. Two kernels; see `entkv_abi::dense` for the contract and why the split
//! candidates are enough for an exact result.
//!
//! Notation as in the spec: `z = (α−1)·q·k/√d` is the entmax-space score, `τ` the threshold,
//! `p_j = [z_j − τ]_+^β` with `β = 1/(α−1)`, and `o = Σ p_j v_j`.

use crate::entmax::{closed_form_tau, newton_update, threshold_terms, weight};
use crate::{scalar_of, KernelGenError};
use entkv_abi::{dense_entry_names, DecodeSpec, DenseTile};
use entkv_dsl::*;

/// Threshold iterations of the finish pass: the bracket at least halves every step, and closed
/// forms finish in a few steps once the active set settles, so this bound is never reached on
/// real data; it only caps adversarial inputs.
const MAX_SOLVE_ITERS: u32 = 60;
/// Relative step below which the threshold is converged (a few f32 ulps).
const SOLVE_REL_TOL: f64 = 4.0 * f32::EPSILON as f64;

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
    let cand_z = k.buffer("cand_z", Scalar::F32, Access::Write);
    let cand_idx = k.buffer("cand_idx", Scalar::I32, Access::Write);
    let cand_count = k.buffer("cand_count", Scalar::I32, Access::Write);
    let cand_lb = k.buffer("cand_lb", Scalar::F32, Access::Write);
    let n = k.scalar_param("n", Scalar::I64);

    let d = spec.head_dim;
    let group = spec.group;
    let lanes = tile.lanes_per_token;
    let dims = d / lanes; // dims each lane multiplies
    let vec = dims.min(16 / spec.kv_dtype.size_bytes()); // elements per 16-byte load
    let token_groups = tile.threads / lanes;
    let split_len = tile.split_len();
    let warps = tile.threads / WARP;
    let red = k.shared("red", Scalar::F32, warps * 2 * group);
    let scan = k.shared("scan", Scalar::I32, warps);

    let split = k.let_("split", k.block_idx(Axis::X));
    let kvh = k.let_("kvh", k.block_idx(Axis::Y));
    let b = k.let_("b", k.block_idx(Axis::Z));
    let splits = k.let_("splits", k.grid_dim(Axis::X));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    let tid = k.let_("tid", k.thread_idx());
    let sub = k.let_("sub", tid % lanes); // which slice of the row this lane multiplies
    let tgroup = k.let_("tgroup", tid / lanes); // which token this lane's group scores
    let owner = k.let_("owner", sub.eq_(0u32)); // one lane per token counts it
    let row0 = k.let_("row0", (b.i64() * kv_heads.i64() + kvh.i64()) * n.clone());

    // q' = q·(α−1)/√d in f32, this lane's slice, for every head of the group.
    let scale = spec.z_scale();
    let mut q_regs: Vec<Vec<Var>> = Vec::new();
    for g in 0..group {
        let h = (kvh * group + g).i64();
        let base = k.let_(
            "q_base",
            (b.i64() * (kv_heads.i64() * group as i64) + h) * d as i64 + (sub * dims).i64(),
        );
        let mut regs = Vec::new();
        for c in 0..dims / vec {
            for x in k.load_vec("q", q, base + (c * vec) as i64, vec) {
                regs.push(k.let_("qs", x.f32() * scale));
            }
        }
        q_regs.push(regs);
    }

    // z for every (head, token) this lane group owns; −∞ past the end of the sequence.
    let tok0 = k.let_("tok0", split.i64() * split_len as i64);
    let mut z: Vec<Vec<Var>> = vec![Vec::new(); group as usize];
    let mut tok: Vec<Var> = Vec::new();
    for r in 0..tile.tokens_per_group {
        let t = k.let_("t", tok0 + (tgroup + r * token_groups).i64());
        let valid = k.let_("valid", t.lt(n.clone()));
        let t_load = select(valid, t, n.clone() - 1i64);
        let row = k.let_("krow", (row0 + t_load) * d as i64 + (sub * dims).i64());
        let mut kv = Vec::new();
        for c in 0..dims / vec {
            for x in k.load_vec("k", keys, row + (c * vec) as i64, vec) {
                kv.push(x.f32());
            }
        }
        let partial: Vec<(Reduce, Expr)> = (0..group as usize)
            .map(|g| {
                let dot = kv
                    .iter()
                    .zip(&q_regs[g])
                    .fold(f32c(0.0), |acc, (kx, qx)| fma(*qx, kx.clone(), acc));
                (Reduce::Sum, dot)
            })
            .collect();
        let dots = k.warp_allreduce_width(&partial, lanes);
        for g in 0..group as usize {
            z[g].push(k.let_("z", select(valid, dots[g], f32c(f64::NEG_INFINITY))));
        }
        tok.push(t);
    }

    // Split maximum M per head; the threshold over this split lies in [M − 1, M).
    let maxes: Vec<(Reduce, Expr)> = z
        .iter()
        .map(|zs| {
            let m = zs.iter().fold(f32c(f64::NEG_INFINITY), |m, v| m.max(*v));
            (Reduce::Max, m)
        })
        .collect();
    let m = k.block_allreduce_many(&maxes, red);
    let lo: Vec<Var> = m.iter().map(|m| k.let_("lo", *m - 1.0f32)).collect();
    let hi: Vec<Var> = m.iter().map(|m| k.let_("hi", *m)).collect();
    let tau: Vec<Var> = lo.iter().map(|l| k.let_("tau", *l)).collect();

    // Newton from below on the split's own threshold function: every accepted `lo` is a lower
    // bound on the split's threshold, hence on the global one.
    for _ in 0..tile.newton_steps {
        let mut sums = Vec::new();
        for g in 0..group as usize {
            let (mut s0, mut s1) = (f32c(0.0), f32c(0.0));
            for zv in &z[g] {
                let (w, w1) = threshold_terms(spec.alpha, *zv, tau[g]);
                s0 = s0 + select(owner, w, 0.0f32);
                s1 = s1 + select(owner, w1, 0.0f32);
            }
            sums.push((Reduce::Sum, s0));
            sums.push((Reduce::Sum, s1));
        }
        let tot = k.block_allreduce_many(&sums, red);
        for g in 0..group as usize {
            let f = k.let_("f", tot[2 * g] - 1.0f32);
            let next = newton_update(&mut k, spec.alpha, tau[g], lo[g], hi[g], f, tot[2 * g + 1]);
            k.assign(tau[g], next);
        }
    }

    // Candidates z > lo, compacted in thread order into this split's workspace segment.
    let q_heads = k.let_("q_heads", kv_heads * group);
    for g in 0..group as usize {
        let count = z[g]
            .iter()
            .fold(i32c(0), |c, zv| c + select(owner.and(zv.gt(lo[g])), 1i32, 0i32));
        let (excl, total) = k.block_exclusive_scan(count, scan);
        let h = kvh * group + g as u32;
        let seg = k.let_("seg", (b * q_heads + h).i64() * splits.i64() + split.i64());
        let pos = k.let_("pos", seg * split_len as i64 + excl.i64());
        for (r, zv) in z[g].iter().enumerate() {
            let t = tok[r];
            k.if_(owner.and(zv.gt(lo[g])), |k| {
                k.store(cand_z, pos, *zv);
                k.store(cand_idx, pos, t.i32());
                k.assign(pos, pos + 1i64);
            });
        }
        k.if_(tid.eq_(0u32), |k| {
            k.store(cand_count, seg, total);
            k.store(cand_lb, seg, lo[g]);
        });
    }
    Ok(k.finish()?)
}

/// Where the finish pass reads candidates from.
#[derive(Clone)]
enum Source {
    /// Gathered into shared memory, `total` of them.
    Shared { z: Buf, idx: Buf, total: Var },
    /// Straight from the per-split workspace segments (more than fit in shared memory).
    Global {
        z: Buf,
        idx: Buf,
        count: Buf,
        seg0: Var,
        splits: Expr,
        split_len: u32,
    },
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
        match self {
            &Source::Shared { z, idx, total } => {
                k.for_("i", worker.i32(), total, workers as i32, |k, i| {
                    let zv = k.let_("cz", z.at(i.clone()));
                    let iv = k.let_("ci", idx.at(i));
                    body(k, zv, iv);
                });
            }
            Source::Global {
                z,
                idx,
                count,
                seg0,
                splits,
                split_len,
            } => {
                let (z, idx, count, seg0, split_len) = (*z, *idx, *count, *seg0, *split_len);
                k.for_("s", 0i64, splits.clone().i64(), 1i64, |k, s| {
                    let seg = k.let_("seg", seg0 + s);
                    let c = k.let_("cnt", count.at(seg).i64());
                    k.for_("j", worker.i64(), c, workers as i64, |k, j| {
                        let at = k.let_("at", seg * split_len as i64 + j);
                        let zv = k.let_("cz", z.at(at));
                        let iv = k.let_("ci", idx.at(at));
                        body(k, zv, iv);
                    });
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
    let n = k.scalar_param("n", Scalar::I64);

    let d = spec.head_dim;
    let warps = threads / WARP;
    let cap = tile.finish_capacity;
    let row_lanes = tile.finish_row_lanes(spec);
    let vec = d / row_lanes;
    let row_groups = threads / row_lanes;
    let red = k.shared("red", Scalar::F32, warps * 5);
    let red_i = k.shared("red_i", Scalar::I32, warps * 2);
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

    // Candidate total and the best split lower bound (every split's bound is ≤ τ).
    let total0 = k.let_typed("total", Scalar::I32, 0);
    let lb0 = k.let_typed("lb", Scalar::F32, f64::NEG_INFINITY);
    k.for_("s", tid.i32(), splits.clone(), threads as i32, |k, s| {
        let seg = seg0 + s.i64();
        k.assign(total0, total0 + cand_count.at(seg.clone()));
        k.assign(lb0, lb0.max(cand_lb.at(seg)));
    });
    let total = k.block_allreduce(Reduce::Sum, total0, red_i);
    let lb = k.block_allreduce(Reduce::Max, lb0, red);

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

    k.if_else(
        total.le(cap as i32),
        |k| {
            // Gather in split order (deterministic), `threads` splits at a time.
            let base = k.let_typed("base", Scalar::I32, 0);
            k.for_("c0", 0i32, splits.clone(), threads as i32, |k, c0| {
                let s = k.let_("s", c0 + tid.i32());
                let cnt = k.let_typed("cnt", Scalar::I32, 0);
                let seg = k.let_("seg", seg0 + s.i64());
                k.if_(s.lt(splits.clone()), |k| k.assign(cnt, cand_count.at(seg)));
                let (excl, chunk_total) = k.block_exclusive_scan(cnt, red_i);
                let dst0 = k.let_("dst0", base + excl);
                k.for_("j", 0i32, cnt, 1i32, |k, j| {
                    let src = seg * tile.split_len() as i64 + j.clone().i64();
                    k.store(sh_z, dst0 + j.clone(), cand_z.at(src.clone()));
                    k.store(sh_idx, dst0 + j, cand_idx.at(src));
                });
                k.assign(base, base + chunk_total);
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
        |k| {
            let src = Source::Global {
                z: cand_z,
                idx: cand_idx,
                count: cand_count,
                seg0,
                splits: splits.clone(),
                split_len: tile.split_len(),
            };
            ctx.solve_and_write(k, &src);
        },
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
