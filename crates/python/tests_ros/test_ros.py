"""looptime.ros against a real rclpy (run by tests/ros2.sh in a Jazzy and a
Kilted venv, DDS on loopback): a node with a 100 Hz STEADY_TIME loop timer,
a second timer, a subscription fed by a second node and a service it calls.
Only what the test itself knows is asserted: one span per callback it
counted, the loop's targets on its grid, an executor stall of 5 periods
showing as at least 4 skipped periods, the callback attributes; never that
the host kept the rate."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import threading
import time

import pytest
import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Int64
from std_srvs.srv import Trigger

import looptime
import looptime.ros

ANALYZER = os.environ["LOOPTIME_ANALYZER"]
PERIOD_NS = 10_000_000


def read_jsonl(path):
    lines = pathlib.Path(path).read_text().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


@pytest.fixture()
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


def build(counts):
    """The instrumented node and its feeder: the loop (stalling the
    executor once for 5.5 periods at its 20th call), a 20 Hz housekeeping
    timer, a subscription to the feeder's 50 Hz topic, and a service the
    feeder calls every 100 ms."""
    node, feeder = Node("looptime_test_node"), Node("looptime_test_feeder")
    steady = Clock(clock_type=ClockType.STEADY_TIME)

    def loop_cb():
        counts["loop"] += 1
        if counts["loop"] == 20:
            time.sleep(0.055)

    def house():
        counts["house"] += 1

    def on_msg(msg):
        counts["msg"] += 1

    def on_msg_info(msg, info):
        # rclpy hands the MessageInfo to a two-argument callback; the
        # wrapper passes it on.
        assert "source_timestamp" in info, info
        counts["msg"] += 1

    def on_call(request, response):
        counts["call"] += 1
        response.success = True
        return response

    loop = node.create_timer(PERIOD_NS / 1e9, loop_cb, clock=steady)
    node.create_timer(0.05, house, clock=steady)
    node.create_subscription(Int64, "looptime_test_topic", on_msg, 10)
    node.create_subscription(Int64, "looptime_test_topic", on_msg_info, 10)
    node.create_service(Trigger, "looptime_test_service", on_call)
    pub = feeder.create_publisher(Int64, "looptime_test_topic", 10)
    client = feeder.create_client(Trigger, "looptime_test_service")
    feeder.create_timer(0.02, lambda: pub.publish(Int64(data=1)), clock=steady)
    feeder.create_timer(0.1, lambda: client.call_async(Trigger.Request()), clock=steady)
    return node, feeder, loop


def spin(executor, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.01)


def test_the_loop_timer_and_every_callback_are_on_the_record(ros, tmp_path):
    counts = {"loop": 0, "house": 0, "msg": 0, "call": 0}
    node, feeder, loop = build(counts)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ex.add_node(feeder)
    timing = looptime.ros.instrument(node, runs_dir=tmp_path / "runs", loop=loop)
    spin(ex, 0.8)
    ep = pathlib.Path(timing.finish(status="complete"))
    assert counts["loop"] >= 30 and counts["msg"] > 0 and counts["call"] > 0 and counts["house"] > 0, counts
    header, cycles = read_jsonl(ep / "control_timing.jsonl")
    assert header["nominal_period_ns"] == PERIOD_NS
    # One cycle per loop call, each with its span; targets on the grid.
    assert len(cycles) == counts["loop"] == timing.cycles
    t0 = cycles[0]["target_ns"]
    assert all((c["target_ns"] - t0) % PERIOD_NS == 0 for c in cycles), [c["target_ns"] - t0 for c in cycles]
    assert all(c["spans"][0]["stage"] == "loop" for c in cycles)
    # The 5.5-period stall at the 20th call: rcl skipped at least 4 periods.
    assert sum(c.get("skipped", 0) for c in cycles) >= 4, [c.get("skipped") for c in cycles]
    # Every other callback: one span each, with its kind and name.
    _, calls = read_jsonl(ep / "control_timing.executor.jsonl")
    seen = {}
    for c in calls:
        (s,) = c["spans"]
        key = (s["attrs"]["kind"], s["attrs"]["name"])
        seen[key] = seen.get(key, 0) + 1
    assert seen == {("timer", "timer1:50ms"): counts["house"],
                    ("subscription", "/looptime_test_topic"): counts["msg"],
                    ("service", "/looptime_test_service"): counts["call"]}, seen
    m = json.loads((ep / "manifest.json").read_text())
    assert m["status"] == "complete" and m["counts"]["cycles"] == counts["loop"], m["counts"]
    assert m["config"]["program"]["ros_loop_clock"] == "STEADY_TIME"
    r = json.loads(subprocess.run([ANALYZER, "report", str(ep), "--json"], check=True,
                                  capture_output=True, text=True).stdout)
    assert r["state"] == "complete"
    (ex_report,) = [t for t in r["threads"] if t["thread"] == "executor"]
    # The analyzer groups the executor's spans by callback name: each one's
    # calls as the test counted them; the 20 Hz timer's declared period.
    by = {c["name"]: c for c in ex_report["callbacks"]}
    assert by["timer1:50ms"]["calls"] == counts["house"], by
    assert by["timer1:50ms"]["period_ns"] == 50_000_000 and by["timer1:50ms"]["skipped"] is not None
    assert by["/looptime_test_topic"]["calls"] == counts["msg"] and by["/looptime_test_topic"]["kind"] == "subscription"
    # The node's callbacks are its own again.
    assert loop.callback.__name__ == "loop_cb"


def test_the_programs_own_loop_records_the_callbacks_beside_it(ros, tmp_path):
    """loop=None: the program's scheduler thread records its loop; the
    node's callbacks, spun on the main thread, go into the same episode."""
    counts = {"loop": 0, "house": 0, "msg": 0, "call": 0}
    node, feeder, _ = build(counts)
    args = looptime.add_arguments(__import__("argparse").ArgumentParser()).parse_args(["--control-timing"])
    sched = looptime.Scheduler(0.01)
    episode = looptime.open_episode(tmp_path / "runs", args, sched)
    rec = looptime.Recorder(stages=["control"], phases=["running"], episode_dir=episode.dir,
                            nominal_period_ns=PERIOD_NS, **looptime.ros.spec(node))
    timing = looptime.ros.instrument(node, recorder=rec)
    stop, cycles = threading.Event(), [0]

    def loop():
        while not stop.is_set():
            tick = sched.wait(rec)
            with rec.cycle("running", tick):
                with rec.span("control"):
                    cycles[0] += 1

    t = threading.Thread(target=loop)
    t.start()
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ex.add_node(feeder)
    spin(ex, 0.5)
    stop.set()
    t.join()
    timing.finish()
    rec.finish(episode.dir)
    episode.finish(rec, sched)
    ep = pathlib.Path(episode.dir)
    _, own = read_jsonl(ep / "control_timing.jsonl")
    _, calls = read_jsonl(ep / "control_timing.executor.jsonl")
    assert len(own) == cycles[0] and cycles[0] > 10
    kinds = {c["spans"][0]["attrs"]["kind"] for c in calls}
    assert kinds == {"timer", "subscription", "service"}, kinds
    names = [c["spans"][0]["attrs"]["name"] for c in calls]
    assert names.count("timer0:10ms") == counts["loop"], (names.count("timer0:10ms"), counts)


def test_instrumented_rollouts_make_one_session(ros, tmp_path):
    """instrument(session=...): each rollout of a session opened without a
    scheduler (period_s) holds one instrumented run of the node."""
    counts = {"loop": 0, "house": 0, "msg": 0, "call": 0}
    node, feeder, loop = build(counts)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ex.add_node(feeder)
    args = looptime.add_arguments(__import__("argparse").ArgumentParser()).parse_args(["--control-timing"])
    with looptime.open_session(tmp_path / "runs", args, period_s=PERIOD_NS / 1e9, rollouts=2) as s:
        dirs = []
        for _ in range(2):
            timing = looptime.ros.instrument(node, loop=loop, session=s)
            spin(ex, 0.2)
            dirs.append(pathlib.Path(timing.finish()))
    session = json.loads((dirs[0].parent / "session.json").read_text())
    assert session["status"] == "complete" and [r["state"] for r in session["rollouts"]] == ["complete"] * 2
    for d in dirs:
        _, cycles = read_jsonl(d / "control_timing.jsonl")
        assert len(cycles) > 0


def test_a_multithreaded_executors_callbacks_land_on_its_threads_recorders(ros, tmp_path):
    """executor_threads=2 with a MultiThreadedExecutor of two threads: each
    callback is recorded on the recorder of the thread that ran it (bound
    at its first callback), and the two files together hold one span per
    callback the test counted."""
    from rclpy.executors import MultiThreadedExecutor

    counts = {"loop": 0, "house": 0, "msg": 0, "call": 0}
    node, feeder, loop = build(counts)
    timing = looptime.ros.instrument(node, runs_dir=tmp_path / "runs", loop=loop, executor_threads=2)
    ex = MultiThreadedExecutor(num_threads=2)
    ex.add_node(node)
    ex.add_node(feeder)
    spin(ex, 0.6)
    ex.shutdown()
    ep = pathlib.Path(timing.finish())
    spans = 0
    for name in ("executor-0", "executor-1"):
        path = ep / f"control_timing.{name}.jsonl"
        if path.exists():
            _, calls = read_jsonl(path)
            spans += len(calls)
    assert spans == timing.callbacks == counts["house"] + counts["msg"] + counts["call"], (spans, counts)
    _, cycles = read_jsonl(ep / "control_timing.jsonl")
    assert len(cycles) == counts["loop"]
