//! Certified-exact decode in the interpreter: equal to full-cache float64 entmax on every input.

use entkv_kernels::certified_checks::checks;
use entkv_kernels::suite::interp_failures;

#[test]
fn certified_decode_is_exact() {
    let failed = interp_failures(checks());
    assert!(failed.is_empty(), "failed: {failed:#?}");
}
