//! `entkv quality`: how much attention the selectors lose (issue #7, docs/quality.md).
//!
//! The EntmaxKV paper's claim is that, at matched KV coverage, entmax selection drops less
//! probability mass, keeps more of the support and has a lower output error than softmax top-k
//! (Quest), and that the error vanishes once the support is covered. This measures it: the
//! real selection kernels (top-k at a sweep of budgets, Gaussian-aware, certified-exact) run on
//! a workload — on the GPU through the runtime's `Decoder`, or in the CPU interpreter — the
//! kept tokens are read back, and δ, ρ and R are computed in float64 on the host against
//! full-cache attention ([`metrics`]).
//!
//! - [`metrics`]: the metric definitions (pure functions, spec §8.1).
//! - [`npy`]: the `.npy` reader for captured activations.
//! - [`kept`]: kept sets read back from a step's buffers.
//! - [`gpu`]: a step of host inputs through the `Decoder`, workspace read back.
//! - [`sweep`]: the sweep, its report, table and CSV.

pub mod gpu;
pub mod kept;
pub mod metrics;
pub mod npy;
pub mod sweep;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use entkv_abi::{DType, SpecError};
use entkv_bundle::Bundle;
use entkv_kernels::paged_data::KeyData;
use entkv_runtime::engine::{EngineError, ModuleCache};
use entkv_runtime::{gpu_unavailable_reason, Gpu};
use thiserror::Error;

pub use sweep::{evaluate, QualityConfig, QualityReport, QualityRow, Source, Stat};

use crate::verify_cmd::Backend;
use npy::NpyError;

/// Why a sweep could not be made.
#[derive(Debug, Error)]
pub enum QualityError {
    #[error(transparent)]
    Npy(#[from] NpyError),
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Config(String),
    /// A step's buffers contradict what its kernels promise (a kernel or readback bug).
    #[error("the {method} step's buffers are inconsistent: {detail}")]
    Readback { method: String, detail: String },
    /// Running a step (interpreter or driver) failed.
    #[error("{what}: {cause:#}")]
    Run { what: String, cause: anyhow::Error },
}

/// `entkv quality`: generated data (`--data normal|peaked`, `--batch`, `--q-heads`,
/// `--kv-heads`, `--n`, `--head-dim`, `--seed`) or captured arrays (`--q --k --v`).
#[derive(Args, Debug, Clone)]
pub struct QualityArgs {
    /// Entmax α (> 1).
    #[arg(long, default_value_t = 1.5)]
    pub alpha: f64,
    /// Tokens per KV-cache page (16, 32 or 64).
    #[arg(long, default_value_t = 16)]
    pub page_size: u32,
    /// Storage type of q, K and V (f16, bf16, f32): what the kernels read; the metrics use the
    /// same rounded values.
    #[arg(long, default_value = "f16")]
    pub kv_dtype: String,
    /// Key-sketch bits of the certified-exact path (4 or 8).
    #[arg(long, default_value_t = entkv_abi::DEFAULT_SKETCH_BITS)]
    pub sketch_bits: u32,
    /// Generated keys: `normal` (iid N(0,1), BENCH.md `paper`) or `peaked` (BENCH.md `peaked`).
    #[arg(long, default_value = "normal")]
    pub data: String,
    /// Sequences (generated data).
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Query heads (generated data; default: one per KV head).
    #[arg(long)]
    pub q_heads: Option<u32>,
    /// KV heads (generated data).
    #[arg(long, default_value_t = 2)]
    pub kv_heads: u32,
    /// Tokens per sequence (generated data).
    #[arg(long, default_value_t = 2048)]
    pub n: u32,
    /// Head dimension (generated data; 32, 64 or 128).
    #[arg(long, default_value_t = 32)]
    pub head_dim: u32,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Captured queries, `.npy` `[heads, d]` (f16/f32/f64, little-endian, C order): the newest
    /// token's query of every head of one layer. Needs --k and --v.
    #[arg(long, requires_all = ["k", "v"], conflicts_with_all = ["data", "batch", "q_heads", "kv_heads", "n", "head_dim", "seed"])]
    pub q: Option<PathBuf>,
    /// Captured keys, `.npy` `[kv_heads, n, d]`, oldest token first, the query's own token last.
    #[arg(long, requires_all = ["q", "v"])]
    pub k: Option<PathBuf>,
    /// Captured values, `.npy` `[kv_heads, n, d]` (the keys' shape).
    #[arg(long, requires_all = ["q", "k"])]
    pub v: Option<PathBuf>,
    /// Nominal coverages of top-k, percent of the tokens, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0])]
    pub coverage: Vec<f64>,
    /// Where the kernels run: `auto` (the GPU when one is usable, else the CPU interpreter),
    /// `gpu` or `interp`.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Kernel bundle (directory or .entkvb); default: the untuned bundle of the workload's
    /// spec, built in-process.
    #[arg(long)]
    pub bundle: Option<PathBuf>,
    /// Write the rows as CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write the whole report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl QualityArgs {
    /// The sweep these flags describe (arrays are read here).
    pub fn config(&self) -> Result<QualityConfig> {
        let kv_dtype = DType::parse(&self.kv_dtype)?;
        let source = match (&self.q, &self.k, &self.v) {
            (Some(q), Some(k), Some(v)) => Source::Arrays {
                name: format!("npy:{}", q.display()),
                qkv: npy::load_qkv(q, k, v)?,
            },
            (None, None, None) => Source::Generated {
                data: match self.data.as_str() {
                    "normal" => KeyData::Normal,
                    "peaked" => KeyData::Peaked,
                    other => bail!("unknown --data `{other}` (normal, peaked; or --q/--k/--v arrays)"),
                },
                batch: self.batch,
                q_heads: self.q_heads.unwrap_or(self.kv_heads),
                kv_heads: self.kv_heads,
                head_dim: self.head_dim,
                n: self.n,
                seed: self.seed,
            },
            _ => bail!("--q, --k and --v go together"),
        };
        Ok(QualityConfig {
            alpha: self.alpha,
            page_size: self.page_size,
            kv_dtype,
            sketch_bits: self.sketch_bits,
            source,
            coverages: self.coverage.iter().map(|c| c / 100.0).collect(),
        })
    }

    /// The backend `--backend` asks for, and a line saying what was chosen and why.
    pub fn backend(&self) -> Result<(Backend, String)> {
        let gpu = || -> Result<Backend> {
            Ok(Backend::Gpu {
                gpu: Gpu::open(0).context("opening GPU 0")?,
                modules: ModuleCache::new(),
            })
        };
        match (self.backend.as_str(), gpu_unavailable_reason()) {
            ("interp", _) => Ok((Backend::Interp, "CPU interpreter (--backend interp)".into())),
            ("gpu" | "auto", None) => {
                let b = gpu()?;
                let line = format!(
                    "{} (the bundle's PTX through the runtime's Decoder)",
                    b.describe()
                );
                Ok((b, line))
            }
            ("gpu", Some(why)) => bail!("--backend gpu, and there is no usable GPU: {why}"),
            ("auto", Some(why)) => Ok((
                Backend::Interp,
                format!("CPU interpreter (no usable GPU: {why}); the same kernels, slower: keep n small"),
            )),
            (other, _) => bail!("unknown --backend `{other}` (auto, gpu, interp)"),
        }
    }
}

/// Run `entkv quality`: print the table, write the CSV and JSON asked for.
pub fn run(args: &QualityArgs) -> Result<QualityReport> {
    let cfg = args.config()?;
    let (backend, line) = args.backend()?;
    let bundle = match &args.bundle {
        Some(p) => Some(Arc::new(
            Bundle::open(p).with_context(|| format!("cannot open bundle {}", p.display()))?,
        )),
        None => None,
    };
    let report = evaluate(&cfg, &backend, bundle)?;
    let w = &report.workload;
    println!(
        "quality: {} keys, batch {} × {} query / {} KV heads, n = {}, d = {}, P = {}, α = {}, {}",
        w.source, w.batch, w.q_heads, w.kv_heads, w.n, w.head_dim, w.page_size, w.alpha, w.kv_dtype
    );
    println!("kernels: {line}");
    print!("{}", report.table());
    println!(
        "δ: full-cache probability outside the kept tokens; ρ: share of the full-cache support kept \
         (softmax: every token, so ρ = coverage); R: ‖o − õ‖/‖o‖ of attention over the kept tokens \
         against full-cache attention of the same kind (float64); R kernel: the kernel's own output \
         against full-cache entmax. Means over {} heads; {:.1} s.",
        report.rows.first().map_or(0, |r| r.heads),
        report.seconds
    );
    if let Some(p) = &args.csv {
        write_file(p, &report.csv())?;
    }
    if let Some(p) = &args.json {
        write_file(p, &serde_json::to_string_pretty(&report)?)?;
    }
    Ok(report)
}

fn write_file(path: &std::path::Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
