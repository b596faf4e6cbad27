import numpy as np
rng=np.random.default_rng(13)
def tau_w(zs,w):
    k=np.arange(1,len(zs)+1)*w; c1=np.cumsum(zs)*w; c2=np.cumsum(zs*zs)*w
    disc=c1*c1-k*(c2-1); ok=disc>=0
    t=np.where(ok,(c1-np.sqrt(np.where(ok,disc,0)))/k,np.nan)
    valid=ok & (t<zs) & (np.append(zs[1:],-np.inf)<=t)
    return t[np.argmax(valid)]
for n,H in [(65536,3000),(131072,3000),(262144,1500)]:
    over={4:0,5:0,6:0}; gap={4:[],5:[],6:[]}
    for h in range(H):
        sc=0.5*np.sqrt(rng.chisquare(32)/32)
        z=rng.standard_normal(n)*sc
        top=-np.partition(-z,2000)[:2000]; top.sort(); top=top[::-1]
        T=tau_w(top,1.0)
        smp=np.sort(z[::64])[::-1]; w=tau_w(smp[:400],32.0)
        for rk in over:
            e=min(smp[rk-1],w); over[rk]+=e>T; gap[rk].append((T-e)/sc)
    print(n, {rk:f"{100*over[rk]/H:.2f}%/head gap {np.mean(gap[rk]):.3f}" for rk in over})
