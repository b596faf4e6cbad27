//! The `autotune` command (`autotune --alpha 1.5 --head-dim 32`): arguments are checked first,
//! then the GPU, before anything is compiled; the search, the record log and cache, and the
//! bundle are this module's parents'. Both binaries run it: `autotune`, and `entkv` when it is
//! invoked under the name `autotune` (a link), so one binary can be carried to a GPU machine.

use super::args::{run, Cli};
use super::gpu::GpuBackend;
use crate::bundle_cmd::created_now;
use crate::jit_pool::{JitPool, ServesWorkers};
use anyhow::{bail, Result};
use clap::Parser;
use std::ffi::OsStr;
use std::path::Path;
use std::process::ExitCode;

/// Whether this process was started under the name `autotune` (its `argv[0]`'s file name).
pub fn invoked_as_autotune() -> bool {
    std::env::args_os()
        .next()
        .is_some_and(|arg0| Path::new(&arg0).file_name() == Some(OsStr::new("autotune")))
}

/// Parse the command line as `autotune`'s and run it; errors as one line on stderr.
pub fn main(serves: ServesWorkers) -> ExitCode {
    match tune(Cli::parse(), serves) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The message and its causes, without a backtrace: these are user-facing errors.
            eprintln!("error: {}", crate::error_line(&e));
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
