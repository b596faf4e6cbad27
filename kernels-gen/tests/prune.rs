//! The page pruning's selection (`prune_mark` + `select_pruned`) in the CPU interpreter on
//! synthetic bounds: every `entkv_kernels::prune_checks::checks()` case.

use entkv_kernels::prune_checks::checks;
use entkv_kernels::suite::interp_failures;

#[test]
fn prune_checks() {
    let failures = interp_failures(checks());
    assert!(failures.is_empty(), "failed: {failures:#?}");
}
