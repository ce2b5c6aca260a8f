"""looptime.ros: every rclpy callback of a node on the record, and its loop
timer against its own grid (docs/ros2.md).

    timing = looptime.ros.instrument(node, runs_dir="runs", loop=timer)
    rclpy.spin(node)                      # or an executor of your own
    path = timing.finish(status="complete")

With ``loop=timer``, each call of that timer is a cycle whose target is the
timer's expected call time (rclpy's ``TimerInfo`` on Kilted; on Jazzy,
derived from the timer's next call on its grid), and the periods rcl
skipped are skipped cycles. Every other timer, subscription and service
callback is a span of the ``callback`` stage, with its kind and name as
attributes, on a recorder per executor thread. With ``loop=None`` the
program records its own loop on a ``looptime.Recorder`` built with
``**looptime.ros.spec(node)`` merged into its settings, and ``instrument``
records the node's callbacks into the same episode.

With ``sources=[topic, ...]`` (or ``True``: every subscription whose
message has a ``std_msgs/Header``) each received message of those topics
is a data-age sample: its ``header.stamp`` moved onto the host's
monotonic clock, its DDS publication sequence number as its ``seq`` and
its DDS leg (received − source timestamp) as the value
``dds_leg_ns.TOPIC``; each loop cycle uses the newest sample of each
source at its start (or where the program calls ``timing.use(topic)``),
and ``command=publisher`` makes that publisher's ``publish`` calls inside
the loop its command spans (docs/ros2.md, Message age).

Call ``instrument`` after the node's timers, subscriptions and services
exist: a callback created later is recorded under the name ``other``.
This module needs rclpy, which the looptime wheel does not install.
"""

from __future__ import annotations

import argparse
import inspect
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional

try:
    import rclpy  # noqa: F401
    from rclpy.clock import ClockType
except ImportError as e:  # pragma: no cover - the message is the test
    raise ImportError(
        "looptime.ros needs rclpy, which the looptime wheel does not install: "
        "pip install ros-kilted-rclpy==9.1.2 ros-kilted-std-msgs ros-kilted-rmw-fastrtps-cpp "
        "(or ros-jazzy-rclpy==7.1.6 with the ros-jazzy-* packages; docs/ros2.md)"
    ) from e

try:  # Kilted (rclpy 9): the executor hands the expected call time.
    from rclpy.timer import TimerInfo
except ImportError:  # Jazzy (rclpy 7): derived from the timer's grid.
    TimerInfo = None

import looptime

from ._ros_sources import (  # noqa: F401  (the module's own parts)
    Sources,
    _absolute,
    _clock_offset,
    _command_publisher,
    _declared_sources,
    _Source,
    _sim_time,
    _stamp_ns,
    _STAMP_OFFSETS,
)

__all__ = ["COMMAND_STAGE", "OTHER", "Timing", "instrument", "spec"]

#: The name a callback created after ``instrument`` is recorded under.
OTHER = "other"
#: The stages and kinds this module records.
LOOP_STAGE, CALLBACK_STAGE = "loop", "callback"
#: The stage of the ``command=`` publisher's publish calls inside the loop.
COMMAND_STAGE = "command"
KINDS = ["timer", "subscription", "service"]
#: The clock a source's stamps are declared on when the node runs on
#: simulated time (``use_sim_time``): not comparable with the host's.
SIM_STAMP_CLOCK = "ros_sim_time"

def _timer_name(i: int, t: Any) -> str:
    return f"timer{i}:{t.timer_period_ns / 1e6:g}ms"


def _callbacks(node: Any, loop: Any = None) -> List[tuple]:
    """(kind, name, entity) of every callback of `node` but `loop`'s."""
    out = []
    for i, t in enumerate(node.timers):
        if t is not loop:
            out.append(("timer", _timer_name(i, t), t))
    out += [("subscription", _absolute(node, s.topic_name), s) for s in node.subscriptions]
    out += [("service", _absolute(node, s.srv_name), s) for s in node.services]
    return out


def _executor_names(executor_threads: int) -> List[str]:
    if not 1 <= executor_threads <= 64:
        raise ValueError(f"executor_threads must be 1 to 64, not {executor_threads}")
    return ["executor"] if executor_threads == 1 else [f"executor-{k}" for k in range(executor_threads)]


def spec(node: Any, executor_threads: int = 1, loop: Any = None, sources: Sources = None,
         command: Any = None) -> Dict[str, Any]:
    """What a ``looptime.Recorder`` must declare for ``instrument`` to record
    the node's callbacks into it: its executor threads (one recorder each,
    bound to a thread at its first callback), merged into the recorder's
    settings: ``looptime.Recorder(stages=[...], **looptime.ros.spec(node))``.
    Take it after the node's timers, subscriptions and services exist. Its
    ``metadata`` declares each timer's period (``period_ns.NAME``), against
    which the report counts the periods each timer skipped; add your own
    keys to it rather than passing ``metadata=`` beside it. With
    ``sources`` it declares them (on the recorder and the executor
    threads) and reads the offset of the node's ROS clock from the host's
    monotonic clock (``ros_stamp_offset_ns``); with ``command`` it names
    the command stage, which ``stages=`` must then list (``COMMAND_STAGE``)."""
    cbs = _callbacks(node, loop)
    names = sorted({n for _, n, _ in cbs} | {OTHER})
    thread = {
        "stages": [CALLBACK_STAGE],
        "phases": ["running"],
        "attributes": {"kind": list(KINDS), "name": names},
    }
    periods = {f"period_ns.{n}": str(e.timer_period_ns) for k, n, e in cbs if k == "timer"}
    out: Dict[str, Any] = {"metadata": periods}
    declared = _declared_sources(node, sources)
    if declared:
        sim = _sim_time(node)
        clock = SIM_STAMP_CLOCK if sim else "host_monotonic"
        offset = 0 if sim else _clock_offset(node.get_clock())
        _STAMP_OFFSETS[node] = offset
        thread = dict(thread, sources={n: {"clock": clock} for n in declared},
                      values={s.value: ("int", "ns") for s in declared.values()})
        out["sources"] = {n: dict({"clock": clock}, **({"max_age_s": s.max_age_s} if s.max_age_s else {}))
                          for n, s in declared.items()}
        periods.update(ros_stamp_offset_ns=offset, ros_stamp_clock="ros_sim_time" if sim else "system")
    if command is not None:
        _command_publisher(node, command)
        out["command_stage"] = COMMAND_STAGE
    out["threads"] = {t: dict(thread) for t in _executor_names(executor_threads)}
    return out


def _asks_for(cb: Callable, annotation: Any) -> Optional[str]:
    """The name of `cb`'s parameter annotated `annotation` (rclpy's own rule
    for TimerInfo), or None."""
    if annotation is None:
        return None
    try:
        params = inspect.signature(cb).parameters.values()
    except (TypeError, ValueError):
        return None
    return next((p.name for p in params if p.annotation is annotation), None)


class Timing:
    """The recording of one instrumented node; ``finish`` writes it."""

    def __init__(self, node: Any, rec: Any, episode: Any, loop: Any, owns: bool, offset_ns: int,
                 executor_names: List[str], sources: Optional[Dict[str, _Source]] = None,
                 stamp_offset_ns: int = 0, message_info: bool = True) -> None:
        self.node, self.recorder, self.episode = node, rec, episode
        # Whether a subscription callback may be handed MessageInfo
        # (instrument's message_info=).
        self._message_info = message_info
        self._loop, self._owns, self._offset = loop, owns, offset_ns
        self._threads = {n: rec.thread(n) for n in executor_names}
        self._free = list(executor_names)
        self._bound: Dict[int, Any] = {}
        self._lock = threading.Lock()
        self._restore: List[tuple] = []
        self._prev_expected: Optional[int] = None
        self._grid: Optional[int] = None
        self._recording = True
        self._sources = sources or {}
        self._auto = [x for x in self._sources.values() if x.use == "start"]
        self._stamp_offset = stamp_offset_ns
        self._loop_thread: Optional[int] = None
        self._commands: List[Any] = []
        #: The ``/diagnostics`` publisher (``status=``), or None.
        self.status: Any = None
        self._ids = {id(r): {n: (r.source_id(n), r.value_id(x.value)) for n, x in self._sources.items()}
                     for r in self._threads.values()}
        for x in self._sources.values():
            x.loop_id = rec.source_id(x.name)
        #: Calls of callbacks created after ``instrument`` (named ``other``).
        self.late_callbacks = 0
        #: Loop cycles and other callback calls recorded.
        self.cycles = 0
        self.callbacks = 0

    # -- the executor thread's recorder -------------------------------------
    def _thread_rec(self) -> Any:
        me = threading.get_ident()
        rec = self._bound.get(me)
        if rec is None:
            with self._lock:
                rec = self._bound.get(me)
                if rec is None and self._free:
                    rec = self._threads[self._free.pop(0)]
                    self._bound[me] = rec
        return rec

    def _wrap_other(self, kind: str, name: str, cb: Callable, src: Optional[_Source] = None) -> Callable:
        asks = _asks_for(cb, TimerInfo)
        late = name == OTHER

        def run(*args: Any, **kw: Any) -> Any:
            info = kw.pop("_looptime_info", None)
            if asks is not None and info is not None:
                kw[asks] = info
            rec = self._thread_rec() if self._recording else None
            if rec is None:  # finished, or more threads than declared
                return cb(*args, **kw)
            self.callbacks += 1
            self.late_callbacks += late
            with rec.cycle("running"):
                if src is not None:
                    self._received(rec, src, args[0], info)
                with rec.span(CALLBACK_STAGE, attrs={"kind": kind, "name": name}):
                    return cb(*args, **kw)

        if kind == "timer":
            return _with_timer_info(run)
        if kind == "subscription":
            # message_info=False (rclpy's EventsExecutor fails on a
            # callback that asks for it): the message only, when the
            # program's callback takes only that.
            return _with_message_info(run, cb) if self._message_info or not _takes_message_only(cb) else run
        return run

    # -- data-age sources and the command -----------------------------------
    def _received(self, rec: Any, src: _Source, msg: Any, info: Any) -> None:
        """A message of source `src`: recorded as published (before the
        program's callback makes it visible to the loop), then the newest."""
        src.received += 1
        seq = info.get("publication_sequence_number") if info else None
        if seq is None:
            seq = src.received
            if not src.no_seq:
                src.no_seq = True
                self.node.get_logger().warning(
                    f"looptime: {src.name}: no publication sequence number (message_info=False, or "
                    "an RMW without it), so its samples are numbered as received and lost messages "
                    "do not show")
        raw = _stamp_ns(msg)
        stamp = raw - self._stamp_offset
        if raw == 0 or stamp < 0:
            src.unstamped += 1
            if src.unstamped == 1:
                self.node.get_logger().warning(
                    f"looptime: {src.name}: a message with header.stamp {raw} ns (not stamped by its "
                    "publisher, or before this host's boot) is not recorded as a sample")
            return
        sid, vid = self._ids[id(rec)][src.name]
        rec.produced(sid, seq, stamp)
        if info and info.get("source_timestamp") and info.get("received_timestamp"):
            rec.set_value(vid, info["received_timestamp"] - info["source_timestamp"])
        src.latest = (seq, stamp)

    def use(self, topic: str) -> Optional[int]:
        """Record, in the loop's current cycle, a use of `topic`'s newest
        received message (a source declared with ``use="call"``, or a use
        beside the cycle's start); returns its sequence number, or None
        when none has arrived yet (nothing is recorded then)."""
        src = self._sources.get(_absolute(self.node, topic))
        if src is None:
            raise KeyError(f"{topic} is not a declared source; declared: {', '.join(self._sources) or 'none'}")
        latest = src.latest
        if latest is None or not self._recording:
            return None
        self.recorder.sample(src.loop_id, latest[0], latest[1])
        return latest[0]

    def _wrap_command(self, pub: Any) -> None:
        """`pub.publish` inside a loop cycle, on the loop's thread, is a span
        of the command stage."""
        original = pub.publish
        rec = self.recorder

        def publish(*args: Any, **kw: Any) -> Any:
            if (self._recording and rec.in_cycle
                    and self._loop_thread in (None, threading.get_ident())):
                with rec.span(COMMAND_STAGE):
                    return original(*args, **kw)
            return original(*args, **kw)

        pub.publish = publish
        self._commands.append(pub)

    # -- the loop timer ------------------------------------------------------
    def _wrap_loop(self, timer: Any) -> Callable:
        cb = timer.callback
        asks = _asks_for(cb, TimerInfo)
        period = timer.timer_period_ns

        def run(*args: Any, **kw: Any) -> Any:
            info = kw.pop("_looptime_info", None)
            if asks is not None and info is not None:
                kw[asks] = info
            if not self._recording:
                return cb(*args, **kw)
            if info is not None:
                expected = info.expected_call_time.nanoseconds
            else:
                # Jazzy: rcl has moved the next call one period on along
                # its grid when it took the timer; two clock reads apart,
                # so the first call's figure anchors the grid and the
                # others are snapped onto it.
                derived = timer.clock.now().nanoseconds + timer.time_until_next_call() - period
                if self._grid is None:
                    self._grid = derived
                expected = self._grid + round((derived - self._grid) / period) * period
            skipped = 0
            if self._prev_expected is not None:
                skipped = max(0, round((expected - self._prev_expected) / period) - 1)
            self._prev_expected = expected
            target = max(0, expected - self._offset)
            self.cycles += 1
            with self.recorder.cycle("running", target_ns=target, skipped=skipped, overdue=skipped > 0):
                self._loop_thread = threading.get_ident()
                for src in self._auto:
                    latest = src.latest
                    if latest is not None:
                        self.recorder.sample(src.loop_id, latest[0], latest[1])
                with self.recorder.span(LOOP_STAGE):
                    return cb(*args, **kw)

        return _with_timer_info(run)

    def _install(self, entity: Any, wrapped: Callable) -> None:
        self._restore.append((entity, entity.callback))
        entity.callback = wrapped

    def finish(self, status: str = "complete") -> str:
        """Stop recording, put the node's callbacks back, write the episode
        (``complete`` or ``aborted``) and return its directory."""
        self._recording = False
        if self.status is not None:
            self.status.stop()
        for entity, cb in self._restore:
            entity.callback = cb
        for pub in self._commands:
            pub.__dict__.pop("publish", None)
        for name in ("create_timer", "create_subscription", "create_service"):
            self.node.__dict__.pop(name, None)
        complete = status == "complete"
        if self._owns:
            self.recorder.finish(self.episode.dir, status=status)
        self.episode.finish(self.recorder if self._owns else None, complete=complete,
                            planned_cycles=0)
        return self.episode.dir


def _takes_message_only(cb: Callable) -> bool:
    """rclpy's rule: a subscription callback callable with one argument
    gets the message only, else (two) the message and its MessageInfo."""
    try:
        inspect.signature(cb).bind(object())
        return True
    except (TypeError, ValueError):
        return False


def _with_message_info(run: Callable, cb: Callable) -> Callable:
    """`run` behind a two-argument signature, so that rclpy hands the
    MessageInfo too (its rule reads the signature when the callback is
    set); the user's callback gets what its own signature asks for."""
    only = _takes_message_only(cb)

    def sub_cb(msg: Any, info: Any) -> Any:
        return run(msg, _looptime_info=info) if only else run(msg, info, _looptime_info=info)

    return sub_cb


def _with_timer_info(run: Callable) -> Callable:
    """`run` behind a signature that asks rclpy for the TimerInfo (Kilted;
    Jazzy hands none), which `run` gets as `_looptime_info`."""
    if TimerInfo is None:
        return run

    def timer_cb(info: Any) -> Any:
        return run(_looptime_info=info)

    # rclpy matches the annotation itself (`is TimerInfo`), and this
    # module's annotations are strings (PEP 563): set it as the class.
    timer_cb.__annotations__ = {"info": TimerInfo, "return": Any}
    return timer_cb


def instrument(node: Any, runs_dir: str = "runs", loop: Any = None, recorder: Any = None,
               session: Any = None, executor_threads: int = 1, label: Optional[str] = None,
               max_cycles: int = looptime.DEFAULT_TIMING_MAX_CYCLES, sources: Sources = None,
               command: Any = None, status: Any = False,
               settings: Optional[Mapping[str, Any]] = None, message_info: bool = True,
               compute_budget_ns: Optional[int] = None, deadline_tolerance_ns: Optional[int] = None) -> Timing:
    """Record `node`'s callbacks, and with ``loop=timer`` each call of that
    timer as a cycle on its grid, into a new episode under `runs_dir` (or
    the next rollout of `session`, a session opened without a scheduler).
    With ``loop=None`` give the program's own ``recorder``, built with
    ``**spec(node, executor_threads, sources=..., command=...)`` and its
    episode directory; it is then the program's to finish. ``sources``:
    topic names, ``{topic: {"max_age_s": s, "use": "start" | "call"}}`` or
    True (every subscription with a Header); ``command``: the loop's
    command publisher (or its topic); ``status``: True (or a dict of
    ``looptime.ros_status.publish_status``'s settings) publishes the loop's
    live status on ``/diagnostics`` from a thread of its own until
    ``finish`` (with ``recorder=``, one built with ``live_status=True``);
    ``settings``: the program's own, added to the manifest's
    ``config.program`` (``loop=`` form); ``message_info=False`` for
    rclpy's EventsExecutor, which fails on a subscription callback that
    asks for the MessageInfo (sources then number their samples as
    received, and have no DDS leg: docs/ros2.md); ``compute_budget_ns`` and
    ``deadline_tolerance_ns`` declare the loop's budget and tolerance on
    its recorder (``loop=`` form; docs/metrics.md, Budget and tolerance).
    Returns the ``Timing``; ``finish`` writes."""
    if (loop is None) == (recorder is None):
        raise ValueError("give loop=timer (the node's loop timer) or recorder=rec (your own loop's), one of them")
    names = _executor_names(executor_threads)
    callbacks = _callbacks(node, loop)
    declared_sources = _declared_sources(node, sources)
    pub = _command_publisher(node, command)
    offset = 0
    if loop is not None:
        if loop not in node.timers:
            raise ValueError("loop must be one of the node's timers (node.create_timer(...))")
        period = loop.timer_period_ns
        ctype = loop.clock.clock_type
        sim = ctype == ClockType.ROS_TIME and bool(node.get_parameter("use_sim_time").value)
        if sim:
            # Simulated time: the targets stay on the simulation's clock,
            # and the evidence says so (no lag against the host's).
            pass
        elif ctype != ClockType.STEADY_TIME:
            # ROS or system time: onto the host monotonic clock with the
            # offset between the two read now (written to the manifest).
            offset = _clock_offset(loop.clock)
        declared = spec(node, executor_threads, loop, sources, command)
        settings = dict(settings or {}, ros_loop_period_ns=period, ros_loop_clock=ctype.name,
                        ros_clock_offset_ns=offset, ros_node=node.get_fully_qualified_name())
        if declared_sources:
            settings.update(ros_sources=",".join(declared_sources),
                            ros_stamp_offset_ns=declared["metadata"]["ros_stamp_offset_ns"],
                            ros_stamp_clock=declared["metadata"]["ros_stamp_clock"])
        args = argparse.Namespace(control_timing=True, timing_max_cycles=max_cycles, label=label)
        episode = (session.rollout(settings) if session is not None else
                   looptime.open_episode(runs_dir, args, period_s=period / 1e9, settings=settings))
        declared["metadata"].update(ros_node=node.get_fully_qualified_name(), ros_loop_clock=ctype.name)
        stages = [LOOP_STAGE] + ([COMMAND_STAGE] if pub is not None else [])
        rec = looptime.Recorder(stages=stages, phases=["running"], max_cycles=max_cycles,
                                nominal_period_ns=period, episode_dir=episode.dir,
                                target_clock="simulation" if sim else "host_monotonic",
                                live_status=bool(status), compute_budget_ns=compute_budget_ns,
                                deadline_tolerance_ns=deadline_tolerance_ns, **declared)
        owns = True
    else:
        rec, episode, owns = recorder, _NoEpisode(), False
        _check_recorder(node, rec, names, declared_sources, pub)
    stamp_offset = _STAMP_OFFSETS.get(node, 0)
    t = Timing(node, rec, episode, loop, owns, offset, names, declared_sources, stamp_offset, message_info)
    if loop is not None:
        t._install(loop, t._wrap_loop(loop))
    seen = set()
    for kind, name, entity in callbacks:
        # The first subscription of a source topic records its samples.
        src = declared_sources.get(name) if kind == "subscription" and name not in seen else None
        seen.add(name)
        t._install(entity, t._wrap_other(kind, name, entity.callback, src))
    if pub is not None:
        t._wrap_command(pub)
    if status:
        from . import ros_status  # needs diagnostic_msgs, which the other parts do not
        t.status = ros_status.publish_status(node, rec.status(), **(status if isinstance(status, Mapping) else {}))
    _wrap_creation(node, t)
    return t


def _check_recorder(node: Any, rec: Any, threads: List[str], sources: Dict[str, _Source], pub: Any) -> None:
    """The program's recorder declares what ``instrument`` records into it."""
    hint = "build it with looptime.Recorder(..., **looptime.ros.spec(node, executor_threads, sources=..., command=...))"
    try:
        for n in threads:
            t = rec.thread(n)
            for src in sources.values():
                t.source_id(src.name)
                t.value_id(src.value)
        for src in sources.values():
            rec.source_id(src.name)
    except KeyError as e:
        raise ValueError(f"the recorder does not declare {e}: {hint}") from None
    if sources and node not in _STAMP_OFFSETS:
        raise ValueError(f"no stamp offset was read for this node: {hint}")
    if pub is not None:
        try:
            rec.stage_id(COMMAND_STAGE)
        except KeyError:
            raise ValueError(f"command=: the recorder's stages must list looptime.ros.COMMAND_STAGE "
                             f"({COMMAND_STAGE!r}) and {hint}") from None


class _NoEpisode:
    """The ``loop=None`` form: the program owns its episode."""

    dir = ""

    def finish(self, *_: Any, **__: Any) -> None:
        return None


def _wrap_creation(node: Any, t: Timing) -> None:
    """Callbacks the node creates after ``instrument``: recorded as ``other``."""
    for method, kind in (("create_timer", "timer"), ("create_subscription", "subscription"),
                         ("create_service", "service")):
        original = getattr(type(node), method)

        def create(*args: Any, _original: Callable = original, _kind: str = kind, **kw: Any) -> Any:
            entity = _original(node, *args, **kw)
            if t._recording:
                t._install(entity, t._wrap_other(_kind, OTHER, entity.callback))
            return entity

        setattr(node, method, create)
