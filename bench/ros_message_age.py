"""The age of the messages a ROS 2 loop acts on, as looptime.ros records
it (docs/ros2.md, Message age). Run it in a venv with rclpy, sensor_msgs
and the looptime wheel (tests/ros2.sh makes two):

    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST python bench/ros_message_age.py [SECONDS] [STALL_MS]

examples/ros2/joint_publisher.py publishes JointState at 500 Hz in its own
process; an instrumented node takes it on a depth-1 subscription
(`sources=`, 20 ms staleness limit) and runs a 100 Hz STEADY_TIME loop
timer that publishes a command each cycle (`command=`), spun by a
SingleThreadedExecutor for SECONDS. Two runs: the loop as it is, then
with one stall of STALL_MS in its 100th cycle. Printed per run, from the
analyzer's report of the episode: uses, age at use and at the command
(p50, p99, max), stale uses, reused and skipped samples, the sequence
numbers the subscription never received (`seq_gaps`), and the DDS leg.
"""

from __future__ import annotations

import json
import os
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts", "lib"))
from target_dir import target_dir  # noqa: E402  (the scripts' one rule)

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
STALL_MS = float(sys.argv[2]) if len(sys.argv) > 2 else 100.0
ANALYZER = os.environ.get("LOOPTIME_ANALYZER", str(target_dir() / "debug" / "analyze_control_timing"))
PUBLISHER = os.path.join(HERE, "..", "examples", "ros2", "joint_publisher.py")
TOPIC = "/looptime_bench_joint_states"


def run(tmp, stall_ms):
    rclpy.init()
    pub_proc = subprocess.Popen([sys.executable, PUBLISHER, "--topic", TOPIC, "--rate", "500",
                                 "--seconds", str(SECONDS + 1.0)])
    node = Node("looptime_bench_age")
    cmd = node.create_publisher(Int64, "looptime_bench_cmd", 10)
    first = {}
    calls = [0]

    def on_joints(msg):
        first.setdefault("at", time.monotonic())

    def step():
        calls[0] += 1
        if calls[0] == 100 and stall_ms > 0:
            time.sleep(stall_ms / 1000)
        cmd.publish(Int64(data=calls[0]))

    node.create_subscription(JointState, TOPIC, on_joints, 1)
    loop = node.create_timer(0.01, step, clock=Clock(clock_type=ClockType.STEADY_TIME))
    timing = looptime.ros.instrument(node, runs_dir=tmp, loop=loop,
                                     sources={TOPIC: {"max_age_s": 0.02}}, command=cmd)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and ("at" not in first or time.monotonic() < first["at"] + SECONDS):
        ex.spin_once(timeout_sec=0.01)
    ep = timing.finish(status="complete")
    node.destroy_node()
    rclpy.shutdown()
    pub_proc.wait(timeout=30)
    out = subprocess.run([ANALYZER, "report", ep, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def ms(ns):
    return f"{ns / 1e6:.2f}"


def main():
    print("| run | uses | age at use p50 / p99 / max (ms) | at command p50 / p99 (ms) | stale | reused | skipped "
          "| never received | DDS leg mean / max (µs) |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, stall in (("as it is", 0.0), (f"one {STALL_MS:g} ms stall", STALL_MS)):
            r = run(os.path.join(tmp, name.replace(" ", "_")), stall)
            (src,) = r["data_age"]["sources"]
            (ph,) = src["phases"]
            a, c = ph["age_at_use"], ph["age_at_command"]
            (ex,) = [t for t in r["threads"] if t["thread"] == "executor"]
            (leg,) = ex["values"]
            print(f"| {name} | {ph['uses']} | {ms(a['p50_ns'])} / {ms(a['p99_ns'])} / {ms(a['max_ns'])} "
                  f"| {ms(c['p50_ns'])} / {ms(c['p99_ns'])} | {ph['stale']} | {ph['reused']} | {ph['skipped']} "
                  f"| {src['production']['seq_gaps']} | {leg['mean'] / 1e3:.0f} / {leg['max'] / 1e3:.0f} |")


if __name__ == "__main__":
    main()
