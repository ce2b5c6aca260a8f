"""After kill -9: `looptime recover` rebuilds the loop's and its threads'
evidence."""

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


def test_after_kill_9_recover_rebuilds_the_background_thread_too(tmp_path):
    looptime_bin = LOOPTIME
    assert looptime_bin.exists(), f"{looptime_bin} is missing: run `cargo build -p looptime-cli`"
    p = run_example(tmp_path, "--control-timing", "--duration", "30", "--warmup", "0")
    assert p.stdout.readline().startswith("[run]")  # the loop has started
    time.sleep(1.0)
    rings = sorted(pathlib.Path("/dev/shm").glob(f"looptime-{p.pid}-*.ring"))
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)
    if not rings:
        pytest.skip("no /dev/shm rings on this host (heap rings cannot be recovered)")
    assert len(rings) == 2, rings  # the loop's and the camera reader's
    for ring in rings:
        out = subprocess.run([str(looptime_bin), "recover", "--ring", str(ring)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    ep = (tmp_path / "runs" / "latest").resolve()
    assert (ep / "control_timing.camera_reader.jsonl").exists()
    r = analyze(ep)
    assert r["state"] == "recovered"
    (th,) = r["threads"]
    assert th["thread"] == "camera_reader"
    assert {s["path"] for s in th["stages"]} == {"grab", "decode"}
    assert any(s["count"] > 0 for s in th["stages"])


CHILD = """
import sys, time, looptime
rec = looptime.Recorder(stages=["work"], ring="auto", episode_dir="ep")
for _ in range(25):
    rec.begin_cycle("running")
    with rec.span("work"):
        pass
    rec.end_cycle()
print("READY", flush=True)
time.sleep(60)
"""


def test_a_plain_recorder_killed_with_kill_9_recovers_into_its_own_directory(tmp_path):
    # A program that opened no episode with the helpers: a Recorder with a
    # relative episode_dir, run from tmp_path, killed with SIGKILL. The ring
    # records the directory as an absolute path, so `looptime recover`,
    # run from elsewhere (the repository), writes into tmp_path/ep, and only
    # after checking that the directory is the caller's (docs/durability.md).
    assert LOOPTIME.exists(), f"{LOOPTIME} is missing: run `cargo build -p looptime-cli`"
    p = subprocess.Popen([sys.executable, "-c", CHILD], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "READY"
        rings = sorted(pathlib.Path("/dev/shm").glob(f"looptime-{p.pid}-*.ring"))
    finally:
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=30)
    if not rings:
        pytest.skip("no /dev/shm rings on this host (heap rings cannot be recovered)")
    (ring,) = rings
    out = subprocess.run([str(LOOPTIME), "recover", "--ring", str(ring)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert str(tmp_path / "ep") in out.stdout
    assert not ring.exists()
    assert not (ROOT / "ep").exists()
    _, cycles = read_jsonl(tmp_path / "ep" / "control_timing.jsonl")
    assert len(cycles) == 25
    assert analyze(tmp_path / "ep")["state"] == "recovered"


def test_a_finished_recorders_ring_is_removed_at_finish_not_at_collection(tmp_path):
    # The recorder object stays alive after finish (a program keeps its
    # reference); its ring file must be gone already, not when Python
    # collects it.
    (tmp_path / "ep").mkdir()
    rec = looptime.Recorder(stages=["work"], ring="auto", episode_dir=str(tmp_path / "ep"))
    ring = rec.ring_path
    if ring is None:
        pytest.skip("no /dev/shm rings on this host")
    assert pathlib.Path(ring).exists()
    for _ in range(5):
        rec.begin_cycle("running")
        rec.end_cycle()
    rec.finish(str(tmp_path / "ep"))
    assert not pathlib.Path(ring).exists(), ring
    assert (tmp_path / "ep" / "control_timing.jsonl").exists()
    del rec
    gc.collect()


def test_recover_says_what_a_ring_without_an_episode_is_and_how_to_drop_it(tmp_path):
    # A recorder built without an episode directory, killed: recover keeps
    # its ring (nowhere to write) and says what it is and the command to
    # drop it.
    child = CHILD.replace(', episode_dir="ep"', "")
    p = subprocess.Popen([sys.executable, "-c", child], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "READY"
        rings = sorted(pathlib.Path("/dev/shm").glob(f"looptime-{p.pid}-*.ring"))
    finally:
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=30)
    if not rings:
        pytest.skip("no /dev/shm rings on this host")
    (ring,) = rings
    try:
        out = subprocess.run([str(LOOPTIME), "recover", "--ring", str(ring)], capture_output=True, text=True)
        text = out.stdout + out.stderr
        assert "names no episode directory" in text and f"rm {ring}" in text, text
        assert ring.exists()
    finally:
        ring.unlink(missing_ok=True)
