//! Float64 CPU references: the oracles every kernel is tested against.
//!
//! The threshold is found by sorting and the closed forms of spec §1.3 for α = 2 and 3/2, and by
//! bisection to full double precision otherwise (and as a cross-check of the closed forms).

use entkv_abi::Alpha;

/// `Σ_i [z_i − τ]_+^β − 1`, the function whose root is the entmax threshold.
pub fn threshold_fn(z: &[f64], alpha: Alpha, tau: f64) -> f64 {
    let beta = alpha.beta();
    z.iter()
        .map(|&x| if x > tau { (x - tau).powf(beta) } else { 0.0 })
        .sum::<f64>()
        - 1.0
}

/// Entmax threshold by bisection on `[max − 1, max]` (the root is always there), run until
/// the bracket stops shrinking in double precision.
pub fn entmax_tau_bisect(z: &[f64], alpha: Alpha) -> f64 {
    assert!(!z.is_empty(), "entmax of an empty vector");
    let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let (mut lo, mut hi) = (m - 1.0, m);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if threshold_fn(z, alpha, mid) >= 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Exact entmax threshold `τ` of entmax-space scores `z` (`z = (α−1)·s`).
pub fn entmax_tau(z: &[f64], alpha: Alpha) -> f64 {
    assert!(!z.is_empty(), "entmax of an empty vector");
    let mut s: Vec<f64> = z.to_vec();
    s.sort_by(|a, b| b.total_cmp(a));
    let m = s[0];
    match alpha {
        Alpha::Two => {
            // k* = max{k : 1 + k·z_(k) > Σ_{j≤k} z_(j)}, τ = (Σ_{j≤k*} z_(j) − 1)/k*.
            // Shifted by the max for accuracy.
            let (mut cum, mut best) = (0.0, (1usize, 0.0));
            for (i, &x) in s.iter().enumerate() {
                let u = x - m;
                cum += u;
                let k = (i + 1) as f64;
                if 1.0 + k * u > cum {
                    best = (i + 1, cum);
                }
            }
            m + (best.1 - 1.0) / best.0 as f64
        }
        Alpha::ThreeHalves => {
            // τ_k = mean_k − sqrt((1 − ss_k)/k); support = largest k with τ_k ≤ z_(k).
            let (mut su, mut su2) = (0.0, 0.0);
            let mut tau = m - 1.0;
            for (i, &x) in s.iter().enumerate() {
                let u = x - m;
                su += u;
                su2 += u * u;
                let k = (i + 1) as f64;
                let mean = su / k;
                let ss = su2 - su * mean;
                if ss > 1.0 {
                    break;
                }
                let t = mean - ((1.0 - ss) / k).sqrt();
                if t <= u {
                    tau = m + t;
                } else {
                    break;
                }
            }
            tau
        }
        _ => entmax_tau_bisect(z, alpha),
    }
}

/// Entmax probabilities `p_i = [z_i − τ]_+^β` and the threshold.
pub fn entmax(z: &[f64], alpha: Alpha) -> (Vec<f64>, f64) {
    let tau = entmax_tau(z, alpha);
    let beta = alpha.beta();
    let p = z
        .iter()
        .map(|&x| if x > tau { (x - tau).powf(beta) } else { 0.0 })
        .collect();
    (p, tau)
}

/// One query head's reference result.
#[derive(Clone, Debug)]
pub struct HeadReference {
    /// `o = Σ_j p_j v_j`, `[d]`.
    pub out: Vec<f64>,
    /// Threshold in entmax space.
    pub tau: f64,
    /// Support size `|{j : z_j > τ}|`.
    pub support: usize,
    /// Entmax-space scores of every token, for tolerance analysis.
    pub z: Vec<f64>,
}

/// Reference results per (batch, query head), in `batch·q_heads + head` order.
#[derive(Clone, Debug)]
pub struct DecodeReference {
    pub heads: Vec<HeadReference>,
}

/// Attention scores of one query in score units: `s_j = q·k_j/√d + bias_j` (`bias` is the ALiBi
/// term, empty for none). Shared by the entmax and softmax references and the quality metrics,
/// so every consumer scores tokens the same way.
pub fn scores(q: &[f64], keys: &[&[f64]], bias: &[f64]) -> Vec<f64> {
    let inv_sqrt_d = 1.0 / (q.len() as f64).sqrt();
    keys.iter()
        .enumerate()
        .map(|(j, k)| {
            q.iter().zip(k.iter()).map(|(a, b)| a * b).sum::<f64>() * inv_sqrt_d
                + bias.get(j).copied().unwrap_or(0.0)
        })
        .collect()
}

/// Softmax probabilities of scores `s` (shifted by the max, so no weight overflows).
pub fn softmax(s: &[f64]) -> Vec<f64> {
    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = s.iter().map(|&x| (x - m).exp()).collect();
    let total: f64 = w.iter().sum();
    w.iter().map(|wj| wj / total).collect()
}

/// `Σ_j w_j v_j` over the entries with a nonzero weight (`d` = the values' width, used when
/// there are none).
pub fn weighted_sum(w: &[f64], values: &[&[f64]], d: usize) -> Vec<f64> {
    let mut out = vec![0.0; values.first().map_or(d, |v| v.len())];
    for (wj, v) in w.iter().zip(values) {
        if *wj != 0.0 {
            for (o, x) in out.iter_mut().zip(v.iter()) {
                *o += wj * x;
            }
        }
    }
    out
}

/// Entmax attention of one query in float64: `z_j = (α−1)·(q·k_j/√d + bias_j)`,
/// `o = Σ_j p_j v_j`. `bias` is the ALiBi term in score units (empty for none).
pub fn attend(q: &[f64], keys: &[&[f64]], values: &[&[f64]], bias: &[f64], alpha: Alpha) -> HeadReference {
    let rows = |support: &[usize]| -> Result<Vec<Vec<f64>>, std::convert::Infallible> {
        Ok(support.iter().map(|&j| values[j].to_vec()).collect())
    };
    match attend_scores(&scores(q, keys, bias), q.len(), alpha, rows) {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// [`attend`] from the scores `s_j = q·k_j/√d + bias_j`, reading only the value rows of the
/// support (`value_rows(support)`, token indices ascending): a reference over a million tokens
/// then builds the few rows entmax keeps instead of every one. The sum runs over the support in
/// index order, as [`weighted_sum`] does over all rows.
pub fn attend_scores<E>(
    s: &[f64],
    d: usize,
    alpha: Alpha,
    value_rows: impl FnOnce(&[usize]) -> Result<Vec<Vec<f64>>, E>,
) -> Result<HeadReference, E> {
    let a1 = alpha.value() - 1.0;
    let z: Vec<f64> = s.iter().map(|&x| a1 * x).collect();
    let (p, tau) = entmax(&z, alpha);
    let support: Vec<usize> = (0..p.len()).filter(|&j| p[j] > 0.0).collect();
    let rows = value_rows(&support)?;
    let weights: Vec<f64> = support.iter().map(|&j| p[j]).collect();
    let rows: Vec<&[f64]> = rows.iter().map(Vec::as_slice).collect();
    Ok(HeadReference {
        out: weighted_sum(&weights, &rows, d),
        tau,
        support: support.len(),
        z,
    })
}

/// Softmax attention of one query in float64: `s_j = q·k_j/√d + bias_j`,
/// `o = Σ_j softmax(s)_j v_j` (the baseline the sparse entmax paths are compared with).
pub fn attend_softmax(q: &[f64], keys: &[&[f64]], values: &[&[f64]], bias: &[f64]) -> Vec<f64> {
    weighted_sum(&softmax(&scores(q, keys, bias)), values, q.len())
}

/// A dense decode problem in float64: q `[batch, q_heads, d]`, K and V
/// `[batch, kv_heads, n, d]` (values already rounded to the kernel's storage types).
#[derive(Clone, Debug)]
pub struct DenseProblem {
    pub batch: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    pub n: usize,
    pub d: usize,
    pub q: Vec<f64>,
    pub k: Vec<f64>,
    pub v: Vec<f64>,
}

/// Full-cache entmax attention over a contiguous cache.
pub fn dense_decode(p: &DenseProblem, alpha: Alpha) -> DecodeReference {
    let (d, n) = (p.d, p.n);
    let group = p.q_heads / p.kv_heads;
    let mut heads = Vec::with_capacity(p.batch * p.q_heads);
    for b in 0..p.batch {
        for h in 0..p.q_heads {
            let kv0 = (b * p.kv_heads + h / group) * n * d;
            let keys: Vec<&[f64]> = (0..n).map(|j| &p.k[kv0 + j * d..][..d]).collect();
            let values: Vec<&[f64]> = (0..n).map(|j| &p.v[kv0 + j * d..][..d]).collect();
            heads.push(attend(
                &p.q[(b * p.q_heads + h) * d..][..d],
                &keys,
                &values,
                &[],
                alpha,
            ));
        }
    }
    DecodeReference { heads }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
    }

    #[test]
    fn closed_forms_agree_with_bisection() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for n in [1usize, 2, 3, 17, 200, 5000] {
            for spread in [0.1, 1.0, 5.0] {
                let z: Vec<f64> = (0..n).map(|_| rng.gen_range(-spread..spread)).collect();
                for alpha in [Alpha::Two, Alpha::ThreeHalves] {
                    let a = entmax_tau(&z, alpha);
                    let b = entmax_tau_bisect(&z, alpha);
                    assert!(close(a, b, 1e-12), "n={n} α={alpha}: {a} vs {b}");
                    let (p, _) = entmax(&z, alpha);
                    let s: f64 = p.iter().sum();
                    assert!((s - 1.0).abs() < 1e-10, "sum {s}");
                }
            }
        }
    }

    #[test]
    fn scores_first_reads_only_the_support_values() {
        // attend_scores asks for the support's rows only, and its support-only sum equals, bit
        // for bit, the sum over every row with the entmax weights (zeros included).
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let (n, d) = (500, 8);
        let keys: Vec<Vec<f64>> = (0..n)
            .map(|_| (0..d).map(|_| rng.gen_range(-3.0..3.0)).collect())
            .collect();
        let values: Vec<Vec<f64>> = (0..n)
            .map(|_| (0..d).map(|_| rng.gen_range(-1.0..1.0)).collect())
            .collect();
        let q: Vec<f64> = (0..d).map(|_| rng.gen_range(-2.0..2.0)).collect();
        let kr: Vec<&[f64]> = keys.iter().map(Vec::as_slice).collect();
        let vr: Vec<&[f64]> = values.iter().map(Vec::as_slice).collect();
        let s = scores(&q, &kr, &[]);
        for alpha in [Alpha::Two, Alpha::ThreeHalves, Alpha::new(1.25).unwrap()] {
            let z: Vec<f64> = s.iter().map(|&x| (alpha.value() - 1.0) * x).collect();
            let (p, tau) = entmax(&z, alpha);
            let support: Vec<usize> = (0..n).filter(|&j| p[j] > 0.0).collect();
            assert!(
                !support.is_empty() && support.len() < n / 2,
                "{alpha:?}: {}",
                support.len()
            );
            let mut asked = Vec::new();
            let r = attend_scores(&s, d, alpha, |sup| {
                asked = sup.to_vec();
                Ok::<_, ()>(sup.iter().map(|&j| values[j].clone()).collect())
            })
            .unwrap();
            assert_eq!(asked, support);
            assert_eq!(
                (r.out, r.tau, r.support, r.z),
                (weighted_sum(&p, &vr, d), tau, support.len(), z)
            );
        }
    }

    #[test]
    fn known_values() {
        // Sparsemax of (1, 0): τ = 0, p = (1, 0). Of (0.2, 0.1): both in support.
        assert!(close(entmax_tau(&[1.0, 0.0], Alpha::Two), 0.0, 1e-15));
        let (p, _) = entmax(&[0.2, 0.1], Alpha::Two);
        assert!(close(p[0], 0.55, 1e-12) && close(p[1], 0.45, 1e-12));
        // All-equal scores: uniform for every α.
        for alpha in [
            Alpha::Two,
            Alpha::ThreeHalves,
            Alpha::FourThirds,
            Alpha::Other(1.25),
        ] {
            let (p, _) = entmax(&[0.3; 8], alpha);
            for x in p {
                assert!(close(x, 0.125, 1e-9), "{alpha}: {x}");
            }
        }
        // One dominant entry gets everything.
        let (p, _) = entmax(&[10.0, 0.0, -1.0], Alpha::ThreeHalves);
        assert_eq!(p, vec![1.0, 0.0, 0.0]);
    }

    #[test]
    fn generic_alpha_sums_to_one() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let z: Vec<f64> = (0..1000).map(|_| rng.gen_range(-1.0..1.0)).collect();
        for a in [1.1, 1.25, 4.0 / 3.0, 3.0] {
            let alpha = Alpha::new(a).unwrap();
            let (p, t) = entmax(&z, alpha);
            assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9, "α={a}");
            assert!(threshold_fn(&z, alpha, t).abs() < 1e-9);
        }
    }
}
