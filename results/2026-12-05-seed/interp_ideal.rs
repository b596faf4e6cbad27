// K bytes the seeded pass reads at `wide`'s spec and default certified tile on iid keys: with the
// shipped estimate, and with each head's shared bound started at its float64 τ instead (the
// "ideal" estimate: the least any estimator could rescore). Interpreter, CPU only. Reproduce:
// copy to kernels-gen/tests/ and `N=1048576 SMS=4 cargo test --release -p entkv-kernels --test
// interp_ideal -- --nocapture`.
use entkv_abi::{DType, DecodeSpec, DenseTile, PagedSpec};
use entkv_dsl::interp::HostBuffer;
use entkv_kernels::certified_checks::CertifiedCheck;
use entkv_kernels::paged_data::{paged_reference, KeyData, PagedCase};
use entkv_kernels::suite::KernelCheck;

fn key(x: f32) -> i32 {
    let b = x.to_bits() as i32;
    if b < 0 {
        b ^ 0x7FFF_FFFF
    } else {
        b
    }
}

#[test]
fn interp_ideal() {
    let n: u32 = std::env::var("N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(262144);
    let sms: u32 = std::env::var("SMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
    let tile = DenseTile {
        seed: true,
        ..DenseTile::default_certified(&spec)
    };
    let case = PagedCase {
        spec,
        kv_heads: 1,
        seq_lens: vec![n],
        seed: 3,
        data: KeyData::Normal,
        spare_pages: 2,
    };
    let full = paged_reference(&spec, &case.inputs());
    for mode in ["estimate", "ideal"] {
        let check = CertifiedCheck {
            case: case.clone(),
            tile,
            sm_count: sms,
            pruned: false,
        };
        let mut p = check.program().unwrap();
        let last = p
            .calls
            .iter()
            .rposition(|c| c.kernel.name.starts_with("decode_certified"))
            .unwrap();
        p.calls.truncate(last + 1);
        let at = p
            .calls
            .iter()
            .position(|c| c.kernel.name.starts_with("certified_seed__"))
            .unwrap();
        let rest = p.calls.split_off(at + 1);
        p.run_interp().unwrap();
        let est = p.get("seed").to_f64_vec();
        if mode == "ideal" {
            let taus: Vec<f32> = full
                .heads
                .iter()
                .map(|h| (h.tau - 1e-6 * h.tau.abs().max(1.0)) as f32)
                .collect();
            p.buffer("seed", HostBuffer::F32(taus.clone()));
            p.buffer(
                "head_bound",
                HostBuffer::I32(taus.iter().map(|&t| key(t)).collect()),
            );
        }
        p.calls = rest;
        let names: Vec<String> = p.calls.iter().map(|c| c.kernel.name.clone()).collect();
        let stats = p.run_interp().unwrap();
        let kb: u64 = names
            .iter()
            .zip(&stats)
            .filter(|(n, _)| n.starts_with("select_certified"))
            .flat_map(|(_, s)| s.buffers.iter().filter(|b| b.name == "k_pool"))
            .map(|b| b.bytes_loaded)
            .sum();
        let gap: Vec<f64> = est
            .iter()
            .zip(&full.heads)
            .map(|(e, h)| ((e - h.tau) * 1000.0).round() / 1000.0)
            .collect();
        println!(
            "{mode}: pass K {:.1}% of K; estimate − τ per head {:?}; flags {:?}",
            100.0 * kb as f64 / (n as f64 * 256.0),
            gap,
            p.get("repair").to_f64_vec()
        );
    }
}
