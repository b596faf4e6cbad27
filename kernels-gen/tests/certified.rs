//! Certified-exact decode in the interpreter: equal to full-cache float64 entmax on every input.

use entkv_kernels::certified_checks::checks;
use entkv_kernels::suite::run_interp;

#[test]
fn certified_decode_is_exact() {
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
