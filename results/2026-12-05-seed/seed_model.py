# Float model of the seeded certified pass's estimate (entkv_abi::seed; CPU only, no GPU claim).
# iid N(0,1) K (d = 128, the `wide` head dim, n = 256k tokens a head) and q scaled by `scale`
# (smaller scales flatten the scores: larger supports); per-token 4-bit grid as the sketch,
# eps = sum|q_i| step/2/sqrt(d). A token is rescored when its upper bound 0.5(s_hat + eps)
# clears the filter. Filters: the head's own threshold tau (the ideal), the weighted-sample
# estimate t_w alone (weight 1 and SEED_WEIGHT = 0.5 per skipped token), and the shipped
# estimate min(t_w at 0.5, SEED_RANK-th largest sample), stride SEED_STRIDE = 64.
# "over" = share of heads whose estimate exceeded tau (those steps repair: correct, slower).
import numpy as np
rng = np.random.default_rng(2)

def tau_weighted(z, w):
    """Root of sum w*max(0, z - t)^2 = 1 (alpha = 1.5 in z = (alpha-1) s), by bisection."""
    o = np.argsort(z)[::-1]; zs = z[o]; ws = w[o]
    lo, hi = zs[0] - 1 / np.sqrt(ws[0]), zs[0]
    for _ in range(60):
        t = (lo + hi) / 2
        if np.sum(ws * np.maximum(0, zs - t) ** 2) - 1 > 0: lo = t
        else: hi = t
    return lo

d, n, stride, rank = 128, 1 << 18, 64, 4
K = rng.standard_normal((n, d)).astype(np.float32)
lo = K.min(1, keepdims=True); hi = K.max(1, keepdims=True); step = (hi - lo) / 15
Kh = lo + np.round((K - lo) / step) * step
for scale in [1.0, 0.3, 0.1, 3.0]:
    rows = {}
    supports = []
    for trial in range(12):
        q = (rng.standard_normal(d) * scale).astype(np.float32)
        s = K @ q / np.sqrt(d); z = 0.5 * s; shat = Kh @ q / np.sqrt(d)
        eps = (step[:, 0] * np.abs(q).sum()) / 2 / np.sqrt(d)
        ub = 0.5 * (shat + eps)
        tau = tau_weighted(z, np.ones(n)); supports.append((z > tau).sum())
        off = rng.integers(stride); zs = z[off::stride]; top = np.sort(zs)[::-1]
        t1 = tau_weighted(zs, np.full(len(zs), stride * 1.0))
        t05 = tau_weighted(zs, np.full(len(zs), stride * 0.5))
        shipped = min(t05, top[rank - 1])
        for name, t in [("ideal (tau)", tau), ("t_w, weight 1", t1), ("t_w, weight 0.5", t05), ("shipped: min(t_w 0.5, 4th)", shipped)]:
            rows.setdefault(name, []).append((t > tau, (ub > t).mean()))
    print(f"q scale {scale}: mean support {np.mean(supports):.0f} of {n}")
    for name, v in rows.items():
        v = np.array(v, float)
        print(f"  {name:28s} over tau in {v[:, 0].mean():5.1%} of heads, rescored {v[:, 1].mean():6.2%}")
