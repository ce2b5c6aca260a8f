"""examples/ros2/robot_runtime.py, the robot runtime node, run as a user
runs it (tests/ros2.sh): each pacing mode for 2 s, its episode analysed
with the loop, the executor thread's callbacks and the joint-state source
present; three rollouts a side as one session each, which compare reads.
Never that the host kept the rate."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from test_ros import ANALYZER

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "ros2" / "robot_runtime.py"
TOPIC = "/looptime_joint_states"


def run_example(tmp_path, *extra):
    # Each run its own topic names' domain: a test's robot never feeds
    # another test's node.
    env = dict(os.environ, ROS_DOMAIN_ID=str(int(os.environ.get("ROS_DOMAIN_ID", "150")) + 1))
    out = subprocess.run([sys.executable, str(EXAMPLE), "--control-timing", "--runs-dir", str(tmp_path / "runs"),
                          *extra], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def report(path):
    out = subprocess.run([ANALYZER, "report", str(path), "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("pace", ["scheduler", "ros-timer"])
def test_each_pacing_records_the_loop_the_callbacks_and_the_joint_state(tmp_path, pace):
    # A 1 ms budget against the control's 2 ms of work: every cycle
    # overruns it, whichever the pacing.
    run_example(tmp_path, "--seconds", "2", "--pace", pace, "--compute-budget-ms", "1",
                "--deadline-tolerance-ms", "5")
    ep = tmp_path / "runs" / "latest"
    m = json.loads((ep / "manifest.json").read_text())
    assert m["status"] == "complete" and m["config"]["program"]["pace"] == pace
    r = report(ep)
    (running,) = [p for p in r["phases"] if p["phase"] == "running"]
    # 50 Hz for 2 s is 100 release points; a ROS timer may skip some.
    assert 50 <= running["cycles"] <= 101, running["cycles"]
    (ex,) = [t for t in r["threads"] if t["thread"] == "executor"]
    assert TOPIC in {c["name"] for c in ex["callbacks"]}, ex["callbacks"]
    (src,) = r["data_age"]["sources"]
    (ph,) = src["phases"]
    # A use per cycle, but for cycles before the first state reached the
    # instrumented subscription.
    assert src["source"] == TOPIC and running["cycles"] - 2 <= ph["uses"] <= running["cycles"], (
        ph["uses"], running["cycles"])
    assert ph["age_at_use"]["count"] == ph["age_at_command"]["count"] == ph["uses"]
    assert src["production"]["produced"] > ph["uses"]  # a 500 Hz robot under a 50 Hz loop
    b = r["budget"]
    assert (b["compute_budget_ns"], b["deadline_tolerance_ns"]) == (1_000_000, 5_000_000), b
    (bp,) = [p for p in b["phases"] if p["phase"] == "running"]
    assert bp["budget_overruns"]["count"] == running["cycles"], bp


def test_three_rollouts_a_side_make_sessions_that_compare_reads(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    run_example(a, "--seconds", "0.6", "--episodes", "3", "--pace", "scheduler", "--label", "scheduler")
    run_example(b, "--seconds", "0.6", "--episodes", "3", "--pace", "ros-timer", "--label", "ros-timer")
    sides = []
    for side in (a, b):
        session = (side / "runs" / "latest-session").resolve()
        assert sorted(p.name for p in session.glob("rollout-*")) == ["rollout-000", "rollout-001", "rollout-002"]
        sides.append(session)
    out = subprocess.run([ANALYZER, "compare", str(sides[0]), str(sides[1]), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    c = json.loads(out.stdout)
    assert json.dumps(c).count("rollout-00") >= 6, list(c)


@pytest.mark.parametrize("value", ["inf", "nan", "1e300", "2e13", "0", "-1"])
def test_a_budget_it_cannot_declare_is_refused_before_anything_is_opened(tmp_path, value):
    # Before, inf, 1e300 and 2e13 passed "must be positive" and ended in a
    # traceback, two of them after the rollout was opened (leaving
    # `latest` on a `running` rollout). Now a usage error (2), naming the
    # flag and its range, and no runs directory at all.
    for flag in ("--compute-budget-ms", "--deadline-tolerance-ms"):
        out = subprocess.run([sys.executable, str(EXAMPLE), "--control-timing", "--runs-dir", str(tmp_path / "runs"),
                              flag, value], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"{flag} must be more than 0 and at most 10000 ms" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
        assert not (tmp_path / "runs").exists()
