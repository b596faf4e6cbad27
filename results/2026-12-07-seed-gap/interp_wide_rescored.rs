use entkv_abi::{DType, DecodeSpec, DenseTile, PagedSpec};
use entkv_kernels::certified_checks::CertifiedCheck;
use entkv_kernels::paged_data::{KeyData, PagedCase};
use entkv_kernels::suite::KernelCheck;
#[test]
fn interp_wide_scratch() {
    let n: u32 = std::env::var("N").ok().and_then(|s| s.parse().ok()).unwrap_or(32768);
    let sms: u32 = std::env::var("SMS").ok().and_then(|s| s.parse().ok()).unwrap_or(4);
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
    let def = DenseTile::default_certified(&spec);
    println!("sketch_norm {} tile {}", spec.sketch_norm(), def.tag());
    let check = CertifiedCheck { case: PagedCase { spec, kv_heads: 1, seq_lens: vec![n], seed: 3, data: KeyData::Normal, spare_pages: 2 }, tile: if std::env::var("NOMMA").is_ok() { DenseTile { mma: false, ..def } } else { def }, sm_count: sms, pruned: false };
    let mut p = check.program().unwrap();
    let last = p.calls.iter().rposition(|c| c.kernel.name.starts_with("decode_certified")).unwrap();
    p.calls.truncate(last + 1);
    let names: Vec<String> = p.calls.iter().map(|c| c.kernel.name.clone()).collect();
    println!("{:?}", p.calls.iter().map(|c| format!("{} {:?}", c.kernel.name, c.geometry.grid)).collect::<Vec<_>>());
    let stats = p.run_interp().unwrap();
    for (nm, s) in names.iter().zip(&stats) {
        for b in &s.buffers { if b.bytes_loaded > 0 { println!("  {nm} {} {:.1} KB", b.name, b.bytes_loaded as f64 / 1e3); } }
    }
    let read = |prefix: &str, buf: &str| -> u64 { names.iter().zip(&stats).filter(|(n, _)| n.starts_with(prefix)).flat_map(|(_, s)| s.buffers.iter().filter(|b| b.name == buf)).map(|b| b.bytes_loaded).sum() };
    let kb = read("select_certified", "k_pool") as f64;
    let kbytes = n as f64 * 256.0;
    println!("pass K {:.2}% of K ({:.0} KB = {:.0} rows)", 100.0 * kb / kbytes, kb / 1e3, kb / 256.0);
}
