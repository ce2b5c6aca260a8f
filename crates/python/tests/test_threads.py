"""Background threads beside the loop, recorded and analyzed."""

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


def _busy(ns):
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def test_a_background_thread_is_recorded_beside_the_loop_and_analyzed(tmp_path):
    rec = looptime.Recorder(
        stages=["sense", "act"],
        ring="heap",
        nominal_period_ns=2_000_000,
        threads={"camera_reader": {"stages": ["grab", "decode"], "ring": "heap"}},
    )
    assert rec.threads == ["camera_reader"]
    cam = rec.thread("camera_reader")
    assert cam.threads == [] and cam.stage_id("decode") == 1
    with pytest.raises(KeyError, match='no background thread "lidar"; declared: camera_reader'):
        rec.thread("lidar")
    with pytest.raises(RuntimeError, match="control recorder's finish"):
        cam.finish(tmp_path)
    stop = threading.Event()
    frames = []

    def reader():  # a camera reader: grab (waits for a frame), then decode (works)
        grab, decode = cam.stage_id("grab"), cam.stage_id("decode")
        while not stop.is_set():
            with cam.cycle("running"):
                with cam.span(grab):
                    time.sleep(0.0005)
                with cam.span(decode):
                    _busy(300_000)
            frames.append(1)

    t = threading.Thread(target=reader, name="camera_reader")
    t.start()
    sched = looptime.Scheduler(0.002)
    for _ in range(150):
        tick = sched.wait(rec)
        with rec.cycle("running", tick):
            with rec.span("sense"):
                _busy(400_000)
            with rec.span("act"):
                pass
    stop.set()
    t.join()
    report = rec.finish(tmp_path)
    assert report.retained_cycles == 150
    header, _ = read_jsonl(report.cycles_path)
    assert header["threads"] == ["camera_reader"]
    theader, tcycles = read_jsonl(tmp_path / "control_timing.camera_reader.jsonl")
    assert theader["thread"]["name"] == "camera_reader"
    assert len(tcycles) == len(frames) > 0
    assert [s["stage"] for s in tcycles[0]["spans"]] == ["grab", "decode"]
    # Both recorders are finished; neither records or finishes again.
    for r in (rec, cam):
        with pytest.raises(RuntimeError, match="already finished"):
            r.begin_cycle("running")
    with pytest.raises(RuntimeError, match="already finished"):
        rec.finish(tmp_path)
    # The analyzer reads the thread as it reads the Rust runtime's: its own
    # report, and how long each control stage overlapped its work.
    r = analyze(tmp_path)
    (th,) = r["threads"]
    assert th["thread"] == "camera_reader" and th["file"] == "control_timing.camera_reader.jsonl"
    spans = {s["path"]: s["wall"]["count"] for s in th["stages"]}
    assert spans == {"grab": len(frames), "decode": len(frames)}
    over = [o for o in r["overlap"] if o["thread"] == "camera_reader"]
    assert {o["path"] for o in over} == {"sense", "act"}
    sense = next(o for o in over if o["path"] == "sense")
    assert sense["spans"] == 150
    # The reader decodes about 300 of every 800 µs, so the 400 µs sense
    # spans overlapped it for some of their time, never more than all.
    assert 0 < sense["overlap_ns"] <= sense["wall_ns"]


def test_thread_settings_are_checked(tmp_path):
    cases = [
        (dict(threads={"cam": ["grab"]}), TypeError, "must be a dict of Recorder settings"),
        (dict(threads={"cam": {}}), TypeError, 'needs "stages"'),
        (dict(threads={"cam": {"stages": ["g"], "nominal_period_ns": 5}}), TypeError, 'unknown setting "nominal_period_ns"'),
        (dict(threads={"cam": {"stages": ["g"], "ring": "disk"}}), TypeError, '"auto" or "heap"'),
        (dict(threads={"control": {"stages": ["g"]}}), ValueError, "control"),
        (dict(threads={"cam": {"stages": ["g", "g"]}}), ValueError, "g"),
    ]
    for kw, exc, msg in cases:
        with pytest.raises(exc, match=re.escape(msg)):
            looptime.Recorder(stages=["s"], ring="heap", **kw)
