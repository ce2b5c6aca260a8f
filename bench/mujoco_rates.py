#!/usr/bin/env python3
"""The MuJoCo arm loop's achieved rate, in Python and C++, at 500 Hz and
1 kHz, beside `looptime probe` at the same rates on the same host in the
same run, so a reader can tell the loop's jitter from the host's.

    python3 bench/mujoco_rates.py                 # 10 s a run (about 2 minutes)
    DURATION=2 python3 bench/mujoco_rates.py      # a quick look

For each language and rate: one rollout of DURATION seconds (0.2 s warmup)
with --control-timing, read back with `analyze_control_timing --json`.
Printed per run (the running phase):

* loop Hz and the p99 period (ms), from the analyzer;
* work share: the mean work (cycle start to end) over the nominal period;
* recorder share: the recorder's own cost per cycle over the mean work,
  the cost being its measured overhead (the evidence header's `overhead`:
  `cycle_cpu_ns` for the cycle with its CPU time, plus `span_wall_ns` for
  each of the four spans), so it is the recorder's own estimate, not a
  with/without difference;
* the host's figures from `looptime probe --json` at the same rate: wake
  latency p99, the share of starts within 1 µs, and its verdict.

The C++ loop is built with the release library (LOOPTIME_CARGO_PROFILE=
release); the Python loop uses the installed wheel (release-lib profile).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target").resolve()
DURATION = float(os.environ.get("DURATION", "10"))
RATES = [int(r) for r in os.environ.get("RATES", "500 1000").split()]


def sh(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, **kw)


def build():
    sh("cargo", "build", "--release", "-q", "-p", "looptime-analyze", "-p", "looptime-cli", cwd=ROOT)
    b = TARGET / "mujoco-example-release"
    sh("cmake", "-S", ROOT / "examples/mujoco", "-B", b, "-DLOOPTIME_CARGO_PROFILE=release")
    sh("cmake", "--build", b)
    return TARGET / "release", b / "arm_loop"


def main():
    release, cpp = build()
    analyzer, looptime = release / "analyze_control_timing", release / "looptime"
    rows, probes = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for rate in RATES:
            p = json.loads(sh(looptime, "probe", "--rate", rate, "--duration", min(DURATION, 5), "--json").stdout)
            probes[rate] = p
            for lang, loop in (("Python", [sys.executable, ROOT / "examples/mujoco/arm_loop.py"]), ("C++", [cpp])):
                runs = pathlib.Path(tmp) / f"{lang}-{rate}"
                sh(*loop, "--control-timing", "--rate", rate, "--duration", DURATION, "--runs-dir", runs)
                r = json.loads(sh(analyzer, "--episode", runs / "latest", "--json").stdout)
                (ph,) = [x for x in r["phases"] if x["phase"] == "running"]
                ov = r["capture"]["overhead"]
                recorder_ns = ov["cycle_cpu_ns"] + 4 * ov["span_wall_ns"]
                period_ns = 1e9 / rate
                rows.append((lang, rate, ph["loop_hz"], ph["period"]["p99_ns"] / 1e6,
                             ph["work"]["mean_ns"] / 1e3, ph["work"]["mean_ns"] / period_ns,
                             recorder_ns, recorder_ns / ph["work"]["mean_ns"], ph["overruns"], ph["cycles"]))
    print(f"MuJoCo arm loop, {DURATION:g} s a run (running phase)")
    print(f"{'language':<8} {'rate':>6} {'loop Hz':>10} {'p99 period ms':>14} {'work µs':>8} {'work share':>11} "
          f"{'recorder ns':>12} {'recorder share':>15} {'overruns':>9}")
    for lang, rate, hz, p99, work, share, rec_ns, rec_share, over, n in rows:
        print(f"{lang:<8} {rate:>6} {hz:>10.2f} {p99:>14.3f} {work:>8.1f} {share:>10.2%} {rec_ns:>12.0f} "
              f"{rec_share:>14.2%} {over:>5} / {n}")
    print("looptime probe, same host, same run")
    for rate, p in probes.items():
        wl = p["wake_latency"]
        print(f"  {rate} Hz: wake latency p99 {wl['p99_ns'] / 1e3:.1f} µs, {p['within_1us']:.1%} of starts within "
              f"1 µs, {p['overruns']} overruns; {p['verdict']['fit']}: {p['verdict']['reason']}")


if __name__ == "__main__":
    main()
