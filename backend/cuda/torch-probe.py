#!/usr/bin/env python3
"""torch-probe.py: measures, on the lent GPU, the shapes kvplan's cost model prices, with the
kernels the serving engines call (cuBLAS through PyTorch, PyTorch's FlashAttention and cuDNN
attention), so the model's shape efficiencies can be checked against a measurement rather
than a belief (docs/validation/h200-*.md keeps the results; docs/cost-model.md, "Efficiency
from shapes", the formulas they test).

Run on the device machine, whose image has PyTorch:  python3 backend/cuda/torch-probe.py OUTDIR
Writes OUTDIR/gemm.csv, attn.csv, launch.csv, step.csv, gemm_map.csv, prefill.csv, int4.csv,
moe.csv, step_ctx.csv and probe-env.txt (PROBE_SECTIONS picks sections; default launch gemm
attn step). Every section has its own try, and the whole run stops starting new sections after
PROBE_BUDGET seconds (default 150).

Timing (device/METHOD.md): CUDA events around `reps` back-to-back launches after warm-ups; the
median of 5 such samples. Weight-sized operands rotate over copies totalling >= 4x the 50 MiB
L2, so a small GEMM cannot be served from cache on repeat.
"""
import os
import sys
import time

import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
BUDGET = float(os.environ.get("PROBE_BUDGET", "150"))
T0 = time.time()
DEV = "cuda"
L2_ROTATE = 256 << 20


def left():
    return BUDGET - (time.time() - T0)


def timed(fn, reps, samples=5, warm=3):
    """Median seconds per call of fn over `samples` samples of `reps` calls each."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / reps)
    out.sort()
    return out[len(out) // 2]


def reps_for(fn):
    """Calls per sample so a sample lasts about 2 ms (launch overhead then shows as itself)."""
    t = timed(fn, 1, samples=1, warm=1)
    return max(1, min(200, int(2e-3 / max(t, 1e-7))))


def capture(fn, calls=1, warm=1):
    """A CUDA graph of `calls` back-to-back calls of fn, after `warm` calls on a side stream
    (PyTorch's recipe: allocations and lazy initialisation happen before the capture)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g


def graphed(fn, out_bytes):
    """Seconds per call of fn, replayed from a CUDA graph of back-to-back calls: eager timing of a
    kernel shorter than PyTorch's dispatch (about 10-15 us a call from Python) measures the
    dispatch, not the GPU. The graph holds each call's output, so calls are capped by bytes."""
    reps = max(1, min(reps_for(fn), 100, int((2 << 30) // max(out_bytes, 1))))
    reps = max(reps, min(20, int((2 << 30) // max(out_bytes, 1))))
    g = capture(fn, calls=reps, warm=3)
    t = timed(g.replay, 3) / reps
    del g
    return t


def rotating(shape, dtype):
    one = 1
    for s in shape:
        one *= s
    nbytes = one * torch.tensor([], dtype=dtype).element_size()
    n = max(1, -(-L2_ROTATE // max(nbytes, 1)))
    n = min(n, 64)
    return [torch.randn(shape, device=DEV, dtype=torch.float32).to(dtype) for _ in range(n)]


# (label, N, K): the weight GEMMs of the models the validation suite serves most.
GEMM_SHAPES = [
    ("llama3-8b qkv", 6144, 4096), ("llama3-8b o", 4096, 4096),
    ("llama3-8b gate_up", 28672, 4096), ("llama3-8b down", 4096, 14336),
    ("llama3-70b tp8 qkv", 1280, 8192), ("llama3-70b tp8 gate_up", 7168, 8192),
    ("llama3-70b tp8 down", 8192, 3584), ("llama3-70b tp1 gate_up", 57344, 8192),
    ("lm_head 128k", 128256, 4096),
]
GEMM_M = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


GEMM_HEADER = "label,dtype,M,N,K,seconds,tflops,weight_gbps\n"


def gemm_rows(f, label, N, K, Ms, fp8=False):
    """Times one weight shape at each M (graph replay over rotating weight copies) and writes a
    row each; False once the budget is spent. bf16 through F.linear; fp8 (e4m3) through
    torch._scaled_mm with unit per-tensor scales, the path FP8 checkpoints take in the engines."""
    ws = rotating((N, K), torch.bfloat16)
    if fp8:
        ws = [w.to(torch.float8_e4m3fn) for w in ws]
        one = torch.ones((), device=DEV, dtype=torch.float32)
    for M in Ms:
        if left() < 0:
            return False
        x = torch.randn((M, K), device=DEV, dtype=torch.bfloat16)
        if fp8:
            x = x.to(torch.float8_e4m3fn)
        i = [0]

        def fn():
            i[0] = (i[0] + 1) % len(ws)
            if fp8:
                return torch._scaled_mm(x, ws[i[0]].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            return torch.nn.functional.linear(x, ws[i[0]])
        t = graphed(fn, M * N * 2)
        wbytes = N * K * (1 if fp8 else 2)
        f.write(f"{label},{'fp8' if fp8 else 'bf16'},{M},{N},{K},{t:.4e},{2*M*N*K/t/1e12:.2f},{wbytes/t/1e9:.1f}\n")
    return True


def gemm_section(f):
    f.write(GEMM_HEADER)
    for label, N, K in GEMM_SHAPES:
        if not gemm_rows(f, label, N, K, GEMM_M):
            return
    f.flush()
    if not hasattr(torch, "_scaled_mm"):
        return
    for label, N, K in GEMM_SHAPES[:4]:
        if not gemm_rows(f, label, N, K, [1, 16, 64, 256, 1024, 4096, 8192], fp8=True):
            return


def gemm_map_section(f):
    """Memory-bound GEMMs over a grid of weight shapes: how the rate of a small-M GEMM depends on
    N and K (the tiles that stream the weight, and split-K) rather than on the bytes alone."""
    f.write(GEMM_HEADER)
    for N in [1024, 2048, 4096, 8192, 16384, 32768]:
        for K in [1024, 2048, 4096, 8192, 16384]:
            if not gemm_rows(f, "map", N, K, [1, 16, 64, 256]):
                return
        f.flush()


def attn_section(f):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    f.write("kind,backend,batch,q_len,kv_len,q_heads,kv_heads,head_dim,seconds,tflops,kv_gbps\n")
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    H, Hkv, D = 32, 8, 128
    # Prefill: causal self-attention over one prompt; flops count the causal half (4 * S^2/2 * D * H).
    for S in [1024, 4096, 8192, 16384]:
        q = torch.randn((1, H, S, D), device=DEV, dtype=torch.bfloat16)
        k = torch.randn((1, H, S, D), device=DEV, dtype=torch.bfloat16)
        v = torch.randn((1, H, S, D), device=DEV, dtype=torch.bfloat16)
        for name, be in backends:
            if left() < 0:
                return
            try:
                with sdpa_kernel([be]):
                    def fn():
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    t = timed(fn, reps_for(fn))
            except Exception as e:  # a backend this build lacks is a row, not a stop
                f.write(f"prefill,{name},1,{S},{S},{H},{H},{D},nan,nan,nan  # {type(e).__name__}\n")
                continue
            fl = 4.0 * S * S / 2 * D * H
            f.write(f"prefill,{name},1,{S},{S},{H},{H},{D},{t:.4e},{fl/t/1e12:.2f},\n")
        f.flush()
    # Decode: one query row per sequence against its keys (GQA expanded to whole heads would
    # read 4x the bytes, so keys keep Hkv heads and queries fold the group into q_len).
    for B in [1, 16, 64, 128]:
        for L in [1024, 4096, 16384]:
            if B * L * Hkv * D * 2 * 2 > (24 << 30):
                continue
            g = H // Hkv
            q = torch.randn((B, Hkv, g, D), device=DEV, dtype=torch.bfloat16)
            k = torch.randn((B, Hkv, L, D), device=DEV, dtype=torch.bfloat16)
            v = torch.randn((B, Hkv, L, D), device=DEV, dtype=torch.bfloat16)
            for name, be in backends:
                if left() < 0:
                    return
                try:
                    with sdpa_kernel([be]):
                        def fn():
                            return F.scaled_dot_product_attention(q, k, v)
                        t = graphed(fn, B * H * D * 2)
                except Exception as e:
                    f.write(f"decode,{name},{B},1,{L},{H},{Hkv},{D},nan,nan,nan  # {type(e).__name__}\n")
                    continue
                by = B * L * Hkv * D * 2 * 2
                f.write(f"decode,{name},{B},1,{L},{H},{Hkv},{D},{t:.4e},,{by/t/1e9:.1f}\n")
            f.flush()


def launch_section(f):
    """Per-kernel cost of a chain of tiny kernels: launched eagerly (the CPU's launch rate) and
    replayed from a CUDA graph (the GPU's kernel-boundary cost)."""
    f.write("mode,kernels,seconds,per_kernel_us\n")
    x = torch.zeros(1024, device=DEV)
    n = 512

    def chain():
        for _ in range(n):
            x.add_(1.0)
    t = timed(chain, 3)
    f.write(f"eager,{n},{t:.4e},{t/n*1e6:.3f}\n")
    g = capture(chain)
    t = timed(g.replay, 10)
    f.write(f"graph,{n},{t:.4e},{t/n*1e6:.3f}\n")


def step_section(f):
    """A Llama-3-8B-shaped decode step (32 layers: RMSNorm, QKV, rotary-free attention over a
    1024-token context, O, gate_up, SiLU*mul, down; then the LM head) at several batch sizes,
    eager and as a CUDA graph: the floor a serving engine's decode step stands on (no sampling,
    no scheduler). Weights are random bf16; 16 GB."""
    f.write("model,batch,context,mode,seconds\n")
    step_model(f, "llama3-8b", 4096, 14336, 32, 8, 32, 128256, [1, 8, 32, 64, 128, 256])
    torch.cuda.empty_cache()
    # One GPU's shard of Llama-3-70B at TP8 (heads, FFN and vocabulary split 8 ways), with no
    # all-reduce: the per-GPU floor under a TP8 decode step.
    step_model(f, "llama3-70b-tp8-shard", 8192, 28672 // 8, 64 // 8, 1, 80, 128256 // 8, [1, 8, 64])


def step_ctx_section(f):
    """The Llama-3-8B decode step of step_section at longer contexts, where attention's KV reads
    weigh as much as the weights (the TPOT rows of long-prompt benchmarks)."""
    f.write("model,batch,context,mode,seconds\n")
    step_model(f, "llama3-8b", 4096, 14336, 32, 8, 32, 128256, [16, 64], ctx=4096)
    torch.cuda.empty_cache()
    step_model(f, "llama3-8b", 4096, 14336, 32, 8, 32, 128256, [8, 32], ctx=16384)


def moe_section(f):
    """Expert GEMMs as grouped GEMMs (torch._grouped_mm: one launch over every local expert,
    each with its own rows) at the per-expert row counts decode batches give, against one dense
    GEMM of the same rows over one expert's weight: how a MoE layer's rate depends on the rows
    each expert gets (its weights are read whole whatever that count)."""
    f.write("label,experts,rows_per_expert,N,K,seconds,weight_gbps,tflops\n")
    shapes = [("deepseek-v3 ep8 gate_up", 32, 4096, 7168), ("deepseek-v3 ep8 down", 32, 7168, 2048),
              ("qwen3-235b tp1 gate_up", 128, 3072, 4096), ("mixtral-8x7b tp1 gate_up", 8, 28672, 4096)]
    if not hasattr(torch, "_grouped_mm"):
        f.write("# torch._grouped_mm: not in this build\n")
        return
    for label, G, N, K in shapes:
        if left() < 0:
            return
        w = torch.randn((G, N, K), device=DEV, dtype=torch.bfloat16) * 0.01
        wt = w.transpose(-2, -1)   # [G, K, N] with K contiguous: the "transposed" operand
        for m in [1, 2, 4, 8, 16, 32, 64, 128, 256]:
            x = torch.randn((G * m, K), device=DEV, dtype=torch.bfloat16)
            offs = torch.arange(m, G * m + 1, m, device=DEV, dtype=torch.int32)
            try:
                t = graphed(lambda: torch._grouped_mm(x, wt, offs=offs), G * m * N * 2)
            except Exception as e:
                f.write(f"{label},{G},{m},{N},{K},nan,nan,nan  # {type(e).__name__}: {str(e)[:100]}\n")
                f.flush()
                break
            f.write(f"{label},{G},{m},{N},{K},{t:.4e},{G*N*K*2/t/1e9:.1f},{2*G*m*N*K/t/1e12:.2f}\n")
        f.flush()
        del w, wt


def step_model(f, label, h, I, H, Hkv, Lyr, V, batches, ctx=1024):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    D = 128
    W = []
    for _ in range(Lyr):
        W.append(dict(
            qkv=torch.randn((H * D + 2 * Hkv * D, h), device=DEV, dtype=torch.bfloat16) * 0.01,
            o=torch.randn((h, H * D), device=DEV, dtype=torch.bfloat16) * 0.01,
            gu=torch.randn((2 * I, h), device=DEV, dtype=torch.bfloat16) * 0.01,
            dn=torch.randn((h, I), device=DEV, dtype=torch.bfloat16) * 0.01,
            n1=torch.ones(h, device=DEV, dtype=torch.bfloat16),
            n2=torch.ones(h, device=DEV, dtype=torch.bfloat16)))
    head = torch.randn((V, h), device=DEV, dtype=torch.bfloat16) * 0.01

    def rms(x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * w

    for B in batches:
        if left() < 0:
            return
        kc = [torch.randn((B, Hkv, ctx, D), device=DEV, dtype=torch.bfloat16) for _ in range(Lyr)]
        vc = [torch.randn((B, Hkv, ctx, D), device=DEV, dtype=torch.bfloat16) for _ in range(Lyr)]
        x0 = torch.randn((B, h), device=DEV, dtype=torch.bfloat16)

        def step():
            x = x0
            for li, w in enumerate(W):
                y = rms(x, w["n1"])
                qkv = F.linear(y, w["qkv"])
                q = qkv[:, :H * D].reshape(B, Hkv, H // Hkv, D)
                a = F.scaled_dot_product_attention(q, kc[li], vc[li])
                x = x + F.linear(a.reshape(B, H * D), w["o"])
                y = rms(x, w["n2"])
                gu = F.linear(y, w["gu"])
                x = x + F.linear(F.silu(gu[:, :I]) * gu[:, I:], w["dn"])
            return F.linear(x, head)

        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            t = timed(step, 3, samples=3)
            f.write(f"{label},{B},{ctx},eager,{t:.4e}\n")
            g = capture(step)
            t = timed(g.replay, 3, samples=3)
            f.write(f"{label},{B},{ctx},graph,{t:.4e}\n")
        f.flush()
        del kc, vc, g


def prefill_section(f):
    """Whole prefill forwards (one prompt of S tokens through every layer, then the LM head on the
    last token), as a CUDA graph and eagerly, plus one layer's ops each timed alone (graph
    replays), so a gap between the model and the measurement can be placed on a term: GEMMs,
    attention, or the elementwise rest (unfused here: RMSNorm, rotary, SiLU*mul and residual adds
    as PyTorch ops; engines fuse them, so that class is an upper bound for them)."""
    f.write("model,dtype,tokens,part,mode,seconds\n")
    runs = [("llama3-8b", "bf16", 4096, 14336, 32, 8, 32, 128256, [128, 512, 2048, 8192]),
            ("llama3-8b", "fp8", 4096, 14336, 32, 8, 32, 128256, [128, 512, 2048, 8192]),
            # One GPU's shard of Llama-3-70B at TP8 (no all-reduce).
            ("llama3-70b-tp8-shard", "bf16", 8192, 28672 // 8, 64 // 8, 1, 80, 128256 // 8, [128, 2048, 8192])]
    for r in runs:
        if r[1] == "fp8" and not hasattr(torch, "_scaled_mm"):
            continue
        try:
            prefill_model(f, *r)
        except Exception as e:  # one model's failure is a line, not the end of the section
            f.write(f"# {r[0]} {r[1]} stopped: {type(e).__name__}: {str(e)[:160]}\n")
        f.flush()
        torch.cuda.empty_cache()


def prefill_model(f, label, dt, h, I, H, Hkv, Lyr, V, lengths):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    D = 128
    fp8 = dt == "fp8"
    one = torch.ones((), device=DEV, dtype=torch.float32)

    def weight(n, k):
        w = torch.randn((n, k), device=DEV, dtype=torch.bfloat16) * 0.01
        return w.to(torch.float8_e4m3fn) if fp8 else w

    def lin(x, w):
        # fp8: the activation is quantised per tensor (unit scale) before each GEMM, as an FP8
        # checkpoint's linear layers do when the quantisation is not fused into the norm.
        if fp8:
            return torch._scaled_mm(x.to(torch.float8_e4m3fn), w.t(), scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)
        return F.linear(x, w)

    W = [dict(qkv=weight(H * D + 2 * Hkv * D, h), o=weight(h, H * D), gu=weight(2 * I, h), dn=weight(h, I),
              n1=torch.ones(h, device=DEV, dtype=torch.bfloat16),
              n2=torch.ones(h, device=DEV, dtype=torch.bfloat16)) for _ in range(Lyr)]
    head = torch.randn((V, h), device=DEV, dtype=torch.bfloat16) * 0.01

    def rms(x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * w

    def rope(x, cos, sin):
        a, b = x[..., : D // 2], x[..., D // 2:]
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

    # Native GQA (the engines' kernels read each KV head once) when this build's SDPA takes it,
    # decided once outside any capture; otherwise K/V are expanded to every query head.
    native = True
    try:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            t0 = torch.randn((1, H, 64, D), device=DEV, dtype=torch.bfloat16)
            t1 = torch.randn((1, Hkv, 64, D), device=DEV, dtype=torch.bfloat16)
            F.scaled_dot_product_attention(t0, t1, t1, is_causal=True, enable_gqa=True)
    except (RuntimeError, TypeError):
        native = False
    f.write(f"# {label} {dt}: attention {'FlashAttention-2 with native GQA' if native else 'K/V expanded to every head'}\n")

    def attend(q, k, v):
        if native:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        g = H // Hkv
        return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                              is_causal=True)

    for S in lengths:
        if left() < 0:
            return
        x0 = torch.randn((S, h), device=DEV, dtype=torch.bfloat16)
        ang = torch.rand((S, D // 2), device=DEV, dtype=torch.float32)
        cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)

        def layer(x, w):
            y = rms(x, w["n1"])
            qkv = lin(y, w["qkv"])
            q = rope(qkv[:, :H * D].reshape(S, H, D).transpose(0, 1), cos, sin).unsqueeze(0)
            k = rope(qkv[:, H * D:(H + Hkv) * D].reshape(S, Hkv, D).transpose(0, 1), cos, sin).unsqueeze(0)
            v = qkv[:, (H + Hkv) * D:].reshape(S, Hkv, D).transpose(0, 1).unsqueeze(0)
            a = attend(q, k, v)
            x = x + lin(a[0].transpose(0, 1).reshape(S, H * D), w["o"])
            y = rms(x, w["n2"])
            gu = lin(y, w["gu"])
            return x + lin(F.silu(gu[:, :I]) * gu[:, I:], w["dn"])

        def forward():
            x = x0
            for w in W:
                x = layer(x, w)
            return F.linear(rms(x[-1:], W[0]["n1"]), head)

        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            t = timed(forward, 1, samples=3, warm=2)
            f.write(f"{label},{dt},{S},forward,eager,{t:.4e}\n")
            g = capture(forward)
            t = timed(g.replay, 1, samples=3, warm=2)
            f.write(f"{label},{dt},{S},forward,graph,{t:.4e}\n")
            del g
            f.flush()
            # One layer's parts, each replayed alone from a graph (inputs shaped as in the layer).
            w = W[0]
            y = rms(x0, w["n1"])
            qkv = lin(y, w["qkv"])
            q = qkv[:, :H * D].reshape(S, H, D).transpose(0, 1).contiguous().unsqueeze(0)
            k = qkv[:, H * D:(H + Hkv) * D].reshape(S, Hkv, D).transpose(0, 1).contiguous().unsqueeze(0)
            v = qkv[:, (H + Hkv) * D:].reshape(S, Hkv, D).transpose(0, 1).contiguous().unsqueeze(0)
            ao = torch.randn((S, H * D), device=DEV, dtype=torch.bfloat16)
            act = torch.randn((S, I), device=DEV, dtype=torch.bfloat16)
            gu = torch.randn((S, 2 * I), device=DEV, dtype=torch.bfloat16)

            def rest():
                # Everything in a layer that is not a GEMM or attention, as the layer runs it.
                r1 = rms(x0, w["n1"])
                rope(q[0], cos, sin)
                rope(k[0], cos, sin)
                x1 = x0 + r1
                r2 = rms(x1, w["n2"])
                return x1 + r2, F.silu(gu[:, :I]) * gu[:, I:]
            parts = [("qkv", lambda: lin(y, w["qkv"])), ("o", lambda: lin(ao, w["o"])),
                     ("gate_up", lambda: lin(y, w["gu"])), ("down", lambda: lin(act, w["dn"])),
                     ("attention", lambda: attend(q, k, v)), ("rest", rest)]
            for name, fn in parts:
                gp = capture(fn, calls=3)
                t = timed(gp.replay, 1, samples=3, warm=2) / 3
                f.write(f"{label},{dt},{S},layer_{name},graph,{t:.4e}\n")
                del gp
            f.flush()
        del x0


def int4_section(f):
    """gpt-fast's int4 weight-only GEMM (tinygemm: torch._weight_int4pack_mm, bf16 activations,
    group-wise bf16 scales and zeros) at the decode batch sizes gpt-fast runs, on Llama-2-7B's
    weight shapes, against bf16 cuBLAS on the same shape: the fraction of the int4 bytes' rate
    this kernel reaches is what prices a W4A16 decode step (docs/cost-model.md)."""
    f.write("label,kernel,group,M,N,K,seconds,weight_bytes,weight_gbps\n")
    shapes = [("llama2-7b qkv", 12288, 4096), ("llama2-7b o", 4096, 4096),
              ("llama2-7b gate_up", 22016, 4096), ("llama2-7b down", 4096, 11008)]
    for label, N, K in shapes:
        for G in [32, 128]:
            if left() < 0:
                return
            try:
                copies = max(1, min(32, L2_ROTATE // (N * K // 2)))
                packed = []
                for _ in range(copies):
                    q = torch.randint(0, 256, (N, K // 2), device=DEV, dtype=torch.uint8)
                    packed.append(torch._convert_weight_to_int4pack(q, 8))
                sz = torch.randn((K // G, N, 2), device=DEV, dtype=torch.bfloat16) * 0.01
            except Exception as e:
                f.write(f"{label},tinygemm,{G},0,{N},{K},nan,nan,nan  # {type(e).__name__}: {str(e)[:80]}\n")
                f.flush()
                return
            wbytes = N * K // 2 + (K // G) * N * 2 * 2
            for M in [1, 2, 4, 8, 16]:
                x = torch.randn((M, K), device=DEV, dtype=torch.bfloat16)
                i = [0]

                def fn():
                    i[0] = (i[0] + 1) % len(packed)
                    return torch._weight_int4pack_mm(x, packed[i[0]], G, sz)
                try:
                    t = graphed(fn, M * N * 2)
                except Exception as e:
                    f.write(f"{label},tinygemm,{G},{M},{N},{K},nan,nan,nan  # {type(e).__name__}\n")
                    continue
                f.write(f"{label},tinygemm,{G},{M},{N},{K},{t:.4e},{wbytes},{wbytes/t/1e9:.1f}\n")
            f.flush()
            del packed
        ws = rotating((N, K), torch.bfloat16)
        for M in [1, 16]:
            x = torch.randn((M, K), device=DEV, dtype=torch.bfloat16)
            i = [0]

            def fb():
                i[0] = (i[0] + 1) % len(ws)
                return torch.nn.functional.linear(x, ws[i[0]])
            t = graphed(fb, M * N * 2)
            f.write(f"{label},cublas-bf16,0,{M},{N},{K},{t:.4e},{N*K*2},{N*K*2/t/1e9:.1f}\n")
        del ws
        f.flush()


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "probe-env.txt"), "w") as f:
        p = torch.cuda.get_device_properties(0)
        f.write(f"torch {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()}\n")
        f.write(f"device {p.name} sms {p.multi_processor_count} memory {p.total_memory}\n")
        f.write(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
    want = os.environ.get("PROBE_SECTIONS", "launch gemm attn step").split()
    for name, fn in [("launch", launch_section), ("gemm", gemm_section), ("attn", attn_section),
                     ("step", step_section), ("gemm_map", gemm_map_section), ("prefill", prefill_section),
                     ("int4", int4_section), ("moe", moe_section), ("step_ctx", step_ctx_section)]:
        if name not in want:
            continue
        if left() < 0:
            print(f"{name}: skipped (budget spent)", flush=True)
            continue
        t = time.time()
        with open(os.path.join(OUT, f"{name}.csv"), "w") as f:
            try:
                fn(f)
            except Exception as e:
                f.write(f"# stopped: {type(e).__name__}: {e}\n")
                print(f"{name}: {type(e).__name__}: {e}", flush=True)
        torch.cuda.empty_cache()
        print(f"{name}: {time.time() - t:.1f} s", flush=True)


if __name__ == "__main__":
    main()
