//! `entkv bench`: what a bundle's tuned rows buy. For each context length and method, one decode
//! step of a BENCH.md workload is timed through the runtime's `Decoder` twice — with the bundle
//! as it is (its rows resolved at that length: exact bucket, nearest bucket or default) and with
//! its default rows only — and so is each kernel family's share of the step, interleaved on the
//! same device-generated caches, so the table shows tuned against default per kernel and per
//! step. Both variants' outputs are checked against the float64 reference on sampled heads
//! first: a fast wrong step is not a result.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use entkv_abi::{DType, KernelFamily, PagedSpec};
use entkv_bundle::Bundle;
use entkv_runtime::engine::{BoundCall, Decoder, Method, ModuleCache, Problem, StepPlan};
use entkv_runtime::{gpu_unavailable_reason, Gpu, GpuTimer};
use serde::Serialize;

use crate::device::Kernels;
use crate::engine_bench::{rotation_copies, EngineCache, Session};
use crate::record::{summarize, Environment};
use crate::verify_cmd::{aligned, default_rows_only, method_label};

/// Heads of each step checked against the float64 reference (per variant).
const CHECK_SAMPLES: usize = 3;

/// `entkv bench --bundle PATH [--workload W] [--n N,…] [--methods M,…] [--iters I] [--out F]`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Bundle directory or .entkvb file; it must hold the workload's spec.
    #[arg(long)]
    pub bundle: PathBuf,
    /// BENCH.md workload: paper, gqa or wide (peaked is refused for now: its keys are a host
    /// generator, too slow at these lengths).
    #[arg(long, default_value = "paper")]
    pub workload: String,
    /// Context lengths (tokens per sequence), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![32_768u64, 131_072, 1_048_576])]
    pub n: Vec<u64>,
    /// Methods, comma-separated: dense, topk (a quarter of the pages), gaussian, certified.
    #[arg(long, value_delimiter = ',', default_values = ["dense", "topk", "gaussian", "certified"])]
    pub methods: Vec<String>,
    /// Timed runs per variant (after the warm-up).
    #[arg(long, default_value_t = 50)]
    pub iters: usize,
    /// Untimed runs per variant first.
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Write the results as JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

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
}

fn as_name<S: serde::Serializer>(d: &DType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(d.name())
}

/// The workloads of ../shared/BENCH.md that run on device-generated iid normal data.
pub const WORKLOADS: [BenchWorkload; 3] = [
    BenchWorkload {
        name: "paper",
        batch: 8,
        q_heads: 24,
        kv_heads: 24,
        head_dim: 32,
        page_size: 16,
        alpha: 1.5,
        kv_dtype: DType::F16,
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
    },
];

impl BenchWorkload {
    /// The workload called `name`; `peaked` and unknown names are refused, saying why.
    pub fn named(name: &str) -> Result<BenchWorkload> {
        if name == "peaked" {
            bail!(
                "workload `peaked` is not supported by `entkv bench` yet: its page-coherent keys come \
                 from a host generator (entkv_kernels::paged_data), far too slow for caches of 32k+ \
                 tokens; the device-generated workloads are paper, gqa and wide \
                 (`entkv verify` checks peaked keys)"
            );
        }
        WORKLOADS
            .into_iter()
            .find(|w| w.name == name)
            .with_context(|| format!("unknown workload `{name}` (paper, gqa, wide; see ../shared/BENCH.md)"))
    }

    /// The kernel specialization the bundle must hold (8-bit sketch, no ALiBi: `entkv bundle
    /// create`'s defaults), derived as the engine derives it from a [`Problem`].
    pub fn spec(&self) -> Result<PagedSpec> {
        let problem = Problem {
            q_heads: self.q_heads,
            kv_heads: self.kv_heads,
            kv_dtype: self.kv_dtype,
            ..Problem::new(self.alpha, self.head_dim, self.page_size, Method::Dense)
        };
        Ok(problem.spec()?)
    }

    /// The `entkv bundle create` command that makes an untuned bundle for this workload.
    pub fn create_command(&self) -> String {
        format!(
            "entkv bundle create --alpha {} --head-dim {} --page-size {} --group {} --kv-dtype {} --out DIR",
            self.alpha,
            self.head_dim,
            self.page_size,
            self.q_heads / self.kv_heads,
            self.kv_dtype.name()
        )
    }
}

/// A method as named on the command line (the top-k budget depends on the length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodName {
    Dense,
    TopK,
    Gaussian,
    Certified,
}

impl MethodName {
    pub fn parse(s: &str) -> Result<MethodName> {
        Ok(match s.trim() {
            "dense" => MethodName::Dense,
            "topk" => MethodName::TopK,
            "gaussian" => MethodName::Gaussian,
            "certified" => MethodName::Certified,
            other => bail!("unknown method `{other}` (dense, topk, gaussian, certified)"),
        })
    }

    /// The method for caches of `max_pages` pages per sequence (top-k keeps a quarter of the
    /// pages, at least one, as in BENCH.md).
    pub fn method(self, max_pages: u32) -> Method {
        match self {
            MethodName::Dense => Method::Dense,
            MethodName::TopK => Method::TopK {
                budget_pages: (max_pages / 4).max(1),
            },
            MethodName::Gaussian => Method::Gaussian,
            MethodName::Certified => Method::Certified,
        }
    }
}

/// Fail unless `bundle` holds `w`'s spec, naming the spec and the command that makes a bundle
/// with it.
pub fn require_spec(bundle: &Bundle, path: &Path, w: &BenchWorkload) -> Result<PagedSpec> {
    let spec = w.spec()?;
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
            w.create_command()
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
    /// The bundle's default rows only.
    pub defaults: Stats,
    /// Default median over bundle median.
    pub speedup: f64,
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
}

impl BenchReport {
    /// Whether every checked step matched its reference.
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.checked != Some(false))
    }

    /// One aligned line per row.
    pub fn table(&self) -> String {
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
                    format!("{:.4}", r.defaults.median_ms),
                    format!("{:.2}x", r.speedup),
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
    let w = BenchWorkload::named(&args.workload)?;
    let methods = args
        .methods
        .iter()
        .map(|m| MethodName::parse(m))
        .collect::<Result<Vec<_>>>()?;
    ensure!(!methods.is_empty(), "--methods is empty");
    ensure!(
        !args.n.is_empty() && args.n.iter().all(|&n| n >= 1),
        "--n needs lengths ≥ 1"
    );
    ensure!(args.iters >= 1, "--iters must be ≥ 1");
    let bundle = Arc::new(
        Bundle::open(&args.bundle)
            .with_context(|| format!("cannot open bundle {}", args.bundle.display()))?,
    );
    let spec = require_spec(&bundle, &args.bundle, &w)?;
    let defaults = Arc::new(default_rows_only(&bundle)?);
    if let Some(reason) = gpu_unavailable_reason() {
        bail!("`entkv bench` times the bundle on the GPU, and there is no usable GPU: {reason}");
    }
    let gpu = Gpu::open(0).context("opening GPU 0")?;
    let environment = Environment::detect(Some(&gpu), commit);
    let modules = ModuleCache::new();
    let mut kernels = Kernels::new(&gpu);
    let mut timer = GpuTimer::new(&gpu)?;
    let mut rows = Vec::new();
    for &n in &args.n {
        let tiers: Vec<String> = KernelFamily::ALL
            .into_iter()
            .filter_map(|f| {
                bundle
                    .resolve(f, &spec, n)
                    .ok()
                    .map(|r| format!("{f} {} {}", r.tier, r.row.tile.tag()))
            })
            .collect();
        eprintln!("n = {n}: {}", tiers.join("; "));
        let new_cache = |kernels: &mut Kernels, seed| {
            EngineCache::new(&gpu, kernels, spec, w.batch, w.kv_heads, n, seed)
                .with_context(|| format!("generating the {} cache at n = {n}", w.name))
        };
        let first = new_cache(&mut kernels, 7)?;
        let copies = rotation_copies(gpu.info().l2_bytes, first.kv_bytes());
        let mut caches = vec![first];
        for i in 1..copies {
            caches.push(new_cache(&mut kernels, 7 + i as u64)?);
        }
        let max_pages = caches[0].paper.shape.max_pages;
        for &m in &methods {
            let method = m.method(max_pages);
            let label = method_label(method);
            eprintln!("timing {label} at n = {n} ({copies} cache copies)");
            // sessions[variant][copy]: variant 0 is the bundle, 1 its default rows.
            let mut sessions: Vec<Vec<Session>> = Vec::new();
            for b in [&bundle, &defaults] {
                let mut per_copy = Vec::new();
                for cache in caches.iter_mut() {
                    let dec =
                        Decoder::with_module_cache(&gpu, b.clone(), &cache.problem(method), modules.clone())
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
            let mut max_rel = 0.0f64;
            let mut checked = true;
            for per_copy in &sessions {
                let c = caches[0].check(&gpu, &per_copy[0], CHECK_SAMPLES)?;
                max_rel = max_rel.max(c.max_rel_err);
                checked &= c.passed;
            }
            let plan = sessions[0][0].step.plan();
            let default_plan = sessions[1][0].step.plan();
            let chosen = |p: &'_ StepPlan, f: KernelFamily| p.kernels.iter().find(|k| k.family == f).cloned();
            let row = |stage: String, tier: String, tile: String, default_tile: String, t: &[Vec<f64>]| {
                let (b, d) = (Stats::of(&t[0]), Stats::of(&t[1]));
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
                    speedup: d.median_ms / b.median_ms,
                    bundle: b,
                    defaults: d,
                    max_rel_err: None,
                    checked: None,
                }
            };
            let t = interleaved(2, copies, args.warmup, args.iters, |v, c| {
                caches[c].time_step(&gpu, &sessions[v][c], &mut timer)
            })?;
            let tiers = plan
                .kernels
                .iter()
                .map(|k| format!("{}={}", k.family, k.tier))
                .collect::<Vec<_>>()
                .join(",");
            rows.push(BenchRow {
                max_rel_err: Some(max_rel),
                checked: Some(checked),
                ..row("step".into(), tiers, String::new(), String::new(), &t)
            });
            for &family in method.families() {
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
                let t = interleaved(2, copies, args.warmup, args.iters, |v, c| {
                    caches[c].time_calls(&gpu, &sessions[v][c], &calls[v][c], &mut timer)
                })?;
                let (ours, default) = (chosen(plan, family), chosen(default_plan, family));
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
    Ok(BenchReport {
        bundle: args.bundle.display().to_string(),
        workload: w,
        environment,
        rows,
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
