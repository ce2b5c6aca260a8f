"""The parts of looptime.ros that make topics data-age sources and a
publisher the loop's command (docs/ros2.md, Message age): which
subscriptions are sources, their stamps, the clock offset they are moved
by, and the command publisher. Imported by ``looptime.ros``."""

from __future__ import annotations

import weakref
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import looptime

def _absolute(node: Any, name: str) -> str:
    """A topic or service name as an absolute one (rclpy gives a relative
    service name on Jazzy and the resolved one on Kilted)."""
    if name.startswith("/"):
        return name
    return node.get_namespace().rstrip("/") + "/" + name


Sources = Union[None, bool, Sequence[str], Mapping[str, Mapping[str, Any]]]


class _Source:
    """A topic declared as a data-age source: its settings and its newest
    received sample ``(seq, stamp_ns)``, replaced whole (one store) by the
    subscription callback and read by the loop."""

    def __init__(self, name: str, max_age_s: Optional[float], use: str) -> None:
        if use not in ("start", "call"):
            raise ValueError(f"source {name}: use must be 'start' or 'call', not {use!r}")
        self.name, self.max_age_s, self.use = name, max_age_s, use
        self.value = f"dds_leg_ns.{name}"
        self.latest: Optional[tuple] = None
        self.loop_id = -1
        self.received = 0
        self.unstamped = 0
        self.no_seq = False


def _stamped(msg_type: Any) -> bool:
    """Whether `msg_type` has a ``std_msgs/Header`` or is one."""
    if getattr(msg_type, "__module__", "").startswith("std_msgs.msg") and msg_type.__name__ == "Header":
        return True
    fields = getattr(msg_type, "get_fields_and_field_types", lambda: {})()
    return fields.get("header") == "std_msgs/Header"


def _stamp_ns(msg: Any) -> int:
    h = getattr(msg, "header", msg)
    return h.stamp.sec * 1_000_000_000 + h.stamp.nanosec


def _declared_sources(node: Any, sources: Sources) -> Dict[str, _Source]:
    """`sources` as absolute topic names with their settings, each checked
    against the node's subscriptions."""
    subs = {_absolute(node, s.topic_name): s for s in node.subscriptions}
    if sources is None or sources is False:
        return {}
    if sources is True:
        return {n: _Source(n, None, "start") for n, s in subs.items() if _stamped(s.msg_type)}
    items = sources.items() if isinstance(sources, Mapping) else ((n, {}) for n in sources)
    out = {}
    for given, settings in items:
        name = _absolute(node, given)
        sub = subs.get(name)
        if sub is None:
            raise ValueError(f"source {given}: the node has no subscription to {name}; "
                             f"its subscriptions: {', '.join(sorted(subs)) or 'none'} "
                             "(call instrument after creating them)")
        if not _stamped(sub.msg_type):
            raise ValueError(f"source {name}: its message type {sub.msg_type.__name__} has no "
                             "std_msgs/Header, so its messages carry no stamp to age")
        unknown = set(settings) - {"max_age_s", "use"}
        if unknown:
            raise ValueError(f"source {name}: unknown settings {sorted(unknown)} (max_age_s, use)")
        out[name] = _Source(name, settings.get("max_age_s"), settings.get("use", "start"))
    return out


def _clock_offset(clock: Any) -> int:
    """`clock` − the host's monotonic clock, ns: the tightest of five
    bracketed reads, the monotonic time taken at the bracket's middle."""
    best = None
    for _ in range(5):
        m0 = looptime.monotonic_ns()
        c = clock.now().nanoseconds
        m1 = looptime.monotonic_ns()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, c - (m0 + m1) // 2)
    return best[1]


#: The stamp offset ``spec`` read for a node, for ``instrument`` to use
#: the same figure as the header's metadata says.
_STAMP_OFFSETS: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()


def _sim_time(node: Any) -> bool:
    return bool(node.get_parameter("use_sim_time").value)


def _command_publisher(node: Any, command: Any) -> Any:
    if command is None or not isinstance(command, str):
        return command
    name = _absolute(node, command)
    pubs = [p for p in node.publishers if _absolute(node, p.topic_name) == name]
    if len(pubs) != 1:
        raise ValueError(f"command {command}: the node has {len(pubs)} publishers of {name}; "
                         "give the publisher itself (command=pub)")
    return pubs[0]
