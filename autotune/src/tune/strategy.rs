//! Which candidates of a space are evaluated, and in what order.
//!
//! Every strategy evaluates the default first, so the default always competes and a capped or
//! interrupted search still has it. The order is deterministic: exhaustive and halving keep the
//! space's order; random shuffles with a generator seeded from `--seed` and the family name
//! (not the bucket), so every bucket samples the same tiles and each is compiled only once.

use entkv_abi::{KernelFamily, TileConfig};
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// `--strategy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Every valid point, each timed with the full repetitions.
    Exhaustive,
    /// A seeded sample of `--max-evals` points (all of them, shuffled, without a cap).
    Random,
    /// Successive halving: every point timed with few repetitions, then the better half
    /// re-timed with twice as many, until at most three remain.
    Halving,
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Exhaustive => "exhaustive",
            Strategy::Random => "random",
            Strategy::Halving => "halving",
        }
    }

    /// Repetitions of the first timing of each candidate: halving starts cheap (a quarter of
    /// `reps`, at least 2) and spends the rest on the survivors.
    pub fn first_reps(self, reps: u32) -> u32 {
        match self {
            Strategy::Halving => (reps / 4).max(2),
            Strategy::Exhaustive | Strategy::Random => reps.max(1),
        }
    }
}

/// The candidates to evaluate, in order: `space[0]` (the default) first, then the rest in the
/// strategy's order, at most `max_evals` in all (never fewer than the default alone).
pub fn order(
    strategy: Strategy,
    family: KernelFamily,
    space: &[TileConfig],
    seed: u64,
    max_evals: Option<usize>,
) -> Vec<TileConfig> {
    let Some((default, rest)) = space.split_first() else {
        return Vec::new();
    };
    let mut rest = rest.to_vec();
    if strategy == Strategy::Random {
        let mut rng = rand::rngs::StdRng::seed_from_u64(mix(seed, family.name()));
        rest.shuffle(&mut rng);
    }
    let cap = max_evals.unwrap_or(usize::MAX).max(1);
    std::iter::once(*default).chain(rest).take(cap).collect()
}

/// How many of `n` ranked candidates a halving round keeps: the better half, rounded up.
pub fn halving_keep(n: usize) -> usize {
    n.div_ceil(2)
}

/// A seed per family: SplitMix64 of the user's seed and an FNV-1a hash of the family name
/// (both stable across Rust versions, unlike `std`'s hasher).
fn mix(seed: u64, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = seed ^ h;
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_abi::MetaTile;

    fn pts(n: u32) -> Vec<TileConfig> {
        (0..n)
            .map(|i| TileConfig::Meta(MetaTile { threads: 32 + i }))
            .collect()
    }

    #[test]
    fn default_first_and_capped() {
        let s = pts(10);
        for st in [Strategy::Exhaustive, Strategy::Random, Strategy::Halving] {
            let o = order(st, KernelFamily::PageMeta, &s, 0, None);
            assert_eq!(o.len(), 10);
            assert_eq!(o[0], s[0]);
            let o = order(st, KernelFamily::PageMeta, &s, 0, Some(4));
            assert_eq!(o.len(), 4);
            assert_eq!(o[0], s[0]);
            assert_eq!(order(st, KernelFamily::PageMeta, &s, 0, Some(0)), vec![s[0]]);
        }
        assert_eq!(
            order(Strategy::Exhaustive, KernelFamily::PageMeta, &s, 7, None),
            s
        );
    }

    #[test]
    fn random_is_seeded() {
        let s = pts(30);
        let f = KernelFamily::DecodeDense;
        let a = order(Strategy::Random, f, &s, 1, Some(8));
        assert_eq!(
            a,
            order(Strategy::Random, f, &s, 1, Some(8)),
            "same seed, same order"
        );
        assert_ne!(
            a,
            order(Strategy::Random, f, &s, 2, Some(8)),
            "another seed, another order"
        );
        assert_ne!(
            a,
            order(Strategy::Random, KernelFamily::DecodeSparse, &s, 1, Some(8)),
            "families sample independently"
        );
        let mut all = order(Strategy::Random, f, &s, 1, None);
        all.sort_by_key(|t| t.tag());
        let mut want = s.clone();
        want.sort_by_key(|t| t.tag());
        assert_eq!(all, want, "uncapped random is a permutation");
    }

    #[test]
    fn halving_keeps_half_rounded_up() {
        assert_eq!(halving_keep(7), 4);
        assert_eq!(halving_keep(4), 2);
        assert_eq!(halving_keep(1), 1);
        assert_eq!(Strategy::Halving.first_reps(10), 2);
        assert_eq!(Strategy::Exhaustive.first_reps(10), 10);
    }
}
