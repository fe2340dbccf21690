"""OpInfo coverage report of the webgpu device.

    python -m torch_webgpu.testing.opinfo_report [--dtype D] [--native-only] [--backward]
                                                 [--ops a,b,c] [-j N] [--json FILE]

Runs every sample input of every OpInfo entry of PyTorch's ``op_db`` that supports the
dtype on the webgpu device and on the CPU (``torch_webgpu.testing.opinfo.run_op``, the
code the pytest harness in ``tests/opinfo`` runs) and prints: ops total, samples passing
natively, passing only through the CPU fallback, failing, and a per-op table.

- default: the CPU fallback is allowed; each passing sample counts as *native* when no op
  went through the fallback (``_C.fallback_ops_seen``), else as *fallback-only*.
- ``--native-only``: the device runs with ``TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1``.
- ``--backward``: compare gradients (float32, ops with ``supports_autograd``) instead of
  the forward outputs.
- ``--reference-inputs``: OpInfo's ``reference_inputs`` (more shapes, extremal values; what
  PyTorch's ``test_compare_cpu`` uses) instead of ``sample_inputs``. The expected-failure
  list of ``tests/opinfo`` is for ``sample_inputs``.

Ops run in ``-j`` worker processes (default: the number of CPUs, at most 2); a worker that
crashes or gives no result within ``--hard-timeout`` seconds is killed and replaced, and
its op is reported as failing.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time

from . import opinfo as oi


# ---- worker -----------------------------------------------------------------------------


def _worker_main():
    """Reads cases (JSON lines) on stdin, writes results (JSON lines) on the original stdout;
    anything else written to stdout goes to stderr."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ["TORCH_WEBGPU_FALLBACK_WARN"] = "0"
    import warnings

    warnings.simplefilter("ignore")
    import torch  # noqa: F401
    import torch_webgpu  # noqa: F401

    ops = {oi.op_id(op): op for op in oi.load_op_db()}
    protocol.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        case = json.loads(line)
        op = ops[case["op"]]
        result = oi.run_op(op, oi.DTYPES[case["dtype"]], case["mode"], case["check"],
                           inputs=case.get("inputs", "sample"))
        oi.release_memory()
        protocol.write(json.dumps(result.to_json()) + "\n")


class _Worker:
    def __init__(self, log_dir):
        self.log = tempfile.NamedTemporaryFile("w+", dir=log_dir, prefix="worker-", suffix=".log",
                                               delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torch_webgpu.testing.opinfo_report", "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self.case = None
        self.started = None
        self.ready = False
        self.buffer = ""

    def send(self, case):
        self.case, self.started = case, time.monotonic()
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()

    def stderr_tail(self, lines=6):
        try:
            self.log.flush()
            with open(self.log.name, errors="replace") as f:
                text = f.read()[-4000:]
            return " | ".join(l.strip() for l in text.strip().splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


def _failed_case(case, error):
    name, variant = case["name"], case["variant"]
    return oi.OpResult(op=case["op"], name=name, variant=variant, dtype=case["dtype"],
                       mode=case["mode"], check=case["check"], error=error)


def run_cases(cases, jobs, hard_timeout, progress=None):
    """Runs cases (dicts: op, name, variant, dtype, mode, check) in `jobs` worker processes;
    returns OpResults in the order of `cases`."""
    results = {}
    pending = list(enumerate(cases))[::-1]
    selector = selectors.DefaultSelector()
    log_dir = tempfile.mkdtemp(prefix="opinfo-report-")
    workers = []

    def start():
        w = _Worker(log_dir)
        selector.register(w.proc.stdout, selectors.EVENT_READ, w)
        workers.append(w)
        return w

    def retire(w):
        selector.unregister(w.proc.stdout)
        w.kill()
        workers.remove(w)

    def feed(w):
        if pending:
            index, case = pending.pop()
            w.index = index
            w.send(case)
        else:
            w.case = None

    for _ in range(max(1, min(jobs, len(cases)))):
        start()
    done = 0
    try:
        while len(results) < len(cases):
            for key, _ in selector.select(timeout=1.0):
                w = key.data
                line = w.proc.stdout.readline()
                if not line:  # the worker died
                    code = w.proc.wait()
                    if w.case is not None:
                        how = f"exit code {code}"
                        if code < 0:
                            try:
                                how = signal.Signals(-code).name
                            except ValueError:
                                pass
                        tail = w.stderr_tail()
                        results[w.index] = _failed_case(
                            w.case, f"crashes the process ({how})" + (f": {tail}" if tail else ""))
                        done += 1
                        if progress:
                            progress(done, len(cases), results[w.index])
                    elif not w.ready:
                        raise RuntimeError(f"the worker failed to start: {w.stderr_tail(20)}")
                    retire(w)
                    if pending:
                        start()
                    continue
                message = json.loads(line)
                if message.get("ready"):
                    w.ready = True
                    feed(w)
                    continue
                r = oi.OpResult.from_json(message)
                results[w.index] = r
                done += 1
                if progress:
                    progress(done, len(cases), r)
                feed(w)
                if w.case is None:
                    retire(w)
            now = time.monotonic()
            for w in list(workers):
                if w.case is not None and now - w.started > hard_timeout:
                    results[w.index] = _failed_case(
                        w.case, f"hangs: no result within {hard_timeout:g} s")
                    done += 1
                    if progress:
                        progress(done, len(cases), results[w.index])
                    w.case = None
                    retire(w)
                    if pending:
                        start()
    finally:
        for w in list(workers):
            retire(w)
        try:
            os.rmdir(log_dir)
        except OSError:
            pass
    return [results[i] for i in range(len(cases))]


def run_inline(cases, progress=None):
    ops = {oi.op_id(op): op for op in oi.load_op_db()}
    out = []
    for i, case in enumerate(cases):
        r = oi.run_op(ops[case["op"]], oi.DTYPES[case["dtype"]], case["mode"], case["check"],
                      inputs=case.get("inputs", "sample"))
        oi.release_memory()
        out.append(r)
        if progress:
            progress(i + 1, len(cases), r)
    return out


# ---- report -----------------------------------------------------------------------------


def op_class(r: oi.OpResult) -> str:
    """native (every sample passes natively), fallback (all pass, some via the fallback),
    fail, or skip (no sample ran)."""
    if r.status == "fail":
        return "fail"
    if r.status == "skip":
        return "skip"
    return "native" if r.count("fallback") == 0 else "fallback"


def summarize(results) -> dict:
    classes = [op_class(r) for r in results]
    return {
        "ops": len(results),
        "ops_native": classes.count("native"),
        "ops_fallback": classes.count("fallback"),
        "ops_fail": classes.count("fail"),
        "ops_skip": classes.count("skip"),
        # An op whose worker crashed or hung counts as one failing sample.
        "samples": sum(len(r.samples) + (1 if r.error and not r.samples else 0) for r in results),
        "samples_native": sum(r.count("native") for r in results),
        "samples_fallback": sum(r.count("fallback") for r in results),
        "samples_fail": sum(r.count("fail") for r in results) + sum(1 for r in results if r.error and not r.samples),
        "samples_skip": sum(r.count("skip") for r in results),
    }


def _fallback_ops(r: oi.OpResult) -> list:
    counts = {}
    for s in r.samples:
        for name in s.fallback_ops:
            counts[name] = counts.get(name, 0) + 1
    return sorted(counts, key=lambda n: (-counts[n], n))


def format_report(results, args, elapsed, device_name) -> str:
    s = summarize(results)
    mode = "native only (TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1)" if args.native_only else "CPU fallback allowed"
    check = "backward (gradients)" if args.backward else "forward"
    lines = [
        f"OpInfo report: webgpu ({device_name}) against the CPU; torch {_torch_version()}; "
        f"{datetime.date.today().isoformat()}",
        f"dtype {', '.join(args.dtypes)}; {mode}; check {check}; "
        f"{'reference_inputs' if args.reference_inputs else 'sample_inputs'}; "
        f"{elapsed:.0f} s with {args.jobs} worker(s)",
        "",
        f"ops (OpInfo entries x dtype): {s['ops']} total: {s['ops_native']} pass natively, "
        f"{s['ops_fallback']} pass only through the fallback, {s['ops_fail']} fail, "
        f"{s['ops_skip']} where no sample ran",
        f"samples: {s['samples']} total: {s['samples_native']} pass natively, "
        f"{s['samples_fallback']} pass only through the fallback, {s['samples_fail']} fail, "
        f"{s['samples_skip']} skipped",
        "",
    ]
    if args.table != "none":
        multi_dtype = len(args.dtypes) > 1
        rows = []
        for r in results:
            cls = op_class(r)
            if args.table == "fail" and cls != "fail":
                continue
            if cls == "fail":
                note = r.reason(limit=args.width)
            elif cls == "fallback":
                note = "fallback: " + ", ".join(_fallback_ops(r)[:4])
            else:
                note = ""
            name = r.op + (f" [{r.dtype}]" if multi_dtype else "")
            rows.append((name, str(len(r.samples)), str(r.count("native")), str(r.count("fallback")),
                         str(r.count("fail") + (1 if r.error and not r.samples else 0)),
                         str(r.count("skip")), cls, note))
        header = ("op", "samples", "native", "fallback", "fail", "skip", "status", "notes")
        widths = [max(len(x[i]) for x in rows + [header]) for i in range(7)]
        fmt = lambda row: "  ".join(
            (row[i].ljust(widths[i]) if i in (0, 6) else row[i].rjust(widths[i])) for i in range(7)
        ) + "  " + row[7]
        lines.append(fmt(header))
        lines.extend(fmt(row) for row in rows)
    return "\n".join(lines)


def _torch_version():
    import torch

    return torch.__version__


def _device_name():
    try:
        import torch_webgpu

        props = torch_webgpu._C.device_properties()
        if isinstance(props, dict):
            return str(props.get("name") or props)
        return str(getattr(props, "name", props))
    except Exception:  # noqa: BLE001
        return "?"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_webgpu.testing.opinfo_report",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="float32",
                        help="dtype(s), comma-separated, or 'all' (default float32); one of "
                             + ", ".join(oi.DTYPES))
    parser.add_argument("--native-only", action="store_true",
                        help="run with the CPU fallback disabled")
    parser.add_argument("--backward", action="store_true",
                        help="compare gradients (float32) instead of forward outputs")
    parser.add_argument("--reference-inputs", action="store_true",
                        help="OpInfo's reference_inputs (more samples, extremal values) instead "
                             "of sample_inputs")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names (name or name.variant)")
    parser.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="worker processes (0: run in this process)")
    parser.add_argument("--hard-timeout", type=float,
                        default=oi.OP_BUDGET_S + 2 * oi.SAMPLE_BUDGET_S + 60,
                        help="seconds after which a worker without a result is killed")
    parser.add_argument("--table", choices=("all", "fail", "none"), default="all",
                        help="which ops the per-op table lists")
    parser.add_argument("--width", type=int, default=160, help="longest failure note")
    parser.add_argument("--json", help="write every result (per sample) to this file")
    parser.add_argument("--failures", action="store_true",
                        help="print each failing op's failing samples after the table")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker_main()
        return 0

    os.environ["TORCH_WEBGPU_FALLBACK_WARN"] = "0"
    import warnings

    warnings.simplefilter("ignore")
    dtype_names = list(oi.DTYPES) if args.dtype == "all" else [d.strip() for d in args.dtype.split(",")]
    for d in dtype_names:
        if d not in oi.DTYPES:
            parser.error(f"unknown dtype {d!r}; choose from {', '.join(oi.DTYPES)}")
    if args.backward and dtype_names != ["float32"]:
        parser.error("--backward compares float32 gradients: use --dtype float32")
    args.dtypes = dtype_names
    try:
        ops = oi.select_ops(args.ops.split(",") if args.ops else None)
    except ValueError as e:
        parser.error(str(e))
    mode = "native" if args.native_only else "fallback"
    check = "backward" if args.backward else "forward"
    cases = []
    for op in ops:
        if check == "backward" and not op.supports_autograd:
            continue
        for dtype in oi.op_dtypes(op, [oi.DTYPES[d] for d in dtype_names]):
            cases.append(dict(op=oi.op_id(op), name=op.name, variant=oi.op_variant(op),
                              dtype=oi.DTYPE_NAMES[dtype], mode=mode, check=check,
                              inputs="reference" if args.reference_inputs else "sample"))

    start = time.monotonic()

    def progress(done, total, r):
        if args.quiet:
            return
        if done % 25 == 0 or done == total:
            print(f"[{done}/{total}] {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)

    if args.jobs <= 0:
        results = run_inline(cases, progress)
    else:
        results = run_cases(cases, args.jobs, args.hard_timeout, progress)
    elapsed = time.monotonic() - start
    print(format_report(results, args, elapsed, _device_name()))
    if args.failures:
        for r in results:
            if r.status == "fail":
                print()
                print(r.failure_report())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items() if k != "worker"},
                       "summary": summarize(results), "elapsed_s": elapsed,
                       "results": [r.to_json() for r in results]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
