"""The looptime Python package: API, bad arguments, overflow, finish,
the hot path's allocations, SIGINT, and the analyzer on the example's
episode.

The analyzer is the workspace's debug build (``cargo test --workspace``
leaves it in target/debug); ``LOOPTIME_ANALYZER`` names another.
"""

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

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "python" / "robot_loop.py"
# cargo's target directory: $CARGO_TARGET_DIR, else target/ (the scripts' rule).
TARGET = pathlib.Path(os.environ["CARGO_TARGET_DIR"]).resolve() if os.environ.get("CARGO_TARGET_DIR") else ROOT / "target"
ANALYZER = pathlib.Path(os.environ.get("LOOPTIME_ANALYZER", TARGET / "debug" / "analyze_control_timing"))
LOOPTIME = TARGET / "debug" / "looptime"


def read_jsonl(path):
    lines = pathlib.Path(path).read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def small_recorder(**kw):
    args = dict(
        stages=["sense", "decode", "act"],
        phases=["warmup", "running"],
        attributes={"mode": ["inline", "background"], "camera": ["left", "right"]},
        values={"frame": ("int", "count"), "rate": ("float", "Hz")},
        ring="heap",
    )
    args.update(kw)
    return looptime.Recorder(**args)


# --- API ---------------------------------------------------------------------


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


# --- bad arguments -----------------------------------------------------------


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
    ],
)
def test_scheduler_setup_mistakes_raise_clearly(kw, needle):
    with pytest.raises(ValueError) as e:
        looptime.Scheduler(**kw)
    assert needle in str(e.value)


# --- overflow is counted, never raised ---------------------------------------


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


# --- finish ------------------------------------------------------------------


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


# --- the hot path allocates nothing ------------------------------------------


def _recording_loop(rec, sched, ids, extra=None):
    """A cycle the way a loop writes it: `with` blocks, ids and a name."""
    running, sense, decode, act = rec.phase_id("running"), rec.stage_id("sense"), rec.stage_id("decode"), rec.stage_id("act")
    frame, rate = rec.value_id("frame"), rec.value_id("rate")
    right = (rec.attr_id("camera", "right"),)  # attrs= on the id path
    for i in ids:
        tick = sched.wait(rec)
        with rec.cycle(running, tick):
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
    """The same cycle with begin/end calls instead of `with` blocks."""
    running, sense, decode, act = rec.phase_id("running"), rec.stage_id("sense"), rec.stage_id("decode"), rec.stage_id("act")
    frame, rate = rec.value_id("frame"), rec.value_id("rate")
    right = (rec.attr_id("camera", "right"),)
    for i in ids:
        tick = sched.wait(rec)
        rec.begin_cycle(running, tick)
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
import test_looptime as t
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


# --- the example, SIGINT and the analyzer ------------------------------------


def run_example(tmp_path, *args, **kw):
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--runs-dir", str(tmp_path / "runs"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def analyze(episode):
    assert ANALYZER.exists(), f"{ANALYZER} is missing: run `cargo build -p looptime-analyze` (or set LOOPTIME_ANALYZER)"
    out = subprocess.run([str(ANALYZER), "--episode", str(episode), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


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


# --- background threads -------------------------------------------------------


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
