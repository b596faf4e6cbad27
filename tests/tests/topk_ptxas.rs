//! The top-k path's modules (`page_score` box scorer, `select_topk`, `decode_softmax_topk`)
//! compile to PTX for sm_90 that `ptxas` assembles with no spills and no stack, for every value
//! of every specialization axis with the default tiles, plus the register-heaviest combinations
//! (largest head dim with the largest GQA groups and ALiBi).
//!
//! Without ptxas the test prints why and passes, unless `ENTKV_REQUIRE_PTXAS=1` (set by CI).

use entkv_abi::{DType, DecodeSpec, PagedSpec, SUPPORTED_GROUPS, SUPPORTED_HEAD_DIMS, SUPPORTED_PAGE_SIZES};
use entkv_kernels::topk::modules;
use entkv_tests::{assemble_module, assert_no_spills, ptxas_available};

fn spec(alpha: f64, d: u32, g: u32, p: u32, dtype: DType, alibi: bool) -> PagedSpec {
    PagedSpec::new(DecodeSpec::new(alpha, d, g, dtype).unwrap(), p, alibi, 4).unwrap()
}

fn specs() -> Vec<PagedSpec> {
    use DType::{BF16, F16};
    // Each axis value at least once around the paper's spec (α = 1.5, d = 32, P = 16, f16).
    let mut v = Vec::new();
    for alpha in [1.5, 2.0, 4.0 / 3.0, 1.25] {
        v.push(spec(alpha, 32, 1, 16, F16, false));
    }
    for d in SUPPORTED_HEAD_DIMS {
        v.push(spec(1.5, d, 1, 16, BF16, true));
    }
    for p in SUPPORTED_PAGE_SIZES {
        v.push(spec(1.5, 32, 2, p, F16, true));
    }
    for g in SUPPORTED_GROUPS {
        v.push(spec(1.5, 32, g, 16, F16, false));
        // Registers grow with the group (q and the running outputs of every head): every group
        // at the larger head dims too.
        v.push(spec(1.5, 64, g, 32, F16, true));
        v.push(spec(1.5, 128, g, 64, BF16, true));
    }
    v.push(spec(1.5, 128, 3, 16, F16, false));
    v
}

#[test]
fn topk_modules_assemble_without_spills() {
    let check_ptxas = ptxas_available();
    let mut failures = Vec::new();
    for spec in specs() {
        for module in modules(&spec).unwrap() {
            failures.extend(assemble_module(&module, check_ptxas));
        }
    }
    assert_no_spills(failures);
}
