"""The OpInfo harness: PyTorch's op_db as the reference suite of the webgpu device.

Every OpInfo entry x supported dtype (of float32, float16, bfloat16, int64, int32, int16,
int8, uint8, bool) x mode (fallback: the CPU fallback allowed; native:
TORCH_WEBGPU_DISABLE_CPU_FALLBACK=1) x check (forward; backward for differentiable ops in
float32) is one test. It runs every sample input on webgpu and on the CPU and compares
(torch_webgpu.testing.opinfo, shared with `python -m torch_webgpu.testing.opinfo_report`).

Expected failures: expected_failures.txt (one line per test, with its reason). A listed
test that passes fails the run, so the list only shrinks.

Options (or the environment variable in brackets, for runs where this conftest is not
an initial one, e.g. `pytest tests`):
  --opinfo-dtypes=float32,int64   [TORCH_WEBGPU_OPINFO_DTYPES]  default: all nine
  --opinfo-modes=fallback|native  [TORCH_WEBGPU_OPINFO_MODES]   default: both
                 (or compile: each sample through torch.compile, forward and backward;
                 its expected failures are in expected_failures_compile.txt)
  --opinfo-checks=forward|backward [TORCH_WEBGPU_OPINFO_CHECKS] default: both
  --opinfo-ops=add,nn.functional.gelu [TORCH_WEBGPU_OPINFO_OPS] default: all of op_db
  --opinfo-record=FILE  write every test's outcome (JSON lines) for update_expected_failures.py
  --opinfo-hard-timeout=S  a test running longer exits its (xdist worker) process
Limits per sample and per op: TORCH_WEBGPU_OPINFO_SAMPLE_BUDGET (30 s),
TORCH_WEBGPU_OPINFO_OP_BUDGET (180 s), TORCH_WEBGPU_OPINFO_MAX_NUMEL (2**20 elements).
"""
import json
import os
import warnings

import pytest

os.environ.setdefault("TORCH_WEBGPU_FALLBACK_WARN", "0")

import torch  # noqa: E402,F401

import torch_webgpu  # noqa: E402,F401
from torch_webgpu.testing import opinfo as oi  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED_FAILURES_PATH = os.path.join(HERE, "expected_failures.txt")
# The compile mode's tests (--opinfo-modes=compile) have their own list.
COMPILE_EXPECTED_FAILURES_PATH = os.path.join(HERE, "expected_failures_compile.txt")


_OPTIONS = {
    "dtypes": ("--opinfo-dtypes", "TORCH_WEBGPU_OPINFO_DTYPES", "all"),
    "modes": ("--opinfo-modes", "TORCH_WEBGPU_OPINFO_MODES", ",".join(oi.MODES)),
    "checks": ("--opinfo-checks", "TORCH_WEBGPU_OPINFO_CHECKS", ",".join(oi.CHECKS)),
    "ops": ("--opinfo-ops", "TORCH_WEBGPU_OPINFO_OPS", ""),
    "record": ("--opinfo-record", "TORCH_WEBGPU_OPINFO_RECORD", ""),
    "hard_timeout": ("--opinfo-hard-timeout", "TORCH_WEBGPU_OPINFO_HARD_TIMEOUT",
                     str(oi.OP_BUDGET_S + 2 * oi.SAMPLE_BUDGET_S + 60)),
}


def pytest_addoption(parser):
    group = parser.getgroup("opinfo", "OpInfo harness (tests/opinfo)")
    for name, (flag, env, default) in _OPTIONS.items():
        group.addoption(flag, default=None, help=f"[{env}] default: {default or 'all'}")


def option(config, name):
    flag, env, default = _OPTIONS[name]
    value = config.getoption(flag, default=None)
    if value is None:
        value = os.environ.get(env) or default
    return value


def _split(value):
    return [v.strip() for v in value.split(",") if v.strip()]


def selected_cases(config):
    dtypes = option(config, "dtypes")
    dtype_names = list(oi.DTYPES) if dtypes == "all" else _split(dtypes)
    modes = _split(option(config, "modes"))
    unknown_modes = [m for m in modes if m not in oi.ALL_MODES]
    if unknown_modes:
        raise pytest.UsageError(f"--opinfo-modes: unknown {unknown_modes}; choose from "
                                f"{list(oi.ALL_MODES)}")
    unknown = [d for d in dtype_names if d not in oi.DTYPES]
    if unknown:
        raise pytest.UsageError(f"--opinfo-dtypes: unknown {unknown}; choose from {list(oi.DTYPES)}")
    ops = oi.select_ops(_split(option(config, "ops")) or None)
    return list(oi.all_cases(ops, [oi.DTYPES[d] for d in dtype_names],
                             modes=modes,
                             checks=_split(option(config, "checks"))))


def case_id(case):
    op, dtype, mode, check = case
    return f"{oi.op_id(op)}-{oi.DTYPE_NAMES[dtype]}-{mode}-{check}"


def pytest_generate_tests(metafunc):
    if "opinfo_case" in metafunc.fixturenames:
        cases = selected_cases(metafunc.config)
        metafunc.parametrize("opinfo_case", cases, ids=[case_id(c) for c in cases])


@pytest.fixture(scope="session")
def expected_failures():
    """Both lists: keys differ by mode."""
    entries = oi.read_expected_failures(EXPECTED_FAILURES_PATH)
    entries.update(oi.read_expected_failures(COMPILE_EXPECTED_FAILURES_PATH))
    return entries


@pytest.fixture
def hard_timeout(request):
    return float(option(request.config, "hard_timeout"))


@pytest.fixture(scope="session")
def expected_failures_path():
    """The list a test of `mode` belongs in."""
    def path(mode):
        return COMPILE_EXPECTED_FAILURES_PATH if mode == oi.COMPILE_MODE else EXPECTED_FAILURES_PATH
    return path


_RECORD = None


def pytest_configure(config):
    global _RECORD
    warnings.filterwarnings("ignore", category=UserWarning)
    path = option(config, "record")
    # Only the controller records (under xdist it also sees the workers' crashes).
    if path and not hasattr(config, "workerinput"):
        _RECORD = open(path, "a")


def pytest_unconfigure(config):
    global _RECORD
    if _RECORD is not None:
        _RECORD.close()
        _RECORD = None


def pytest_runtest_logreport(report):
    if _RECORD is None:
        return
    props = dict(report.user_properties)
    if "opinfo" in props:
        if report.when == "call":
            _RECORD.write(json.dumps({"nodeid": report.nodeid, **props["opinfo"]}) + "\n")
    elif report.failed and "test_opinfo.py::test_opinfo[" in report.nodeid:
        # A test without a result: its worker crashed or hung (xdist reports it here).
        _RECORD.write(json.dumps({"nodeid": report.nodeid, "status": "crash",
                                  "reason": "crashes the process or hangs (its pytest-xdist "
                                            "worker died)"}) + "\n")
    _RECORD.flush()
