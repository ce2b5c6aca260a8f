"""What looptime.ros costs per callback, and a 1 kHz node's loop as the
report sees it (docs/ros2.md). Run it in a venv with rclpy and the looptime
wheel (tests/ros2.sh makes two):

    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST python bench/ros_callback.py [CALLS] [SECONDS]

1. The wrapper's cost: CALLS calls of a subscription callback wrapped by
   `instrument` (a span on the executor thread's recorder), and of one
   whose topic is a data-age source (its sample and DDS leg recorded too),
   against CALLS calls of the same callback unwrapped, interleaved in
   blocks of 1,000, medians of the per-call times of the blocks.
2. A node with a STEADY_TIME 1 kHz loop timer, spun by a
   SingleThreadedExecutor for SECONDS: loop Hz, deadline lag p50/p99 (the
   executor's delay from the expected call time to the Python callback),
   skipped periods, from the analyzer's report of the episode.
3. The executors' throughput: a 1 kHz publisher and a subscription, both
   spun by a SingleThreadedExecutor, then by a MultiThreadedExecutor of
   two threads, for SECONDS each: messages handled per second.
4. The rclpy logger's cost per call (medians of 300 calls, the process's
   stderr sent to /dev/null so that no terminal is timed): a warning, a
   throttled warning (throttle_duration_sec=1: suppressed after the first)
   and a debug call below the level threshold. Why looptime.ros_status
   logs from its own thread, once a period, never from the loop.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Int64

import looptime.ros

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "lib"))
from target_dir import target_dir  # noqa: E402  (the scripts' one rule)

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
ANALYZER = os.environ.get("LOOPTIME_ANALYZER", str(target_dir() / "debug" / "analyze_control_timing"))


def wrapper_cost(tmp):
    node = Node("looptime_bench_cost")
    sub = node.create_subscription(Int64, "bench_topic", lambda m: None, 10)
    src = node.create_subscription(JointState, "bench_joints", lambda m: None, 10)
    plain = sub.callback
    timer = node.create_timer(1.0, lambda: None, clock=Clock(clock_type=ClockType.STEADY_TIME))
    timing = looptime.ros.instrument(node, runs_dir=tmp, loop=timer, max_cycles=1000, sources=["bench_joints"])
    wrapped, as_source = sub.callback, src.callback
    msg, info = Int64(data=1), {}
    joints = JointState()
    joints.header.stamp = node.get_clock().now().to_msg()
    jinfo = {"publication_sequence_number": 1, "source_timestamp": 1, "received_timestamp": 2}
    per = {"unwrapped": [], "wrapped": [], "source": []}
    # As rclpy calls each: the wrapper asks for the MessageInfo too.
    calls = (("unwrapped", lambda: plain(msg)), ("wrapped", lambda: wrapped(msg, info)),
             ("source", lambda: as_source(joints, jinfo)))
    for _ in range(CALLS // 1000):
        for name, call in calls:
            t0 = time.perf_counter_ns()
            for _ in range(1000):
                call()
            per[name].append((time.perf_counter_ns() - t0) / 1000)
    timing.finish()
    node.destroy_node()
    return {k: statistics.median(v) for k, v in per.items()}


def loop_figures(tmp):
    node = Node("looptime_bench_loop")
    timer = node.create_timer(0.001, lambda: None, clock=Clock(clock_type=ClockType.STEADY_TIME))
    timing = looptime.ros.instrument(node, runs_dir=tmp, loop=timer)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        ex.spin_once(timeout_sec=0.01)
    ep = timing.finish()
    r = json.loads(subprocess.run([ANALYZER, "report", ep, "--json"], check=True,
                                  capture_output=True, text=True).stdout)
    (p,) = [p for p in r["phases"] if p["phase"] == "running"]
    skipped = sum(json.loads(line).get("skipped", 0)
                  for line in open(os.path.join(ep, "control_timing.jsonl")).read().splitlines()[1:])
    return p, skipped


def throughput(executor_cls, **kw):
    pub_node, sub_node = Node("looptime_bench_pub"), Node("looptime_bench_sub")
    got = [0]
    sub_node.create_subscription(Int64, "bench_rate", lambda m: got.__setitem__(0, got[0] + 1), 100)
    pub = pub_node.create_publisher(Int64, "bench_rate", 100)
    pub_node.create_timer(0.001, lambda: pub.publish(Int64(data=1)),
                          clock=Clock(clock_type=ClockType.STEADY_TIME))
    ex = executor_cls(**kw)
    ex.add_node(pub_node)
    ex.add_node(sub_node)
    # As a node runs it: spin() in its own thread, stopped after SECONDS.
    import threading
    t = threading.Thread(target=ex.spin, daemon=True)
    t.start()
    time.sleep(SECONDS)
    ex.shutdown()
    t.join(timeout=5)
    pub_node.destroy_node()
    sub_node.destroy_node()
    return got[0] / SECONDS


def logger_cost():
    node = Node("looptime_bench_logger")
    lg = node.get_logger()

    def timed(f):
        ts = []
        for _ in range(300):
            t0 = time.perf_counter_ns()
            f()
            ts.append(time.perf_counter_ns() - t0)
        return statistics.median(ts) / 1e3

    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        out = (timed(lambda: lg.warning("looptime bench")),
               timed(lambda: lg.warning("looptime bench", throttle_duration_sec=1.0)),
               timed(lambda: lg.debug("looptime bench")))
    finally:
        os.dup2(saved, 2)
        os.close(devnull)
        os.close(saved)
    node.destroy_node()
    return out


def main():
    rclpy.init()
    with tempfile.TemporaryDirectory() as tmp:
        cost = wrapper_cost(tmp)
        print(f"per call, median of {CALLS // 1000} blocks of 1,000: unwrapped {cost['unwrapped']:.0f} ns, "
              f"wrapped {cost['wrapped']:.0f} ns ({cost['wrapped'] / cost['unwrapped']:.1f}x; "
              f"+{cost['wrapped'] - cost['unwrapped']:.0f} ns a callback); as a data-age source "
              f"{cost['source']:.0f} ns (+{cost['source'] - cost['wrapped']:.0f} ns over wrapped)")
        p, skipped = loop_figures(tmp)
        lag = p.get("deadline_lag") or {}
        print(f"1 kHz STEADY_TIME loop timer, {SECONDS:g} s: {p['cycles']} cycles, loop {p['loop_hz']} Hz, "
              f"deadline lag p50 {lag.get('p50_ns', 0) / 1e3:.0f} us, p99 {lag.get('p99_ns', 0) / 1e3:.0f} us, "
              f"{skipped} periods skipped")
        from rclpy.executors import MultiThreadedExecutor
        single = throughput(SingleThreadedExecutor)
        multi = throughput(MultiThreadedExecutor, num_threads=2)
        print(f"1 kHz publisher: SingleThreadedExecutor handled {single:.0f} messages/s, "
              f"MultiThreadedExecutor (2 threads) {multi:.0f} messages/s")
        warn, throttled, debug = logger_cost()
        print(f"rclpy logger, median of 300 calls: warning {warn:.0f} us, throttled warning {throttled:.0f} us, "
              f"debug below the threshold {debug:.1f} us")
    rclpy.shutdown()


if __name__ == "__main__":
    main()
