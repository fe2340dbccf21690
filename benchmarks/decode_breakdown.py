"""Where a decode token's time goes: HF `generate` against the model's forward alone.

For one architecture of scripts/e2e_models.py (seeded weights, static KV cache, or HF's
dynamic one with `--cache dynamic`, as scripts/e2e_models.py's table uses), on each
device, eager and compiled (`torch.compile(mode=...)`):
  * generate tok/s: `model.generate(..., cache_implementation="static")`, what users see;
  * forward tok/s: the decode forward called in a loop (argmax of the logits on the device
    feeds the next step, one synchronisation at the end): the model without HF's per-step
    Python (logits processors, stopping criteria, input bookkeeping);
  * dispatches per forward on webgpu (torch_webgpu._C.dispatch_stats).
The gap between the two rates is host work outside the model; the forward rate is what
kernel and replay work can move.

    python3 benchmarks/decode_breakdown.py --model qwen2.5 --devices webgpu,cuda \
        --init-device cuda [--modes eager,reduce-overhead] [--tiny]
"""
import argparse
import contextlib
import copy
import json
import os
import statistics
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import e2e_models  # noqa: E402
import torch_webgpu  # noqa: E402,F401
import torch_webgpu.generation  # noqa: E402
from timing import cuda_kernel_profile, cuda_kernel_times  # noqa: E402


def sync(device):
    e2e_models.synchronize(device)


def dispatches():
    """webgpu dispatches so far: eager launches and those of replayed compiled graphs."""
    from torch._dynamo.utils import counters

    return (torch_webgpu._C.dispatch_stats()["dispatches"]
            + counters["webgpu"]["graph_replayed_dispatches"])


def replay_host_us():
    """Host microseconds spent in graph replays so far (all, and in the submits)."""
    from torch._dynamo.utils import counters

    return counters["webgpu"]["graph_replay_host_us"], counters["webgpu"]["graph_replay_submit_us"]


def host_stats():
    """webgpu's host-side counters that explain an eager token's host time."""
    s = torch_webgpu._C.dispatch_stats()
    out = {k: s.get(k, 0) for k in ("submits", "host_waits", "host_wait_us", "bind_groups_made", "pipelines")}
    out["buffers_made"] = torch.webgpu.memory_stats().get("segment.all.allocated", 0)
    return out


def forward_loop(model, prompt, steps, device, cache, around=contextlib.nullcontext):
    """Prefill, then `steps` decode forwards fed by the device's own argmax, into `cache`
    (a static one is reset first: one cache for every loop of a model, as a new one would
    recompile; a callable makes a fresh dynamic cache). `around()` wraps the decode steps
    alone (a profiler: prefill left out)."""
    if callable(cache):
        cache = cache()
    else:
        cache.reset()
    length = prompt.shape[1]
    with torch.no_grad():
        out = model(input_ids=prompt, past_key_values=cache, use_cache=True,
                    cache_position=torch.arange(length, device=device))
        ids = out.logits[:, -1:].argmax(-1)
        positions = [torch.tensor([length + i], device=device) for i in range(steps)]
        sync(device)
        before = dispatches() if device == "webgpu" else 0
        stats_before = host_stats() if device == "webgpu" else {}
        host_before = replay_host_us()
        tokens = []
        with around():
            start = time.perf_counter()
            for i in range(steps):
                if device == "cuda":  # CUDA graph trees: the previous step's outputs are done with
                    torch.compiler.cudagraph_mark_step_begin()
                out = model(input_ids=ids, past_key_values=cache, use_cache=True,
                            cache_position=positions[i], position_ids=positions[i][None])
                ids = out.logits[:, -1:].argmax(-1)
                tokens.append(ids)
            issued = time.perf_counter() - start
            sync(device)
            elapsed = time.perf_counter() - start
        after = dispatches() if device == "webgpu" else 0
        stats_after = host_stats() if device == "webgpu" else {}
        host_after = replay_host_us()
    # Host time to issue the steps against the time to finish them: equal when the host
    # bounds decode, issue much shorter when the device does.
    return {"forward_tok_s": steps / elapsed,
            "forward_issue_ms_per_token": issued / steps * 1e3,
            "replay_host_us_per_token": (host_after[0] - host_before[0]) / steps,
            "replay_submit_us_per_token": (host_after[1] - host_before[1]) / steps,
            "dispatches_per_token": (after - before) / steps if device == "webgpu" else None,
            # Per token: submits, host waits (and their us), bind groups and pipelines made.
            **{f"{k}_per_token": (stats_after[k] - stats_before[k]) / steps for k in stats_after},
            "tokens": torch.cat(tokens, 1)[0].tolist()}


def compare_batch_policies(model, prompt, args, cache_kwargs):
    """Eager webgpu decode under each submit policy ("max:first[:flush_us[:spin_us]]", as
    TORCH_WEBGPU_MAX_BATCH, _EAGER_FIRST_BATCH, _EAGER_FLUSH_US and _SPIN_WAIT_US),
    alternated round by round in this one process so that the machine's drift lands on every
    policy alike; medians per policy."""
    policies = [tuple(int(v) for v in p.split(":")) for p in args.batch_policies.split(",")]
    default_spin = torch_webgpu._C._set_spin_wait_us(0)
    m = copy.deepcopy(model).to("webgpu")
    runs = {p: {"generate": [], "forward": [], "issue": [], "submits": []} for p in policies}
    for _ in range(args.repeat):
        for p in policies:
            torch_webgpu._C._set_eager_batches(*p[:3])
            torch_webgpu._C._set_spin_wait_us(p[3] if len(p) > 3 else default_spin)
            gen = e2e_models.greedy(m, prompt, args.tokens, "webgpu", **cache_kwargs)
            loop = forward_loop(m, prompt.to("webgpu"), args.tokens, "webgpu",
                                lambda: transformers.DynamicCache(config=m.config))
            r = runs[p]
            r["generate"].append(gen["tok_s"])
            r["forward"].append(loop["forward_tok_s"])
            r["issue"].append(loop["forward_issue_ms_per_token"])
            r["submits"].append(loop["submits_per_token"])
    print(f"\n{args.model}, eager webgpu, {args.tokens} tokens, {args.cache} cache (generate), "
          f"dynamic cache (forward loop); policies alternated {args.repeat} times in one process")
    print("| max:first[:flush us[:spin us]] | generate tok/s (median; runs) | forward tok/s | issue ms/token | submits/token |")
    print("|---|---|---|---|---|")
    for p, r in runs.items():
        med = statistics.median
        print(f"| {':'.join(map(str, p))} | {med(r['generate']):.1f} ({', '.join(f'{v:.0f}' for v in r['generate'])}) "
              f"| {med(r['forward']):.1f} | {med(r['issue']):.2f} | {med(r['submits']):.2f} |", flush=True)


def compare_wait_settings(model, prompt, args, cache_kwargs):
    """webgpu decode in each mode of --modes under each "replay_first:spin_us" setting (as
    TORCH_WEBGPU_REPLAY_FIRST_BATCH and TORCH_WEBGPU_SPIN_WAIT_US), alternated run by run in
    one process; medians per setting."""
    settings = [tuple(int(v) for v in p.split(":")) for p in args.wait_settings.split(",")]
    print(f"\n{args.model}, webgpu, {args.tokens} tokens, {args.cache} cache, "
          f"{'stop check deferred' if args.defer_stop else 'stop flag read every token'}; "
          f"settings alternated {args.repeat} times in one process")
    print("| mode | replay first batch:spin us | generate tok/s (median; runs) | host waits/token |")
    print("|---|---|---|---|")
    for mode in args.modes.split(","):
        m = copy.deepcopy(model).to("webgpu")
        if mode != "eager":
            m = e2e_models.compiled(m, mode)
        e2e_models.greedy(m, prompt, args.tokens, "webgpu", timed=False, **cache_kwargs)  # compiles
        runs = {p: ([], []) for p in settings}
        for _ in range(args.repeat):
            for p in settings:
                torch_webgpu._C._set_replay_first_batch(p[0])
                torch_webgpu._C._set_spin_wait_us(p[1])
                waits = torch_webgpu._C.dispatch_stats()["host_waits"]
                gen = e2e_models.greedy(m, prompt, args.tokens, "webgpu", clock_waits=not args.defer_stop,
                                        **cache_kwargs)
                runs[p][0].append(gen["tok_s"])
                runs[p][1].append((torch_webgpu._C.dispatch_stats()["host_waits"] - waits) / args.tokens)
        for p, (rates, waits) in runs.items():
            print(f"| {mode} | {p[0]}:{p[1]} | {statistics.median(rates):.1f} "
                  f"({', '.join(f'{v:.0f}' for v in rates)}) | {statistics.median(waits):.2f} |", flush=True)
        del m
        torch._dynamo.reset()
        e2e_models.release("webgpu")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5", choices=list(e2e_models.MODELS))
    parser.add_argument("--devices", default="webgpu")
    parser.add_argument("--modes", default="eager,reduce-overhead",
                        help="eager, default and/or reduce-overhead (torch.compile modes)")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--init-device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--profile", action="store_true",
                        help="also print webgpu's kernel table (GPU time) of 4 decode steps")
    parser.add_argument("--host-profile", action="store_true",
                        help="also print the host functions (cProfile) of one webgpu generate per mode")
    parser.add_argument("--defer-stop", action="store_true",
                        help="generate decides to stop a step late on webgpu and cuda, as transformers does "
                             "on mps (torch_webgpu.generation.defer_stop_check): no host wait per token")
    parser.add_argument("--repeat", type=int, default=1,
                        help="timed generate runs (each after its own warm-up); the table shows the median")
    parser.add_argument("--cache", choices=["static", "dynamic"], default="static",
                        help="KV cache: static (default; what compiled decode needs) or HF's dynamic one")
    parser.add_argument("--batch-policies", metavar="MAX:FIRST[:FLUSH_US[:SPIN_US]],...",
                        help="eager webgpu only: alternate these submit (and wait) policies in one "
                             "process (e.g. 256:0,256:32,64:0,256:0:300,256:0:0:0) and print a table "
                             "per policy")
    parser.add_argument("--wait-settings", metavar="REPLAY_FIRST:SPIN_US,...",
                        help="webgpu only: alternate these replay first batches and wait spins in one "
                             "process for each of --modes (e.g. 16:0,16:1000,4096:1000)")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    if args.defer_stop and not torch_webgpu.generation.defer_stop_check(("webgpu", "cuda")):
        print(f"--defer-stop: transformers {transformers.__version__} has no deferred stop check; ignored")
        args.defer_stop = False

    spec = e2e_models.MODELS[args.model]
    model = e2e_models.build_model(spec, tiny=args.tiny, init_device=args.init_device)
    prompt = e2e_models.prompt_tokens(model.config.vocab_size)
    # generate's own dynamic cache is its default: no argument.
    cache_kwargs = {"cache_implementation": "static"} if args.cache == "static" else {}
    if args.batch_policies:
        return compare_batch_policies(model, prompt, args, cache_kwargs)
    if args.wait_settings:
        return compare_wait_settings(model, prompt, args, cache_kwargs)
    rows = []
    for device in args.devices.split(","):
        for mode in args.modes.split(","):
            m = copy.deepcopy(model).to(device)
            if mode != "eager":
                m = e2e_models.compiled(m, mode)
            row = {"device": device, "mode": mode}
            try:
                rates, firsts, medians = [], [], []
                for _ in range(args.repeat):  # generate's rate moves from run to run: the median
                    host_before = []  # replay host time of the timed run only (not its warm-up)
                    gen = e2e_models.greedy(m, prompt, args.tokens, device, clock_waits=not args.defer_stop,
                                            before_timed=lambda: host_before.extend(replay_host_us()),
                                            **cache_kwargs)
                    host_after = replay_host_us()
                    rates.append(gen.get("tok_s"))
                    firsts.append(gen.get("first_step_ms"))
                    medians.append(gen.get("median_step_ms"))
                row["defer_stop"] = args.defer_stop
                row["generate_tok_s"] = statistics.median(rates)
                row["generate_tok_s_runs"] = [round(r, 1) for r in rates]
                # The first decode step against the median of the others (ms, per run).
                row["generate_first_step_ms_runs"] = [round(r, 3) for r in firsts if r is not None]
                row["generate_median_step_ms_runs"] = [round(r, 3) for r in medians if r is not None]
                row["generate_replay_host_us_per_token"] = (host_after[0] - host_before[0]) / args.tokens
                row["generate_replay_submit_us_per_token"] = (host_after[1] - host_before[1]) / args.tokens
                if args.cache == "static":
                    cache = transformers.StaticCache(config=m.config,
                                                     max_cache_len=prompt.shape[1] + args.tokens + 1)
                else:
                    cache = lambda: transformers.DynamicCache(config=m.config)  # noqa: E731
                forward_loop(m, prompt.to(device), args.tokens, device, cache)  # warm-up (compiles)
                row.update(forward_loop(m, prompt.to(device), args.tokens, device, cache))
                row["tokens_equal_generate"] = row["tokens"][:args.tokens - 1] == gen["tokens"][1:]
                if args.host_profile and device == "webgpu":
                    import cProfile
                    import pstats

                    profiler = cProfile.Profile()
                    profiler.enable()
                    e2e_models.greedy(m, prompt, args.tokens, device, timed=False, **cache_kwargs)
                    profiler.disable()
                    print(f"{device} {mode}: host functions of one generate ({args.tokens} tokens)")
                    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
                if args.profile and device == "webgpu":
                    for _ in range(2):  # the first profiled run may recompile (new guards)
                        prof = torch.webgpu.profiler.profile()
                        forward_loop(m, prompt.to(device), 4, device, cache, around=lambda: prof)
                    row["gpu_ms_per_token"] = prof.total_us / 4 / 1e3  # kernels only, no gaps
                    print(f"{device} {mode}, 4 decode steps ({prof.timing} time; "
                          f"{row['gpu_ms_per_token']:.3f} ms of kernels per token):")
                    print(prof.table(sort_by="gpu_time", row_limit=40), flush=True)
                elif args.profile and device == "cuda":
                    for _ in range(2):
                        prof = cuda_kernel_profile()
                        forward_loop(m, prompt.to(device), 4, device, cache, around=lambda: prof)
                    times = cuda_kernel_times(prof)
                    row["gpu_ms_per_token"] = sum(times.values()) / 4 / 1e3
                    print(f"{device} {mode}, 4 decode steps (CUPTI; {row['gpu_ms_per_token']:.3f} ms "
                          f"of kernels per token):")
                    for name, us in sorted(times.items(), key=lambda kv: -kv[1])[:25]:
                        print(f"  {us / 4:9.1f} us/token  {name[:110]}")
            except Exception as error:  # noqa: BLE001 - a failure is a row
                row["error"] = f"{type(error).__name__}: {error}"
            del m
            torch._dynamo.reset()
            e2e_models.release(device)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "tokens"}), flush=True)

    print(f"\n{args.model}{' (tiny)' if args.tiny else ''}, {args.tokens} tokens, {args.cache} cache")
    print("| device | mode | generate tok/s | forward tok/s | forward issue ms/token | dispatches/token "
          "| same tokens |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['device']} | {r['mode']} | error: {r['error'][:80]} | | | | |")
            continue
        d = r["dispatches_per_token"]
        print(f"| {r['device']} | {r['mode']} | {r['generate_tok_s']:.1f} | {r['forward_tok_s']:.1f} "
              f"| {r['forward_issue_ms_per_token']:.2f} | {'' if d is None else f'{d:.0f}'} "
              f"| {r['tokens_equal_generate']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
