//! Every kernel the check suite launches (`entkv_kernels::suite::all_checks`: its test tiles,
//! checks-only passes and odd specs, beyond the shipped modules of `emit_ptxas`) assembles with
//! `ptxas` without spills. `entkv gpu-check` fails on any kernel the driver's JIT spilled, and
//! one such kernel first showed up there (results/2026-12-05-long-select/3-checks-bench).
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_kernels::KernelModule;
use entkv_tests::{assemble_module, assert_no_spills, on_two_workers, ptxas_available};

/// The suite's kernels dealt out by check to `workers` threads (kernels hold `Rc`s, so each
/// thread builds its own checks' programs); a kernel two workers' checks share is assembled by
/// both.
fn suite_failures(worker: usize, workers: usize, check_ptxas: bool) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut failures = Vec::new();
    for check in entkv_kernels::suite::all_checks()
        .iter()
        .skip(worker)
        .step_by(workers)
    {
        let program = check
            .program()
            .unwrap_or_else(|e| panic!("{}: {e}", check.name()));
        for call in &program.calls {
            if seen.insert(call.kernel.name.clone()) {
                let module = KernelModule {
                    name: "suite",
                    kernels: vec![call.kernel.as_ref().clone()],
                };
                failures.extend(assemble_module(&module, check_ptxas));
            }
        }
    }
    failures
}

#[test]
fn every_suite_kernel_assembles_without_spills() {
    let check_ptxas = ptxas_available();
    assert_no_spills(on_two_workers(|w, workers| {
        suite_failures(w, workers, check_ptxas)
    }));
}
