"""The loop's live status on /diagnostics and its warnings through the
rclpy logger (tests/ros2.sh): a 100 Hz loop timer that stalls for 55 ms
every 40th call, instrumented with status=True. Asserted: every
diagnostics message's counts equal the evidence's up to the cycle index
it states; the stalls' windows are not OK; the warnings in /rosout are
at most one a second, and from the status thread, never one per cycle."""

from __future__ import annotations

import time

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.msg import Log
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

import looptime.ros

from test_ros import read_jsonl


@pytest.fixture()
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


def level(s):
    return s.level[0] if isinstance(s.level, bytes) else s.level


def test_each_status_message_is_the_evidence_up_to_its_cycle(ros, tmp_path):
    node, listener = Node("looptime_status_node"), Node("looptime_status_listener")
    calls = [0]

    def step():
        calls[0] += 1
        if calls[0] % 40 == 0:
            time.sleep(0.055)

    loop = node.create_timer(0.01, step, clock=Clock(clock_type=ClockType.STEADY_TIME))
    diags, logs = [], []
    listener.create_subscription(DiagnosticArray, "/diagnostics", diags.append, 50)
    listener.create_subscription(
        Log, "/rosout", lambda m: logs.append(m) if m.name == "looptime_status_node" else None, 100)
    timing = looptime.ros.instrument(node, runs_dir=tmp_path / "runs", loop=loop, status=True)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    ex.add_node(listener)
    end = time.monotonic() + 3.6
    while time.monotonic() < end:
        ex.spin_once(timeout_sec=0.01)
    published, logged = timing.status.published, dict(timing.status.logged)
    ep = timing.finish(status="complete")
    end = time.monotonic() + 0.5  # the last messages' delivery
    while time.monotonic() < end:
        ex.spin_once(timeout_sec=0.01)

    _, cycles = read_jsonl(f"{ep}/control_timing.jsonl")
    assert published >= 3 and len(diags) == published, (published, len(diags))
    statuses = [d.status[0] for d in diags]
    for s in statuses:
        kv = {v.key: v.value for v in s.values}
        assert s.name == "looptime: control loop"
        i = int(kv["as_of_cycle"])
        upto = cycles[: i + 1]
        assert int(kv["cycles"]) == len(upto) == i + 1
        assert int(kv["overruns"]) == sum(bool(c["overdue"]) for c in upto)
        assert int(kv["skipped_cycles"]) == sum(c["skipped"] for c in upto)
        assert float(kv["period_p99_ms"]) > 0
    # A stall every 40 cycles skips about 5 periods: every window with
    # cycles in it holds one, at least 1 % of its cycles: ERROR.
    assert any(level(s) == level(DiagnosticStatus(level=DiagnosticStatus.ERROR)) for s in statuses)
    # The warnings: one per non-OK status message at most, from the status
    # thread, a period apart; never one per cycle.
    assert 1 <= len(logs) == logged["WARN"] + logged["ERROR"] <= published, (len(logs), logged)
    assert all(m.msg.startswith("looptime: looptime: control loop: ") for m in logs)
    stamps = [m.stamp.sec + m.stamp.nanosec / 1e9 for m in logs]
    assert all(b - a >= 0.9 for a, b in zip(stamps, stamps[1:])), stamps
    assert all(m.function == "publish_once" for m in logs), {m.function for m in logs}
