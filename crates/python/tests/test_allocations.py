"""The hot path allocates nothing: no Python object after warmup
(tracemalloc), no malloc (a counting allocator in a child process)."""

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


def _recording_loop(rec, sched, ids, extra=None):
    """A cycle the way a loop writes it: `with` blocks, ids and a name."""
    running, sense, decode, act = rec.phase_id("running"), rec.stage_id("sense"), rec.stage_id("decode"), rec.stage_id("act")
    frame, rate = rec.value_id("frame"), rec.value_id("rate")
    camera = rec.source_id("camera")
    right = (rec.attr_id("camera", "right"),)  # attrs= on the id path
    for i in ids:
        tick = sched.wait(rec)
        with rec.cycle(running, tick):
            rec.sample(camera, i, i)  # data age on the id path
            with rec.span(sense, mode="inline"):
                with rec.span(decode, attrs=right):
                    pass
            with rec.span(act):
                pass
            with rec.span("act"):  # by name: found by identity, no allocation
                pass
            rec.set_value(frame, i)
            rec.set_value(rate, 100.0)
        if extra is not None:
            extra.append((i,))


def _explicit_loop(rec, sched, ids):
    """The same cycle with begin/end calls instead of `with` blocks; odd
    cycles are released by an input (`input=(arrival_ns, seq)`)."""
    running, sense, decode, act = rec.phase_id("running"), rec.stage_id("sense"), rec.stage_id("decode"), rec.stage_id("act")
    frame, rate = rec.value_id("frame"), rec.value_id("rate")
    camera = rec.source_id("camera")
    right = (rec.attr_id("camera", "right"),)
    arrived = (12_345_678_901, 7)  # an input-paced release, built once
    for i in ids:
        tick = sched.wait(rec)
        if i % 2:
            rec.begin_cycle(running, input=arrived)
        else:
            rec.begin_cycle(running, tick)
        rec.sample(camera, i, i)
        s = rec.begin_span(sense, mode="inline")
        d = rec.begin_span(decode, attrs=right)
        rec.end_span(d)
        rec.end_span(s)
        a = rec.begin_span(act)
        rec.end_span(a)
        rec.set_value(frame, i)
        rec.set_value(rate, 100.0)
        rec.end_cycle()


class _NoOp:
    """The cheapest context manager Python has, for comparison."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _noop_with_loop(ids):
    cm = _NoOp()
    for _ in ids:  # the same five `with` blocks as a cycle of _recording_loop
        with cm:
            with cm:
                with cm:
                    pass
            with cm:
                pass
            with cm:
                pass


def _allocated_during(fn):
    """Blocks allocated by ``fn`` and still alive, per tracemalloc (and the
    interpreter's block count)."""
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        blocks_before = sys.getallocatedblocks()
        fn()
        blocks_after = sys.getallocatedblocks()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        gc.enable()
    here = tracemalloc.Filter(True, __file__)
    new = sum(max(s.count_diff, 0) for s in after.filter_traces([here]).compare_to(before.filter_traces([here]), "lineno"))
    return new, blocks_after - blocks_before


def test_10000_cycles_allocate_no_python_object_after_warmup():
    rec = small_recorder(max_cycles=1000)
    sched = looptime.Scheduler(0.0001, spin_margin_us=20)  # 10 kHz: 10,000 cycles in about 1 s
    ids = list(range(10_000))  # the loop variable's ints exist before the loop
    _recording_loop(rec, sched, ids[:200])  # warm-up
    # A call of the loop function allocates a few blocks of its own (its
    # frame's locals, whatever the measurement costs), the same for 100
    # cycles as for 10,000: the difference is what the cycles allocate.
    short_new, short_blocks = _allocated_during(lambda: _recording_loop(rec, sched, ids[:100]))
    long_new, long_blocks = _allocated_during(lambda: _recording_loop(rec, sched, ids))
    assert rec.total_cycles == 10_300 and rec.dropped_cycles == 9_300
    assert long_new - short_new == 0, f"{long_new - short_new} more blocks for 9,900 more cycles"
    assert long_blocks - short_blocks < 10, f"{long_blocks - short_blocks} more live blocks for 9,900 more cycles"
    # Control: the same measure sees one tuple kept per cycle.
    kept = []
    control_new, _ = _allocated_during(lambda: _recording_loop(rec, sched, ids[:1000], kept))
    assert control_new - short_new >= 1000
    # The objects the loop gets back are the ones that existed before it.
    assert rec.span("sense") is rec and rec.cycle("running") is rec
    assert sched.wait() is sched.wait()


COUNTING_CHILD = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
import looptime
import test_allocations as t
count = ctypes.CDLL(None).lt_alloc_count
count.restype = ctypes.c_ulong
rec = t.small_recorder(max_cycles=1000)
sched = looptime.Scheduler(0.0001, spin_margin_us=20)
ids = list(range(10_000))
def measure(fn, n):
    fn(ids[:200])  # warm-up
    out = []
    for k in (100, n):
        a = count()
        fn(ids[:k])
        out.append(count() - a)
    return out[1] - out[0]  # allocations of n - 100 cycles
kept = []
print(json.dumps({
    "explicit": measure(lambda x: t._explicit_loop(rec, sched, x), 10_000),
    "with": measure(lambda x: t._recording_loop(rec, sched, x), 10_000),
    "noop_with": measure(t._noop_with_loop, 10_000),
    "control": measure(lambda x: t._recording_loop(rec, sched, x, kept), 1_000),
}))
"""


def test_no_allocation_per_cycle_counted_at_malloc(tmp_path):
    # tracemalloc (above) sees what stays alive; this sees every
    # allocation, even one freed at once: CPython's own allocator is
    # switched to malloc (PYTHONMALLOC=malloc) and malloc is counted.
    so = tmp_path / "count_malloc.so"
    src = pathlib.Path(__file__).with_name("count_malloc.c")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    env = dict(os.environ, PYTHONMALLOC="malloc", LD_PRELOAD=str(so))
    out = subprocess.run(
        [sys.executable, "-c", COUNTING_CHILD, str(pathlib.Path(__file__).parent)],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    # Begin/end calls: nothing at all, by the interpreter or the library,
    # across 9,900 cycles.
    assert r["explicit"] == 0, r
    # `with` blocks: CPython (3.10 to 3.13 at least) allocates and frees two
    # bound methods per `with` statement, whatever the context manager; the
    # recorder adds nothing to what a no-op Python context manager costs.
    assert r["with"] == r["noop_with"], r
    # Control: one tuple kept per cycle shows up as one allocation each.
    assert r["control"] - r["with"] * 900 // 9900 >= 900, r
