//! The paged decodes (`decode_dense`, `decode_sparse`) in the interpreter against float64.

use entkv_kernels::decode_checks::checks;
use entkv_kernels::suite::interp_failures;

#[test]
fn paged_decodes_match_reference() {
    let failed = interp_failures(checks());
    assert!(failed.is_empty(), "failed: {failed:#?}");
}
