//! The Gaussian selector's modules (`page_score` moments, `select_gaussian`) compile to PTX
//! for sm_90 that `ptxas` assembles with no spills and no local memory, for every value of
//! every specialization axis (α, head dim, page size, dtype, GQA group, ALiBi).
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_abi::{DType, DecodeSpec, PagedSpec, SUPPORTED_GROUPS, SUPPORTED_HEAD_DIMS, SUPPORTED_PAGE_SIZES};
use entkv_kernels::gaussian::modules;
use entkv_tests::{assemble_module, assert_no_spills, ptxas_available};

fn spec(alpha: f64, d: u32, g: u32, dtype: DType, p: u32, alibi: bool) -> PagedSpec {
    PagedSpec::new(DecodeSpec::new(alpha, d, g, dtype).unwrap(), p, alibi, 4).unwrap()
}

/// Each axis value at least once, around the paper's spec (α = 1.5, d = 32, P = 16, f16),
/// with and without ALiBi where it changes the code (the mixture solve, the slopes).
fn specs() -> Vec<PagedSpec> {
    let mut v = Vec::new();
    for alibi in [false, true] {
        for alpha in [1.5, 2.0, 4.0 / 3.0, 1.25] {
            v.push(spec(alpha, 32, 1, DType::F16, 16, alibi));
        }
    }
    for d in SUPPORTED_HEAD_DIMS {
        v.push(spec(1.5, d, 1, DType::BF16, 16, false));
        v.push(spec(1.25, d, 8, DType::BF16, 16, true));
    }
    for p in SUPPORTED_PAGE_SIZES {
        v.push(spec(1.5, 64, 2, DType::F16, p, true));
    }
    for g in SUPPORTED_GROUPS {
        v.push(spec(1.5, 32, g, DType::F16, 16, false));
        v.push(spec(4.0 / 3.0, 128, g, DType::BF16, 32, true));
    }
    v
}

#[test]
fn gaussian_modules_assemble_without_spills() {
    let check_ptxas = ptxas_available();
    let mut failures = Vec::new();
    for spec in specs() {
        for module in modules(&spec).unwrap() {
            failures.extend(assemble_module(&module, check_ptxas));
        }
    }
    assert_no_spills(failures);
}
