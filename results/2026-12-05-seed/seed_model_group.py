# Float model (CPU): share of tokens rescored for ANY of a GQA group's 4 heads at wide's d = 128, 256k
# tokens, per-token 4-bit grid; estimator variants by (stride, weight, rank); 'over' = heads whose estimate
# exceeded tau. Output: seed_model_group.txt.
import numpy as np
rng=np.random.default_rng(5)
def tw(z,w):
    o=np.sort(z)[::-1][:5000]
    lo,hi=o[0]-1/np.sqrt(w),o[0]
    for _ in range(50):
        t=(lo+hi)/2
        if w*np.sum(np.maximum(0,o-t)**2)-1>0: lo=t
        else: hi=t
    return lo
d=128;n=1<<18
K=rng.standard_normal((n,d)).astype(np.float32)
lo=K.min(1,keepdims=True);hi=K.max(1,keepdims=True);step=(hi-lo)/15
Kh=lo+np.round((K-lo)/step)*step
configs=[(64,0.5,4),(32,0.5,4),(16,0.5,4),(16,0.5,8),(16,0.7,8),(32,0.7,6)]
res={c:[] for c in configs}; ideal=[]
for grp in range(6):
    anyr={c:np.zeros(n,bool) for c in configs}; anyi=np.zeros(n,bool); over={c:0 for c in configs}
    for h in range(4):
        q=rng.standard_normal(d).astype(np.float32)
        z=0.5*(K@q)/np.sqrt(d); ub=0.5*((Kh@q)/np.sqrt(d)+(step[:,0]*np.abs(q).sum())/2/np.sqrt(d))
        t=tw(z,1.0); anyi|=ub>t
        for c in configs:
            s,w,r=c; off=rng.integers(s); zs=z[off::s]; top=np.sort(zs)[::-1]
            e=min(tw(zs,s*w), top[r-1]); anyr[c]|=ub>e; over[c]+= e>t
    ideal.append(anyi.mean())
    for c in configs: res[c].append((anyr[c].mean(), over[c]))
print('ideal any-of-4 %.3f'%np.mean(ideal))
for c,v in res.items():
    v=np.array(v); print(c,'rescored any-of-4 %.3f'%v[:,0].mean(),'over',int(v[:,1].sum()),'of 24 heads', 'samples cost %.3f'%(1/c[0]))
