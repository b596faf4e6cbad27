//! The top-k path's modules (`page_score` box scorer, `select_topk`, `decode_softmax_topk`)
//! compile to PTX for sm_90 that `ptxas` assembles with no spills and no stack, for every value
//! of every specialization axis with the default tiles, plus the register-heaviest combinations
//! (largest head dim with the largest GQA groups and ALiBi).
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_abi::{DType, DecodeSpec, PagedSpec, SUPPORTED_GROUPS, SUPPORTED_HEAD_DIMS, SUPPORTED_PAGE_SIZES};
use entkv_codegen::{compile_module, ptxas, Target};
use entkv_kernels::topk::modules;

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

fn spec(alpha: f64, d: u32, g: u32, p: u32, dtype: DType, alibi: bool) -> PagedSpec {
    PagedSpec::new(DecodeSpec::new(alpha, d, g, dtype).unwrap(), p, alibi, 4).unwrap()
}

fn specs() -> Vec<PagedSpec> {
    use DType::{BF16, F16};
    // Each axis value at least once around the paper's spec (α = 1.5, d = 32, P = 16, f16).
    let mut v = Vec::new();
    for alpha in [1.5, 2.0, 4.0 / 3.0, 1.25] {
        v.push(spec(alpha, 32, 1, 16, F16, false));
    }
    for d in SUPPORTED_HEAD_DIMS {
        v.push(spec(1.5, d, 1, 16, BF16, true));
    }
    for p in SUPPORTED_PAGE_SIZES {
        v.push(spec(1.5, 32, 2, p, F16, true));
    }
    for g in SUPPORTED_GROUPS {
        v.push(spec(1.5, 32, g, 16, F16, false));
        // Registers grow with the group (q and the running outputs of every head): every group
        // at the larger head dims too.
        v.push(spec(1.5, 64, g, 32, F16, true));
        v.push(spec(1.5, 128, g, 64, BF16, true));
    }
    v.push(spec(1.5, 128, 3, 16, F16, false));
    v
}

#[test]
fn topk_modules_assemble_without_spills() {
    let check_ptxas = ptxas_available();
    let target = Target::default();
    let mut failures = Vec::new();
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
            assert!(
                !compiled.ptx.contains(".extern"),
                "{}: unresolved externals",
                module.name
            );
            if !check_ptxas {
                continue;
            }
            let report = ptxas::assemble(&compiled.ptx, target.sm).unwrap();
            for f in &report.functions {
                println!(
                    "{}: {} regs, {} B shared, spills {}/{} B, stack {} B",
                    f.name,
                    f.registers,
                    f.shared_bytes,
                    f.spill_store_bytes,
                    f.spill_load_bytes,
                    f.stack_frame_bytes
                );
                if f.spills() + f.stack_frame_bytes + f.local_bytes > 0 {
                    failures.push(f.name.clone());
                }
            }
            assert_eq!(report.functions.len(), module.kernels.len());
        }
    }
    assert!(
        failures.is_empty(),
        "kernels with spills or local memory: {failures:#?}"
    );
}
