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
    # Data age: the loop used the reader's frames, which the reader published.
    (cam,) = r["data_age"]["sources"]
    assert cam["source"] == "camera" and sum(p["uses"] for p in cam["phases"]) > 100, cam
    assert cam["production"]["threads"] == ["camera_reader"] and cam["production"]["produced"] > 20
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


def _run_rollout(session, sched, cycles, cost_s=0.0):
    """One rollout of `cycles` cycles on `session`, recorded and finished."""
    ep = session.rollout(settings={"cost_s": cost_s})
    rec = small_recorder(episode_dir=ep.dir, target_clock=sched.clock, nominal_period_ns=sched.nominal_period_ns)
    for _ in range(cycles):
        with rec.cycle("running", sched.wait(rec)):
            with rec.span("act"):
                if cost_s:
                    t = time.perf_counter()
                    while time.perf_counter() - t < cost_s:
                        pass
    rec.finish(ep.dir)
    ep.finish(rec, sched, complete=True, planned_cycles=cycles)
    return pathlib.Path(ep.dir)


def test_a_session_holds_several_rollouts_that_compare_reads_as_a_side(tmp_path):
    args = looptime.add_arguments(argparse.ArgumentParser()).parse_args(["--control-timing", "--label", "spin"])
    sides = {}
    for name, cost in (("a", 0.0), ("b", 0.0005)):
        sched = looptime.Scheduler(0.002, rtf=0)
        with looptime.open_session(tmp_path / name, args, sched, rollouts=3, sources=[__file__]) as s:
            dirs = [_run_rollout(s, sched, 60, cost) for _ in range(3)]
            assert s.rollouts == 3
            with pytest.raises(RuntimeError, match="all 3 planned rollouts have started"):
                s.rollout()
        session = pathlib.Path(s.dir)
        assert [d.name for d in dirs] == ["rollout-000", "rollout-001", "rollout-002"]
        assert all(d.parent == session for d in dirs)
        assert (tmp_path / name / "latest-session").resolve() == session.resolve()
        assert (tmp_path / name / "latest").resolve() == dirs[-1].resolve()
        rec = json.loads((session / "session.json").read_text())
        assert rec["status"] == "complete" and rec["planned_rollouts"] == 3
        assert [r["state"] for r in rec["rollouts"]] == ["complete"] * 3
        m = json.loads((dirs[1] / "manifest.json").read_text())
        # rtf=0: the loop ran uncapped on the simulation clock, and says so.
        assert m["config"]["run"]["rtf"] == 0.0 and m["config"]["run"]["label"] == "spin"
        assert m["schedule"]["clock"] == "simulation" and m["schedule"]["nominal_period_ns"] == 2_000_000
        assert m["config"]["program"]["cost_s"] == cost and m["rollout"] == "rollout-001"
        assert analyze(dirs[1])["state"] == "complete"
        sides[name] = session
    out = subprocess.run([str(ANALYZER), "compare", str(sides["a"]), str(sides["b"]), "--json", "--resamples", "100"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    # Three rollouts a side, each read from its session directory, named by
    # the sessions' label; the one setting that differs is found.
    assert [len(r["a_episodes"]), len(r["b_episodes"])] == [3, 3]
    assert r["a"].startswith("spin (3 rollouts in ") and r["settings_differing"] == ["program.cost_s"]


def test_leaving_a_session_on_an_exception_aborts_it_with_the_reason(tmp_path):
    args = looptime.add_arguments(argparse.ArgumentParser()).parse_args([])
    sched = looptime.Scheduler(0.01, rtf=0)
    with pytest.raises(ValueError, match="bad gain"):
        with looptime.open_session(tmp_path / "runs", args, sched) as s:
            _run_rollout(s, sched, 5)
            raise ValueError("bad gain")
    rec = json.loads((pathlib.Path(s.dir) / "session.json").read_text())
    assert rec["status"] == "aborted" and rec["stop"] == "ValueError: bad gain"
    assert [r["state"] for r in rec["rollouts"]] == ["complete"]
    with pytest.raises(RuntimeError, match="closed"):
        s.rollout()


def test_uncapped_scheduler_releases_on_the_nominal_schedule_at_once(tmp_path):
    sched = looptime.Scheduler(0.001, rtf=0)
    assert (sched.clock, sched.rtf, sched.period_ns) == ("simulation", 0.0, 1_000_000)
    t0 = time.monotonic()
    targets = [sched.wait().target_ns for _ in range(5000)]
    # 5000 simulated milliseconds, run without sleeping: the k-th release
    # point is k periods after the first, whatever the host did meanwhile.
    assert time.monotonic() - t0 < 4.0
    assert [b - a for a, b in zip(targets, targets[1:])] == [1_000_000] * 4999
    assert sched.overruns == 0
    paced = looptime.Scheduler(0.01, rtf=2)
    assert (paced.clock, paced.period_ns, paced.nominal_period_ns) == ("host_monotonic", 5_000_000, 10_000_000)
    # A recorder on the host clock cannot take simulated release points.
    with pytest.raises(ValueError, match="target_clock=scheduler.clock"):
        sched.wait(small_recorder())
    with pytest.raises(ValueError, match="rtf must be 0"):
        looptime.Scheduler(0.01, rtf=-1)
    with pytest.raises(ValueError, match="target_clock must be"):
        small_recorder(target_clock="tsc")


def test_a_scheduler_reused_across_rollouts_starts_each_afresh_and_counts_its_own(tmp_path):
    # One paced Scheduler across two rollouts with a 300 ms pause between:
    # the second rollout's first cycle is no overrun carrying the pause as
    # lag, each manifest counts its own 20 cycles (not 40 for the second),
    # the analyzer sees no mismatch, and a per-rollout seed is the run's
    # seed (config.run.seed), which compare exempts between rollouts.
    args = looptime.add_arguments(argparse.ArgumentParser()).parse_args(["--control-timing"])
    sched = looptime.Scheduler(0.005)
    dirs = []
    with looptime.open_session(tmp_path / "runs", args, sched, rollouts=2, sources=[__file__]) as s:
        for seed in range(2):
            ep = s.rollout(settings={"seed": seed})
            rec = small_recorder(episode_dir=ep.dir, target_clock=sched.clock, nominal_period_ns=sched.nominal_period_ns)
            for _ in range(20):
                with rec.cycle("running", sched.wait(rec)):
                    pass
            rec.finish(ep.dir)
            ep.finish(rec, sched, complete=True, planned_cycles=20)
            dirs.append(pathlib.Path(ep.dir))
            time.sleep(0.3)
    for seed, d in enumerate(dirs):
        m = json.loads((d / "manifest.json").read_text())
        assert m["counts"]["cycles"] == 20, m["counts"]
        assert m["config"]["run"]["seed"] == seed and "seed" not in m["config"]["program"], m["config"]
        r = analyze(d)
        assert not any("the manifest counts" in c for c in r["caveats"]), r["caveats"]
        (running,) = [p for p in r["phases"] if p["phase"] == "running"]
        # No cycle waited out the pause: the lag of every cycle is far
        # below it (a loaded host may add a few ms, never 300).
        assert running["deadline_lag"]["max_ns"] < 100_000_000, running["deadline_lag"]
    out = subprocess.run([str(ANALYZER), "compare", str(dirs[0].parent), str(dirs[0].parent), "--json", "--resamples", "50"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert not any("run.seed" in w for w in json.loads(out.stdout)["warnings"]), out.stdout


def test_an_input_paced_session_needs_no_scheduler_and_counts_the_recorders_cycles(tmp_path):
    """A loop its inputs pace: a session opened with period_s and no
    scheduler; each rollout's manifest counts the recorder's cycles (5 and
    7 here) and states the robot's period; a scheduler handed to finish
    that never waited (as the docs once showed) no longer zeroes them; the
    pacer gives the dt from the robot's clock, bounded."""
    args = looptime.add_arguments(argparse.ArgumentParser()).parse_args(["--control-timing"])
    with looptime.open_session(tmp_path / "runs", args, period_s=0.001, rollouts=2, sources=[__file__]) as s:
        dirs = []
        for n, sched in ((5, None), (7, looptime.Scheduler(0.001))):
            ep = s.rollout()
            rec = small_recorder(episode_dir=ep.dir)
            pacer = looptime.InputPacer(max_dt_s=0.003)
            pacer.start(origin_ns=0)
            t0 = time.monotonic_ns()
            for i in range(n):
                # The robot's clock steps 1 ms; the 4th state comes 5 ms
                # after the 3rd by its clock: clamped to 3 ms.
                robot_ns = 1_000_000 * (i + 1) + (4_000_000 if i >= 3 else 0)
                tick = pacer.arrived(t0 + i * 1_000_000, i + 1, input_clock_ns=robot_ns)
                if i == 1:
                    assert (tick.dt_measured_ns, tick.dt_source) == (1_000_000, "input_clock")
                if i == 3:
                    assert (tick.dt_measured_ns, tick.dt_clamped) == (3_000_000, True)
                rec.begin_cycle("running", input=(tick.arrival_ns, tick.seq))
                rec.end_cycle()
            rec.finish(ep.dir)
            ep.finish(rec, sched, complete=True, planned_cycles=n)
            dirs.append(pathlib.Path(ep.dir))
    for d, n in zip(dirs, (5, 7)):
        m = json.loads((d / "manifest.json").read_text())
        assert m["counts"]["cycles"] == n and m["counts"]["planned_cycles"] == n, m["counts"]
        assert m["schedule"]["nominal_period_ns"] == 1_000_000 and m["schedule"]["overrun_policy"] == "none"
        assert m["config"]["run"]["rate_hz"] == 1000.0
    # The pacer's first dt is from its start; arrivals without a clock
    # give the gap between them.
    p = looptime.InputPacer(0.01)
    p.start(origin_ns=100)
    assert (p.arrived(600).dt_measured_ns, p.arrived(2_100).dt_source) == (500, "arrivals")
    with pytest.raises(ValueError, match="give a scheduler, or for a loop its inputs pace period_s"):
        looptime.open_episode(tmp_path / "x", args)
    with pytest.raises(ValueError, match="not both"):
        looptime.open_episode(tmp_path / "x", args, looptime.Scheduler(0.01), period_s=0.01)
    with pytest.raises(ValueError, match="max_dt_s must be a positive"):
        looptime.InputPacer(0)
    with pytest.raises(TypeError, match="arrival must be an int"):
        p.arrived(1.5)


def test_metadata_takes_numbers_and_bools_as_their_json_text(tmp_path):
    rec = small_recorder(metadata={"gain": 0.5, "steps": 3, "sim": True, "name": "arm"})
    rec.begin_cycle("running")
    rec.end_cycle()
    header, _ = read_jsonl(rec.finish(tmp_path).cycles_path)
    assert {k: header["metadata"][k] for k in ("gain", "steps", "sim", "name")} == {
        "gain": "0.5", "steps": "3", "sim": "true", "name": "arm"}
    with pytest.raises(TypeError, match=r'metadata\["bad"\] is a list: metadata values are str, int, float or bool'):
        small_recorder(metadata={"bad": [1]})
    with pytest.raises(ValueError, match="give a finite number"):
        small_recorder(metadata={"x": float("nan")})
