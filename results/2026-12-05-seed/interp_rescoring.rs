use entkv_abi::{DType, DecodeSpec, DenseTile, PagedSpec};
use entkv_kernels::certified_checks::CertifiedCheck;
use entkv_kernels::paged_data::{KeyData, PagedCase};
use entkv_kernels::suite::KernelCheck;
use entkv_dsl::interp::HostBuffer;
#[test]
fn interp_rescoring() {
    let n: u32 = std::env::var("N").ok().and_then(|s| s.parse().ok()).unwrap_or(32768);
    let sms: u32 = std::env::var("SMS").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
    let def = DenseTile::default_certified(&spec);
    for tile in [def, DenseTile { seed: true, ..def }] {
        let check = CertifiedCheck { case: PagedCase { spec, kv_heads: 1, seq_lens: vec![n], seed: 3, data: KeyData::Normal, spare_pages: 2 }, tile, sm_count: sms, pruned: false };
        let mut p = check.program().unwrap();
        let last = p.calls.iter().rposition(|c| c.kernel.name.starts_with("decode_certified")).unwrap();
        p.calls.truncate(last + 1);
        let names: Vec<String> = p.calls.iter().map(|c| c.kernel.name.clone()).collect();
        let splits: Vec<String> = p.calls.iter().filter(|c| c.kernel.name.starts_with("select_certified")).map(|c| format!("{:?}", c.geometry.grid)).collect();
        let t0 = std::time::Instant::now();
        let stats = p.run_interp().unwrap();
        let read = |prefix: &str| -> u64 { names.iter().zip(&stats).filter(|(n, _)| n.starts_with(prefix)).flat_map(|(_, s)| s.buffers.iter().filter(|b| b.name == "k_pool")).map(|b| b.bytes_loaded).sum() };
        let kb = read("select_certified") as f64; let sb = read("certified_seed_scores") as f64;
        let kbytes = n as f64 * 256.0;
        println!("{} grid {:?}: pass K {:.1}% of K, samples {:.2}% ({:.1} s) flags {:?}", tile.tag(), splits, 100.0 * kb / kbytes, 100.0 * sb / kbytes, t0.elapsed().as_secs_f64(), if tile.seed { match p.get("repair") { HostBuffer::I32(v) => v.clone(), _ => vec![] } } else { vec![] });
    }
}
