// K bytes the seeded step's repair pass reads on decoy keys (KeyData::SeedDecoy) at `wide`'s spec
// and default certified tile, seeded: starting from the first pass's τ(K) (as shipped) against
// starting from −∞ (repair_bound overwritten before the repair). Interpreter, CPU only.
// Reproduce: copy to kernels-gen/tests/ and `cargo test --release -p entkv-kernels --test
// interp_repair -- --nocapture`.
use entkv_abi::{DType, DecodeSpec, DenseTile, PagedSpec};
use entkv_dsl::interp::HostBuffer;
use entkv_kernels::certified_checks::CertifiedCheck;
use entkv_kernels::paged_data::{KeyData, PagedCase};
use entkv_kernels::suite::KernelCheck;

#[test]
fn interp_repair() {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
    let tile = DenseTile { share_bound: true, seed: true, ..DenseTile::default_certified(&spec) };
    for from_minus_inf in [false, true] {
        let case = PagedCase { spec, kv_heads: 1, seq_lens: vec![65536], seed: 3, data: KeyData::SeedDecoy, spare_pages: 2 };
        let check = CertifiedCheck { case, tile, sm_count: 4, pruned: false };
        let mut p = check.program().unwrap();
        let last = p.calls.iter().rposition(|c| c.kernel.name.starts_with("decode_certified")).unwrap();
        p.calls.truncate(last + 1);
        let at = p.calls.iter().position(|c| c.kernel.name.starts_with("certified_verify")).unwrap();
        let rest = p.calls.split_off(at + 1);
        p.run_interp().unwrap();
        if from_minus_inf {
            let n = p.get("repair_bound").len();
            let key = (f32::NEG_INFINITY.to_bits() as i32) ^ 0x7FFF_FFFF;
            p.buffer("repair_bound", HostBuffer::I32(vec![key; n]));
        }
        p.calls = rest;
        let stats = p.run_interp().unwrap();
        let kb: u64 = stats[0].buffers.iter().filter(|b| b.name == "k_pool").map(|b| b.bytes_loaded).sum();
        println!(
            "from −∞: {from_minus_inf}: flags {:?}, repair pass K {:.1}% of K",
            p.get("repair").to_f64_vec(),
            100.0 * kb as f64 / (65536.0 * 256.0)
        );
    }
}
