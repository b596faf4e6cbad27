//! The orchestrator: for every context bucket and kernel family, evaluate candidates (the
//! default first), rank them, re-time the leaders together, and choose.
//!
//! Buckets are the outer loop so the backend keeps one bucket's (large) device caches while
//! every family is measured on them; `prepare` is called once per candidate per run and
//! remembered, so a tile compiles once however many buckets evaluate it. Every measurement is
//! first looked up in the [`RecordStore`] (resumed log, device cache) and only measured when
//! missing, so an interrupted or repeated run repeats no finished work.

use super::log::{group_digest, Origin, Record, RecordKey, RecordStore, Stage, Status};
use super::rank::{rank, Timed};
use super::space::{family_space, refinements, DeviceLimits, Space};
use super::strategy::{halving_keep, order, Strategy};
use super::{Candidate, DataKind, DeviceKey, EvalError, MeasureBackend, Prepared, Workload};
use anyhow::{bail, ensure, Context, Result};
use entkv_abi::{KernelFamily, PagedSpec, Selector, TileConfig};
use entkv_bundle::Bucket;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Representative contexts of the default buckets: the BENCH.md `paper` lengths (32k, 128k, 1M)
/// and 8k below them.
pub const DEFAULT_CONTEXTS: [u64; 4] = [8 << 10, 32 << 10, 128 << 10, 1 << 20];

/// A context bucket and the length it is measured at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ContextBucket {
    /// `Bucket::Tokens { lo, hi }`.
    pub bucket: Bucket,
    /// The representative length the bucket's candidates are measured at.
    pub context: u64,
}

/// Buckets around representative lengths: sorted and deduplicated, edges at the geometric
/// midpoints between neighbours, the first starting at 1 and the last open-ended
/// (`hi = u64::MAX`), so every length falls in exactly one bucket.
pub fn buckets_for(contexts: &[u64]) -> Result<Vec<ContextBucket>> {
    let mut c = contexts.to_vec();
    c.sort_unstable();
    c.dedup();
    ensure!(!c.is_empty(), "no context length to tune for");
    ensure!(c[0] >= 1, "context lengths must be at least 1 token");
    let mid = |a: u64, b: u64| ((a as f64) * (b as f64)).sqrt().round() as u64;
    let mut out = Vec::with_capacity(c.len());
    for (i, &context) in c.iter().enumerate() {
        let lo = if i == 0 {
            1
        } else {
            mid(c[i - 1], context).clamp(c[i - 1] + 1, context)
        };
        let hi = if i + 1 == c.len() {
            u64::MAX
        } else {
            mid(context, c[i + 1]).clamp(context + 1, c[i + 1])
        };
        out.push(ContextBucket {
            bucket: Bucket::Tokens { lo, hi },
            context,
        });
    }
    Ok(out)
}

/// The versions that key every record (and the cache).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Versions {
    pub entkv: String,
    /// Digest of the kernel sources this build generates from (`build.rs`).
    pub kernel_code: String,
    pub llvm: String,
}

impl Versions {
    /// This build's: the crate version, the kernel-source digest and
    /// `entkv_codegen::llvm_version()`.
    pub fn current() -> Versions {
        Versions {
            entkv: env!("CARGO_PKG_VERSION").to_string(),
            kernel_code: env!("ENTKV_KERNEL_CODE").to_string(),
            llvm: entkv_codegen::llvm_version(),
        }
    }
}

/// Everything a search needs besides the backend and the records.
#[derive(Clone, Debug)]
pub struct SearchOpts {
    pub spec: PagedSpec,
    pub batch: u32,
    pub q_heads: u32,
    pub kv_heads: u32,
    pub buckets: Vec<ContextBucket>,
    pub families: Vec<KernelFamily>,
    pub strategy: Strategy,
    pub seed: u64,
    /// Evaluations per (family, bucket), the default included.
    pub max_evals: Option<usize>,
    /// No new evaluation starts once this much time has passed.
    pub time_budget: Option<Duration>,
    /// Time the refinements around each dense-tile family's first-round best, and around its
    /// fastest where the tie band ranked the default first (`space::refinements`).
    pub refine: bool,
    /// Keys the candidates are timed on (verification uses both kinds).
    pub data: DataKind,
    /// Timing repetitions of an evaluation (halving starts with a quarter).
    pub reps: u32,
    /// Repetitions of the final interleaved re-timing.
    pub final_reps: u32,
    /// Relative band of tied medians ([`super::rank::DEFAULT_TOLERANCE`]).
    pub tolerance: f64,
    /// Leaders re-timed together before choosing (the default joins them).
    pub leaders: usize,
    pub limits: DeviceLimits,
    pub versions: Versions,
    /// Show a progress bar on stderr (only drawn on a terminal).
    pub progress: bool,
}

impl SearchOpts {
    /// Defaults of the `autotune` command for `spec` (24/24 heads, batch 8, the default
    /// buckets, every family, exhaustive).
    pub fn new(spec: PagedSpec) -> SearchOpts {
        SearchOpts {
            spec,
            batch: 8,
            q_heads: 24 * spec.decode.group,
            kv_heads: 24,
            buckets: buckets_for(&DEFAULT_CONTEXTS).expect("the default contexts are valid"),
            families: KernelFamily::ALL.to_vec(),
            strategy: Strategy::Exhaustive,
            seed: 0,
            max_evals: None,
            time_budget: None,
            refine: true,
            data: DataKind::Normal,
            reps: 10,
            final_reps: 50,
            tolerance: super::rank::DEFAULT_TOLERANCE,
            leaders: 3,
            limits: DeviceLimits::default(),
            versions: Versions::current(),
            progress: false,
        }
    }

    fn check(&self) -> Result<()> {
        ensure!(!self.families.is_empty(), "no kernel family to tune");
        ensure!(!self.buckets.is_empty(), "no context bucket to tune");
        ensure!(
            self.batch >= 1 && self.kv_heads >= 1,
            "batch and kv heads must be at least 1"
        );
        ensure!(
            self.q_heads == self.kv_heads * self.spec.decode.group,
            "{} query heads over {} KV heads is not the spec's GQA group {}",
            self.q_heads,
            self.kv_heads,
            self.spec.decode.group
        );
        ensure!(
            self.reps >= 1 && self.final_reps >= 1,
            "timing repetitions must be at least 1"
        );
        ensure!(self.leaders >= 1, "at least one leader is re-timed");
        Ok(())
    }
}

/// Counts of evaluation statuses (one per candidate evaluation of a family and bucket).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StatusCounts {
    pub ok: usize,
    pub invalid: usize,
    pub compile_error: usize,
    pub spills: usize,
    pub launch_error: usize,
    pub wrong_result: usize,
}

impl StatusCounts {
    pub fn add(&mut self, s: Status) {
        *match s {
            Status::Ok => &mut self.ok,
            Status::Invalid => &mut self.invalid,
            Status::CompileError => &mut self.compile_error,
            Status::Spills => &mut self.spills,
            Status::LaunchError => &mut self.launch_error,
            Status::WrongResult => &mut self.wrong_result,
        } += 1;
    }

    pub fn get(&self, s: Status) -> usize {
        match s {
            Status::Ok => self.ok,
            Status::Invalid => self.invalid,
            Status::CompileError => self.compile_error,
            Status::Spills => self.spills,
            Status::LaunchError => self.launch_error,
            Status::WrongResult => self.wrong_result,
        }
    }
}

/// The winner of one family and bucket.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Chosen {
    pub tile: TileConfig,
    pub tag: String,
    /// Its median (the final re-timing's when there was one), µs.
    pub median_us: f64,
    pub is_default: bool,
}

/// What the search found for one family and bucket (and selector: `workload.selector`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BucketResult {
    pub family: KernelFamily,
    pub bucket: ContextBucket,
    pub workload: Workload,
    /// Valid points of the family's space, and points pruned analytically.
    pub space_valid: usize,
    pub space_invalid: usize,
    /// Candidates the strategy planned to evaluate (the default included).
    pub planned: usize,
    pub counts: StatusCounts,
    pub default_tag: String,
    /// The default's median, measured alongside the winner (final re-timing) when possible.
    pub default_median_us: Option<f64>,
    /// `None` only when not even the default was measured (time budget).
    pub chosen: Option<Chosen>,
    /// Whether the search of this family and bucket ran to the end; an unfinished one ships
    /// the default.
    pub complete: bool,
}

impl BucketResult {
    /// `decode_dense`, or `decode_sparse (topk)` for a family tuned per selector.
    pub fn label(&self) -> String {
        self.family.label(self.workload.selector)
    }

    /// Default median over the winner's: how much faster the winner is.
    pub fn speedup(&self) -> Option<f64> {
        Some(self.default_median_us? / self.chosen.as_ref()?.median_us)
    }
}

/// Where the run's records came from and what it asked of the backend.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunStats {
    /// Records measured by this run.
    pub measured: usize,
    /// Records reused from the device cache.
    pub cached: usize,
    /// Records reused from the resumed log.
    pub resumed: usize,
    pub prepare_calls: usize,
    pub verify_calls: usize,
    pub time_calls: usize,
    pub elapsed_s: f64,
    /// The time budget ran out before the search finished.
    pub budget_exhausted: bool,
}

impl RunStats {
    /// Calls of `prepare`, `verify` and `time` together.
    pub fn backend_calls(&self) -> usize {
        self.prepare_calls + self.verify_calls + self.time_calls
    }
}

/// The result of [`run_search`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchOutcome {
    pub device: DeviceKey,
    pub spec: String,
    pub strategy: Strategy,
    pub results: Vec<BucketResult>,
    pub stats: RunStats,
}

/// One tuned table row: the winner of `family` in `bucket` (for `selector`'s selections).
#[derive(Clone, Debug, PartialEq)]
pub struct TunedChoice {
    pub family: KernelFamily,
    pub bucket: Bucket,
    pub selector: Option<Selector>,
    pub tile: TileConfig,
    pub median_us: f64,
}

impl SearchOutcome {
    /// The tuned rows to ship: every family and bucket with a measured winner (the default
    /// when the search there did not finish).
    pub fn choices(&self) -> Vec<TunedChoice> {
        self.results
            .iter()
            .filter_map(|r| {
                let c = r.chosen.as_ref()?;
                Some(TunedChoice {
                    family: r.family,
                    bucket: r.bucket.bucket,
                    selector: r.workload.selector,
                    tile: c.tile,
                    median_us: c.median_us,
                })
            })
            .collect()
    }
}

/// Run the search of `opts` on `backend`, reusing and appending records through `store`.
///
/// Errors: bad options, a default tile that fails analytically or on the device (compile,
/// launch or verification: the shipped default is broken, tuning around it would hide that),
/// an interleaved timing of candidates that each passed alone, and I/O on the record files.
/// Every finished measurement is on disk before an error returns, so `--resume` continues.
pub fn run_search(
    opts: &SearchOpts,
    backend: &mut dyn MeasureBackend,
    store: &mut RecordStore,
) -> Result<SearchOutcome> {
    opts.check()?;
    let start = Instant::now();
    let mut plans = Vec::new();
    for &family in &opts.families {
        let space = family_space(family, &opts.spec, &opts.limits).map_err(anyhow::Error::msg)?;
        // A family that reads a selection is searched once per selector: each gets its row,
        // from the points that serve its walk, its own default first.
        for selector in family.selector_keys() {
            let space = space.for_selector(&opts.spec, selector);
            let tiles = order(opts.strategy, family, &space.valid, opts.seed, opts.max_evals);
            plans.push(Plan {
                space,
                tiles,
                selector,
            });
        }
    }
    let total: usize = plans.iter().map(|p| p.tiles.len()).sum::<usize>() * opts.buckets.len();
    let mut s = Searcher {
        opts,
        device: backend.device(),
        backend,
        store,
        prepared: HashMap::new(),
        prefetched: HashSet::new(),
        stats: RunStats::default(),
        start,
        bar: progress_bar(opts.progress, total as u64),
    };
    let results = s.run_all(&plans);
    // Cleared on errors too, so the error message is not drawn over.
    s.bar.finish_and_clear();
    let results = results?;
    s.stats.elapsed_s = start.elapsed().as_secs_f64();
    Ok(SearchOutcome {
        device: s.device,
        spec: opts.spec.sketch_tag(),
        strategy: opts.strategy,
        results,
        stats: s.stats,
    })
}

fn progress_bar(show: bool, total: u64) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !show || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{wide_bar}] {pos}/{len} evaluations, ETA {eta} {msg}",
    ) {
        bar.set_style(style);
    }
    bar
}

/// Candidates generated per batch: enough to keep 16 cores busy through uneven compile times,
/// few enough that the time budget is checked every few seconds.
const PREFETCH_BATCH: usize = 64;

/// What is searched for one family (and selector): its space and the candidates in order.
struct Plan {
    space: Space,
    tiles: Vec<TileConfig>,
    selector: Option<Selector>,
}

/// A family's first round in one bucket, waiting for its refinements.
struct Round {
    result: BucketResult,
    /// The candidates that passed, with their medians (the default first).
    timed: Vec<(TileConfig, f64)>,
    /// The points to time next (`space::refinements`).
    refine: Vec<TileConfig>,
}

/// The state of one run.
struct Searcher<'a> {
    opts: &'a SearchOpts,
    device: DeviceKey,
    backend: &'a mut dyn MeasureBackend,
    store: &'a mut RecordStore,
    /// `prepare` results of this run, by family and tile tag.
    prepared: HashMap<(KernelFamily, String), Result<Prepared, EvalError>>,
    /// Candidates handed to `backend.prefetch` in this run, by family and tile tag.
    prefetched: HashSet<(KernelFamily, String)>,
    stats: RunStats,
    start: Instant,
    bar: indicatif::ProgressBar,
}

impl Searcher<'_> {
    /// Repetitions of a candidate's first timing (`Stage::Eval`).
    fn eval_reps(&self) -> u32 {
        self.opts.strategy.first_reps(self.opts.reps)
    }

    fn out_of_time(&mut self) -> bool {
        let over = self.opts.time_budget.is_some_and(|b| self.start.elapsed() >= b);
        self.stats.budget_exhausted |= over;
        over
    }

    fn key(
        &self,
        family: KernelFamily,
        tile: &TileConfig,
        w: &Workload,
        stage: Stage,
        reps: u32,
    ) -> RecordKey {
        RecordKey {
            device: self.device.clone(),
            entkv_version: self.opts.versions.entkv.clone(),
            kernel_code: self.opts.versions.kernel_code.clone(),
            llvm_version: self.opts.versions.llvm.clone(),
            spec: self.opts.spec.sketch_tag(),
            family,
            tile_tag: tile.tag(),
            workload: *w,
            stage,
            reps,
            group: None,
        }
    }

    fn candidate(&self, family: KernelFamily, tile: TileConfig) -> Candidate {
        Candidate {
            family,
            spec: self.opts.spec,
            tile,
        }
    }

    /// A known record for `key`, counted by where it came from (one from the device cache is
    /// copied into the run's log).
    fn reuse(&mut self, key: &RecordKey) -> Result<Option<Record>> {
        let Some((r, origin)) = self.store.reuse(key)? else {
            return Ok(None);
        };
        match origin {
            Origin::Cache => self.stats.cached += 1,
            Origin::Log => self.stats.resumed += 1,
            Origin::Measured => {}
        }
        Ok(Some(r))
    }

    fn save(&mut self, records: &[Record]) -> Result<()> {
        self.stats.measured += records.len();
        self.store.append(records)
    }

    /// `backend.prepare`, once per candidate per run.
    fn prepare(&mut self, c: &Candidate) -> Result<Prepared, EvalError> {
        let k = (c.family, c.tile.tag());
        if let Some(p) = self.prepared.get(&k) {
            return p.clone();
        }
        self.stats.prepare_calls += 1;
        let p = self.backend.prepare(c);
        self.prepared.insert(k, p.clone());
        p
    }

    /// Every bucket (outer: the backend keeps one bucket's device data at a time) and family.
    /// Code generation is the slow part of a candidate and runs on every core in batches, so
    /// every family's first-round candidates (the same in every bucket) are generated in one
    /// batch up front, and a bucket's refinements (which depend on its first rounds) in one
    /// batch for all families before any of them is timed.
    fn run_all(&mut self, plans: &[Plan]) -> Result<Vec<BucketResult>> {
        let opts = self.opts;
        let reps = self.eval_reps();
        let workload = |bucket: &ContextBucket, selector: Option<Selector>| Workload {
            batch: opts.batch,
            q_heads: opts.q_heads,
            kv_heads: opts.kv_heads,
            context: bucket.context,
            data: opts.data,
            selector,
        };
        self.prefetch_fresh(
            plans.iter().flat_map(|p| {
                p.tiles.iter().flat_map(move |t| {
                    opts.buckets
                        .iter()
                        .map(move |b| (p.space.family, *t, workload(b, p.selector)))
                })
            }),
            reps,
        );
        let mut results = Vec::new();
        for bucket in &opts.buckets {
            let mut rounds = Vec::new();
            for p in plans {
                let w = workload(bucket, p.selector);
                rounds.push(self.first_round(&p.space, &p.tiles, *bucket, w)?);
            }
            self.prefetch_fresh(
                rounds
                    .iter()
                    .flat_map(|r| r.refine.iter().map(|t| (r.result.family, *t, r.result.workload))),
                reps,
            );
            for (p, round) in plans.iter().zip(rounds) {
                results.push(self.finish_bucket(&p.space, round)?);
            }
        }
        Ok(results)
    }

    /// [`Searcher::prefetch`] the tiles still fresh ([`Searcher::is_fresh`]) at their
    /// workload, each tile once.
    fn prefetch_fresh(
        &mut self,
        tiles: impl Iterator<Item = (KernelFamily, TileConfig, Workload)>,
        reps: u32,
    ) {
        let mut seen = HashSet::new();
        let fresh: Vec<Candidate> = tiles
            .filter(|(f, t, w)| self.is_fresh(*f, t, w, reps) && seen.insert((*f, t.tag())))
            .map(|(f, t, _)| self.candidate(f, t))
            .collect();
        self.prefetch(&fresh);
    }

    /// Generate `cands` ahead of their evaluations (on every core on the GPU backend), in
    /// batches of [`PREFETCH_BATCH`] so that the time budget also stops code generation.
    fn prefetch(&mut self, cands: &[Candidate]) {
        for batch in cands.chunks(PREFETCH_BATCH) {
            if self.out_of_time() {
                return;
            }
            self.backend.prefetch(batch);
            self.prefetched
                .extend(batch.iter().map(|c| (c.family, c.tile.tag())));
        }
    }

    /// Whether `tile` still needs code generation for an evaluation at `w`: neither prepared in
    /// this run nor recorded.
    fn is_fresh(&self, family: KernelFamily, tile: &TileConfig, w: &Workload, reps: u32) -> bool {
        let key = (family, tile.tag());
        !self.prepared.contains_key(&key)
            && !self.prefetched.contains(&key)
            && self
                .store
                .lookup(&self.key(family, tile, w, Stage::Eval, reps))
                .is_none()
    }

    /// The first round of one family in one bucket: the strategy's candidates, the default
    /// first, and the refinements its ranking calls for (`space::refinements`).
    fn first_round(
        &mut self,
        space: &Space,
        tiles: &[TileConfig],
        bucket: ContextBucket,
        w: Workload,
    ) -> Result<Round> {
        let family = space.family;
        let default = space.default_tile();
        self.bar
            .set_message(format!("{family} @ {} tokens", bucket.context));
        let mut result = BucketResult {
            family,
            bucket,
            workload: w,
            space_valid: space.valid.len(),
            space_invalid: space.invalid.len(),
            planned: tiles.len(),
            counts: StatusCounts::default(),
            default_tag: default.tag(),
            default_median_us: None,
            chosen: None,
            complete: true,
        };
        let reps = self.eval_reps();
        self.record_invalid(space, &w, reps, &mut result.counts)?;
        let (timed, finished) = self.eval_round(family, tiles, &w, reps, &mut result.counts, true)?;
        result.complete = finished;
        let mut refine = Vec::new();
        if self.opts.refine && finished && !timed.is_empty() {
            let ranked: Vec<TileConfig> = self
                .ranked(&timed, &default)
                .iter()
                .map(|&i| timed[i].0)
                .collect();
            // The fastest median, which the ranking's tie band may have put behind the default.
            let fastest = timed
                .iter()
                .filter(|(_, m)| m.is_finite())
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|&(t, _)| t);
            refine = refinements(
                family,
                &self.opts.spec,
                &self.opts.limits,
                w.selector,
                &ranked,
                fastest,
                tiles,
            );
            refine.retain(|t| t.serves(w.selector));
            if let Some(cap) = self.opts.max_evals {
                refine.truncate(cap.saturating_sub(tiles.len()));
            }
            result.planned += refine.len();
            self.bar.inc_length(refine.len() as u64);
        }
        Ok(Round {
            result,
            timed,
            refine,
        })
    }

    /// Time a first round's refinements (one step of coordinate descent from its best), then
    /// rank, re-time the leaders and choose.
    fn finish_bucket(&mut self, space: &Space, round: Round) -> Result<BucketResult> {
        let Round {
            mut result,
            mut timed,
            refine,
        } = round;
        let (family, w, default) = (space.family, result.workload, space.default_tile());
        let reps = self.eval_reps();
        // A refinement cut short by the time budget still ships the best point measured.
        let (more, _) = self.eval_round(family, &refine, &w, reps, &mut result.counts, false)?;
        timed.extend(more);
        let Some(&(_, default_eval)) = timed.first() else {
            return Ok(result);
        };
        result.default_median_us = Some(default_eval);
        let chosen_default = |median_us| Chosen {
            tile: default,
            tag: default.tag(),
            median_us,
            is_default: true,
        };
        if !result.complete {
            result.chosen = Some(chosen_default(default_eval));
            return Ok(result);
        }

        // Successive halving: re-time the better half with twice the repetitions.
        let mut pool = timed;
        if self.opts.strategy == Strategy::Halving {
            let (mut round, mut r) = (1, reps * 2);
            while pool.len() > self.opts.leaders {
                let order = self.ranked(&pool, &default);
                let keep: Vec<TileConfig> = order[..halving_keep(pool.len())]
                    .iter()
                    .map(|&i| pool[i].0)
                    .collect();
                match self.measure_group(family, &keep, &w, Stage::Round(round), r)? {
                    Some(p) => pool = p,
                    None => {
                        result.complete = false;
                        result.chosen = Some(chosen_default(default_eval));
                        return Ok(result);
                    }
                }
                round += 1;
                r = r.saturating_mul(2);
            }
        }

        // The leaders and the default, re-timed together.
        let order = self.ranked(&pool, &default);
        let mut leaders: Vec<TileConfig> = order.iter().take(self.opts.leaders).map(|&i| pool[i].0).collect();
        if !leaders.contains(&default) {
            leaders.push(default);
        }
        let finals = if leaders.len() < 2 {
            vec![(default, default_eval)]
        } else {
            match self.measure_group(family, &leaders, &w, Stage::Final, self.opts.final_reps)? {
                Some(f) => f,
                None => {
                    result.complete = false;
                    result.chosen = Some(chosen_default(default_eval));
                    return Ok(result);
                }
            }
        };
        let order = self.ranked(&finals, &default);
        let (tile, median_us) = finals[order[0]];
        result.default_median_us = finals.iter().find(|(t, _)| *t == default).map(|&(_, m)| m);
        result.chosen = Some(Chosen {
            tile,
            tag: tile.tag(),
            median_us,
            is_default: tile == default,
        });
        Ok(result)
    }

    /// Evaluate `tiles` one by one (reusing known records), compiled together first (in
    /// parallel on the GPU backend; recorded ones are not, so a cached run calls the backend 0
    /// times). Returns the tiles that passed with their medians, and whether the round ran to
    /// its end (the time budget may stop it). With `first_is_default`, `tiles[0]` is the
    /// default, which must pass.
    fn eval_round(
        &mut self,
        family: KernelFamily,
        tiles: &[TileConfig],
        w: &Workload,
        reps: u32,
        counts: &mut StatusCounts,
        first_is_default: bool,
    ) -> Result<(Vec<(TileConfig, f64)>, bool)> {
        self.prefetch_fresh(tiles.iter().map(|t| (family, *t, *w)), reps);
        let mut timed: Vec<(TileConfig, f64)> = Vec::new();
        for (i, tile) in tiles.iter().enumerate() {
            let is_default = first_is_default && i == 0;
            let key = self.key(family, tile, w, Stage::Eval, reps);
            let (rec, reused) = match self.reuse(&key)? {
                Some(r) => (r, true),
                None if self.out_of_time() => {
                    self.bar.inc((tiles.len() - i) as u64);
                    return Ok((timed, false));
                }
                None => (self.evaluate(key, *tile, w, reps, is_default)?, false),
            };
            self.bar.inc(1);
            counts.add(rec.status);
            if is_default && rec.status != Status::Ok {
                let earlier = if reused {
                    format!(
                        " [recorded in the resumed log at {}; a run without --resume measures it again]",
                        rec.utc
                    )
                } else {
                    String::new()
                };
                bail!(
                    "the default tile {} of {family} fails at {} tokens: {}: {} — the shipped \
                     default is broken on this GPU (fix it before tuning around it){earlier}",
                    tile.tag(),
                    w.context,
                    rec.status.name(),
                    rec.detail.as_deref().unwrap_or("")
                );
            }
            if rec.status == Status::Ok {
                timed.push((*tile, rec.median_us.unwrap_or(f64::NAN)));
            }
        }
        Ok((timed, true))
    }

    fn ranked(&self, pool: &[(TileConfig, f64)], default: &TileConfig) -> Vec<usize> {
        let cands: Vec<Timed> = pool
            .iter()
            .map(|(t, m)| Timed {
                tag: t.tag(),
                median_us: *m,
                is_default: t == default,
            })
            .collect();
        rank(&cands, self.opts.tolerance)
    }

    /// Record the analytically pruned points of `space` (once per workload; one write).
    fn record_invalid(
        &mut self,
        space: &Space,
        w: &Workload,
        reps: u32,
        counts: &mut StatusCounts,
    ) -> Result<()> {
        let mut fresh = Vec::new();
        for (tile, why) in &space.invalid {
            counts.add(Status::Invalid);
            let key = self.key(space.family, tile, w, Stage::Eval, reps);
            if self.reuse(&key)?.is_none() {
                let mut r = Record::new(key, *tile, Status::Invalid);
                r.detail = Some(why.clone());
                fresh.push(r);
            }
        }
        if fresh.is_empty() {
            Ok(())
        } else {
            self.save(&fresh)
        }
    }

    /// Prepare, verify and time one candidate alone; the record is saved before returning.
    fn evaluate(
        &mut self,
        key: RecordKey,
        tile: TileConfig,
        w: &Workload,
        reps: u32,
        is_default: bool,
    ) -> Result<Record> {
        let c = self.candidate(key.family, tile);
        let mut rec = Record::new(key, tile, Status::Ok);
        match self.prepare(&c) {
            Err(e) => rec = rec.with_error(&e),
            Ok(p) => {
                rec = rec.with_prepared(&p);
                if p.local_bytes > 0 && !is_default {
                    rec = rec.with_error(&EvalError::Spills(format!(
                        "{} bytes of local memory per thread ({} registers)",
                        p.local_bytes, p.registers
                    )));
                } else {
                    if p.local_bytes > 0 {
                        // The default ships regardless, so it stays in the race.
                        rec.detail = Some(format!("the default spills {} bytes per thread", p.local_bytes));
                    }
                    self.stats.verify_calls += 1;
                    match self.backend.verify(&c, w) {
                        Err(e) => rec = rec.with_error(&e),
                        Ok(()) => {
                            self.stats.time_calls += 1;
                            match self.backend.time(&[c], w, reps) {
                                Err(e) => rec = rec.with_error(&e),
                                Ok(t) => match t.first().filter(|t| !t.is_empty()) {
                                    Some(t) => rec = rec.with_times(t),
                                    None => {
                                        rec = rec.with_error(&EvalError::LaunchError(
                                            "the backend returned no timings".into(),
                                        ))
                                    }
                                },
                            }
                        }
                    }
                }
            }
        }
        self.save(std::slice::from_ref(&rec))?;
        Ok(rec)
    }

    /// Time `tiles` interleaved (one backend call) with `reps` repetitions, or reuse the
    /// group's records when all of them are known. `None` when the time budget ran out first.
    fn measure_group(
        &mut self,
        family: KernelFamily,
        tiles: &[TileConfig],
        w: &Workload,
        stage: Stage,
        reps: u32,
    ) -> Result<Option<Vec<(TileConfig, f64)>>> {
        let tags: Vec<String> = tiles.iter().map(TileConfig::tag).collect();
        let digest = group_digest(&tags);
        let keys: Vec<RecordKey> = tiles
            .iter()
            .map(|t| RecordKey {
                group: Some(digest.clone()),
                ..self.key(family, t, w, stage, reps)
            })
            .collect();
        let known: Vec<Option<f64>> = keys
            .iter()
            .map(|k| {
                self.store
                    .lookup(k)
                    .filter(|(r, _)| r.status == Status::Ok)
                    .and_then(|(r, _)| r.median_us)
            })
            .collect();
        if known.iter().all(Option::is_some) {
            for k in &keys {
                self.reuse(k)?;
            }
            return Ok(Some(
                tiles.iter().copied().zip(known.into_iter().flatten()).collect(),
            ));
        }
        if self.out_of_time() {
            return Ok(None);
        }
        let cands: Vec<Candidate> = tiles.iter().map(|t| self.candidate(family, *t)).collect();
        let mut prepared = Vec::new();
        for c in &cands {
            let p = self
                .prepare(c)
                .with_context(|| format!("preparing {family} tile {} again for re-timing", c.tile.tag()))?;
            prepared.push(p);
        }
        self.stats.time_calls += 1;
        let mut alone = false;
        let times = match self.backend.time(&cands, w, reps) {
            Ok(times) => times,
            // The tiles' sessions hold a workspace each per cache copy and step, which together
            // can exceed the GPU's memory at 1M tokens (four certified tiles on an 80 GB H100:
            // results/2026-12-05-certified-tc/1-check-tune): time them one at a time instead.
            Err(EvalError::LaunchError(why)) if cands.len() > 1 => {
                eprintln!(
                    "timing {family} tiles {tags:?} together at {} tokens failed ({why}); timing them one at a time",
                    w.context
                );
                alone = true;
                let mut times = Vec::new();
                for c in &cands {
                    self.stats.time_calls += 1;
                    let t = self
                        .backend
                        .time(std::slice::from_ref(c), w, reps)
                        .with_context(|| {
                            format!(
                                "timing {family} tile {} alone at {} tokens",
                                c.tile.tag(),
                                w.context
                            )
                        })?;
                    times.extend(t);
                }
                times
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("timing {family} tiles {tags:?} together at {} tokens", w.context)
                })
            }
        };
        ensure!(
            times.len() == tiles.len() && times.iter().all(|t| !t.is_empty()),
            "the backend returned {} timing series for {} candidates",
            times.len(),
            tiles.len()
        );
        let records: Vec<Record> = keys
            .into_iter()
            .zip(tiles)
            .zip(prepared.iter().zip(&times))
            .map(|((k, t), (p, ts))| {
                let r = Record::new(k, *t, Status::Ok).with_prepared(p).with_times(ts);
                Record {
                    detail: alone.then(|| "timed alone: the group did not time together".to_string()),
                    ..r
                }
            })
            .collect();
        // One write: a group is reused only when every member's record is on disk.
        self.save(&records)?;
        Ok(Some(
            records
                .iter()
                .map(|r| (r.tile, r.median_us.unwrap_or(f64::NAN)))
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_buckets_cover_every_length_once() {
        let b = buckets_for(&DEFAULT_CONTEXTS).unwrap();
        let edges: Vec<(u64, u64)> = b
            .iter()
            .map(|c| match c.bucket {
                Bucket::Tokens { lo, hi } => (lo, hi),
                Bucket::Any => panic!("tokens bucket"),
            })
            .collect();
        assert_eq!(
            edges,
            vec![(1, 16384), (16384, 65536), (65536, 370728), (370728, u64::MAX)]
        );
        for c in &b {
            assert!(c.bucket.contains(c.context));
        }
        assert_eq!(buckets_for(&[5, 5]).unwrap().len(), 1);
        assert!(buckets_for(&[]).is_err());
        assert!(buckets_for(&[0]).is_err());
        let adj = buckets_for(&[1, 2]).unwrap();
        assert_eq!(adj[0].bucket, Bucket::Tokens { lo: 1, hi: 2 });
        assert_eq!(adj[1].bucket, Bucket::Tokens { lo: 2, hi: u64::MAX });
    }
}
