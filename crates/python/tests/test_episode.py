"""Episodes from Python and the example: serve's layout, the analyzer on the
example's episode, SIGINT, a bad argument."""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest

import looptime

from _support import *  # noqa: F401,F403  (paths, helpers: _support.py)


def test_add_arguments_and_open_episode_write_serve_layout(tmp_path):
    p = looptime.add_arguments(argparse.ArgumentParser())
    args = p.parse_args(["--control-timing", "--timing-max-cycles", "500"])
    assert args.control_timing is True and args.timing_max_cycles == 500
    assert p.parse_args([]).timing_max_cycles == 20000
    with pytest.raises(SystemExit):
        p.parse_args(["--timing-max-cycles", "0"])
    sched = looptime.Scheduler(0.01)
    ep = looptime.open_episode(tmp_path / "runs", args, sched, settings={"duration_s": 1.5}, sources=[__file__])
    rollout = pathlib.Path(ep.dir)
    assert rollout.name == "rollout-000" and rollout.parent == pathlib.Path(ep.session)
    assert (tmp_path / "runs" / "latest").resolve() == rollout.resolve()
    m = json.loads((rollout / "manifest.json").read_text())
    assert m["status"] == "running" and m["producer"].startswith("looptime-python ")
    assert m["config"]["run"] == {"control_timing": True, "timing_max_cycles": 500, "rate_hz": 100.0, "rtf": 1.0}
    assert m["config"]["program"] == {"duration_s": 1.5}
    assert m["schedule"]["nominal_period_ns"] == 10_000_000
    assert m["program"]["source_hashes"][__file__].startswith("sha256:")
    assert m["host"]["cpus"] >= 1
    rec = small_recorder(episode_dir=ep.dir)
    with rec.cycle("running", sched.wait(rec)):
        pass
    rec.finish(ep.dir)
    warnings = ep.setup_control_thread()
    assert isinstance(warnings, list)
    ep.finish(rec, sched, complete=True, planned_cycles=1)
    m = json.loads((rollout / "manifest.json").read_text())
    assert m["status"] == "complete" and m["counts"]["cycles"] == 1
    assert "control_timing.jsonl" in m["files"]
    s = json.loads((rollout.parent / "session.json").read_text())
    assert s["rollouts"] == [{"rollout": "rollout-000", "state": "complete"}]
    with pytest.raises(RuntimeError, match="already finished"):
        ep.finish()


def test_the_analyzer_reads_the_example_episode(tmp_path):
    p = run_example(tmp_path, "--control-timing", "--duration", "1", "--warmup", "0.5")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    ep = (tmp_path / "runs" / "latest").resolve()
    r = analyze(ep)
    assert r["state"] == "complete"
    # 0.5 s warmup and 1 s running at 100 Hz.
    assert {ph["phase"]: ph["cycles"] for ph in r["phases"]} == {"warmup": 50, "running": 100}
    assert {s["stage"] for s in r["stages"]} == {
        "camera_read", "viewer_control", "policy", "adapter_decode", "executor", "robot_send_command", "recording",
    }
    m = json.loads((ep / "manifest.json").read_text())
    assert m["status"] == "complete" and m["counts"]["cycles"] == 150
    assert m["program"]["source_hashes"][str(EXAMPLE)].startswith("sha256:")


def test_sigint_finishes_the_example_as_aborted(tmp_path):
    p = run_example(tmp_path, "--control-timing", "--duration", "60")
    time.sleep(2.0)  # past the start-up and into the loop
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, (out, err)
    assert "[run] aborted" in out
    ep = (tmp_path / "runs" / "latest").resolve()
    m = json.loads((ep / "manifest.json").read_text())
    assert m["status"] == "aborted"
    s = json.loads((ep.parent / "session.json").read_text())
    assert s["rollouts"][0]["state"] == "aborted"
    r = analyze(ep)
    assert r["state"] == "aborted"
    assert 0 < sum(ph["cycles"] for ph in r["phases"]) < 6000


def test_the_example_refuses_a_bad_argument(tmp_path):
    p = run_example(tmp_path, "--rate", "0")
    _, err = p.communicate(timeout=30)
    assert p.returncode == 2 and "--rate must be in (0, 1000] Hz" in err
