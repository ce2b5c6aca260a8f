"""Type stubs of looptime's native module, in the sections of its source
(crates/python/src: lib.rs, names.rs, tick.rs, recorder/, scheduler.rs,
episode.rs); `python3 -m mypy.stubtest looptime._looptime` checks them."""

from os import PathLike
from typing import Any, Dict, Literal, Mapping, Optional, Sequence, Tuple, TypeAlias, Union, final

__all__ = [
    "Recorder",
    "Scheduler",
    "Tick",
    "FinishReport",
    "Episode",
    "Session",
    "monotonic_ns",
    "thread_cpu_ns",
    "__version__",
    "MAX_SPAN_DEPTH",
    "Arrival",
    "InputPacer",
    "InputTick",
    "enable_rx_timestamps",
    "recv_stamped",
    "LiveStatus",
]

__version__: str
MAX_SPAN_DEPTH: int

# --- names (names.rs) ---------------------------------------------------

# A registered name, or its id.
_Name: TypeAlias = Union[str, int]
# Span attributes: (key, value) pairs by id or name, or a {key: value} dict.
_Attrs: TypeAlias = Union[Sequence[Tuple[_Name, _Name]], Mapping[str, str]]

# --- lib.rs ---------------------------------------------------------------

def monotonic_ns() -> int: ...
def thread_cpu_ns() -> int: ...

# --- tick (tick.rs) -------------------------------------------------------

@final
class Tick:
    """What one Scheduler.wait() did; updated in place at every wait."""

    @property
    def cycle(self) -> int: ...
    @property
    def target_ns(self) -> int: ...
    @property
    def wait_start_ns(self) -> int: ...
    @property
    def sleep_return_ns(self) -> int: ...
    @property
    def wake_ns(self) -> int: ...
    @property
    def spin_ns(self) -> int: ...
    @property
    def spin_margin_ns(self) -> int: ...
    @property
    def dt_measured_ns(self) -> int: ...
    @property
    def dt_measured(self) -> float: ...
    @property
    def skipped(self) -> int: ...
    @property
    def overdue(self) -> bool: ...
    @property
    def dt_clamped(self) -> bool: ...

# --- recorder (recorder/mod.rs; FinishReport in recorder/finish.rs) -------

@final
class FinishReport:
    @property
    def cycles_path(self) -> str: ...
    @property
    def summary_path(self) -> str: ...
    @property
    def total_cycles(self) -> int: ...
    @property
    def retained_cycles(self) -> int: ...
    @property
    def dropped_cycles(self) -> int: ...
    @property
    def spans_dropped(self) -> int: ...
    @property
    def spans_outside_cycle(self) -> int: ...
    @property
    def cycles_bytes(self) -> int: ...
    @property
    def status(self) -> str: ...

@final
class LiveStatus:
    def snapshot(self) -> Dict[str, Any]:
        """The counts as of one cycle (``index``): cycles, overruns,
        skipped, late_starts, completion_misses, budget_overruns, misses,
        last_miss, period_p99_ns, periods (docs/ros2.md)."""
        ...

@final
class Recorder:
    def __new__(
        cls,
        stages: Sequence[str],
        phases: Optional[Sequence[str]] = None,
        attributes: Optional[Mapping[str, Sequence[str]]] = None,
        values: Optional[Mapping[str, Tuple[Literal["int", "float"], str]]] = None,
        max_cycles: Optional[int] = None,  # None: 20000
        max_spans_per_cycle: Optional[int] = None,  # None: 16
        # None: "cycle" (two CPU-clock reads a cycle); "spans": two a span;
        # "off"; True and False (before the modes) are "spans" and "off".
        thread_cpu: Union[bool, Literal["cycle", "spans", "off"], None] = None,
        nominal_period_ns: Optional[int] = None,
        ring: Literal["auto", "heap"] = "auto",
        episode_dir: Optional[Union[str, PathLike[str]]] = None,
        # Numbers and bools are written as their JSON text.
        metadata: Optional[Mapping[str, Union[str, int, float, bool]]] = None,
        threads: Optional[Mapping[str, Mapping[str, object]]] = None,
        # The clock of the release points (`Scheduler.clock`): "simulation"
        # for a scheduler with rtf=0.
        target_clock: Literal["host_monotonic", "simulation"] = "host_monotonic",
        # Data age: {"camera": {"max_age_s": 0.05, "clock": "host_monotonic"}}
        # (both settings optional: no limit, the host's monotonic clock).
        sources: Optional[Mapping[str, Mapping[str, object]]] = None,
        # The stage whose spans send the loop's commands (written to the
        # header: the analyzer times answers and command Hz by it).
        command_stage: Optional[str] = None,
        # A compute budget for each cycle's work and a deadline tolerance,
        # both ns, written to the header only when given (docs/metrics.md,
        # Budget and tolerance).
        compute_budget_ns: Optional[int] = None,
        deadline_tolerance_ns: Optional[int] = None,
        # Keep a live status another thread reads (`status()`): counts,
        # the last miss, the period's p99, updated at each cycle's end.
        live_status: bool = False,
    ) -> "Recorder":
        """``threads={"camera_reader": {"stages": [...], ...}}`` declares
        background threads, each recorded on its own recorder and ring
        (settings: stages, phases, attributes, values, max_cycles,
        max_spans_per_cycle, thread_cpu, ring); ``thread(name)`` hands it
        out, and this recorder's ``finish`` writes their files."""
        ...
    def thread(self, name: str) -> "Recorder":
        """The recorder of background thread ``name``; use it from that
        thread only. Raises ``KeyError`` for an undeclared name."""
        ...
    @property
    def threads(self) -> list[str]: ...
    def stage_id(self, name: _Name) -> int: ...
    def phase_id(self, name: _Name) -> int: ...
    def value_id(self, name: _Name) -> int: ...
    def attr_id(self, key: _Name, value: _Name) -> Tuple[int, int]:
        """(key id, value id) of a declared attribute value: keys count in
        the order of ``attributes``, values in each key's list. Raises
        ``KeyError`` for an undeclared key or value."""
        ...
    def begin_wait(self) -> None: ...
    def end_wait(self) -> None: ...
    def begin_cycle(
        self, phase: _Name, tick: Optional[Tick] = None, input: Optional[Tuple[Union[int, "Arrival"], Optional[int]]] = None,
        target_ns: Optional[int] = None, skipped: int = 0, overdue: bool = False,
    ) -> None:
        """Begin a cycle in ``phase``: at ``tick``'s release point, or
        released by an input, ``input=(arrival_ns, seq)`` (the arrival as
        ``time.monotonic_ns()`` right after the receive returned, the
        input's own counter or None; docs/input-paced.md). Not both."""
    def end_cycle(self) -> None: ...
    def cycle(
        self, phase: _Name, tick: Optional[Tick] = None, input: Optional[Tuple[Union[int, "Arrival"], Optional[int]]] = None,
        target_ns: Optional[int] = None, skipped: int = 0, overdue: bool = False,
    ) -> "Recorder": ...
    def span(self, stage: _Name, mode: Optional[_Name] = None, attrs: Optional[_Attrs] = None) -> "Recorder":
        """``with rec.span(stage):``. ``mode`` is a value of the attribute
        ``mode``; ``attrs`` sets any declared attributes: ``((key_id,
        value_id), ...)`` from ``attr_id`` (no string compared, nothing
        allocated), ``(key, value)`` names, or a ``{key: value}`` dict. At
        most 4 keys a span; setting a key twice keeps the last value. An
        undeclared key or value raises ``KeyError`` before the span opens."""
        ...
    def __enter__(self) -> "Recorder": ...
    def __exit__(self, _ty: object, _value: object, _tb: object) -> bool: ...
    def begin_span(self, stage: _Name, mode: Optional[_Name] = None, attrs: Optional[_Attrs] = None) -> int: ...
    def end_span(self, position: Optional[int] = None) -> None: ...
    def set_value(self, value: _Name, v: Union[int, float]) -> None: ...
    def source_id(self, name: _Name) -> int: ...
    def sample(self, source: _Name, seq: int, stamp_ns: int) -> None: ...
    def produced(self, source: _Name, seq: int, stamp_ns: int) -> None: ...
    def finish(
        self, episode_dir: Union[str, PathLike[str]], status: Literal["complete", "aborted"] = "complete"
    ) -> FinishReport: ...
    @property
    def total_cycles(self) -> int: ...
    @property
    def retained_cycles(self) -> int: ...
    @property
    def dropped_cycles(self) -> int: ...
    @property
    def spans_dropped(self) -> int: ...
    @property
    def samples_dropped(self) -> int: ...
    @property
    def samples_outside_cycle(self) -> int: ...
    @property
    def spans_outside_cycle(self) -> int: ...
    @property
    def in_cycle(self) -> bool: ...
    def status(self) -> "LiveStatus":
        """The live status (``live_status=True``; else ``ValueError``): a
        handle any thread may read."""
        ...
    @property
    def footprint_bytes(self) -> int: ...
    @property
    def ring_path(self) -> Optional[str]: ...
    @property
    def ring_note(self) -> Optional[str]: ...
    @property
    def finished_into(self) -> Optional[str]: ...

# --- net (net.rs) -----------------------------------------------------------

@final
class Arrival:
    # The kernel's receive stamp on CLOCK_MONOTONIC (else the read), when
    # the receive returned, and the conversion's bound (None: no stamp).
    @property
    def arrival_ns(self) -> int: ...
    @property
    def read_ns(self) -> int: ...
    @property
    def bound_ns(self) -> Optional[int]: ...
    @property
    def kernel(self) -> bool: ...
    @property
    def waited_ns(self) -> int: ...

def enable_rx_timestamps(sock: Any) -> None: ...
def recv_stamped(sock: Any, bufsize: int = 65536) -> Tuple[bytes, Arrival]: ...

# --- pacer (pacer.rs) -------------------------------------------------------

@final
class InputTick:
    @property
    def arrival_ns(self) -> int: ...
    @property
    def seq(self) -> Optional[int]: ...
    @property
    def dt_measured_ns(self) -> int: ...
    @property
    def dt_measured(self) -> float: ...
    @property
    def dt_clamped(self) -> bool: ...
    @property
    def dt_source(self) -> Literal["input_clock", "arrivals"]: ...

@final
class InputPacer:
    def __new__(cls, max_dt_s: float) -> "InputPacer": ...
    def start(self, origin_ns: Optional[int] = None) -> None: ...
    def arrived(
        self, arrival: Union[int, Arrival], seq: Optional[int] = None, input_clock_ns: Optional[int] = None
    ) -> InputTick: ...

# --- scheduler (scheduler.rs) ---------------------------------------------

@final
class Scheduler:
    def __new__(
        cls,
        period_s: float,
        # None: 200 µs (at most half the period); "auto": adapts to the OS
        # sleep latency seen lately, between 50 µs and the ceiling.
        spin_margin_us: Union[float, Literal["auto"], None] = None,
        policy: Literal["rebase", "keep-phase"] = "rebase",
        max_dt_s: Optional[float] = None,
        release_gil_during_spin: bool = False,
        # 1: paced in real time; 0: uncapped on the simulation clock (every
        # wait returns at once); another value: paced at period_s / rtf.
        rtf: float = 1.0,
        # Declared only when given (0 to 10,000,000 µs): counted by the
        # scheduler (budget_overruns, wake_misses, completion_misses).
        compute_budget_us: Optional[float] = None,
        deadline_tolerance_us: Optional[float] = None,
    ) -> "Scheduler": ...
    def wait(self, recorder: Optional["Recorder"] = None) -> Tick: ...
    def rephase(self) -> None: ...
    @property
    def period_ns(self) -> int: ...
    @property
    def nominal_period_ns(self) -> int: ...
    @property
    def rtf(self) -> float: ...
    @property
    def clock(self) -> Literal["host_monotonic", "simulation"]: ...
    @property
    def spin_margin_ns(self) -> int: ...
    @property
    def auto_margin(self) -> bool: ...
    @property
    def spin_margin_range_ns(self) -> Tuple[int, int]: ...
    @property
    def policy(self) -> str: ...
    @property
    def cycles(self) -> int: ...
    @property
    def overruns(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def compute_budget_ns(self) -> Optional[int]: ...
    @property
    def deadline_tolerance_ns(self) -> Optional[int]: ...
    @property
    def budget_overruns(self) -> int: ...
    @property
    def wake_misses(self) -> int: ...
    @property
    def completion_misses(self) -> int: ...

# --- episode (episode.rs) -------------------------------------------------

@final
class Episode:
    def __new__(
        cls,
        runs_dir: Union[str, PathLike[str]],
        program: str,
        sources: Sequence[Union[str, PathLike[str]]],
        control_timing: bool,
        timing_max_cycles: int,
        # None for a loop its inputs pace: then period_s, the inputs'
        # nominal period.
        scheduler: Optional[Scheduler] = None,
        settings: Optional[Mapping[str, object]] = None,
        label: Optional[str] = None,
        period_s: Optional[float] = None,
    ) -> "Episode": ...
    @property
    def dir(self) -> str: ...
    @property
    def session(self) -> str: ...
    def setup_control_thread(self) -> list[str]: ...
    def finish(
        self,
        recorder: Optional[Recorder] = None,
        scheduler: Optional[Scheduler] = None,
        complete: bool = True,
        planned_cycles: int = 0,
    ) -> None: ...

@final
class Session:
    def __new__(
        cls,
        runs_dir: Union[str, PathLike[str]],
        program: str,
        sources: Sequence[Union[str, PathLike[str]]],
        control_timing: bool,
        timing_max_cycles: int,
        scheduler: Optional[Scheduler] = None,
        settings: Optional[Mapping[str, object]] = None,
        label: Optional[str] = None,
        rollouts: int = 0,
        period_s: Optional[float] = None,
    ) -> "Session": ...
    @property
    def dir(self) -> str: ...
    @property
    def rollouts(self) -> int: ...
    def rollout(self, settings: Optional[Mapping[str, object]] = None) -> Episode: ...
    def close(self, why: Optional[str] = None) -> None: ...
    def __enter__(self) -> "Session": ...
    def __exit__(self, _ty: object = None, value: object = None, _tb: object = None) -> bool: ...
