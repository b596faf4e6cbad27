//! Codegen time per kernel variant (issue #5: target ≤ 50 ms median): building a family's
//! kernels in the DSL for one tile and compiling them through LLVM to PTX, as the autotuner
//! does for every candidate. `cargo bench -p entkv-autotune --bench codegen`.

use criterion::{criterion_group, criterion_main, Criterion};
use entkv_abi::{DType, DecodeSpec, KernelFamily, PagedSpec};
use entkv_codegen::{compile_module, Target};

fn codegen(c: &mut Criterion) {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 8).unwrap();
    let target = Target::default();
    let mut group = c.benchmark_group("codegen");
    group.sample_size(20);
    for family in KernelFamily::ALL {
        let tile = family.default_tile(&spec);
        group.bench_function(family.name(), |b| {
            b.iter(|| {
                let kernels = entkv_kernels::family_kernels(family, &spec, &tile).unwrap();
                let refs: Vec<&entkv_dsl::Kernel> = kernels.iter().collect();
                compile_module(family.name(), &refs, &target).unwrap().ptx.len()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, codegen);
criterion_main!(benches);
