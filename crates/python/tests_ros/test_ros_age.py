"""Message age in looptime.ros against a real rclpy (tests/ros2.sh): a
publisher in its own process sends JointState at 500 Hz, stamping each
header and logging (its publication count, the stamp) to a file; the
instrumented node takes it on a depth-1 subscription while its 100 Hz loop
stalls once for 100 ms, so the subscription loses messages. Asserted:
what the publisher's own log and the evidence say of the same messages
(stamps moved by the offset the manifest records, sequence numbers, the
gap the stall caused), the DDS-leg values present, and the age figures
present for the loop's uses and its command; never a latency bound."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import threading
import time

import pytest
import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Int64

import looptime
import looptime.ros

from test_ros import ANALYZER, read_jsonl

TOPIC = "/looptime_age_joint_states"

# The publisher process (examples/ros2/joint_publisher.py): it waits for
# the subscriber, then publishes at 500 Hz, logging "N stamp_ns" per
# message; Fast DDS numbers a writer's samples 1, 2, ... in publish order,
# so N is the publication sequence number the subscriber sees.
PUBLISHER = pathlib.Path(__file__).resolve().parents[3] / "examples" / "ros2" / "joint_publisher.py"


@pytest.fixture()
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


def start_publisher(tmp_path, seconds):
    log = tmp_path / "published.txt"
    proc = subprocess.Popen([sys.executable, str(PUBLISHER), "--topic", TOPIC, "--rate", "500",
                             "--seconds", str(seconds), "--log", str(log)])
    return proc, log


def published(log):
    """The publisher's own log: {sequence number: stamp_ns}."""
    return {int(a): int(b) for a, b in (line.split() for line in log.read_text().splitlines())}


def analyze(ep):
    out = subprocess.run([ANALYZER, "report", str(ep), "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def samples(cycles, produced):
    return [(x["seq"], x["stamp_ns"], x["at_ns"]) for c in cycles for x in c.get("samples", [])
            if bool(x.get("produced")) == produced]


def test_a_stalled_loop_shows_the_messages_its_subscription_lost(ros, tmp_path):
    proc, log = start_publisher(tmp_path, 2.4)
    node = Node("looptime_age_node")
    steady = Clock(clock_type=ClockType.STEADY_TIME)
    got = {"msg": 0, "loop": 0, "stalled": 0}
    cmd = node.create_publisher(Int64, "looptime_age_cmd", 10)

    def on_joints(msg):
        got["msg"] += 1

    def loop_cb():
        got["loop"] += 1
        # Once, while the publisher is sending (50 of its 1,200 messages in:
        # not at a fixed cycle, which a slow start on a loaded host put
        # after the publisher's last message): 50 messages arrive during
        # the stall; depth 1 keeps the newest.
        if not got["stalled"] and got["msg"] >= 50:
            got["stalled"] = got["loop"]
            time.sleep(0.1)
        cmd.publish(Int64(data=got["loop"]))

    node.create_subscription(JointState, TOPIC, on_joints, 1)
    loop = node.create_timer(0.01, loop_cb, clock=steady)
    timing = looptime.ros.instrument(node, runs_dir=tmp_path / "runs", loop=loop,
                                     sources={TOPIC: {"max_age_s": 0.05}}, command=cmd)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    try:
        deadline = time.monotonic() + 25
        while proc.poll() is None and time.monotonic() < deadline:
            ex.spin_once(timeout_sec=0.01)
    finally:
        ep = pathlib.Path(timing.finish(status="complete"))
        proc.wait(timeout=10)
    assert proc.returncode == 0
    sent = published(log)
    assert got["msg"] > 100 and got["loop"] > 60 and got["stalled"], got

    m = json.loads((ep / "manifest.json").read_text())
    offset = m["config"]["program"]["ros_stamp_offset_ns"]
    assert m["config"]["program"]["ros_stamp_clock"] == "system"
    header, _ = read_jsonl(ep / "control_timing.jsonl")
    assert header["metadata"]["ros_stamp_offset_ns"] == str(offset)

    # Every received message: its seq and stamp as the publisher sent them,
    # the stamp moved onto the host's monotonic clock by the offset.
    _, calls = read_jsonl(ep / "control_timing.executor.jsonl")
    received = samples(calls, produced=True)
    assert len(received) == got["msg"]
    for seq, stamp, _ in received:
        assert sent[seq] - offset == stamp, (seq, sent[seq], offset, stamp)
    # The stall: the subscription lost messages the publisher sent.
    seqs = [s for s, _, _ in received]
    lost = [s for s in range(seqs[0], seqs[-1] + 1) if s not in set(seqs)]
    assert lost and all(s in sent for s in lost), lost
    gaps = sum(b - a - 1 for a, b in zip(seqs, seqs[1:]) if b > a)
    assert gaps == len(lost)

    r = analyze(ep)
    (src,) = r["data_age"]["sources"]
    assert src["source"] == TOPIC and src.get("not_comparable") is None, src
    assert src["production"]["produced"] == got["msg"]
    assert src["production"]["seq_gaps"] == gaps
    (ph,) = src["phases"]
    # The loop used the newest received message at each cycle's start
    # (every cycle after the first message), and so skipped at least the
    # messages its subscription lost.
    _, cycles = read_jsonl(ep / "control_timing.jsonl")
    uses = samples(cycles, produced=False)
    assert ph["uses"] == len(uses) > 60
    assert ph["skipped"] >= gaps >= 1
    assert ph["age_at_use"]["count"] == len(uses)
    assert ph["age_at_command"]["count"] > 0 and "stale" in ph
    # Each cycle's command span is its publish call, inside the loop span.
    assert all([s["stage"] for s in c["spans"]] == ["loop", "command"] for c in cycles), cycles[0]
    # The DDS leg, one value per received message.
    (ex_report,) = [t for t in r["threads"] if t["thread"] == "executor"]
    (leg,) = ex_report["values"]
    assert leg["name"] == f"dds_leg_ns.{TOPIC}" and leg["count"] == got["msg"], leg
    assert cmd.publish.__func__ is type(cmd).publish  # put back by finish


def test_the_programs_loop_uses_a_topic_where_it_says(ros, tmp_path):
    """loop=None with use="call": the program's own thread records its
    cycles and calls timing.use() where it reads the message."""
    proc, log = start_publisher(tmp_path, 0.8)
    node = Node("looptime_age_call_node")
    node.create_subscription(JointState, TOPIC, lambda msg: None, 1)
    cmd = node.create_publisher(Int64, "looptime_age_call_cmd", 10)
    sources = {TOPIC: {"use": "call"}}
    episode = tmp_path / "ep"
    episode.mkdir()
    rec = looptime.Recorder(stages=["control", looptime.ros.COMMAND_STAGE], phases=["running"],
                            episode_dir=episode, **looptime.ros.spec(node, sources=sources, command=cmd))
    timing = looptime.ros.instrument(node, recorder=rec, sources=sources, command=cmd)
    used = []
    stop = threading.Event()

    def control():
        while not stop.is_set():
            with rec.cycle("running"):
                with rec.span("control"):
                    time.sleep(0.002)
                    seq = timing.use(TOPIC)
                    if seq is not None:
                        used.append(seq)
                    cmd.publish(Int64(data=len(used)))
            time.sleep(0.008)

    worker = threading.Thread(target=control)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    worker.start()
    try:
        deadline = time.monotonic() + 25
        while proc.poll() is None and time.monotonic() < deadline:
            ex.spin_once(timeout_sec=0.01)
    finally:
        stop.set()
        worker.join()
        timing.finish()
        rec.finish(episode)
        proc.wait(timeout=10)
    sent = published(log)
    assert len(used) > 10
    _, cycles = read_jsonl(episode / "control_timing.jsonl")
    uses = samples(cycles, produced=False)
    # One use per call that found a message, with the stamp it was sent with.
    assert [s for s, _, _ in uses] == used
    offset = int(rec_metadata(episode)["ros_stamp_offset_ns"])
    assert all(sent[s] - offset == stamp for s, stamp, _ in uses)
    (src,) = analyze(episode)["data_age"]["sources"]
    (ph,) = src["phases"]
    assert ph["age_at_use"]["count"] == len(used)
    # The command went out after the use in every such cycle.
    assert ph["age_at_command"]["count"] == len(used)
    assert "stale" not in ph or ph["stale"] is None  # no max_age_s declared


def rec_metadata(episode):
    header, _ = read_jsonl(episode / "control_timing.jsonl")
    return header["metadata"]


def test_a_source_must_be_a_stamped_subscription(ros):
    node = Node("looptime_age_errors")
    node.create_subscription(Int64, "looptime_age_unstamped", lambda m: None, 1)
    node.create_subscription(JointState, TOPIC, lambda m: None, 1)
    loop = node.create_timer(0.01, lambda: None)
    with pytest.raises(ValueError, match="no subscription to /nope; its subscriptions: "):
        looptime.ros.instrument(node, loop=loop, sources=["nope"])
    with pytest.raises(ValueError, match="Int64 has no std_msgs/Header"):
        looptime.ros.instrument(node, loop=loop, sources=["looptime_age_unstamped"])
    with pytest.raises(ValueError, match="use must be 'start' or 'call'"):
        looptime.ros.instrument(node, loop=loop, sources={TOPIC: {"use": "later"}})
    # sources=True: every subscription with a Header, and only those.
    assert list(looptime.ros.spec(node, sources=True)["sources"]) == [TOPIC]
    # The program's recorder must declare the sources (spec does).
    rec = looptime.Recorder(stages=["control"], **looptime.ros.spec(node))
    with pytest.raises(ValueError, match="does not declare"):
        looptime.ros.instrument(node, recorder=rec, sources=[TOPIC])
