#!/usr/bin/env python3
"""Decode with entkv from PyTorch through its C API (libentkv.so, capi/include/entkv.h).

    python3 examples/python/entkv_decode.py --lib PATH/libentkv.so --bundle BUNDLE \
        [--methods dense,topk,gaussian,certified,certified-pruned,auto] [--n 4096] [--batch 2] [--steps 2]
        [--check-device-ids]

A bundle for the defaults (and GQA group 4): `entkv bundle create --alpha 1.5 --head-dim 32
--group 1,4 --out BUNDLE`; the library: `cargo build --release -p entkv-capi`
(target/release/libentkv.so). Needs torch with CUDA; no Rust on the GPU machine.

Builds a paged f16 KV cache with torch on the GPU (pages scattered by a random permutation,
lengths that end mid-page and on a page boundary), then for each method: creates a decoder,
allocates its workspace and metadata with torch, builds the page metadata, and runs `--steps`
decode steps on torch's current stream (before every step but the first, one token is appended
to each sequence and `entkv_decoder_append` updates the metadata). Each step is checked against
a float64 torch reference of α-entmax attention:
    z_j = (α−1)·q·k_j/√d,  p_j = [z_j − τ]_+^(1/(α−1)),  Σ_j p_j = 1,  o = Σ_j p_j v_j
(q is passed raw: the kernels apply (α−1)/√d; the `tau` slot holds τ in this z-space).
dense/certified/certified-pruned/auto must match entmax over the whole cache, topk/gaussian entmax over the
pages they selected (read from the `sel_pages`/`sel_count` workspace slots). Exits 1 on any
mismatch or entkv error.

With --check-device-ids the decoders check the device's lengths and page ids in every step
(entkv_decoder_create_ex, ENTKV_CHECK_DEVICE_IDS): each step must record no fault, and a last
step run after one block-table entry on the device was pointed outside the pool must finish with
a finite output and report exactly that entry (entkv_decoder_device_id_faults).
"""
import argparse
import ctypes as C
import math
import sys

import torch

ENTKV_F16, ENTKV_BF16, ENTKV_F32, ENTKV_I32 = 0, 1, 2, 3
METHODS = {"dense": 0, "topk": 1, "gaussian": 2, "certified": 3, "auto": 4, "certified-pruned": 5}
METHOD_NAMES = {v: k for k, v in METHODS.items()}
DTYPES = {torch.float16: ENTKV_F16, torch.bfloat16: ENTKV_BF16, torch.float32: ENTKV_F32,
          torch.int32: ENTKV_I32}
OUT_TOL, TAU_TOL = 2e-3, 1e-4  # relative L2 error of each head's output; τ relative to 1+|τ|


class Problem(C.Structure):
    _fields_ = [("alpha", C.c_double), ("head_dim", C.c_uint32), ("page_size", C.c_uint32),
                ("q_heads", C.c_uint32), ("kv_heads", C.c_uint32), ("kv_dtype", C.c_int32),
                ("alibi", C.c_int32), ("sketch_bits", C.c_uint32), ("method", C.c_int32),
                ("topk_budget_pages", C.c_uint32), ("max_batch", C.c_uint32),
                ("num_pages", C.c_uint32), ("max_pages", C.c_uint32)]


class Tensor(C.Structure):
    _fields_ = [("ptr", C.c_uint64), ("dtype", C.c_int32), ("rank", C.c_uint32),
                ("shape", C.c_int64 * 4), ("strides", C.c_int64 * 4)]


class Buffers(C.Structure):
    _fields_ = [(name, Tensor) for name in
                ("q", "k_pool", "v_pool", "block_table", "seq_lens", "alibi_slopes", "out")] + \
               [(name, C.c_uint64) for name in
                ("metadata_ptr", "metadata_bytes", "workspace_ptr", "workspace_bytes")]


class IdFault(C.Structure):
    _fields_ = [("seq", C.c_uint32), ("count", C.c_uint32), ("logical_page", C.c_int32),
                ("value", C.c_int32)]


ENTKV_CHECK_DEVICE_IDS = 1

assert (C.sizeof(Problem), C.sizeof(Tensor), C.sizeof(Buffers), C.sizeof(IdFault)) == \
    (56, 80, 592, 16)


class EntkvError(RuntimeError):
    pass


def load(path):
    lib = C.CDLL(path)
    vp, u64p, i32p, st = C.c_void_p, C.POINTER(C.c_uint64), C.POINTER(C.c_int32), C.c_int32
    signatures = {
        "entkv_version": ([], C.c_char_p),
        "entkv_last_error": ([], C.c_char_p),
        "entkv_status_name": ([st], C.c_char_p),
        "entkv_bundle_open": ([C.c_char_p, C.POINTER(vp)], st),
        "entkv_bundle_free": ([vp], None),
        "entkv_decoder_create": ([vp, C.c_int32, C.POINTER(Problem), C.POINTER(vp)], st),
        "entkv_decoder_create_ex": ([vp, C.c_int32, C.POINTER(Problem), C.c_uint32,
                                     C.POINTER(vp)], st),
        "entkv_decoder_device_id_faults": ([vp, vp, vp, C.c_uint64, C.c_uint64,
                                            C.POINTER(IdFault), C.c_uint32,
                                            C.POINTER(C.c_uint32)], st),
        "entkv_decoder_free": ([vp], None),
        "entkv_decoder_workspace_size": ([vp, u64p], st),
        "entkv_decoder_metadata_size": ([vp, u64p], st),
        "entkv_decoder_workspace_slot": ([vp, C.c_char_p, u64p, u64p], st),
        "entkv_decoder_plan": ([vp, i32p, C.c_uint32, i32p, C.c_uint64, C.POINTER(vp)], st),
        "entkv_step_free": ([vp], None),
        "entkv_step_method": ([vp, i32p], st),
        "entkv_decoder_run": ([vp, vp, vp, C.POINTER(Buffers)], st),
        "entkv_decoder_append": ([vp, vp, vp, C.POINTER(Buffers)], st),
        "entkv_decoder_build_metadata": ([vp, vp, i32p, C.c_uint32, i32p, C.c_uint64,
                                          C.POINTER(Tensor), C.c_uint64, C.c_uint64], st),
    }
    for name, (args, res) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def check(lib, status, what):
    if status != 0:
        raise EntkvError(f"{what}: {lib.entkv_status_name(status).decode()}: "
                         f"{lib.entkv_last_error().decode()}")


def tensor(t):
    """An entkv_tensor describing torch tensor `t` (None = no tensor)."""
    if t is None:
        return Tensor()
    return Tensor(t.data_ptr(), DTYPES[t.dtype], t.dim(), (C.c_int64 * 4)(*t.shape),
                  (C.c_int64 * 4)(*t.stride()))


def host_i32(values):
    values = [int(v) for v in values]
    return (C.c_int32 * max(len(values), 1))(*values), len(values)


class Cache:
    """A paged KV cache: pools [num_pages, kv_heads, P, d], block table, lengths."""

    def __init__(self, args, lens):
        P, d = args.page_size, args.head_dim
        self.lens = list(lens)
        self.max_pages = math.ceil((max(lens) + args.steps) / P)
        self.num_pages = sum(math.ceil((n + args.steps) / P) for n in lens) + 7  # 7 unused
        perm = torch.randperm(self.num_pages).tolist()
        self.table = [[0] * self.max_pages for _ in lens]
        for b, n in enumerate(lens):
            for j in range(math.ceil(n / P)):
                self.table[b][j] = perm.pop()
        self.free = perm  # pages for tokens appended later
        shape = (self.num_pages, args.kv_heads, P, d)
        self.k = torch.randn(shape, device="cuda").to(torch.float16)
        self.v = torch.randn(shape, device="cuda").to(torch.float16)
        self.upload()

    def upload(self):
        self.lens_dev = torch.tensor(self.lens, dtype=torch.int32, device="cuda")
        self.table_dev = torch.tensor(self.table, dtype=torch.int32, device="cuda")

    def append_token(self, P):
        """Write K/V of one new token to every sequence and grow its length."""
        for b, n in enumerate(self.lens):
            if n % P == 0:
                self.table[b][n // P] = self.free.pop()
            page = self.table[b][n // P]
            self.k[page, :, n % P] = torch.randn_like(self.k[page, :, n % P])
            self.v[page, :, n % P] = torch.randn_like(self.v[page, :, n % P])
            self.lens[b] = n + 1
        self.upload()

    def host(self):
        flat = [p for row in self.table for p in row]
        return host_i32(self.lens), host_i32(flat)


def reference(args, cache, q, pages=None):
    """Float64 entmax attention per (sequence, query head): out [B, H, d], τ [B·H], support
    [B·H], z rows. `pages[b][kvh]` lists the logical pages to attend (None = all)."""
    P, d, alpha = args.page_size, args.head_dim, args.alpha
    group = args.q_heads // args.kv_heads
    zs, vs = [], []
    for b, n in enumerate(cache.lens):
        table = torch.tensor(cache.table[b], device="cuda")
        for h in range(args.q_heads):
            kvh = h // group
            if pages is None:
                idx = torch.arange(n, device="cuda")
            else:
                idx = torch.cat([torch.arange(j * P, min((j + 1) * P, n), device="cuda")
                                 for j in pages[b][kvh]])
            phys, slot = table[idx // P], idx % P
            keys = cache.k[phys, kvh, slot].double()
            zs.append((alpha - 1) * (keys @ q[b, h].double()) / math.sqrt(d))
            vs.append(cache.v[phys, kvh, slot].double())
    width = max(len(z) for z in zs)
    z = torch.full((len(zs), width), -math.inf, dtype=torch.float64, device="cuda")
    for i, row in enumerate(zs):
        z[i, :len(row)] = row
    beta = 1.0 / (alpha - 1.0)
    hi = z.max(dim=1).values
    lo = hi - 1.0  # f(M−1) ≥ 0 ≥ f(M) for f(τ) = Σ[z−τ]_+^β − 1
    for _ in range(100):
        mid = (lo + hi) / 2
        big = (torch.clamp(z - mid[:, None], min=0) ** beta).sum(dim=1) >= 1
        lo, hi = torch.where(big, mid, lo), torch.where(big, hi, mid)
    tau = (lo + hi) / 2
    p = torch.clamp(z - tau[:, None], min=0) ** beta
    out = torch.stack([p[i, :len(v)] @ v for i, v in enumerate(vs)])
    return out.view(len(cache.lens), args.q_heads, d), tau, (p > 0).sum(dim=1), z


def slot(lib, dec, ws, name, dtype, count):
    off, elems = C.c_uint64(), C.c_uint64()
    check(lib, lib.entkv_decoder_workspace_slot(dec, name.encode(), C.byref(off), C.byref(elems)),
          f"workspace_slot({name})")
    assert count <= elems.value
    return ws[off.value:off.value + 4 * count].view(dtype)


def device_id_faults(lib, dec, step, stream, ws):
    """(seq, count, logical page, value) of every sequence whose device ids the last step
    found bad (a host sync)."""
    cap, count = 64, C.c_uint32()
    faults = (IdFault * cap)()
    check(lib, lib.entkv_decoder_device_id_faults(dec, step, stream, ws.data_ptr(), ws.numel(),
                                                  faults, cap, C.byref(count)),
          "device_id_faults")
    return [(f.seq, f.count, f.logical_page, f.value) for f in faults[:min(count.value, cap)]]


def run_method(lib, bundle, args, method, lens):
    """Decode `args.steps` steps with `method`; returns table rows, raises on entkv errors."""
    torch.manual_seed(args.seed)
    cache = Cache(args, lens)
    B, H, Hkv, d, P = len(lens), args.q_heads, args.kv_heads, args.head_dim, args.page_size
    prob = Problem(alpha=args.alpha, head_dim=d, page_size=P, q_heads=H, kv_heads=Hkv,
                   kv_dtype=ENTKV_F16, alibi=0, sketch_bits=0, method=METHODS[method],
                   topk_budget_pages=args.budget, max_batch=B, num_pages=cache.num_pages,
                   max_pages=cache.max_pages)
    dec, step = C.c_void_p(), C.c_void_p()
    flags = ENTKV_CHECK_DEVICE_IDS if args.check_device_ids else 0
    check(lib, lib.entkv_decoder_create_ex(bundle, torch.cuda.current_device(), C.byref(prob),
                                           flags, C.byref(dec)), "decoder_create_ex")
    rows = []
    try:
        ws_bytes, md_bytes = C.c_uint64(), C.c_uint64()
        check(lib, lib.entkv_decoder_workspace_size(dec, C.byref(ws_bytes)), "workspace_size")
        check(lib, lib.entkv_decoder_metadata_size(dec, C.byref(md_bytes)), "metadata_size")
        # torch's caching allocator returns 512-byte aligned blocks (entkv needs 256).
        ws = torch.empty(ws_bytes.value, dtype=torch.uint8, device="cuda")
        md = torch.empty(md_bytes.value, dtype=torch.uint8, device="cuda")
        md_ptr = md.data_ptr() if md_bytes.value else 0
        stream = C.c_void_p(torch.cuda.current_stream().cuda_stream)
        (lens_h, nb), (table_h, nt) = cache.host()
        check(lib, lib.entkv_decoder_build_metadata(dec, stream, lens_h, nb, table_h, nt,
                                                    C.byref(tensor(cache.k)), md_ptr,
                                                    md_bytes.value), "build_metadata")
        q = torch.empty(B, H, d, dtype=torch.float16, device="cuda")
        out = torch.empty(B, H, d, dtype=torch.float32, device="cuda")
        for s in range(args.steps):
            if s > 0:
                cache.append_token(P)
            (lens_h, nb), (table_h, nt) = cache.host()
            lib.entkv_step_free(step)
            step = C.c_void_p()
            check(lib, lib.entkv_decoder_plan(dec, lens_h, nb, table_h, nt, C.byref(step)), "plan")
            bufs = Buffers(q=tensor(q), k_pool=tensor(cache.k), v_pool=tensor(cache.v),
                           block_table=tensor(cache.table_dev), seq_lens=tensor(cache.lens_dev),
                           alibi_slopes=tensor(None), out=tensor(out), metadata_ptr=md_ptr,
                           metadata_bytes=md_bytes.value, workspace_ptr=ws.data_ptr(),
                           workspace_bytes=ws_bytes.value)
            if s > 0:
                check(lib, lib.entkv_decoder_append(dec, step, stream, C.byref(bufs)), "append")
            q.copy_(torch.randn(B, H, d, device="cuda"))
            out.fill_(math.nan)  # poison: every element must be written
            check(lib, lib.entkv_decoder_run(dec, step, stream, C.byref(bufs)), "run")
            torch.cuda.synchronize()
            resolved = C.c_int32()
            check(lib, lib.entkv_step_method(step, C.byref(resolved)), "step_method")
            resolved = METHOD_NAMES[resolved.value]
            tau = slot(lib, dec, ws, "tau", torch.float32, B * H).double()
            support = slot(lib, dec, ws, "support", torch.int32, B * H)
            pages, kept = None, 1.0  # kept: fraction of the cache's tokens scored exactly
            if resolved in ("topk", "gaussian"):
                sel = slot(lib, dec, ws, "sel_pages", torch.int32, B * Hkv * cache.max_pages)
                cnt = slot(lib, dec, ws, "sel_count", torch.int32, B * Hkv).view(B, Hkv).tolist()
                sel = sel.view(B, Hkv, cache.max_pages).tolist()
                pages = [[sel[b][h][:cnt[b][h]] for h in range(Hkv)] for b in range(B)]
                for b, n in enumerate(cache.lens):  # ascending logical ids, the last page last
                    last = (n - 1) // P
                    if any(not pg or pg[-1] != last or pg != sorted(set(pg)) or pg[0] < 0
                           for pg in pages[b]):
                        raise EntkvError(f"step {s}: malformed selection of sequence {b}: {pages[b]}")
                kept = sum(min(P, n - j * P) for b, n in enumerate(cache.lens)
                           for h in range(Hkv) for j in pages[b][h]) / (sum(cache.lens) * Hkv)
            elif resolved in ("certified", "certified-pruned"):
                kept = slot(lib, dec, ws, "kept", torch.int32, B * H).sum().item() / \
                    (sum(cache.lens) * H)
            ref_out, ref_tau, ref_sup, z = reference(args, cache, q, pages)
            err = ((out.double() - ref_out).norm(dim=2) / ref_out.norm(dim=2)).flatten()
            tau_err = (tau - ref_tau).abs() / (1 + ref_tau.abs())
            band = (z - ref_tau[:, None]).abs() <= TAU_TOL * (1 + ref_tau.abs()[:, None])
            sup_bad = ((support.long() - ref_sup).abs() > band.sum(dim=1)).sum().item()
            faults = device_id_faults(lib, dec, step, stream, ws) if args.check_device_ids else []
            ok = (bool(torch.isfinite(out).all()) and err.max().item() <= OUT_TOL
                  and tau_err.max().item() <= TAU_TOL and sup_bad == 0 and not faults)
            rows.append([method, s, resolved, f"{err.max().item():.2e}",
                         f"{tau_err.max().item():.2e}", f"{support.double().mean().item():.1f}",
                         f"{100 * kept:.2f}%", "", "ok" if ok else
                         f"FAIL (support mismatches: {sup_bad})"])
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for i in range(5 + args.iters):
            if i == 5:
                start.record()
            check(lib, lib.entkv_decoder_run(dec, step, stream, C.byref(bufs)), "run")
        end.record()
        torch.cuda.synchronize()
        rows[-1][7] = f"{start.elapsed_time(end) / args.iters:.4f}"
        if args.check_device_ids:
            # One entry of sequence 0 on the device pointed past the pool, after planning.
            bad = cache.num_pages + 3
            cache.table_dev[0, 0] = bad
            out.fill_(math.nan)
            check(lib, lib.entkv_decoder_run(dec, step, stream, C.byref(bufs)), "run (bad id)")
            faults = device_id_faults(lib, dec, step, stream, ws)
            cache.upload()
            want = [(0, 1, 0, bad)]
            ok = bool(torch.isfinite(out).all()) and faults == want
            rows.append([method, "bad id", "-", "-", "-", "-", "-", "",
                         "ok" if ok else f"FAIL (faults {faults}, expected {want})"])
    finally:
        lib.entkv_step_free(step)
        lib.entkv_decoder_free(dec)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path to libentkv.so")
    ap.add_argument("--bundle", required=True, help="bundle directory or .entkvb file")
    ap.add_argument("--methods", default="dense,topk,gaussian,certified,certified-pruned,auto")
    ap.add_argument("--n", type=int, default=4096, help="tokens of the longest sequence")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2, help="decode steps (tokens appended between)")
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--q-heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--budget", type=int, default=64, help="topk: pages kept besides the last")
    ap.add_argument("--iters", type=int, default=50, help="timed runs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-device-ids", action="store_true",
                    help="decoders check the device's lengths and page ids (see above)")
    args = ap.parse_args()
    if args.steps < 1 or args.batch < 1 or args.n < args.page_size:
        ap.error("--steps and --batch must be ≥ 1, --n ≥ the page size")
    if set(args.methods.split(",")) - METHODS.keys():
        ap.error(f"--methods: pick from {','.join(METHODS)}")
    P = args.page_size
    # One token short of a page boundary (the first append completes a page), a whole number of
    # pages (the first append opens a new page), then lengths ending mid-page.
    lens = [args.n - 1, max(P, args.n // 3 // P * P)] + \
        [args.n // (2 * b + 1) + 5 for b in range(2, args.batch)]
    lens = lens[:args.batch]

    lib = load(args.lib)
    print(f"entkv {lib.entkv_version().decode()} on {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}; α {args.alpha}, d {args.head_dim}, P {P}, "
          f"heads {args.q_heads}/{args.kv_heads}, lengths {lens}")
    bundle = C.c_void_p()
    failed = False
    try:
        check(lib, lib.entkv_bundle_open(args.bundle.encode(), C.byref(bundle)), "bundle_open")
        rows = []
        for method in args.methods.split(","):
            try:
                rows += run_method(lib, bundle, args, method, lens)
            except EntkvError as e:
                rows.append([method, "-", "-", "-", "-", "-", "-", "-", f"ERROR {e}"])
    except EntkvError as e:
        print(f"ERROR {e}")
        return 1
    finally:
        lib.entkv_bundle_free(bundle)
    head = ["method", "step", "ran", "max rel err", "max τ err", "mean support", "kept",
            "run ms", "result"]
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head) - 1)]
    for r in [head] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + str(r[-1]))
        failed |= r is not head and r[-1] != "ok"
    print("FAILED" if failed else "all ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
