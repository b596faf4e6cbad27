//! Every kernel module of every supported specialization compiles to PTX for sm_90 that
//! `ptxas` assembles with no spills and no local memory.
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_abi::{DType, DecodeSpec, PagedSpec, SUPPORTED_GROUPS, SUPPORTED_HEAD_DIMS, SUPPORTED_PAGE_SIZES};
use entkv_kernels::modules_for;
use entkv_tests::{assemble_module, assert_no_spills, on_two_workers, ptxas_available};

/// Every (α, head dim, page size) of the matrix with the default dtype (f16), GQA 1, no
/// ALiBi, 4-bit sketch; plus each other axis value once (bf16, ALiBi, 8-bit sketch, every GQA
/// group), two specs at the sparse decode's register cap, and the `gqa` and `wide` workloads
/// (also with f32 caches).
fn specs() -> Vec<PagedSpec> {
    let mut v = Vec::new();
    for alpha in [1.5, 2.0, 4.0 / 3.0, 1.25] {
        for d in SUPPORTED_HEAD_DIMS {
            for p in SUPPORTED_PAGE_SIZES {
                v.push(
                    PagedSpec::new(DecodeSpec::new(alpha, d, 1, DType::F16).unwrap(), p, false, 4).unwrap(),
                );
            }
        }
    }
    for g in SUPPORTED_GROUPS {
        v.push(PagedSpec::new(DecodeSpec::new(1.5, 32, g, DType::BF16).unwrap(), 16, true, 8).unwrap());
    }
    // Where the sparse decode's page lookahead spilled (kernels-gen/src/decode.rs keeps it off
    // there): ALiBi at d = 64, and GQA 2 at d = 128.
    v.push(PagedSpec::new(DecodeSpec::new(1.5, 64, 1, DType::BF16).unwrap(), 32, true, 8).unwrap());
    v.push(PagedSpec::new(DecodeSpec::new(1.5, 128, 2, DType::F16).unwrap(), 16, false, 4).unwrap());
    // BENCH.md's `gqa` and `wide` specs (wide at its wide-row default tiles), at both sketch
    // widths (4 bits is the default).
    for bits in [8, 4] {
        v.push(PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::BF16).unwrap(), 16, false, bits).unwrap());
        v.push(
            PagedSpec::new(
                DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(),
                32,
                false,
                bits,
            )
            .unwrap(),
        );
    }
    // f32 caches at those two shapes: their defaults keep FMA tiles (the tensor cores take no
    // f32), and the wide certified pass keeps the 8-bit layout's lanes.
    v.push(PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::F32).unwrap(), 16, false, 4).unwrap());
    v.push(PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::F32).unwrap(), 32, false, 4).unwrap());
    v
}

/// Compile and assemble every module of `specs`; returns the kernels with spills or local memory.
/// Kernels whose IR is identical to one already checked (those α, GQA or ALiBi don't change,
/// e.g. `page_meta`) are assembled once.
fn check_specs(specs: &[PagedSpec], check_ptxas: bool) -> Vec<String> {
    let mut failures = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for spec in specs {
        for mut module in modules_for(spec).unwrap() {
            module.kernels.retain(|k| {
                let mut ir = k.clone();
                ir.name.clear();
                seen.insert(serde_json::to_string(&ir).expect("IR serializes"))
            });
            if !module.kernels.is_empty() {
                failures.extend(assemble_module(&module, check_ptxas));
            }
        }
    }
    failures
}

/// `check` over `specs` dealt out to two workers, the failures of both.
fn over_specs(specs: &[PagedSpec], check: impl Fn(&[PagedSpec]) -> Vec<String> + Sync) -> Vec<String> {
    on_two_workers(|w, workers| {
        let mine: Vec<PagedSpec> = specs.iter().skip(w).step_by(workers).copied().collect();
        check(&mine)
    })
}

#[test]
fn every_module_assembles_without_spills() {
    let check_ptxas = ptxas_available();
    assert_no_spills(over_specs(&specs(), |mine| check_specs(mine, check_ptxas)));
}

/// The certified family at its default tile's shape without and with head-bound sharing, and
/// seeded (`entkv_abi::seed`: the shared bounds start at an estimate; the tuner times all three;
/// and seeded on the page-pruned walk, `_pw`, at that walk's default shape),
/// assembles without spills on every 4-bit spec above with GQA ≤ 4 (sharing refuses larger
/// groups: at GQA 8 the rest walk spilled), and GQA 2 with ALiBi, GQA 3 and 4.
#[test]
fn certified_with_shared_head_bounds_assembles_without_spills() {
    use entkv_abi::{DenseTile, KernelFamily, TileConfig};
    use entkv_kernels::{family_kernels, KernelModule};
    let check_ptxas = ptxas_available();
    let mut specs: Vec<PagedSpec> = specs().into_iter().filter(|s| s.sketch_token_grid()).collect();
    specs.push(PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::BF16).unwrap(), 16, true, 4).unwrap());
    specs.push(PagedSpec::new(DecodeSpec::new(1.5, 32, 3, DType::F16).unwrap(), 16, true, 4).unwrap());
    specs.push(PagedSpec::new(DecodeSpec::new(1.5, 32, 4, DType::BF16).unwrap(), 32, false, 4).unwrap());
    specs.push(PagedSpec::new(DecodeSpec::new(1.5, 64, 4, DType::BF16).unwrap(), 16, false, 4).unwrap());
    // α only changes constants: one α is enough.
    specs.retain(|s| s.decode.alpha.value() == 1.5 && s.decode.group <= entkv_abi::MAX_SHARE_BOUND_GROUP);
    let failures = over_specs(&specs, |mine| {
        let mut failures = Vec::new();
        for spec in mine {
            // The default's shape alone, with shared bounds, and seeded (the default is one of
            // them: `wide`'s is seeded). Unseeded tiles serve the page-pruned walk too, so they
            // take its default's shape (`wide`: one token a lane, where two spill its pass), and
            // so does the seeded tile that serves that walk (`_pw`).
            // The pruned default is `_seed_pw` where the full one is seeded: its shape unseeded.
            let def = DenseTile::default_certified(spec);
            let pruned = DenseTile {
                seed: false,
                pruned_walk: false,
                ..DenseTile::default_certified_pruned(spec)
            };
            let tiles = [(false, false), (true, false), (true, true)].map(|(share_bound, seed)| DenseTile {
                share_bound,
                seed,
                ..if seed { def } else { pruned }
            });
            let pruned_walk = DenseTile {
                share_bound: true,
                seed: true,
                pruned_walk: true,
                ..pruned
            };
            let tiles = tiles.into_iter().chain([pruned_walk]);
            for tile in tiles {
                let tile = TileConfig::Dense(tile);
                let module = KernelModule {
                    name: "decode_certified",
                    kernels: family_kernels(KernelFamily::DecodeCertified, spec, &tile).unwrap(),
                };
                failures.extend(assemble_module(&module, check_ptxas));
            }
        }
        failures
    });
    assert_no_spills(failures);
}
