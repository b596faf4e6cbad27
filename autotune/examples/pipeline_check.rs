//! Check that the default optimisation pipeline (`Pipeline::LeanO3`) makes the same PTX as
//! LLVM's `default<O3>`: compile every kernel module of several specializations and every tile
//! of the autotuner's search space both ways and compare the PTX byte for byte.
//!
//! `cargo run --release -p entkv-autotune --example pipeline_check [--quick]`
//!
//! Run it after changing the lean pipeline or the lowering, and when moving LLVM (see
//! `entkv_codegen::nvptx_compat::lean_o3_pipeline`). Exits non-zero when any module differs.

use entkv_abi::{DType, DecodeSpec, KernelFamily, PagedSpec};
use entkv_autotune::tune::space::{family_space, DeviceLimits};
use entkv_codegen::{compile_module_with, CompileOptions, Pipeline, Target};
use std::time::{Duration, Instant};

fn spec(d: u32, group: u32, kv: DType, page: u32, alibi: bool, sketch_bits: u32) -> PagedSpec {
    PagedSpec::new(
        DecodeSpec::new(1.5, d, group, kv).unwrap(),
        page,
        alibi,
        sketch_bits,
    )
    .unwrap()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let mut specs = vec![
        spec(32, 1, DType::F16, 16, false, 8),
        spec(64, 1, DType::F16, 16, false, 8),
        spec(32, 4, DType::F16, 16, false, 8),
    ];
    if !quick {
        specs.extend([
            spec(128, 1, DType::F16, 16, false, 8),
            spec(32, 2, DType::BF16, 32, true, 4),
            spec(64, 8, DType::F16, 64, false, 8),
            spec(128, 3, DType::BF16, 16, true, 8),
        ]);
    }
    // (name, kernels) of every module to check.
    let mut modules: Vec<(String, Vec<entkv_dsl::Kernel>)> = Vec::new();
    for s in &specs {
        for m in entkv_kernels::modules_for(s).unwrap() {
            modules.push((format!("{}__{}", m.name, s.sketch_tag()), m.kernels));
        }
    }
    if !quick {
        let s = &specs[0];
        for family in KernelFamily::ALL {
            for tile in family_space(family, s, &DeviceLimits::default()).unwrap().valid {
                let kernels = entkv_kernels::family_kernels(family, s, &tile).unwrap();
                modules.push((
                    format!("{}__{}__{}", family.name(), s.sketch_tag(), tile.tag()),
                    kernels,
                ));
            }
        }
    }

    let target = Target::default();
    let compile = |name: &str, kernels: &[entkv_dsl::Kernel], pipeline| {
        let refs: Vec<&entkv_dsl::Kernel> = kernels.iter().collect();
        let options = CompileOptions {
            pipeline,
            ..Default::default()
        };
        let t = Instant::now();
        let ptx = compile_module_with(name, &refs, &target, &options).unwrap().ptx;
        (ptx, t.elapsed())
    };
    let (mut lean_time, mut o3_time) = (Duration::ZERO, Duration::ZERO);
    let mut differ = Vec::new();
    for (name, kernels) in &modules {
        let (lean, t_lean) = compile(name, kernels, Pipeline::LeanO3);
        let (o3, t_o3) = compile(name, kernels, Pipeline::O3);
        lean_time += t_lean;
        o3_time += t_o3;
        if lean != o3 {
            println!("DIFFERENT PTX: {name}");
            differ.push(name.clone());
        }
    }
    println!(
        "{} modules: {} with different PTX; compile time LeanO3 {:.1} s, O3 {:.1} s",
        modules.len(),
        differ.len(),
        lean_time.as_secs_f64(),
        o3_time.as_secs_f64()
    );
    if !differ.is_empty() {
        std::process::exit(1);
    }
}
