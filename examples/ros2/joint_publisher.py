"""A robot's joint-state publisher for looptime.ros's message age
(docs/ros2.md): sensor_msgs/JointState on TOPIC at RATE Hz for SECONDS,
each header stamped with the node's ROS clock just before its publish, on
an absolute-deadline grid. It waits (up to 20 s) for a subscriber first,
so the first message it sends is the first one a subscriber can receive.

    python examples/ros2/joint_publisher.py [--topic /joint_states] [--rate 500] [--seconds 2] [--log FILE]

With ``--log FILE`` it writes one line a message, "N STAMP_NS": N counts
its publish calls from 1, which is the DDS publication sequence number a
subscriber's MessageInfo gives (one publisher, one writer), and STAMP_NS
is the header's stamp. Needs rclpy and sensor_msgs (docs/ros2.md, Install).
"""

from __future__ import annotations

import argparse
import time

import rclpy
from rclpy.node import Node
from sensor_msgs.msg import JointState


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topic", default="/joint_states")
    p.add_argument("--rate", type=float, default=500.0, help="messages a second (default 500)")
    p.add_argument("--seconds", type=float, default=2.0, help="how long to publish (default 2)")
    p.add_argument("--log", help="write 'N STAMP_NS' per message to this file")
    args = p.parse_args()
    if not args.rate > 0 or not args.seconds > 0:
        p.error("--rate and --seconds must be positive")
    rclpy.init()
    node = Node("looptime_joint_publisher")
    pub = node.create_publisher(JointState, args.topic, 10)
    deadline = time.monotonic() + 20
    while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    if pub.get_subscription_count() == 0:
        raise SystemExit(f"joint_publisher: no subscriber to {args.topic} in 20 s")
    period, lines, n = 1.0 / args.rate, [], 0
    t = time.monotonic()
    end = t + args.seconds
    while t < end and rclpy.ok():  # SIGINT/SIGTERM shut the context down: stop
        msg = JointState(name=["j0"], position=[float(n)])
        msg.header.stamp = node.get_clock().now().to_msg()
        try:
            pub.publish(msg)
        except Exception:
            if rclpy.ok():
                raise
            break
        n += 1
        lines.append(f"{n} {msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec}")
        t += period
        time.sleep(max(0.0, t - time.monotonic()))
    time.sleep(0.2)  # the last messages' delivery before the writer goes
    if args.log:
        with open(args.log, "w") as f:
            f.write("\n".join(lines) + "\n")
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
