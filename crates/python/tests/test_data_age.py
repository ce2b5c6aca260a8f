"""Data age from Python: sources declared on the recorder (and a thread's),
samples used and published, read back by the analyzer; misuse raises
before anything is recorded."""

from __future__ import annotations

import json
import pathlib
import threading

import pytest

import looptime

from _support import *  # noqa: F401,F403  (paths, helpers: _support.py)


def test_samples_used_and_published_are_analysed(tmp_path):
    rec = small_recorder(
        sources={"camera": {"max_age_s": 0.005}, "imu": {"clock": "imu_board"}},
        threads={"camera_reader": {"stages": ["grab"], "sources": {"camera": {}}, "ring": "heap"}},
    )
    cam_rec = rec.thread("camera_reader")
    camera, imu = rec.source_id("camera"), rec.source_id("imu")
    assert (camera, imu) == (0, 1)
    published = []

    def reader():
        # Publishes frames 1..3, each stamped as it is captured.
        for seq in (1, 2, 3):
            with cam_rec.cycle("running"):
                with cam_rec.span("grab"):
                    stamp = looptime.monotonic_ns()
                cam_rec.produced("camera", seq, stamp)
            published.append((seq, stamp))

    t = threading.Thread(target=reader)
    t.start()
    t.join()
    # Cycle k uses frame published[k] (the third is used twice: a reuse),
    # one of them 10 ms after its capture: stale beyond 5 ms.
    uses = [published[0], published[1], published[2], published[2]]
    for k, (seq, stamp) in enumerate(uses):
        with rec.cycle("running"):
            if k == 3:
                t0 = looptime.monotonic_ns()
                while looptime.monotonic_ns() - t0 < 10_000_000:
                    pass
            rec.sample(camera, seq, stamp)
            rec.sample("imu", 100 + k, 5)
    rec.sample(camera, 9, 9)  # outside a cycle: counted, not stored
    assert rec.samples_outside_cycle == 1
    rec.finish(tmp_path)

    r = analyze(tmp_path)
    cam = r["data_age"]["sources"][0]
    assert cam["source"] == "camera" and cam["max_age_ns"] == 5_000_000
    p = cam["phases"][0]
    assert (p["uses"], p["reused"], p["skipped"], p["stale"]) == (4, 1, 0, 1)
    assert p["age_at_use"]["max_ns"] >= 10_000_000
    pr = cam["production"]
    assert pr["threads"] == ["camera_reader"] and pr["produced"] == 3 and pr["never_used"] == 0
    imu_r = r["data_age"]["sources"][1]
    assert imu_r["clock"] == "imu_board" and "imu_board" in imu_r["not_comparable"]
    assert imu_r["phases"][0]["uses"] == 4 and imu_r["phases"][0]["age_at_use"] is None


def test_misuse_raises_and_records_nothing(tmp_path):
    rec = small_recorder()
    camera = rec.source_id("camera")
    with rec.cycle("running"):
        with pytest.raises(KeyError, match="unknown source 'lidar'"):
            rec.sample("lidar", 1, 1)
        with pytest.raises(KeyError, match="source id 5 was not registered"):
            rec.sample(5, 1, 1)
        with pytest.raises(TypeError, match="seq must be an int, not bool"):
            rec.sample(camera, True, 1)
        with pytest.raises(ValueError, match="seq must be from 0"):
            rec.sample(camera, -1, 1)
        with pytest.raises(TypeError, match="stamp_ns must be an int, not float"):
            rec.sample(camera, 1, 1.5)
    rec.finish(tmp_path)
    with pytest.raises(RuntimeError):
        rec.sample(camera, 1, 1)
    lines = (tmp_path / "control_timing.jsonl").read_text().splitlines()
    assert "samples" not in lines[1], lines[1]
    with pytest.raises(ValueError, match="max_age_s"):
        small_recorder(sources={"camera": {"max_age_s": -1}})
    with pytest.raises(TypeError, match='unknown setting "max_age"'):
        small_recorder(sources={"camera": {"max_age": 1}})
