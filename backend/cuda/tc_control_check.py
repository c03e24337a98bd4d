#!/usr/bin/env python3
"""tc_control_check.py: a design check of attn_prefill_tc.cu's control logic, runnable without a
GPU: `python3 backend/cuda/tc_control_check.py`. It mirrors, in float64 Python, the decisions the
kernel makes per block and warp -- the first tile (a sliding layer's skip), the last tile (the
block's last row), zero-filled keys past it, a warp skipping tiles past its own last row, the
mask evaluated only where `need_mask` says (and asserts that an unmasked tile holds only visible
keys), the online softmax with its -inf guards -- and compares the result with attention
computed directly from the mask's definition (be_cpu_attn_visible), over random chunk starts,
lengths (partial and dead warps, several query tiles) and masks. The fragment-level addressing
is checked separately, through the kernel's own functions, by tests/test_cuda_plugin.c
("layout"). This file copies the kernel's conditions: change both together."""
import math, random
ROWS=KEYS=64; INF=float('inf')
def visible(m,p,k):
    sink,window,sliding=m
    if k>p: return False
    if sliding>0 and k<=p-sliding: return False
    if window>0 and k>=sink and k<=p-window: return False
    return True
def dot(a,b): return sum(x*y for x,y in zip(a,b))
def kernel(q,K,V,st,n,m,d):
    out=[None]*n; sink,window,sliding=m; plain=sliding==0 and window==0
    loaded=0
    for i0 in range(0,((n+ROWS-1)//ROWS)*ROWS,ROWS):
        if i0>=n: continue
        last=st+min(n,i0+ROWS)-1; first=0
        if sliding>0 and window==0:
            first=st+i0-sliding+1; first=0 if first<0 else first//KEYS*KEYS
        for w in range(4):
            wr0=i0+w*16; wlive=wr0<n; wfull=wr0+16<=n; wfirst=st+wr0; wlast=st+min(n,wr0+16)-1
            M=[-INF]*16; L=[0.0]*16; O=[[0.0]*d for _ in range(16)]
            kt=first
            while kt<=last:
                if w==0: loaded+=1
                Kt=[K[k] if k<=last else [0.0]*d for k in range(kt,kt+KEYS)]
                Vt=[V[k] if k<=last else [0.0]*d for k in range(kt,kt+KEYS)]
                if wlive and kt<=wlast:
                    need=not(plain and wfull and kt+KEYS-1<=wfirst)
                    for r in range(16):
                        j=wr0+r; qq=q[j] if j<n else [0.0]*d
                        S=[dot(qq,Kt[c]) for c in range(KEYS)]
                        for c in range(KEYS):
                            vis=j<n and visible(m,st+j,kt+c)
                            if need and not vis: S[c]=-INF
                            if not need: assert vis, "unmasked tile holds an invisible key"
                        nm=max(M[r],max(S)); ca=1.0 if nm==-INF else math.exp(M[r]-nm)
                        P=[0.0 if s==-INF else math.exp(s-nm) for s in S]
                        M[r]=nm; L[r]=L[r]*ca+sum(P)
                        O[r]=[O[r][e]*ca+sum(P[c]*Vt[c][e] for c in range(KEYS)) for e in range(d)]
                kt+=KEYS
            for r in range(16):
                j=wr0+r
                if j<n: out[j]=[o/L[r] for o in O[r]]
    return out
def ref(q,K,V,st,n,m,d):
    out=[]
    for j in range(n):
        p=st+j; ks=[k for k in range(p+1) if visible(m,p,k)]
        s=[dot(q[j],K[k]) for k in ks]; mx=max(s); w=[math.exp(x-mx) for x in s]; t=sum(w)
        out.append([sum(w[i]*V[k][e] for i,k in enumerate(ks))/t for e in range(d)])
    return out
random.seed(1); worst=0; d=2
for trial in range(40):
    st=random.choice([0,1,63,64,65,200,571]); n=random.choice([1,15,16,17,63,64,65,130])
    m=random.choice([(0,0,0),(4,50,0),(0,0,30),(0,0,100),(2,40,70)])
    T=st+n; g=lambda: [random.gauss(0,1) for _ in range(d)]
    q=[g() for _ in range(n)]; K=[g() for _ in range(T)]; V=[g() for _ in range(T)]
    a=kernel(q,K,V,st,n,m,d); b=ref(q,K,V,st,n,m,d)
    for j in range(n):
        assert a[j] is not None and all(x==x for x in a[j]), (st,n,m,j)
        worst=max(worst,max(abs(x-y) for x,y in zip(a[j],b[j])))
print("control logic matches direct attention over 40 random shapes and masks; worst |diff|", worst)
