//! The Gaussian selector's modules (`page_score` moments, `select_gaussian`) compile to PTX
//! for sm_90 that `ptxas` assembles with no spills and no local memory, for every value of
//! every specialization axis (α, head dim, page size, dtype, GQA group, ALiBi).
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_abi::{DType, DecodeSpec, PagedSpec, SUPPORTED_GROUPS, SUPPORTED_HEAD_DIMS, SUPPORTED_PAGE_SIZES};
use entkv_codegen::{compile_module, ptxas, Target};
use entkv_kernels::gaussian::modules;

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

fn spec(alpha: f64, d: u32, g: u32, dtype: DType, p: u32, alibi: bool) -> PagedSpec {
    PagedSpec::new(DecodeSpec::new(alpha, d, g, dtype).unwrap(), p, alibi, 4).unwrap()
}

/// Each axis value at least once, around the paper's spec (α = 1.5, d = 32, P = 16, f16),
/// with and without ALiBi where it changes the code (the mixture solve, the slopes).
fn specs() -> Vec<PagedSpec> {
    let mut v = Vec::new();
    for alibi in [false, true] {
        for alpha in [1.5, 2.0, 4.0 / 3.0, 1.25] {
            v.push(spec(alpha, 32, 1, DType::F16, 16, alibi));
        }
    }
    for d in SUPPORTED_HEAD_DIMS {
        v.push(spec(1.5, d, 1, DType::BF16, 16, false));
        v.push(spec(1.25, d, 8, DType::BF16, 16, true));
    }
    for p in SUPPORTED_PAGE_SIZES {
        v.push(spec(1.5, 64, 2, DType::F16, p, true));
    }
    for g in SUPPORTED_GROUPS {
        v.push(spec(1.5, 32, g, DType::F16, 16, false));
        v.push(spec(4.0 / 3.0, 128, g, DType::BF16, 32, true));
    }
    v
}

#[test]
fn gaussian_modules_assemble_without_spills() {
    let check_ptxas = ptxas_available();
    let target = Target::default();
    let mut failures = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for spec in specs() {
        for module in modules(&spec).unwrap() {
            let kernels: Vec<&entkv_dsl::Kernel> = module.kernels.iter().collect();
            let compiled = compile_module(module.name, &kernels, &target).unwrap();
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
            assert!(compiled.ptx.contains(".target sm_90"));
            assert!(
                !compiled.ptx.contains(".extern"),
                "{}: unresolved externals",
                module.name
            );
            if !check_ptxas {
                continue;
            }
            let report = ptxas::assemble(&compiled.ptx, target.sm).unwrap();
            assert_eq!(report.functions.len(), module.kernels.len());
            for f in &report.functions {
                if seen.insert(f.name.clone()) {
                    println!(
                        "{}: {} regs, {} B shared, spills {}/{} B, stack {} B",
                        f.name,
                        f.registers,
                        f.shared_bytes,
                        f.spill_store_bytes,
                        f.spill_load_bytes,
                        f.stack_frame_bytes
                    );
                }
                if f.spill_store_bytes + f.spill_load_bytes + f.stack_frame_bytes > 0 {
                    failures.push(f.name.clone());
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "kernels with spills or local memory: {failures:?}"
    );
}
