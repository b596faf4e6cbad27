//! The page metadata module (`page_meta_build`, `page_meta_update`) compiles to PTX for sm_90
//! that `ptxas` assembles with no spills and no stack, for every (head dim, page size, K dtype,
//! sketch width) with the default tile, and with the register-heaviest tile (the most chunks of
//! keys per thread) for every (head dim, page size).
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_abi::{
    DType, DecodeSpec, MetaTile, PagedSpec, MAX_META_CHUNKS_PER_THREAD, SUPPORTED_HEAD_DIMS,
    SUPPORTED_PAGE_SIZES, SUPPORTED_SKETCH_BITS,
};
use entkv_codegen::{compile_module, ptxas, Target};
use entkv_kernels::page_meta::{module, modules};
use entkv_kernels::KernelModule;

fn ptxas_available() -> bool {
    if ptxas::find_ptxas().is_some() {
        return true;
    }
    if std::env::var("ENTKV_REQUIRE_PTXAS").as_deref() == Ok("1") {
        panic!("ptxas not found and ENTKV_REQUIRE_PTXAS=1 (pip install nvidia-cuda-nvcc-cu12)");
    }
    println!("skipping: ptxas not found (set ENTKV_PTXAS or pip install nvidia-cuda-nvcc-cu12)");
    false
}

/// Compile and assemble one module; returns the kernels with spills or stack.
fn assemble(module: &KernelModule, target: &Target, check_ptxas: bool) -> Vec<String> {
    let kernels: Vec<&entkv_dsl::Kernel> = module.kernels.iter().collect();
    let compiled = compile_module(module.name, &kernels, target).unwrap();
    for k in &module.kernels {
        assert!(compiled.ptx.contains(&format!(".entry {}", k.name)), "{}", k.name);
        assert!(
            compiled
                .ptx
                .contains(&format!(".maxntid {}, 1, 1", k.block_threads)),
            "{}: launch bound",
            k.name
        );
    }
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
        println!(
            "{}: {} regs, {} B shared, spills {}/{} B, stack {} B",
            f.name, f.registers, f.shared_bytes, f.spill_store_bytes, f.spill_load_bytes, f.stack_frame_bytes
        );
        if f.spills() + f.stack_frame_bytes + f.local_bytes > 0 {
            bad.push(f.name.clone());
        }
    }
    bad
}

#[test]
fn page_meta_assembles_without_spills() {
    let check_ptxas = ptxas_available();
    let target = Target::default();
    let mut failures = Vec::new();
    for d in SUPPORTED_HEAD_DIMS {
        for p in SUPPORTED_PAGE_SIZES {
            for dtype in [DType::F16, DType::BF16] {
                for bits in SUPPORTED_SKETCH_BITS {
                    let spec =
                        PagedSpec::new(DecodeSpec::new(1.5, d, 1, dtype).unwrap(), p, false, bits).unwrap();
                    for m in modules(&spec).unwrap() {
                        failures.extend(assemble(&m, &target, check_ptxas));
                    }
                    // The fewest threads a tile may have, the most key registers per thread
                    // (bf16 at 8 bits has the most quantizer state; the others are alike).
                    let chunks = MetaTile::chunks(&spec);
                    let heavy = MetaTile {
                        threads: (chunks / MAX_META_CHUNKS_PER_THREAD).max(32),
                    };
                    let heaviest = dtype == DType::BF16 && bits == 8;
                    if heaviest && heavy != MetaTile::default_for(&spec) && heavy.check(&spec).is_ok() {
                        failures.extend(assemble(&module(&spec, &heavy).unwrap(), &target, check_ptxas));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "kernels with spills or local memory: {failures:?}"
    );
}
