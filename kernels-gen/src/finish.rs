//! Finish passes (one block per query head): gather a head's candidates from the score pass's
//! split segments, solve the exact entmax threshold over them, and write the output.

use crate::entmax::{closed_form_tau, newton_update, threshold_terms, weight};
use crate::tokens::TokenSource;
use entkv_abi::{DecodeSpec, MAX_SPLITS};
use entkv_dsl::*;

/// Threshold iterations: the bracket at least halves every step, and closed forms finish in a
/// few steps once the active set settles, so this bound only caps adversarial inputs.
pub const MAX_SOLVE_ITERS: u32 = 60;
/// Relative step below which the threshold is converged (a few f32 ulps).
pub const SOLVE_REL_TOL: f64 = 4.0 * f32::EPSILON as f64;

/// Whether a threshold iteration from `tau` to `next` (bracket `[lo, hi]`, `f` the threshold
/// function at `tau`) has converged: a step or a bracket within [`SOLVE_REL_TOL`], or a root hit.
pub fn solve_converged(tau: Var, next: Var, lo: Var, hi: Var, f: Var) -> Expr {
    let tol = tau.abs().max(1.0f32) * SOLVE_REL_TOL;
    (next - tau)
        .abs()
        .le(tol.clone())
        .or((hi - lo).le(tol))
        .or(f.eq_(0.0f32))
}

/// What a solved threshold `tau` certainly lies above: `tau` less twice the solver's tolerance.
/// Tokens at or below it cannot be in the support.
pub fn solver_cut(tau: Expr) -> Expr {
    tau.clone() - tau.abs().max(1.0f32) * (2.0 * SOLVE_REL_TOL)
}

/// Maps a flat candidate index to its workspace element (the offsets of the head's splits live
/// in shared memory).
#[derive(Clone, Copy)]
pub struct Locate {
    offsets: Buf,
    splits: Var,
    /// The largest power of two ≤ `splits`: the binary search's first step.
    top_step: Var,
    seg0: Var,
    split_len: Var,
}

impl Locate {
    /// Workspace element of flat candidate `i` (i32): the split is the last one whose offset is
    /// ≤ i (empty splits share an offset with their successor and are skipped). A binary
    /// search of log2(splits) probes (steps top_step, top_step/2, … reach every split below
    /// 2·top_step > splits), not of log2(MAX_SPLITS): 3 instead of 10 at 8 splits.
    fn element(&self, k: &mut KernelBuilder, i: Expr) -> Var {
        let i = k.let_("flat", i);
        let s = k.let_typed("split_of", Scalar::I32, 0);
        let step = k.let_("step", self.top_step);
        k.while_(step.gt(0i32), |k| {
            let probe = k.let_("probe", s + step);
            let ok = probe
                .lt(self.splits)
                .and(self.offsets.at(probe.e().min(self.splits)).le(i));
            k.assign(s, select(ok, probe, s));
            k.assign(step, step >> 1i32);
        });
        let j = i - self.offsets.at(s);
        k.let_("elem", (self.seg0 + s.i64()) * self.split_len + j.i64())
    }
}

/// A candidate as the finish pass sees it: its score (or lower bound), its upper bound (the
/// score itself when exact), and its token position.
#[derive(Clone, Copy)]
pub struct Cand {
    pub z: Var,
    pub ub: Var,
    pub idx: Var,
}

/// A head's candidate arrays: in shared memory when they fit, otherwise read in place from the
/// workspace segments through [`Locate`].
#[derive(Clone, Copy)]
pub enum Source {
    Shared {
        z: Buf,
        ub: Option<Buf>,
        idx: Buf,
        total: Var,
    },
    Global {
        z: Buf,
        ub: Option<Buf>,
        idx: Buf,
        total: Var,
        locate: Locate,
    },
}

impl Source {
    /// How many candidates there are (i32, block-uniform).
    pub fn total(&self) -> Var {
        match *self {
            Source::Shared { total, .. } | Source::Global { total, .. } => total,
        }
    }

    /// The scores (lower bounds) array: the staging array, or the workspace's.
    pub fn scores(&self) -> Buf {
        match *self {
            Source::Shared { z, .. } | Source::Global { z, .. } => z,
        }
    }

    /// Where flat candidate `i` lives: `i` itself in the staging arrays, else its workspace
    /// element.
    pub fn element(&self, k: &mut KernelBuilder, i: Expr) -> Expr {
        match *self {
            Source::Global { locate, .. } => locate.element(k, i).e(),
            Source::Shared { .. } => i,
        }
    }

    /// Flat candidate `i` (i32).
    pub fn read(&self, k: &mut KernelBuilder, i: Expr) -> Cand {
        let at = self.element(k, i);
        self.read_at(k, at)
    }

    /// The candidate at element `at` (from [`Source::element`]).
    pub fn read_at(&self, k: &mut KernelBuilder, at: Expr) -> Cand {
        let (Source::Shared { z, ub, idx, .. } | Source::Global { z, ub, idx, .. }) = *self;
        let zv = k.let_("cz", z.at(at.clone()));
        let uv = match ub {
            Some(u) => k.let_("cu", u.at(at.clone())),
            None => zv,
        };
        let iv = k.let_("ci", idx.at(at));
        Cand {
            z: zv,
            ub: uv,
            idx: iv,
        }
    }

    /// The token position of the candidate at element `at` (i32) — not its score, which a
    /// finish pass may be rewriting.
    pub fn read_idx_at(&self, k: &mut KernelBuilder, at: Expr) -> Var {
        let (Source::Shared { idx, .. } | Source::Global { idx, .. }) = *self;
        k.let_("ci", idx.at(at))
    }

    /// Emit `body(candidate)` for every candidate, candidate `i` going to worker `i % workers`.
    pub fn for_each(
        &self,
        k: &mut KernelBuilder,
        worker: Expr,
        workers: u32,
        body: &dyn Fn(&mut KernelBuilder, Cand),
    ) {
        k.for_("i", worker.i32(), self.total(), workers as i32, |k, i| {
            let c = self.read(k, i);
            body(k, c);
        });
    }

    /// Visit only the candidates for which `pred` holds, in rounds of `workers` (worker
    /// `worker` takes one a round): `body(k, i, inside)` with flat index `i` (i32, valid when
    /// `inside`; otherwise the first pick, whose score `body` must then not read, as its owner
    /// may be rewriting it). The round loop is warp-uniform, so `body` may run lane reductions.
    ///
    /// A finish pass loads a K or V row for a few of its candidates (the kept tokens, the
    /// support): walking every candidate in rounds, each round waited on its block-table and
    /// row loads whether it held one such token or many. The candidates are first compacted,
    /// a window of `COMPACT_PER_THREAD · threads` at a time, into `list` (a shared i32 array of
    /// that length, see [`Scratch`]) by a block scan, so the loads take as few rounds as
    /// there are rows. `pred(k, at, candidate)` gets the candidate's element too, and may store
    /// there. Returns how many were picked (block-uniform). Ends with a barrier.
    #[allow(clippy::too_many_arguments)]
    pub fn for_each_where(
        &self,
        k: &mut KernelBuilder,
        list: Buf,
        scan: Buf,
        worker: Expr,
        workers: u32,
        pred: &dyn Fn(&mut KernelBuilder, Var, Cand) -> Expr,
        body: &dyn Fn(&mut KernelBuilder, Var, Var),
    ) -> Var {
        let threads = k.block_threads();
        let window = threads * COMPACT_PER_THREAD;
        let tid = k.let_("tid_w", k.thread_idx());
        let total = self.total();
        let all = k.let_typed("picked_all", Scalar::I32, 0);
        k.for_("w0", 0i32, total, window as i32, |k, w0| {
            let w0 = k.let_("w0v", w0);
            let picks: Vec<(Var, Var)> = (0..COMPACT_PER_THREAD)
                .map(|j| {
                    let i = k.let_("wi", w0 + tid.i32() + (j * threads) as i32);
                    let pick = k.let_typed("pick", Scalar::Bool, false);
                    k.if_(i.lt(total), |k| {
                        let at = self.element(k, i.e());
                        let at = k.let_("w_at", at);
                        let c = self.read_at(k, at.e());
                        let p = pred(k, at, c);
                        k.assign(pick, p);
                    });
                    (i, pick)
                })
                .collect();
            let count = picks.iter().fold(i32c(0), |n, (_, p)| n + select(*p, 1i32, 0i32));
            let (excl, picked) = k.block_exclusive_scan(count, scan);
            k.assign(all, all + picked);
            let pos = k.let_("lpos", excl);
            for (i, p) in &picks {
                k.if_(*p, |k| {
                    k.store(list, pos, *i);
                    k.assign(pos, pos + 1i32);
                });
            }
            k.barrier(); // the list is read by every thread below
            k.for_("r0", 0i32, picked, workers as i32, |k, r0| {
                let li = k.let_("li", r0 + worker.clone().i32());
                let inside = k.let_("lin", li.lt(picked));
                let i = k.let_("li_flat", list.at(select(inside, li, 0i32)));
                body(k, i, inside);
            });
            k.barrier(); // before the next window overwrites the list
        });
        all
    }
}

/// Candidates each thread of a finish pass compacts in one window ([`Source::for_each_where`]).
pub const COMPACT_PER_THREAD: u32 = 2;

/// Workspace buffers the finish pass reads.
#[derive(Clone, Copy)]
pub struct CandInputs {
    pub z: Buf,
    pub ub: Option<Buf>,
    pub idx: Buf,
    pub count: Buf,
    pub bound: Buf,
}

/// What [`gather`] found: the candidate total, the best split bound (≤ τ), and how to read them.
pub struct Gathered {
    pub total: Var,
    /// This thread's share of the best split bound (≤ τ): the block maximum of these is the
    /// bound. [`solve_tau`] takes it as is and reduces it together with the candidates' maximum
    /// (one block reduction instead of two).
    pub bound: Var,
    pub global: Source,
    /// Shared staging arrays (`capacity` long) to use when `total ≤ capacity`.
    pub staged: Source,
    pub capacity: u32,
}

/// Scan the head's per-split counts into shared offsets and declare the staging arrays. Then
/// either [`Gathered::stage`] (when `total ≤ capacity`) or read through `global`.
#[allow(clippy::too_many_arguments)]
pub fn gather(
    k: &mut KernelBuilder,
    inputs: CandInputs,
    head: Var,
    splits: Expr,
    split_len: Expr,
    capacity: u32,
    red_i: Buf,
) -> Gathered {
    let threads = k.block_threads();
    let offsets = k.shared("offsets", Scalar::I32, MAX_SPLITS + 1);
    let sh_z = k.shared("cand_z_s", Scalar::F32, capacity);
    let sh_ub = inputs.ub.map(|_| k.shared("cand_ub_s", Scalar::F32, capacity));
    let sh_idx = k.shared("cand_idx_s", Scalar::I32, capacity);
    let tid = k.let_("tid_g", k.thread_idx());
    let splits = k.let_("splits_v", splits);
    let split_len = k.let_("split_len_v", split_len);
    let seg0 = k.let_("seg0", head * splits.i64());
    // Offsets: exclusive scan of the counts, `threads` splits at a time; the best bound.
    let base = k.let_typed("base", Scalar::I32, 0);
    let lb0 = k.let_typed("lb", Scalar::F32, f64::NEG_INFINITY);
    k.for_("c0", 0i32, splits, threads as i32, |k, c0| {
        let s = k.let_("s", c0 + tid.i32());
        let inside = k.let_("inside", s.lt(splits));
        let seg = k.let_("seg", seg0 + select(inside, s, 0i32).i64());
        let cnt = k.let_("cnt", select(inside, inputs.count.at(seg), 0i32));
        k.assign(lb0, select(inside, lb0.max(inputs.bound.at(seg)), lb0));
        let (excl, chunk_total) = k.block_exclusive_scan(cnt, red_i);
        k.if_(inside, |k| k.store(offsets, s, base + excl));
        k.assign(base, base + chunk_total);
    });
    let total = k.let_("total", base);
    k.if_(tid.eq_(0u32), |k| k.store(offsets, splits, total));
    k.barrier();
    let top_step = k.let_typed("top_step", Scalar::I32, 1);
    k.while_((top_step * 2i32).le(splits), |k| {
        k.assign(top_step, top_step * 2i32)
    });
    let locate = Locate {
        offsets,
        splits,
        top_step,
        seg0,
        split_len,
    };
    Gathered {
        total,
        bound: lb0,
        global: Source::Global {
            z: inputs.z,
            ub: inputs.ub,
            idx: inputs.idx,
            total,
            locate,
        },
        staged: Source::Shared {
            z: sh_z,
            ub: sh_ub,
            idx: sh_idx,
            total,
        },
        capacity,
    }
}

impl Gathered {
    /// Copy the candidates into the shared staging arrays (flat order = split order:
    /// deterministic). Only valid when `total ≤ capacity`; ends with a barrier.
    pub fn stage(&self, k: &mut KernelBuilder) {
        let (
            Source::Global {
                z, ub, idx, locate, ..
            },
            Source::Shared {
                z: sz,
                ub: su,
                idx: si,
                ..
            },
        ) = (self.global, self.staged)
        else {
            unreachable!("gather builds a global and a shared source");
        };
        let tid = k.thread_idx();
        let threads = k.block_threads();
        k.for_("i", tid.i32(), self.total, threads as i32, |k, i| {
            let at = locate.element(k, i.clone());
            k.store(sz, i.clone(), z.at(at));
            if let (Some(u), Some(s)) = (ub, su) {
                k.store(s, i.clone(), u.at(at));
            }
            k.store(si, i, idx.at(at));
        });
        k.barrier();
    }
}

/// Solve the exact threshold over the candidates' scores, starting from `floor` (a known lower
/// bound, e.g. the best split bound; each thread may pass its own share, the block maximum is
/// used): bracket `[max(M − 1, floor), M]`, bracketed Newton steps,
/// and for α = 2 and 3/2 the closed form over the current active set, which is exact as soon
/// as the active set is the support. Returns the block-uniform τ.
pub fn solve_tau(k: &mut KernelBuilder, spec: &DecodeSpec, src: &Source, floor: Var, red: Buf) -> Var {
    let alpha = spec.alpha;
    let tid = k.thread_idx();
    let threads = k.block_threads();
    // The global maximum is a candidate of its split.
    let mx = k.let_typed("mx", Scalar::F32, f64::NEG_INFINITY);
    src.for_each(k, tid.clone(), threads, &|k, c| k.assign(mx, mx.max(c.z)));
    let maxima = k.block_allreduce_many(&[(Reduce::Max, mx.e()), (Reduce::Max, floor.e())], red);
    let (m, floor) = (maxima[0], maxima[1]);

    let lo = k.let_("lo", (m - 1.0f32).max(floor));
    let hi = k.let_("hi", m);
    let tau = k.let_("tau", lo);
    let done = k.let_("done", false);
    let it = k.let_typed("it", Scalar::I32, 0);
    k.while_(done.not().and(it.lt(MAX_SOLVE_ITERS as i32)), |k| {
        let acc: Vec<Var> = (0..5).map(|_| k.let_typed("acc", Scalar::F32, 0.0)).collect();
        src.for_each(k, tid.clone(), threads, &|k, c| {
            let (w, w1) = threshold_terms(alpha, c.z, tau);
            let active = c.z.gt(tau);
            let u = c.z - m;
            k.assign(acc[0], acc[0] + w);
            k.assign(acc[1], acc[1] + w1);
            k.assign(acc[2], acc[2] + select(active.clone(), 1.0f32, 0.0f32));
            k.assign(acc[3], acc[3] + select(active.clone(), u.clone(), 0.0f32));
            k.assign(acc[4], acc[4] + select(active, u.clone() * u, 0.0f32));
        });
        let items: Vec<(Reduce, Expr)> = acc.iter().map(|a| (Reduce::Sum, a.e())).collect();
        let s = k.block_allreduce_many(&items, red);
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
        k.assign(done, solve_converged(tau, next, lo, hi, f));
        k.assign(tau, next);
        k.assign(it, it + 1i32);
    });
    tau
}

/// Shared scratch of a finish pass, declared once per kernel.
#[derive(Clone, Copy)]
pub struct Scratch {
    /// Block reductions of up to 5 f32 values.
    pub red: Buf,
    /// Block reductions and scans of up to 2 i32 values.
    pub red_i: Buf,
    /// Per-row-group output partials.
    pub acc: Buf,
    /// Compacted candidate indices ([`Source::for_each_where`]).
    pub list: Buf,
}

impl Scratch {
    pub fn new(k: &mut KernelBuilder, spec: &DecodeSpec) -> Scratch {
        let threads = k.block_threads();
        let warps = threads / WARP;
        let (_, _, row_groups) = output_lanes(spec, threads);
        Scratch {
            red: k.shared("red", Scalar::F32, warps * 5),
            red_i: k.shared("red_i", Scalar::I32, warps * 2),
            acc: k.shared("acc_s", Scalar::F32, row_groups * spec.head_dim),
            list: k.shared("list_s", Scalar::I32, threads * COMPACT_PER_THREAD),
        }
    }
}

/// `(lanes per V row, elements per lane, row groups)`: a row is read with 16-byte loads.
fn output_lanes(spec: &DecodeSpec, threads: u32) -> (u32, u32, u32) {
    let row_lanes = (spec.head_dim * spec.kv_dtype.size_bytes() / 16).max(1);
    (row_lanes, spec.head_dim / row_lanes, threads / row_lanes)
}

/// Output buffers of a finish pass and the head they belong to.
#[derive(Clone, Copy)]
pub struct OutputBufs {
    pub out: Buf,
    pub tau: Buf,
    pub support: Buf,
    /// `b · q_heads + h` (i64).
    pub head: Var,
}

/// `o = Σ_{z > τ} p_j v_j / Σ p_j` (f32 accumulation; the renormalisation means an unconverged
/// τ can never scale the output), τ and the support size. Each group of `row_lanes` lanes
/// accumulates whole V rows with 16-byte loads; groups are summed in a fixed order.
#[allow(clippy::too_many_arguments)]
pub fn write_output(
    k: &mut KernelBuilder,
    spec: &DecodeSpec,
    src: &Source,
    tau: Var,
    values: Buf,
    v_rows: &TokenSource,
    outs: OutputBufs,
    scratch: &Scratch,
) {
    let (red, red_i, acc_s) = (scratch.red, scratch.red_i, scratch.acc);
    let alpha = spec.alpha;
    let d = spec.head_dim;
    let threads = k.block_threads();
    let (row_lanes, vec, row_groups) = output_lanes(spec, threads);
    let tid = k.let_("tid_o", k.thread_idx());
    let rl = k.let_("rl", tid % row_lanes);
    let rg = k.let_("rg", tid / row_lanes);
    let acc: Vec<Var> = (0..vec).map(|_| k.let_typed("o", Scalar::F32, 0.0)).collect();
    let psum = k.let_typed("psum", Scalar::F32, 0.0);
    let supp = k.let_typed("supp", Scalar::I32, 0);
    // Only the support loads V rows: compact it first (it is a few of the candidates).
    src.for_each_where(
        k,
        scratch.list,
        red_i,
        rg.e(),
        row_groups,
        &|_, _, c| c.z.gt(tau),
        &|k, i, inside| {
            k.if_(inside, |k| {
                let c = src.read(k, i.e());
                let p = k.let_("p", weight(alpha, c.z - tau));
                let row = v_rows.row(k, c.idx.i64());
                let vals = k.load_vec("v", values, row + (rl * vec).i64(), vec);
                for (a, v) in acc.iter().zip(vals) {
                    k.assign(*a, fma(p, v.f32(), *a));
                }
                k.assign(psum, psum + p);
                k.assign(supp, supp + 1i32);
            });
        },
    );
    for (i, a) in acc.iter().enumerate() {
        k.store(acc_s, rg * d + rl * vec + i as u32, *a);
    }
    k.barrier();
    let first = rl.eq_(0u32);
    let ps = k.block_allreduce(Reduce::Sum, select(first.clone(), psum, 0.0f32), red);
    let sp = k.block_allreduce(Reduce::Sum, select(first, supp, 0i32), red_i);
    let out_ty = outs.out.elem;
    k.for_("dd", tid, d, threads, |k, dd| {
        let o = k.let_typed("osum", Scalar::F32, 0.0);
        for g in 0..row_groups {
            k.assign(o, o + acc_s.at(dd.clone() + g * d));
        }
        k.store(outs.out, outs.head * d as i64 + dd.i64(), (o / ps).cast(out_ty));
    });
    k.if_(tid.eq_(0u32), |k| {
        k.store(outs.tau, outs.head, tau);
        k.store(outs.support, outs.head, sp);
    });
}
