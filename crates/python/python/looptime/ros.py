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

Call ``instrument`` after the node's timers, subscriptions and services
exist: a callback created later is recorded under the name ``other``.
This module needs rclpy, which the looptime wheel does not install.
"""

from __future__ import annotations

import argparse
import inspect
import threading
from typing import Any, Callable, Dict, List, Optional

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

__all__ = ["OTHER", "Timing", "instrument", "spec"]

#: The name a callback created after ``instrument`` is recorded under.
OTHER = "other"
#: The stages and kinds this module records.
LOOP_STAGE, CALLBACK_STAGE = "loop", "callback"
KINDS = ["timer", "subscription", "service"]


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


def _absolute(node: Any, name: str) -> str:
    """A topic or service name as an absolute one (rclpy gives a relative
    service name on Jazzy and the resolved one on Kilted)."""
    if name.startswith("/"):
        return name
    return node.get_namespace().rstrip("/") + "/" + name


def _executor_names(executor_threads: int) -> List[str]:
    if not 1 <= executor_threads <= 64:
        raise ValueError(f"executor_threads must be 1 to 64, not {executor_threads}")
    return ["executor"] if executor_threads == 1 else [f"executor-{k}" for k in range(executor_threads)]


def spec(node: Any, executor_threads: int = 1, loop: Any = None) -> Dict[str, Any]:
    """What a ``looptime.Recorder`` must declare for ``instrument`` to record
    the node's callbacks into it: its executor threads (one recorder each,
    bound to a thread at its first callback), merged into the recorder's
    settings: ``looptime.Recorder(stages=[...], **looptime.ros.spec(node))``.
    Take it after the node's timers, subscriptions and services exist. Its
    ``metadata`` declares each timer's period (``period_ns.NAME``), against
    which the report counts the periods each timer skipped; add your own
    keys to it rather than passing ``metadata=`` beside it."""
    cbs = _callbacks(node, loop)
    names = sorted({n for _, n, _ in cbs} | {OTHER})
    thread = {
        "stages": [CALLBACK_STAGE],
        "phases": ["running"],
        "attributes": {"kind": list(KINDS), "name": names},
    }
    periods = {f"period_ns.{n}": str(e.timer_period_ns) for k, n, e in cbs if k == "timer"}
    return {"threads": {t: dict(thread) for t in _executor_names(executor_threads)}, "metadata": periods}


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
                 executor_names: List[str]) -> None:
        self.node, self.recorder, self.episode = node, rec, episode
        self._loop, self._owns, self._offset = loop, owns, offset_ns
        self._threads = {n: rec.thread(n) for n in executor_names}
        self._free = list(executor_names)
        self._bound: Dict[int, Any] = {}
        self._lock = threading.Lock()
        self._restore: List[tuple] = []
        self._prev_expected: Optional[int] = None
        self._grid: Optional[int] = None
        self._recording = True
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

    def _wrap_other(self, kind: str, name: str, cb: Callable) -> Callable:
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
                with rec.span(CALLBACK_STAGE, attrs={"kind": kind, "name": name}):
                    return cb(*args, **kw)

        if kind == "timer":
            return _with_timer_info(run)
        if kind == "subscription":
            return _with_message_info(run, cb)
        return run

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
        for entity, cb in self._restore:
            entity.callback = cb
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
        return run(msg) if only else run(msg, info)

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
               max_cycles: int = looptime.DEFAULT_TIMING_MAX_CYCLES) -> Timing:
    """Record `node`'s callbacks, and with ``loop=timer`` each call of that
    timer as a cycle on its grid, into a new episode under `runs_dir` (or
    the next rollout of `session`, a session opened without a scheduler).
    With ``loop=None`` give the program's own ``recorder``, built with
    ``**spec(node, executor_threads)`` and its episode directory; it is then
    the program's to finish. Returns the ``Timing``; ``finish`` writes."""
    if (loop is None) == (recorder is None):
        raise ValueError("give loop=timer (the node's loop timer) or recorder=rec (your own loop's), one of them")
    names = _executor_names(executor_threads)
    callbacks = _callbacks(node, loop)
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
            offset = loop.clock.now().nanoseconds - looptime.monotonic_ns()
        settings = {"ros_loop_period_ns": period, "ros_loop_clock": ctype.name,
                    "ros_clock_offset_ns": offset, "ros_node": node.get_fully_qualified_name()}
        args = argparse.Namespace(control_timing=True, timing_max_cycles=max_cycles, label=label)
        episode = (session.rollout(settings) if session is not None else
                   looptime.open_episode(runs_dir, args, period_s=period / 1e9, settings=settings))
        declared = spec(node, executor_threads, loop)
        declared["metadata"].update(ros_node=node.get_fully_qualified_name(), ros_loop_clock=ctype.name)
        rec = looptime.Recorder(stages=[LOOP_STAGE], phases=["running"], max_cycles=max_cycles,
                                nominal_period_ns=period, episode_dir=episode.dir,
                                target_clock="simulation" if sim else "host_monotonic",
                                **declared)
        owns = True
    else:
        rec, episode, owns = recorder, _NoEpisode(), False
    t = Timing(node, rec, episode, loop, owns, offset, names)
    if loop is not None:
        t._install(loop, t._wrap_loop(loop))
    for kind, name, entity in callbacks:
        t._install(entity, t._wrap_other(kind, name, entity.callback))
    _wrap_creation(node, t)
    return t


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
