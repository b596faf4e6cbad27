//! The Gaussian-aware page selector's suite checks in the CPU interpreter (with its
//! sanitizer) against the float64 reference: every check of `gaussian::checks()` must pass.

use entkv_kernels::gaussian::checks;
use entkv_kernels::suite::interp_failures;

#[test]
fn gaussian_selector_checks_pass_in_the_interpreter() {
    let failed = interp_failures(checks());
    assert!(failed.is_empty(), "failed: {failed:#?}");
}
