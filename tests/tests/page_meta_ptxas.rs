//! The page metadata module (`page_meta_build`, `page_meta_update`) compiles to PTX for sm_90
//! that `ptxas` assembles with no spills and no stack, for every (head dim, page size, K dtype,
//! sketch width) with the default tile, and with the register-heaviest tile (the most chunks of
//! keys per thread) for every (head dim, page size).
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_abi::{
    DType, DecodeSpec, MetaTile, PagedSpec, MAX_META_CHUNKS_PER_THREAD, SUPPORTED_HEAD_DIMS,
    SUPPORTED_PAGE_SIZES, SUPPORTED_SKETCH_BITS,
};
use entkv_kernels::page_meta::{module, modules};
use entkv_tests::{assemble_module, assert_no_spills, ptxas_available};

#[test]
fn page_meta_assembles_without_spills() {
    let check_ptxas = ptxas_available();
    let mut failures = Vec::new();
    for d in SUPPORTED_HEAD_DIMS {
        for p in SUPPORTED_PAGE_SIZES {
            for dtype in [DType::F16, DType::BF16] {
                for bits in SUPPORTED_SKETCH_BITS {
                    let spec =
                        PagedSpec::new(DecodeSpec::new(1.5, d, 1, dtype).unwrap(), p, false, bits).unwrap();
                    for m in modules(&spec).unwrap() {
                        failures.extend(assemble_module(&m, check_ptxas));
                    }
                    // The fewest threads a tile may have, the most key registers per thread
                    // (bf16 at 8 bits has the most quantizer state; the others are alike).
                    let chunks = MetaTile::chunks(&spec);
                    let heavy = MetaTile {
                        threads: (chunks / MAX_META_CHUNKS_PER_THREAD).max(32),
                    };
                    let heaviest = dtype == DType::BF16 && bits == 8;
                    if heaviest && heavy != MetaTile::default_for(&spec) && heavy.check(&spec).is_ok() {
                        failures.extend(assemble_module(&module(&spec, &heavy).unwrap(), check_ptxas));
                    }
                }
            }
        }
    }
    assert_no_spills(failures);
}
