//! The quality sweep: run the selectors' real kernels on one workload — top-k at each nominal
//! coverage, Gaussian-aware and certified-exact — read back what each step kept, and judge the
//! kept sets with the float64 metrics of [`super::metrics`] on every query head.
//!
//! Softmax top-k (Quest) ranks pages with the same box bound and the same `select_topk` kernel
//! as entmax top-k (`entkv_abi::topk`: `decode_softmax_topk` reads the selection `select_topk`
//! wrote), so at each budget the two keep exactly the same tokens: coverage is matched by
//! construction, and the softmax rows are that selection judged under softmax attention.

use std::sync::Arc;
use std::time::Instant;

use entkv_abi::{DType, DecodeSpec, PagedShape, PagedSpec};
use entkv_bundle::Bundle;
use entkv_kernels::data::Tensor;
use entkv_kernels::paged_data::{KeyData, PagedCase, PagedInputs};
use entkv_kernels::reference::scores;
use entkv_runtime::engine::{Decoder, Method, StepPlan};
use serde::Serialize;

use super::gpu::DeviceInputs;
use super::kept::{kept_tokens, StepShape};
use super::metrics::{relative_error, Attention, FullAttention, HeadMetrics};
use super::npy::QkvArrays;
use super::QualityError;
use crate::bundle_cmd::create_default_bundle;
use crate::engine_bench::{case_problem, shape_problem};
use crate::interp_engine::{run_engine, H200_SMS};
use crate::paper::PaperLayout;
use crate::record::Environment;
use crate::verify_cmd::{aligned, Backend};

/// Where q, K and V come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A seeded generator of `entkv_kernels::paged_data`: iid N(0, 1) (`KeyData::Normal`,
    /// BENCH.md `paper`) or page-coherent keys (`KeyData::Peaked`, BENCH.md `peaked`).
    Generated {
        data: KeyData,
        batch: u32,
        q_heads: u32,
        kv_heads: u32,
        head_dim: u32,
        /// Tokens per sequence.
        n: u32,
        seed: u64,
    },
    /// One decode step's activations of one sequence (`super::npy::load_qkv`); `name` labels
    /// the source in reports.
    Arrays { name: String, qkv: QkvArrays },
}

/// One sweep.
#[derive(Clone, Debug)]
pub struct QualityConfig {
    pub alpha: f64,
    pub page_size: u32,
    /// Storage type of q, K and V (what the kernels read; the metrics use the rounded values).
    pub kv_dtype: DType,
    /// Key-sketch bits of the certified path (4 or 8).
    pub sketch_bits: u32,
    pub source: Source,
    /// Nominal coverages of top-k, as fractions in (0, 1].
    pub coverages: Vec<f64>,
}

/// The workload as reported.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadInfo {
    /// `normal`, `peaked`, or `npy:<q file>`.
    pub source: String,
    pub batch: u32,
    pub q_heads: u32,
    pub kv_heads: u32,
    /// Tokens per sequence.
    pub n: u32,
    pub head_dim: u32,
    pub page_size: u32,
    pub alpha: f64,
    pub kv_dtype: String,
    /// Generator seed (0 for arrays).
    pub seed: u64,
}

/// Mean, population standard deviation, min and max over heads.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stat {
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    /// The statistics of `v` (NaN for an empty sample).
    pub fn of(v: &[f64]) -> Stat {
        if v.is_empty() {
            return Stat {
                mean: f64::NAN,
                std: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
            };
        }
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
        Stat {
            mean,
            std: var.sqrt(),
            min: v.iter().cloned().fold(f64::INFINITY, f64::min),
            max: v.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// One method (at one budget) over every query head of the workload.
#[derive(Clone, Debug, Serialize)]
pub struct QualityRow {
    /// `entmax-topk`, `softmax-topk`, `gaussian` or `certified`.
    pub method: String,
    /// The nominal coverage of a fixed-budget row.
    pub nominal_coverage: Option<f64>,
    /// Its budget: pages kept besides the last one.
    pub budget_pages: Option<u32>,
    /// Query heads judged.
    pub heads: usize,
    pub coverage: Stat,
    pub delta: Stat,
    pub rho: Stat,
    pub rel_err: Stat,
    /// `R` of the kernel's own f32 output against the float64 full-cache entmax output (entmax
    /// rows): equal to `rel_err` up to rounding when the kernels compute what the host does.
    pub r_kernel: Option<Stat>,
    /// Size of the full-cache support (every token for softmax).
    pub support: Stat,
}

/// A sweep's results.
#[derive(Clone, Debug, Serialize)]
pub struct QualityReport {
    pub workload: WorkloadInfo,
    /// `interp` or `gpu (<name>)`.
    pub backend: String,
    pub env: Environment,
    pub rows: Vec<QualityRow>,
    pub seconds: f64,
}

/// The top-k budget for nominal coverage `c` of `n` tokens in pages of `p`: the reference's
/// `max(1, ⌈c·n/P⌉)` pages (spec §4.7), kept besides the last page (so the measured coverage
/// is a little above `c`; both are reported).
pub fn budget_pages(c: f64, n: u32, p: u32) -> u32 {
    ((c * n as f64 / p as f64).ceil() as u32).max(1)
}

/// The spec, case and inputs of a configuration: generated data comes from its seeded
/// `PagedCase`; arrays are laid out in a pool of their own pages (identity block table, the
/// slots past the last token NaN as in every test), rounded to the storage type.
pub fn prepare(cfg: &QualityConfig) -> Result<(PagedCase, PagedInputs, WorkloadInfo), QualityError> {
    let (heads, kv_heads, head_dim) = match &cfg.source {
        Source::Generated {
            q_heads,
            kv_heads,
            head_dim,
            ..
        } => (*q_heads, *kv_heads, *head_dim),
        Source::Arrays { qkv, .. } => (qkv.heads as u32, qkv.kv_heads as u32, qkv.head_dim as u32),
    };
    if kv_heads == 0 || heads == 0 || heads % kv_heads != 0 {
        return Err(QualityError::Config(format!(
            "{heads} query heads are not a multiple of {kv_heads} KV heads"
        )));
    }
    let spec = PagedSpec::new(
        DecodeSpec::new(cfg.alpha, head_dim, heads / kv_heads, cfg.kv_dtype)?,
        cfg.page_size,
        false,
        cfg.sketch_bits,
    )?;
    if cfg.coverages.iter().any(|c| !(*c > 0.0 && *c <= 1.0)) {
        return Err(QualityError::Config(format!(
            "coverages must lie in (0, 100] %, got {:?}",
            cfg.coverages.iter().map(|c| c * 100.0).collect::<Vec<_>>()
        )));
    }
    let info = |source: String, batch: u32, n: u32, seed: u64| WorkloadInfo {
        source,
        batch,
        q_heads: heads,
        kv_heads,
        n,
        head_dim,
        page_size: cfg.page_size,
        alpha: cfg.alpha,
        kv_dtype: cfg.kv_dtype.name().to_string(),
        seed,
    };
    match &cfg.source {
        Source::Generated {
            data, batch, n, seed, ..
        } => {
            if *batch == 0 || *n == 0 {
                return Err(QualityError::Config("batch and n must be ≥ 1".into()));
            }
            check_generated_size(&spec, *batch, kv_heads, *n)?;
            let case = PagedCase {
                spec,
                kv_heads,
                seq_lens: vec![*n; *batch as usize],
                seed: *seed,
                data: *data,
                spare_pages: 0,
            };
            let x = case.inputs();
            let name = format!("{data:?}").to_lowercase();
            Ok((case, x, info(name, *batch, *n, *seed)))
        }
        Source::Arrays { name, qkv } => {
            check_array_values(&spec, qkv)?;
            let case = PagedCase {
                spec,
                kv_heads,
                seq_lens: vec![qkv.n as u32],
                seed: 0,
                data: KeyData::Normal,
                spare_pages: 0,
            };
            let x = arrays_inputs(&spec, qkv);
            Ok((case, x, info(name.clone(), 1, qkv.n as u32, 0)))
        }
    }
}

/// A generated cache the engine can address (the bench layout's and the engine's own limits:
/// `PaperLayout::shape`, `Problem::spec`) and this machine can hold: K and V live on the host in
/// float64 (the reference) and in their storage type, about `16 + 2·bytes` a value.
fn check_generated_size(spec: &PagedSpec, batch: u32, kv_heads: u32, n: u32) -> Result<(), QualityError> {
    let bad = |m: String| Err(QualityError::Config(m));
    let shape = match PaperLayout::shape(spec, batch, kv_heads, n as u64) {
        Ok(shape) => shape,
        Err(e) => return bad(format!("{e:#}")),
    };
    shape_problem(spec, &shape, Method::Dense).spec()?;
    let p = spec.page_size as u64;
    let values = 2
        * batch as u128
        * kv_heads as u128
        * ((n as u64).div_ceil(p) * p) as u128
        * spec.decode.head_dim as u128;
    let bytes = values * (16 + 2 * spec.decode.kv_dtype.size_bytes() as u128);
    if let Some(available) = available_memory_bytes().map(u128::from) {
        if bytes > available {
            return bad(format!(
                "a generated cache of batch {batch} × {kv_heads} KV heads × n {n} needs about {:.1} GiB \
                 of host memory (float64 K and V beside their storage copies); {:.1} GiB are available",
                bytes as f64 / (1u64 << 30) as f64,
                available as f64 / (1u64 << 30) as f64
            ));
        }
    }
    Ok(())
}

/// `MemAvailable` of /proc/meminfo, where there is one.
fn available_memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Every captured value is finite and stays finite in its storage type (q in the query
/// dtype, K and V in the cache's): an infinity or NaN would make every metric meaningless.
fn check_array_values(spec: &PagedSpec, a: &QkvArrays) -> Result<(), QualityError> {
    let d = a.head_dim;
    let arrays: [(&str, &[f64], DType, usize); 3] = [
        ("--q", &a.q, spec.decode.q_dtype, 1),
        ("--k", &a.k, spec.decode.kv_dtype, a.n),
        ("--v", &a.v, spec.decode.kv_dtype, a.n),
    ];
    for (what, values, dtype, rows) in arrays {
        for (i, &x) in values.iter().enumerate() {
            if !entkv_kernels::data::round_to(dtype, x).1.is_finite() {
                let at = if rows == 1 {
                    format!("[{}, {}]", i / d, i % d)
                } else {
                    format!("[{}, {}, {}]", i / (rows * d), i / d % rows, i % d)
                };
                return Err(QualityError::Config(format!(
                    "{what}{at} = {x} is not a finite {} value",
                    dtype.name()
                )));
            }
        }
    }
    Ok(())
}

/// `[heads, d]` queries and `[kv_heads, n, d]` keys and values as a one-sequence paged cache.
fn arrays_inputs(spec: &PagedSpec, a: &QkvArrays) -> PagedInputs {
    let (p, d, hkv, n) = (spec.page_size as usize, a.head_dim, a.kv_heads, a.n);
    let pages = n.div_ceil(p);
    let mut k = vec![f64::NAN; pages * hkv * p * d];
    let mut v = k.clone();
    for kvh in 0..hkv {
        for t in 0..n {
            let at = (((t / p) * hkv + kvh) * p + t % p) * d;
            let from = (kvh * n + t) * d;
            k[at..at + d].copy_from_slice(&a.k[from..from + d]);
            v[at..at + d].copy_from_slice(&a.v[from..from + d]);
        }
    }
    PagedInputs {
        shape: PagedShape {
            batch: 1,
            kv_heads: hkv as u32,
            num_pages: pages as u32,
            max_pages: pages as u32,
        },
        q: Tensor::from_f64(spec.decode.q_dtype, &a.q),
        k_pool: Tensor::from_f64(spec.decode.kv_dtype, &k),
        v_pool: Tensor::from_f64(spec.decode.kv_dtype, &v),
        block_table: (0..pages as i32).collect(),
        seq_lens: vec![n as i32],
        alibi_slopes: Vec::new(),
    }
}

/// One selector step's results: the kept tokens per (sequence, query head) and the kernel's
/// output.
struct StepResult {
    kept: Vec<Vec<bool>>,
    out: Vec<f64>,
}

/// Run one step of `method` on `backend` and read back what it kept.
fn run_step(
    backend: &Backend,
    device: Option<&mut DeviceInputs>,
    bundle: &Arc<Bundle>,
    case: &PagedCase,
    x: &PagedInputs,
    method: Method,
) -> Result<StepResult, QualityError> {
    let what = || format!("the {} step", crate::verify_cmd::method_label(method));
    let run = |e: anyhow::Error| QualityError::Run {
        what: what(),
        cause: e,
    };
    let shape = StepShape {
        spec: &case.spec,
        kv_heads: x.shape.kv_heads as usize,
        max_pages: x.shape.max_pages as usize,
        seq_lens: &x.seq_lens,
    };
    let done = |plan: &StepPlan, read: &super::kept::ReadBuffer, out: Vec<f64>| {
        Ok(StepResult {
            kept: kept_tokens(plan, &shape, read)?,
            out,
        })
    };
    match (backend, device) {
        (Backend::Gpu { gpu, modules }, Some(dev)) => {
            let dec = Decoder::with_module_cache(
                gpu,
                bundle.clone(),
                &case_problem(case, &x.shape, method),
                modules.clone(),
            )?;
            let step = dev.run(gpu, &dec).map_err(run)?;
            let layout = dec.planner().workspace_layout();
            let read = |name: &str| step.read(layout, name).map_err(run);
            done(&step.plan, &read, step.out.clone())
        }
        (Backend::Interp, _) => {
            let r = run_engine(case, x, method, bundle, H200_SMS).map_err(run)?;
            let read = |name: &str| {
                r.program
                    .buffers
                    .get(name)
                    .map(|b| b.to_f64_vec())
                    .ok_or_else(|| run(anyhow::anyhow!("the run has no buffer `{name}`")))
            };
            done(&r.plan, &read, read("out")?)
        }
        (Backend::Gpu { .. }, None) => Err(QualityError::Config("GPU inputs were not uploaded".into())),
    }
}

/// What a row judges: which step's kept set, under which attention.
struct RowPlan {
    method: &'static str,
    nominal: Option<f64>,
    budget: Option<u32>,
    step: usize,
    softmax: bool,
}

/// Run the sweep of `cfg` on `backend` through `bundle` (the untuned default bundle of the
/// workload's spec when `None`).
pub fn evaluate(
    cfg: &QualityConfig,
    backend: &Backend,
    bundle: Option<Arc<Bundle>>,
) -> Result<QualityReport, QualityError> {
    let t0 = Instant::now();
    let (case, x, workload) = prepare(cfg)?;
    let bundle = match bundle {
        Some(b) => b,
        None => Arc::new(
            create_default_bundle(&[case.spec], 0).map_err(|e| QualityError::Run {
                what: "making the default kernel bundle".into(),
                cause: e,
            })?,
        ),
    };
    let mut device = match backend {
        Backend::Gpu { gpu, .. } => {
            Some(
                DeviceInputs::upload(gpu, &case.spec, &x).map_err(|e| QualityError::Run {
                    what: "uploading the inputs".into(),
                    cause: e,
                })?,
            )
        }
        Backend::Interp => None,
    };
    let longest = *x.seq_lens.iter().max().expect("a batch") as u32;
    // Steps to run, each once (two coverages may round to one budget).
    let mut methods: Vec<Method> = Vec::new();
    let mut rows = Vec::new();
    fn step_of(m: Method, methods: &mut Vec<Method>) -> usize {
        methods.iter().position(|&x| x == m).unwrap_or_else(|| {
            methods.push(m);
            methods.len() - 1
        })
    }
    for &c in &cfg.coverages {
        let budget = budget_pages(c, longest, cfg.page_size);
        let step = step_of(Method::TopK { budget_pages: budget }, &mut methods);
        for (method, softmax) in [("entmax-topk", false), ("softmax-topk", true)] {
            rows.push(RowPlan {
                method,
                nominal: Some(c),
                budget: Some(budget),
                step,
                softmax,
            });
        }
    }
    for (method, m) in [("gaussian", Method::Gaussian), ("certified", Method::Certified)] {
        let step = step_of(m, &mut methods);
        rows.push(RowPlan {
            method,
            nominal: None,
            budget: None,
            step,
            softmax: false,
        });
    }
    let steps = methods
        .iter()
        .map(|&m| run_step(backend, device.as_mut(), &bundle, &case, &x, m))
        .collect::<Result<Vec<_>, _>>()?;
    let per_head = judge_heads(&case.spec, &x, &rows, &steps);
    let rows = rows
        .iter()
        .enumerate()
        .map(|(r, plan)| {
            let col = |f: &dyn Fn(&HeadMetrics) -> f64| {
                Stat::of(&per_head.iter().map(|h| f(&h.0[r])).collect::<Vec<_>>())
            };
            QualityRow {
                method: plan.method.to_string(),
                nominal_coverage: plan.nominal,
                budget_pages: plan.budget,
                heads: per_head.len(),
                coverage: col(&|m| m.coverage),
                delta: col(&|m| m.delta),
                rho: col(&|m| m.rho),
                rel_err: col(&|m| m.rel_err),
                r_kernel: (!plan.softmax)
                    .then(|| Stat::of(&per_head.iter().filter_map(|h| h.1[r]).collect::<Vec<_>>())),
                support: col(&|m| m.support as f64),
            }
        })
        .collect();
    let (gpu, backend_name) = match backend {
        Backend::Gpu { gpu, .. } => (Some(gpu), backend.describe()),
        Backend::Interp => (None, backend.describe()),
    };
    let commit = std::env::var("ENTKV_COMMIT").unwrap_or_else(|_| "unknown".into());
    Ok(QualityReport {
        workload,
        backend: backend_name,
        env: Environment::detect(gpu, &commit),
        rows,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Per query head (in `b·q_heads + h` order): the metrics of every row, and for entmax rows
/// the kernel output's `R`. Heads are independent, so they are spread over the cores.
#[allow(clippy::type_complexity)]
fn judge_heads(
    spec: &PagedSpec,
    x: &PagedInputs,
    rows: &[RowPlan],
    steps: &[StepResult],
) -> Vec<(Vec<HeadMetrics>, Vec<Option<f64>>)> {
    let d = spec.decode.head_dim as usize;
    let group = spec.decode.group as usize;
    let q_heads = x.shape.kv_heads as usize * group;
    let heads = x.seq_lens.len() * q_heads;
    let one = |i: usize| {
        let (b, h) = (i / q_heads, i % q_heads);
        let (kvh, len) = (h / group, x.seq_lens[b] as usize);
        let keys: Vec<&[f64]> = (0..len).map(|t| x.key(spec, b, kvh, t)).collect();
        let values: Vec<&[f64]> = (0..len).map(|t| x.value(spec, b, kvh, t)).collect();
        let bias: Vec<f64> = if x.alibi_slopes.is_empty() {
            Vec::new()
        } else {
            (0..len).map(|t| x.alibi(h, t, len)).collect()
        };
        let s = scores(&x.q.values[i * d..][..d], &keys, &bias);
        let entmax = FullAttention::new(Attention::Entmax(spec.decode.alpha), &s, &values);
        let softmax = rows
            .iter()
            .any(|r| r.softmax)
            .then(|| FullAttention::new(Attention::Softmax, &s, &values));
        let mut metrics = Vec::with_capacity(rows.len());
        let mut r_kernel = Vec::with_capacity(rows.len());
        for r in rows {
            let step = &steps[r.step];
            let full = if r.softmax {
                softmax.as_ref().expect("built when a row needs it")
            } else {
                &entmax
            };
            metrics.push(full.evaluate(&step.kept[i]));
            r_kernel.push((!r.softmax).then(|| relative_error(entmax.out(), &step.out[i * d..][..d])));
        }
        (metrics, r_kernel)
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(heads)
        .max(1);
    let mut out: Vec<(usize, (Vec<HeadMetrics>, Vec<Option<f64>>))> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                let one = &one;
                s.spawn(move || {
                    (w..heads)
                        .step_by(threads)
                        .map(|i| (i, one(i)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a head's metrics panicked"))
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

impl QualityReport {
    /// The row of `method` (at `nominal` coverage for the fixed-budget ones).
    pub fn row(&self, method: &str, nominal: Option<f64>) -> Option<&QualityRow> {
        self.rows
            .iter()
            .find(|r| r.method == method && r.nominal_coverage == nominal)
    }

    /// One aligned line per row: coverage, then mean (worst) of δ, ρ and R over heads.
    pub fn table(&self) -> String {
        let head = [
            "method",
            "budget",
            "coverage",
            "δ mean (max)",
            "ρ mean (min)",
            "R mean (max)",
            "R kernel (max)",
            "|S| mean",
        ]
        .map(String::from);
        let pct = |v: f64| format!("{:.1}%", v * 100.0);
        let pair = |a: f64, b: f64| format!("{} ({})", metric(a), metric(b));
        let rows: Vec<[String; 8]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.method.clone(),
                    match (r.nominal_coverage, r.budget_pages) {
                        (Some(c), Some(b)) => format!("{} ({b} p)", pct(c)),
                        _ => "own".into(),
                    },
                    pct(r.coverage.mean),
                    pair(r.delta.mean, r.delta.max),
                    pair(r.rho.mean, r.rho.min),
                    pair(r.rel_err.mean, r.rel_err.max),
                    r.r_kernel.map_or("-".into(), |k| pair(k.mean, k.max)),
                    format!("{:.1}", r.support.mean),
                ]
            })
            .collect();
        aligned(&head, &rows)
    }

    /// The header line of [`QualityReport::csv`].
    pub const CSV_HEADER: &'static str = "date,commit,device,backend,source,batch,q_heads,kv_heads,n,head_dim,page_size,alpha,kv_dtype,seed,method,nominal_coverage,budget_pages,heads,coverage_mean,coverage_min,coverage_max,delta_mean,delta_std,delta_max,rho_mean,rho_std,rho_min,r_mean,r_std,r_max,r_kernel_mean,r_kernel_max,support_mean";

    /// The rows as CSV (a header line, then one line per row; empty cells for what a row does
    /// not have), every line carrying the workload and where it ran.
    pub fn csv(&self) -> String {
        let w = &self.workload;
        let e = &self.env;
        let mut out = String::from(Self::CSV_HEADER);
        out.push('\n');
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
        for r in &self.rows {
            let cells = [
                e.date.clone(),
                e.commit.clone(),
                e.gpu.clone(),
                self.backend.clone(),
                w.source.clone(),
                w.batch.to_string(),
                w.q_heads.to_string(),
                w.kv_heads.to_string(),
                w.n.to_string(),
                w.head_dim.to_string(),
                w.page_size.to_string(),
                w.alpha.to_string(),
                w.kv_dtype.clone(),
                w.seed.to_string(),
                r.method.clone(),
                opt(r.nominal_coverage),
                r.budget_pages.map_or(String::new(), |b| b.to_string()),
                r.heads.to_string(),
                r.coverage.mean.to_string(),
                r.coverage.min.to_string(),
                r.coverage.max.to_string(),
                r.delta.mean.to_string(),
                r.delta.std.to_string(),
                r.delta.max.to_string(),
                r.rho.mean.to_string(),
                r.rho.std.to_string(),
                r.rho.min.to_string(),
                r.rel_err.mean.to_string(),
                r.rel_err.std.to_string(),
                r.rel_err.max.to_string(),
                opt(r.r_kernel.map(|k| k.mean)),
                opt(r.r_kernel.map(|k| k.max)),
                r.support.mean.to_string(),
            ];
            out.push_str(&cells.map(|c| csv_cell(&c)).join(","));
            out.push('\n');
        }
        out
    }
}

/// A metric for the table: exact zeros as `0`, four decimals, or two significant digits below
/// 10⁻³ (peaked keys leave softmax a dropped mass of 10⁻⁶, which four decimals would show as 0).
fn metric(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() < 1e-3 {
        format!("{v:.1e}")
    } else {
        format!("{v:.4}")
    }
}

/// A CSV cell, quoted when it holds a comma, a quote or a line break.
fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_follow_the_reference() {
        // 2000 tokens in pages of 16: 5 % is ⌈6.25⌉ = 7 pages, 50 % is ⌈62.5⌉ = 63.
        assert_eq!(budget_pages(0.05, 2000, 16), 7);
        assert_eq!(budget_pages(0.5, 2000, 16), 63);
        assert_eq!(budget_pages(0.001, 100, 16), 1, "at least one page");
    }

    #[test]
    fn stats_and_cells() {
        let s = Stat::of(&[1.0, 3.0]);
        assert_eq!((s.mean, s.std, s.min, s.max), (2.0, 1.0, 1.0, 3.0));
        assert!(Stat::of(&[]).mean.is_nan());
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_cell("plain"), "plain");
        assert_eq!(
            (metric(0.0), metric(0.25), metric(2.5e-6)),
            ("0".into(), "0.2500".into(), "2.5e-6".into())
        );
    }

    #[test]
    fn bad_arrays_and_sizes_are_named() {
        let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
        let (heads, n, d) = (2, 3, 32);
        let ok = QkvArrays {
            heads,
            kv_heads: heads,
            n,
            head_dim: d,
            q: vec![0.5; heads * d],
            k: vec![0.25; heads * n * d],
            v: vec![-1.0; heads * n * d],
        };
        check_array_values(&spec, &ok).unwrap();
        let e = |a: &QkvArrays| check_array_values(&spec, a).unwrap_err().to_string();
        let mut a = ok.clone();
        a.q[d + 3] = f64::NAN;
        assert_eq!(e(&a), "--q[1, 3] = NaN is not a finite f16 value");
        let mut a = ok.clone();
        a.k[(n + 2) * d + 5] = 70000.0; // past f16's largest finite value, 65504
        assert_eq!(e(&a), "--k[1, 2, 5] = 70000 is not a finite f16 value");
        let mut a = ok.clone();
        a.v[7] = f64::NEG_INFINITY;
        assert_eq!(e(&a), "--v[0, 0, 7] = -inf is not a finite f16 value");

        let size = |b, h, n| check_generated_size(&spec, b, h, n).map_err(|e| e.to_string());
        size(8, 24, 1 << 12).unwrap();
        assert!(size(1, 1, 3_000_000_000)
            .unwrap_err()
            .contains("must be in 1..=2³⁰"));
        assert!(size(70_000, 1, 16).unwrap_err().contains("must be ≤ 65535"));
        if available_memory_bytes().is_some() {
            // Inside every engine limit (one sequence of 2³⁰ tokens), past any host's memory.
            assert!(size(1, 65_535, 1 << 30)
                .unwrap_err()
                .contains("GiB of host memory"));
        }
    }

    #[test]
    fn arrays_become_a_one_sequence_cache() {
        let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::F32).unwrap(), 16, false, 8).unwrap();
        let (heads, hkv, n, d) = (4, 2, 20, 32);
        let qkv = QkvArrays {
            heads,
            kv_heads: hkv,
            n,
            head_dim: d,
            q: (0..heads * d).map(|i| i as f64).collect(),
            k: (0..hkv * n * d).map(|i| i as f64).collect(),
            v: (0..hkv * n * d).map(|i| -(i as f64)).collect(),
        };
        let x = arrays_inputs(&spec, &qkv);
        assert_eq!((x.shape.num_pages, x.shape.max_pages), (2, 2));
        for kvh in 0..hkv {
            for t in 0..n {
                let want: Vec<f64> = (0..d).map(|i| ((kvh * n + t) * d + i) as f64).collect();
                assert_eq!(x.key(&spec, 0, kvh, t), &want[..]);
                assert_eq!(x.value(&spec, 0, kvh, t)[1], -want[1]);
            }
        }
        // The slots past the last token are NaN, as in every test cache.
        let nan = x.k_pool.values.iter().filter(|v| v.is_nan()).count();
        assert_eq!(nan, hkv * (2 * 16 - n) * d);
    }
}
