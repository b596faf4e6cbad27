//! The top-k path (box scoring, radix top-k selection, softmax top-k decode) in the CPU
//! interpreter against its float64 references: every `entkv_kernels::topk::checks()` case.
//! The checks are split over a few tests so the harness can run them in parallel.

use entkv_abi::{DType, DecodeSpec, PagedSpec, SelectTopkTile};
use entkv_kernels::suite::{interp_failures, KernelCheck};
use entkv_kernels::topk::checks;
use entkv_kernels::topk::checks::{ScorePattern, SelectCheck};

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

/// How many times `select_topk` reads a streamed head's scores (bytes loaded ÷ the head's
/// scores), on 70000 scored pages (a 1.12M-token sequence) with the default tile, keeping 25%.
fn score_sweeps(pattern: ScorePattern) -> f64 {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    score_sweeps_on(pattern, SelectTopkTile::default_for(&spec))
}

/// As [`score_sweeps`], on `tile`.
fn score_sweeps_on(pattern: ScorePattern, tile: SelectTopkTile) -> f64 {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    let check = SelectCheck {
        label: "sweeps",
        spec,
        kv_heads: 1,
        seq_lens: vec![16 * 70_001 - 3],
        pattern,
        budget_pages: 17_500,
        tile,
        seed: 9,
    };
    let mut p = check.program().unwrap();
    let stats = p.run_interp().unwrap();
    let outcome = check.verify(&p);
    assert!(outcome.passed, "{pattern:?}: {}", outcome.detail);
    let read = stats[0]
        .buffers
        .iter()
        .find(|b| b.name == "page_scores")
        .unwrap()
        .bytes_loaded;
    read as f64 / (70_000.0 * 4.0)
}

/// A streamed head whose sample pivots bracket the k-th score reads its scores about twice
/// (the gather and the compaction, each loading whole sweeps, plus a 4096-key sample); one whose sample
/// misleads streams every search pass as well, and is still exact.
#[test]
fn streamed_heads_read_two_sweeps_when_the_pivots_hold() {
    let held = score_sweeps(ScorePattern::Random);
    assert!(
        (2.0..2.2).contains(&held),
        "pivots held: {held:.3} sweeps of the scores"
    );
    let misled = score_sweeps(ScorePattern::SampleDecoy);
    assert!(misled >= 4.0, "pivots misled: {misled:.3} sweeps of the scores");
    println!("score sweeps: {held:.3} with the pivots, {misled:.3} without");
}

/// A sample of 2048 keys (`t256_i8`) on that head would leave about 4200 keys between its
/// pivots, more than the gather keeps: the head skips the pivots and streams its passes and the
/// compaction (4.1 sweeps of the scores). Taking the pivots would read ~2.1 sweeps when they
/// fit and more than 5 (sample, gather, then the stream) when they do not.
#[test]
fn thin_tiles_skip_pivots_that_would_not_fit() {
    let tile = SelectTopkTile {
        threads: 256,
        items_per_thread: 8,
    };
    let read = score_sweeps_on(ScorePattern::Random, tile);
    assert!((3.5..4.5).contains(&read), "{read:.4} sweeps of the scores");
    println!("score sweeps on t256_i8: {read:.3}");
}
