use entkv_abi::*;
use entkv_codegen::*;
fn main() {
    for alpha in [1.5, 2.0] {
    for (ft, cap, newton) in [(256u32, 4096u32, 3u32), (128, 4096, 3), (256, 1024, 3), (512, 2048, 3)] {
        let spec = DecodeSpec::new(alpha, 32, 1, DType::F16).unwrap();
        let mut tile = DenseTile::default_for(&spec);
        tile.finish_threads = ft; tile.finish_capacity = cap; tile.newton_steps = newton;
        let k = entkv_kernels::decode_dense::finish_kernel(&spec, &tile).unwrap();
        let m = compile_module("x", &[&k], &Target::default()).unwrap();
        let r = ptxas::assemble(&m.ptx, 90).unwrap();
        for f in r.functions { println!("α={alpha} ft={ft} cap={cap}: regs {} stack {} spill {}/{}", f.registers, f.stack_frame_bytes, f.spill_store_bytes, f.spill_load_bytes); }
    }}
}
