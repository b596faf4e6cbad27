//! `entkv`: emit kernels, build, verify and benchmark kernel bundles, run the GPU checks, and
//! report what the machine has (`doctor`).

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use entkv_abi::{DType, DecodeSpec};
use entkv_autotune::bench_cmd::BenchArgs;
use entkv_autotune::bundle_cmd::{self, BundleCmd};
use entkv_autotune::jit_pool::{JitPool, ServesWorkers};
use entkv_autotune::spec_args::SpecArgs;
use entkv_autotune::verify_cmd::VerifyArgs;
use entkv_autotune::{bench, bench_cmd, doctor, emit, gpucheck, verify_cmd};
use std::path::PathBuf;
use std::process::ExitCode;

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
    /// Check every table row of a bundle against float64 references (GPU, or --interp).
    ///
    /// Each row is made its family's default in a view of the bundle and runs in every method
    /// launching its family, on iid and peaked keys: on the GPU (the bundle's PTX), or in the
    /// CPU interpreter with --interp (kernels generated from the row's tile). Exits non-zero on
    /// any failure.
    Verify(VerifyArgs),
    /// Time a bundle against its default rows, per step and per kernel family (GPU).
    ///
    /// One decode step per method and context length at a BENCH.md workload, the bundle as it
    /// is (its rows resolved per length) and with its default rows only, interleaved; both
    /// checked against the float64 reference on sampled heads. Needs an NVIDIA GPU.
    Bench(BenchArgs),
    /// Dropped mass δ, support recall ρ and output error R of every selector (entmax and
    /// softmax top-k over a coverage sweep, Gaussian-aware, certified-exact) against
    /// full-cache attention, on generated keys or captured .npy arrays (docs/quality.md). On
    /// the GPU when one is usable, else in the CPU interpreter.
    Quality(entkv_autotune::quality::QualityArgs),
    /// Report what this machine has for entkv: LLVM, ptxas, GPU, writable directories.
    ///
    /// The entkv and LLVM versions, ptxas, the GPU (or why there is none), and whether the
    /// autotune cache and out/ are writable (probed with a temporary file). Exits 0 when only
    /// the GPU is missing.
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
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
        #[arg(long, default_value_t = entkv_abi::DEFAULT_SKETCH_BITS)]
        sketch_bits: u32,
        /// Tile configs `threads,lanes,tokens,newton,min_blocks,ctas_per_sm,finish_threads,capacity`,
        /// then any of the flags `tc` (tensor cores), `h` (shared head bounds), `seed` (seeded
        /// head bounds, with `h`), e.g. `256,1,4,2,2,2,256,2048,h,seed`.
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

fn main() -> ExitCode {
    // `gpu-check` JIT-compiles the kernel suite in copies of this binary (entkv_autotune::jit_pool).
    let serves = entkv_autotune::jit_pool::serve_if_worker();
    // Under the name `autotune` (a link to this binary) it is `autotune`: one binary carries
    // both commands to a GPU machine.
    if entkv_autotune::tune::command::invoked_as_autotune() {
        return entkv_autotune::tune::command::main(serves);
    }
    match run(Cli::parse(), serves) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, no backtrace (as `autotune` reports them), even with RUST_BACKTRACE set.
            eprintln!("error: {}", entkv_autotune::error_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli, serves: ServesWorkers) -> Result<()> {
    match cli.cmd {
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
        Cmd::Verify(args) => verify_cmd::run(args)?,
        Cmd::Quality(args) => {
            entkv_autotune::quality::run(&args)?;
        }
        Cmd::Bench(args) => {
            let commit = std::env::var("ENTKV_COMMIT").unwrap_or_else(|_| "unknown".into());
            let report = bench_cmd::run(&args, &commit)?;
            if let Some(p) = &args.out {
                bench_cmd::write_json(&report, p)?;
            }
            print!("{}", report.table());
            if !report.passed() {
                anyhow::bail!("a timed step does not match its float64 reference (see the check column)");
            }
        }
        Cmd::Doctor { json } => doctor::run(json)?,
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
            let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
            let report = gpucheck::run(&opts, &commit, JitPool::new(serves, 0, workers))?;
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
                    entkv_abi::DenseTile::default_certified(&entkv_abi::PagedSpec::new(
                        spec,
                        16,
                        false,
                        sketch_bits,
                    )?)
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
                vec![entkv_abi::DenseTile::default_contiguous(&spec)]
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
