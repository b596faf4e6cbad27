// Registers and spills local ptxas reports for select_topk over the tuner's tile space (CPU only).
// Reproduce: copy to tests/tests/ and `cargo test --release -p entkv-tests --test sel_regs -- --nocapture`.
use entkv_abi::{DType, DecodeSpec, PagedSpec, SelectTopkTile};
use entkv_codegen::{compile_module, ptxas, Target};
#[test]
fn sel_regs() {
    let spec = PagedSpec::with_defaults(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16).unwrap();
    for threads in [256, 512, 1024] {
        for items in [2, 4, 8, 16] {
            let t = SelectTopkTile { threads, items_per_thread: items };
            let k = entkv_kernels::topk::select::select_kernel(&spec, &t).unwrap();
            let c = compile_module("m", &[&k], &Target::default()).unwrap();
            let r = ptxas::assemble(&c.ptx, 90).unwrap();
            for f in &r.functions {
                println!("{}: {} regs, spills {} B, smem {}", t.tag(), f.registers, f.spills(), f.shared_bytes);
            }
        }
    }
}
