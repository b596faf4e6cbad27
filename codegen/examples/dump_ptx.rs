//! Compile two small kernels and print their PTX (stdout) and compile times (stderr).
//!
//! `cargo run -p entkv-codegen --example dump_ptx [ir|ir-unopt]`
use entkv_codegen::{compile_module, compile_module_with, llvm_version, ptxas, CompileOptions, Target};
use entkv_dsl::*;
use std::time::Instant;

fn scale() -> Kernel {
    let mut k = KernelBuilder::new("scale", 128);
    let x = k.buffer("x", Scalar::F16, Access::Read);
    let y = k.buffer("y", Scalar::F32, Access::Write);
    let s = k.scalar_param("s", Scalar::F32);
    let i = k.let_("i", k.global_thread_id());
    let v = k.load_vec("v", x, i * 8u32, 8);
    for half in 0..2u32 {
        let vals = v[4 * half as usize..4 * half as usize + 4]
            .iter()
            .map(|v| v.f32() * s.clone())
            .collect();
        k.store_vec(y, i * 8u32 + 4 * half, vals);
    }
    k.finish().unwrap()
}

fn reduce() -> Kernel {
    let mut k = KernelBuilder::new("block_sum", 256);
    let a = k.buffer("a", Scalar::F32, Access::Read);
    let o = k.buffer("o", Scalar::F32, Access::ReadWrite);
    let scratch = k.shared("scratch", Scalar::F32, 8);
    let x = k.let_("x", a.at(k.global_thread_id()));
    let s = k.block_allreduce(Reduce::Sum, x, scratch);
    k.if_(k.thread_idx().eq_(0u32), |k| {
        k.atomic_no_ret(AtomicOp::Add, o, 0u32, s)
    });
    k.finish().unwrap()
}

fn main() {
    let what = std::env::args().nth(1).unwrap_or_default();
    let kernels = [scale(), reduce()];
    let refs: Vec<&Kernel> = kernels.iter().collect();
    let t = Target::default();
    // The first call also initialises LLVM's NVPTX target.
    let t0 = Instant::now();
    let keep = CompileOptions {
        keep_llvm_ir: true,
        ..Default::default()
    };
    let m = compile_module_with("demo", &refs, &t, &keep).expect("codegen");
    let first = t0.elapsed();
    let n = 20;
    let t1 = Instant::now();
    for _ in 0..n {
        for k in &refs {
            compile_module("one", &[k], &t).expect("codegen");
        }
    }
    let per_kernel = t1.elapsed() / (n * refs.len() as u32);
    eprintln!(
        "LLVM {}: first module (2 kernels) {:?}, then {:?} per one-kernel module",
        llvm_version(),
        first,
        per_kernel
    );
    match what.as_str() {
        "ir" => println!("{}", m.llvm_ir.as_deref().unwrap_or_default()),
        "ir-unopt" => println!("{}", m.llvm_ir_unoptimized.as_deref().unwrap_or_default()),
        _ => println!("{}", m.ptx),
    }
    if let Ok(r) = ptxas::assemble(&m.ptx, t.sm) {
        for f in r.functions {
            eprintln!(
                "ptxas: {}: {} registers, {} B spill, {} B smem",
                f.name,
                f.registers,
                f.spills(),
                f.shared_bytes
            );
        }
    }
}
