//! Host-side tests of the engine API: every problem, batch and buffer check names its problem;
//! plans bind every buffer inside its region; tiers and `Auto` follow the bundle's rows.

use std::sync::Arc;

use entkv_abi::{
    BatchError, DType, DecodeSpec, Elem, KernelFamily, PagedSpec, Selector, SpecError, TileConfig,
};
use entkv_bundle::stub::{default_row, stub_bundle};
use entkv_bundle::{Bucket, BundleError, RowSource, Tier};

use super::*;

fn spec_of(p: &Problem) -> PagedSpec {
    p.spec().unwrap()
}

fn problem(method: Method) -> Problem {
    Problem {
        q_heads: 4,
        kv_heads: 2,
        max_batch: 3,
        num_pages: 40,
        max_pages: 10,
        ..Problem::new(1.5, 32, 16, method)
    }
}

fn bundle_for(p: &Problem) -> Arc<entkv_bundle::Bundle> {
    Arc::new(stub_bundle(&[spec_of(p)], Vec::new()).unwrap())
}

fn planner(method: Method) -> DecodePlanner {
    let p = problem(method);
    DecodePlanner::new(&p, bundle_for(&p), 132).unwrap()
}

const METHODS: [Method; 6] = [
    Method::Dense,
    Method::TopK { budget_pages: 3 },
    Method::Gaussian,
    Method::Certified,
    Method::CertifiedPruned,
    Method::Auto,
];

/// Lengths 1, 17, 160 (a full block-table row) over scattered pages.
fn batch() -> (Vec<i32>, Vec<i32>) {
    let lens = vec![1, 17, 160];
    let mut bt = vec![-1; 3 * 10];
    let mut next = 39;
    for (b, &l) in lens.iter().enumerate() {
        for j in 0..(l as usize).div_ceil(16) {
            bt[b * 10 + j] = next;
            next -= 1;
        }
    }
    (lens, bt)
}

#[test]
fn problem_checks_name_the_problem() {
    let bundle = bundle_for(&problem(Method::Dense));
    let err = |p: Problem| DecodePlanner::new(&p, bundle.clone(), 132).unwrap_err();
    let base = problem(Method::Dense);
    for alpha in [1.0, 0.5, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            err(Problem { alpha, ..base }),
            EngineError::Spec(SpecError::BadAlpha(_))
        ));
    }
    assert!(matches!(
        err(Problem { head_dim: 48, ..base }),
        EngineError::Spec(SpecError::BadHeadDim(48))
    ));
    assert!(matches!(
        err(Problem {
            page_size: 24,
            ..base
        }),
        EngineError::Spec(SpecError::BadPageSize(24))
    ));
    assert!(matches!(
        err(Problem {
            sketch_bits: 3,
            ..base
        }),
        EngineError::Spec(SpecError::BadSketchBits(3))
    ));
    assert!(matches!(
        err(Problem { q_heads: 3, ..base }),
        EngineError::Heads {
            q_heads: 3,
            kv_heads: 2
        }
    ));
    assert!(matches!(
        err(Problem { kv_heads: 0, ..base }),
        EngineError::Heads { .. }
    ));
    assert!(matches!(
        err(Problem { q_heads: 10, ..base }),
        EngineError::Spec(SpecError::BadGroup(5))
    ));
    for p in [
        Problem { max_batch: 0, ..base },
        Problem { num_pages: 0, ..base },
        Problem { max_pages: 0, ..base },
        Problem {
            max_batch: 70_000,
            ..base
        },
        Problem {
            num_pages: u32::MAX,
            ..base
        },
        // One page more than 2^30 tokens a sequence (16-token pages).
        Problem {
            max_pages: (1 << 26) + 1,
            ..base
        },
        // 65535 sequences of 65535 KV heads: more query heads than i32 indices.
        Problem {
            max_batch: 65_535,
            q_heads: 65_535,
            kv_heads: 65_535,
            ..base
        },
    ] {
        assert!(matches!(err(p), EngineError::Capacity(_)), "{p:?}");
    }
    let e = err(Problem {
        method: Method::TopK { budget_pages: 0 },
        ..base
    });
    assert!(matches!(e, EngineError::Budget(0)));
    // A spec the bundle does not hold.
    let e = err(Problem { alpha: 2.0, ..base });
    assert!(
        matches!(e, EngineError::Bundle(BundleError::NoKernel { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("a2_d32"), "{e}");
    assert!(matches!(
        DecodePlanner::new(&base, bundle.clone(), 0),
        Err(EngineError::Capacity(_))
    ));
}

#[test]
fn batch_checks_name_the_problem() {
    let pl = planner(Method::Certified);
    let (lens, bt) = batch();
    assert!(pl.plan(&lens, &bt).is_ok());
    let err = |l: &[i32], b: &[i32]| pl.plan(l, b).unwrap_err();
    assert!(matches!(err(&[], &[]), EngineError::EmptyBatch));
    let four = vec![1; 4];
    assert!(matches!(
        err(&four, &[0; 40]),
        EngineError::BatchTooLarge {
            batch: 4,
            max_batch: 3
        }
    ));
    let mut l = lens.clone();
    l[1] = 0;
    assert!(matches!(
        err(&l, &bt),
        EngineError::Batch(BatchError::EmptySequence { seq: 1, len: 0 })
    ));
    l[1] = 161;
    assert!(matches!(
        err(&l, &bt),
        EngineError::Batch(BatchError::SequenceTooLong { seq: 1, .. })
    ));
    let mut b = bt.clone();
    b[21] = 40;
    let e = err(&lens, &b);
    assert!(matches!(
        e,
        EngineError::Batch(BatchError::PageOutOfPool {
            seq: 2,
            logical: 1,
            page: 40,
            ..
        })
    ));
    assert!(e.to_string().contains("block_table[2][1] = 40"), "{e}");
    b[21] = -3;
    assert!(matches!(
        err(&lens, &b),
        EngineError::Batch(BatchError::PageOutOfPool { page: -3, .. })
    ));
    assert!(matches!(
        err(&lens, &bt[1..]),
        EngineError::Batch(BatchError::BlockTableCount { .. })
    ));
    // Entries past a sequence's last page are never read, so anything goes there.
    let mut b = bt.clone();
    b[1] = 1_000;
    assert!(pl.plan(&lens, &b).is_ok());
    // The metadata build checks the same way.
    assert!(matches!(
        pl.full_pages(&[0], &bt[..10]),
        Err(EngineError::Batch(_))
    ));
}

/// Buffers matching the planner's problem for a batch of 3 (fake, aligned addresses).
fn buffers(pl: &DecodePlanner) -> DecodeBuffers {
    let p = pl.problem();
    let (b, h, d) = (3u64, p.q_heads as u64, p.head_dim as u64);
    let pool = [p.num_pages as u64, p.kv_heads as u64, p.page_size as u64, d];
    let t = |addr: u64, e: Elem, shape: &[u64]| DeviceTensor::contiguous(addr << 20, e, shape);
    DecodeBuffers {
        q: t(1, Elem::F16, &[b, h, d]),
        k_pool: t(2, Elem::F16, &pool),
        v_pool: t(3, Elem::F16, &pool),
        block_table: t(4, Elem::I32, &[b, p.max_pages as u64]),
        seq_lens: t(5, Elem::I32, &[b]),
        alibi_slopes: None,
        out: t(6, Elem::F32, &[b, h, d]),
        metadata: DeviceRegion {
            ptr: 7 << 20,
            bytes: pl.metadata_size(),
        },
        workspace: DeviceRegion {
            ptr: 8 << 20,
            bytes: pl.workspace_size(),
        },
    }
}

#[test]
fn buffer_checks_name_the_tensor() {
    let pl = planner(Method::Certified);
    let (lens, bt) = batch();
    let plan = pl.plan(&lens, &bt).unwrap();
    let good = buffers(&pl);
    pl.check_step(&plan, &good).unwrap();
    // Buffers sized for a larger batch are fine (dim 0 only).
    let mut big = good;
    big.q = DeviceTensor::contiguous(1 << 20, Elem::F16, &[8, 4, 32]);
    big.out = DeviceTensor::contiguous(6 << 20, Elem::F32, &[8, 4, 32]);
    pl.check_step(&plan, &big).unwrap();
    let bad = |f: &dyn Fn(&mut DecodeBuffers)| {
        let mut b = good;
        f(&mut b);
        pl.check_step(&plan, &b).unwrap_err().to_string()
    };
    let e = bad(&|b| b.q = DeviceTensor::contiguous(1 << 20, Elem::BF16, &[3, 4, 32]));
    assert!(e.contains("`q`") && e.contains("dtype"), "{e}");
    let e = bad(&|b| b.q = DeviceTensor::contiguous(1 << 20, Elem::F16, &[2, 4, 32]));
    assert!(e.contains("`q`") && e.contains("at least 3"), "{e}");
    let e = bad(&|b| b.k_pool = DeviceTensor::contiguous(2 << 20, Elem::F16, &[40, 2, 16, 64]));
    assert!(e.contains("`k_pool`") && e.contains("dim 3"), "{e}");
    let e =
        bad(&|b| b.v_pool = DeviceTensor::strided(3 << 20, Elem::F16, &[40, 2, 16, 32], &[1024, 1, 64, 2]));
    assert!(e.contains("`v_pool`") && e.contains("row-major"), "{e}");
    let e = bad(&|b| b.block_table = DeviceTensor::contiguous(4 << 20, Elem::I32, &[3, 9]));
    assert!(e.contains("`block_table`"), "{e}");
    let e = bad(&|b| b.seq_lens = DeviceTensor::contiguous(5 << 20, Elem::I64, &[3]));
    assert!(e.contains("`seq_lens`"), "{e}");
    let e = bad(&|b| b.out = DeviceTensor::contiguous(0, Elem::F32, &[3, 4, 32]));
    assert!(e.contains("`out`") && e.contains("null"), "{e}");
    let e = bad(&|b| b.out = DeviceTensor::contiguous((6 << 20) + 4, Elem::F32, &[3, 4, 32]));
    assert!(e.contains("`out`") && e.contains("aligned"), "{e}");
    let e = bad(&|b| b.workspace.bytes -= 1);
    assert!(e.contains("`workspace`"), "{e}");
    let e = bad(&|b| b.metadata.bytes = 100);
    assert!(e.contains("`metadata`"), "{e}");
    let e = bad(&|b| b.alibi_slopes = Some(DeviceTensor::contiguous(9 << 20, Elem::F32, &[4])));
    assert!(e.contains("`alibi_slopes`") && e.contains("without ALiBi"), "{e}");
    // A plan from another planner.
    let other = planner(Method::Certified);
    let foreign = other.plan(&lens, &bt).unwrap();
    assert!(matches!(
        pl.check_step(&foreign, &good),
        Err(EngineError::WrongPlan)
    ));
    // ALiBi problems need slopes.
    let p = Problem {
        alibi: true,
        ..problem(Method::Dense)
    };
    let pl = DecodePlanner::new(&p, bundle_for(&p), 132).unwrap();
    let plan = pl.plan(&lens, &bt).unwrap();
    let mut b = buffers(&pl);
    assert!(matches!(
        pl.check_step(&plan, &b),
        Err(EngineError::MissingTensor("alibi_slopes"))
    ));
    b.alibi_slopes = Some(DeviceTensor::contiguous(9 << 20, Elem::F32, &[4]));
    pl.check_step(&plan, &b).unwrap();
}

#[test]
fn plans_bind_every_buffer_inside_its_region() {
    let (lens, bt) = batch();
    for method in METHODS {
        let pl = planner(method);
        assert_eq!(pl.metadata_size() == 0, !method.uses_metadata());
        for sub in [&lens[..1], &lens[..]] {
            let plan = pl.plan(sub, &bt[..sub.len() * 10]).unwrap();
            assert_eq!(plan.batch as usize, sub.len());
            assert!(plan.kernels.iter().all(|k| k.tier == Tier::Default));
            assert_eq!(plan.append_calls.is_empty(), !method.uses_metadata());
            let regions = [
                (Region::Workspace, pl.workspace_layout()),
                (Region::Metadata, pl.metadata_layout()),
            ];
            for call in plan.calls.iter().chain(&plan.append_calls) {
                assert!(pl.bundle().ptx(&call.module).unwrap().contains(&call.entry));
                for a in &call.args {
                    if let BoundArg::Region { region, name, offset } = a {
                        let layout = regions.iter().find(|(r, _)| r == region).unwrap().1;
                        let slot = layout.get(name).unwrap();
                        assert_eq!(slot.offset, *offset);
                        assert!(offset + slot.bytes() <= layout.size());
                    }
                }
            }
        }
        let build = pl.plan_build_metadata(5).unwrap();
        assert_eq!(build.is_empty(), !method.uses_metadata());
        assert!(pl.plan_build_metadata(41).is_err() || !method.uses_metadata());
    }
    // Full pages of the batch, each physical page once.
    let pl = planner(Method::Certified);
    let pages = pl.full_pages(&lens, &bt).unwrap();
    assert_eq!(pages.len(), 1 + 10);
}

#[test]
fn tiers_and_auto_follow_the_bundle() {
    let p = problem(Method::Auto);
    let s = spec_of(&p);
    let tuned = |f: KernelFamily, lo: u64, hi: u64, us: f64| entkv_bundle::TableRow {
        bucket: Bucket::Tokens { lo, hi },
        selector: None,
        source: RowSource::Tuned { median_us: us },
        ..default_row(f, &s).unwrap()
    };
    let bundle = Arc::new(
        stub_bundle(
            &[s],
            vec![
                tuned(KernelFamily::DecodeDense, 1, 64, 10.0),
                tuned(KernelFamily::DecodeCertified, 1, 64, 20.0),
                tuned(KernelFamily::DecodeDense, 128, 1024, 30.0),
                tuned(KernelFamily::DecodeCertified, 128, 1024, 15.0),
            ],
        )
        .unwrap(),
    );
    let pl = DecodePlanner::new(&p, bundle, 132).unwrap();
    let (lens, bt) = batch();
    // Longest 17: exact bucket [1, 64), dense faster.
    let plan = pl.plan(&lens[..2], &bt[..20]).unwrap();
    assert_eq!(plan.method, Method::Dense);
    let dense = plan
        .kernels
        .iter()
        .find(|k| k.family == KernelFamily::DecodeDense)
        .unwrap();
    assert_eq!(dense.tier, Tier::Exact);
    // Longest 160: exact bucket [128, 1024), certified faster.
    let plan = pl.plan(&lens, &bt).unwrap();
    assert_eq!(plan.method, Method::Certified);
    let cert = plan
        .kernels
        .iter()
        .find(|k| k.family == KernelFamily::DecodeCertified)
        .unwrap();
    assert_eq!(cert.tier, Tier::Exact);
    // Longest 100: between the buckets, nearest (log2) is [128, 1024).
    let mut l = lens.clone();
    l[2] = 100;
    let plan = pl.plan(&l, &bt).unwrap();
    assert_eq!(plan.method, Method::Certified);
    assert!(plan
        .kernels
        .iter()
        .all(|k| k.tier == Tier::NearestBucket || k.family == KernelFamily::PageMeta));
}

#[test]
fn the_sparse_decode_row_follows_the_selector() {
    // Rows tuned per selector: top-k and Gaussian steps each get their own; a row tuned for
    // every selector (an older bundle) serves both.
    let s = spec_of(&problem(Method::Gaussian));
    let f = KernelFamily::DecodeSparse;
    let tile = |newton_steps: u32| {
        let TileConfig::Dense(mut t) = f.default_tile(&s) else {
            unreachable!("the sparse decode takes a dense tile")
        };
        t.newton_steps = newton_steps;
        TileConfig::Dense(t)
    };
    let row = |selector: Option<Selector>, tile: TileConfig| entkv_bundle::TableRow {
        bucket: Bucket::Tokens { lo: 1, hi: 1 << 20 },
        selector,
        tile,
        entries: tile.entries(f, &s).unwrap(),
        source: RowSource::Tuned { median_us: 5.0 },
        ..default_row(f, &s).unwrap()
    };
    let (lens, bt) = batch();
    let sparse_tile = |bundle: &Arc<entkv_bundle::Bundle>, method: Method| {
        let pl = DecodePlanner::new(&problem(method), bundle.clone(), 132).unwrap();
        let plan = pl.plan(&lens, &bt).unwrap();
        let k = plan.kernels.iter().find(|k| k.family == f).unwrap();
        (k.tier, k.tile)
    };
    let per_selector = Arc::new(
        stub_bundle(
            &[s],
            vec![
                row(Some(Selector::Topk), tile(1)),
                row(Some(Selector::Gaussian), tile(2)),
            ],
        )
        .unwrap(),
    );
    let topk = Method::TopK { budget_pages: 3 };
    assert_eq!(sparse_tile(&per_selector, topk), (Tier::Exact, tile(1)));
    assert_eq!(
        sparse_tile(&per_selector, Method::Gaussian),
        (Tier::Exact, tile(2))
    );
    let shared = Arc::new(stub_bundle(&[s], vec![row(None, tile(1))]).unwrap());
    assert_eq!(sparse_tile(&shared, topk), (Tier::Exact, tile(1)));
    assert_eq!(sparse_tile(&shared, Method::Gaussian), (Tier::Exact, tile(1)));
    // Only Gaussian rows: top-k takes the default rather than Gaussian's tile.
    let gauss_only = Arc::new(stub_bundle(&[s], vec![row(Some(Selector::Gaussian), tile(2))]).unwrap());
    assert_eq!(
        sparse_tile(&gauss_only, topk),
        (Tier::Default, f.default_tile(&s))
    );
}

#[test]
fn problem_spec_is_the_bundle_spec() {
    let p = problem(Method::Dense);
    let s = spec_of(&p);
    let want = PagedSpec::new(
        DecodeSpec::new(1.5, 32, 2, DType::F16).unwrap(),
        16,
        false,
        entkv_abi::DEFAULT_SKETCH_BITS,
    )
    .unwrap();
    assert_eq!(s, want);
}

#[test]
fn device_check_accepts_the_target_and_newer() {
    let p = problem(Method::Dense);
    let b = stub_bundle(&[spec_of(&p)], Vec::new()).unwrap();
    let m = b.manifest();
    let ok = DeviceMatch::check("NVIDIA H200", (9, 0), m).unwrap();
    assert_eq!(
        (ok.device_sm, ok.bundle_sm, ok.tuned_on_this_gpu),
        (90, 90, false)
    );
    assert!(DeviceMatch::check("NVIDIA B200", (10, 0), m).is_ok());
    let e = DeviceMatch::check("NVIDIA A100", (8, 0), m).unwrap_err();
    assert!(matches!(
        e,
        EngineError::DeviceMismatch {
            device_sm: 80,
            bundle_sm: 90,
            ..
        }
    ));
    assert!(
        e.to_string().contains("A100") && e.to_string().contains("sm_80"),
        "{e}"
    );
    let tuned = stub_bundle(
        &[spec_of(&p)],
        vec![entkv_bundle::TableRow {
            bucket: Bucket::Tokens { lo: 1, hi: 8 },
            selector: None,
            source: RowSource::Tuned { median_us: 1.0 },
            ..default_row(KernelFamily::DecodeDense, &spec_of(&p)).unwrap()
        }],
    )
    .unwrap();
    assert!(
        DeviceMatch::check("NVIDIA H200", (9, 0), tuned.manifest())
            .unwrap()
            .tuned_on_this_gpu
    );
}

/// `Decoder::load_modules` loads `DecodePlanner::modules`: every module any plan launches from
/// (steps and appends, every method, lengths in every bucket of a bundle with tuned rows in
/// their own modules), and nothing of another specialization.
#[test]
fn planned_calls_come_from_the_preloadable_modules() {
    for method in METHODS {
        let p = problem(method);
        let spec = spec_of(&p);
        let other = PagedSpec {
            decode: DecodeSpec::new(1.5, 64, 1, DType::F16).unwrap(),
            ..spec
        };
        // A tuned row per family for short contexts, in a module of its own.
        let mut tuned = Vec::new();
        for family in KernelFamily::ALL {
            let mut row = default_row(family, &spec).unwrap();
            row.bucket = Bucket::Tokens { lo: 1, hi: 64 };
            row.source = RowSource::Tuned { median_us: 1.0 };
            row.module = format!("{}__short.ptx", family.name());
            tuned.push(row);
        }
        let bundle = Arc::new(stub_bundle(&[spec, other], tuned).unwrap());
        let planner = DecodePlanner::new(&p, bundle, 132).unwrap();
        let modules = planner.modules();
        assert!(!modules.is_empty());
        assert!(modules.iter().all(|m| !m.contains("_d64_")), "{modules:?}");
        for lens in [vec![1, 17, 40], vec![1, 17, 160]] {
            let (_, bt) = batch();
            let plan = planner.plan(&lens, &bt).unwrap();
            for c in plan.calls.iter().chain(&plan.append_calls) {
                assert!(
                    modules.contains(&c.module.as_str()),
                    "{}: {} launches from {} outside {modules:?}",
                    method.name(),
                    c.entry,
                    c.module
                );
            }
        }
    }
}

/// With `check_device_ids` every step and append starts with `guard_ids` from the step's decode
/// module, and no other launch reads the caller's lengths or block table; a bundle without the
/// kernel is refused up front, and fault records decode to the host check's errors.
#[test]
fn checked_steps_read_only_the_guarded_copies() {
    let (lens, bt) = batch();
    for method in METHODS {
        let p = Problem {
            check_device_ids: true,
            ..problem(method)
        };
        let pl = DecodePlanner::new(&p, bundle_for(&p), 132).unwrap();
        let plain = planner(method);
        let unchecked = plain.plan(&lens, &bt).unwrap();
        let plan = pl.plan(&lens, &bt).unwrap();
        for (list, before) in [
            (&plan.calls, &unchecked.calls),
            (&plan.append_calls, &unchecked.append_calls),
        ] {
            if before.is_empty() {
                assert!(list.is_empty());
                continue;
            }
            assert_eq!(list.len(), before.len() + 1, "{}", method.name());
            let guard = &list[0];
            assert!(guard.entry.starts_with("guard_ids__"), "{}", guard.entry);
            assert!(guard.family.is_decode());
            assert!(pl.bundle().ptx(&guard.module).unwrap().contains(&guard.entry));
            assert_eq!(guard.geometry.grid, [1, 3, 1]);
            for role in [TensorRole::BlockTable, TensorRole::SeqLens] {
                assert!(guard.args.contains(&BoundArg::Tensor(role)));
                for c in &list[1..] {
                    assert!(
                        !c.args.contains(&BoundArg::Tensor(role)),
                        "{} reads {role:?}",
                        c.entry
                    );
                }
            }
            // The same launches otherwise, reading the copies where they read the tensors.
            for (c, b) in list[1..].iter().zip(before) {
                assert_eq!((&c.entry, c.args.len()), (&b.entry, b.args.len()));
                for (x, y) in c.args.iter().zip(&b.args) {
                    match (x, y) {
                        (BoundArg::Region { name, .. }, BoundArg::Tensor(TensorRole::BlockTable)) => {
                            assert_eq!(name, "ids_block_table")
                        }
                        (BoundArg::Region { name, .. }, BoundArg::Tensor(TensorRole::SeqLens)) => {
                            assert_eq!(name, "ids_seq_lens")
                        }
                        (BoundArg::Region { name: a, .. }, BoundArg::Region { name: b, .. }) => {
                            assert_eq!(a, b)
                        }
                        _ => assert_eq!(x, y),
                    }
                }
            }
        }
        let faults = pl.id_faults(&plan, &[0, 0, 0, 2, 4, -9, 1, -1, 200]).unwrap();
        assert_eq!(faults.len(), 2);
        assert_eq!(faults[0].seq, 1);
        assert_eq!(
            faults[0].first.to_string(),
            "block_table[1][4] = -9 is outside the pool of 40 pages"
        );
        assert!(faults[1]
            .first
            .to_string()
            .contains("seq_lens[2] = 200 on the device"));
        assert!(pl.id_faults(&plan, &[0; 6]).is_err());
        let e = plain.id_faults(&unchecked, &[0; 9]).unwrap_err();
        assert!(matches!(e, EngineError::DeviceIdCheckOff), "{e}");
        assert!(matches!(
            pl.id_faults(&unchecked, &[0; 9]),
            Err(EngineError::WrongPlan)
        ));
    }
    // A bundle made before `guard_ids` (its decode modules lack it) is refused by name.
    let p = Problem {
        check_device_ids: true,
        ..problem(Method::Certified)
    };
    let spec = spec_of(&p);
    let mut old = entkv_bundle::BundleWriter::new(entkv_bundle::BundleMeta {
        entkv_version: "0".into(),
        llvm_version: "stub".into(),
        target_sm: 90,
        ptx_version: "8.0".into(),
        tuned_on: None,
        created_unix_s: 0,
    });
    old.add_spec(spec);
    for family in KernelFamily::ALL {
        let row = default_row(family, &spec).unwrap();
        old.add_module(
            &row.module,
            entkv_bundle::stub::stub_ptx(&row.entries),
            row.entries.clone(),
        )
        .unwrap();
        old.add_row(row);
    }
    let e = DecodePlanner::new(&p, Arc::new(old.finish().unwrap()), 132).unwrap_err();
    assert!(
        e.to_string().contains("decode_certified__") && e.to_string().contains("no `guard_ids`"),
        "{e}"
    );
}
