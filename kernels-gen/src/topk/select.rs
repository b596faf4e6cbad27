//! `select_topk`: per (batch, KV head), the `k = min(budget, pages − 1)` scored pages with the
//! largest bounds, in the selection format of `entkv_abi::paged`.
//!
//! Radix select, one CTA per (batch, kv head), looping over the pages (any count, fixed shared
//! memory):
//! - Each score becomes an order-preserving u32 key ([`radix_key`]); the largest keys win and
//!   equal keys go to the lower page index, so the result is deterministic.
//! - Pass `i` (8 bits, most significant first) histograms the digit of the keys that still
//!   match the prefix resolved so far, and a block scan over the bins (highest first) finds the
//!   bin holding the k-th largest key. The keys above it are certainly kept; the prefix grows by
//!   that digit and the pass repeats for the remaining rank. When the bin holds exactly the
//!   remaining rank, every key in it is kept and the search stops early; otherwise four passes
//!   resolve the k-th key exactly.
//! - A final, order-preserving sweep keeps the keys above the threshold prefix and the first
//!   `need` keys equal to it, placing each by a block scan of packed (above, equal) counts.
//! - A head whose scored pages fit one sweep (`threads · items`) loads its keys once and keeps
//!   them in registers for every pass, and its first digit starts at the highest bit where its
//!   keys differ (`start_at_range`). The branch is block-uniform (one head per CTA).
//! - A head of `PIVOT_MIN_SWEEPS` sweeps or more first brackets its k-th key from a sample
//!   (`pivots`): one sweep of keys spread evenly over the head, whose ranks around `k·S/n`
//!   give pivots `lo ≤ hi`. One streamed sweep counts the keys above `hi` and gathers those in
//!   `[lo, hi]` into shared memory; when the k-th key is among them (and they fit), the search
//!   runs on the gathered keys alone. Otherwise (a sample that misleads, a tie group too large)
//!   the search streams every pass from memory (L2), as shorter heads do. A head whose sample
//!   is too small for it (more keys expected between the pivots than the gather keeps) streams
//!   without trying. Either way the result is exact; the pivots only decide how often the
//!   head's scores are read (about twice instead of four times at 1M tokens).
//!
//! The histogram threads keep a run (digit, count) and flush it with one shared atomic when the
//! digit changes: in the first pass nearly every key shares the sign/exponent byte, and without
//! the runs a warp's 32 same-bin atomics would serialise.

use super::{load_items, SelectionRow};
use crate::KernelGenError;
use entkv_abi::{select_topk_entry, PagedSpec, SelectTopkTile, RADIX_BINS, RADIX_BITS};
use entkv_dsl::*;

/// The order-preserving u32 key of an f32 score: negative numbers have all bits flipped, the
/// others only the sign bit, so `−∞ < … < −0 < +0 < … < +∞` compare as unsigned integers. NaN
/// (which finite metadata never produces) maps to the largest key: a page whose bound is unknown
/// is kept rather than dropped. `reference::radix_key` is the host mirror.
pub fn radix_key(k: &mut KernelBuilder, s: Var) -> Var {
    let bits = k.let_("bits", s.e().bitcast(Scalar::U32));
    let key = select((bits >> 31u32).eq_(1u32), bits.not(), bits | 0x8000_0000u32);
    k.let_("key", select(s.ne_(s), u32c(u32::MAX as u64), key))
}

/// `select_topk`: grid (kv heads, batch).
pub fn select_kernel(spec: &PagedSpec, tile: &SelectTopkTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let threads = tile.threads;
    let items = tile.items_per_thread;
    let sweep = (threads * items) as i32;
    let mut k = KernelBuilder::new(select_topk_entry(spec, tile), threads);
    // One CTA a head: two an SM put `paper`'s 192 heads in one wave on 132 SMs, and more buy
    // nothing. Without the bound ptxas caps the sample's search at 32–40 registers and spills
    // (256 × 8 and 1024 × 4 items, local ptxas 13); 1024 threads fit only one CTA at ≤ 64.
    k.set_min_blocks_per_sm(if threads <= 512 { 2 } else { 1 });
    let scores = k.buffer("page_scores", Scalar::F32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let sel_pages = k.buffer("sel_pages", Scalar::I32, Access::Write);
    let sel_count = k.buffer("sel_count", Scalar::I32, Access::Write);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let budget = k.scalar_param("budget_pages", Scalar::I32);

    let hist = k.shared("hist", Scalar::U32, RADIX_BINS);
    let scan = k.shared("scan", Scalar::U32, threads / WARP);
    let pick = k.shared("pick", Scalar::U32, 3);
    let range = k.shared("range", Scalar::U32, threads / WARP * 2);

    let sel = SelectionRow::new(&mut k, spec, seq_lens, max_pages);
    let (tid, n, row) = (sel.tid, sel.full, sel.row);
    let kk = k.let_("kk", budget.max(0i32).min(n));

    // Keeping none or all needs no search: the empty prefix matches every key.
    let st = Search::new(&mut k, kk.u32(), kk.eq_(n).or(kk.eq_(0i32)));
    let cx = Sweeps {
        scores,
        row,
        n,
        tid,
        threads,
        items,
    };
    let bufs = SelectBufs {
        hist,
        scan,
        pick,
        sel_pages,
        range,
        row,
        tid,
    };
    // A head whose scores fit one sweep keeps its keys in registers: one load, then every
    // pass is shared-memory work only (at 128k, 8191 pages fit 512 threads × 16).
    k.if_else(
        n.le(sweep),
        |k| {
            let keys = cx.load_keys(k, i32c(0), Order::Consecutive);
            start_at_range(k, &st, &bufs, &mut |k, _, body| body(k, &keys));
            search(k, &st, &bufs, false, &mut |k, _, body| body(k, &keys));
            compact(k, &st, &bufs, kk, &mut |k, _, body| body(k, &keys));
        },
        |k| {
            let found = search_between_pivots(k, &st, &cx, &bufs, kk);
            k.if_(found.not(), |k| {
                search(k, &st, &bufs, true, &mut |k, order, body| {
                    cx.stream(k, order, body)
                });
            });
            compact(k, &st, &bufs, kk, &mut |k, order, body| cx.stream(k, order, body));
        },
    );
    sel.close(&mut k, sel_pages, sel_count, kk);
    Ok(k.finish()?)
}

/// The search state: the pages still to choose are the `need` largest among the keys
/// matching `prefix` on the bits of `mask` (every key above the prefix is kept); `shift` is the
/// next digit's position.
struct Search {
    prefix: Var,
    mask: Var,
    need: Var,
    shift: Var,
    done: Var,
}

impl Search {
    /// The `need` largest of all keys: the empty prefix, the first digit byte-aligned.
    fn new(k: &mut KernelBuilder, need: Expr, done: Expr) -> Search {
        Search {
            prefix: k.let_typed("prefix", Scalar::U32, 0),
            mask: k.let_typed("mask", Scalar::U32, 0),
            need: k.let_("need", need),
            shift: k.let_typed("shift", Scalar::U32, 32 - RADIX_BITS),
            done: k.let_("done", done),
        }
    }
}

/// The most items a thread may carry into the next sweep of a streamed pass ([`Sweeps::stream`]).
const PREFETCH_MAX_ITEMS: u32 = 8;

/// Keys `gather` collects in shared memory (16 KiB): about twice what the pivots' margin
/// leaves between them at 1M tokens (65535 scored pages) with a 4096-key sample.
pub const GATHER_CAP: u32 = 4096;

/// Heads of fewer sweeps than this search by streaming alone: with the sample half or a
/// third of the keys, its two searches cost more work than the passes they save (interpreter
/// counts: 8191 pages with 4096-key sweeps, 1.58× the lane operations for 2.5 sweeps of the
/// scores read instead of 4; at 16 sweeps 0.81× for 2.06 instead of 4).
const PIVOT_MIN_SWEEPS: u32 = 4;

/// The most keys the pivots may be expected to gather for a head to take them: three quarters
/// of [`GATHER_CAP`], so that a sample's usual scatter still fits.
const PIVOT_GATHER_BUDGET: u32 = GATHER_CAP / 4 * 3;

/// How far (in standard deviations of a sample rank) the pivots sit from the k-th key's
/// expected rank in the sample: the k-th key falls outside them about once in 400 heads, and
/// that head streams its search instead.
const PIVOT_SIGMAS: f64 = 3.0;

/// What the passes share: shared-memory scratch, the output row and the thread index.
struct SelectBufs {
    hist: Buf,
    scan: Buf,
    pick: Buf,
    sel_pages: Buf,
    /// Scratch of the key range's block reduction (`2 · warps` u32).
    range: Buf,
    /// First element of this head's selection row.
    row: Var,
    tid: Var,
}

/// How a sweep deals pages to threads: strided (coalesced loads; the histogram passes) or
/// consecutive (thread order is page order; the compaction).
#[derive(Clone, Copy)]
enum Order {
    Strided,
    Consecutive,
}

/// One head's scores, read in sweeps of `threads · items` pages.
struct Sweeps {
    scores: Buf,
    row: Var,
    n: Var,
    tid: Var,
    threads: u32,
    items: u32,
}

/// A thread's keys of one sweep: (page, valid, key).
type SweepKeys = [(Var, Var, Var)];
/// Runs `body` on every sweep's keys, dealt in the given order.
type ForSweeps<'a> =
    dyn FnMut(&mut KernelBuilder, Order, &mut dyn FnMut(&mut KernelBuilder, &SweepKeys)) + 'a;

impl Sweeps {
    /// `S`, the keys one sweep holds (`threads · items`): also the sample's size.
    fn keys_per_sweep(&self) -> u32 {
        self.threads * self.items
    }

    fn load_keys(&self, k: &mut KernelBuilder, base: Expr, order: Order) -> Vec<(Var, Var, Var)> {
        self.load_scores(k, base, order)
            .into_iter()
            .map(|(j, valid, s)| (j, valid, radix_key(k, s)))
            .collect()
    }

    /// One sweep's (page, valid, score) from `base`, dealt in `order`.
    fn load_scores(&self, k: &mut KernelBuilder, base: Expr, order: Order) -> Vec<(Var, Var, Var)> {
        let (tid, threads, items) = (self.tid, self.threads, self.items);
        load_items(k, self.scores, self.row, base, self.n, items, |r| match order {
            Order::Strided => tid.i32() + (r * threads) as i32,
            Order::Consecutive => (tid * items).i32() + r as i32,
        })
    }

    /// One sweep of keys spread evenly over a head longer than a sweep: sample `i` (dealt
    /// strided over the threads) is page `⌊i·n/S⌋`, `S = threads·items < n`, so the pages are
    /// distinct and every one is valid (one constant flag for all, which keeps the sample's
    /// registers to its keys).
    fn load_sample(&self, k: &mut KernelBuilder) -> Vec<(Var, Var, Var)> {
        let (tid, threads, items, n) = (self.tid, self.threads, self.items, self.n);
        let sample = self.keys_per_sweep() as i64;
        let loaded = load_items(k, self.scores, self.row, i32c(0), n, items, |r| {
            ((tid.i64() + (r * threads) as i64) * n.i64() / sample).i32()
        });
        let valid = k.let_("sampled", boolc(true));
        loaded
            .into_iter()
            .map(|(j, _, s)| (j, valid, radix_key(k, s)))
            .collect()
    }

    /// Every sweep loaded from memory, the next sweep's loads issued before this sweep's work
    /// so that their L2 round trip overlaps it (the sweeps of a pass end in block scans and
    /// barriers). The raw scores are carried; their keys are made where they are used, so no
    /// instruction waits on the loads in flight. Tiles of more than [`PREFETCH_MAX_ITEMS`]
    /// items load each sweep in its own iteration: they have that many loads in flight already,
    /// and carrying another sweep spilled (316 B at 16 items and ≥ 512 threads, local ptxas 13).
    fn stream(
        &self,
        k: &mut KernelBuilder,
        order: Order,
        body: &mut dyn FnMut(&mut KernelBuilder, &SweepKeys),
    ) {
        let sweep = self.keys_per_sweep() as i32;
        if self.items > PREFETCH_MAX_ITEMS {
            k.for_("base", 0i32, self.n, sweep, |k, base| {
                let keys = self.load_keys(k, base, order);
                body(k, &keys)
            });
            return;
        }
        let next = self.load_scores(k, i32c(0), order);
        k.for_("base", 0i32, self.n, sweep, |k, base| {
            let current: Vec<(Var, Var, Var)> = next
                .iter()
                .map(|&(j, valid, s)| (k.let_("cur_j", j), k.let_("cur_valid", valid), k.let_("cur_s", s)))
                .collect();
            let after = k.let_("after", base + sweep);
            k.if_(after.lt(self.n), |k| {
                for (&(j, valid, s), (lj, lvalid, ls)) in
                    next.iter().zip(self.load_scores(k, after.e(), order))
                {
                    k.assign(j, lj);
                    k.assign(valid, lvalid);
                    k.assign(s, ls);
                }
            });
            let keys: Vec<(Var, Var, Var)> = current
                .into_iter()
                .map(|(j, valid, s)| (j, valid, radix_key(k, s)))
                .collect();
            body(k, &keys)
        });
    }
}

/// Pass `i` (8 bits, most significant first) histograms the digit of the keys that still
/// match the prefix, and a block scan over the bins (highest first) finds the bin holding the
/// `need`-th largest key; repeats until that bin holds exactly the remaining rank or every
/// digit is resolved. `runs`: count runs of equal digits per thread and flush each with one
/// atomic (a byte-aligned first digit puts nearly every key in one bin); without, one atomic a
/// key (a range-aligned start spreads the keys, and the run bookkeeping costs more than the
/// conflicts it saves).
fn search(k: &mut KernelBuilder, st: &Search, bufs: &SelectBufs, runs: bool, sweeps: &mut ForSweeps) {
    let (hist, scan, pick, tid) = (bufs.hist, bufs.scan, bufs.pick, bufs.tid);
    let (prefix, mask, need, shift, done) = (st.prefix, st.mask, st.need, st.shift, st.done);
    k.while_(done.not(), |k| {
        k.if_(tid.lt(RADIX_BINS), |k| k.store(hist, tid, 0u32));
        k.barrier();
        // (digit, count) of this thread's current run.
        let run = runs.then(|| {
            (
                k.let_typed("run_digit", Scalar::U32, 0),
                k.let_typed("run_count", Scalar::U32, 0),
            )
        });
        sweeps(k, Order::Strided, &mut |k, keys| {
            for &(_, valid, key) in keys {
                let digit = k.let_("digit", (key >> shift) & (RADIX_BINS - 1));
                k.if_(valid.and((key & mask).eq_(prefix)), |k| {
                    let Some((run_digit, run_count)) = run else {
                        k.atomic_no_ret(AtomicOp::Add, hist, digit, 1u32);
                        return;
                    };
                    k.if_(run_count.gt(0u32).and(digit.ne_(run_digit)), |k| {
                        k.atomic_no_ret(AtomicOp::Add, hist, run_digit, run_count);
                        k.assign(run_count, 0u32);
                    });
                    k.assign(run_digit, digit);
                    k.assign(run_count, run_count + 1u32);
                });
            }
        });
        if let Some((run_digit, run_count)) = run {
            k.if_(run_count.gt(0u32), |k| {
                k.atomic_no_ret(AtomicOp::Add, hist, run_digit, run_count)
            });
        }
        k.barrier();
        // Thread t owns digit (BINS − 1 − t), so the exclusive scan counts the keys in higher bins.
        let count = k.let_typed("bin_count", Scalar::U32, 0);
        k.if_(tid.lt(RADIX_BINS), |k| {
            k.assign(count, hist.at(u32c((RADIX_BINS - 1) as u64) - tid))
        });
        let (above, _) = k.block_exclusive_scan(count, scan);
        k.if_(
            tid.lt(RADIX_BINS).and(above.lt(need)).and(need.le(above + count)),
            |k| {
                k.store(pick, 0u32, u32c((RADIX_BINS - 1) as u64) - tid);
                k.store(pick, 1u32, above);
                k.store(pick, 2u32, count);
            },
        );
        k.barrier();
        let digit = k.let_("pick_digit", pick.at(0u32));
        let higher = k.let_("pick_above", pick.at(1u32));
        let in_bin = k.let_("pick_count", pick.at(2u32));
        k.assign(prefix, prefix | (digit << shift));
        k.assign(mask, mask | (u32c((RADIX_BINS - 1) as u64) << shift));
        k.assign(need, need - higher);
        k.assign(done, in_bin.eq_(need).or(shift.eq_(0u32)));
        // The last digit may overlap resolved bits (the start is not byte-aligned): those
        // bits are the same in every key still matching, so the histogram is unchanged.
        let next = select(shift.gt(RADIX_BITS), shift - RADIX_BITS, 0u32);
        k.assign(shift, select(done, shift, next));
    });
}

/// Start the search at the highest bit where the keys differ: the bits above it are common
/// to every key, so the first pass already spreads the keys over their actual range. Scores of
/// one head share the sign and most exponent bits, and a byte-aligned start spends a pass on
/// them (3 → 2 passes at 8191 random pages in a float model of the box bounds; select_topk at
/// 128k 23.1 → 20.3 µs on the H200). Keys all equal (or one key) need no pass: the prefix is
/// that key. For keys in registers or gathered in shared memory; streamed keys start
/// byte-aligned: there the range would take a sweep of its own, which costs as much as the
/// pass it saves (L2 latency per sweep; 120 → 130 µs at 1M when tried).
fn start_at_range(k: &mut KernelBuilder, st: &Search, bufs: &SelectBufs, sweeps: &mut ForSweeps) {
    let max = || u32c(u32::MAX as u64);
    let lo = k.let_typed("range_lo", Scalar::U32, max());
    let hi = k.let_typed("range_hi", Scalar::U32, 0);
    sweeps(k, Order::Strided, &mut |k, keys| {
        let l = keys
            .iter()
            .fold(lo.e(), |m, &(_, valid, key)| m.min(select(valid, key, max())));
        let h = keys
            .iter()
            .fold(hi.e(), |m, &(_, valid, key)| m.max(select(valid, key, 0u32)));
        k.assign(lo, l);
        k.assign(hi, h);
    });
    let range = k.block_allreduce_many(&[(Reduce::Min, lo.e()), (Reduce::Max, hi.e())], bufs.range);
    let diff = k.let_("key_diff", range[0] ^ range[1]);
    // Bit length of `diff` (no count-leading-zeros in the IR): a five-step binary search.
    let top = k.let_typed("top_bit", Scalar::U32, 0);
    for b in [16u32, 8, 4, 2, 1] {
        let up = top + b;
        k.assign(top, select((diff >> up.clone()).ne_(0u32), up, top));
    }
    let bits = k.let_("diff_bits", select(diff.ne_(0u32), top + 1u32, 0u32));
    // Shift amounts stay below 32: `bits = 0` takes the all-ones mask through the select.
    let low = max() >> (u32c(32) - bits).min(31u32);
    let common = k.let_("common", select(bits.eq_(0u32), max(), low.not()));
    k.assign(st.mask, common);
    k.assign(st.prefix, range[0] & common);
    k.assign(st.shift, select(bits.gt(RADIX_BITS), bits - RADIX_BITS, 0u32));
    k.assign(st.done, st.done.or(bits.eq_(0u32)));
}

/// Finish a search of some of the head's keys so that its result holds for all of them: a
/// search that stopped early (its bin held exactly the keys still needed, all kept) takes the
/// smallest key of that bin as its threshold and every key equal to it as still needed.
/// Afterwards `prefix` is the searched key itself and `mask` all ones, so keys that were not
/// searched compare with it correctly.
fn resolve(k: &mut KernelBuilder, st: &Search, bufs: &SelectBufs, sweeps: &mut ForSweeps) {
    let max = || u32c(u32::MAX as u64);
    k.if_(st.mask.ne_(max()), |k| {
        let low = k.let_typed("bin_min", Scalar::U32, max());
        sweeps(k, Order::Strided, &mut |k, keys| {
            let m = keys.iter().fold(low.e(), |m, &(_, valid, key)| {
                m.min(select(valid.and((key & st.mask).eq_(st.prefix)), key, max()))
            });
            k.assign(low, m);
        });
        let threshold = k.block_allreduce(Reduce::Min, low, bufs.range);
        let equal = k.let_typed("bin_equal", Scalar::U32, 0);
        sweeps(k, Order::Strided, &mut |k, keys| {
            let c = keys.iter().fold(equal.e(), |c, &(_, valid, key)| {
                c + select(valid.and(key.eq_(threshold)), 1u32, 0u32)
            });
            k.assign(equal, c);
        });
        let equal = k.block_allreduce(Reduce::Sum, equal, bufs.range);
        k.assign(st.prefix, threshold);
        k.assign(st.mask, max());
        k.assign(st.need, equal);
    });
}

/// The search of a head of [`PIVOT_MIN_SWEEPS`] sweeps or more over the keys its sample's
/// pivots bracket ([`pivots`], [`gather`]). Returns whether it ran: the k-th key was among the
/// gathered keys and they fit. `st` then holds the exact k-th key ([`resolve`]); otherwise it is
/// untouched and the head searches by streaming.
fn search_between_pivots(k: &mut KernelBuilder, st: &Search, cx: &Sweeps, bufs: &SelectBufs, kk: Var) -> Var {
    let gathered = k.shared("gathered", Scalar::U32, GATHER_CAP);
    let found = k.let_typed("found", Scalar::Bool, false);
    let size = cx.keys_per_sweep() as i64;
    let long = cx.n.ge((size * PIVOT_MIN_SWEEPS as i64) as i32);
    k.if_(st.done.not().and(long), |k| {
        let margin = pivot_margin(k, cx, kk);
        // The keys between the pivots number about 2·margin·n/S. Past what fits, the head would
        // read its scores twice more (sample, gather) and then stream anyway: a thin tile's
        // sample on a long head (2048 keys at 1M tokens, 25% kept: ~3900 expected).
        let fits = (margin.i64() * 2i64 * cx.n.i64()).le(size * PIVOT_GATHER_BUDGET as i64);
        k.if_(fits, |k| {
            let (lo, hi) = pivots(k, cx, bufs, kk, margin);
            let (above, count) = gather(k, cx, bufs, gathered, lo, hi);
            let kk = k.let_("keep", kk.u32());
            let ok = above.lt(kk).and(kk.le(above + count)).and(count.le(GATHER_CAP));
            k.assign(found, ok);
            k.if_(found, |k| {
                let shared = SharedKeys {
                    keys: gathered,
                    count,
                    tid: cx.tid,
                    threads: cx.threads,
                    items: cx.items,
                };
                k.assign(st.need, kk - above);
                start_at_range(k, st, bufs, &mut |k, _, body| shared.sweeps(k, body));
                search(k, st, bufs, false, &mut |k, _, body| shared.sweeps(k, body));
                resolve(k, st, bufs, &mut |k, _, body| shared.sweeps(k, body));
            });
        });
    });
    found
}

/// `m`, how far in sample ranks the pivots sit from the k-th key's expected rank: [`PIVOT_SIGMAS`]
/// of that rank's binomial standard deviation, plus two.
fn pivot_margin(k: &mut KernelBuilder, cx: &Sweeps, kk: Var) -> Var {
    let size = cx.keys_per_sweep() as f64;
    let keep = k.let_("keep_share", kk.f32() * cx.n.f32().rcp());
    let sd = (keep * (f32c(1.0) - keep) * size).max(0.0f32).sqrt();
    k.let_("margin", (sd * PIVOT_SIGMAS).ceil().i32() + 2i32)
}

/// Pivots `lo ≤ hi` that bracket the head's k-th largest key in most heads: the keys of
/// sample ranks `r + m` and `r − m` (largest first) of [`Sweeps::load_sample`], `r = k·S/n` the
/// k-th key's expected rank in the sample and `m` the [`pivot_margin`]. Each is a search of the
/// sample in registers.
fn pivots(k: &mut KernelBuilder, cx: &Sweeps, bufs: &SelectBufs, kk: Var, margin: Var) -> (Var, Var) {
    let size = cx.keys_per_sweep() as i64;
    let sample = cx.load_sample(k);
    let expected = k.let_("sample_rank", (kk.i64() * size / cx.n.i64()).i32());
    let key_at = |k: &mut KernelBuilder, rank: Expr| {
        let st = Search::new(k, rank.u32(), boolc(false));
        let mut in_sample =
            |k: &mut KernelBuilder, _: Order, body: &mut dyn FnMut(&mut KernelBuilder, &SweepKeys)| {
                body(k, &sample)
            };
        start_at_range(k, &st, bufs, &mut in_sample);
        search(k, &st, bufs, false, &mut in_sample);
        resolve(k, &st, bufs, &mut in_sample);
        st.prefix
    };
    let lo = key_at(k, (expected + margin).min(size as i32));
    let hi = key_at(k, (expected - margin).max(1i32));
    (lo, hi)
}

/// One streamed sweep of the head: counts the keys above `hi` (block total) and gathers those
/// in `[lo, hi]` into `gathered`, the first [`GATHER_CAP`] of them (`count` says how many there
/// were).
fn gather(
    k: &mut KernelBuilder,
    cx: &Sweeps,
    bufs: &SelectBufs,
    gathered: Buf,
    lo: Var,
    hi: Var,
) -> (Var, Var) {
    let above = k.let_typed("above", Scalar::U32, 0);
    let count = k.let_typed("gathered_n", Scalar::U32, 0);
    cx.stream(k, Order::Strided, &mut |k, keys| {
        let (mut up, mut mine, mut mids) = (above.e(), u32c(0), Vec::new());
        for &(_, valid, key) in keys {
            let mid = k.let_("mid", valid.and(key.ge(lo)).and(key.le(hi)));
            up = up + select(valid.and(key.gt(hi)), 1u32, 0u32);
            mine = mine + select(mid, 1u32, 0u32);
            mids.push((key, mid));
        }
        k.assign(above, up);
        let (excl, total) = k.block_exclusive_scan(mine, bufs.scan);
        let at = k.let_("gather_at", count + excl);
        for (key, mid) in mids {
            k.if_(mid, |k| {
                k.if_(at.lt(GATHER_CAP), |k| k.store(gathered, at, key));
                k.assign(at, at + 1u32);
            });
        }
        k.assign(count, count + total);
    });
    let above = k.block_allreduce(Reduce::Sum, above, bufs.range);
    (above, count)
}

/// The keys [`gather`] collected, read from shared memory in sweeps of `threads · items`.
struct SharedKeys {
    keys: Buf,
    count: Var,
    tid: Var,
    threads: u32,
    items: u32,
}

impl SharedKeys {
    fn sweeps(&self, k: &mut KernelBuilder, body: &mut dyn FnMut(&mut KernelBuilder, &SweepKeys)) {
        let sweep = (self.threads * self.items) as i32;
        k.for_("gbase", 0i32, self.count.i32(), sweep, |k, base| {
            let keys: Vec<(Var, Var, Var)> = (0..self.items)
                .map(|r| {
                    let i = k.let_("gi", base.clone() + self.tid.i32() + (r * self.threads) as i32);
                    let valid = k.let_("gvalid", i.lt(self.count.i32()));
                    let key = k.let_("gkey", self.keys.at(select(valid, i, 0i32)));
                    (i, valid, key)
                })
                .collect();
            body(k, &keys)
        });
    }
}

/// Order-preserving compaction: keep the keys above the prefix and the first `need` equal to
/// it, each placed by a block scan of packed (above, equal) counts.
fn compact(k: &mut KernelBuilder, st: &Search, bufs: &SelectBufs, kk: Var, sweeps: &mut ForSweeps) {
    let (prefix, mask, need) = (st.prefix, st.mask, st.need);
    let (scan, sel_pages, row) = (bufs.scan, bufs.sel_pages, bufs.row);
    k.if_(kk.gt(0i32), |k| {
        let written = k.let_typed("written", Scalar::U32, 0);
        let equal_seen = k.let_typed("equal_seen", Scalar::U32, 0);
        sweeps(k, Order::Consecutive, &mut |k, keys| {
            let mut flags = Vec::new();
            let mut packed = u32c(0);
            for &(j, valid, key) in keys {
                let masked = k.let_("masked", key & mask);
                let gt = k.let_("gt", valid.and(masked.gt(prefix)));
                let eq = k.let_("eq", valid.and(masked.eq_(prefix)));
                // Per-CTA sweep counts are < 2^16 (threads·items ≤ 16384), so both fit one u32.
                packed = packed + select(gt, 1u32, 0u32) + select(eq, 1u32 << 16, 0u32);
                flags.push((j, gt, eq));
            }
            let (excl, total) = k.block_exclusive_scan(packed, scan);
            // Equal keys still wanted after the sweeps before this one.
            let left = k.let_("left", need - equal_seen.min(need));
            let seen = k.let_("seen", excl >> 16u32);
            let pos = k.let_("pos", written + (excl & 0xffffu32) + seen.min(left));
            for (j, gt, eq) in flags {
                k.if_(gt.or(eq.and(seen.lt(left))), |k| {
                    k.store(sel_pages, row + pos.i64(), j);
                    k.assign(pos, pos + 1u32);
                });
                k.assign(seen, seen + select(eq, 1u32, 0u32));
            }
            k.assign(
                written,
                written + (total & 0xffffu32) + (total >> 16u32).min(left),
            );
            k.assign(equal_seen, equal_seen + (total >> 16u32));
        });
    });
}
