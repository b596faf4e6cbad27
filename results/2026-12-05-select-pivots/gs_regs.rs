// Registers and spills local ptxas reports for select_gaussian over the tuner's tiles (CPU only).
// Reproduce: copy to tests/tests/ and `cargo test --release -p entkv-tests --test gs_regs -- --nocapture`.
use entkv_abi::gaussian::GaussTile;
use entkv_abi::{DType, DecodeSpec, PagedSpec};
use entkv_codegen::{compile_module, ptxas, Target};
#[test]
fn gs_regs() {
    for (d, g) in [(32, 1), (32, 2), (128, 4), (64, 8)] {
        let spec = PagedSpec::with_defaults(DecodeSpec::new(1.5, d, g, DType::BF16).unwrap(), 16).unwrap();
        for threads in [128, 256, 512] {
            for per in [2, 4, 8, 16] {
                let t = GaussTile { solve_threads: 32, select_threads: threads, select_pages_per_thread: per };
                let k = entkv_kernels::gaussian::select_kernel(&spec, &t).unwrap();
                let c = compile_module("m", &[&k], &Target::default()).unwrap();
                let r = ptxas::assemble(&c.ptx, 90).unwrap();
                for f in &r.functions {
                    println!("g{g} t{threads} p{per} pairs {}: {} regs, spills {} B", per * g, f.registers, f.spills());
                }
            }
        }
    }
}
