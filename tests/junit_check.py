#!/usr/bin/env python3
"""The timing gate's JUnit XML (`--junit`, docs/ci.md) read back by a JUnit
parser, Python's `junitparser` (what CI test reporters read):

1. the report of fixtures/v1/serve-episode with --fail-on fail: one case
   per summary card, the warmup card skipped (not judged), the running
   card passed, no failure, exit 0;
2. the comparison of the two v1 fixtures with --fail-on worse --strict:
   one case per test (12) plus one per warning about the pair (3), each
   warning a failure carrying its text, exit 5.

Usage: python3 tests/junit_check.py ANALYZER
"""
import pathlib
import subprocess
import sys
import tempfile

from junitparser import Failure, JUnitXml, Skipped

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(analyzer, *args):
    return subprocess.run([analyzer, *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT / "fixtures" / "v1")


def cases(path):
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert len(suites) == 1, suites
    return suites[0], list(suites[0])


def outcome(case):
    kinds = {type(r) for r in case.result}
    return "failed" if Failure in kinds else "skipped" if Skipped in kinds else "passed"


def main():
    analyzer = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        x = tmp / "report.xml"
        r = run(analyzer, "--episode", "serve-episode", "--fail-on", "fail", "--junit", x)
        assert r.returncode == 0, r.stderr
        suite, cs = cases(x)
        got = {c.name: outcome(c) for c in cs}
        assert got == {"warmup card": "skipped", "running card": "passed"}, got
        assert suite.tests == 2 and suite.failures == 0 and suite.skipped == 1, suite
        print(f"junit: report, {len(cs)} cases ({got}) read by junitparser")

        x = tmp / "compare.xml"
        r = run(analyzer, "compare", "serve-episode", "synthetic-basic", "--fail-on", "worse",
                "--strict", "--junit", x)
        assert r.returncode == 5, (r.returncode, r.stderr)
        suite, cs = cases(x)
        failed = [c for c in cs if outcome(c) == "failed"]
        tests = [c for c in cs if not c.name.startswith("pair warning")]
        # 12 metric and rate tests, and the loop's and the commands' Hz.
        assert len(tests) == 14 and all(outcome(c) == "passed" for c in tests), [c.name for c in tests]
        assert len(failed) == 3 and all(c.name.startswith("pair warning") for c in failed), failed
        assert "has 1 rollout" in failed[1].result[0].message, failed[1].result[0].message
        assert suite.tests == 17 and suite.failures == 3, suite
        print(f"junit: compare --strict, {len(cs)} cases, {len(failed)} failures (the pair's warnings) "
              "read by junitparser")


if __name__ == "__main__":
    main()
