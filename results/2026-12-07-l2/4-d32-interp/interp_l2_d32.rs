use entkv_abi::{DType, DecodeSpec, DenseTile, PagedSpec};
use entkv_kernels::certified_checks::CertifiedCheck;
use entkv_kernels::paged_data::{KeyData, PagedCase};
use entkv_kernels::suite::KernelCheck;
#[test]
fn interp_l2_d32() {
    let n: u32 = std::env::var("N").ok().and_then(|s| s.parse().ok()).unwrap_or(32768);
    let sms: u32 = std::env::var("SMS").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    let g: u32 = std::env::var("G").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    let dt = if g == 1 { DType::F16 } else { DType::BF16 };
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, g, dt).unwrap(), 16, false, 4).unwrap();
    let def = DenseTile::default_certified(&spec);
    println!("sketch_norm {}", spec.sketch_norm());
    for tile in [def, DenseTile { share_bound: true, seed: true, ..def }] {
        let check = CertifiedCheck { case: PagedCase { spec, kv_heads: 1, seq_lens: vec![n], seed: 3, data: KeyData::Normal, spare_pages: 2 }, tile, sm_count: sms, pruned: false };
        let mut p = check.program().unwrap();
        let last = p.calls.iter().rposition(|c| c.kernel.name.starts_with("decode_certified")).unwrap();
        p.calls.truncate(last + 1);
        let names: Vec<String> = p.calls.iter().map(|c| c.kernel.name.clone()).collect();
        let splits: Vec<String> = p.calls.iter().filter(|c| c.kernel.name.starts_with("select_certified")).map(|c| format!("{:?}", c.geometry.grid)).collect();
        let stats = p.run_interp().unwrap();
        let read = |prefix: &str, buf: &str| -> u64 { names.iter().zip(&stats).filter(|(n, _)| n.starts_with(prefix)).flat_map(|(_, s)| s.buffers.iter().filter(|b| b.name == buf)).map(|b| b.bytes_loaded).sum() };
        let kb = read("select_certified", "k_pool") as f64;
        let sk = read("select_certified", "sketch") as f64;
        let kbytes = n as f64 * 64.0;
        println!("{} grid {:?}: pass K {:.2}% of K ({:.0} KB), sketch read {:.0} KB, total pass {:.0} KB", tile.tag(), splits, 100.0 * kb / kbytes, kb / 1e3, sk / 1e3, (kb + sk) / 1e3);
    }
}
