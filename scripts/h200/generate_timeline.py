"""Where a generate's token goes on the host's clock: HF generate (static cache, deferred
stop check) with its host waits, the forward (compiled with reduce-overhead, or eager with
`--mode eager`) and our graph replay timestamped, one median row per device.

Per token: `wait` = the host blocked in `bool(tensor)` (transformers' mask check reads
`padding_mask.sum() == numel`: it waits for everything queued, the previous token's forward
included) and the deferred stop check (its flag copy and its wait for the previous flag); `to forward` = from the end of that wait to the
compiled forward's call; `forward` = the call (on webgpu: Dynamo, AOT wrappers, input copies
and the replay, whose own time is `replay`); `after` = from the forward's return to the next
wait (logits, argmax, stop check, kwargs); `between waits` = host work between a token's
first and last wait. The GPU idles from the end of `wait` until the
replay's first submit.

In eager mode the forward is the host issuing the step's ops; the GPU runs them as the
recorder submits its batches, and `wait` is what the GPU still had to do after the host
was done (plus the read-back).

    python3 scripts/h200/generate_timeline.py --model qwen2.5 --devices webgpu,cuda [--mode eager]
"""
import argparse
import copy
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import e2e_models  # noqa: E402
import torch_webgpu  # noqa: E402,F401
import torch_webgpu.generation  # noqa: E402
from torch_webgpu.graphs import WebGPUGraph  # noqa: E402

EVENTS = []


def stamp(kind, fn):
    def wrapper(*args, **kwargs):
        EVENTS.append((kind + "<", time.perf_counter()))
        try:
            return fn(*args, **kwargs)
        finally:
            EVENTS.append((kind + ">", time.perf_counter()))
    return wrapper


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="qwen2.5", choices=list(e2e_models.MODELS))
    parser.add_argument("--devices", default="webgpu,cuda")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--init-device", default="cuda")
    parser.add_argument("--mode", default="reduce-overhead", help="eager, or a torch.compile mode")
    args = parser.parse_args()
    torch_webgpu.generation.defer_stop_check(("webgpu", "cuda"))
    model = e2e_models.build_model(e2e_models.MODELS[args.model], tiny=args.tiny, init_device=args.init_device)
    prompt = e2e_models.prompt_tokens(model.config.vocab_size)
    torch.Tensor.__bool__ = stamp("wait", torch.Tensor.__bool__)
    from transformers.generation import utils as generation_utils
    check = generation_utils.DeferredStopCheck
    check.__call__ = stamp("wait", check.__call__)  # (copies the flag, waits for the last one)
    WebGPUGraph.replay = stamp("replay", WebGPUGraph.replay)
    for device in args.devices.split(","):
        m = copy.deepcopy(model).to(device)
        if args.mode != "eager":
            m = e2e_models.compiled(m, args.mode)
        m.forward = stamp("forward", m.forward)
        for _ in range(2):
            e2e_models.greedy(m, prompt, args.tokens, device, timed=False, cache_implementation="static")
        e2e_models.synchronize(device)
        EVENTS.clear()
        before = torch_webgpu._C.dispatch_stats() if device == "webgpu" else {}
        start = time.perf_counter()
        e2e_models.greedy(m, prompt, args.tokens, device, timed=False, cache_implementation="static")
        total = time.perf_counter() - start
        after = torch_webgpu._C.dispatch_stats() if device == "webgpu" else {}
        # Our own count of the host's time blocked on the GPU (every read-back and
        # synchronize, whichever Python call made it), and eager dispatches, per token.
        per_token = {k: (after[k] - before[k]) / args.tokens for k in ("host_wait_us", "dispatches", "submits")
                     if k in after}
        rows = {k: [] for k in ("wait", "between waits", "to forward", "forward", "replay", "after", "token")}
        last_forward_end = last_forward_start = None
        wait_start = None
        waited = 0.0
        for kind, t in EVENTS:
            if kind == "wait<":
                wait_start = t
            elif kind == "wait>":
                waited += t - wait_start
                wait_end = t
            elif kind == "forward<":
                if last_forward_start is not None:
                    rows["token"].append(t - last_forward_start)
                    rows["wait"].append(waited)
                    # host work between the token's first wait and its last (the stop check)
                    rows["between waits"].append(wait_end - first_wait - waited if first_wait else 0.0)
                    rows["to forward"].append(t - wait_end)
                    rows["after"].append(first_wait - last_forward_end if first_wait else 0.0)
                last_forward_start, waited, first_wait = t, 0.0, None
            elif kind == "forward>":
                rows["forward"].append(t - last_forward_start)
                last_forward_end = t
            elif kind == "replay<":
                replay_start = t
            elif kind == "replay>":
                rows["replay"].append(t - replay_start)
            if kind == "wait<" and last_forward_end is not None and first_wait is None:
                first_wait = t
        med = {k: statistics.median(v[2:]) * 1e6 if len(v) > 3 else 0.0 for k, v in rows.items()}
        print(f"{args.model} {device} {args.mode}: {args.tokens} tokens in {total * 1e3:.1f} ms; medians per decode token (us): "
              + ", ".join(f"{k} {v:.0f}" for k, v in med.items())
              + "".join(f"; {k} per token (mean) {v:.1f}" for k, v in per_token.items()), flush=True)
        del m
        torch._dynamo.reset()
        e2e_models.release(device)


if __name__ == "__main__":
    main()
