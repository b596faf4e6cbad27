//! The top-k path (box scoring, radix top-k selection, softmax top-k decode) in the CPU
//! interpreter against its float64 references: every `entkv_kernels::topk::checks()` case.
//! The checks are split over a few tests so the harness can run them in parallel.

use entkv_kernels::suite::interp_failures;
use entkv_kernels::topk::checks;

/// Run every `parts`-th check starting at `part`; print each outcome, fail on any miss.
fn run_part(part: usize, parts: usize) {
    let mine = checks()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % parts == part)
        .map(|(_, c)| c);
    let failures = interp_failures(mine);
    assert!(failures.is_empty(), "failed: {failures:#?}");
}

#[test]
fn topk_checks_part_0() {
    run_part(0, 3);
}

#[test]
fn topk_checks_part_1() {
    run_part(1, 3);
}

#[test]
fn topk_checks_part_2() {
    run_part(2, 3);
}
