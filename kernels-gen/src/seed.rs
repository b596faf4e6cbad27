//! The seeded certified pass's own kernels (`entkv_abi::seed` has the argument): exact scores
//! of every head's samples, the estimate they give, and the check after the finish that flags
//! the (sequence, KV head) pairs to repair.

use crate::entmax::{newton_update, threshold_terms};
use crate::finish::{solve_converged, solver_cut, MAX_SOLVE_ITERS};
use crate::tokens::{slope, Layout, PageBufs, TokenSource};
use crate::warp_stream::order_key;
use crate::{scalar_of, KernelGenError};
use entkv_abi::seed::{
    seed_entry_names, seed_pruned_scores_entry, seed_rank, SEED_LONG_SAMPLES, SEED_MIN_SAMPLES,
    SEED_RANK_LONG, SEED_RANK_SHORT, SEED_RUN, SEED_RUN_MIN_SAMPLES, SEED_SCRAMBLE, SEED_STRIDE,
    SEED_THREADS, SEED_WEIGHT,
};
use entkv_abi::{DecodeKind, DenseTile, PagedSpec};
use entkv_dsl::*;

/// The `repair, gate` parameters a seeded tile's score pass and finish take: each runs twice a
/// step, first for every pair (gate 0), then for the pairs `certified_verify` flagged (gate 1).
#[derive(Clone, Copy)]
pub(crate) struct RepairGate {
    flags: Buf,
    gate: Var,
}

impl RepairGate {
    /// Declare the two parameters (in this order, where the kernel's list has them).
    pub(crate) fn declare(k: &mut KernelBuilder) -> RepairGate {
        let flags = k.buffer("repair", Scalar::I32, Access::Read);
        let gate = k.scalar_param("gate", Scalar::I32);
        RepairGate {
            flags,
            gate: k.let_("gate", gate),
        }
    }

    /// Whether this launch runs (sequence `b`, KV head `kvh`): CTA-uniform.
    pub(crate) fn runs(&self, k: &mut KernelBuilder, b: Var, kv_heads: Var, kvh: Var) -> Var {
        let flagged = self.flags.at(b.i64() * kv_heads.i64() + kvh.i64()).ne_(0i32);
        k.let_("runs_pair", self.gate.eq_(0i32).or(flagged))
    }
}

/// `certified_seed_scores`: grid (⌈samples / SEED_THREADS⌉, KV heads, batch), a thread a
/// sample. Writes `seed_z[head·samples + j]`, the exact entmax-space score (q'·k plus the
/// ALiBi term) of sample `j`'s token (`entkv_abi::seed::seed_position`) for each head of the
/// group, −∞ past the sequence. The group's q' sits in shared memory, so a thread holds only
/// a 16-byte slice of its row and the group's sums. Parameters: `q, k_pool, block_table,
/// seq_lens, [sel_count] (`pruned`), [alibi_slopes], seed_z, samples, max_pages`.
///
/// `pruned`: `certified_seed_scores_pruned` (`entkv_abi::seed::seed_pruned_scores_entry`), run
/// after page pruning. A pair the selected walk takes
/// (`crate::certified::pair_takes_selected_walk`) reads no K and writes −∞ samples, so its estimate is −∞: that walk runs
/// unseeded, as its few kept pages would cost more in samples (1/64 of the whole sequence's
/// rows) than a seed could save.
pub fn scores_kernel(spec: &PagedSpec, tile: &DenseTile, pruned: bool) -> Result<Kernel, KernelGenError> {
    tile.check_for(spec, DecodeKind::Certified)?;
    let ds = &spec.decode;
    let name = if pruned {
        seed_pruned_scores_entry(spec, tile)
    } else {
        let [name, _, _] = seed_entry_names(spec, tile);
        name
    };
    let threads = SEED_THREADS;
    let mut k = KernelBuilder::new(name, threads);
    let q = k.buffer("q", scalar_of(ds.q_dtype), Access::Read);
    let keys = k.buffer("k_pool", scalar_of(ds.kv_dtype), Access::Read);
    let block_table = k.buffer("block_table", Scalar::I32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let sel_count = pruned.then(|| k.buffer("sel_count", Scalar::I32, Access::Read));
    let slopes = spec
        .alibi
        .then(|| k.buffer("alibi_slopes", Scalar::F32, Access::Read));
    let seed_z = k.buffer("seed_z", Scalar::F32, Access::Write);
    let samples = k.scalar_param("samples", Scalar::I32);
    let samples = k.let_("samples", samples);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);

    let (d, group) = (ds.head_dim, ds.group);
    let kvh = k.let_("kvh", k.block_idx(Axis::Y));
    let b = k.let_("b", k.block_idx(Axis::Z));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    let q_heads = k.let_("q_heads", kv_heads * group);
    let first_head = k.let_("first_head", (b * q_heads + kvh * group).i64());
    let tid = k.let_("tid", k.thread_idx());
    // The group's q' rows (adjacent heads), scaled on the way in.
    let qs = k.shared("seed_q", Scalar::F32, group * d);
    for base in (0..group * d).step_by(threads as usize) {
        let i = k.let_("qi", tid + base);
        k.if_(i.lt(group * d), |k| {
            let v = q.at(first_head * d as i64 + i.i64()).f32() * ds.z_scale();
            k.store(qs, i, v)
        });
    }
    k.barrier();
    let pages = PageBufs {
        block_table,
        seq_lens,
        sel: None,
        max_pages: k.let_("max_pages", max_pages),
    };
    let layout = Layout::Paged {
        page_size: spec.page_size,
    };
    let src = TokenSource::new(&mut k, layout, d, b, kvh, kv_heads, None, Some(pages));
    let j = k.let_("j", (k.block_idx(Axis::X) * threads + tid).i64());
    // `entkv_abi::seed::seed_position`, its run from the sample count (a power of two).
    let stride_log2 = SEED_STRIDE.trailing_zeros() as i64;
    let run_log2 = k.let_(
        "run_log2",
        select(
            samples.i64().ge(SEED_RUN_MIN_SAMPLES as i64),
            SEED_RUN.trailing_zeros() as i64,
            0i64,
        ),
    );
    let r = k.let_("run_i", j >> run_log2);
    let in_run = k.let_("in_run", j & ((i64c(1) << run_log2) - 1i64));
    let slot = k.let_("slot", (r * SEED_SCRAMBLE as i64) & (SEED_STRIDE as i64 - 1));
    let t = k.let_("t", (r << (run_log2 + stride_log2)) + (slot << run_log2) + in_run);
    let in_row = k.let_("in_row", j.lt(samples.i64()));
    let in_seq = t.lt(src.seq_len);
    let valid = match sel_count {
        Some(count) => {
            let selected = crate::certified::pair_takes_selected_walk(
                count,
                b,
                kv_heads,
                kvh,
                src.seq_len,
                spec.page_size,
            );
            k.let_("valid", in_row.and(in_seq).and(selected.not()))
        }
        None => k.let_("valid", in_row.and(in_seq)),
    };
    let z: Vec<Var> = (0..group)
        .map(|_| k.let_typed("seed_zg", Scalar::F32, f64::NEG_INFINITY))
        .collect();
    k.if_(valid, |k| {
        let row = src.row(k, t.e());
        let vec = (16 / ds.kv_dtype.size_bytes()).min(d);
        let acc: Vec<Var> = (0..group).map(|_| k.let_typed("acc", Scalar::F32, 0.0)).collect();
        for c in (0..d).step_by(vec as usize) {
            let kv = k.load_vec("sk", keys, row + c as i64, vec);
            for (g, a) in acc.iter().enumerate() {
                let sum = kv.iter().enumerate().fold(a.e(), |s, (i, x)| {
                    fma(qs.at(g as u32 * d + c + i as u32), x.f32(), s)
                });
                k.assign(*a, sum);
            }
        }
        for (g, (a, zg)) in acc.iter().zip(&z).enumerate() {
            let h = k.let_("h", kvh * group + g as u32);
            let score = match src.alibi_term(slope(k, ds, slopes, h), t) {
                Some(term) => a.e() + term,
                None => a.e(),
            };
            k.assign(*zg, score);
        }
    });
    k.if_(in_row, |k| {
        for (g, zg) in z.iter().enumerate() {
            k.store(seed_z, (first_head + g as i64) * samples.i64() + j, *zg);
        }
    });
    Ok(k.finish()?)
}

/// `certified_seed`: grid (query heads, batch), one CTA a head. From the head's samples, the
/// estimate `s = min(r, t_w)`: `r` the [`seed_rank`]-th largest sample (with multiplicity),
/// `t_w` the threshold of the samples each weighted `w = SEED_WEIGHT·SEED_STRIDE` (the root of
/// `w·Σ [z − t]₊^β = 1`, approached from below by Newton steps from `max − w^(1−α)`; the
/// last point with a non-negative sum is taken). −∞ with fewer than [`SEED_MIN_SAMPLES`]
/// samples or where it is not finite. Writes `seed` and `head_bound` (its order key) and resets
/// the pair's `repair` flag to 0 (the group's first head). Samples past a sequence are −∞
/// already, so it needs no lengths. Parameters: `seed_z, seed, head_bound, repair, samples`.
pub fn estimate_kernel(spec: &PagedSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    tile.check_for(spec, DecodeKind::Certified)?;
    let ds = &spec.decode;
    let [_, name, _] = seed_entry_names(spec, tile);
    let threads = SEED_THREADS;
    let mut k = KernelBuilder::new(name, threads);
    let seed_z = k.buffer("seed_z", Scalar::F32, Access::Read);
    let seed = k.buffer("seed", Scalar::F32, Access::Write);
    let head_bound = k.buffer("head_bound", Scalar::I32, Access::Write);
    let repair = k.buffer("repair", Scalar::I32, Access::Write);
    let samples = k.scalar_param("samples", Scalar::I32);
    let samples = k.let_("samples", samples);

    let warps = threads / WARP;
    let red = k.shared("red", Scalar::F32, warps * 2);
    let h = k.let_("h", k.block_idx(Axis::X));
    let b = k.let_("b", k.block_idx(Axis::Y));
    let q_heads = k.let_("q_heads", k.grid_dim(Axis::X));
    let head = k.let_("head", (b * q_heads + h).i64());
    let base = k.let_("base", head * samples.i64());
    let tid = k.let_("tid", k.thread_idx());
    // One sweep over the head's samples: `body(acc, z)` updates this thread's accumulators,
    // which are then reduced over the block.
    let sweep =
        |k: &mut KernelBuilder, items: &[(Reduce, f64)], body: &dyn Fn(&mut KernelBuilder, &[Var], Expr)| {
            let acc: Vec<Var> = items
                .iter()
                .map(|(_, init)| k.let_typed("sw", Scalar::F32, *init))
                .collect();
            k.for_("sj", tid.i32(), samples, threads as i32, |k, j| {
                let z = k.let_("sz", seed_z.at(base + j.i64()));
                body(k, &acc, z.e());
            });
            let red_items: Vec<(Reduce, Expr)> =
                items.iter().zip(&acc).map(|((op, _), a)| (*op, a.e())).collect();
            k.block_allreduce_many(&red_items, red)
        };
    let neg_inf = f64::NEG_INFINITY;
    let first = sweep(
        &mut k,
        &[(Reduce::Max, neg_inf), (Reduce::Sum, 0.0)],
        &|k, acc, z| {
            k.assign(acc[0], acc[0].max(z.clone()));
            k.assign(acc[1], acc[1] + select(z.gt(f32c(neg_inf)), 1.0f32, 0.0f32));
        },
    );
    let (top, valid) = (first[0], first[1]);
    // r: walk down the distinct values from the top, one sweep a step (the samples at or above
    // the current value, and the largest below it), while fewer than the head's cap
    // (`seed_rank` of its valid samples) are at or above: cap − 1 steps reach the cap-th
    // largest, and the steps past it keep it.
    let cap = k.let_(
        "cap",
        select(
            valid.ge(SEED_LONG_SAMPLES as f32),
            SEED_RANK_LONG as f32,
            SEED_RANK_SHORT as f32,
        ),
    );
    // A head with too few samples gets no estimate (−∞ below), so it skips the rank's and
    // Newton's sweeps (a block-uniform test): a short sequence, or after page pruning a pair
    // that the selected walk takes, whose samples are all −∞ (`certified_seed_scores_pruned`).
    let seeds = k.let_("seeds", valid.ge(SEED_MIN_SAMPLES as f32));
    let rank = k.let_("rank", top);
    k.if_(seeds, |k| {
        for _ in 1..SEED_RANK_LONG {
            let step = sweep(k, &[(Reduce::Sum, 0.0), (Reduce::Max, neg_inf)], &|k, acc, z| {
                k.assign(acc[0], acc[0] + select(z.clone().ge(rank), 1.0f32, 0.0f32));
                k.assign(acc[1], select(z.clone().lt(rank), acc[1].max(z), acc[1]));
            });
            k.assign(rank, select(step[0].lt(cap), step[1], rank));
        }
    });
    // t_w: Newton from the left on w·Σ [z − t]₊^β − 1 (convex, decreasing).
    let alpha = ds.alpha;
    let w = SEED_WEIGHT * SEED_STRIDE as f64;
    let lo = k.let_("lo", top - w.powf(1.0 - alpha.value()) as f32);
    let hi = k.let_("hi", top);
    let t = k.let_("t", lo);
    let done = k.let_("done", top.eq_(f32c(neg_inf)).or(seeds.not()));
    let it = k.let_typed("it", Scalar::I32, 0);
    k.while_(done.not().and(it.lt(MAX_SOLVE_ITERS as i32)), |k| {
        let sums = sweep(k, &[(Reduce::Sum, 0.0), (Reduce::Sum, 0.0)], &|k, acc, z| {
            let (x, x1) = threshold_terms(alpha, z, t);
            k.assign(acc[0], acc[0] + x);
            k.assign(acc[1], acc[1] + x1);
        });
        let f = k.let_("f", sums[0] * w as f32 - 1.0f32);
        let s1 = k.let_("s1", sums[1] * w as f32);
        let next = newton_update(k, alpha, t, lo, hi, f, s1);
        k.assign(done, solve_converged(t, next, lo, hi, f));
        k.assign(t, next);
        k.assign(it, it + 1i32);
    });
    let estimate = k.let_("estimate", rank.min(lo));
    // Finite, with enough samples (NaN fails both comparisons).
    let ok = seeds
        .and(estimate.gt(f32c(-f32::MAX as f64)))
        .and(estimate.lt(f32c(f32::MAX as f64)));
    let estimate = k.let_("seed_value", select(ok, estimate, f32c(neg_inf)));
    k.if_(tid.eq_(0u32), |k| {
        k.store(seed, head, estimate);
        k.store(head_bound, head, order_key(estimate));
        k.if_((h % ds.group).eq_(0u32), |k| {
            k.store(repair, head / ds.group as i64, 0i32);
        });
    });
    Ok(k.finish()?)
}

/// `certified_verify`: a thread a query head. The pass was exact for the head iff its
/// threshold `τ(K) ≥ seed` (`entkv_abi::seed`); the finish's τ is the solver's, so the check
/// takes its cut ([`solver_cut`]) and flags the pair (`repair[head / G] = 1`) otherwise, NaN
/// included. Whatever the check says, `τ(K) ≤ τ` (K is a subset of the tokens), so the cut is
/// a rigorous bound on the head's threshold: the repair's shared bound starts there
/// (`repair_bound`, −∞ where it is not finite), not at −∞, and a repaired pair filters almost
/// as tightly as an exact estimate would have. Parameters: `tau, seed, repair, repair_bound,
/// heads`.
pub fn verify_kernel(spec: &PagedSpec, tile: &DenseTile) -> Result<Kernel, KernelGenError> {
    tile.check_for(spec, DecodeKind::Certified)?;
    let [_, _, name] = seed_entry_names(spec, tile);
    let threads = SEED_THREADS;
    let mut k = KernelBuilder::new(name, threads);
    let tau = k.buffer("tau", Scalar::F32, Access::Read);
    let seed = k.buffer("seed", Scalar::F32, Access::Read);
    let repair = k.buffer("repair", Scalar::I32, Access::ReadWrite);
    let repair_bound = k.buffer("repair_bound", Scalar::I32, Access::Write);
    let heads = k.scalar_param("heads", Scalar::I32);
    let i = k.let_("i", k.block_idx(Axis::X) * threads + k.thread_idx());
    k.if_(i.lt(heads.u32()), |k| {
        let cut = k.let_("cut", solver_cut(tau.at(i)));
        k.if_(cut.ge(seed.at(i)).not(), |k| {
            k.atomic_no_ret(AtomicOp::Max, repair, i / spec.decode.group, 1i32)
        });
        let finite = cut.gt(f32c(-f32::MAX as f64)).and(cut.lt(f32c(f32::MAX as f64)));
        k.store(
            repair_bound,
            i,
            order_key(select(finite, cut, f32c(f64::NEG_INFINITY))),
        );
    });
    Ok(k.finish()?)
}

/// The float64 reference of [`estimate_kernel`]: the estimate from a head's sample scores
/// (entmax space; −∞ for samples past the sequence). `min(t_w, r)` with `t_w` the root of
/// `w·Σ [z − t]₊^β = 1` (the unweighted threshold of `w^(α−1)·z`, scaled back) and `r` the
/// [`seed_rank`]-th largest sample; −∞ with fewer than [`SEED_MIN_SAMPLES`] samples.
pub fn host_estimate(samples: &[f64], alpha: entkv_abi::Alpha) -> f64 {
    let mut valid: Vec<f64> = samples
        .iter()
        .copied()
        .filter(|z| *z > f64::NEG_INFINITY)
        .collect();
    if valid.len() < SEED_MIN_SAMPLES as usize {
        return f64::NEG_INFINITY;
    }
    valid.sort_by(|a, b| b.total_cmp(a));
    let scale = (SEED_WEIGHT * SEED_STRIDE as f64).powf(alpha.value() - 1.0);
    let scaled: Vec<f64> = valid.iter().map(|z| z * scale).collect();
    let t_w = crate::reference::entmax_tau(&scaled, alpha) / scale;
    t_w.min(valid[seed_rank(valid.len() as u64) as usize - 1])
}
