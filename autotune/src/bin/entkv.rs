//! `entkv`: emit kernels, build and check kernel bundles, run the GPU checks.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use entkv_abi::{DType, DecodeSpec};
use entkv_autotune::bundle_cmd::{self, BundleCmd};
use entkv_autotune::spec_args::SpecArgs;
use entkv_autotune::{bench, emit, gpucheck};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "entkv",
    version,
    about = "Support-aware sparse entmax decoding kernels for NVIDIA H200"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write the LLVM IR (.ll) and PTX (.ptx) of every kernel of a specialization, plus a
    /// manifest.json listing them.
    Emit {
        #[command(flatten)]
        spec: SpecArgs,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Build, verify, inspect, pack and unpack kernel bundles (docs/bundle.md).
    Bundle {
        #[command(subcommand)]
        verb: BundleCmd,
    },
    /// Run every GPU check (correctness against float64 references, then timings at the
    /// `paper` shapes) and print a table. Needs an NVIDIA GPU.
    GpuCheck {
        /// Write report.json (checks and timings) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Large context lengths to check and time (comma-separated).
        #[arg(long, value_delimiter = ',', default_values_t = vec![32_768u64, 131_072, 1_048_576])]
        large_n: Vec<u64>,
        #[arg(long, default_value_t = 50)]
        iters: usize,
        #[arg(long, default_value_t = 10)]
        warmup: usize,
        /// Only the small correctness cases (for compute-sanitizer runs).
        #[arg(long)]
        small_only: bool,
    },
    /// Time a paged decode pipeline (per kernel and per step) for tile variants at the `paper`
    /// shape. Needs an NVIDIA GPU.
    BenchPaper {
        /// dense, sparse-all (every page as a selection is not supported; use dense) or certified.
        #[arg(long, default_value = "certified")]
        method: String,
        #[arg(long, default_value_t = 1_048_576)]
        n: u64,
        #[arg(long, default_value_t = 8)]
        sketch_bits: u32,
        /// Tile configs `threads,lanes,tokens,newton,min_blocks,ctas_per_sm,finish_threads,capacity`.
        #[arg(long)]
        tile: Vec<String>,
        #[arg(long, default_value_t = 10)]
        iters: usize,
    },
    /// Time the dense decode's kernels for several tile configs at the `paper` shapes
    /// (α = 1.5, batch 8, 24 heads, d = 32, f16). Needs an NVIDIA GPU.
    BenchDense {
        #[arg(long, default_value_t = 1_048_576)]
        n: u64,
        /// Tile configs `threads,lanes,tokens,newton,min_blocks,ctas_per_sm,finish_threads,capacity`
        /// (repeat the flag); the default config when none is given.
        #[arg(long)]
        tile: Vec<String>,
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// Write the timings as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Emit { spec, out } => {
            let specs = spec.specs()?;
            let m = emit::emit(&specs, &out)?;
            for module in &m.modules {
                println!(
                    "{} ({} entries)",
                    out.join(&module.ptx_file).display(),
                    module.entries.len()
                );
            }
            println!("{}", out.join("manifest.json").display());
        }
        Cmd::Bundle { verb } => bundle_cmd::run(verb)?,
        Cmd::GpuCheck {
            out,
            large_n,
            iters,
            warmup,
            small_only,
        } => {
            let opts = gpucheck::Options {
                large_n: if small_only { Vec::new() } else { large_n },
                iters,
                warmup,
                ..Default::default()
            };
            let commit = std::env::var("ENTKV_COMMIT").unwrap_or_else(|_| "unknown".into());
            let report = gpucheck::run(&opts, &commit)?;
            if let Some(dir) = out {
                std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
                std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(&report)?)?;
            }
            println!("{}", report.table());
            if !report.passed() {
                anyhow::bail!("some GPU checks failed");
            }
        }
        Cmd::BenchPaper {
            method,
            n,
            sketch_bits,
            tile,
            iters,
        } => {
            let kind = match method.as_str() {
                "dense" => entkv_kernels::pipelines::DecodeKind::Dense,
                "certified" => entkv_kernels::pipelines::DecodeKind::Certified,
                other => anyhow::bail!("unknown method `{other}` (dense, certified)"),
            };
            let spec = DecodeSpec::new(1.5, 32, 1, DType::F16)?;
            let tiles = if tile.is_empty() {
                vec![if kind == entkv_kernels::pipelines::DecodeKind::Certified {
                    entkv_abi::DenseTile::default_certified(&spec)
                } else {
                    entkv_abi::DenseTile::default_for(&spec)
                }]
            } else {
                tile.iter()
                    .map(|t| bench::parse_tile(&spec, t))
                    .collect::<Result<Vec<_>>>()?
            };
            entkv_autotune::paper::bench_variants(kind, n, sketch_bits, &tiles, iters)?;
        }
        Cmd::BenchDense { n, tile, iters, out } => {
            let spec = DecodeSpec::new(1.5, 32, 1, DType::F16)?;
            let tiles = if tile.is_empty() {
                vec![entkv_abi::DenseTile::default_for(&spec)]
            } else {
                tile.iter()
                    .map(|t| bench::parse_tile(&spec, t))
                    .collect::<Result<Vec<_>>>()?
            };
            let rows = bench::bench_dense(n, &tiles, iters)?;
            if let Some(p) = out {
                std::fs::write(&p, serde_json::to_string_pretty(&rows)?)
                    .with_context(|| format!("writing {}", p.display()))?;
            }
        }
    }
    Ok(())
}
