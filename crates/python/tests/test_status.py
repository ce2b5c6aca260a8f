"""Recorder(live_status=True).status(): counts another thread reads while
the loop runs, equal to the evidence's counts up to the cycle the snapshot
names (docs/ros2.md, Status on /diagnostics)."""

from __future__ import annotations

import json
import threading

import pytest

import looptime

MS = 1_000_000


def test_a_snapshot_counts_what_the_evidence_holds_up_to_its_cycle(tmp_path):
    # 300 cycles, period 1 ms, tolerance 0.2 ms, budget 0.5 ms. Cycle i is
    # released 10 ms in the past when i % 50 == 7 (a late start by ≥ 10 ms,
    # i = 7, 57, ..., 257: 6 of them), marked overdue with 2 skipped
    # release points when i % 100 == 99 (i = 99, 199, 299: 3 overruns, 6
    # skipped), and released 1 ms ahead otherwise.
    rec = looptime.Recorder(stages=["work"], live_status=True, nominal_period_ns=MS,
                            deadline_tolerance_ns=MS // 5, compute_budget_ns=MS // 2)
    status = rec.status()
    assert status.snapshot()["index"] is None and status.snapshot()["last_miss"] is None
    seen = []
    done = threading.Event()
    took = threading.Event()

    def reader():
        while not done.is_set():
            seen.append(status.snapshot())
            took.set()

    t = threading.Thread(target=reader)
    t.start()
    for i in range(300):
        if i in (100, 200):
            # The loop can finish 300 empty cycles inside one of the GIL's
            # 5 ms switch intervals; here it waits for the reader to take a
            # snapshot mid-run, so the check below always sees one.
            took.clear()
            assert took.wait(timeout=30)
        late = i % 50 == 7
        overdue = i % 100 == 99
        target = looptime.monotonic_ns() + (-10 * MS if late else MS)
        with rec.cycle("running", target_ns=target, skipped=2 if overdue else 0, overdue=overdue):
            with rec.span("work"):
                pass
    done.set()
    t.join()
    final = status.snapshot()
    assert (final["cycles"], final["index"], final["overruns"], final["skipped"]) == (300, 299, 3, 6)
    assert final["late_starts"] >= 6 and final["budget_overruns"] == 0
    assert final["last_miss"]["index"] == 299 and final["last_miss"]["kind"] == "overrun"
    assert final["periods"] == 299 and final["period_p99_ns"] > 0
    rec.finish(tmp_path)
    cycles = [json.loads(line) for line in (tmp_path / "control_timing.jsonl").read_text().splitlines()[1:]]
    # Every snapshot the reader took is the evidence's counts up to the
    # cycle it names: never a count from a later cycle, never half of one.
    for s in seen + [final]:
        if s["index"] is None:
            assert s["cycles"] == 0
            continue
        upto = cycles[: s["index"] + 1]
        assert s["cycles"] == len(upto)
        assert s["overruns"] == sum(c["overdue"] for c in upto)
        assert s["skipped"] == sum(c["skipped"] for c in upto)
        # A late start in the evidence (start − target > 0.2 ms): the
        # status's own count agrees (the releases are 10 ms late or 1 ms
        # early, far from the threshold).
        assert s["late_starts"] == sum(c["start_ns"] - c["target_ns"] > MS // 5 for c in upto)
    assert any(s["index"] is not None and 99 <= s["index"] < 299 for s in seen)


def test_a_recorder_without_it_says_how_to_ask_for_it():
    rec = looptime.Recorder(stages=["work"])
    with pytest.raises(ValueError, match="live_status=True"):
        rec.status()
