# tinygemm (torch._weight_int4pack_mm) vs cuBLAS bf16 at M = 16..4096 on Llama-2-7B's qkv and
# gate_up shapes: checks the 1/M extrapolation of kvplan's tinygemm rate above 16 rows.
import os, sys, torch
dev = "cuda"
out = os.path.join(os.environ.get("OUT", "."), "int4-large-m.csv")
def timeit(fn, iters):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(3):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters): fn()
        b.record(); torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3 / iters)
    return best
with open(out, "w") as f:
    f.write("label,kernel,group,M,N,K,seconds,tflops\n")
    p = torch.cuda.get_device_properties(0)
    f.write(f"# torch {torch.__version__} device {p.name} sms {p.multi_processor_count}\n")
    for label, N, K in [("llama2-7b qkv", 12288, 4096), ("llama2-7b gate_up", 22016, 4096)]:
        copies = 6
        packed = [torch._convert_weight_to_int4pack(torch.randint(0, 256, (N, K // 2), device=dev, dtype=torch.uint8), 8) for _ in range(copies)]
        ws = [torch.randn((N, K), device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        for G in [32, 128]:
            sz = torch.randn((K // G, N, 2), device=dev, dtype=torch.bfloat16) * 0.01
            for M in [8, 16, 32, 64, 128, 256, 1024, 4096]:
                x = torch.randn((M, K), device=dev, dtype=torch.bfloat16)
                i = [0]
                def fn():
                    i[0] = (i[0] + 1) % copies
                    return torch._weight_int4pack_mm(x, packed[i[0]], G, sz)
                iters = 200 if M <= 256 else 20
                t = timeit(fn, iters)
                f.write(f"{label},tinygemm,{G},{M},{N},{K},{t:.4e},{2*M*N*K/t/1e12:.1f}\n"); f.flush()
        for M in [8, 16, 32, 64, 128, 256, 1024, 4096]:
            x = torch.randn((M, K), device=dev, dtype=torch.bfloat16)
            i = [0]
            def fb():
                i[0] = (i[0] + 1) % copies
                return torch.nn.functional.linear(x, ws[i[0]])
            t = timeit(fb, 200 if M <= 256 else 50)
            f.write(f"{label},cublas-bf16,0,{M},{N},{K},{t:.4e},{2*M*N*K/t/1e12:.1f}\n"); f.flush()
        del packed, ws
print(open(out).read())
