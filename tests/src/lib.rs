//! # entkv-tests
//!
//! Boundary: end-to-end tests that cross crates — every kernel module of every supported
//! specialization compiles through LLVM and assembles with `ptxas` for sm_90 without spills;
//! the runtime's dependency tree holds no LLVM or DSL. (Per-crate behaviour is tested in each
//! crate; the GPU checks are `entkv gpu-check`.) This library holds the helpers those tests
//! share.

use entkv_codegen::{compile_module, ptxas, Target};
use entkv_kernels::KernelModule;

/// Whether `ptxas` can be run. Without it the caller's test prints why and passes, unless
/// `ENTKV_REQUIRE_PTXAS=1` (set by CI), which turns a missing ptxas into a failure.
pub fn ptxas_available() -> bool {
    if ptxas::find_ptxas().is_some() {
        return true;
    }
    if std::env::var("ENTKV_REQUIRE_PTXAS").as_deref() == Ok("1") {
        panic!("ENTKV_REQUIRE_PTXAS=1 but {}", ptxas::PtxasError::NotFound);
    }
    println!("skipping: {}", ptxas::PtxasError::NotFound);
    false
}

/// Compile one module for sm_90, check its PTX (entries, launch bounds, target, no unresolved
/// externals) and, when `check_ptxas`, assemble it; returns the kernels with spills, stack or
/// local memory (each printed with its registers).
pub fn assemble_module(module: &KernelModule, check_ptxas: bool) -> Vec<String> {
    let target = Target::default();
    let kernels: Vec<&entkv_dsl::Kernel> = module.kernels.iter().collect();
    let compiled = compile_module(module.name, &kernels, &target).unwrap();
    for k in &module.kernels {
        assert!(compiled.ptx.contains(&format!(".entry {}", k.name)), "{}", k.name);
        let bound = format!(".maxntid {}, 1, 1", k.block_threads);
        assert!(compiled.ptx.contains(&bound), "{}: launch bound", k.name);
    }
    assert!(compiled.ptx.contains(".target sm_90"));
    assert!(
        !compiled.ptx.contains(".extern"),
        "{}: unresolved externals",
        module.name
    );
    if !check_ptxas {
        return Vec::new();
    }
    let report = ptxas::assemble(&compiled.ptx, target.sm).unwrap();
    assert_eq!(report.functions.len(), module.kernels.len());
    let mut bad = Vec::new();
    for f in &report.functions {
        if f.spills() + f.stack_frame_bytes + f.local_bytes > 0 {
            println!(
                "{}: {} regs, spills {}/{} B, stack {} B, local {} B",
                f.name,
                f.registers,
                f.spill_store_bytes,
                f.spill_load_bytes,
                f.stack_frame_bytes,
                f.local_bytes
            );
            bad.push(f.name.clone());
        }
    }
    bad
}

/// Fail the calling test when any kernel spilled or used local memory (`failures` as returned
/// by [`assemble_module`]; each name once in the message).
pub fn assert_no_spills(mut failures: Vec<String>) {
    failures.sort();
    failures.dedup();
    assert!(
        failures.is_empty(),
        "kernels with spills or local memory: {failures:?}"
    );
}

/// `work(worker, workers)` on two threads (CI has two cores), the results of both in worker
/// order. Kernels hold `Rc`s, so each worker builds its own share of them.
pub fn on_two_workers<T: Send>(work: impl Fn(usize, usize) -> Vec<T> + Sync) -> Vec<T> {
    const WORKERS: usize = 2;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let work = &work;
                s.spawn(move || work(w, WORKERS))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker"))
            .collect()
    })
}
