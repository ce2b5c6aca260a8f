"""looptime for Python loops.

The recorder and the scheduler are the Rust ones (``looptime._looptime``,
built with PyO3): a Python loop writes the same ``control_timing.jsonl`` and
``control_timing_summary.json`` as a Rust loop, and ``analyze_control_timing``
reads them unchanged.

    import looptime

    rec = looptime.Recorder(stages=["sense", "act"], phases=["running"])
    sched = looptime.Scheduler(period_s=0.01)
    for _ in range(100):
        tick = sched.wait(rec)              # sleeps with the GIL released
        with rec.cycle("running", tick):
            with rec.span("sense"):
                ...
            with rec.span("act"):
                ...
    rec.finish(directory, status="complete")

``Episode`` writes the episode directory in ``looptime serve``'s layout,
``Session`` several rollouts in one session (as ``serve --episodes N``), and
``add_arguments`` gives a program the ``--control-timing`` flags. See
docs/python.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Mapping, Optional, Sequence

from ._looptime import (  # noqa: F401  (re-exported)
    MAX_SPAN_DEPTH,
    Arrival,
    Episode,
    FinishReport,
    InputPacer,
    InputTick,
    LiveStatus,
    Recorder,
    Scheduler,
    Session,
    Tick,
    __version__,
    enable_rx_timestamps,
    monotonic_ns,
    recv_stamped,
    thread_cpu_ns,
)

__all__ = [
    "MAX_SPAN_DEPTH",
    "Arrival",
    "Episode",
    "FinishReport",
    "InputPacer",
    "InputTick",
    "LiveStatus",
    "Recorder",
    "Scheduler",
    "Session",
    "Tick",
    "__version__",
    "add_arguments",
    "enable_rx_timestamps",
    "monotonic_ns",
    "open_episode",
    "open_session",
    "recv_stamped",
    "thread_cpu_ns",
]

DEFAULT_TIMING_MAX_CYCLES = 20000


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of cycles, not {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 cycle, not {n}")
    return n


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--control-timing`` and ``--timing-max-cycles N`` to ``parser``,
    with the meaning they have for ``looptime serve``: record every cycle,
    keeping the newest N (older ones are counted as dropped)."""
    group = parser.add_argument_group("control timing (looptime)")
    group.add_argument(
        "--control-timing",
        action="store_true",
        help="record every cycle's timing and write control_timing.jsonl and "
        "control_timing_summary.json into the episode directory",
    )
    group.add_argument(
        "--timing-max-cycles",
        type=_positive_int,
        default=DEFAULT_TIMING_MAX_CYCLES,
        metavar="N",
        help=f"ring capacity in cycles; the newest N are kept (default {DEFAULT_TIMING_MAX_CYCLES})",
    )
    group.add_argument(
        "--label",
        metavar="NAME",
        default=None,
        help="name the session (recorded as config.run.label; reports show it, "
        "and compare uses it as the side's name)",
    )
    return parser


def _program_and_sources(sources: Optional[Sequence[str]]) -> tuple[str, list[str]]:
    program = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "<interactive>"
    if sources is None:
        sources = [program] if os.path.isfile(program) else []
    return program, [os.fspath(s) for s in sources]


def open_session(
    runs_dir: "os.PathLike[str] | str",
    args: argparse.Namespace,
    scheduler: Optional[Scheduler] = None,
    rollouts: int = 0,
    settings: Optional[Mapping[str, Any]] = None,
    sources: Optional[Sequence[str]] = None,
    period_s: Optional[float] = None,
) -> Session:
    """Create a session for a program started with the flags of
    ``add_arguments``: ``<runs_dir>/session-<UTC>`` with ``session.json``
    (``rollouts`` planned, or 0 for as many as the program starts) and
    ``<runs_dir>/latest-session``. Each ``session.rollout()`` then gives an
    ``Episode`` (``rollout-000``, ``rollout-001``, ...). Use it in a ``with``
    block, which closes it. A loop its inputs pace has no scheduler: give
    ``period_s``, the inputs' nominal period, instead."""
    program, srcs = _program_and_sources(sources)
    return Session(
        os.fspath(runs_dir),
        program,
        srcs,
        bool(args.control_timing),
        int(args.timing_max_cycles),
        scheduler,
        dict(settings or {}),
        label=getattr(args, "label", None),
        rollouts=int(rollouts),
        period_s=period_s,
    )


def open_episode(
    runs_dir: "os.PathLike[str] | str",
    args: argparse.Namespace,
    scheduler: Optional[Scheduler] = None,
    settings: Optional[Mapping[str, Any]] = None,
    sources: Optional[Sequence[str]] = None,
    period_s: Optional[float] = None,
) -> Episode:
    """Create the episode directory for a program started with the flags of
    ``add_arguments``: ``<runs_dir>/session-<UTC>/rollout-000`` with
    ``session.json``, a ``running`` manifest (the resolved
    ``run.control_timing`` and ``run.timing_max_cycles``, host facts, the
    scheduler, and the SHA-256 of each source file) and ``<runs_dir>/latest``.
    ``sources`` defaults to the main script. A loop its inputs pace has no
    scheduler: give ``period_s``, the inputs' nominal period, instead."""
    program, srcs = _program_and_sources(sources)
    return Episode(
        os.fspath(runs_dir),
        program,
        srcs,
        bool(args.control_timing),
        int(args.timing_max_cycles),
        scheduler,
        dict(settings or {}),
        label=getattr(args, "label", None),
        period_s=period_s,
    )
