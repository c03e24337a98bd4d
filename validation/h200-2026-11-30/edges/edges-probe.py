# edges-probe.py: cuBLAS bf16 GEMMs (F.linear, graph replay over rotating weight copies, median
# of 5 samples) across the row-tile boundaries of kvplan's GEMM model, and SDPA FA2 folded-GQA
# decode (32/8 heads of 128, 4096 keys) at batch 8-33. Run once on the lent H200 (2026-11-30,
# about 16:30 UTC) as `python3 edges-probe.py`; its stdout, converted to gemm.csv/attn.csv here.
import sys,torch
F=torch.nn.functional
def tm(fn,reps=20):
 s=torch.cuda.Stream();s.wait_stream(torch.cuda.current_stream())
 with torch.cuda.stream(s):
  for _ in range(3):fn()
 torch.cuda.current_stream().wait_stream(s);g=torch.cuda.CUDAGraph()
 with torch.cuda.graph(g):
  for _ in range(reps):fn()
 o=[]
 for _ in range(5):
  a=torch.cuda.Event(enable_timing=True);b=torch.cuda.Event(enable_timing=True);a.record()
  for _ in range(3):g.replay()
  b.record();b.synchronize();o.append(a.elapsed_time(b)/1e3/3/reps)
 o.sort();return o[2]
for l,N,K in [("tp8gu",7168,8192),("tp4gu",14336,8192),("tp4dn",8192,7168),("8bgu",28672,4096)]:
 n=max(2,min(16,-(-(256<<20)//(N*K*2))));ws=[torch.randn((N,K),device="cuda",dtype=torch.bfloat16) for _ in range(n)]
 for M in [32,33,64,65,96,128,129,160,192,256,257,384]:
  x=torch.randn((M,K),device="cuda",dtype=torch.bfloat16);i=[0]
  def fn():
   i[0]=(i[0]+1)%n;return F.linear(x,ws[i[0]])
  t=tm(fn);print(f"{l},{M},{N},{K},{t*1e6:.2f}us,{2*M*N*K/t/1e12:.1f}TF",flush=True)
 del ws
from torch.nn.attention import SDPBackend,sdpa_kernel
for B in [8,12,16,17,20,24,32,33]:
 q=torch.randn((B,8,4,128),device="cuda",dtype=torch.bfloat16);k=torch.randn((B,8,4096,128),device="cuda",dtype=torch.bfloat16);v=torch.randn_like(k)
 with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):t=tm(lambda:F.scaled_dot_product_attention(q,k,v))
 print(f"dec,{B},4096,{t*1e6:.2f}us",flush=True)
