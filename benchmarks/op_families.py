"""One representative op per kernel family, ours (webgpu) vs CUDA in the same process.

For each op: milliseconds per call on webgpu and on CUDA (after 0.2 s of warm-up, the best
of five timed batches of ten calls, each ended by a synchronize) and the ratio CUDA time / our time (1.0 = as fast as CUDA).
Without CUDA, only our times print. Shapes are moderate so the software adapter can run
it too (--scale 0.25 shrinks every size there).

    python3 benchmarks/op_families.py [--scale 1.0] [--only mm,softmax]
"""
import argparse

import torch
import torch.nn.functional as F
import torch_webgpu  # noqa: F401

from timing import best_ms


def cases(s):
    """name -> setup(device) returning the function to time."""
    def n(x):
        return max(1, int(x * s))

    def mm(d):
        a, b = torch.randn(n(2048), n(2048), device=d), torch.randn(n(2048), n(2048), device=d)
        return lambda: a @ b

    def bmm(d):
        a, b = torch.randn(32, n(256), 64, device=d), torch.randn(32, 64, n(256), device=d)
        return lambda: torch.bmm(a, b)

    def linear_relu(d):
        x, w, b = torch.randn(n(1024), 1024, device=d), torch.randn(1024, 1024, device=d), torch.randn(1024, device=d)
        return lambda: F.relu(F.linear(x, w, b))

    def conv2d(d):
        x, w = torch.randn(8, 64, n(56), n(56), device=d), torch.randn(64, 64, 3, 3, device=d)
        return lambda: F.conv2d(x, w, padding=1)

    def sum_rows(d):
        x = torch.randn(n(4096), 4096, device=d)
        return lambda: x.sum(dim=1)

    def sum_all(d):
        x = torch.randn(n(16 * 1024 * 1024), device=d)
        return lambda: x.sum()

    def softmax(d):
        x = torch.randn(n(4096), 1024, device=d)
        return lambda: torch.softmax(x, dim=-1)

    def layer_norm(d):
        x = torch.randn(n(4096), 1024, device=d)
        return lambda: F.layer_norm(x, (1024,))

    def cumsum(d):
        x = torch.randn(n(1024), 4096, device=d)
        return lambda: x.cumsum(dim=1)

    def sort(d):
        x = torch.randn(n(256), 4096, device=d)
        return lambda: x.sort(dim=1)

    def gather(d):
        x = torch.randn(n(4096), 1024, device=d)
        i = torch.randint(0, 1024, (n(4096), 1024), device=d)
        return lambda: x.gather(1, i)

    def index_select(d):
        x = torch.randn(50000, 256, device=d)
        i = torch.randint(0, 50000, (n(32768),), device=d)
        return lambda: x.index_select(0, i)

    def cat(d):
        xs = [torch.randn(n(1024), 1024, device=d) for _ in range(4)]
        return lambda: torch.cat(xs, dim=1)

    def uniform(d):
        x = torch.empty(n(16 * 1024 * 1024), device=d)
        return lambda: x.uniform_()

    def max_pool(d):
        x = torch.randn(8, 64, n(112), n(112), device=d)
        return lambda: F.max_pool2d(x, 3, 2, 1)

    def gelu(d):
        x = torch.randn(n(16 * 1024 * 1024), device=d)
        return lambda: F.gelu(x)

    def mlp_train_step(d):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                                    torch.nn.Linear(1024, 10)).to(d)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randn(n(256), 512, device=d)
        y = torch.randint(0, 10, (n(256),), device=d)

        def step():
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        return step

    return dict(mm=mm, bmm=bmm, linear_relu=linear_relu, conv2d=conv2d, sum_rows=sum_rows,
                sum_all=sum_all, softmax=softmax, layer_norm=layer_norm, cumsum=cumsum, sort=sort,
                gather=gather, index_select=index_select, cat=cat, uniform=uniform,
                max_pool=max_pool, gelu=gelu, mlp_train_step=mlp_train_step)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the sizes")
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args()
    has_cuda = torch.cuda.is_available()
    props = torch.webgpu.get_device_properties()
    print(f"webgpu: {props.name} ({props.backend}); cuda: "
          f"{torch.cuda.get_device_name() if has_cuda else 'not available'}; scale {args.scale}")
    print(f"{'op':16s} {'webgpu ms':>10s} {'cuda ms':>10s} {'cuda/ours':>10s}")
    selected = set(filter(None, args.only.split(",")))
    for name, setup in cases(args.scale).items():
        if selected and name not in selected:
            continue
        ours = best_ms(setup("webgpu"), "webgpu")
        try:
            ref = best_ms(setup("cuda"), "cuda") if has_cuda else float("nan")
        except RuntimeError as e:  # reported, not hidden: see docs/PERFORMANCE.md
            print(f"{name:16s} {ours:10.3f}   cuda failed: {str(e).splitlines()[0][:90]}", flush=True)
            continue
        print(f"{name:16s} {ours:10.3f} {ref:10.3f} {ref / ours:10.3f}", flush=True)
    print("cuda/ours: our speed as a fraction of CUDA's (1.0 = as fast; higher is better)")


if __name__ == "__main__":
    main()
