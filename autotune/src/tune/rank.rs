//! Ranking timed candidates with a tolerance band and a deterministic tie-break.
//!
//! Medians a couple of percent apart are noise on a GPU (clocks, L2 state), so candidates
//! within the band of the best median are tied. Ties go to the default (a tuned bundle should
//! not churn away from a known-good tile for nothing), then to the smaller tile tag, so the same
//! measurements always give the same winner.

/// One timed candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Timed {
    /// The tile's tag (`TileConfig::tag`).
    pub tag: String,
    pub median_us: f64,
    pub is_default: bool,
}

/// Relative band within which medians are tied: 2%.
pub const DEFAULT_TOLERANCE: f64 = 0.02;

/// Indices of `cands`, best first: the candidates within `(1 + tolerance)` of the best median
/// (the default first, then by tag), then the rest by median and tag. Non-finite medians rank
/// last.
pub fn rank(cands: &[Timed], tolerance: f64) -> Vec<usize> {
    let best = cands
        .iter()
        .map(|c| c.median_us)
        .filter(|m| m.is_finite())
        .fold(f64::INFINITY, f64::min);
    let limit = best * (1.0 + tolerance.max(0.0));
    let tied = |c: &Timed| c.median_us.is_finite() && c.median_us <= limit;
    let mut idx: Vec<usize> = (0..cands.len()).collect();
    idx.sort_by(|&a, &b| {
        let (x, y) = (&cands[a], &cands[b]);
        match (tied(x), tied(y)) {
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            (true, true) => y.is_default.cmp(&x.is_default).then_with(|| x.tag.cmp(&y.tag)),
            (false, false) => {
                let key = |c: &Timed| {
                    if c.median_us.is_finite() {
                        c.median_us
                    } else {
                        f64::INFINITY
                    }
                };
                key(x).total_cmp(&key(y)).then_with(|| x.tag.cmp(&y.tag))
            }
        }
    });
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tag: &str, m: f64, d: bool) -> Timed {
        Timed {
            tag: tag.into(),
            median_us: m,
            is_default: d,
        }
    }

    #[test]
    fn default_wins_ties_within_the_band() {
        let c = [t("b", 100.0, false), t("dflt", 100.5, true), t("a", 99.0, false)];
        assert_eq!(rank(&c, 0.02)[0], 1, "the default is within 2% of the best");
        assert_eq!(rank(&c, 0.02), vec![1, 2, 0]);
        // Outside the band the faster tile wins.
        let c = [t("b", 100.0, false), t("dflt", 103.0, true)];
        assert_eq!(rank(&c, 0.02), vec![0, 1]);
    }

    #[test]
    fn ties_without_the_default_go_to_the_smaller_tag_and_order_is_stable() {
        let c = [
            t("t256", 50.0, false),
            t("t128", 50.5, false),
            t("t512", 60.0, false),
        ];
        assert_eq!(rank(&c, 0.02), vec![1, 0, 2]);
        let mut rev = c.to_vec();
        rev.reverse();
        let r = rank(&rev, 0.02);
        assert_eq!(rev[r[0]].tag, "t128", "independent of input order");
    }

    #[test]
    fn non_finite_ranks_last() {
        let c = [
            t("a", f64::NAN, true),
            t("b", 5.0, false),
            t("c", f64::INFINITY, false),
        ];
        assert_eq!(rank(&c, 0.02), vec![1, 0, 2]);
    }
}
