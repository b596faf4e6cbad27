//! `autotune --alpha 1.5 --head-dim 32`: tile-config search on the GPU (issue #5). Arguments
//! are checked first, then the GPU, before anything is compiled; the search, the record log and
//! cache, and the bundle are `entkv_autotune::tune`'s.

use anyhow::{bail, Result};
use clap::Parser;
use entkv_autotune::bundle_cmd::created_now;
use entkv_autotune::jit_pool::{JitPool, ServesWorkers};
use entkv_autotune::tune::args::{run, Cli};
use entkv_autotune::tune::gpu::GpuBackend;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Candidates are JIT-compiled by copies of this binary (entkv_autotune::jit_pool).
    let serves = entkv_autotune::jit_pool::serve_if_worker();
    match tune(Cli::parse(), serves) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The message and its causes, without a backtrace: these are user-facing errors.
            eprintln!("error: {}", entkv_autotune::error_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn tune(cli: Cli, serves: ServesWorkers) -> Result<()> {
    // Refuse bad arguments on any machine, GPU or not.
    cli.search_opts()?;
    if let Some(reason) = entkv_runtime::gpu_unavailable_reason() {
        bail!(
            "autotune needs a CUDA GPU: it compiles, verifies and times every candidate on the device it tunes for, \
             and none is usable here ({reason}). Run it on the GPU the bundle is for; \
             `entkv bundle create` writes an untuned bundle without a GPU."
        );
    }
    let mut backend = GpuBackend::open(0)?;
    let workers = cli
        .jit_workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    backend.set_jit_pool(JitPool::new(serves, 0, workers));
    let report = run(&cli, &mut backend, created_now()?, &mut |line| {
        eprintln!("{line}")
    })?;
    eprintln!("time per phase: {}", backend.phase_report());
    let jit = backend.jit_report();
    if jit.modules > 0 {
        eprintln!(
            "JIT workers: {} module(s) compiled in up to {} process(es){}",
            jit.modules,
            jit.workers,
            if jit.failed.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} failure(s), those modules were compiled here: {}",
                    jit.failed.len(),
                    jit.failed.join("; ")
                )
            }
        );
    }
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report.summary)?);
    } else {
        print!("{}", report.text);
    }
    Ok(())
}
