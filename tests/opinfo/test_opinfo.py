"""OpInfo tests: each (op, variant, dtype, mode, check) against the CPU (see conftest.py)."""
import faulthandler

import pytest

from torch_webgpu.testing import opinfo as oi



def _key(op, dtype, mode, check):
    return (op.name, oi.op_variant(op), oi.DTYPE_NAMES[dtype], mode, check)


def test_opinfo(opinfo_case, expected_failures, expected_failures_path, hard_timeout, request):
    op, dtype, mode, check = opinfo_case
    key = _key(op, dtype, mode, check)
    expected = expected_failures.get(key)
    listing = expected_failures_path(mode)
    if expected is not None and expected.startswith(oi.NOT_RUN_PREFIXES) and not oi.RUN_CRASHERS:
        pytest.skip(f"expected failure, not run: {expected}")
    # A hang inside C++ cannot be interrupted: past the hard limit the process exits
    # (under pytest-xdist the worker is replaced and this test reported as crashed).
    faulthandler.dump_traceback_later(hard_timeout, exit=True)
    try:
        result = oi.run_op(op, dtype, mode, check)
    finally:
        faulthandler.cancel_dump_traceback_later()
        oi.release_memory()
    request.node.user_properties.append(
        ("opinfo", {"key": list(key), "status": result.status, "reason": result.reason()}))
    line = "  ".join(key)
    if result.status == "fail":
        if expected is not None:
            pytest.xfail(expected)
        pytest.fail(f"{result.failure_report()}\n(not in {listing}: "
                    f"fix it, or add the line\n{line}  {result.reason()})", pytrace=False)
    if expected is not None and expected.startswith(oi.HOST_DEPENDENT_PREFIX):
        return  # passes on this host's CPU reference; fails on others (see the reason)
    if expected is not None:
        pytest.fail(f"{line}: listed in {listing} ({expected}) but now "
                    f"{'passes' if result.status == 'pass' else 'runs no sample'}: delete its "
                    f"line", pytrace=False)
    if result.status == "skip":
        reasons = sorted({s.category for s in result.samples}) or ["no samples"]
        pytest.skip(f"no sample ran ({', '.join(reasons)})")


def test_expected_failures_file_is_valid(expected_failures):
    """Every line names an existing test: op and variant in op_db, a dtype the op supports
    and we test, a check that applies, and a reason."""
    ops = {(op.name, oi.op_variant(op)): op for op in oi.load_op_db()}
    problems = []
    for key, reason in expected_failures.items():
        name, variant, dtype, mode, check = key
        op = ops.get((name, variant))
        if op is None:
            problems.append(f"{' '.join(key)}: no OpInfo entry {name} (variant {variant})")
        elif dtype not in oi.DTYPES or oi.DTYPES[dtype] not in oi.op_dtypes(op):
            problems.append(f"{' '.join(key)}: dtype not tested for this op")
        elif check not in oi.checks_for(op, oi.DTYPES[dtype]):
            problems.append(f"{' '.join(key)}: check does not apply")
        elif not reason.strip():
            problems.append(f"{' '.join(key)}: no reason given")
    assert not problems, "\n".join(problems)
