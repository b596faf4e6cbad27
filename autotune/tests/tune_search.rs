//! The tile-config search without a GPU: a fake backend with scripted timings and failures
//! (never used for results) drives `run_search` through strategies, ranking, failures, the
//! record log with resume after a kill, the device cache and the time budget.

use entkv_abi::{DType, DecodeSpec, DenseTile, KernelFamily, PagedSpec, Selector, TileConfig};
use entkv_autotune::tune::log::{read_jsonl, RecordKey, RecordStore, Status, StoreConfig};
use entkv_autotune::tune::search::{buckets_for, SearchOutcome};
use entkv_autotune::tune::space::MAX_REFINEMENTS;
use entkv_autotune::tune::strategy::Strategy;
use entkv_autotune::tune::{
    run_search, Candidate, DeviceKey, EvalError, MeasureBackend, Prepared, SearchOpts, Workload,
};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

fn spec() -> PagedSpec {
    PagedSpec::with_defaults(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16).unwrap()
}

fn device(driver: &str) -> DeviceKey {
    DeviceKey {
        gpu: "Fake H200".into(),
        sm: 90,
        driver: driver.into(),
        cuda: "12.8".into(),
    }
}

/// A tile's scripted time, µs, by family and tag.
type Speed = Box<dyn Fn(KernelFamily, &str) -> f64>;

/// Scripted backend: a tile's time is `speed(family, tag)` µs times a small deterministic
/// noise; failures by tile tag; optionally panics (a simulated kill) at the n-th `prepare`.
struct Fake {
    device: DeviceKey,
    speed: Speed,
    fail: HashMap<String, EvalError>,
    spill: HashSet<String>,
    /// Relative noise amplitude of each timing sample.
    noise: f64,
    kill_at_prepare: Option<usize>,
    prepared: Vec<String>,
    verified: usize,
    /// Sizes of the groups passed to `time`.
    timed: Vec<usize>,
    /// Larger groups fail to time as a GPU out of memory would.
    max_group: Option<usize>,
    /// The `family:tag`s of each `prefetch` call.
    prefetches: Vec<Vec<String>>,
    /// Times that replace `speed` in one selector's step, by (selector, tag).
    by_selector: HashMap<(Selector, String), f64>,
    /// The selector of each `verify` and `time` call's workload.
    selectors_seen: Vec<Option<Selector>>,
    rng: u64,
}

impl Fake {
    fn new(speed: impl Fn(KernelFamily, &str) -> f64 + 'static) -> Fake {
        Fake {
            device: device("570.1"),
            speed: Box::new(speed),
            fail: HashMap::new(),
            spill: HashSet::new(),
            noise: 0.0,
            kill_at_prepare: None,
            prepared: Vec::new(),
            verified: 0,
            timed: Vec::new(),
            max_group: None,
            prefetches: Vec::new(),
            by_selector: HashMap::new(),
            selectors_seen: Vec::new(),
            rng: 0x2545_f491_4f6c_dd1d,
        }
    }

    fn calls(&self) -> usize {
        self.prepared.len() + self.verified + self.timed.len()
    }

    fn unit(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl MeasureBackend for Fake {
    fn device(&self) -> DeviceKey {
        self.device.clone()
    }

    fn prefetch(&mut self, cs: &[Candidate]) {
        self.prefetches.push(
            cs.iter()
                .map(|c| format!("{}:{}", c.family, c.tile.tag()))
                .collect(),
        );
    }

    fn prepare(&mut self, c: &Candidate) -> Result<Prepared, EvalError> {
        if self.kill_at_prepare == Some(self.prepared.len()) {
            panic!("simulated kill");
        }
        let tag = c.tile.tag();
        self.prepared.push(format!("{}:{tag}", c.family));
        if let Some(e @ (EvalError::CompileError(_) | EvalError::Invalid(_))) = self.fail.get(&tag) {
            return Err(e.clone());
        }
        Ok(Prepared {
            registers: 64,
            local_bytes: if self.spill.contains(&tag) { 48 } else { 0 },
            codegen_ms: 1.0,
            load_ms: 1.0,
        })
    }

    fn verify(&mut self, c: &Candidate, w: &Workload) -> Result<(), EvalError> {
        self.verified += 1;
        self.selectors_seen.push(w.selector);
        match self.fail.get(&c.tile.tag()) {
            Some(e @ EvalError::WrongResult(_)) => Err(e.clone()),
            _ => Ok(()),
        }
    }

    fn time(&mut self, cs: &[Candidate], w: &Workload, reps: u32) -> Result<Vec<Vec<f64>>, EvalError> {
        self.timed.push(cs.len());
        self.selectors_seen.push(w.selector);
        if self.max_group.is_some_and(|m| cs.len() > m) {
            return Err(EvalError::LaunchError(
                "CUDA driver call cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY".into(),
            ));
        }
        let mut out = Vec::new();
        for c in cs {
            if let Some(e @ EvalError::LaunchError(_)) = self.fail.get(&c.tile.tag()) {
                return Err(e.clone());
            }
            let tag = c.tile.tag();
            let base = match w.selector.and_then(|s| self.by_selector.get(&(s, tag.clone()))) {
                Some(&t) => t,
                None => (self.speed)(c.family, &tag),
            };
            let v: Vec<f64> = (0..reps)
                .map(|_| base * (1.0 + self.noise * (2.0 * self.unit() - 1.0)))
                .collect();
            out.push(v);
        }
        Ok(out)
    }
}

fn opts(families: &[KernelFamily], contexts: &[u64]) -> SearchOpts {
    let mut o = SearchOpts::new(spec());
    o.families = families.to_vec();
    o.buckets = buckets_for(contexts).unwrap();
    o.reps = 5;
    o.final_reps = 9;
    o
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("entkv-tune-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn default_tag(f: KernelFamily) -> String {
    f.default_tile(&spec()).tag()
}

/// A fixed spread of times by tag (60–140 µs); the default at 100.
fn spread(f: KernelFamily, tag: &str) -> f64 {
    if tag == default_tag(f) {
        return 100.0;
    }
    let h = tag
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    60.0 + (h % 81) as f64
}

fn chosen(o: &SearchOutcome) -> Vec<(KernelFamily, u64, String)> {
    o.results
        .iter()
        .map(|r| (r.family, r.bucket.context, r.chosen.as_ref().unwrap().tag.clone()))
        .collect()
}

const TOPK: KernelFamily = KernelFamily::SelectTopk;
const DENSE: KernelFamily = KernelFamily::DecodeDense;

#[test]
fn exhaustive_finds_the_fastest_and_evaluates_the_default_first() {
    let fast = "t1024_i4";
    let mut b = Fake::new(move |f, t| if t == fast { 40.0 } else { spread(f, t) });
    let o = opts(&[TOPK], &[32 << 10, 1 << 20]);
    let out = run_search(&o, &mut b, &mut RecordStore::in_memory()).unwrap();
    assert_eq!(b.prepared[0], format!("select_topk:{}", default_tag(TOPK)));
    assert_eq!(out.results.len(), 2);
    let n = out.results[0].space_valid;
    assert_eq!(
        b.prepared.len(),
        n,
        "each candidate prepared once for both buckets"
    );
    assert_eq!(b.verified, 2 * n);
    for r in &out.results {
        assert!(r.complete);
        assert_eq!(r.planned, n);
        assert_eq!(r.counts.ok, n);
        let c = r.chosen.as_ref().unwrap();
        assert_eq!(c.tag, fast);
        assert!((r.speedup().unwrap() - 2.5).abs() < 1e-9, "{:?}", r.speedup());
    }
    // Evaluations one by one, then one interleaved final group (3 leaders + the default).
    assert_eq!(b.timed.iter().filter(|&&g| g == 1).count(), 2 * n);
    assert_eq!(
        b.timed.iter().filter(|&&g| g > 1).copied().collect::<Vec<_>>(),
        vec![4, 4]
    );
    let choices = out.choices();
    assert_eq!(choices.len(), 2);
    assert!(choices
        .iter()
        .all(|c| c.tile.tag() == fast && c.median_us == 40.0));
}

/// A final group whose sessions do not fit the GPU together is timed one tile at a time: the
/// same choice, each member's record saying so; a single tile that fails still fails the run.
#[test]
fn a_group_that_does_not_fit_is_timed_one_tile_at_a_time() {
    let fast = "t1024_i4";
    let log = tmp("alone").join("log.jsonl");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let mut b = Fake::new(move |f, t| if t == fast { 40.0 } else { spread(f, t) });
    b.max_group = Some(1);
    let o = opts(&[TOPK], &[32 << 10]);
    let dev = device("570.1");
    let out = run_search(&o, &mut b, &mut store(&log, false, None, &dev)).unwrap();
    assert_eq!(out.results[0].chosen.as_ref().unwrap().tag, fast);
    let tail: Vec<usize> = b.timed.iter().rev().take(5).rev().copied().collect();
    assert_eq!(
        tail,
        vec![4, 1, 1, 1, 1],
        "the group once, then each member alone"
    );
    let finals: Vec<_> = read_jsonl(&log)
        .unwrap()
        .records
        .into_iter()
        .filter(|r| r.key.group.is_some())
        .collect();
    assert_eq!(finals.len(), 4);
    assert!(finals
        .iter()
        .all(|r| r.detail.as_deref() == Some("timed alone: the group did not time together")));
}

#[test]
fn the_default_wins_ties_and_is_never_lost_to() {
    // Everything within 1% of the default: the default stays.
    let mut b = Fake::new(|f, t| if t == default_tag(f) { 100.0 } else { 99.2 });
    let o = opts(&[TOPK], &[32 << 10]);
    let out = run_search(&o, &mut b, &mut RecordStore::in_memory()).unwrap();
    let c = out.results[0].chosen.as_ref().unwrap();
    assert!(c.is_default, "{c:?}");
    // Everything slower than the default: the default stays, speedup 1.
    let mut b = Fake::new(|f, t| if t == default_tag(f) { 100.0 } else { 150.0 });
    let out = run_search(&o, &mut b, &mut RecordStore::in_memory()).unwrap();
    assert!(out.results[0].chosen.as_ref().unwrap().is_default);
    assert_eq!(out.results[0].speedup(), Some(1.0));
    // Two tiles tied below the default: the smaller tag wins, whatever the evaluation order.
    for seed in [0, 1, 2] {
        let mut b = Fake::new(|f, t| match t {
            "t256_i2" | "t512_i16" => 50.0,
            _ => spread(f, t).max(80.0),
        });
        let mut o = opts(&[TOPK], &[32 << 10]);
        o.strategy = Strategy::Random;
        o.seed = seed;
        let out = run_search(&o, &mut b, &mut RecordStore::in_memory()).unwrap();
        assert_eq!(out.results[0].chosen.as_ref().unwrap().tag, "t256_i2");
    }
}

#[test]
fn failures_are_recorded_with_their_status_and_never_chosen() {
    let mut b = Fake::new(|f, t| if t == default_tag(f) { 100.0 } else { 10.0 });
    for (tag, e) in [
        ("t1024_i2", EvalError::CompileError("ptxas".into())),
        ("t1024_i4", EvalError::LaunchError("illegal address".into())),
        ("t1024_i8", EvalError::WrongResult("max err 1".into())),
    ] {
        b.fail.insert(tag.into(), e);
    }
    b.spill.insert("t1024_i16".into());
    let o = opts(&[TOPK], &[32 << 10]);
    let mut store = RecordStore::in_memory();
    let out = run_search(&o, &mut b, &mut store).unwrap();
    let r = &out.results[0];
    assert_eq!(
        (
            r.counts.compile_error,
            r.counts.launch_error,
            r.counts.wrong_result,
            r.counts.spills
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(r.counts.ok, r.space_valid - 4);
    assert!(!r.chosen.as_ref().unwrap().tag.starts_with("t1024"));
    assert!(
        !b.prepared.is_empty() && b.verified == r.space_valid - 2,
        "no verify after compile error or spills"
    );
}

#[test]
fn a_broken_default_is_a_loud_error() {
    let d = default_tag(TOPK);
    let mut b = Fake::new(spread);
    b.fail
        .insert(d.clone(), EvalError::WrongResult("support mismatch".into()));
    let e = run_search(&opts(&[TOPK], &[32 << 10]), &mut b, &mut RecordStore::in_memory()).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("default tile") && msg.contains(&d) && msg.contains("wrong_result"),
        "{msg}"
    );
    assert_eq!(
        b.prepared.len(),
        1,
        "nothing is evaluated after the default fails"
    );
}

#[test]
fn analytically_invalid_points_are_counted_and_logged_without_the_backend() {
    // page_meta at P = 16, d = 32 has 64 key chunks: 128, 256 and 512 threads are invalid.
    let dir = tmp("invalid");
    let log = dir.join("log.jsonl");
    let mut store = RecordStore::open(
        &StoreConfig {
            log: Some(log.clone()),
            resume: false,
            cache_dir: None,
        },
        &device("570.1"),
    )
    .unwrap();
    let mut b = Fake::new(spread);
    let out = run_search(&opts(&[KernelFamily::PageMeta], &[32 << 10]), &mut b, &mut store).unwrap();
    let r = &out.results[0];
    assert_eq!((r.space_valid, r.space_invalid, r.counts.invalid), (2, 3, 3));
    assert_eq!(b.prepared.len(), 2);
    let recs = read_jsonl(&log).unwrap().records;
    assert_eq!(recs.iter().filter(|r| r.status == Status::Invalid).count(), 3);
    assert!(recs
        .iter()
        .all(|r| r.status != Status::Invalid || r.detail.is_some()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn strategies_are_deterministic_and_capped() {
    let run = |strategy, seed, max| {
        let mut b = Fake::new(spread);
        let mut o = opts(&[DENSE], &[32 << 10]);
        o.strategy = strategy;
        o.seed = seed;
        o.max_evals = max;
        let out = run_search(&o, &mut b, &mut RecordStore::in_memory()).unwrap();
        (b.prepared, out)
    };
    let (a, _) = run(Strategy::Random, 3, Some(6));
    assert_eq!(a.len(), 6);
    assert_eq!(
        a[0],
        format!("decode_dense:{}", default_tag(DENSE)),
        "the default is always evaluated"
    );
    assert_eq!(
        a,
        run(Strategy::Random, 3, Some(6)).0,
        "same seed, same candidates"
    );
    assert_ne!(
        a,
        run(Strategy::Random, 4, Some(6)).0,
        "another seed, other candidates"
    );
    let (e, out) = run(Strategy::Exhaustive, 0, Some(5));
    assert_eq!(e.len(), 5);
    assert_eq!(out.results[0].planned, 5);
    assert_eq!(
        e,
        run(Strategy::Exhaustive, 9, Some(5)).0,
        "exhaustive ignores the seed"
    );
}

#[test]
fn halving_keeps_the_best_through_noise() {
    let best = "t128_l2_r16_n4_m0_c3_f256_s4096";
    let mut b = Fake::new(move |f, t| if t == best { 70.0 } else { spread(f, t).max(75.0) });
    b.noise = 0.03;
    let mut o = opts(&[DENSE], &[32 << 10]);
    o.strategy = Strategy::Halving;
    let out = run_search(&o, &mut b, &mut RecordStore::in_memory()).unwrap();
    assert_eq!(out.results[0].chosen.as_ref().unwrap().tag, best);
    // The space and the refinements around the first round's best, all of which pass.
    let n = out.results[0].planned;
    assert!(n > out.results[0].space_valid);
    assert_eq!(out.results[0].counts.ok, n);
    let groups: Vec<usize> = b.timed.iter().copied().filter(|&g| g > 1).collect();
    // n → ⌈n/2⌉ → … ≤ 3 survivors, then the final group (+ the default when eliminated).
    let mut want = Vec::new();
    let mut k = n;
    while k > 3 {
        k = k.div_ceil(2);
        want.push(k);
    }
    assert_eq!(&groups[..want.len()], &want[..], "{groups:?}");
    assert_eq!(groups.len(), want.len() + 1);
    assert!(*groups.last().unwrap() <= 4);
}

/// A point tied with the default (within the band, so ranked behind it) is refined too: its
/// own neighbour, which no step from the default reaches, wins.
#[test]
fn the_fastest_first_round_point_is_refined_even_when_the_default_wins_the_tie() {
    let space = entkv_autotune::tune::space::family_space(DENSE, &spec(), &Default::default()).unwrap();
    let TileConfig::Dense(def) = space.default_tile() else {
        panic!("a dense tile")
    };
    // A first-round point with another decomposition and the default's secondary knobs.
    let near = space
        .valid
        .iter()
        .filter_map(|t| match t {
            TileConfig::Dense(d) if d.threads != def.threads && d.newton_steps == def.newton_steps => {
                Some(*d)
            }
            _ => None,
        })
        .next()
        .unwrap();
    let target = DenseTile {
        score_min_blocks: if near.score_min_blocks == 2 { 3 } else { 2 },
        ..near
    };
    assert!(
        !space.valid.contains(&TileConfig::Dense(target)),
        "not a first-round point"
    );
    let (near_tag, target_tag) = (near.tag(), target.tag());
    let def_tag = def.tag();
    let speed = move |_: KernelFamily, t: &str| {
        if t == target_tag {
            70.0
        } else if t == near_tag {
            99.0 // within the 2% band of the default's 100: the default ranks first
        } else if t == def_tag {
            100.0
        } else {
            150.0
        }
    };
    let out = run_search(
        &opts(&[DENSE], &[32 << 10]),
        &mut Fake::new(speed),
        &mut RecordStore::in_memory(),
    )
    .unwrap();
    assert_eq!(out.results[0].chosen.as_ref().unwrap().tag, target.tag());
}

/// Every record key of a log, asserting none repeats.
fn unique_keys(log: &Path) -> HashSet<RecordKey> {
    let recs = read_jsonl(log).unwrap().records;
    let mut keys = HashSet::new();
    for r in recs {
        assert!(keys.insert(r.key.clone()), "record repeated: {:?}", r.key);
    }
    keys
}

fn open_store(
    log: &Path,
    resume: bool,
    cache: Option<&Path>,
    dev: &DeviceKey,
) -> anyhow::Result<RecordStore> {
    RecordStore::open(
        &StoreConfig {
            log: Some(log.to_path_buf()),
            resume,
            cache_dir: cache.map(Path::to_path_buf),
        },
        dev,
    )
}

fn store(log: &Path, resume: bool, cache: Option<&Path>, dev: &DeviceKey) -> RecordStore {
    open_store(log, resume, cache, dev).unwrap()
}

#[test]
fn resume_after_a_kill_loses_nothing_and_repeats_nothing() {
    let dir = tmp("resume");
    let fams = [TOPK, KernelFamily::PageScoreBox];
    let mut o = opts(&fams, &[8 << 10, 32 << 10]);
    o.strategy = Strategy::Halving;
    let dev = device("570.1");

    // The uninterrupted run, for reference.
    let clean_log = dir.join("clean.jsonl");
    let clean = run_search(
        &o,
        &mut Fake::new(spread),
        &mut store(&clean_log, false, None, &dev),
    )
    .unwrap();
    let all = unique_keys(&clean_log);

    // Killed in the middle of the second family's first bucket, and again later.
    let log = dir.join("log.jsonl");
    let mut first = true;
    for kill in [20, 12] {
        let mut b = Fake::new(spread);
        b.kill_at_prepare = Some(kill);
        let mut s = store(&log, !first, None, &dev);
        first = false;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_search(&o, &mut b, &mut s)));
        assert!(r.is_err(), "the fake kills the run");
    }
    // A half-written line from the kill.
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(b"{\"device\":{\"gpu\":\"Fa")
        .unwrap();
    let before = unique_keys(&log);
    assert!(
        !before.is_empty() && before.len() < all.len(),
        "{} of {}",
        before.len(),
        all.len()
    );

    let mut b = Fake::new(spread);
    let mut s = store(&log, true, None, &dev);
    assert!(
        s.warnings.iter().any(|w| w.contains("truncated")),
        "{:?}",
        s.warnings
    );
    let out = run_search(&o, &mut b, &mut s).unwrap();
    assert_eq!(out.stats.resumed, before.len(), "every finished record reused");
    assert_eq!(
        unique_keys(&log),
        all,
        "the resumed log holds exactly the clean run's records"
    );
    assert_eq!(chosen(&out), chosen(&clean));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_cache_makes_a_second_run_free_and_misses_on_another_driver() {
    let dir = tmp("cache");
    let cache = dir.join("cache");
    let o = opts(&[TOPK, DENSE], &[32 << 10]);
    let dev = device("570.1");

    let mut b1 = Fake::new(spread);
    let first = run_search(
        &o,
        &mut b1,
        &mut store(&dir.join("a.jsonl"), false, Some(&cache), &dev),
    )
    .unwrap();
    assert!(b1.calls() > 0 && first.stats.cached == 0);

    let mut b2 = Fake::new(spread);
    let second = run_search(
        &o,
        &mut b2,
        &mut store(&dir.join("b.jsonl"), false, Some(&cache), &dev),
    )
    .unwrap();
    assert_eq!(b2.calls(), 0, "every measurement comes from the cache");
    assert_eq!(second.stats.backend_calls(), 0);
    assert_eq!(second.stats.cached, first.stats.measured);
    assert_eq!(second.stats.measured, 0);
    assert_eq!(chosen(&second), chosen(&first));
    // The second run's log lists what it reused, once each and marked as the cache's.
    assert_eq!(
        unique_keys(&dir.join("b.jsonl")),
        unique_keys(&dir.join("a.jsonl"))
    );
    let reused = read_jsonl(&dir.join("b.jsonl")).unwrap().records;
    assert!(
        reused.iter().all(|r| r.from_cache),
        "a record not marked as the cache's"
    );
    assert!(read_jsonl(&dir.join("a.jsonl"))
        .unwrap()
        .records
        .iter()
        .all(|r| !r.from_cache));

    let mut b3 = Fake::new(spread);
    b3.device = device("575.9");
    let mut s3 = store(&dir.join("c.jsonl"), false, Some(&cache), &b3.device.clone());
    let third = run_search(&o, &mut b3, &mut s3).unwrap();
    assert_eq!(third.stats.cached, 0, "another driver is another cache key");
    assert_eq!(b3.calls(), b1.calls());

    // Another entkv (or LLVM) version misses too, in the same cache file.
    let mut o4 = o.clone();
    o4.versions.llvm = "20.1.0".into();
    let mut b4 = Fake::new(spread);
    let fourth = run_search(
        &o4,
        &mut b4,
        &mut store(&dir.join("d.jsonl"), false, Some(&cache), &dev),
    )
    .unwrap();
    assert_eq!(fourth.stats.cached, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A failure may be a moment's (a context an earlier candidate broke, another process's
/// memory): the cache keeps timings and analytic rejections only, so the next run measures
/// the failed candidates again, while a resumed run reuses its own log's.
#[test]
fn the_cache_keeps_no_failures() {
    let dir = tmp("cache-failures");
    let cache = dir.join("cache");
    let dev = device("570.1");
    let o = opts(&[TOPK], &[32 << 10]);
    let mut b1 = Fake::new(spread);
    b1.fail.insert(
        "t1024_i4".into(),
        EvalError::LaunchError("illegal address".into()),
    );
    b1.fail
        .insert("t1024_i8".into(), EvalError::WrongResult("max err 1".into()));
    let log = dir.join("a.jsonl");
    let first = run_search(&o, &mut b1, &mut store(&log, false, Some(&cache), &dev)).unwrap();
    assert_eq!(
        (
            first.results[0].counts.launch_error,
            first.results[0].counts.wrong_result
        ),
        (1, 1)
    );
    let logged = read_jsonl(&log).unwrap().records;
    assert!(logged.iter().any(|r| r.status == Status::LaunchError));

    // The next run (healthy now) finds every timing cached and measures the two again.
    let mut b2 = Fake::new(spread);
    let second = run_search(
        &o,
        &mut b2,
        &mut store(&dir.join("b.jsonl"), false, Some(&cache), &dev),
    )
    .unwrap();
    assert_eq!(second.stats.measured, 2, "{:?}", second.stats);
    assert_eq!(b2.verified, 2);
    assert_eq!(
        second.results[0].counts.launch_error + second.results[0].counts.wrong_result,
        0
    );

    // Resuming the first run's log reuses its failures: nothing is measured.
    let mut b3 = Fake::new(spread);
    let resumed = run_search(&o, &mut b3, &mut store(&log, true, None, &dev)).unwrap();
    assert_eq!((resumed.stats.measured, b3.calls()), (0, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One run a record file: a second store on the same cache (or log) is refused while the first
/// is open, instead of truncating or interleaving its records.
#[test]
fn a_record_file_in_use_is_refused() {
    let dir = tmp("locked");
    let cache = dir.join("cache");
    let dev = device("570.1");
    let first = store(&dir.join("a.jsonl"), false, Some(&cache), &dev);
    let second = open_store(&dir.join("b.jsonl"), false, Some(&cache), &dev);
    let e = format!("{:#}", second.err().expect("the cache is locked"));
    assert!(e.contains("in use by another autotune run"), "{e}");
    let log_again = open_store(&dir.join("a.jsonl"), true, None, &dev);
    assert!(log_again.is_err(), "the log is locked too");
    drop(first);
    store(&dir.join("b.jsonl"), false, Some(&cache), &dev);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_time_budget_stops_new_work_but_still_uses_what_is_known() {
    let dir = tmp("budget");
    let cache = dir.join("cache");
    let dev = device("570.1");
    let mut o = opts(&[TOPK], &[8 << 10, 32 << 10]);

    // Nothing known, no time: nothing measured, nothing chosen.
    o.time_budget = Some(std::time::Duration::ZERO);
    let mut b = Fake::new(spread);
    let out = run_search(&o, &mut b, &mut RecordStore::in_memory()).unwrap();
    assert_eq!(b.calls(), 0);
    assert!(out.stats.budget_exhausted);
    assert!(out.results.iter().all(|r| !r.complete && r.chosen.is_none()));
    assert!(out.choices().is_empty());

    // The first bucket cached: it completes from the cache; the second ships nothing new.
    let mut one = o.clone();
    one.time_budget = None;
    one.buckets.truncate(1);
    let mut b = Fake::new(spread);
    let done = run_search(
        &one,
        &mut b,
        &mut store(&dir.join("a.jsonl"), false, Some(&cache), &dev),
    )
    .unwrap();
    let mut b = Fake::new(spread);
    let out = run_search(
        &o,
        &mut b,
        &mut store(&dir.join("b.jsonl"), false, Some(&cache), &dev),
    )
    .unwrap();
    assert_eq!(b.calls(), 0);
    assert!(out.results[0].complete);
    assert_eq!(out.results[0].chosen, done.results[0].chosen);
    assert!(!out.results[1].complete && out.results[1].chosen.is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unfinished_bucket_ships_the_default() {
    // A budget that runs out during the evaluations (the fake takes 100 ms per verify).
    struct Slow(Fake);
    impl MeasureBackend for Slow {
        fn device(&self) -> DeviceKey {
            self.0.device()
        }
        fn prepare(&mut self, c: &Candidate) -> Result<Prepared, EvalError> {
            self.0.prepare(c)
        }
        fn verify(&mut self, c: &Candidate, w: &Workload) -> Result<(), EvalError> {
            std::thread::sleep(std::time::Duration::from_millis(100));
            self.0.verify(c, w)
        }
        fn time(&mut self, cs: &[Candidate], w: &Workload, reps: u32) -> Result<Vec<Vec<f64>>, EvalError> {
            self.0.time(cs, w, reps)
        }
    }
    let mut o = opts(&[TOPK], &[32 << 10]);
    o.time_budget = Some(std::time::Duration::from_millis(300));
    let mut b = Slow(Fake::new(|f, t| if t == default_tag(f) { 100.0 } else { 10.0 }));
    let out = run_search(&o, &mut b, &mut RecordStore::in_memory()).unwrap();
    let r = &out.results[0];
    assert!(
        !r.complete && r.counts.ok >= 1 && r.counts.ok < r.planned,
        "{r:?}"
    );
    let c = r.chosen.as_ref().unwrap();
    assert!(c.is_default && c.median_us == 100.0);
    assert_eq!(out.choices()[0].tile, TOPK.default_tile(&spec()));
}

#[test]
fn opts_are_checked() {
    let mut o = opts(&[TOPK], &[32 << 10]);
    o.q_heads = 12;
    let e = run_search(&o, &mut Fake::new(spread), &mut RecordStore::in_memory()).unwrap_err();
    assert!(e.to_string().contains("GQA group"), "{e}");
    let o = opts(&[], &[32 << 10]);
    assert!(run_search(&o, &mut Fake::new(spread), &mut RecordStore::in_memory()).is_err());
}

#[test]
fn tiles_in_a_space_are_what_the_backend_sees() {
    // Every candidate the backend is given is a point of the family's space or, for dense
    // tiles, one of the refinements around the first round's best; all pass the checks.
    let mut b = Fake::new(spread);
    let fams = [
        KernelFamily::PageScoreMoments,
        KernelFamily::SelectGaussian,
        KernelFamily::DecodeCertified,
    ];
    let out = run_search(&opts(&fams, &[32 << 10]), &mut b, &mut RecordStore::in_memory()).unwrap();
    let mut outside = 0;
    for p in &b.prepared {
        let (fam, tag) = p.split_once(':').unwrap();
        let f = KernelFamily::ALL.into_iter().find(|f| f.name() == fam).unwrap();
        let space = entkv_autotune::tune::space::family_space(f, &spec(), &Default::default()).unwrap();
        if !space.valid.iter().any(|t| t.tag() == tag) {
            assert_eq!(
                f,
                KernelFamily::DecodeCertified,
                "{p}: only dense tiles are refined"
            );
            outside += 1;
        }
    }
    // The full walk's refinements, and the page-pruned walk's where they differ (its seeded
    // ones are `_pw` twins); those the two share are prepared once.
    let refined = |r: &&entkv_autotune::tune::search::BucketResult| r.planned - r.space_valid;
    let cert: Vec<_> = out
        .results
        .iter()
        .filter(|r| r.family == KernelFamily::DecodeCertified)
        .collect();
    assert_eq!(cert.len(), 2, "the full and the page-pruned walk");
    let full = cert.iter().find(|r| r.workload.selector.is_none()).unwrap();
    let all: usize = cert.iter().map(refined).sum();
    assert!(
        (refined(full)..=all).contains(&outside),
        "{outside} refinements prepared, {} for the full walk, {all} in all",
        refined(full)
    );
    assert!(
        (1..=2 * 2 * MAX_REFINEMENTS).contains(&outside),
        "{outside} refinements"
    );
    for r in &out.results {
        if r.family != KernelFamily::DecodeCertified {
            assert_eq!(r.planned, r.space_valid, "{}: no refinement", r.family);
        }
    }
}

#[test]
fn refinement_finds_knobs_that_only_win_together() {
    // One Newton step and 32 tokens a lane group at 128 threads each win alone; the first
    // round times the Newton step only at the default's decomposition, so only the
    // refinement around its best can time them together.
    let speed = |f: KernelFamily, tag: &str| {
        let mut t = if tag == default_tag(f) {
            100.0
        } else {
            100.0 + spread(f, tag) / 10.0
        };
        if tag.contains("_n1_") {
            t *= 0.8;
        }
        if tag.starts_with("t128_l1_r32_") {
            t *= 0.85;
        }
        t
    };
    let mut b = Fake::new(speed);
    let out = run_search(
        &opts(&[DENSE], &[32 << 10]),
        &mut b,
        &mut RecordStore::in_memory(),
    )
    .unwrap();
    let r = &out.results[0];
    let space = entkv_autotune::tune::space::family_space(DENSE, &spec(), &Default::default()).unwrap();
    let winner = r.chosen.as_ref().unwrap();
    assert!(winner.tag.starts_with("t128_l1_r32_n1_"), "chose {}", winner.tag);
    assert!(
        !space.valid.iter().any(|t| t.tag() == winner.tag),
        "a point outside the grid"
    );
    assert!(r.planned > r.space_valid && r.planned <= r.space_valid + MAX_REFINEMENTS);
    assert_eq!(b.prepared.len(), r.planned, "each point prepared once");

    let mut b = Fake::new(speed);
    let mut o = opts(&[DENSE], &[32 << 10]);
    o.refine = false;
    let out = run_search(&o, &mut b, &mut RecordStore::in_memory()).unwrap();
    let r = &out.results[0];
    assert_eq!(r.planned, r.space_valid, "--no-refine times the grid only");
    assert!(space
        .valid
        .iter()
        .any(|t| t.tag() == r.chosen.as_ref().unwrap().tag));
}

/// `autotune --alpha 1.5 --head-dim 32 --kernels K --contexts C [more] --out OUT`.
fn tune_cli(kernels: &str, contexts: &str, more: &[&str], out: &Path) -> entkv_autotune::tune::args::Cli {
    use clap::Parser;
    let base = [
        "autotune",
        "--alpha",
        "1.5",
        "--head-dim",
        "32",
        "--kernels",
        kernels,
        "--contexts",
        contexts,
    ];
    let args = base
        .iter()
        .chain(more)
        .copied()
        .chain(["--out", out.to_str().unwrap()]);
    entkv_autotune::tune::args::Cli::try_parse_from(args).unwrap()
}

#[test]
fn a_run_writes_a_verified_tuned_bundle_and_its_summary() {
    use entkv_autotune::tune::args::run;
    use entkv_bundle::{Bundle, RowSource, Tier};
    let dir = tmp("run");
    let out = dir.join("bundle");
    let cache = dir.join("cache");
    let cli = tune_cli(
        "select_topk",
        "32k,1M",
        &["--json", "--cache-dir", cache.to_str().unwrap()],
        &out,
    );
    let fast = "t1024_i16";
    let mut b = Fake::new(move |f, t| if t == fast { 50.0 } else { spread(f, t).max(80.0) });
    let mut notes = Vec::new();
    let report = run(&cli, &mut b, 1_700_000_000, &mut |l| notes.push(l.to_string())).unwrap();
    println!("{}", report.text);
    assert!(notes.iter().any(|n| n.contains("cache")), "{notes:?}");

    let bundle = Bundle::open(&out).unwrap();
    let m = bundle.manifest();
    assert_eq!(m.artifacts.len(), 8, "one module per family");
    assert_eq!(m.tuned_on.as_ref().unwrap().gpu, "Fake H200");
    let s = spec();
    let tuned: Vec<_> = m
        .table
        .iter()
        .filter(|r| matches!(r.source, RowSource::Tuned { .. }))
        .collect();
    assert_eq!(tuned.len(), 2);
    assert!(tuned.iter().all(|r| r.family == TOPK && r.tile.tag() == fast));
    assert_eq!(m.table.len(), 8 + 2);
    let r = bundle.resolve(TOPK, &s, 40_000, None).unwrap();
    assert_eq!((r.tier, r.row.tile.tag()), (Tier::Exact, fast.to_string()));
    assert_eq!(r.row.source, RowSource::Tuned { median_us: 50.0 });
    assert_eq!(
        bundle.resolve(DENSE, &s, 40_000, None).unwrap().tier,
        Tier::Default
    );

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune-summary.json")).unwrap()).unwrap();
    assert_eq!(summary["results"].as_array().unwrap().len(), 2);
    assert_eq!(summary["results"][0]["chosen"], fast);
    assert_eq!(summary["results"][0]["speedup"], 2.0);
    assert_eq!(report.summary.results[1].context, 1 << 20);
    assert!(
        report.text.contains(fast) && report.text.contains("2.000x"),
        "{}",
        report.text
    );
    assert!(out.join("tune-log.jsonl").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_sparse_decode_gets_a_row_per_selector() {
    // Each selector's step times its own tile fastest: the search runs the sparse decode once
    // per selector, in that selector's workload only, and the bundle resolves each selector to
    // its winner (and a caller without a selector to the default).
    use entkv_autotune::tune::args::run;
    use entkv_bundle::{Bundle, RowSource, Tier};
    let dir = tmp("per-selector");
    let out = dir.join("bundle");
    let cli = tune_cli("decode_sparse", "32k", &["--no-refine", "--no-cache"], &out);
    let f = KernelFamily::DecodeSparse;
    let space = entkv_autotune::tune::space::family_space(f, &spec(), &Default::default()).unwrap();
    let tags: Vec<String> = space.valid.iter().map(|t| t.tag()).collect();
    let (for_topk, for_gauss) = (tags[1].clone(), tags[2].clone());
    let mut b = Fake::new(|_, _| 100.0);
    b.by_selector.insert((Selector::Topk, for_topk.clone()), 40.0);
    b.by_selector
        .insert((Selector::Gaussian, for_gauss.clone()), 30.0);
    let report = run(&cli, &mut b, 1_700_000_000, &mut |_| {}).unwrap();
    assert!(report.text.contains("decode_sparse (topk)"), "{}", report.text);
    assert!(
        b.selectors_seen.iter().all(|s| s.is_some())
            && b.selectors_seen.contains(&Some(Selector::Topk))
            && b.selectors_seen.contains(&Some(Selector::Gaussian)),
        "every verification and timing runs in one selector's step: {:?}",
        b.selectors_seen
    );

    let bundle = Bundle::open(&out).unwrap();
    let s = spec();
    for (sel, tag, us) in [
        (Selector::Topk, &for_topk, 40.0),
        (Selector::Gaussian, &for_gauss, 30.0),
    ] {
        let r = bundle.resolve(f, &s, 30_000, Some(sel)).unwrap();
        assert_eq!((r.tier, r.row.tile.tag()), (Tier::Exact, tag.clone()), "{sel}");
        assert_eq!(
            (r.row.selector, r.row.source),
            (Some(sel), RowSource::Tuned { median_us: us })
        );
    }
    let r = bundle.resolve(f, &s, 30_000, None).unwrap();
    assert_eq!(
        r.tier,
        Tier::Default,
        "rows kept per selector serve only their selector"
    );
    let table = entkv_autotune::bundle_cmd::table_text(&bundle);
    assert!(
        table.contains("decode_sparse (topk)") && table.contains("decode_sparse (gaussian)"),
        "{table}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn code_generation_is_batched_across_families() {
    // Every first-round candidate of every family up front, in batches of at most 64; then,
    // per bucket, one batch holding the refinements of all three dense-tile families; every
    // candidate generated once, and each one prepared was generated first.
    let fams = [
        DENSE,
        KernelFamily::DecodeSparse,
        KernelFamily::DecodeCertified,
        TOPK,
    ];
    let mut b = Fake::new(spread);
    let out = run_search(
        &opts(&fams, &[32 << 10, 1 << 20]),
        &mut b,
        &mut RecordStore::in_memory(),
    )
    .unwrap();
    // The sparse decode is searched per selector over one space: its candidates count once.
    // So is the certified decode with and without pruning; the full walk's space leaves out
    // the seeded page-pruned walk's points (`_pw`), the family's space holds both.
    let certified = entkv_autotune::tune::space::family_space(
        KernelFamily::DecodeCertified,
        &spec(),
        &Default::default(),
    )
    .unwrap()
    .valid
    .len();
    let valid: usize = out
        .results
        .iter()
        .filter(|r| {
            r.bucket.context == 32 << 10
                && r.family != KernelFamily::DecodeCertified
                && !matches!(r.workload.selector, Some(Selector::Gaussian))
        })
        .map(|r| r.space_valid)
        .sum::<usize>()
        + certified;
    let mut calls = b.prefetches.iter();
    let mut first = 0;
    while first < valid {
        let c = calls.next().expect("the first-round batches");
        assert!(c.len() <= 64);
        first += c.len();
    }
    assert_eq!(first, valid, "the first rounds' candidates, once");
    let rest: Vec<&Vec<String>> = calls.collect();
    assert!(
        !rest.is_empty() && rest.len() <= 2,
        "one refinement batch a bucket: {}",
        rest.len()
    );
    let families = |c: &Vec<String>| {
        let mut f: Vec<&str> = c.iter().map(|t| t.split_once(':').unwrap().0).collect();
        f.sort();
        f.dedup();
        f.len()
    };
    assert_eq!(
        families(rest[0]),
        3,
        "the dense-tile families' refinements together"
    );
    let all: Vec<&String> = b.prefetches.iter().flatten().collect();
    let unique: HashSet<&String> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "each candidate generated once");
    assert!(b.prepared.iter().all(|p| unique.contains(p)));
}
