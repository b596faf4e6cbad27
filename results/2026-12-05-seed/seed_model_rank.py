# Float model (CPU): as seed_model_group.py at stride 64, weight and rank varied; 'pairs over' = groups
# of 4 heads where any head's estimate exceeded tau (the pair would be repaired). Output: seed_model_rank.txt.
import numpy as np
rng=np.random.default_rng(11)
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
configs=[(0.5,4),(0.5,3),(0.7,4),(0.7,3),(1.0,4)]
res={c:[] for c in configs}; ideal=[]
for grp in range(10):
    anyr={c:np.zeros(n,bool) for c in configs}; anyi=np.zeros(n,bool); over={c:False for c in configs}
    for h in range(4):
        q=rng.standard_normal(d).astype(np.float32)
        z=0.5*(K@q)/np.sqrt(d); ub=0.5*((Kh@q)/np.sqrt(d)+(step[:,0]*np.abs(q).sum())/2/np.sqrt(d))
        t=tw(z,1.0); anyi|=ub>t
        off=rng.integers(64); zs=z[off::64]; top=np.sort(zs)[::-1]
        for c in configs:
            w,r=c; e=min(tw(zs,64*w), top[r-1]); anyr[c]|=ub>e; over[c]|= e>t
    ideal.append(anyi.mean())
    for c in configs: res[c].append((anyr[c].mean(), over[c]))
print('ideal any-of-4 %.3f'%np.mean(ideal))
for c,v in res.items():
    v=np.array(v,float); print('weight %.1f rank %d: rescored any-of-4 %.3f, pairs over %d of %d'%(c[0],c[1],v[:,0].mean(),v[:,1].sum(),len(v)))
