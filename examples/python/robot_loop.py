#!/usr/bin/env python3
"""A 100 Hz Python robot loop recorded by looptime.

It has the stages of ``looptime serve``'s simulated runtime (camera read,
viewer control, policy with its adapter decode, executor, command send,
recording), runs on looptime's absolute-deadline scheduler (which releases
the GIL while it sleeps), and has two threads beside the loop, as Python
robot runtimes do: a camera reader, recorded on its own recorder (its
``grab`` and ``decode`` spans go to ``control_timing.camera_reader.jsonl``,
and the analyzer reports how long each loop stage overlapped its work), and
an unrecorded maintenance thread. It writes an episode in ``serve``'s
layout::

    python examples/python/robot_loop.py --control-timing --duration 5 --runs-dir runs
    analyze_control_timing --episode runs/latest

SIGINT (Ctrl-C) or SIGTERM ends the loop at the next cycle; the episode is
then finished as aborted, and the exit code is 130.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import threading
import time

import looptime

STAGES = [
    "camera_read",
    "viewer_control",
    "policy",
    "adapter_decode",
    "executor",
    "robot_send_command",
    "recording",
]


def busy_us(us: float) -> None:
    """Stand-in work: spin for ``us`` microseconds."""
    until = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < until:
        pass


class Controller:
    """Integrates a velocity command with the measured dt, never the nominal period."""

    def __init__(self) -> None:
        self.position = 0.0

    def step(self, velocity: float, dt_s: float) -> float:
        self.position += velocity * dt_s
        return self.position


def camera_reader(cam: "looptime.Recorder", stop: threading.Event, frames: list, seed: int) -> None:
    """A background thread recorded on its own recorder: grab a frame (a
    30 Hz camera: it waits), stamp it as captured, decode it (it works,
    holding the GIL), then publish it: ``frames`` holds the count and the
    newest frame's ``(seq, capture stamp)``, which the loop uses (data
    age)."""
    rng = random.Random(seed)
    grab, decode = cam.stage_id("grab"), cam.stage_id("decode")
    camera = cam.source_id("camera")
    seq = 0
    while not stop.is_set():
        with cam.cycle("running"):
            with cam.span(grab):
                stop.wait(1 / 30)
                captured = looptime.monotonic_ns()
            with cam.span(decode):
                busy_us(rng.uniform(1500, 2500))
            seq += 1
            cam.produced(camera, seq, captured)
        frames[1] = (seq, captured)  # one reference swap: atomic under the GIL
        frames[0] += 1


def maintenance(stop: threading.Event, counter: list) -> None:
    """A background thread: housekeeping every 20 ms (it runs while the loop sleeps)."""
    while not stop.wait(0.02):
        counter[0] += 1
        sum(range(200))


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=5.0, help="seconds of running phase (default 5)")
    p.add_argument("--warmup", type=float, default=0.5, help="seconds of warmup phase (default 0.5)")
    p.add_argument("--rate", type=float, default=100.0, help="loop rate in Hz (default 100)")
    p.add_argument("--runs-dir", default="runs", help="where the session directory goes (default runs)")
    p.add_argument("--seed", type=int, default=7, help="seed of the stand-in work's jitter")
    looptime.add_arguments(p)
    args = p.parse_args(argv)
    if not (0 < args.rate <= 1000):
        p.error(f"--rate must be in (0, 1000] Hz, not {args.rate}")
    if args.duration < 0 or args.warmup < 0:
        p.error("--duration and --warmup must be >= 0")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    stop = {"requested": False}

    def on_signal(signum, frame):  # runs inside Scheduler.wait, between cycles
        stop["requested"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    period_s = 1.0 / args.rate
    warmup_cycles = int(round(args.warmup * args.rate))
    planned = warmup_cycles + int(round(args.duration * args.rate))
    sched = looptime.Scheduler(period_s)
    settings = {"duration_s": args.duration, "warmup_s": args.warmup, "rate_hz": args.rate, "seed": args.seed}
    episode = looptime.open_episode(args.runs_dir, args, sched, settings=settings)
    rec = looptime.Recorder(
        stages=STAGES,
        phases=["warmup", "running"],
        attributes={"mode": ["inline", "background"]},
        values={"camera_frame": ("int", "count"), "dt_measured_us": ("float", "us")},
        # Data age: the loop records which camera frame it used (stamped at
        # capture by the reader thread); older than 100 ms is stale.
        sources={"camera": {"max_age_s": 0.1}},
        max_cycles=args.timing_max_cycles if args.control_timing else 1,
        max_spans_per_cycle=16 if args.control_timing else 1,
        nominal_period_ns=int(round(period_s * 1e9)),
        ring="auto" if args.control_timing else "heap",
        episode_dir=episode.dir,
        metadata={"program": "examples/python/robot_loop.py"},
        # The camera reader gets its own recorder and ring, built here with
        # the loop's; the loop recorder's finish writes its files too.
        threads={
            "camera_reader": {
                "stages": ["grab", "decode"],
                "sources": {"camera": {}},
                "max_cycles": 2000 if args.control_timing else 1,
                "ring": "auto" if args.control_timing else "heap",
            }
        },
    )
    for w in episode.setup_control_thread():
        print(f"[warn] {w}", file=sys.stderr)
    print(
        f"[run] {episode.dir}: {args.rate:g} Hz for {args.duration:g} s (+{args.warmup:g} s warmup), "
        f"control timing {'on' if args.control_timing else 'off'}",
        flush=True,
    )

    # Ids resolved once, before the loop: the loop itself allocates nothing.
    warmup, running = rec.phase_id("warmup"), rec.phase_id("running")
    camera, viewer, policy, decode, executor, send, recording = (rec.stage_id(s) for s in STAGES)
    frame_id, dt_id = rec.value_id("camera_frame"), rec.value_id("dt_measured_us")
    camera_src = rec.source_id("camera")

    rng = random.Random(args.seed)
    controller = Controller()
    halt = threading.Event()
    ticks = [0]
    helper = threading.Thread(target=maintenance, args=(halt, ticks), name="maintenance", daemon=True)
    helper.start()
    frames = [0, None]
    reader = None
    if args.control_timing:
        reader = threading.Thread(
            target=camera_reader,
            args=(rec.thread("camera_reader"), halt, frames, args.seed),
            name="camera_reader",
        )
        reader.start()
    frame = 0
    cycle = 0
    record = args.control_timing
    while cycle < planned and not stop["requested"]:
        tick = sched.wait(rec if record else None)
        if stop["requested"]:
            break
        if not record:
            controller.step(0.1, tick.dt_measured)
            cycle += 1
            continue
        with rec.cycle(warmup if cycle < warmup_cycles else running, tick):
            with rec.span(camera, mode="background"):
                busy_us(rng.uniform(150, 350))
                if cycle % 3:
                    frame += 1  # a 66 Hz camera behind a 100 Hz loop
                newest = frames[1]
                if newest is not None:
                    rec.sample(camera_src, newest[0], newest[1])
            with rec.span(viewer):
                busy_us(rng.uniform(20, 60))
            with rec.span(policy):
                busy_us(rng.uniform(800, 1500))
                with rec.span(decode):
                    busy_us(rng.uniform(100, 200))
            with rec.span(executor):
                controller.step(0.1, tick.dt_measured)
                busy_us(rng.uniform(50, 100))
            with rec.span(send):
                busy_us(rng.uniform(60, 150))
            with rec.span(recording):
                busy_us(rng.uniform(20, 50))
            rec.set_value(frame_id, frame)
            rec.set_value(dt_id, tick.dt_measured_ns / 1e3)
        cycle += 1
    halt.set()
    helper.join()
    if reader is not None:
        reader.join()  # the finish reads its recorder: it must have stopped

    complete = cycle == planned and not stop["requested"]
    status = "complete" if complete else "aborted"
    if record:
        report = rec.finish(episode.dir, status=status)
        print(
            f"[run] {status}: {cycle} cycles, {report.retained_cycles} recorded, "
            f"{report.dropped_cycles} dropped, {report.spans_dropped} spans dropped; "
            f"camera reader {frames[0]} frames; maintenance ran {ticks[0]} times",
            flush=True,
        )
    episode.finish(rec if record else None, sched, complete=complete, planned_cycles=planned)
    print(f"[run] wrote {episode.dir}", flush=True)
    return 0 if complete else 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
