"""The recorder from Python: cycles, spans, values, attributes, CPU-time
modes, setup and naming mistakes, overflow counted, finish."""

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


def test_cycles_spans_values_and_attributes_are_written(tmp_path):
    rec = small_recorder(nominal_period_ns=10_000_000, metadata={"who": "pytest"})
    running = rec.phase_id("running")
    assert (rec.stage_id("sense"), rec.stage_id("decode"), rec.stage_id("act")) == (0, 1, 2)
    for i in range(3):
        rec.begin_wait()
        rec.end_wait()
        with rec.cycle(running):
            with rec.span("sense", mode="inline"):
                with rec.span("decode"):
                    pass
            token = rec.begin_span("act")
            assert token == 0
            rec.end_span(token)
            rec.set_value("frame", i)
            rec.set_value(rec.value_id("rate"), 2)  # an int is accepted for a float value
    report = rec.finish(tmp_path, status="complete")
    assert report.retained_cycles == 3 and report.dropped_cycles == 0 and report.status == "complete"
    header, cycles = read_jsonl(report.cycles_path)
    assert [st["name"] for st in header["stages"]] == ["sense", "decode", "act"]
    assert header["metadata"]["who"] == "pytest"
    assert [c["phase"] for c in cycles] == ["running"] * 3
    spans = cycles[2]["spans"]
    assert [s["stage"] for s in spans] == ["sense", "decode", "act"]
    assert spans[1]["parent"] == 0 and spans[1]["depth"] == 1
    assert spans[2]["parent"] is None
    assert spans[0]["attrs"] == {"mode": "inline"}
    assert all(not s["closed_by_cycle_end"] for s in spans)
    # The default CPU-time mode, "cycle": the cycle carries the work's CPU
    # time, the spans are wall-only.
    assert header["thread_cpu_mode"] == "cycle"
    assert all(s["cpu_ns"] is None for s in spans)
    assert all(c["cpu_ns"] >= 0 for c in cycles)
    assert cycles[2]["values"] == {"frame": 2, "rate": 2.0}
    assert "sleep_start_ns" in cycles[0]  # the wait was marked
    summary = json.loads(pathlib.Path(report.summary_path).read_text())
    assert summary["capture"]["retained_cycles"] == 3


def test_a_cycle_released_by_an_input_carries_its_arrival_and_counter(tmp_path):
    """input=(arrival_ns, seq) on begin_cycle and on `with rec.cycle`: the
    record says pace input with the arrival and counter and has no target;
    misuse raises before anything is written."""
    rec = small_recorder()
    running = rec.phase_id("running")
    arrival = time.monotonic_ns()
    rec.begin_wait()  # the blocking receive
    rec.end_wait()
    rec.begin_cycle(running, input=(arrival, 41))
    rec.end_cycle()
    with rec.cycle("running", input=(arrival + 1_000_000, None)):  # no counter
        pass
    with rec.cycle("running"):  # deadline-paced, as before
        pass
    sched = looptime.Scheduler(0.001)
    tick = sched.wait(rec)
    for bad, exc, needle in [
        ((arrival,), TypeError, "tuple (arrival_ns, seq)"),
        ([arrival, 1], TypeError, "tuple (arrival_ns, seq)"),
        ((True, 1), TypeError, "tuple (arrival_ns, seq)"),
        ((arrival, 1.5), TypeError, "tuple (arrival_ns, seq)"),
        ((-1, 1), ValueError, "arrival_ns must be an int from 0"),
        ((arrival, -2), ValueError, "seq must be an int from 0"),
    ]:
        with pytest.raises(exc, match=re.escape(needle)):
            rec.begin_cycle(running, input=bad)
    with pytest.raises(ValueError, match="not both"):
        rec.begin_cycle(running, tick, input=(arrival, 1))
    report = rec.finish(tmp_path)
    _, cycles = read_jsonl(report.cycles_path)
    # Three cycles: the refused calls began none.
    assert len(cycles) == 3
    first, second, third = cycles
    assert (first["pace"], first["arrival_ns"], first["input_seq"], first["target_ns"]) == ("input", arrival, 41, None)
    assert "sleep_start_ns" in first  # the receive, wrapped as the wait
    assert (second["pace"], second["arrival_ns"], "input_seq" in second) == ("input", arrival + 1_000_000, False)
    assert "pace" not in third and "arrival_ns" not in third


def test_recv_stamped_gives_the_kernels_arrival_and_the_cycle_keeps_both(tmp_path):
    """A state that waited 20 ms in the socket: recv_stamped's Arrival has
    the kernel's stamp at least 20 ms (less the conversion's bound) before
    the read; input=(arrival, seq) records both, and the analyzer's socket
    wait reads them back. Without timestamps the arrival is the read."""
    import socket

    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    looptime.enable_rx_timestamps(rx)
    tx.sendto(b"state-7", rx.getsockname())
    time.sleep(0.02)
    rx.settimeout(1.0)  # a timeout: the socket is non-blocking underneath
    data, got = looptime.recv_stamped(rx)
    assert data == b"state-7" and got.kernel
    assert got.waited_ns + got.bound_ns >= 20_000_000, got
    rec = small_recorder()
    rec.begin_cycle("running", input=(got, 7))
    rec.end_cycle()
    _, cycles = read_jsonl(rec.finish(tmp_path).cycles_path)
    c = cycles[0]
    assert (c["arrival_ns"], c["read_ns"], c["arrival_bound_ns"], c["input_seq"]) == (
        got.arrival_ns, got.read_ns, got.bound_ns, 7)
    # Nothing in time: TimeoutError, as socket.recv raises.
    rx.settimeout(0.05)
    with pytest.raises(TimeoutError):
        looptime.recv_stamped(rx)
    # A socket without timestamps: the arrival is the read, no bound.
    plain = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    plain.bind(("127.0.0.1", 0))
    tx.sendto(b"s", plain.getsockname())
    _, p = looptime.recv_stamped(plain.fileno())
    assert (p.kernel, p.bound_ns, p.arrival_ns) == (False, None, p.read_ns)
    with pytest.raises(TypeError, match="a socket"):
        looptime.recv_stamped("not a socket")
    for s in (rx, tx, plain):
        s.close()


@pytest.mark.parametrize(
    "setting, mode",
    [(None, "cycle"), ("cycle", "cycle"), ("spans", "spans"), ("off", "off"), (True, "spans"), (False, "off")],
)
def test_each_cpu_time_mode_writes_what_it_says(tmp_path, setting, mode):
    # True and False are the switch of the releases before the modes.
    rec = small_recorder(thread_cpu=setting)
    running = rec.phase_id("running")
    for _ in range(2):
        with rec.cycle(running):
            with rec.span("sense"):
                with rec.span("decode"):
                    pass
    # A cycle left open at finish: the binding's finish ends it first, so
    # it has an end and (in cycle mode) its CPU time.
    rec.begin_cycle(running)
    report = rec.finish(tmp_path, status="aborted")
    header, cycles = read_jsonl(report.cycles_path)
    assert header["thread_cpu_mode"] == mode
    assert header["thread_cpu_time"] == (mode != "off")
    assert cycles[2]["end_ns"] is not None
    assert [c.get("cpu_ns") is not None for c in cycles] == [mode == "cycle"] * 3
    for c in cycles[:2]:
        assert [s["cpu_ns"] is not None for s in c["spans"]] == [mode == "spans"] * 2
        assert c["spans"][1]["parent"] == 0


def test_a_bad_cpu_time_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r'"cycle".*"spans".*"off"'):
        small_recorder(thread_cpu="per-span")
    with pytest.raises(ValueError, match="thread_cpu"):
        small_recorder(thread_cpu=3)
    with pytest.raises(ValueError, match=r'threads\["cam"\]\["thread_cpu"\]'):
        small_recorder(threads={"cam": {"stages": ["grab"], "thread_cpu": "sometimes"}})


def test_any_declared_attribute_by_ids_or_names_and_bad_ones_refused(tmp_path):
    rec = small_recorder()
    # Ids: keys in declaration order, values in each key's order.
    assert rec.attr_id("mode", "background") == (0, 1)
    assert rec.attr_id("camera", "right") == (1, 1)
    assert rec.attr_id(1, 0) == (1, 0)
    running = rec.phase_id("running")
    with rec.cycle(running):
        with rec.span("sense", attrs=((1, 1), (0, 0))):  # camera=right, mode=inline
            pass
        with rec.span("decode", mode="background", attrs={"camera": "left"}):
            pass
        a = rec.begin_span("act", attrs=[("camera", "left"), ("camera", "right")])  # the last wins
        rec.end_span(a)
        # Refused before the span opens: nothing is written for these.
        bad = [
            (dict(attrs=(("lens", "wide"),)), KeyError, "unknown attribute key 'lens'"),
            (dict(attrs=((7, 0),)), KeyError, "attribute key id 7 was not registered"),
            (dict(attrs=(("camera", "top"),)), KeyError, "unknown value 'top' of attribute camera"),
            (dict(attrs=((1, 5),)), KeyError, "value id 5 of attribute camera was not registered"),
            (dict(attrs=((1, False),)), TypeError, "not bool"),
            (dict(attrs=((True, 0),)), TypeError, "not bool"),
            (dict(attrs=("camera",)), TypeError, "(key, value) pairs"),
            (dict(attrs=(("camera", "left", "x"),)), TypeError, "(key, value) pairs"),
            (dict(attrs="camera=left"), TypeError, "tuple or list"),
        ]
        for kw, exc, msg in bad:
            with pytest.raises(exc, match=re.escape(msg)):
                rec.begin_span("act", **kw)
            with pytest.raises(exc, match=re.escape(msg)):
                rec.span("act", **kw)
    report = rec.finish(tmp_path)
    _, cycles = read_jsonl(report.cycles_path)
    spans = cycles[0]["spans"]
    assert [s["stage"] for s in spans] == ["sense", "decode", "act"]
    assert spans[0]["attrs"] == {"camera": "right", "mode": "inline"}
    assert spans[1]["attrs"] == {"camera": "left", "mode": "background"}
    assert spans[2]["attrs"] == {"camera": "right"}


def test_a_span_carries_at_most_four_attribute_keys(tmp_path):
    rec = looptime.Recorder(
        stages=["s"], attributes={k: ["v"] for k in "abcde"}, ring="heap"
    )
    with rec.cycle("running"):
        with pytest.raises(ValueError, match="at most 4 attribute keys"):
            rec.span("s", attrs=tuple((k, 0) for k in range(5)))
        with rec.span("s", attrs=tuple((k, 0) for k in range(4))):
            pass
    _, cycles = read_jsonl(rec.finish(tmp_path).cycles_path)
    assert cycles[0]["spans"][0]["attrs"] == {k: "v" for k in "abcd"}
    assert len(cycles[0]["spans"]) == 1


@pytest.mark.parametrize(
    "kw, exc, needle",
    [
        (dict(stages=["a", "a"]), ValueError, "already registered"),
        (dict(stages=[""]), ValueError, "empty"),
        (dict(stages=["a"], values={"v": ("integer", "")}), ValueError, 'kind must be "int" or "float"'),
        (dict(stages=["a"], values={"v": "int"}), TypeError, "(kind, unit)"),
        (dict(stages=["a"], attributes={"mode": "inline"}), TypeError, "list of value names"),
        (dict(stages=["a"], ring="disk"), ValueError, "ring must be"),
        (dict(stages=["a"], max_cycles=0), ValueError, "max_cycles"),
        (dict(stages=["a"], max_spans_per_cycle=5000), ValueError, "max_spans_per_cycle"),
        # A negative capacity is a ValueError naming the argument and its
        # range, not an OverflowError from the int conversion.
        (dict(stages=["a"], max_cycles=-5), ValueError, "max_cycles must be from 1 to"),
        (dict(stages=["a"], max_spans_per_cycle=-1), ValueError, "max_spans_per_cycle must be from 1"),
        (dict(stages=["a"], max_cycles=2**70), ValueError, "max_cycles must be from 1 to"),
        (dict(stages=["a"], max_cycles=True), TypeError, "max_cycles must be an int"),
    ],
)
def test_recorder_setup_mistakes_raise_clearly(kw, exc, needle):
    with pytest.raises(exc, match=None) as e:
        looptime.Recorder(**kw)
    assert needle in str(e.value)


def test_naming_mistakes_raise_at_lookup():
    rec = small_recorder()
    with pytest.raises(KeyError, match="unknown stage 'snese'; registered: sense, decode, act"):
        rec.stage_id("snese")
    with pytest.raises(KeyError, match="stage id 9 was not registered"):
        rec.span(9)
    with pytest.raises(KeyError, match="unknown mode"):
        rec.span("sense", mode="sideways")
    with pytest.raises(TypeError, match="name \\(str\\) or its id \\(int\\)"):
        rec.stage_id(1.5)
    # bool is an int in Python; as an id it is a mistake, refused.
    with pytest.raises(TypeError, match="not bool"):
        rec.span(True)
    with pytest.raises(TypeError, match="not bool"):
        rec.begin_span(False)
    with pytest.raises(TypeError, match="not bool"):
        rec.begin_cycle(True)
    rec.begin_cycle("running")
    with pytest.raises(TypeError, match="int value; got float"):
        rec.set_value("frame", 1.5)
    with pytest.raises(TypeError, match="float value; got str"):
        rec.set_value("rate", "fast")
    with pytest.raises(RuntimeError, match="through `with rec.cycle"):
        with rec:
            pass


def test_overflow_of_slots_depth_and_ring_is_counted(tmp_path):
    rec = small_recorder(max_cycles=4, max_spans_per_cycle=3)
    for _ in range(10):
        with rec.cycle("running"):
            for _ in range(5):  # 2 more than the slots
                with rec.span("act"):
                    pass
    assert rec.spans_dropped == 20
    # Deeper than the recorder's depth limit, and deeper than the binding's stack.
    with rec.cycle("running"):
        depth = looptime.MAX_SPAN_DEPTH * 5

        def nest(n):
            if n:
                with rec.span("sense"):
                    nest(n - 1)

        nest(depth)
        assert rec.in_cycle
    assert not rec.in_cycle  # every __exit__ popped what its __enter__ pushed
    with rec.span("sense"):  # outside a cycle
        pass
    assert rec.spans_outside_cycle == 1
    report = rec.finish(tmp_path)
    assert report.total_cycles == 11 and report.retained_cycles == 4 and report.dropped_cycles == 7
    _, cycles = read_jsonl(report.cycles_path)
    assert len(cycles) == 4 and cycles[-1]["cycle"] == 10


def test_finish_into_an_unwritable_directory_raises_and_loses_nothing(tmp_path):
    rec = small_recorder()
    with rec.cycle("running"):
        with rec.span("sense"):
            pass
    with pytest.raises(OSError) as e:
        rec.finish("/proc/self/no-such-episode")
    assert "/proc/self/no-such-episode" in str(e.value)
    report = rec.finish(tmp_path, status="aborted")
    assert report.retained_cycles == 1 and report.status == "aborted"
    summary = json.loads(pathlib.Path(report.summary_path).read_text())
    assert summary["status"] == "aborted"
    with pytest.raises(RuntimeError, match="already finished"):
        rec.finish(tmp_path)
    with pytest.raises(ValueError, match="status must be"):
        small_recorder().finish(tmp_path, status="done")


def test_recording_after_finish_raises_and_writes_nothing(tmp_path):
    rec = small_recorder()
    with rec.cycle("running"):
        pass
    report = rec.finish(tmp_path)
    before = pathlib.Path(report.cycles_path).read_bytes()
    calls = [
        lambda: rec.begin_cycle("running"),
        lambda: rec.cycle("running"),
        lambda: rec.end_cycle(),
        lambda: rec.span("sense"),
        lambda: rec.begin_span("sense"),
        lambda: rec.end_span(),
        lambda: rec.set_value("frame", 1),
        lambda: rec.begin_wait(),
        lambda: rec.end_wait(),
        lambda: looptime.Scheduler(period_s=0.001).wait(rec),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="already finished"):
            call()
    assert rec.total_cycles == 1
    assert pathlib.Path(report.cycles_path).read_bytes() == before


def test_an_open_cycle_and_span_are_closed_at_finish(tmp_path):
    rec = small_recorder()
    rec.begin_cycle("running")
    rec.begin_span("sense")
    report = rec.finish(tmp_path, status="aborted")
    _, cycles = read_jsonl(report.cycles_path)
    assert cycles[0]["spans"][0]["closed_by_cycle_end"] is True


def test_a_cycle_at_another_schedulers_release_point_and_looptime_ros_without_rclpy(tmp_path):
    """target_ns= (a ROS timer's expected call time, as looptime.ros gives
    it) with the release points skipped before it; misuse raises. Without
    rclpy, `import looptime.ros` says what to install."""
    rec = small_recorder()
    rec.begin_cycle("running", target_ns=5_000_000, skipped=3, overdue=True)
    rec.end_cycle()
    with rec.cycle("running", target_ns=15_000_000):
        pass
    with pytest.raises(ValueError, match="one of them"):
        rec.begin_cycle("running", input=(1, 1), target_ns=5)
    with pytest.raises(ValueError, match="go with target_ns"):
        rec.begin_cycle("running", skipped=2)
    _, cycles = read_jsonl(rec.finish(tmp_path).cycles_path)
    assert [(c["target_ns"], c.get("skipped", 0), c.get("overdue", False)) for c in cycles] == [
        (5_000_000, 3, True), (15_000_000, 0, False)]
    try:
        import rclpy  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install ros-kilted-rclpy==9.1.2"):
            import looptime.ros  # noqa: F401
