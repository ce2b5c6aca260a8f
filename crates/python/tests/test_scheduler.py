"""The scheduler from Python: absolute deadlines, the reused tick, the
adaptive margin, overruns counted, the GIL released while it sleeps,
setup mistakes."""

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


def test_scheduler_hands_out_absolute_deadlines_and_the_tick_is_reused(tmp_path):
    sched = looptime.Scheduler(0.002, spin_margin_us=100, policy="keep-phase")
    assert (sched.period_ns, sched.spin_margin_ns, sched.policy) == (2_000_000, 100_000, "keep-phase")
    rec = small_recorder()
    first = sched.wait(rec)
    t0 = first.target_ns
    skipped = first.skipped
    for k in range(1, 5):
        tick = sched.wait(rec)
        assert tick is first  # one Tick, updated in place
        # keep-phase: every target, overdue or not, is on the original
        # timeline, one period per cycle plus the release points skipped,
        # so this holds however loaded the machine is.
        skipped += tick.skipped
        assert tick.target_ns == t0 + (k + skipped) * 2_000_000, (k, skipped, tick.overdue)
        assert tick.dt_measured_ns > 0 and abs(tick.dt_measured - tick.dt_measured_ns * 1e-9) < 1e-12
    assert sched.cycles == 5
    # A recorder cycle takes the tick's release point as its target.
    with rec.cycle("running", tick):
        pass
    target, margin, spin = tick.target_ns, tick.spin_margin_ns, tick.spin_ns
    _, cycles = read_jsonl(rec.finish(tmp_path).cycles_path)
    assert cycles[0]["target_ns"] == target
    # ... and the wait's margin and spin, which the evidence keeps.
    assert (cycles[0]["spin_margin_ns"], cycles[0]["spin_ns"]) == (margin, spin) and margin == 100_000


def test_an_adaptive_margin_stays_in_its_bounds_and_reaches_the_evidence(tmp_path):
    sched = looptime.Scheduler(0.002, spin_margin_us="auto")
    assert sched.auto_margin and sched.spin_margin_ns == 200_000  # the first wait's
    rec = small_recorder()
    margins = []
    for _ in range(40):
        tick = sched.wait(rec)
        with rec.cycle("running", tick):
            pass
        margins.append(tick.spin_margin_ns)
    # Between the 50 µs floor and the ceiling (half of 2 ms), whatever this
    # machine's sleep latency is; the range covers every margin used.
    assert all(50_000 <= m <= 1_000_000 for m in margins), margins
    lo, hi = sched.spin_margin_range_ns
    assert lo == min(margins) and hi == max(margins)
    _, cycles = read_jsonl(rec.finish(tmp_path).cycles_path)
    assert [c["spin_margin_ns"] for c in cycles] == margins
    assert not looptime.Scheduler(0.002).auto_margin


def test_an_overrun_is_counted_not_raised():
    sched = looptime.Scheduler(0.001)
    sched.wait()
    time.sleep(0.005)  # five periods of "work"
    tick = sched.wait()
    assert tick.overdue and sched.overruns == 1


def test_a_declared_budget_and_tolerance_count_overruns_and_misses():
    # 1 ms period, 2 ms budget, 1 ms tolerance. Cycle 0 works 5 ms (a
    # sleep of 5 ms, never shorter): over the budget, and its end (at
    # least 5 ms after its release) is later than the next release plus
    # the tolerance (2 ms after it): one overrun and one completion miss.
    # Cycle 1 finds its release passed by at least 3 ms: a wake miss
    # (more than 1 ms late). Its work (nothing) is judged at a third wait.
    # Cycle 0's own wake is on time unless a loaded host wakes it more
    # than 1 ms late: then it is a second wake miss.
    sched = looptime.Scheduler(0.001, compute_budget_us=2000, deadline_tolerance_us=1000)
    assert (sched.compute_budget_ns, sched.deadline_tolerance_ns) == (2_000_000, 1_000_000)
    sched.wait()
    time.sleep(0.005)
    sched.wait()
    assert (sched.budget_overruns, sched.completion_misses) == (1, 1)
    assert sched.wake_misses in (1, 2)
    # Nothing declared, nothing counted, whatever the work.
    plain = looptime.Scheduler(0.001)
    plain.wait()
    time.sleep(0.005)
    plain.wait()
    assert plain.compute_budget_ns is None and plain.deadline_tolerance_ns is None
    assert (plain.budget_overruns, plain.completion_misses, plain.wake_misses) == (0, 0, 0)


def test_the_gil_is_released_while_the_scheduler_sleeps():
    # Spin margin 0: the whole 50 ms wait is an absolute sleep. A Python
    # thread can only count while the waiting thread does not hold the GIL.
    sched = looptime.Scheduler(0.05, spin_margin_us=0)
    sched.wait()
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.01)  # let it start
    sched.wait()
    before = count[0]
    sched.wait()
    during = count[0] - before
    stop.set()
    t.join()
    assert during > 1000, f"the other thread counted only {during} during a 50 ms wait"


@pytest.mark.parametrize(
    "kw, needle",
    [
        (dict(period_s=0), "period_s must be a positive"),
        (dict(period_s=0.01, policy="catch-up"), 'policy must be "rebase" or "keep-phase"'),
        (dict(period_s=0.01, spin_margin_us=6000), "exceeds its ceiling"),
        (dict(period_s=0.01, max_dt_s=0.001), "below one period"),
        (dict(period_s=0.01, spin_margin_us=-1), "spin_margin_us must be >= 0"),
        (dict(period_s=0.01, spin_margin_us="fast"), 'a number of microseconds or "auto"'),
        (dict(period_s=0.01, spin_margin_us=True), 'a number of microseconds or "auto"'),
        (dict(period_s=0.01, compute_budget_us=-1), "compute_budget_us must be 0 to 10,000,000 µs"),
        (dict(period_s=0.01, deadline_tolerance_us=float("nan")), "deadline_tolerance_us must be 0 to"),
    ],
)
def test_scheduler_setup_mistakes_raise_clearly(kw, needle):
    with pytest.raises(ValueError) as e:
        looptime.Scheduler(**kw)
    assert needle in str(e.value)
