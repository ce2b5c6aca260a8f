"""What the test files of the looptime package share: where the
repository's binaries are, the evidence reader, a small recorder, the
example and the analyzer.

The analyzer is the workspace's debug build (``cargo test --workspace``
leaves it in target/debug, or $CARGO_TARGET_DIR/debug);
``LOOPTIME_ANALYZER`` names another.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import looptime

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "python" / "robot_loop.py"
# cargo's target directory: $CARGO_TARGET_DIR, else target/ (the scripts' rule).
TARGET = pathlib.Path(os.environ["CARGO_TARGET_DIR"]).resolve() if os.environ.get("CARGO_TARGET_DIR") else ROOT / "target"
ANALYZER = pathlib.Path(os.environ.get("LOOPTIME_ANALYZER", TARGET / "debug" / "analyze_control_timing"))
LOOPTIME = TARGET / "debug" / "looptime"


def read_jsonl(path):
    lines = pathlib.Path(path).read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def small_recorder(**kw):
    args = dict(
        stages=["sense", "decode", "act"],
        phases=["warmup", "running"],
        attributes={"mode": ["inline", "background"], "camera": ["left", "right"]},
        values={"frame": ("int", "count"), "rate": ("float", "Hz")},
        sources={"camera": {"max_age_s": 0.05}},
        ring="heap",
    )
    args.update(kw)
    return looptime.Recorder(**args)


def run_example(tmp_path, *args, **kw):
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--runs-dir", str(tmp_path / "runs"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def analyze(episode):
    assert ANALYZER.exists(), f"{ANALYZER} is missing: run `cargo build -p looptime-analyze` (or set LOOPTIME_ANALYZER)"
    out = subprocess.run([str(ANALYZER), "--episode", str(episode), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)
