"""What docs/ros2.md's Python fragments name and do not define, for the
docs runner's hidden preludes (scripts/docs_run.py, docs/docs-run.md): a
user's node, `MyController`, and a `spin` that returns when it is done.

`MyController` is a node as the fragments assume one: a `joint_states`
subscription (sensor_msgs/JointState, which has a Header, so it can be a
data-age source), a command publisher `cmd_pub`, and a `step` the loop's
timer calls, which publishes a command and plays the robot (a stamped
joint state on `joint_states`). After `STEPS` steps it ends the program
with `SystemExit(0)`, where a user would press Ctrl-C, so a fragment's
`rclpy.spin(node)` returns through its `finally`.
"""

import rclpy
from rclpy.node import Node
from sensor_msgs.msg import JointState


class MyController(Node):
    STEPS = 40

    def __init__(self) -> None:
        super().__init__("my_controller")
        self.steps = 0
        self.state = None
        self.create_subscription(JointState, "joint_states", self.on_state, 1)
        self.cmd_pub = self.create_publisher(JointState, "joint_command", 1)
        self.robot = self.create_publisher(JointState, "joint_states", 1)

    def on_state(self, msg: JointState) -> None:
        self.state = msg

    def step(self) -> None:
        self.steps += 1
        state = JointState()
        state.header.stamp = self.get_clock().now().to_msg()
        self.robot.publish(state)
        self.cmd_pub.publish(JointState())
        if self.steps >= self.STEPS:
            raise SystemExit(0)


def spin(node: Node) -> None:
    """`rclpy.spin(node)` until `node` ends the program's loop."""
    try:
        rclpy.spin(node)
    except SystemExit:
        pass
