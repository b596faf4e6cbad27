//! The dense decode kernels in the CPU interpreter against the float64 oracle.

use entkv_abi::{DType, DecodeSpec, DenseShape, DenseTile};
use entkv_kernels::check::{compare, interp::run_dense, reference, DataKind, DenseCase};

fn case(alpha: f64, group: u32, n: u64, tile: Option<DenseTile>, data: DataKind, seed: u64) -> DenseCase {
    let spec = DecodeSpec::new(alpha, 32, group, DType::F16).unwrap();
    let tile = tile.unwrap_or_else(|| DenseTile::default_contiguous(&spec));
    DenseCase {
        spec,
        tile,
        shape: DenseShape {
            batch: 2,
            kv_heads: 2,
            n,
        },
        seed,
        data,
        sm_count: 132,
    }
}

fn check(c: &DenseCase) {
    let x = c.inputs();
    let r = reference(c, &x);
    let (got, stats) = run_dense(c, &x).unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let res = compare(&r, &got, None);
    println!(
        "α={} g={} n={} {:?} tile={}: rel {:.2e} τ {:.2e} support≤{} mismatches {} (K bytes {}, finish bytes {})",
        c.spec.alpha,
        c.spec.group,
        c.shape.n,
        c.data,
        c.tile.tag(),
        res.max_rel_err,
        res.max_tau_err,
        res.max_support,
        res.support_mismatches,
        stats.score.global_bytes_loaded,
        stats.finish.global_bytes_loaded
    );
    assert!(res.passed, "{c:?}\n{res:?}");
}

#[test]
fn dense_decode_matches_oracle_on_required_sizes() {
    for alpha in [1.5, 2.0] {
        for group in [1, 3] {
            for n in [1, 2, 17, 1000, 4097] {
                check(&case(alpha, group, n, None, DataKind::Normal, 42 + n));
            }
        }
    }
}

/// Small chunks and a small assumed GPU give many chunks per split (the running bound, appends
/// and in-place pruning) and several splits; a tiny finish capacity forces the finish pass to
/// read candidates from the workspace.
#[test]
fn dense_decode_streamed_splits_and_global_fallback() {
    let spec = DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap();
    let mut tile = DenseTile::default_for(&spec);
    tile.threads = 64;
    tile.tokens_per_group = 2;
    tile.finish_threads = 64;
    tile.finish_capacity = 32;
    for (alpha, n, lanes) in [(1.5, 4097, 1), (2.0, 1000, 1), (1.5, 2000, 4), (3.0, 1500, 2)] {
        tile.lanes_per_token = lanes;
        let mut c = case(alpha, 1, n, Some(tile), DataKind::Normal, 7);
        c.sm_count = 1;
        let plan = c.plan().unwrap();
        assert!(plan.chunks_per_split > 1 && plan.splits > 1, "{plan:?}");
        check(&c);
    }
    tile.newton_steps = 0;
    let mut c = case(1.5, 1, 2000, Some(tile), DataKind::Normal, 8);
    c.sm_count = 1;
    check(&c);
    let mut c = case(2.0, 1, 2000, Some(tile), DataKind::Ties, 8);
    c.sm_count = 1;
    check(&c);
}

#[test]
fn dense_decode_adversarial_data() {
    for data in [DataKind::Ties, DataKind::Dominant, DataKind::Extreme] {
        for alpha in [1.5, 2.0] {
            check(&case(alpha, 1, 300, None, data, 5));
        }
    }
    // Ties over more tokens than the finish pass stages in shared memory: global path.
    check(&case(1.5, 1, 4097, None, DataKind::Ties, 6));
}

/// Every value of every specialization axis at least once (α with and without closed forms,
/// head dims, bf16, every GQA ratio), on an odd length.
#[test]
fn dense_decode_every_spec_axis() {
    let mut specs = Vec::new();
    for alpha in [4.0 / 3.0, 1.25, 3.0] {
        specs.push(DecodeSpec::new(alpha, 32, 1, DType::F16).unwrap());
    }
    for d in [64, 128] {
        specs.push(DecodeSpec::new(1.5, d, 1, DType::BF16).unwrap());
    }
    for g in [2, 4, 8] {
        specs.push(DecodeSpec::new(2.0, 32, g, DType::BF16).unwrap());
    }
    for spec in specs {
        let c = DenseCase {
            spec,
            tile: DenseTile::default_for(&spec),
            shape: DenseShape {
                batch: 1,
                kv_heads: 2,
                n: 777,
            },
            seed: 99,
            data: DataKind::Normal,
            sm_count: 4,
        };
        check(&c);
    }
}

/// The tensor-core score pass over a contiguous cache: every head dim, GQA 1–8, f16 and bf16
/// (the wide rows' default included), lengths that end inside a warp's 32 tokens, several
/// chunks and splits.
#[test]
fn dense_decode_tensor_cores() {
    let mut specs = vec![DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap()];
    for (d, g, dtype) in [(32, 1, DType::F16), (64, 2, DType::BF16), (32, 8, DType::F16)] {
        specs.push(DecodeSpec::new(2.0, d, g, dtype).unwrap());
    }
    for spec in specs {
        let def = DenseTile::default_contiguous(&spec);
        let tile = DenseTile {
            threads: 64,
            lanes_per_token: 1,
            tokens_per_group: 2,
            mma: true,
            ..def
        };
        for (n, sm_count) in [(777, 1), (5, 132)] {
            let c = DenseCase {
                spec,
                tile,
                shape: DenseShape {
                    batch: 2,
                    kv_heads: 2,
                    n,
                },
                seed: 3 + n,
                data: DataKind::Normal,
                sm_count,
            };
            check(&c);
        }
    }
}
