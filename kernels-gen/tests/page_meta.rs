//! The page metadata kernels in the CPU interpreter: every `page_meta` check of the suite (the
//! same checks `entkv gpu-check` runs on the GPU) must pass.

use entkv_kernels::page_meta::checks;
use entkv_kernels::suite::interp_failures;

#[test]
fn page_meta_checks_pass_in_the_interpreter() {
    let failed = interp_failures(checks());
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

#[test]
fn page_meta_checks_are_registered_in_the_suite() {
    let all: Vec<String> = entkv_kernels::suite::all_checks()
        .iter()
        .map(|c| c.name())
        .collect();
    for c in checks() {
        assert!(
            all.contains(&c.name()),
            "{} is not in suite::all_checks()",
            c.name()
        );
    }
}
