//! The Gaussian-aware page selector's suite checks in the CPU interpreter (with its
//! sanitizer) against the float64 reference: every check of `gaussian::checks()` must pass.

use entkv_kernels::gaussian::checks;
use entkv_kernels::suite::run_interp;

#[test]
fn gaussian_selector_checks_pass_in_the_interpreter() {
    let mut failed = Vec::new();
    for c in checks() {
        let name = c.name();
        let start = std::time::Instant::now();
        match run_interp(c.as_ref()) {
            Ok(o) => {
                println!(
                    "{} {name} ({:.1}s): {}",
                    if o.passed { "ok  " } else { "FAIL" },
                    start.elapsed().as_secs_f64(),
                    o.detail
                );
                if !o.passed {
                    failed.push(name);
                }
            }
            Err(e) => {
                println!("ERR  {name}: {e}");
                failed.push(name);
            }
        }
    }
    assert!(failed.is_empty(), "failed: {failed:#?}");
}
