"""A 6 GiB float32 tensor (larger than the H200's 4 GiB storage binding) through add, sum,
softmax over rows, copies, index_select, mm, layer_norm, cross_entropy, cumsum, flip, topk,
index_copy_, and sort / topk / unique of the whole tensor as one row on webgpu, compared with the same ops on CUDA. Prints one PASS/FAIL line per check with its time and bandwidth.

    PYTHONPATH=python python3 scripts/h200/check_large_tensors.py [--gib 6]
"""
import argparse
import time

import torch

import torch_webgpu  # noqa: F401

CHUNK = 1 << 26  # elements per host transfer (256 MiB of float32)


def sync():
    torch.webgpu.synchronize()
    torch.cuda.synchronize()


def timed(fn):
    sync()
    start = time.perf_counter()
    out = fn()
    torch.webgpu.synchronize()
    return out, time.perf_counter() - start


def fill_both(n, seed=0):
    """Equal tensors on webgpu and CUDA, uploaded in chunks from the CPU."""
    w = torch.empty(n, device="webgpu")
    c = torch.empty(n, device="cuda")
    g = torch.Generator().manual_seed(seed)
    for i in range(0, n, CHUNK):
        part = torch.rand(min(CHUNK, n - i), generator=g) * 8 - 4
        w[i:i + part.numel()].copy_(part)
        c[i:i + part.numel()].copy_(part)
    return w, c


def max_diff(w, c):
    """Largest |w - c| over two equal-shaped tensors, compared in chunks on the CPU."""
    wf, cf = w.reshape(-1), c.reshape(-1)
    worst = 0.0
    for i in range(0, wf.numel(), CHUNK):
        a = wf[i:i + CHUNK].cpu().double()
        b = cf[i:i + CHUNK].cpu().double()
        worst = max(worst, (a - b).abs().max().item())
    return worst


def report(name, ok, seconds, nbytes, detail):
    rate = nbytes / seconds / 1e9 if seconds > 0 else 0.0
    print(f"{'PASS' if ok else 'FAIL'} {name:<24} {seconds * 1e3:9.1f} ms  {rate:8.1f} GB/s  {detail}",
          flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=6.0)
    parser.add_argument("--one-row-only", action="store_true", help="only the one-row sort checks")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    p = torch.webgpu.get_device_properties()
    n = int(args.gib * (1 << 30)) // 4 // 4096 * 4096
    print(f"adapter {p.name}: binding {p.max_storage_buffer_binding_size} bytes, "
          f"max buffer {p.max_buffer_size} bytes; tensor {n * 4} bytes ({n} float32)")
    if n * 4 <= p.max_storage_buffer_binding_size:
        print("FAIL the tensor fits one binding: nothing is checked")
        return
    w, c = fill_both(n)
    nbytes = n * 4
    if args.one_row_only:
        one_row_checks(w, c, nbytes)
        return

    y, t = timed(lambda: w + 1.5)
    report("add", max_diff(y, c + 1.5) == 0, t, 2 * nbytes, "exact")
    del y

    s, t = timed(lambda: w.sum())
    ref = c.double().sum().item()
    got = s.item()
    report("sum", abs(got - ref) <= 1e-5 * max(1.0, abs(ref)) + 1e-3 * n ** 0.5, t, nbytes,
           f"webgpu {got:.6g} cuda(f64) {ref:.6g}")

    rows = w.view(-1, 4096)
    sm, t = timed(lambda: torch.softmax(rows, dim=-1))
    d = max_diff(sm, torch.softmax(c.view(-1, 4096), dim=-1))
    report("softmax rows", d <= 1e-6, t, 2 * nbytes, f"max diff {d:.3g}")
    del sm

    e = torch.empty_like(w)
    _, t = timed(lambda: e.copy_(w))
    report("copy", max_diff(e, c) == 0, t, 2 * nbytes, "exact")
    del e

    tr, t = timed(lambda: rows.t().contiguous())
    report("transposed copy", max_diff(tr, c.view(-1, 4096).t().contiguous()) == 0, t, 2 * nbytes,
           "exact")
    del tr

    h, t = timed(lambda: w.half())
    report("cast to float16", max_diff(h, c.half()) == 0, t, nbytes * 3 // 2, "exact")
    del h

    idx = torch.randint(0, rows.shape[0], (20000,), generator=torch.Generator().manual_seed(1))
    sel, t = timed(lambda: rows.index_select(0, idx.to("webgpu")))
    report("index_select rows", max_diff(sel, c.view(-1, 4096).index_select(0, idx.cuda())) == 0,
           t, 2 * sel.numel() * 4, f"{idx.numel()} rows of 4096")
    del sel

    b_cpu = torch.rand(1024, 64, generator=torch.Generator().manual_seed(2)) - 0.5
    a_w = w.view(-1, 1024)
    mm, t = timed(lambda: a_w @ b_cpu.to("webgpu"))
    ref = c.view(-1, 1024) @ b_cpu.cuda()
    d = max_diff(mm, ref)
    flops = 2 * a_w.shape[0] * 1024 * 64
    report("mm huge M", d <= 2e-3, t, nbytes, f"max diff {d:.3g}, {flops / t / 1e12:.2f} TFLOP/s")
    del mm, ref

    F = torch.nn.functional
    crow = c.view(-1, 4096)
    ln, t = timed(lambda: F.layer_norm(rows, (4096,)))
    d = max_diff(ln, F.layer_norm(crow, (4096,)))
    report("layer_norm rows", d <= 1e-4, t, 2 * nbytes, f"max diff {d:.3g}")
    del ln

    tg = torch.randint(0, 4096, (rows.shape[0],), generator=torch.Generator().manual_seed(3))
    ce, t = timed(lambda: F.cross_entropy(rows, tg.to("webgpu")))
    ref = F.cross_entropy(crow, tg.cuda()).item()
    report("cross_entropy", abs(ce.item() - ref) <= 1e-4 * abs(ref), t, nbytes,
           f"webgpu {ce.item():.6g} cuda {ref:.6g}")

    cs, t = timed(lambda: torch.cumsum(rows, 1))
    d = max_diff(cs, torch.cumsum(crow, 1))
    report("cumsum rows", d <= 1e-2, t, 2 * nbytes, f"max diff {d:.3g}")
    del cs

    fl, t = timed(lambda: rows.flip(0))
    report("flip rows", max_diff(fl, crow.flip(0)) == 0, t, 2 * nbytes, "exact")
    del fl

    tk, t = timed(lambda: torch.topk(rows, 4, dim=1)[0])
    report("topk rows", max_diff(tk, torch.topk(crow, 4, dim=1)[0]) == 0, t, nbytes, "values exact")
    del tk

    pos = torch.randint(0, rows.shape[0], (64,), generator=torch.Generator().manual_seed(4)).unique()
    new_rows = torch.rand(pos.numel(), 4096, generator=torch.Generator().manual_seed(5))
    _, t = timed(lambda: rows.index_copy_(0, pos.to("webgpu"), new_rows.to("webgpu")))
    crow.index_copy_(0, pos.cuda(), new_rows.cuda())
    report("index_copy_ rows", max_diff(rows, crow) == 0, t, new_rows.numel() * 8,
           f"{pos.numel()} rows into {rows.shape[0]}")
    del rows, crow
    torch.webgpu.empty_cache()
    torch.cuda.empty_cache()
    one_row_checks(w, c, nbytes)


def one_row_checks(w, c, nbytes):
    """The whole tensor as one row, longer than a sort binding: split by value into buckets."""
    (sv, si), t = timed(lambda: torch.sort(w, stable=True))
    torch.webgpu.empty_cache()  # our cached blocks would starve CUDA's sort below
    cv, ci = torch.sort(c, stable=True)
    report("sort one row", max_diff(sv, cv) == 0 and max_diff(si, ci) == 0, t, nbytes * 3,
           "values and stable indices exact")
    del sv, si, cv, ci
    torch.cuda.empty_cache()
    tk, t = timed(lambda: torch.topk(w, 10)[0])
    report("topk one row", max_diff(tk, torch.topk(c, 10)[0]) == 0, t, nbytes, "values exact")
    q = (w * 64).round()
    u, t = timed(lambda: torch.unique(q, return_counts=True))
    del q
    torch.webgpu.empty_cache()
    cu = torch.unique((c * 64).round(), return_counts=True)
    report("unique one row", all(max_diff(a, b) == 0 for a, b in zip(u, cu)), t, nbytes,
           f"{u[0].numel()} values and counts exact")


if __name__ == "__main__":
    main()
