//! The default optimisation pipeline (`Pipeline::LeanO3`, LLVM's `default<O3>` less the passes
//! that do nothing for entkv's kernels) makes byte-identical PTX to `default<O3>`.
//!
//! Two specializations here, including the one where a late SimplifyCFG matters (d = 64, GQA 8,
//! P = 64); the full matrix (7 specializations and every tile of the autotuner's search space)
//! is `cargo run --release -p entkv-autotune --example pipeline_check`.

use entkv_abi::{DType, DecodeSpec, PagedSpec};
use entkv_codegen::{compile_module_with, CompileOptions, Pipeline, Target};
use entkv_kernels::modules_for;

fn ptx(module: &entkv_kernels::KernelModule, pipeline: Pipeline) -> String {
    let kernels: Vec<&entkv_dsl::Kernel> = module.kernels.iter().collect();
    let options = CompileOptions {
        pipeline,
        ..Default::default()
    };
    compile_module_with(module.name, &kernels, &Target::default(), &options)
        .unwrap()
        .ptx
}

#[test]
fn lean_pipeline_makes_the_ptx_of_o3() {
    let specs = [
        PagedSpec::with_defaults(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16).unwrap(),
        PagedSpec::new(DecodeSpec::new(1.5, 64, 8, DType::F16).unwrap(), 64, false, 8).unwrap(),
    ];
    let mut differ = Vec::new();
    for spec in &specs {
        for module in modules_for(spec).unwrap() {
            if ptx(&module, Pipeline::LeanO3) != ptx(&module, Pipeline::O3) {
                differ.push(format!("{} at {}", module.name, spec.sketch_tag()));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "LeanO3 and O3 make different PTX for {differ:?}"
    );
}
