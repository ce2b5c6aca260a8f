"""looptime.ros_status: a loop's live status on ``/diagnostics`` and its
aggregated warnings through the rclpy logger, from a maintenance thread
(docs/ros2.md, Status on /diagnostics).

    rec = looptime.Recorder(..., live_status=True)
    status = looptime.ros_status.publish_status(node, rec.status())
    ...
    status.stop()

(``looptime.ros.instrument(..., status=True)`` does both for an
instrumented node.) The counts come from the recorder's live status,
which the control thread keeps in atomics at each cycle's end: the loop
does no Python work for the status, and the publisher thread never makes
it wait. Each message is one consistent snapshot and says the cycle index
its counts are as of. Needs rclpy and diagnostic_msgs.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

try:
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
except ImportError as e:  # pragma: no cover - the message is the test
    raise ImportError(
        "looptime.ros_status needs diagnostic_msgs: pip install ros-kilted-diagnostic-msgs "
        "(or ros-jazzy-diagnostic-msgs; docs/ros2.md)"
    ) from e

import looptime

__all__ = ["StatusPublisher", "publish_status", "DEFAULT_WARN_SHARE", "DEFAULT_ERROR_SHARE"]

#: A window whose share of missed cycles reaches this is WARN (0.1 %).
DEFAULT_WARN_SHARE = 0.001
#: ... and this, ERROR (1 %): the summary card's budget thresholds.
DEFAULT_ERROR_SHARE = 0.01
TOPIC = "/diagnostics"


def _ms(ns: Optional[int]) -> str:
    return "" if ns is None else f"{ns / 1e6:.3f}"


class StatusPublisher:
    """A thread that publishes the status every ``period_s`` and, with
    ``log=True``, at most one aggregated warning per period through the
    node's logger (one call site per severity)."""

    def __init__(self, node: Any, status: Any, name: str, period_s: float, warn_share: float,
                 error_share: float, log: bool, hardware_id: str) -> None:
        if not period_s > 0:
            raise ValueError(f"period_s must be positive, not {period_s}")
        if not 0 <= warn_share <= error_share <= 1:
            raise ValueError(f"need 0 <= warn_share <= error_share <= 1, not {warn_share}, {error_share}")
        self.node, self._status, self.name = node, status, name
        self.period_s, self.warn_share, self.error_share = period_s, warn_share, error_share
        self._log, self._hardware_id = log, hardware_id
        self._pub = node.create_publisher(DiagnosticArray, TOPIC, 10)
        self._stop = threading.Event()
        self._prev: Optional[Dict[str, Any]] = None
        #: Messages published, and warnings logged, by level name.
        self.published = 0
        self.logged: Dict[str, int] = {"WARN": 0, "ERROR": 0}
        self._thread = threading.Thread(target=self._run, name="looptime-status", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.publish_once()

    def level(self, snap: Dict[str, Any]) -> tuple:
        """(level, message) for `snap` against the previous snapshot: the
        window's share of missed cycles against the thresholds; STALE when
        no cycle ended in the window."""
        prev = self._prev or {"cycles": 0, "misses": 0}
        cycles, misses = snap["cycles"] - prev["cycles"], snap["misses"] - prev["misses"]
        window = f"in the last {self.period_s:g} s"
        if cycles == 0:
            return DiagnosticStatus.STALE, f"no cycle ended {window}"
        share = misses / cycles
        text = f"{misses} of {cycles} cycles missed {window} ({share * 100:.2f} %)"
        last = snap["last_miss"]
        if misses and last is not None:
            text += f"; last: {last['kind']} by {_ms(last['by_ns'])} ms at cycle {last['index']}"
        if misses and share >= self.error_share:
            return DiagnosticStatus.ERROR, text
        if misses and share >= self.warn_share:
            return DiagnosticStatus.WARN, text
        return DiagnosticStatus.OK, text

    def publish_once(self) -> Dict[str, Any]:
        """Take one snapshot, publish it, log it when WARN or ERROR; returns
        the snapshot (with the level and message it was published with)."""
        snap = self._status.snapshot()
        level, text = self.level(snap)
        self._prev = snap
        msg = DiagnosticArray()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.status = [DiagnosticStatus(level=level, name=self.name, message=text,
                                       hardware_id=self._hardware_id, values=_key_values(snap))]
        self._pub.publish(msg)
        self.published += 1
        if self._log and level == DiagnosticStatus.ERROR:
            self.logged["ERROR"] += 1
            self.node.get_logger().error(f"looptime: {self.name}: {text}")
        elif self._log and level == DiagnosticStatus.WARN:
            self.logged["WARN"] += 1
            self.node.get_logger().warning(f"looptime: {self.name}: {text}")
        return dict(snap, level=int.from_bytes(level, "little") if isinstance(level, bytes) else level,
                    message=text)

    def stop(self) -> None:
        """Stop the thread (the last period's status is not published)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self.node.destroy_publisher(self._pub)


def _key_values(s: Dict[str, Any]) -> List[Any]:
    """The snapshot as KeyValues (docs/ros2.md lists the keys)."""
    last = s["last_miss"] or {}
    pairs = [
        ("as_of_cycle", s["index"]),
        ("cycles", s["cycles"]),
        ("overruns", s["overruns"]),
        ("skipped_cycles", s["skipped"]),
        ("late_starts", s["late_starts"]),
        ("completion_misses", s["completion_misses"]),
        ("budget_overruns", s["budget_overruns"]),
        ("misses", s["misses"]),
        ("last_miss_cycle", last.get("index")),
        ("last_miss_kind", last.get("kind")),
        ("last_miss_by_ms", _ms(last.get("by_ns"))),
        ("last_miss_ago_s", f"{(looptime.monotonic_ns() - last['start_ns']) / 1e9:.3f}" if last else None),
        ("period_p99_ms", _ms(s["period_p99_ns"])),
    ]
    return [KeyValue(key=k, value="" if v is None else str(v)) for k, v in pairs]


def publish_status(node: Any, status: Any, name: str = "looptime: control loop", period_s: float = 1.0,
                   warn_share: float = DEFAULT_WARN_SHARE, error_share: float = DEFAULT_ERROR_SHARE,
                   log: bool = True, hardware_id: str = "") -> StatusPublisher:
    """Publish `status` (``rec.status()``, or a recorder built with
    ``live_status=True``) on ``/diagnostics`` every ``period_s`` from a
    thread of its own; with ``log``, WARN and ERROR windows are logged
    through the node's logger, at most once a period. ``stop()`` ends it."""
    if hasattr(status, "status") and not hasattr(status, "snapshot"):
        status = status.status()
    return StatusPublisher(node, status, name, period_s, warn_share, error_share, log, hardware_id)
