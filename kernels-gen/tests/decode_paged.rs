//! The paged decodes (`decode_dense`, `decode_sparse`) in the interpreter against float64.

use entkv_kernels::decode_checks::checks;
use entkv_kernels::suite::run_interp;

#[test]
fn paged_decodes_match_reference() {
    let mut failed = Vec::new();
    for c in checks() {
        let o = run_interp(c.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", c.name()));
        println!(
            "{} {}: {}",
            if o.passed { "PASS" } else { "FAIL" },
            c.name(),
            o.detail
        );
        if !o.passed {
            failed.push(c.name());
        }
    }
    assert!(failed.is_empty(), "failed: {failed:#?}");
}
