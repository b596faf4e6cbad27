//! Certified-exact decode in the interpreter: equal to full-cache float64 entmax on every input.

use entkv_abi::{DType, DecodeSpec, DenseTile, PagedSpec};
use entkv_kernels::certified_checks::{checks, wide_4bit_checks, CertifiedCheck};
use entkv_kernels::paged_data::{KeyData, PagedCase};
use entkv_kernels::suite::{interp_failures, KernelCheck};

#[test]
fn certified_decode_is_exact() {
    let failed = interp_failures(checks());
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

/// `wide` over 4-bit sketches, seeded, rescoring with FMAs and on the tensor cores, at one and
/// two tokens a lane; its page-pruned walk's default shape.
#[test]
fn certified_wide_4bit_is_exact() {
    let checks: Vec<Box<dyn KernelCheck>> = wide_4bit_checks()
        .into_iter()
        .map(|c| Box::new(c) as Box<dyn KernelCheck>)
        .collect();
    let failed = interp_failures(checks);
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

/// Run the certified checks (plain and page-pruned) of `cases` at `tile` on a one-SM GPU (several
/// chunks and splits); each case is `(keys, sequence lengths, KV heads, seed)`.
fn run_small_tile_cases(spec: PagedSpec, tile: DenseTile, cases: Vec<(KeyData, Vec<u32>, u32, u64)>) {
    let mut checks: Vec<Box<dyn KernelCheck>> = Vec::new();
    for (data, seq_lens, kv_heads, seed) in cases {
        for pruned in [false, true] {
            checks.push(Box::new(CertifiedCheck {
                case: PagedCase {
                    spec,
                    kv_heads,
                    seq_lens: seq_lens.clone(),
                    seed,
                    data,
                    spare_pages: 2,
                },
                tile,
                sm_count: 1,
                pruned,
            }));
        }
    }
    let failed = interp_failures(checks);
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

/// A 64-thread tile of `lanes` lanes a token and `tokens` tokens a lane group, with no register
/// cap, on `spec`'s default certified tile otherwise.
fn small_tile(spec: &PagedSpec, lanes: u32, tokens: u32) -> DenseTile {
    DenseTile {
        threads: 64,
        lanes_per_token: lanes,
        tokens_per_group: tokens,
        score_min_blocks: 1,
        finish_threads: 64,
        finish_capacity: 64,
        ..DenseTile::default_certified(spec)
    }
}

/// A chunk with more pages than the CTA has threads (64 threads, 32 tokens a lane group: 128
/// pages of 16), so the page terms take two rounds of one lane a page. Interpreter only: the
/// tile holds 256 sketch words a lane, more than a GPU tile would.
#[test]
fn certified_page_terms_in_several_rounds() {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 8).unwrap();
    let tile = DenseTile {
        threads: 64,
        tokens_per_group: 32,
        score_min_blocks: 1,
        finish_threads: 64,
        finish_capacity: 64,
        ..DenseTile::default_certified(&spec)
    };
    assert!(tile.chunk_len() / 16 > tile.threads, "two rounds of page terms");
    run_small_tile_cases(spec, tile, vec![(KeyData::Normal, vec![5000, 37], 2, 7)]);
}

/// 4-bit sketches stream per warp (`warp_stream`) and queue their rescorings: a segment longer
/// than two warps' worth is tightened only once it has doubled. Tied keys keep every token a
/// candidate, so warp segments reach hundreds and the rescoring queue fills every chunk.
#[test]
fn certified_warp_segments_longer_than_a_warp() {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    run_small_tile_cases(
        spec,
        small_tile(&spec, 1, 2),
        vec![
            (KeyData::Ties, vec![1500, 37], 1, 11),
            (KeyData::Normal, vec![3000, 200], 1, 11),
        ],
    );
}

/// Two lanes a token on a 4-bit sketch, with token counts a lane group that divide a page and
/// that do not (4 and 3 of 16): the walk loads each token of the next chunk right after scoring
/// the current one. Partly filled last pages, one-page sequences.
#[test]
fn certified_two_lanes_a_token() {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 64, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    for tokens_per_group in [4, 3] {
        run_small_tile_cases(
            spec,
            small_tile(&spec, 2, tokens_per_group),
            vec![
                (KeyData::Normal, vec![1000, 9, 16], 2, 5),
                (KeyData::Ties, vec![333], 1, 6),
            ],
        );
    }
}

/// A head's splits share their threshold bounds through `head_bound`, which a workspace may
/// hold anything in between steps: `certified_init` resets it. A step run after one that left
/// every head's bound at +10³⁰ (which would rule every token out) is still exact; without the
/// reset it is not.
#[test]
fn certified_init_resets_stale_head_bounds() {
    use entkv_dsl::interp::HostBuffer;
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::F16).unwrap(), 16, false, 4).unwrap();
    let check = CertifiedCheck {
        case: PagedCase {
            spec,
            kv_heads: 2,
            seq_lens: vec![2000, 700],
            seed: 21,
            data: KeyData::Normal,
            spare_pages: 2,
        },
        tile: DenseTile {
            share_bound: true,
            ..small_tile(&spec, 1, 2)
        },
        sm_count: 1,
        pruned: false,
    };
    let stale = |mut p: entkv_kernels::program::Program| {
        let n = p.get("head_bound").len();
        p.buffer("head_bound", HostBuffer::I32(vec![1e30f32.to_bits() as i32; n]));
        p
    };
    let mut p = stale(check.program().unwrap());
    assert!(
        p.calls
            .iter()
            .filter(|c| c.kernel.name.starts_with("certified_init"))
            .count()
            >= 1
    );
    p.run_interp().unwrap();
    let o = check.verify(&p);
    assert!(o.passed, "with the reset: {}", o.detail);

    let mut p = stale(check.program().unwrap());
    p.calls.retain(|c| !c.kernel.name.starts_with("certified_init"));
    p.run_interp().unwrap();
    assert!(
        !check.verify(&p).passed,
        "without the reset the stale bound must break the output"
    );
}

/// The seeded pass (`entkv_abi::seed`) on keys whose samples overstate the scores: the
/// estimate passes τ for the long sequence's pairs, `certified_verify` flags them (and not the
/// short sequence's, which takes no seed), and the repair launches, starting from the first
/// pass's τ(K), restore the exact output. On the full walk and on the page-pruned walk seeded
/// (`_pw`: the decoy pages' bounds keep every page, so the seeded full walk takes the pairs).
/// Without them the first pass's output is wrong: the check can fail.
#[test]
fn seeded_pass_repairs_an_estimate_above_the_threshold() {
    let checks = entkv_kernels::certified_checks::seed_decoy_checks();
    let (full, pruned) = (&checks[0], &checks[1]);
    assert!(
        !full.pruned
            && pruned.pruned
            && pruned.tile.pruned_walk
            && pruned.case.seq_lens == full.case.seq_lens
    );
    for check in [full, pruned] {
        repairs_the_decoy_case(check);
    }
}

fn repairs_the_decoy_case(check: &CertifiedCheck) {
    use entkv_dsl::interp::HostBuffer;
    use entkv_kernels::check::{compare, DenseOutputs};
    use entkv_kernels::paged_data::paged_reference;
    let mut program = check.program().unwrap();
    // Up to the repair's finish (the check reruns the pass without rescoring after it).
    let finishes: Vec<usize> = program
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kernel.name.starts_with("decode_certified"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(finishes.len(), 2, "a seeded step runs the finish twice");
    program.calls.truncate(finishes[1] + 1);
    let verify = program
        .calls
        .iter()
        .position(|c| c.kernel.name.starts_with("certified_verify"))
        .expect("a verify call");
    let mut first_only = program.clone();
    first_only.calls.truncate(verify + 1);

    let case = &check.case;
    assert_eq!(case.seq_lens, vec![2000, 300]);
    let x = case.inputs();
    let full = paged_reference(&case.spec, &x);
    let outputs = |p: &entkv_kernels::program::Program| DenseOutputs {
        out: p.get("out").to_f64_vec(),
        tau: p.get("tau").to_f64_vec(),
        support: p
            .get("support")
            .to_f64_vec()
            .into_iter()
            .map(|v| v as i64)
            .collect(),
    };
    for p in [&mut program, &mut first_only] {
        p.run_interp().unwrap();
    }
    let flags = program.get("repair").to_f64_vec();
    assert_eq!(
        flags,
        vec![1.0, 1.0, 0.0, 0.0],
        "the long sequence's pairs are flagged"
    );
    let seeds = program.get("seed").to_f64_vec();
    assert!(seeds[..2].iter().all(|s| s.is_finite()) && seeds[2..].iter().all(|s| *s == f64::NEG_INFINITY));
    // The repair started from each flagged head's τ(K) less the solver's tolerance: finite, and
    // a bound on its threshold.
    let HostBuffer::I32(keys) = program.get("repair_bound") else {
        panic!("repair_bound holds order keys")
    };
    for (h, &key) in keys.iter().enumerate().take(2) {
        let start = f32::from_bits((if key < 0 { key ^ 0x7FFF_FFFF } else { key }) as u32) as f64;
        let tau = full.heads[h].tau;
        assert!(
            start.is_finite() && start <= tau + 1e-6 * tau.abs().max(1.0),
            "head {h}: {start} vs τ {tau}"
        );
    }
    if check.pruned {
        // Both walks' passes run in the repair, each gated on its own pairs too.
        let repair_passes: Vec<&str> = program.calls[verify + 1..]
            .iter()
            .map(|c| c.kernel.name.split("__").next().unwrap())
            .collect();
        assert_eq!(
            repair_passes,
            [
                "select_certified_rest",
                "select_certified_sel",
                "decode_certified"
            ]
        );
    }
    let repaired = compare(&full, &outputs(&program), None);
    assert!(repaired.passed, "with the repair: {repaired:?}");
    let first = compare(&full, &outputs(&first_only), None);
    assert!(!first.passed, "the first pass alone drops support: {first:?}");
}

/// The seeded page-pruned walk (`_pw`) on a step whose pairs split between its two walks: the
/// first KV head's keys are page-coherent (the pruning keeps few pages, so the selected walk
/// takes its pairs), the other's iid (every page kept: the seeded full walk). Only the full
/// walk's pairs are sampled, so only their heads have an estimate; the output is exact.
#[test]
fn seeded_pruned_walk_samples_only_the_full_walks_pairs() {
    use entkv_abi::pipeline::selected_walk_takes;
    use entkv_kernels::suite::run_interp;
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    let check = CertifiedCheck {
        case: PagedCase {
            spec,
            kv_heads: 2,
            seq_lens: vec![3000, 1300],
            seed: 41,
            data: KeyData::PeakedFirstHead,
            spare_pages: 2,
        },
        tile: DenseTile {
            share_bound: true,
            seed: true,
            pruned_walk: true,
            ..small_tile(&spec, 1, 2)
        },
        sm_count: 1,
        pruned: true,
    };
    let o = run_interp(&check).unwrap();
    assert!(o.passed, "{}", o.detail);
    let mut p = check.program().unwrap();
    p.run_interp().unwrap();
    let (counts, seeds) = (p.get("sel_count").to_f64_vec(), p.get("seed").to_f64_vec());
    let mut walks = [0; 2];
    for (pair, &count) in counts.iter().enumerate() {
        let pages = (check.case.seq_lens[pair / 2] as u64).div_ceil(16);
        let selected = selected_walk_takes(count as u64, pages);
        walks[selected as usize] += 1;
        let seed = seeds[pair];
        assert!(
            if selected {
                seed == f64::NEG_INFINITY
            } else {
                seed.is_finite()
            },
            "pair {pair}: {count} of {pages} pages kept, estimate {seed}"
        );
    }
    assert_eq!(walks, [2, 2], "two pairs a walk");
}

/// On iid keys the estimate stays below τ (no pair is flagged) and filters far more than the
/// splits' own bounds: with a head cut into many splits (an assumed 16-SM GPU) the seeded pass
/// rescores fewer tokens from K than with shared bounds alone (K bytes its launches read, in
/// the interpreter's counts), the samples' K reads included, and both are exact.
#[test]
fn seeded_pass_rescores_fewer_tokens_on_iid_keys() {
    use entkv_kernels::suite::run_interp;
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::F16).unwrap(), 16, false, 4).unwrap();
    let shared = DenseTile {
        share_bound: true,
        ..small_tile(&spec, 1, 2)
    };
    let k_bytes = |tile: DenseTile, pruned: bool| {
        let check = CertifiedCheck {
            case: PagedCase {
                spec,
                kv_heads: 1,
                seq_lens: vec![6000],
                seed: 5,
                data: KeyData::Normal,
                spare_pages: 2,
            },
            tile,
            sm_count: 16,
            pruned,
        };
        let o = run_interp(&check).unwrap();
        assert!(o.passed, "{}: {}", tile.tag(), o.detail);
        let mut p = check.program().unwrap();
        // The step alone (the check's rerun without rescoring comes after its last finish).
        let last = p
            .calls
            .iter()
            .rposition(|c| c.kernel.name.starts_with("decode_certified"))
            .unwrap();
        p.calls.truncate(last + 1);
        let names: Vec<String> = p.calls.iter().map(|c| c.kernel.name.clone()).collect();
        let stats = p.run_interp().unwrap();
        if tile.seed {
            assert!(
                p.get("repair").to_f64_vec().iter().all(|&f| f == 0.0),
                "nothing flagged"
            );
        }
        let read = |prefix: &str| -> u64 {
            names
                .iter()
                .zip(&stats)
                .filter(|(n, _)| n.starts_with(prefix))
                .flat_map(|(_, s)| s.buffers.iter().filter(|b| b.name == "k_pool"))
                .map(|b| b.bytes_loaded)
                .sum()
        };
        (read("select_certified"), read("certified_seed_scores"))
    };
    // The full walk, then the page-pruned walk (which keeps every page of iid keys, so its
    // seeded full walk, `_pw`, takes the pair).
    let seeded = DenseTile { seed: true, ..shared };
    let pw = DenseTile {
        pruned_walk: true,
        ..seeded
    };
    for (plain_tile, seeded_tile, pruned) in [(shared, seeded, false), (shared, pw, true)] {
        let ((plain, _), (seeded, samples)) = (k_bytes(plain_tile, pruned), k_bytes(seeded_tile, pruned));
        println!(
            "{}: K bytes: shared bounds alone {plain}; seeded pass {seeded} + samples {samples}",
            if pruned { "page-pruned walk" } else { "full walk" }
        );
        assert!(
            samples > 0 && seeded + samples < plain / 2,
            "seeded {seeded} + {samples}, shared bounds alone {plain}"
        );
    }
}

/// The seed kernels against float64: `certified_seed_scores` writes every sample's exact score
/// (−∞ past the sequence) and `certified_seed` the estimate `seed::host_estimate` computes from
/// the reference's scores at the sampled positions (−∞ for a sequence under 16 samples). ALiBi,
/// GQA 2, α = 1.25 (β = 4: the general power) on bf16; α = 1.5 on the decoy keys; heads on
/// both sides of the rank cap's length.
#[test]
fn seed_kernels_match_the_float64_reference() {
    use entkv_abi::seed::{seed_position, seed_samples, SEED_LONG_SAMPLES};
    use entkv_kernels::paged_data::paged_reference;
    use entkv_kernels::seed::host_estimate;
    let cases = [
        PagedCase {
            spec: PagedSpec::new(DecodeSpec::new(1.25, 32, 2, DType::BF16).unwrap(), 16, true, 4).unwrap(),
            kv_heads: 2,
            seq_lens: vec![3000, 500],
            seed: 12,
            data: KeyData::Normal,
            spare_pages: 2,
        },
        entkv_kernels::certified_checks::seed_decoy_checks()
            .remove(0)
            .case,
        // Every key alike, so every sample ties with the max (the rank walk stops at once).
        PagedCase {
            spec: PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap(),
            kv_heads: 1,
            seq_lens: vec![3000, 500],
            seed: 14,
            data: KeyData::Ties,
            spare_pages: 1,
        },
        // Heads just over and just under `SEED_LONG_SAMPLES` samples: the 6th and the 4th
        // largest cap their estimates.
        PagedCase {
            spec: PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap(),
            kv_heads: 1,
            seq_lens: vec![SEED_LONG_SAMPLES * 64 + 30, (SEED_LONG_SAMPLES - 1) * 64],
            seed: 13,
            data: KeyData::Normal,
            spare_pages: 1,
        },
    ];
    let long_case = cases.len() - 1;
    for (i, case) in cases.into_iter().enumerate() {
        let check = CertifiedCheck {
            case: case.clone(),
            tile: DenseTile {
                share_bound: true,
                seed: true,
                ..small_tile(&case.spec, 1, 2)
            },
            sm_count: 1,
            pruned: false,
        };
        let mut p = check.program().unwrap();
        let at = p
            .calls
            .iter()
            .position(|c| c.kernel.name.starts_with("certified_seed__"))
            .unwrap();
        p.calls.truncate(at + 1);
        p.run_interp().unwrap();
        let x = case.inputs();
        let full = paged_reference(&case.spec, &x);
        let (z, seeds) = (p.get("seed_z").to_f64_vec(), p.get("seed").to_f64_vec());
        let samples = z.len() / full.heads.len();
        let max_tokens = x.shape.max_pages as u64 * case.spec.page_size as u64;
        assert_eq!(samples as u64, seed_samples(max_tokens));
        let hq = case.q_heads() as usize;
        for (h, head) in full.heads.iter().enumerate() {
            let len = x.seq_lens[h / hq] as u64;
            let want: Vec<f64> = (0..samples as u64)
                .map(|j| {
                    let t = seed_position(j, samples as u64);
                    if t < len {
                        head.z[t as usize]
                    } else {
                        f64::NEG_INFINITY
                    }
                })
                .collect();
            for (j, (&got, &w)) in z[h * samples..][..samples].iter().zip(&want).enumerate() {
                let ok = if w == f64::NEG_INFINITY {
                    got == w
                } else {
                    (got - w).abs() <= 1e-5 * w.abs().max(1.0)
                };
                assert!(ok, "{:?} head {h} sample {j}: {got} vs {w}", case.data);
            }
            let want = host_estimate(&want, case.spec.decode.alpha);
            let got = seeds[h];
            let ok = if want == f64::NEG_INFINITY {
                got == want
            } else {
                (got - want).abs() <= 1e-4 * want.abs().max(1.0)
            };
            assert!(ok, "{:?} head {h}: estimate {got} vs {want}", case.data);
        }
        if i == long_case {
            // Both heads take a seed, each capped by its own rank.
            assert!(seeds.iter().all(|s| s.is_finite()), "{seeds:?}");
        } else {
            // The long sequence takes a seed, the short one none.
            assert!(seeds[0].is_finite() && seeds[seeds.len() - 1] == f64::NEG_INFINITY);
        }
    }
}

/// The sketch sums on the integer tensor cores (`_im`) are the `dp4a` chains' integers, so a
/// pass with them writes what the pass without them writes, to the bit: the step's outputs and
/// the candidates of the check's rerun without rescoring (sketch bounds), over the full walk
/// and the page-pruned one (whose rest walk takes `_im`, its selected walk `dp4a`). GQA 1, 2
/// and 4 (lanes `t ≥ G` hold zero columns), d = 32, 64 and 128 (one to four k-steps), ALiBi,
/// seeded shared bounds, the sketch's worst-case keys; each `_im` run also passes the checks.
#[test]
fn sketch_sums_on_the_tensor_cores_match_dp4a_to_the_bit() {
    use entkv_kernels::suite::run_interp;
    let case = |d: u32, g: u32, p: u32, dtype: DType, alibi: bool, lens: Vec<u32>, data: KeyData| PagedCase {
        spec: PagedSpec::new(DecodeSpec::new(1.5, d, g, dtype).unwrap(), p, alibi, 4).unwrap(),
        kv_heads: 2,
        seq_lens: lens,
        seed: 31 + d as u64 + g as u64,
        data,
        spare_pages: 2,
    };
    let cases = [
        case(32, 1, 16, DType::F16, false, vec![700, 17], KeyData::SketchWorst),
        case(32, 2, 16, DType::BF16, true, vec![1300, 33], KeyData::Normal),
        case(64, 2, 32, DType::BF16, false, vec![900], KeyData::Peaked),
        case(32, 4, 16, DType::F16, false, vec![500], KeyData::Ties),
        case(128, 4, 32, DType::BF16, false, vec![1500, 90], KeyData::Normal),
    ];
    let buffers = [
        "out",
        "tau",
        "support",
        "kept",
        "cand_lb",
        "cand_ub",
        "cand_idx",
        "cand_count",
    ];
    for case in cases {
        let plain = DenseTile {
            share_bound: true,
            seed: case.spec.decode.group != 3,
            ..small_tile(&case.spec, 1, 2)
        };
        for (plain, pruned) in [
            (plain, false),
            (
                DenseTile {
                    pruned_walk: plain.seed,
                    ..plain
                },
                true,
            ),
        ] {
            let im = DenseTile {
                sketch_mma: true,
                ..plain
            };
            let run = |tile: DenseTile| {
                let check = CertifiedCheck {
                    case: case.clone(),
                    tile,
                    sm_count: 1,
                    pruned,
                };
                let o = run_interp(&check).unwrap();
                assert!(o.passed, "{}: {}", check.name(), o.detail);
                let mut p = check.program().unwrap();
                p.run_interp().unwrap();
                buffers.map(|b| {
                    p.get(b)
                        .to_f64_vec()
                        .iter()
                        .map(|x| x.to_bits())
                        .collect::<Vec<u64>>()
                })
            };
            let (a, b) = (run(plain), run(im));
            for (name, (a, b)) in buffers.iter().zip(a.iter().zip(&b)) {
                let differ = a.iter().zip(b).filter(|(x, y)| x != y).count();
                assert_eq!(
                    differ,
                    0,
                    "{name}: {differ} of {} differ between {} and {} (pruned {pruned})",
                    a.len(),
                    plain.tag(),
                    im.tag()
                );
            }
        }
    }
}
