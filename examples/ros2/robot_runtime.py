#!/usr/bin/env python3
"""A robot runtime node that keeps its control loop off the ROS timer
(docs/ros2.md, A robot runtime), recorded by looptime.

The ROS side only takes input snapshots and publishes motor frames: a
subscription stores the newest JointState of a simulated robot (a 500 Hz
publisher started as its own process, examples/ros2/joint_publisher.py),
and the command goes out as a JointState each cycle. The control runs on
a ``looptime.Scheduler`` thread on an absolute timeline (50 Hz by default),
not a ROS timer; a 5 Hz maintenance thread does the rest. With ``--pace
ros-timer`` the same control is called from a ROS timer instead, for the
A/B (bench/ros2_pacing.sh).

    python examples/ros2/robot_runtime.py --control-timing --seconds 5 --runs-dir runs
    analyze_control_timing report runs/latest

Each rollout is one episode (``--episodes N``: one session of N rollouts
for ``analyze_control_timing compare``), with the loop, the executor
thread's callbacks and the joint state's age at use and at the command
(``looptime.ros``, ``loop=None`` with the scheduler). ``--status``
publishes the loop's status on /diagnostics once a second. SIGINT or
SIGTERM ends the rollout at the next cycle; its episode is then finished
as aborted and the exit code is 130. Needs rclpy, sensor_msgs and, with
``--status``, diagnostic_msgs (docs/ros2.md, Install).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, List, Optional

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState

import looptime
import looptime.ros

HERE = os.path.dirname(os.path.abspath(__file__))
CONTROL = "control"


def busy_us(us: float) -> None:
    """Stand-in for the control framework's compute: spin ``us`` µs."""
    until = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < until:
        pass


class Runtime(Node):
    """The platform adapter: input snapshots in, motor frames out."""

    def __init__(self, topic: str, work_us: float) -> None:
        super().__init__("looptime_robot_runtime")
        self.topic, self.work_us = topic, work_us
        self.latest: Optional[JointState] = None
        self.create_subscription(JointState, topic, self.on_state, 1)
        self.cmd = self.create_publisher(JointState, "/looptime_robot_command", 10)
        self.frames = 0

    def on_state(self, msg: JointState) -> None:
        self.latest = msg  # the callback only stores the newest state

    def control(self, timing: Any) -> None:
        """One control step: read the newest state (a use of the source),
        compute, publish the motor frame (the command span)."""
        timing.use(self.topic)
        state = self.latest
        busy_us(self.work_us)
        cmd = JointState(name=["j0"])
        if state is not None and state.position:
            cmd.effort = [-2.0 * state.position[0]]
        self.cmd.publish(cmd)
        self.frames += 1


def maintenance(halt: threading.Event, ticks: List[int]) -> None:
    """The 5 Hz maintenance thread: a little Python work that holds the
    GIL (logs, health checks, parameter reloads in a real runtime)."""
    while not halt.wait(0.2):
        busy_us(1000)
        ticks[0] += 1


def parse(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=50.0, help="control rate, Hz (default 50)")
    p.add_argument("--seconds", type=float, default=5.0, help="each rollout's length (default 5)")
    p.add_argument("--episodes", type=int, default=1, help="rollouts, one session (default 1)")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("--pace", choices=["scheduler", "ros-timer"], default="scheduler",
                   help="what calls the control: a looptime.Scheduler thread (default) or a ROS timer")
    p.add_argument("--executor", choices=["single", "events"], default="single",
                   help="rclpy's SingleThreadedExecutor (default) or its EventsExecutor")
    p.add_argument("--switch-interval", type=float, default=None,
                   help="sys.setswitchinterval, s (e.g. 0.001; default: Python's own, 0.005)")
    p.add_argument("--work-us", type=float, default=2000.0, help="the control's compute per cycle, µs")
    p.add_argument("--joint-rate", type=float, default=500.0, help="the simulated robot's state rate, Hz")
    p.add_argument("--joint-topic", default="/looptime_joint_states")
    p.add_argument("--robot", choices=["spawn", "none"], default="spawn",
                   help="start the simulated robot (default), or use a publisher already running")
    p.add_argument("--status", action="store_true", help="publish the loop's status on /diagnostics")
    p.add_argument("--compute-budget-ms", type=float, default=None,
                   help="declare each cycle's compute budget (the status and the report count overruns)")
    p.add_argument("--deadline-tolerance-ms", type=float, default=None,
                   help="declare the deadline tolerance (late starts and completion misses against it)")
    looptime.add_arguments(p)
    args = p.parse_args(argv)
    if not 0 < args.rate <= 1000 or not args.seconds > 0 or args.episodes < 1:
        p.error("--rate must be in (0, 1000], --seconds positive, --episodes at least 1")
    if args.switch_interval is not None and not 0 < args.switch_interval <= 1:
        p.error("--switch-interval must be in (0, 1] s")
    for flag in ("compute_budget_ms", "deadline_tolerance_ms"):
        # 0 < x <= 10 s, checked before anything is opened (inf, nan and
        # 2e13 would pass "positive" and fail after the rollout opened).
        v = getattr(args, flag)
        if v is not None and not 0 < v <= 10_000:
            p.error(f"--{flag.replace('_', '-')} must be more than 0 and at most 10000 ms (10 s), not {v}")
    return args


def make_executor(kind: str, node: Node) -> Any:
    if kind == "events":
        from rclpy.experimental import EventsExecutor
        ex = EventsExecutor()
    else:
        ex = SingleThreadedExecutor()
    ex.add_node(node)
    return ex


def rollout(args: argparse.Namespace, session: Any, node: Runtime, ex: Any, stop: dict) -> bool:
    """One episode; True when it ran to its end."""
    period_s = 1.0 / args.rate
    planned = int(round(args.seconds * args.rate))
    ns = lambda ms: None if ms is None else int(round(ms * 1e6))  # noqa: E731
    budget = {"compute_budget_ns": ns(args.compute_budget_ms),
              "deadline_tolerance_ns": ns(args.deadline_tolerance_ms)}
    sources = {node.topic: {"use": "call", "max_age_s": 0.02}}
    settings = {"pace": args.pace, "executor": args.executor, "rate_hz": args.rate,
                "switch_interval_s": sys.getswitchinterval(), "work_us": args.work_us,
                "joint_rate_hz": args.joint_rate}
    if args.pace == "ros-timer":
        loop = node.create_timer(period_s, lambda: node.control(timing),
                                 clock=Clock(clock_type=ClockType.STEADY_TIME))
        timing = looptime.ros.instrument(node, loop=loop, session=session, sources=sources, command=node.cmd,
                                         status=args.status, max_cycles=args.timing_max_cycles,
                                         settings=settings, message_info=args.executor != "events", **budget)
        end = time.monotonic() + args.seconds
        while time.monotonic() < end and not stop["requested"]:
            ex.spin_once(timeout_sec=0.01)
        # rcl skipping periods under load is what the run measures, not an end.
        complete = not stop["requested"]
        timing.finish(status="complete" if complete else "aborted")
        node.destroy_timer(loop)
        return complete
    sched = looptime.Scheduler(period_s)
    # What instrument(loop=timer) records for the ROS timer, for the same
    # loop here (the scheduler's clock is CLOCK_MONOTONIC, ROS's
    # STEADY_TIME): the A/B's manifests then differ in `pace` alone.
    settings.update(ros_loop_period_ns=sched.nominal_period_ns, ros_loop_clock="STEADY_TIME",
                    ros_node=node.get_fully_qualified_name(), ros_sources=node.topic,
                    ros_stamp_clock="system")
    episode = session.rollout(settings)
    rec = looptime.Recorder(stages=[CONTROL, looptime.ros.COMMAND_STAGE], phases=["running"],
                            episode_dir=episode.dir, nominal_period_ns=sched.nominal_period_ns,
                            max_cycles=args.timing_max_cycles, live_status=args.status, **budget,
                            **looptime.ros.spec(node, sources=sources, command=node.cmd))
    # rclpy's EventsExecutor fails on a callback that asks for the
    # MessageInfo: without it, samples are numbered as received.
    timing = looptime.ros.instrument(node, recorder=rec, sources=sources, command=node.cmd,
                                     status=args.status, message_info=args.executor != "events")
    done = threading.Event()
    cycles = [0]

    def control_thread() -> None:
        for w in episode.setup_control_thread():
            print(f"[warn] {w}", file=sys.stderr)
        while cycles[0] < planned and not stop["requested"]:
            tick = sched.wait(rec)
            with rec.cycle("running", tick):
                with rec.span(CONTROL):
                    node.control(timing)
            cycles[0] += 1
        done.set()

    worker = threading.Thread(target=control_thread, name="control")
    worker.start()
    while not done.is_set():
        ex.spin_once(timeout_sec=0.01)
    worker.join()
    complete = cycles[0] == planned and not stop["requested"]
    timing.finish(status="complete" if complete else "aborted")
    rec.finish(episode.dir, status="complete" if complete else "aborted")
    episode.finish(rec, sched, complete=complete, planned_cycles=planned)
    return complete


def main(argv: List[str]) -> int:
    args = parse(argv)
    if not args.control_timing:
        print("[run] without --control-timing nothing is recorded; add it to write episodes", file=sys.stderr)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    stop = {"requested": False}
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__("requested", True))
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("requested", True))
    rclpy.init()
    robot = None
    if args.robot == "spawn":
        total = args.episodes * (args.seconds + 1.0) + 5.0
        robot = subprocess.Popen([sys.executable, os.path.join(HERE, "joint_publisher.py"),
                                  "--topic", args.joint_topic, "--rate", str(args.joint_rate),
                                  "--seconds", str(total)])
    node = Runtime(args.joint_topic, args.work_us)
    ex = make_executor(args.executor, node)
    # The robot's first state, so that every rollout starts with one.
    deadline = time.monotonic() + 20
    while node.latest is None and time.monotonic() < deadline and not stop["requested"]:
        ex.spin_once(timeout_sec=0.05)
    if node.latest is None:
        print(f"[run] no joint state on {args.joint_topic} in 20 s", file=sys.stderr)
        return 2
    halt, ticks = threading.Event(), [0]
    helper = threading.Thread(target=maintenance, args=(halt, ticks), name="maintenance", daemon=True)
    helper.start()
    complete = True
    with looptime.open_session(args.runs_dir, args, rollouts=args.episodes, period_s=1.0 / args.rate) as session:
        for k in range(args.episodes):
            if stop["requested"]:
                break
            complete = rollout(args, session, node, ex, stop) and complete
            print(f"[run] rollout {k}: {args.pace} pacing, {node.frames} frames so far", flush=True)
        print(f"[run] wrote {session.dir}", flush=True)
    halt.set()
    helper.join()
    node.destroy_node()
    if robot is not None:
        robot.terminate()
        robot.wait(timeout=10)
    rclpy.shutdown()
    return 0 if complete and not stop["requested"] else 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
