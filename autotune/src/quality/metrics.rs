//! The quality metrics of a token selection (spec §8.1, the EntmaxKV paper's §3 and appendix
//! E.1), as pure float64 functions of one head's scores, values and kept set.
//!
//! For a query head with full-cache distribution `p` (entmax or softmax of the scores over every
//! token), support `S` and kept set `K`:
//! - dropped mass `δ = Σ_{i∉K} p_i`;
//! - support recall `ρ = |S ∩ K| / |S|` (tokens, not mass). The entmax support is
//!   `{i : p_i > 0}`; softmax gives every token weight, so its support is every token and
//!   `ρ = |K|/n` — the coverage, "by construction" as the paper puts it for its softmax rows;
//! - relative output error `R = ‖o − õ‖₂ / ‖o‖₂`, `o` the full-cache attention and `õ` the
//!   attention of the same kind over the kept tokens alone: entmax recomputed on `K` (what the
//!   sparse entmax decode computes), softmax renormalised over `K` (what the Quest decode
//!   computes);
//! - coverage `|K| / n`.
//!
//! Everything is computed with the float64 references of `entkv_kernels::reference` (the same
//! functions the kernels are tested against), so a metric never depends on kernel rounding: the
//! kernels only decide `K`.

use entkv_abi::Alpha;
use entkv_kernels::reference::{entmax, softmax, weighted_sum};
use serde::Serialize;

/// Which attention a selection is judged under.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Attention {
    /// α-entmax of `(α−1)·s` (the support is where the weight is nonzero).
    Entmax(Alpha),
    /// Softmax of `s` (every token is in the support).
    Softmax,
}

/// One head's metrics for one kept set.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HeadMetrics {
    /// `|K| / n`.
    pub coverage: f64,
    /// Dropped mass `δ`.
    pub delta: f64,
    /// Support recall `ρ`.
    pub rho: f64,
    /// Relative output error `R`.
    pub rel_err: f64,
    /// `|S|`, the size of the full-cache support.
    pub support: usize,
}

/// `δ = Σ_{i∉K} p_i`: the full-cache probability of the tokens not kept.
pub fn dropped_mass(p: &[f64], kept: &[bool]) -> f64 {
    assert_eq!(p.len(), kept.len(), "one kept flag per token");
    // `0.0 +`: an empty f64 sum is −0.0, which prints as "-0.0000".
    0.0 + p
        .iter()
        .zip(kept)
        .filter(|(_, &k)| !k)
        .map(|(p, _)| p)
        .sum::<f64>()
}

/// `ρ = |S ∩ K| / |S|`; 1 for an empty support (nothing to miss).
pub fn support_recall(support: &[bool], kept: &[bool]) -> f64 {
    assert_eq!(support.len(), kept.len(), "one kept flag per token");
    let s = support.iter().filter(|&&s| s).count();
    if s == 0 {
        return 1.0;
    }
    let hit = support.iter().zip(kept).filter(|(&s, &k)| s && k).count();
    hit as f64 / s as f64
}

/// `R = ‖o − õ‖₂ / ‖o‖₂`; 0 when both are zero, +∞ when only `o` is.
pub fn relative_error(o: &[f64], approx: &[f64]) -> f64 {
    assert_eq!(o.len(), approx.len(), "outputs of one width");
    let diff = o
        .iter()
        .zip(approx)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    let norm = o.iter().map(|a| a * a).sum::<f64>().sqrt();
    if norm == 0.0 {
        if diff == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        diff / norm
    }
}

/// `|K| / n`.
pub fn coverage(kept: &[bool]) -> f64 {
    if kept.is_empty() {
        return 0.0;
    }
    kept.iter().filter(|&&k| k).count() as f64 / kept.len() as f64
}

/// One head's full-cache attention under one kind, computed once and then used to judge any
/// number of kept sets (the sweep judges one head under a dozen selections).
pub struct FullAttention<'a> {
    kind: Attention,
    scores: &'a [f64],
    values: &'a [&'a [f64]],
    p: Vec<f64>,
    support: Vec<bool>,
    out: Vec<f64>,
}

impl<'a> FullAttention<'a> {
    /// `scores` in score units (`q·k/√d` plus ALiBi) and the values, one per token.
    pub fn new(kind: Attention, scores: &'a [f64], values: &'a [&'a [f64]]) -> FullAttention<'a> {
        assert_eq!(scores.len(), values.len(), "one value per score");
        let p = distribution(kind, scores);
        let support = match kind {
            Attention::Entmax(_) => p.iter().map(|&x| x > 0.0).collect(),
            Attention::Softmax => vec![true; p.len()],
        };
        let out = weighted_sum(&p, values, 0);
        FullAttention {
            kind,
            scores,
            values,
            p,
            support,
            out,
        }
    }

    /// The full-cache probabilities.
    pub fn p(&self) -> &[f64] {
        &self.p
    }

    /// The full-cache output `o`.
    pub fn out(&self) -> &[f64] {
        &self.out
    }

    /// Whether each token is in the full-cache support.
    pub fn support(&self) -> &[bool] {
        &self.support
    }

    /// Attention of the same kind over the kept tokens alone: entmax solved again over them,
    /// softmax renormalised over them. Zero when nothing is kept.
    pub fn restricted_output(&self, kept: &[bool]) -> Vec<f64> {
        assert_eq!(kept.len(), self.scores.len(), "one kept flag per token");
        let idx: Vec<usize> = (0..kept.len()).filter(|&i| kept[i]).collect();
        let width = self.out.len();
        if idx.is_empty() {
            return vec![0.0; width];
        }
        let s: Vec<f64> = idx.iter().map(|&i| self.scores[i]).collect();
        let v: Vec<&[f64]> = idx.iter().map(|&i| self.values[i]).collect();
        weighted_sum(&distribution(self.kind, &s), &v, width)
    }

    /// δ, ρ, R and coverage of `kept` (one flag per token).
    pub fn evaluate(&self, kept: &[bool]) -> HeadMetrics {
        HeadMetrics {
            coverage: coverage(kept),
            delta: dropped_mass(&self.p, kept),
            rho: support_recall(&self.support, kept),
            rel_err: relative_error(&self.out, &self.restricted_output(kept)),
            support: self.support.iter().filter(|&&s| s).count(),
        }
    }
}

/// The attention weights of `kind` over scores `s` (score units).
fn distribution(kind: Attention, s: &[f64]) -> Vec<f64> {
    match kind {
        Attention::Entmax(alpha) => {
            let a1 = alpha.value() - 1.0;
            let z: Vec<f64> = s.iter().map(|x| a1 * x).collect();
            entmax(&z, alpha).0
        }
        Attention::Softmax => softmax(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * (1.0 + a.abs().max(b.abs()))
    }

    #[test]
    fn hand_computed_sets() {
        let p = [0.5, 0.25, 0.25, 0.0];
        let kept = [true, false, true, false];
        assert!(close(dropped_mass(&p, &kept), 0.25));
        assert!(close(coverage(&kept), 0.5));
        let s = [true, true, true, false];
        assert!(close(support_recall(&s, &kept), 2.0 / 3.0));
        assert_eq!(support_recall(&[false; 4], &kept), 1.0);
        // ‖(3, 4) − (0, 0)‖ / ‖(3, 4)‖ = 1; ‖(3, 4) − (3, 0)‖ / 5 = 0.8.
        assert!(close(relative_error(&[3.0, 4.0], &[0.0, 0.0]), 1.0));
        assert!(close(relative_error(&[3.0, 4.0], &[3.0, 0.0]), 0.8));
        assert_eq!(relative_error(&[0.0], &[0.0]), 0.0);
        assert_eq!(relative_error(&[0.0], &[1.0]), f64::INFINITY);
    }

    /// Sparsemax of scores (1, 0.8, −1) (α = 2, z = s): τ = 0.4, p = (0.6, 0.4, 0). Keeping
    /// tokens {0, 2} drops 0.4 of the mass and half the support; entmax over {1, −1} alone is
    /// (1, 0), so õ = v₀ against o = 0.6·v₀ + 0.4·v₁.
    #[test]
    fn sparsemax_by_hand() {
        let s = [1.0, 0.8, -1.0];
        let v0 = [1.0, 0.0];
        let v1 = [0.0, 1.0];
        let v2 = [5.0, 5.0];
        let values: Vec<&[f64]> = vec![&v0, &v1, &v2];
        let full = FullAttention::new(Attention::Entmax(Alpha::Two), &s, &values);
        assert!(close(full.p()[0], 0.6) && close(full.p()[1], 0.4) && full.p()[2] == 0.0);
        assert_eq!(full.support(), &[true, true, false]);
        let m = full.evaluate(&[true, false, true]);
        assert!(close(m.delta, 0.4), "{m:?}");
        assert!(close(m.rho, 0.5));
        assert!(close(m.coverage, 2.0 / 3.0));
        assert_eq!(m.support, 2);
        // o = (0.6, 0.4), õ = (1, 0): ‖(−0.4, 0.4)‖ / ‖(0.6, 0.4)‖.
        let want = (0.32f64).sqrt() / (0.52f64).sqrt();
        assert!(close(m.rel_err, want), "{} vs {want}", m.rel_err);
        // Covering the support is exact (Prop. 3.2), whatever else is dropped.
        let m = full.evaluate(&[true, true, false]);
        assert_eq!((m.delta, m.rho, m.rel_err), (0.0, 1.0, 0.0));
    }

    /// Softmax of (ln 2, 0, 0): p = (1/2, 1/4, 1/4). Keeping {0, 1} drops 1/4, recalls 2 of 3
    /// tokens (the coverage), and renormalises to (2/3, 1/3).
    #[test]
    fn softmax_by_hand() {
        let s = [2f64.ln(), 0.0, 0.0];
        let v0 = [1.0];
        let v1 = [0.0];
        let v2 = [4.0];
        let values: Vec<&[f64]> = vec![&v0, &v1, &v2];
        let full = FullAttention::new(Attention::Softmax, &s, &values);
        assert!(close(full.out()[0], 0.5 + 1.0));
        let m = full.evaluate(&[true, true, false]);
        assert!(close(m.delta, 0.25));
        assert!(close(m.rho, 2.0 / 3.0) && close(m.rho, m.coverage));
        assert_eq!(m.support, 3);
        // o = 1.5, õ = 2/3.
        assert!(close(m.rel_err, (1.5 - 2.0 / 3.0) / 1.5));
        // Nothing kept: everything dropped, õ = 0.
        let m = full.evaluate(&[false; 3]);
        assert!(close(m.delta, 1.0) && m.rho == 0.0 && close(m.rel_err, 1.0));
    }

    /// α = 1.5 (β = 2) on scores (2, 1, −4), z = s/2 = (1, 0.5, −2): two tokens in the
    /// support, (1 − τ)² + (0.5 − τ)² = 1 gives τ = (3 − √7)/4, p = (((1+√7)/4)², ((√7−1)/4)², 0).
    #[test]
    fn entmax_15_by_hand() {
        let s = [2.0, 1.0, -4.0];
        let v: Vec<[f64; 1]> = vec![[1.0], [2.0], [3.0]];
        let values: Vec<&[f64]> = v.iter().map(|x| x.as_slice()).collect();
        let full = FullAttention::new(Attention::Entmax(Alpha::ThreeHalves), &s, &values);
        let p = full.p();
        let r7 = 7f64.sqrt();
        assert!(close(p[0], ((1.0 + r7) / 4.0).powi(2)), "{p:?}");
        assert!(close(p[1], ((r7 - 1.0) / 4.0).powi(2)));
        assert_eq!(full.support(), &[true, true, false]);
        // Dropping token 1 loses exactly its mass.
        let m = full.evaluate(&[true, false, true]);
        assert!(close(m.delta, p[1]) && close(m.rho, 0.5));
        // Entmax over {0, 2} alone puts all the mass on token 0 (z gap 3 > 1): õ = 1.
        let o = full.out()[0];
        assert!(close(m.rel_err, (o - 1.0).abs() / o));
    }
}
