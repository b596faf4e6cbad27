//! Every kernel the check suite launches (`entkv_kernels::suite::all_checks`: its test tiles,
//! checks-only passes and odd specs, beyond the shipped modules of `emit_ptxas`) assembles with
//! `ptxas` without spills. `entkv gpu-check` fails on any kernel the driver's JIT spilled, and
//! one such kernel first showed up there (results/2026-12-05-long-select/3-checks-bench).
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_kernels::suite::share_kernels;
use entkv_kernels::KernelModule;
use entkv_tests::{assemble_module, assert_no_spills, on_two_workers, ptxas_available};

/// The suite's kernels of share `worker` ([`share_kernels`]), assembled; a kernel two
/// workers' checks share is assembled by both.
fn suite_failures(worker: usize, workers: usize, check_ptxas: bool) -> Vec<String> {
    let (kernels, errors) = share_kernels(worker, workers);
    if let Some((name, e)) = errors.first() {
        panic!("{name}: {e}");
    }
    kernels
        .iter()
        .flat_map(|k| {
            let module = KernelModule {
                name: "suite",
                kernels: vec![k.as_ref().clone()],
            };
            assemble_module(&module, check_ptxas)
        })
        .collect()
}

#[test]
fn every_suite_kernel_assembles_without_spills() {
    let check_ptxas = ptxas_available();
    assert_no_spills(on_two_workers(|w, workers| {
        suite_failures(w, workers, check_ptxas)
    }));
}
