# Host model: 4-bit per-token-grid sketch, iid N(0,1) keys and q; fraction of tokens whose sketch
# upper bound clears the exact entmax threshold tau (alpha=1.5), with the L1 half-width
# (sum |q'_i| step/2, what the pass uses) against min(L1, ||q'||_2 * ||k - khat||_2), the bound a
# per-token residual norm in the sketch would allow (Cauchy-Schwarz). No f32 rounding modelled.
# python3 l2model.py > out.txt (numpy 2.4.6, this machine's CPU; no GPU).
import numpy as np
rng = np.random.default_rng(1)
alpha = 1.5
def tau_entmax15(z):
    # z = q'.k with q' = q (alpha-1)/sqrt(d) already scaled, so p_j = [z_j - tau]_+^(1/(alpha-1))
    # = [z_j - tau]_+^2 at alpha = 1.5; tau solves sum_j p_j = 1 (bisection).
    zs = np.sort(z)[::-1]
    lo, hi = zs[0] - 1.0, zs[0]
    for _ in range(100):
        mid = (lo + hi) / 2
        s = np.sum(np.maximum(zs - mid, 0) ** 2)
        if s > 1: lo = mid
        else: hi = mid
    return hi
for d in (32, 128):
    n = 131072
    K = rng.standard_normal((n, d)).astype(np.float32)
    q = rng.standard_normal(d)
    qp = q * (alpha - 1) / np.sqrt(d)
    mn, mx = K.min(1), K.max(1)
    step = (mx - mn) / 15
    codes = np.clip(np.rint((K - mn[:, None]) / step[:, None]), 0, 15)
    khat = mn[:, None] + codes * step[:, None]
    z = K @ qp
    shat = khat @ qp
    eps1 = step * np.abs(qp).sum() / 2
    r = np.linalg.norm(K - khat, axis=1)
    eps2 = np.minimum(eps1, np.linalg.norm(qp) * r)
    tau = tau_entmax15(z)
    sup = np.mean(z > tau)
    f1 = np.mean(shat + eps1 > tau); f2 = np.mean(shat + eps2 > tau)
    print(f"d={d}: support {sup*100:.3f}%  eps L1 {eps1.mean():.3f}  eps min(L1,L2) {eps2.mean():.3f}  z std {z.std():.3f}  ub>tau: L1 {f1*100:.2f}%  L2 {f2*100:.2f}%")
