// Registers and spills local ptxas reports for the certified family at `paper`, `gqa` and `wide`
// 4-bit specs, default certified tile with shared bounds (`_h`) and seeded (`_h_seed`). CPU only.
// Reproduce: copy to tests/tests/ and `cargo test --release -p entkv-tests --test ptxas_regs --
// --nocapture` (needs ptxas; scripts/setup.sh installs it).
use entkv_abi::{DType, DecodeSpec, DenseTile, KernelFamily, PagedSpec, TileConfig};
use entkv_codegen::{compile_module, ptxas, Target};
use entkv_kernels::family_kernels;

#[test]
fn ptxas_regs() {
    for (d, g, p) in [(128, 4, 32), (32, 2, 16), (32, 1, 16)] {
        let dt = if g == 1 { DType::F16 } else { DType::BF16 };
        let spec = PagedSpec::new(DecodeSpec::new(1.5, d, g, dt).unwrap(), p, false, 4).unwrap();
        let def = DenseTile::default_certified(&spec);
        for seed in [false, true] {
            let t = DenseTile { share_bound: true, seed, ..def };
            let ks = family_kernels(KernelFamily::DecodeCertified, &spec, &TileConfig::Dense(t)).unwrap();
            let refs: Vec<&entkv_dsl::Kernel> = ks.iter().collect();
            let c = compile_module("m", &refs, &Target::default()).unwrap();
            let r = ptxas::assemble(&c.ptx, 90).unwrap();
            for f in &r.functions {
                let n = &f.name;
                if !(n.contains("_sel__") || n.contains("_rest__") || n.starts_with("certified_init")) {
                    println!("{n}: {} regs, spills {} B, smem {} B", f.registers, f.spills(), f.shared_bytes);
                }
            }
        }
    }
}
