"""Rewrites expected_failures.txt (and expected_failures_compile.txt, for the compile
mode's tests) from the outcomes a run recorded.

    pytest tests/opinfo -n 2 --opinfo-record=/tmp/opinfo.jsonl [--opinfo-dtypes=...]
    python tests/opinfo/update_expected_failures.py /tmp/opinfo.jsonl [--file PATH]

Tests the run recorded as failing get (or keep) a line with their current reason; tests
it recorded as passing (or running no sample) lose theirs; tests the run did not record
keep their lines. A test whose worker crashed or hung is listed with a reason starting
'crashes the process or hangs', which makes later runs skip it instead of running it.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from torch_webgpu.testing import opinfo as oi  # noqa: E402


def key_from_nodeid(nodeid, ops_by_id):
    """test_opinfo.py::test_opinfo[<op id>-<dtype>-<mode>-<check>] -> key."""
    param = nodeid[nodeid.index("[") + 1: nodeid.rindex("]")]
    op_id, dtype, mode, check = param.rsplit("-", 3)
    op = ops_by_id[op_id]
    return (op.name, oi.op_variant(op), dtype, mode, check)


def read_records(path):
    with open(path) as f:
        text = f.read()
    try:
        report = json.loads(text)
    except json.JSONDecodeError:
        report = None
    if isinstance(report, dict) and "results" in report:
        # opinfo_report --json: only the ops that took their worker down.
        records = []
        for r in report["results"]:
            result = oi.OpResult.from_json(r)
            if result.error.startswith(oi.NOT_RUN_PREFIXES):
                records.append({"key": list(result.key), "status": "crash",
                                "reason": result.reason()})
        return records
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+",
                        help="JSON-lines files written by --opinfo-record, or the --json output "
                             "of opinfo_report (its crashed or hung ops only, to list them "
                             "before a pytest run)")
    parser.add_argument("--file", default=os.path.join(HERE, "expected_failures.txt"))
    parser.add_argument("--compile-file",
                        default=os.path.join(HERE, "expected_failures_compile.txt"),
                        help="the list of the compile mode's tests")
    args = parser.parse_args(argv)
    entries = oi.read_expected_failures(args.file)
    entries.update(oi.read_expected_failures(args.compile_file))
    ops_by_id = None
    added = removed = changed = 0
    for path in args.records:
        for record in read_records(path):
            if "key" in record:
                key = tuple(record["key"])
            else:
                if ops_by_id is None:
                    ops_by_id = {oi.op_id(op): op for op in oi.load_op_db()}
                key = key_from_nodeid(record["nodeid"], ops_by_id)
            if record["status"] in ("fail", "crash"):
                old = entries.get(key)
                added += old is None
                changed += old is not None and old != record["reason"]
                entries[key] = record["reason"] or "fails"
            elif key in entries:
                del entries[key]
                removed += 1
    compiled = {k: v for k, v in entries.items() if k[3] == oi.COMPILE_MODE}
    eager = {k: v for k, v in entries.items() if k[3] != oi.COMPILE_MODE}
    oi.write_expected_failures(args.file, eager)
    oi.write_expected_failures(args.compile_file, compiled, oi.COMPILE_EXPECTED_HEADER)
    print(f"{args.file}: {len(eager)} entries, {args.compile_file}: {len(compiled)} entries "
          f"({added} added, {removed} removed, {changed} with a new reason)")


if __name__ == "__main__":
    main()
