//! `entkv bench`: decode-step latency of a bundle per method and context length, the BENCH.md
//! records (median/min/p90, kept fraction, bytes moved, floor, time over floor) and what the
//! bundle's tuned rows buy. For each context length and method, one decode step of a BENCH.md
//! workload is timed through the runtime's `Decoder` with the bundle as it is (its rows resolved
//! at that length: exact bucket, nearest bucket or default) and, unless `--no-defaults`, with its
//! default rows only — and so is each kernel family's share of the step (the metadata build once
//! per length: it does not depend on the method), interleaved on the same device-generated
//! caches, so the table shows tuned against default per kernel and per step. `softmax-topk`, the
//! Quest baseline, is the engine's top-k selection followed by the softmax decode
//! ([`SoftmaxTopk`]). Every variant's output is checked against the float64 reference on sampled
//! heads first: a fast wrong step is not a result.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use entkv_abi::{DType, KernelFamily, PagedSpec};
use entkv_bundle::Bundle;
use entkv_runtime::engine::{BoundCall, Decoder, Method, ModuleCache, Problem, StepPlan};
use entkv_runtime::{gpu_unavailable_reason, Gpu};
use serde::Serialize;

use crate::device::{FunctionCache, Kernels, StepTimer};
use crate::engine_bench::{rotation_copies, EngineCache, Session, SoftmaxTopk, StepTraffic};
use crate::paper::{DeviceKeys, PaperLayout};
use crate::record::{records_table, step_bytes, summarize, Environment, StepSizes, TimingRecord};
use crate::verify_cmd::{aligned, default_rows_only, method_label};

/// Heads sampled for the float64 reference check of each step (per variant) by default.
const CHECK_SAMPLES: usize = 3;
/// The same with `--sweep`: a reference at 1M tokens costs host seconds per head, and a sweep
/// has nine lengths.
const SWEEP_CHECK_SAMPLES: usize = 1;

/// The context lengths of `--sweep` (BENCH.md's sweep for plots): 4k, 8k, … 512k, 1M tokens.
pub const SWEEP_N: [u64; 9] = [
    4_096, 8_192, 16_384, 32_768, 65_536, 131_072, 262_144, 524_288, 1_048_576,
];

/// `entkv bench --bundle PATH [--workload W] [--n N,… | --sweep] [--methods M,…] [--iters I]
/// [--no-defaults] [--check-samples S] [--out F]`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Bundle directory or .entkvb file; it must hold the workload's spec.
    #[arg(long)]
    pub bundle: PathBuf,
    /// BENCH.md workload: paper, gqa, peaked or wide (peaked: the paper shapes on page-coherent
    /// keys with a few query-aligned pages, generated on the device).
    #[arg(long, default_value = "paper")]
    pub workload: String,
    /// Context lengths (tokens per sequence), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![32_768u64, 131_072, 1_048_576])]
    pub n: Vec<u64>,
    /// Time the sweep's lengths instead of --n: 4k, 8k, 16k, 32k, 64k, 128k, 256k, 512k, 1M.
    #[arg(long, conflicts_with = "n")]
    pub sweep: bool,
    /// Methods, comma-separated: dense, topk (a quarter of the pages), gaussian, certified,
    /// certified-pruned (certified after pruning the pages a certified bound rules out), auto
    /// (the engine's pick of dense or certified at each length, from the bundle's tuned
    /// timings), softmax-topk (the Quest baseline: top-k's selection, softmax over the selected
    /// pages).
    #[arg(long, value_delimiter = ',', default_values = ["dense", "topk", "gaussian", "certified"])]
    pub methods: Vec<String>,
    /// Time the bundle as it is only, not also its default rows (half the device time).
    #[arg(long)]
    pub no_defaults: bool,
    /// Heads per step checked against the float64 reference [default: 3, 1 with --sweep].
    #[arg(long)]
    pub check_samples: Option<usize>,
    /// Timed runs per variant (after the warm-up).
    #[arg(long, default_value_t = 50)]
    pub iters: usize,
    /// Untimed runs per variant first.
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Start each timed step on an idle stream (the method before 2026-12-06: the step's time
    /// then includes the host's latency of launching its first kernel). By default a short
    /// busy kernel runs just before each start event, so the step's launches are queued when
    /// its clock starts, as in an engine whose step follows other GPU work.
    #[arg(long)]
    pub idle_start: bool,
    /// Write the results as JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Bits per dimension of the certified path's key sketch (4 or 8): the bundle must hold the
    /// workload's spec at this width (`entkv bundle create --sketch-bits`).
    #[arg(long, default_value_t = entkv_abi::DEFAULT_SKETCH_BITS)]
    pub sketch_bits: u32,
    /// Seed of the inputs: q and the pages' order in the pool (the pools' keys and values have
    /// fixed generators); further copies of the rotation take the seeds after it. One seed is
    /// one draw: a seeded certified step repairs a pair on some draws and not on others
    /// (docs/perf-notes.md, "The seed's gap at 128k"), so compare such steps over several.
    #[arg(long, default_value_t = DEFAULT_DATA_SEED)]
    pub data_seed: u64,
    /// Run every step with the device-side id check (`Problem::check_device_ids`: `guard_ids`
    /// first, the launches reading its clamped copies): what the check costs a step.
    #[arg(long)]
    pub check_device_ids: bool,
}

/// `entkv bench`'s input seed when `--data-seed` is not given (every recorded run before the
/// flag existed used it).
pub const DEFAULT_DATA_SEED: u64 = 7;

/// A BENCH.md workload's shape.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BenchWorkload {
    pub name: &'static str,
    pub batch: u32,
    pub q_heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub page_size: u32,
    pub alpha: f64,
    #[serde(serialize_with = "as_name")]
    pub kv_dtype: DType,
    /// How the keys are generated (BENCH.md's "data" column).
    pub data: DeviceKeys,
}

fn as_name<S: serde::Serializer>(d: &DType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(d.name())
}

/// The workloads of ../shared/BENCH.md, on data generated on the device.
pub const WORKLOADS: [BenchWorkload; 4] = [
    BenchWorkload {
        name: "paper",
        batch: 8,
        q_heads: 24,
        kv_heads: 24,
        head_dim: 32,
        page_size: 16,
        alpha: 1.5,
        kv_dtype: DType::F16,
        data: DeviceKeys::Normal,
    },
    BenchWorkload {
        name: "gqa",
        batch: 8,
        q_heads: 24,
        kv_heads: 12,
        head_dim: 32,
        page_size: 16,
        alpha: 1.5,
        kv_dtype: DType::BF16,
        data: DeviceKeys::Normal,
    },
    // `paper`'s shapes and spec (one bundle serves both) on page-coherent keys.
    BenchWorkload {
        name: "peaked",
        batch: 8,
        q_heads: 24,
        kv_heads: 24,
        head_dim: 32,
        page_size: 16,
        alpha: 1.5,
        kv_dtype: DType::F16,
        data: DeviceKeys::Peaked,
    },
    BenchWorkload {
        name: "wide",
        batch: 4,
        q_heads: 32,
        kv_heads: 8,
        head_dim: 128,
        page_size: 32,
        alpha: 1.5,
        kv_dtype: DType::BF16,
        data: DeviceKeys::Normal,
    },
];

impl BenchWorkload {
    /// The workload called `name`; unknown names are refused, listing the known ones.
    pub fn named(name: &str) -> Result<BenchWorkload> {
        WORKLOADS.into_iter().find(|w| w.name == name).with_context(|| {
            let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
            format!(
                "unknown workload `{name}` ({}; see ../shared/BENCH.md)",
                names.join(", ")
            )
        })
    }

    /// The kernel specialization the bundle must hold (default sketch width, no ALiBi: `entkv bundle
    /// create`'s defaults), derived as the engine derives it from a [`Problem`].
    pub fn spec(&self) -> Result<PagedSpec> {
        self.spec_with(entkv_abi::DEFAULT_SKETCH_BITS)
    }

    /// [`BenchWorkload::spec`] with `sketch_bits` bits a dimension in the key sketch.
    pub fn spec_with(&self, sketch_bits: u32) -> Result<PagedSpec> {
        let problem = Problem {
            q_heads: self.q_heads,
            kv_heads: self.kv_heads,
            kv_dtype: self.kv_dtype,
            sketch_bits,
            ..Problem::new(self.alpha, self.head_dim, self.page_size, Method::Dense)
        };
        Ok(problem.spec()?)
    }

    /// The `entkv bundle create` command that makes an untuned bundle for this workload's
    /// `spec`.
    pub fn create_command(&self, spec: &PagedSpec) -> String {
        let bits = if spec.sketch_bits == entkv_abi::DEFAULT_SKETCH_BITS {
            String::new()
        } else {
            format!(" --sketch-bits {}", spec.sketch_bits)
        };
        format!(
            "entkv bundle create --alpha {} --head-dim {} --page-size {} --group {} --kv-dtype {}{bits} --out DIR",
            self.alpha,
            self.head_dim,
            self.page_size,
            self.q_heads / self.kv_heads,
            self.kv_dtype.name()
        )
    }
}

impl BenchArgs {
    /// The context lengths to time: the sweep's or --n.
    pub fn lengths(&self) -> Vec<u64> {
        if self.sweep {
            SWEEP_N.to_vec()
        } else {
            self.n.clone()
        }
    }

    /// Heads per step checked against the reference.
    pub fn samples(&self) -> usize {
        self.check_samples.unwrap_or(if self.sweep {
            SWEEP_CHECK_SAMPLES
        } else {
            CHECK_SAMPLES
        })
    }
}

/// A method as named on the command line (the top-k budget depends on the length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodName {
    Dense,
    TopK,
    Gaussian,
    Certified,
    /// `Method::CertifiedPruned`: certified-exact over the pages a certified bound cannot rule out.
    CertifiedPruned,
    /// `Method::Auto`: dense or certified-exact, whichever the bundle's tuned rows say is faster
    /// at the length (dense where it has no tuned timings).
    Auto,
    /// The Quest baseline: the engine's top-k selection, then softmax over the selected pages.
    SoftmaxTopK,
}

impl MethodName {
    pub const ALL: [MethodName; 7] = [
        MethodName::Dense,
        MethodName::TopK,
        MethodName::Gaussian,
        MethodName::Certified,
        MethodName::CertifiedPruned,
        MethodName::Auto,
        MethodName::SoftmaxTopK,
    ];

    pub fn parse(s: &str) -> Result<MethodName> {
        let s = s.trim();
        MethodName::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .with_context(|| {
                let names: Vec<&str> = MethodName::ALL.iter().map(|m| m.name()).collect();
                format!("unknown method `{s}` ({})", names.join(", "))
            })
    }

    /// The name on the command line and in the records.
    pub fn name(self) -> &'static str {
        match self {
            MethodName::Dense => "dense",
            MethodName::TopK => "topk",
            MethodName::Gaussian => "gaussian",
            MethodName::Certified => "certified",
            MethodName::CertifiedPruned => "certified-pruned",
            MethodName::Auto => "auto",
            MethodName::SoftmaxTopK => "softmax-topk",
        }
    }

    /// The engine method that runs (the selection, for the softmax baseline) for caches of
    /// `max_pages` pages per sequence (top-k keeps a quarter of the pages, at least one, as in
    /// BENCH.md).
    pub fn method(self, max_pages: u32) -> Method {
        match self {
            MethodName::Dense => Method::Dense,
            MethodName::TopK | MethodName::SoftmaxTopK => Method::TopK {
                budget_pages: (max_pages / 4).max(1),
            },
            MethodName::Gaussian => Method::Gaussian,
            MethodName::Certified => Method::Certified,
            MethodName::CertifiedPruned => Method::CertifiedPruned,
            MethodName::Auto => Method::Auto,
        }
    }

    /// The method whose traffic a step of `self` moved, given the method its plan ran
    /// (`StepPlan::method`: `Auto` resolved to dense or certified).
    pub fn ran(self, planned: &Method) -> Result<MethodName> {
        Ok(match (self, planned) {
            (MethodName::Auto, Method::Dense) => MethodName::Dense,
            (MethodName::Auto, Method::Certified) => MethodName::Certified,
            (MethodName::Auto, other) => bail!("`auto` planned `{}`, not dense or certified", other.name()),
            (m, _) => m,
        })
    }

    /// The label in tables: `topk(512)`, `softmax-topk(512)`, ….
    pub fn label(self, max_pages: u32) -> String {
        match self {
            MethodName::SoftmaxTopK => format!("softmax-{}", method_label(self.method(max_pages))),
            m => method_label(m.method(max_pages)),
        }
    }

    /// Bytes a step must move (`crate::record::step_bytes`), from what the step reported.
    pub fn bytes(self, sizes: &StepSizes, t: &StepTraffic) -> Result<u64> {
        let selected = || t.selected_pages.context("the step reported no selection");
        Ok(match self {
            MethodName::Dense => step_bytes::dense(sizes, t.support_rows),
            MethodName::TopK => step_bytes::topk(sizes, selected()?, t.support_rows),
            MethodName::Gaussian => step_bytes::gaussian(sizes, selected()?, t.support_rows),
            MethodName::Certified => step_bytes::certified(
                sizes,
                t.kept_rows.context("the step reported no `kept`")?,
                t.support_rows,
            ),
            MethodName::CertifiedPruned => step_bytes::certified_pruned(
                sizes,
                selected()?,
                t.kept_rows.context("the step reported no `kept`")?,
                t.support_rows,
            ),
            MethodName::SoftmaxTopK => step_bytes::softmax_topk(sizes, selected()?),
            MethodName::Auto => {
                bail!("`auto` moves the bytes of the method it resolved to (MethodName::ran)")
            }
        })
    }

    /// The fraction of the cache a step kept: pages for the selectors and the pruning, tokens
    /// for certified.
    pub fn kept(self, sizes: &StepSizes, t: &StepTraffic) -> Result<f64> {
        Ok(match self {
            MethodName::Auto => bail!("`auto` keeps what the method it resolved to keeps (MethodName::ran)"),
            MethodName::Dense => 1.0,
            MethodName::Certified => {
                sizes.token_fraction(t.kept_rows.context("the step reported no `kept`")?)
            }
            _ => sizes.page_fraction(t.selected_pages.context("the step reported no selection")?),
        })
    }

    /// The smallest and the largest fraction of its pages that one (sequence, KV head) kept:
    /// the methods that select pages only.
    pub fn kept_range(self, sizes: &StepSizes, t: &StepTraffic) -> Option<[f64; 2]> {
        match self {
            MethodName::Auto | MethodName::Dense | MethodName::Certified => None,
            _ => t
                .selected_pages_range
                .map(|(lo, hi)| [sizes.head_page_fraction(lo), sizes.head_page_fraction(hi)]),
        }
    }
}

/// Fail unless `bundle` holds `w`'s spec, naming the spec and the command that makes a bundle
/// with it.
pub fn require_spec(bundle: &Bundle, path: &Path, w: &BenchWorkload, sketch_bits: u32) -> Result<PagedSpec> {
    let spec = w.spec_with(sketch_bits)?;
    let tag = spec.sketch_tag();
    if bundle.spec(&tag).is_none() {
        let have: Vec<String> = bundle.manifest().specs.iter().map(|s| s.sketch_tag()).collect();
        bail!(
            "bundle {} has no spec `{tag}`, which workload `{}` needs (it holds: {}). Make one with:\n  {}",
            path.display(),
            w.name,
            if have.is_empty() {
                "none".into()
            } else {
                have.join(", ")
            },
            w.create_command(&spec)
        );
    }
    Ok(spec)
}

/// Median, min and p90 of a sample, ms.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Stats {
    pub median_ms: f64,
    pub min_ms: f64,
    pub p90_ms: f64,
}

impl Stats {
    fn of(times: &[f64]) -> Stats {
        let (median_ms, min_ms, p90_ms) = summarize(times);
        Stats {
            median_ms,
            min_ms,
            p90_ms,
        }
    }
}

/// One timed stage (the whole step, or one family's launches) of one method at one length.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    #[serde(flatten)]
    pub env: Environment,
    pub workload: String,
    pub method: String,
    pub n: u64,
    /// `step`, or the kernel family (`page_meta` times the metadata build of every full page).
    pub stage: String,
    /// How the bundle's row was found at `n` (`exact`, `nearest bucket`, `default`); for the
    /// step, every family's, `family=tier` comma-separated.
    pub tier: String,
    /// The bundle's tile at `n` and the default tile (families only).
    pub tile: String,
    pub default_tile: String,
    pub iters: usize,
    /// The bundle as it is.
    pub bundle: Stats,
    /// The bundle's default rows only (`None` with `--no-defaults`).
    pub defaults: Option<Stats>,
    /// Default median over bundle median.
    pub speedup: Option<f64>,
    /// Step rows: largest relative error of the sampled heads over both variants, and whether
    /// both matched the reference.
    pub max_rel_err: Option<f64>,
    pub checked: Option<bool>,
}

/// Everything `entkv bench` measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub bundle: String,
    pub workload: BenchWorkload,
    pub environment: Environment,
    pub rows: Vec<BenchRow>,
    /// One BENCH.md record per (method, n): the whole step with the bundle as it is.
    pub records: Vec<TimingRecord>,
}

impl BenchReport {
    /// Whether every checked step matched its reference.
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.checked != Some(false))
    }

    /// One aligned line per row, then one per record.
    pub fn table(&self) -> String {
        format!("{}\n{}", self.rows_table(), records_table(&self.records))
    }

    /// One aligned line per row.
    fn rows_table(&self) -> String {
        let head = [
            "n",
            "method",
            "stage",
            "tier",
            "tile",
            "bundle ms (med/min/p90)",
            "defaults ms",
            "speedup",
            "check",
        ]
        .map(String::from);
        let rows: Vec<[String; 9]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.n.to_string(),
                    r.method.clone(),
                    r.stage.clone(),
                    r.tier.clone(),
                    r.tile.clone(),
                    format!(
                        "{:.4}/{:.4}/{:.4}",
                        r.bundle.median_ms, r.bundle.min_ms, r.bundle.p90_ms
                    ),
                    r.defaults.map_or("-".into(), |d| format!("{:.4}", d.median_ms)),
                    r.speedup.map_or("-".into(), |x| format!("{x:.2}x")),
                    match (r.checked, r.max_rel_err) {
                        (Some(true), Some(e)) => format!("ok ({e:.1e})"),
                        (Some(false), Some(e)) => format!("FAIL ({e:.1e})"),
                        (Some(c), None) => if c { "ok" } else { "FAIL" }.into(),
                        (None, _) => "".into(),
                    },
                ]
            })
            .collect();
        aligned(&head, &rows)
    }
}

/// Time `variants` closures interleaved (run r of every variant, then run r + 1, …), `warmup`
/// untimed rounds first: ms, `result[variant][iter]`. Consecutive runs take consecutive cache
/// copies (of `copies`), so none finds its inputs in L2 from the run before.
fn interleaved(
    variants: usize,
    copies: usize,
    warmup: usize,
    iters: usize,
    mut time: impl FnMut(usize, usize) -> Result<f64>,
) -> Result<Vec<Vec<f64>>> {
    let mut out = vec![Vec::with_capacity(iters); variants];
    for r in 0..warmup + iters {
        for (v, times) in out.iter_mut().enumerate() {
            let ms = time(v, (r * variants + v) % copies)?;
            if r >= warmup {
                times.push(ms);
            }
        }
    }
    Ok(out)
}

/// Run `entkv bench`: check the arguments and the bundle (no GPU needed for that), then time.
pub fn run(args: &BenchArgs, commit: &str) -> Result<BenchReport> {
    let t0 = std::time::Instant::now();
    let w = BenchWorkload::named(&args.workload)?;
    let methods = args
        .methods
        .iter()
        .map(|m| MethodName::parse(m))
        .collect::<Result<Vec<_>>>()?;
    ensure!(!methods.is_empty(), "--methods is empty");
    let lengths = args.lengths();
    ensure!(
        !lengths.is_empty() && lengths.iter().all(|&n| n >= 1),
        "--n needs lengths ≥ 1"
    );
    ensure!(args.iters >= 1, "--iters must be ≥ 1");
    let samples = args.samples();
    ensure!(
        samples >= 1,
        "--check-samples must be ≥ 1 (every timed step is checked)"
    );
    let bundle = Arc::new(
        Bundle::open(&args.bundle)
            .with_context(|| format!("cannot open bundle {}", args.bundle.display()))?,
    );
    let spec = require_spec(&bundle, &args.bundle, &w, args.sketch_bits)?;
    for &n in &lengths {
        PaperLayout::shape(&spec, w.batch, w.kv_heads, n).context("--n")?;
    }
    // variants[0] is the bundle as it is, variants[1] (unless --no-defaults) its default rows.
    let mut variants = vec![bundle.clone()];
    if !args.no_defaults {
        variants.push(Arc::new(default_rows_only(&bundle)?));
    }
    if let Some(reason) = gpu_unavailable_reason() {
        bail!("`entkv bench` times the bundle on the GPU, and there is no usable GPU: {reason}");
    }
    let gpu = Gpu::open(0).context("opening GPU 0")?;
    let environment = Environment::detect(Some(&gpu), commit);
    let modules = ModuleCache::new();
    let mut kernels = Kernels::new(&gpu);
    // The softmax baseline's decode kernels, generated on first use.
    let mut functions = FunctionCache::new(&gpu);
    let mut timer = if args.idle_start {
        eprintln!("timing: each step starts on an idle stream (--idle-start)");
        StepTimer::idle(&gpu)?
    } else {
        StepTimer::new(&gpu)?
    };
    let mut rows = Vec::new();
    let mut records = Vec::new();
    let elapsed = || format!("[{:7.1} s]", t0.elapsed().as_secs_f64());
    for &n in &lengths {
        let tiers: Vec<String> = KernelFamily::ALL
            .into_iter()
            .flat_map(|f| f.selector_keys().into_iter().map(move |s| (f, s)))
            .filter_map(|(f, s)| {
                bundle
                    .resolve(f, &spec, n, s)
                    .ok()
                    .map(|r| format!("{} {} {}", f.label(s), r.tier, r.row.tile.tag()))
            })
            .collect();
        eprintln!("{} n = {n}: {}", elapsed(), tiers.join("; "));
        let new_cache = |kernels: &mut Kernels, seed| {
            EngineCache::with_keys(&gpu, kernels, spec, w.batch, w.kv_heads, n, seed, w.data)
                .with_context(|| format!("generating the {} cache at n = {n}", w.name))
        };
        let generated = std::time::Instant::now();
        let first = new_cache(&mut kernels, args.data_seed)?;
        let copies = rotation_copies(gpu.info().l2_bytes, first.kv_bytes());
        let mut caches = vec![first];
        for i in 1..copies {
            caches.push(new_cache(&mut kernels, args.data_seed.wrapping_add(i as u64))?);
        }
        gpu.synchronize()?;
        eprintln!(
            "{} n = {n}: {copies} {} cache(s) generated in {:.3} s{}",
            elapsed(),
            w.name,
            generated.elapsed().as_secs_f64(),
            match w.data {
                DeviceKeys::Normal => "",
                DeviceKeys::Peaked => " (peaked keys, spot-checked bit for bit against the host twin)",
            }
        );
        let max_pages = caches[0].paper.shape.max_pages;
        let sizes = StepSizes::of(&spec, w.batch, w.kv_heads, n);
        // The metadata build is the same for every method: its stage is timed once per length.
        let mut meta_timed = false;
        for &m in &methods {
            let method = m.method(max_pages);
            let label = m.label(max_pages);
            eprintln!("{} timing {label} at n = {n} ({copies} cache copies)", elapsed());
            // sessions[variant][copy].
            let mut sessions: Vec<Vec<Session>> = Vec::new();
            for b in &variants {
                let mut per_copy = Vec::new();
                for cache in caches.iter_mut() {
                    let problem = Problem {
                        check_device_ids: args.check_device_ids,
                        ..cache.problem(method)
                    };
                    let dec = Decoder::with_module_cache(&gpu, b.clone(), &problem, modules.clone())
                        .with_context(|| format!("making the {label} decoder"))?;
                    per_copy.push(cache.session(&gpu, dec)?);
                }
                sessions.push(per_copy);
            }
            // Every session runs its step once, so the stages timed alone read valid selections
            // in its own workspace whichever copy the rotation gives it.
            for per_copy in &sessions {
                for (s, cache) in per_copy.iter().zip(&caches) {
                    cache.run(&gpu, s)?;
                }
            }
            let softmax = match (m, method) {
                (MethodName::SoftmaxTopK, Method::TopK { budget_pages }) => {
                    let sm = SoftmaxTopk::new(&gpu, &caches[0], budget_pages)?;
                    for cache in caches.iter_mut() {
                        sm.prepare(&gpu, cache)?;
                    }
                    Some(sm)
                }
                _ => None,
            };
            let mut max_rel = 0.0f64;
            let mut checked = true;
            for per_copy in &sessions {
                let (err, ok) = match &softmax {
                    Some(sm) => sm.check(&mut functions, &gpu, &mut caches[0], &per_copy[0], samples)?,
                    None => {
                        let c = caches[0].check(&gpu, &per_copy[0], samples)?;
                        (c.max_rel_err, c.passed)
                    }
                };
                max_rel = max_rel.max(err);
                checked &= ok;
            }
            // What the bundle's step read and kept, from its checked run.
            let traffic = caches[0].traffic(&sessions[0][0])?;
            let plan = sessions[0][0].step.plan();
            let default_plan = sessions.get(1).map(|d| d[0].step.plan());
            let chosen = |p: &'_ StepPlan, f: KernelFamily| p.kernels.iter().find(|k| k.family == f).cloned();
            let row = |stage: String, tier: String, tile: String, default_tile: String, t: &[Vec<f64>]| {
                let b = Stats::of(&t[0]);
                let d = t.get(1).map(|d| Stats::of(d));
                BenchRow {
                    env: environment.clone(),
                    workload: w.name.into(),
                    method: label.clone(),
                    n,
                    stage,
                    tier,
                    tile,
                    default_tile,
                    iters: args.iters,
                    speedup: d.map(|d| d.median_ms / b.median_ms),
                    bundle: b,
                    defaults: d,
                    max_rel_err: None,
                    checked: None,
                }
            };
            let t = interleaved(
                variants.len(),
                copies,
                args.warmup,
                args.iters,
                |v, c| match &softmax {
                    Some(sm) => sm.time(
                        &mut functions,
                        &gpu,
                        &caches[c],
                        &sessions[v][c],
                        &mut timer,
                        true,
                    ),
                    None => caches[c].time_step(&gpu, &sessions[v][c], &mut timer),
                },
            )?;
            let ran = m.ran(&plan.method)?;
            let bytes = ran.bytes(&sizes, &traffic)?;
            let mut record =
                crate::paper::record(&environment, w.name, m.name(), &caches[0].paper, &t[0], bytes);
            record.pages_kept = Some(ran.kept(&sizes, &traffic)?);
            record.pages_kept_range = ran.kept_range(&sizes, &traffic);
            record.start = Some(timer.start().into());
            record.data_seed = (args.data_seed != DEFAULT_DATA_SEED).then_some(args.data_seed);
            record.check_device_ids = args.check_device_ids;
            records.push(record);
            let tiers = plan
                .kernels
                .iter()
                .filter(|k| softmax.is_none() || k.family != KernelFamily::DecodeSparse)
                .map(|k| format!("{}={}", k.family, k.tier))
                .collect::<Vec<_>>()
                .join(",");
            rows.push(BenchRow {
                max_rel_err: Some(max_rel),
                checked: Some(checked),
                ..row("step".into(), tiers, String::new(), String::new(), &t)
            });
            if let Some(sm) = &softmax {
                // Its selection stages are top-k's; only the decode is its own.
                let t = interleaved(variants.len(), copies, args.warmup, args.iters, |v, c| {
                    sm.time(
                        &mut functions,
                        &gpu,
                        &caches[c],
                        &sessions[v][c],
                        &mut timer,
                        false,
                    )
                })?;
                let tile = entkv_abi::SoftmaxTopkTile::default_for(&spec).tag();
                rows.push(row(SoftmaxTopk::STAGE.into(), "-".into(), tile.clone(), tile, &t));
                continue;
            }
            if m == MethodName::Auto {
                // Its stages are those of the method it resolved to (the step row's tiers say
                // which), timed under that method's own name; the default rows may resolve to
                // the other one.
                continue;
            }
            for &family in method.families() {
                if family == KernelFamily::PageMeta {
                    if meta_timed {
                        continue;
                    }
                    meta_timed = true;
                }
                let calls: Vec<Vec<Vec<BoundCall>>> = sessions
                    .iter()
                    .map(|per_copy| {
                        per_copy
                            .iter()
                            .zip(&caches)
                            .map(|(s, cache)| cache.family_calls(s, family))
                            .collect::<Result<Vec<_>>>()
                    })
                    .collect::<Result<_>>()?;
                let t = interleaved(variants.len(), copies, args.warmup, args.iters, |v, c| {
                    caches[c].time_calls(&gpu, &sessions[v][c], &calls[v][c], &mut timer)
                })?;
                let (ours, default) = (chosen(plan, family), default_plan.and_then(|p| chosen(p, family)));
                rows.push(row(
                    family.to_string(),
                    ours.as_ref().map_or("-".into(), |k| k.tier.to_string()),
                    ours.map_or("-".into(), |k| k.tile.tag()),
                    default.map_or("-".into(), |k| k.tile.tag()),
                    &t,
                ));
            }
        }
    }
    eprintln!("{} done", elapsed());
    Ok(BenchReport {
        bundle: args.bundle.display().to_string(),
        workload: w,
        environment,
        rows,
        records,
    })
}

/// Write the report as pretty JSON.
pub fn write_json(report: &BenchReport, path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        Cli::try_parse_from(["bench", "--bundle", "B"].iter().chain(args)).map(|c| c.bench)
    }

    #[test]
    fn flags_parse() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.lengths(), vec![32_768, 131_072, 1_048_576]);
        assert_eq!((a.samples(), a.no_defaults, a.sweep), (3, false, false));
        let a = parse(&["--sweep", "--no-defaults", "--iters", "20"]).unwrap();
        assert_eq!(a.lengths(), SWEEP_N.to_vec());
        assert_eq!((a.samples(), a.no_defaults, a.iters), (1, true, 20));
        assert!(!a.idle_start);
        assert!(parse(&["--idle-start"]).unwrap().idle_start);
        assert_eq!(parse(&["--sweep", "--check-samples", "2"]).unwrap().samples(), 2);
        assert_eq!(parse(&["--n", "4096,8192"]).unwrap().lengths(), vec![4096, 8192]);
        assert_eq!(parse(&[]).unwrap().data_seed, DEFAULT_DATA_SEED);
        assert_eq!(parse(&["--data-seed", "12"]).unwrap().data_seed, 12);
        assert!(!parse(&[]).unwrap().check_device_ids);
        assert!(parse(&["--check-device-ids"]).unwrap().check_device_ids);
        assert!(parse(&["--data-seed", "-1"]).is_err());
        assert!(parse(&["--sweep", "--n", "4096"]).is_err());
        assert_eq!(SWEEP_N.first(), Some(&4096));
        assert_eq!(SWEEP_N.last(), Some(&(1 << 20)));
    }

    /// BENCH.md's workloads table; `peaked` is `paper`'s shapes (one bundle serves both) on
    /// device-generated peaked keys.
    #[test]
    fn workloads_follow_bench_md() {
        for w in WORKLOADS {
            assert_eq!(BenchWorkload::named(w.name).unwrap(), w);
        }
        let (paper, peaked) = (
            BenchWorkload::named("paper").unwrap(),
            BenchWorkload::named("peaked").unwrap(),
        );
        assert_eq!(
            (
                peaked.batch,
                peaked.q_heads,
                peaked.kv_heads,
                peaked.head_dim,
                peaked.page_size,
                peaked.alpha,
                peaked.kv_dtype
            ),
            (8, 24, 24, 32, 16, 1.5, DType::F16)
        );
        assert_eq!(
            (paper.data, peaked.data),
            (DeviceKeys::Normal, DeviceKeys::Peaked)
        );
        assert_eq!(peaked.spec().unwrap(), paper.spec().unwrap());
        let spec = paper.spec().unwrap();
        assert_eq!(peaked.create_command(&spec), paper.create_command(&spec));
        let wide = BenchWorkload::named("wide").unwrap();
        let eight = wide.spec_with(8).unwrap();
        assert_eq!(eight.sketch_bits, 8);
        assert!(wide
            .create_command(&eight)
            .contains("--group 4 --kv-dtype bf16 --sketch-bits 8"));
        assert!(wide.spec_with(5).is_err());
        let j = serde_json::to_value(peaked).unwrap();
        assert_eq!(
            (&j["name"], &j["data"], &j["kv_dtype"]),
            (&"peaked".into(), &"peaked".into(), &"f16".into())
        );
        assert_eq!(serde_json::to_value(paper).unwrap()["data"], "normal");
        let e = BenchWorkload::named("skewed").unwrap_err().to_string();
        assert!(
            e.contains("unknown workload `skewed` (paper, gqa, peaked, wide"),
            "{e}"
        );
        let a = parse(&[
            "--workload",
            "peaked",
            "--methods",
            "dense,topk,gaussian,certified,certified-pruned,auto,softmax-topk",
        ])
        .unwrap();
        assert_eq!(BenchWorkload::named(&a.workload).unwrap(), peaked);
        let methods: Vec<MethodName> = a.methods.iter().map(|m| MethodName::parse(m).unwrap()).collect();
        assert_eq!(methods, MethodName::ALL);
    }

    #[test]
    fn method_names() {
        for m in MethodName::ALL {
            assert_eq!(MethodName::parse(m.name()).unwrap(), m);
        }
        assert_eq!(
            MethodName::parse(" softmax-topk").unwrap(),
            MethodName::SoftmaxTopK
        );
        let e = MethodName::parse("quest").unwrap_err().to_string();
        assert!(
            e.contains("unknown method `quest`") && e.contains("softmax-topk"),
            "{e}"
        );
        // The baseline selects with top-k's budget; labels say which decode runs.
        assert_eq!(
            MethodName::SoftmaxTopK.method(2048),
            MethodName::TopK.method(2048)
        );
        assert_eq!(MethodName::SoftmaxTopK.label(2048), "softmax-topk(512)");
        assert_eq!(MethodName::TopK.label(2048), "topk(512)");
    }

    /// Each method's bytes and kept fraction come from the counts it reports; a missing count
    /// is an error, not a zero.
    #[test]
    fn bytes_and_kept_per_method() {
        let spec = BenchWorkload::named("paper").unwrap().spec().unwrap();
        let s = StepSizes::of(&spec, 8, 24, 32_768);
        let t = StepTraffic {
            support_rows: 1000,
            selected_pages: Some(8 * 24 * 513),
            selected_pages_range: Some((257, 1024)),
            kept_rows: Some(5000),
        };
        assert_eq!(
            MethodName::Dense.bytes(&s, &t).unwrap(),
            step_bytes::dense(&s, 1000)
        );
        assert_eq!(
            MethodName::TopK.bytes(&s, &t).unwrap(),
            step_bytes::topk(&s, 8 * 24 * 513, 1000)
        );
        assert_eq!(
            MethodName::SoftmaxTopK.bytes(&s, &t).unwrap(),
            step_bytes::softmax_topk(&s, 8 * 24 * 513)
        );
        assert_eq!(
            MethodName::Certified.bytes(&s, &t).unwrap(),
            step_bytes::certified(&s, 5000, 1000)
        );
        assert_eq!(MethodName::Dense.kept(&s, &t).unwrap(), 1.0);
        assert_eq!(MethodName::TopK.kept(&s, &t).unwrap(), 513.0 / 2048.0);
        assert_eq!(
            MethodName::Certified.kept(&s, &t).unwrap(),
            5000.0 / (8.0 * 24.0 * 32_768.0)
        );
        // The range is per (sequence, KV head), over its own 2048 pages; page selectors only.
        assert_eq!(
            MethodName::Gaussian.kept_range(&s, &t),
            Some([257.0 / 2048.0, 0.5])
        );
        assert_eq!(MethodName::Certified.kept_range(&s, &t), None);
        let none = StepTraffic {
            selected_pages: None,
            selected_pages_range: None,
            kept_rows: None,
            ..t
        };
        assert!(MethodName::Gaussian.bytes(&s, &none).is_err());
        assert!(MethodName::Certified.kept(&s, &none).is_err());
        assert_eq!(MethodName::TopK.kept_range(&s, &none), None);
        // `auto` counts the bytes of what it ran; on its own it has none.
        assert!(MethodName::Auto.bytes(&s, &t).is_err() && MethodName::Auto.kept(&s, &t).is_err());
        let ran = MethodName::Auto.ran(&Method::Certified).unwrap();
        assert_eq!(ran, MethodName::Certified);
        assert_eq!(ran.bytes(&s, &t).unwrap(), step_bytes::certified(&s, 5000, 1000));
        assert_eq!(MethodName::Auto.ran(&Method::Dense).unwrap(), MethodName::Dense);
        assert!(MethodName::Auto.ran(&Method::Gaussian).is_err());
        assert_eq!(MethodName::TopK.ran(&Method::Dense).unwrap(), MethodName::TopK);
    }
}
