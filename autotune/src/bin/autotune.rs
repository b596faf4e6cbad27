//! `autotune --alpha 1.5 --head-dim 32`: tile-config search on the GPU (issue #5). Arguments
//! are checked first, then the GPU, before anything is compiled; the search, the record log and
//! cache, and the bundle are `entkv_autotune::tune`'s.

use anyhow::{bail, Result};
use clap::Parser;
use entkv_autotune::bundle_cmd::created_now;
use entkv_autotune::tune::args::{run, Cli};
use entkv_autotune::tune::gpu::GpuBackend;
use std::process::ExitCode;

fn main() -> ExitCode {
    match tune(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The message and its causes, without a backtrace: these are user-facing errors.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn tune(cli: Cli) -> Result<()> {
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
    let report = run(&cli, &mut backend, created_now()?, &mut |line| {
        eprintln!("{line}")
    })?;
    eprintln!("time per phase: {}", backend.phase_report());
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report.summary)?);
    } else {
        print!("{}", report.text);
    }
    Ok(())
}
