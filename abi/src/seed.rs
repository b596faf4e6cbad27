//! A seeded certified pass ([`crate::DenseTile::seed`]): each query head's shared threshold
//! bound starts at an *estimate* of its threshold instead of −∞, and the step checks the
//! estimate afterwards.
//!
//! Why: a certified pass rescores from K every token whose sketch bound clears its running
//! lower bound on τ. Plans that cut a head into many splits (`wide`: 37 a head at 1M) leave each
//! warp a few thousand tokens, whose bound stays far below the head's τ; about half of `wide`'s
//! tokens were rescored (results/2026-12-01-exact-finish); with shared bounds (`_h`) the
//! interpreter still counts 24% of K read at 1M, seeded 12% (`results/2026-12-05-seed/`, CPU
//! only).
//!
//! The estimate `s` comes from exact scores of one token in [`SEED_STRIDE`] (in runs of
//! [`seed_run`] adjacent tokens, one run a `run · SEED_STRIDE` tokens, its slot scrambled):
//! the smaller of the [`seed_rank`]-th largest sample
//! and the threshold of the samples each weighted [`SEED_WEIGHT`]`·`[`SEED_STRIDE`] (the
//! sample standing for the tokens it skipped, discounted). Neither is a bound, so the step
//! verifies: with `K` the kept set, `τ(K) ≤ τ` always (K ⊆ all tokens), and
//!
//! - if `s ≤ τ`, every filter the pass used was ≤ τ (the others are rigorous bounds), so `K`
//!   holds the support and `τ(K) = τ ≥ s`;
//! - if `s > τ`, then `τ(K) ≤ τ < s`.
//!
//! So `τ(K) ≥ s` holds exactly when the output is exact. `certified_verify` checks it (less the
//! solver's tolerance, as the finish pass cuts) and flags the (sequence, KV head) pair
//! otherwise; the same score pass and finish then run again for the flagged pairs only (the
//! repair), and every other CTA of those launches returns at once. The repair's shared bounds
//! start at `τ(K)` less the tolerance: `τ(K) ≤ τ` always, so it is a rigorous bound, and a
//! near miss repairs nearly as cheaply as an exact estimate would have run. No host sync: the
//! repair launches always run, and cost a few µs when nothing is flagged.

use crate::pipeline::certified_entry_names;
use crate::{DenseTile, PagedSpec};

/// One sample a stride of this many tokens.
pub const SEED_STRIDE: u32 = 64;

/// The estimate is at most the [`seed_rank`]-th largest sample score (counted with
/// multiplicity): for the estimate to pass τ, that many sampled tokens would have to lie in
/// the support. With `s` support tokens a head samples about Poisson(s/64) of them, and `s`
/// grows with the sequence (`paper`: ~25 at 32k, ~45–54 at 1M). At `paper` 1M the 4th largest
/// overshot τ in 0.6% of heads in the float model and flagged 2 of 192 pairs on the H200, each
/// repair a tail of a few CTAs (0.2 ms, results/2026-12-05-long-select/5-checks-wide-default);
/// the 6th overshot in none of 960 heads (6-seed-rank/seed_model_paper.txt) and took `paper`'s
/// seeded step 1.427 → 1.241 ms at 1M. But on short heads the 6th largest of a few hundred
/// samples lies far below τ: `wide`'s certified step at 32k went 0.226 → 0.248 ms on the same
/// tile, `gqa`'s at 128k 0.197 → 0.208 (results/2026-12-05-defaults/2-bench), while at 1M
/// both gained (`gqa` 0.833 → 0.752). At 128k (2048 samples) the 4th repaired too often: an
/// H100 A/B of `wide`'s certified step over 46 input draws (results/2026-12-07-h200/4-either,
/// 2026-12-07-seed-gap/2-ab-more) repaired 13 draws under the 4th (+80 µs each; mean 0.2625 ms
/// over the 40 draws of `2-ab-more`), 2 under the 5th (mean 0.2498) and none under the 6th
/// (mean 0.2516, the slowest draw 0.259 ms against the 4th's 0.330). The 6th costs ~13 µs on a
/// draw the 4th does not repair, but an engine's steps are fresh draws, and `gqa`'s 96 pairs a
/// step repair more often than `wide`'s 32. So the 4th below [`SEED_LONG_SAMPLES`] valid
/// samples (below 128k tokens: at 32k the 6th took `wide` 0.226 → 0.248 ms; 64k is unmeasured),
/// the 6th from there.
pub fn seed_rank(valid_samples: u64) -> u32 {
    if valid_samples >= SEED_LONG_SAMPLES as u64 {
        SEED_RANK_LONG
    } else {
        SEED_RANK_SHORT
    }
}

/// The rank cap of heads with fewer than [`SEED_LONG_SAMPLES`] samples.
pub const SEED_RANK_SHORT: u32 = 4;
/// The rank cap of heads with at least [`SEED_LONG_SAMPLES`] samples.
pub const SEED_RANK_LONG: u32 = 6;
/// Valid samples (a sequence of 64 times as many tokens: 128k) from which a head's estimate
/// takes [`SEED_RANK_LONG`] (4096, 256k, until 2026-12-07).
pub const SEED_LONG_SAMPLES: u32 = 2048;

// A seeded head has at least as many samples as its rank cap, and the cap only grows.
const _: () = assert!(SEED_RANK_SHORT < SEED_RANK_LONG && SEED_MIN_SAMPLES >= SEED_RANK_LONG);

/// Each sample stands for `SEED_WEIGHT · SEED_STRIDE` tokens in the weighted threshold: less
/// than the stride it skips, so the estimate errs low (slower, never wrong). In the float model
/// (iid keys, d = 128, 256k tokens, 12 heads at each of four q scales) weights of 1 overshot τ
/// in 0–50% of the heads, 0.5 alone in up to 25%, 0.5 with the rank cap in none.
pub const SEED_WEIGHT: f64 = 0.5;

/// Odd multiplier that scrambles a run's slot within its block (`r·37 mod 64` runs of
/// [`seed_run`] tokens), so samples are not all the same slot of their pages.
pub const SEED_SCRAMBLE: u64 = 37;

/// From [`SEED_RUN_MIN_SAMPLES`] samples a head, samples come in runs of this many adjacent
/// tokens, each run starting at a multiple of [`SEED_RUN`] (so inside one page: pages hold 16,
/// 32 or 64 tokens). A run's K rows are contiguous in the pool, so a warp reads whole 256-byte
/// stretches at d = 32, where single scattered 64-byte rows moved 1.45 TB/s on an H100 (the
/// scores kernel: 139 µs of `paper`'s seeded step at 1M, results/2026-12-06-gate/1-ab). On iid
/// keys the estimate's statistics are the same; where neighbouring keys are alike a run counts
/// for less than four samples.
pub const SEED_RUN: u32 = 4;

/// Samples a head (tokens / [`SEED_STRIDE`]) from which they come in runs of [`SEED_RUN`];
/// fewer come one token a run. Short heads have few samples, and on page-coherent keys a run
/// of four is nearly one sample: at `gqa` 32k (512 samples) the seeded tiles' tuner times
/// (iid and `peaked` keys) were 4–6% shorter with runs of one, while at `paper` 128k (2048,
/// iid) runs of four took the scores kernel from 21 to 9 µs and the step from 0.307 to 0.262
/// ms (results/2026-12-06-bound-reads/1-ab, 2-ab, an H100).
pub const SEED_RUN_MIN_SAMPLES: u64 = 2048;

/// Tokens a run of samples for a head of `samples` samples: [`SEED_RUN`] from
/// [`SEED_RUN_MIN_SAMPLES`], else 1.
pub fn seed_run(samples: u64) -> u64 {
    if samples >= SEED_RUN_MIN_SAMPLES {
        SEED_RUN as u64
    } else {
        1
    }
}

// The kernels take slots and run offsets with masks, and a run must not cross the smallest page.
const _: () = assert!(SEED_STRIDE.is_power_of_two() && SEED_RUN.is_power_of_two() && 16 % SEED_RUN == 0);

/// Threads a block of the seed kernels (`certified_seed_scores`, `certified_seed`,
/// `certified_verify`).
pub const SEED_THREADS: u32 = 256;

/// Fewer valid samples than this and the estimate is −∞ (no seed): the threshold of a handful
/// of samples says little. Sequences of at least 16 · [`SEED_STRIDE`] = 1024 tokens are seeded
/// (four times [`SEED_RANK_SHORT`]).
pub const SEED_MIN_SAMPLES: u32 = 16;

/// Samples a head takes for sequences of at most `max_tokens` tokens (the `seed_z` row length).
pub fn seed_samples(max_tokens: u64) -> u64 {
    max_tokens.div_ceil(SEED_STRIDE as u64).max(1)
}

/// Token position of sample `j` of a head of `samples` samples, in run `r = j / run`
/// (`run` = [`seed_run`]`(samples)`): `r·run·stride + (r·scramble mod stride)·run + j mod run`.
/// The kernels compute the same in i64; a position at or past the sequence's length is no
/// sample.
pub fn seed_position(j: u64, samples: u64) -> u64 {
    let (s, run) = (SEED_STRIDE as u64, seed_run(samples));
    let r = j / run;
    r * run * s + (r * SEED_SCRAMBLE) % s * run + j % run
}

/// Whether token `t` is a sample's position ([`seed_position`] of some `j`) for heads of
/// `samples` samples: inside the run of its block.
pub fn is_seed_position(t: u64, samples: u64) -> bool {
    let run = seed_run(samples);
    let start = seed_position(t / (run * SEED_STRIDE as u64) * run, samples);
    (start..start + run).contains(&t)
}

/// Entry name of the sample pass of a seeded tile that serves the page-pruned walk
/// ([`crate::DenseTile::pruned_walk`]): `certified_seed_scores_pruned__…`, the scores kernel
/// with `sel_count` after `seq_lens`, writing no samples (−∞, so no estimate) for the pairs the
/// selected walk takes (`crate::pipeline::selected_walk_takes`).
pub fn seed_pruned_scores_entry(spec: &PagedSpec, tile: &DenseTile) -> String {
    let [scores, _, _] = seed_entry_names(spec, tile);
    scores.replacen("certified_seed_scores__", "certified_seed_scores_pruned__", 1)
}

/// Entry names of the seed kernels: `certified_seed_scores__…`, `certified_seed__…`,
/// `certified_verify__…` (the tile's suffix, as the pass's).
pub fn seed_entry_names(spec: &PagedSpec, tile: &DenseTile) -> [String; 3] {
    let (select, _) = certified_entry_names(spec, tile);
    let suffix = select.trim_start_matches("select_certified__");
    [
        format!("certified_seed_scores__{suffix}"),
        format!("certified_seed__{suffix}"),
        format!("certified_verify__{suffix}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_positions_cover_every_block_with_one_run() {
        assert_eq!(seed_run(SEED_RUN_MIN_SAMPLES - 1), 1);
        assert_eq!(seed_run(SEED_RUN_MIN_SAMPLES), SEED_RUN as u64);
        let s = SEED_STRIDE as u64;
        for samples in [SEED_RUN_MIN_SAMPLES - 1, SEED_RUN_MIN_SAMPLES] {
            let run = seed_run(samples);
            let mut slots = vec![false; s as usize];
            for r in 0..s {
                let first = seed_position(r * run, samples);
                assert_eq!(first / (run * s), r, "run {r} lies in its own block");
                assert_eq!(first % run, 0, "run {r} starts at a multiple of the run");
                slots[(first % (run * s) / run) as usize] = true;
                for i in 0..run {
                    let t = seed_position(r * run + i, samples);
                    assert_eq!(t, first + i, "a run's samples are adjacent");
                    assert_eq!(t / 16, first / 16, "a run stays in its page");
                    assert!(is_seed_position(t, samples));
                }
                let next = seed_position((r + 1) * run, samples);
                assert!(!is_seed_position(first + run, samples) || first + run == next);
            }
            assert!(
                slots.iter().all(|&x| x),
                "the scramble visits every slot ({samples} samples)"
            );
            let sampled = (0..64 * s).filter(|&t| is_seed_position(t, samples)).count() as u64;
            assert_eq!(sampled, 64, "one token in a stride ({samples} samples)");
        }
        assert_eq!(seed_samples(1), 1);
        assert_eq!(seed_samples(64), 1);
        assert_eq!(seed_samples(65), 2);
        assert_eq!(seed_rank(SEED_LONG_SAMPLES as u64 - 1), SEED_RANK_SHORT);
        assert_eq!(seed_rank(SEED_LONG_SAMPLES as u64), SEED_RANK_LONG);
    }
}
