// Interpreter counts of select_topk heads (CPU only): score sweeps read, statements, lane operations.
// Reproduce: copy to kernels-gen/tests/ and `cargo test --release -p entkv-kernels --test sel_stats -- --nocapture`.
use entkv_abi::{DType, DecodeSpec, PagedSpec, SelectTopkTile};
use entkv_kernels::suite::KernelCheck;
use entkv_kernels::topk::checks::{ScorePattern, SelectCheck};
#[test]
fn sel_stats() {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    for (pages, budget) in [(65535i32, 16384), (8191, 2048), (32767, 8192)] {
        for tile in [SelectTopkTile::default_for(&spec), SelectTopkTile { threads: 512, items_per_thread: 16 }] {
            let check = SelectCheck { label: "s", spec, kv_heads: 1, seq_lens: vec![16 * (pages + 1)], pattern: ScorePattern::Random, budget_pages: budget, tile, seed: 9 };
            let mut p = check.program().unwrap();
            let st = p.run_interp().unwrap();
            assert!(check.verify(&p).passed);
            let s = &st[0];
            let read = s.buffers.iter().find(|b| b.name == "page_scores").unwrap().bytes_loaded;
            println!("pages {pages} budget {budget} {}: score sweeps {:.3}, statements {}, lane_ops {}, shared loaded {} B, barriers?", tile.tag(), read as f64 / (pages as f64 * 4.0), s.statements, s.lane_ops, s.shared_bytes_loaded);
        }
    }
}
