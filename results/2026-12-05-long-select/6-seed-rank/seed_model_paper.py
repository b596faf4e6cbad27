# Float model (CPU) of the seed estimate at `paper`'s scale (d = 32, alpha = 1.5, 4-bit per-token
# grid, G = 1): over many heads, how often the estimate min(t_w(weight 0.5), r-th largest sample)
# exceeds tau (the pair would be repaired), and the share of tokens whose sketch upper bound
# clears it (what a filter at the estimate rescores), for r = 4, 6, 8, 12.
import numpy as np, sys
rng = np.random.default_rng(5)
def tw(z, w):
    o = np.sort(z)[::-1][:5000]
    lo, hi = o[0] - 1/np.sqrt(w), o[0]
    for _ in range(60):
        t = (lo+hi)/2
        if w*np.sum(np.maximum(0, o-t)**2) - 1 > 0: lo = t
        else: hi = t
    return lo
d = 32; n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20; heads = int(sys.argv[2]) if len(sys.argv) > 2 else 192
ranks = [4, 6, 8, 12]
over = {r: 0 for r in ranks}; resc = {r: [] for r in ranks}; ideal = []; supp = []
for kset in range(heads // 48):
    K = rng.standard_normal((n, d)).astype(np.float32)
    lo = K.min(1, keepdims=True); hi = K.max(1, keepdims=True); step = (hi-lo)/15
    Kh = lo + np.round((K-lo)/step)*step
    for h in range(48):
        q = rng.standard_normal(d).astype(np.float32)
        z = 0.5*(K@q)/np.sqrt(d)
        ub = 0.5*((Kh@q)/np.sqrt(d) + (step[:, 0]*np.abs(q).sum())/2/np.sqrt(d))
        t = tw(z, 1.0); supp.append(int((z > t).sum())); ideal.append((ub > t).mean())
        off = rng.integers(64); zs = z[off::64]; top = np.sort(zs)[::-1]; w = tw(zs, 64*0.5)
        for r in ranks:
            e = min(w, top[r-1]); over[r] += e > t; resc[r].append((ub > e).mean())
print("n %d, %d heads, mean support %.0f tokens; ideal filter (tau) rescores %.3f%%" % (n, len(ideal), np.mean(supp), 100*np.mean(ideal)))
for r in ranks:
    print("rank %2d: estimate over tau in %3d of %d heads (%.2f%%), rescores %.3f%% of tokens" % (r, over[r], len(ideal), 100*over[r]/len(ideal), 100*np.mean(resc[r])))
