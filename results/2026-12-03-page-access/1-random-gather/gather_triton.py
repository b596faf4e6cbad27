# Random-access read rate of the H200 at page_bounds' granularity, with a Triton kernel that
# does nothing but load: each program reads ROWS rows of CHUNK bytes at the given row indices
# and sums them (one store a program, so the loads cannot be dropped). The pool is the size of
# `paper` 1M's meta_box (524288 pages x 24 KV heads x 64 B = 805 MB).
import json, sys, torch, triton, triton.language as tl
torch.manual_seed(0)
dev = torch.device("cuda")
POOL = 805_306_368

@triton.jit
def gather_sum(pool, idx, out, W: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * ROWS + tl.arange(0, ROWS)
    rows = tl.load(idx + r).to(tl.int64)
    v = tl.load(pool + rows[:, None] * W + tl.arange(0, W)[None, :])
    tl.store(out + pid, tl.sum(v))

def timeit(fn, reps=30):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort(); return ts[len(ts) // 2]

pool = torch.randint(0, 7, (POOL // 4,), dtype=torch.int32, device=dev)
res = []
def run(name, chunk, idx, rows_per_prog=256):
    W = chunk // 4
    n = idx.numel()
    out = torch.empty(n // rows_per_prog, dtype=torch.int32, device=dev)
    f = lambda: gather_sum[(n // rows_per_prog,)](pool, idx, out, W=W, ROWS=rows_per_prog)
    ms = timeit(f)
    b = n * chunk
    res.append(dict(pattern=name, chunk=chunk, ms=ms, read_tbs=b / ms / 1e9))
    print(f"{name:60s} {chunk:>5d} B  {ms:.3f} ms  {b/ms/1e9:.2f} TB/s", flush=True)

for chunk in [64, 128, 256, 512]:
    n = POOL // chunk
    run("sequential rows", chunk, torch.arange(n, device=dev, dtype=torch.int32))
    run("random rows", chunk, torch.randperm(n, device=dev).to(torch.int32))
# 64 B blocks in the [page][head] layout, pages shuffled: which heads are read together.
pages = POOL // (24 * 64)
perm = torch.randperm(pages, device=dev).to(torch.int32)
h = torch.arange(24, device=dev, dtype=torch.int32)
run("head-major (a head's pages together)", 64, (perm[None, :] * 24 + h[:, None]).reshape(-1).contiguous())
run("page-major (a page's 24 heads together)", 64, (perm[:, None] * 24 + h[None, :]).reshape(-1).contiguous())
run("8 heads of a page together", 64, (perm[None, :, None] * 24 + h.view(3, 1, 8)).reshape(-1).contiguous())
run("2 heads of a page together", 64, (perm[None, :, None] * 24 + h.view(12, 1, 2)).reshape(-1).contiguous())
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
               results=res), open(sys.argv[1], "w"), indent=1)
