use entkv_abi::{DType, DecodeSpec, DenseTile, PagedSpec};
use entkv_dsl::interp::HostBuffer;
use entkv_kernels::certified_checks::CertifiedCheck;
use entkv_kernels::paged_data::{KeyData, PagedCase};
use entkv_kernels::suite::KernelCheck;
#[test]
fn interp_repair_scratch() {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|s| s.parse().ok()).unwrap_or(d);
    let n = env("N", 131072) as u32;
    let b = env("B", 1) as usize;
    let seeds = env("SEEDS", 1);
    let first = env("FIRST", 1);
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
    let def = DenseTile::default_certified(&spec);
    let (mut flagged, mut pairs) = (0, 0);
    for seed in first..first + seeds {
        let check = CertifiedCheck { case: PagedCase { spec, kv_heads: 1, seq_lens: vec![n; b], seed, data: KeyData::Normal, spare_pages: 2 }, tile: def, sm_count: 4 * b as u32, pruned: false };
        let mut p = check.program().unwrap();
        p.run_interp().unwrap();
        let HostBuffer::I32(r) = p.get("repair") else { panic!() };
        let f = r.iter().filter(|&&x| x != 0).count();
        flagged += f;
        pairs += r.len();
        println!("seed {seed}: repair {:?}", r);
    }
    println!("flagged {flagged} of {pairs} pairs");
}
