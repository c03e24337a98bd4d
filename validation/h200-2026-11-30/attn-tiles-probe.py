"""attn-tiles-probe.py: the probe behind attn-tiles.csv (kvplan issue 10, attention pricing).

PyTorch SDPA causal prefill (FlashAttention-2 and cuDNN backends) at batch > 1, where the
tiles outnumber the SMs' slots, and FA2 decode with the GQA group folded into the query rows
(32 query heads over 8 KV heads, d 128) across batch 8-64, where padded tile rows start to
bind. Seconds per call: the fastest of 3 samples of back-to-back calls timed with CUDA events
(20 calls a sample for prefill, 50 for decode), after 3 warm-up calls. Printed as CSV rows;
the file adds attn.csv's header and its kv_gbps/tflops columns."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3 / reps)
    return best


H, HKV, D, BF = 32, 8, 128, torch.bfloat16
for S, batches in [(1024, [1, 4, 16]), (2048, [1, 4]), (4096, [1, 4])]:
    for B in batches:
        q = torch.randn((B, H, S, D), device="cuda", dtype=BF)
        k, v = torch.randn_like(q), torch.randn_like(q)
        for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]:
            with sdpa_kernel([be]):
                t = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            print(f"prefill,{name},{B},{S},{t:.4e},{4.0 * S * S / 2 * D * H * B / t / 1e12:.2f}", flush=True)
for B in [8, 16, 24, 32, 48, 64]:
    L = 4096
    q = torch.randn((B, HKV, H // HKV, D), device="cuda", dtype=BF)
    k = torch.randn((B, HKV, L, D), device="cuda", dtype=BF)
    v = torch.randn_like(k)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        t = timed(lambda: F.scaled_dot_product_attention(q, k, v), 50)
    print(f"decode,flash,{B},{L},{t:.4e},{B * L * HKV * D * 4 / t / 1e9:.1f}", flush=True)
