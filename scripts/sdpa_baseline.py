#!/usr/bin/env python3
"""torch SDPA dense softmax decode on the same shapes as entkv's GPU checks (the
FlashDecoding-style baseline of ../shared/BENCH.md). One query per head, fp16, CUDA events,
warm-up, a busy kernel queued before each start event (--idle-start: none), median/min/p90;
K/V rotated through copies when one would fit in L2 (as `entkv bench` does: more than 4 x L2
in all, 1 to 16 copies). Writes JSON records in the same schema as
entkv's TimingRecord."""
import argparse, datetime, json, os, subprocess

import torch
import torch.nn.functional as F

CEILING = 4.28e12  # measured H200 copy rate, bytes/s
LEAD_CYCLES = 400_000  # a busy kernel before each start event, ~200 us at ~2 GHz

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[32768, 131072, 1048576])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--heads", type=int, default=24)
    ap.add_argument("--kv-heads", type=int, default=24)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--workload", default="paper")
    ap.add_argument("--out", default=None)
    ap.add_argument("--idle-start", action="store_true",
                    help="start each timed run on an idle stream (before 2026-12-06: the time then "
                         "includes the host's latency of dispatching SDPA)")
    a = ap.parse_args()
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    try:
        driver = subprocess.check_output(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], text=True).strip()
    except Exception:
        driver = "unknown"
    l2 = getattr(props, "L2_cache_size", 0) or 50 * 2**20
    rows = []
    for n in a.n:
        torch.manual_seed(0)
        q = torch.randn(a.batch, a.heads, 1, a.head_dim, device=dev, dtype=torch.float16)
        kv_bytes = 2 * a.batch * a.kv_heads * n * a.head_dim * 2
        copies = min(max(-(-4 * l2 // kv_bytes), 1), 16)
        kvs = []
        for _ in range(copies):
            k = torch.randn(a.batch, a.kv_heads, n, a.head_dim, device=dev, dtype=torch.float16)
            kvs.append((k, torch.randn_like(k)))
        gqa = a.heads != a.kv_heads
        run = lambda i: F.scaled_dot_product_attention(q, *kvs[i % copies], enable_gqa=gqa)
        for i in range(a.warmup):
            run(i)
        torch.cuda.synchronize()
        times = []
        for i in range(a.iters):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if not a.idle_start:
                # As `entkv bench` does: the GPU is busy (~200 us) when the start event is
                # queued, so SDPA's kernels are queued before its clock starts.
                torch.cuda._sleep(LEAD_CYCLES)
            s.record(); run(a.warmup + i); e.record(); e.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        med, mn, p90 = times[len(times) // 2], times[0], times[int(round((len(times) - 1) * 0.9))]
        nbytes = 2 * k.numel() * k.element_size() + 2 * q.numel() * q.element_size()
        rows.append(dict(
            date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            commit=os.environ.get("ENTKV_COMMIT", "unknown"), gpu=props.name, driver=driver,
            workload=a.workload, method="softmax-sdpa", batch=a.batch, q_heads=a.heads,
            kv_heads=a.kv_heads, head_dim=a.head_dim, alpha=1.0, kv_dtype="f16", n=n,
            iters=a.iters, median_ms=med, min_ms=mn, p90_ms=p90, bytes=nbytes,
            floor_ms=nbytes / CEILING * 1e3, x_floor=med / (nbytes / CEILING * 1e3), pages_kept=1.0,
            start="idle" if a.idle_start else "lead"))
        print(f"sdpa n={n}: median {med:.3f} ms  min {mn:.3f}  p90 {p90:.3f}  floor {nbytes/CEILING*1e3:.3f} ms"
              f"  ({copies} K/V copies)", flush=True)
        del q, k, kvs
        torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=2)

if __name__ == "__main__":
    main()
