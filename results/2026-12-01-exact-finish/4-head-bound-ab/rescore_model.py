# Float model of the 4-bit certified pass's rescoring share (results/2026-12-01-exact-finish README):
# iid N(0,1) q and K, per-token 4-bit grid, eps = sum|q_i| step/2 / sqrt(d), tokens rescored when
# 0.5(s_hat + eps) > tau, tau the alpha = 1.5 threshold over all n tokens of the head (the ideal
# filter). Prints (share a head, share rescored for any head of the group).
import numpy as np
rng=np.random.default_rng(0)
def tau15(z):
    # solve sum max(0, z - t)^2 = 1 (alpha 1.5 with z=(a-1)s)
    zs=np.sort(z)[::-1][:20000]
    lo,hi=zs[0]-1,zs[0]
    for _ in range(60):
        t=(lo+hi)/2
        f=np.sum(np.maximum(0,zs-t)**2)-1
        if f>0: lo=t
        else: hi=t
    return lo
def run(d,n,heads=1,bits=4,blocks=1):
    K=rng.standard_normal((n,d)).astype(np.float32)
    Kb=K.reshape(n,blocks,d//blocks)
    lo=Kb.min(2,keepdims=True); hi=Kb.max(2,keepdims=True)
    L=2**bits-1
    step=(hi-lo)/L
    Kh=(lo+np.round((Kb-lo)/step)*step).reshape(n,d)
    stepd=np.repeat(step[:,:,0],d//blocks,axis=1)
    res=[]
    anyr=np.zeros(n,bool)
    for h in range(heads):
        q=rng.standard_normal(d).astype(np.float32)
        s=K@q/np.sqrt(d); sh=Kh@q/np.sqrt(d)
        eps=(stepd*np.abs(q)).sum(1)/2/np.sqrt(d)
        z=0.5*s; t=tau15(z)
        ub=0.5*(sh+eps)
        r=ub>t
        anyr|=r
        res.append(r.mean())
    return np.mean(res),anyr.mean()
for d,heads in [(32,1),(32,2),(128,4)]:
    for n in [65536,262144]:
        print(d,heads,n,'4bit',run(d,n,heads), '4bit 4blocks' if d==128 else '', run(d,n,heads,blocks=4) if d==128 else '')
