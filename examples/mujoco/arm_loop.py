#!/usr/bin/env python3
"""A MuJoCo arm under PD control, in a loop paced and recorded by looptime.

Each cycle reads the arm's joint sensors (``sense``), computes PD torques
toward a moving joint target plus gravity compensation from ``qfrc_bias``
(``control``), steps the physics (``step``: ``--substeps`` calls of
``mj_step``, each ``1 / (rate * substeps)`` seconds of simulated time) and
records the tracking error and the target's phase (``log``). The model is
``examples/mujoco/arm.xml``, the project's own five-joint arm.

    python examples/mujoco/arm_loop.py --control-timing --rate 500 --duration 2
    analyze_control_timing --episode runs/latest

Paced at ``--rtf 1`` the loop runs on the host clock; with ``--rtf 0`` it
runs uncapped on the simulation clock (declared so in the evidence), and two
runs give the same cycle count and the same final state to the last bit
(printed as ``final state sha256:...``). ``--episodes N`` records N rollouts
in one session, each from the start pose, so that ``compare`` takes two
session directories. ``--integrator`` changes what one ``step`` costs and
nothing else: rk4 evaluates the dynamics four times a step.

SIGINT or SIGTERM ends the loop at the next cycle; the rollout is finished
as aborted, the session closed with the reason, and the exit code is 130.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import pathlib
import signal
import sys

import mujoco
import numpy as np

import looptime

MODEL = pathlib.Path(__file__).resolve().parent / "arm.xml"
STAGES = ["sense", "control", "step", "log"]
INTEGRATORS = {
    "euler": mujoco.mjtIntegrator.mjINT_EULER,
    "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
    "rk4": mujoco.mjtIntegrator.mjINT_RK4,
}
# PD gains per joint (base yaw, shoulder, elbow, wrist pitch, wrist roll).
KP = np.array([60.0, 120.0, 80.0, 15.0, 10.0])
KD = np.array([4.0, 8.0, 5.0, 0.8, 0.5])
# The target: each joint swings about the start pose, 0.5 Hz, phases apart.
AMPLITUDE = np.array([0.4, 0.25, 0.3, 0.3, 0.5])
PHASE = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
FREQ_HZ = 0.5


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=500.0, help="loop rate in Hz (default 500)")
    p.add_argument("--rtf", type=float, default=1.0,
                   help="real-time factor: 1 paced (default), 0 uncapped on the simulation clock")
    p.add_argument("--duration", type=float, default=2.0, help="simulated seconds of running phase (default 2)")
    p.add_argument("--warmup", type=float, default=0.2, help="simulated seconds of warmup phase (default 0.2)")
    p.add_argument("--integrator", choices=sorted(INTEGRATORS), default="implicitfast",
                   help="MuJoCo's integrator (default implicitfast); rk4 costs about twice a step")
    p.add_argument("--substeps", type=int, default=2, help="mj_step calls a cycle (default 2)")
    p.add_argument("--episodes", type=int, default=1, help="rollouts in the session (default 1)")
    p.add_argument("--runs-dir", default="runs", help="where the session directory goes (default runs)")
    looptime.add_arguments(p)
    args = p.parse_args(argv)
    if not (0 < args.rate <= 2000):
        p.error(f"--rate must be in (0, 2000] Hz, not {args.rate}")
    if not (args.rtf == 0 or 0 < args.rtf <= 1000):
        p.error(f"--rtf must be 0 (uncapped) or in (0, 1000], not {args.rtf}")
    if args.duration < 0 or args.warmup < 0:
        p.error("--duration and --warmup must be >= 0")
    if not (1 <= args.substeps <= 100):
        p.error(f"--substeps must be from 1 to 100, not {args.substeps}")
    if args.episodes < 1:
        p.error(f"--episodes must be at least 1, not {args.episodes}")
    return args


class Arm:
    """The model and its state, reset to the start pose for each rollout."""

    def __init__(self, rate_hz: float, substeps: int, integrator: str) -> None:
        self.model = mujoco.MjModel.from_xml_path(str(MODEL))
        self.model.opt.timestep = 1.0 / (rate_hz * substeps)
        self.model.opt.integrator = INTEGRATORS[integrator]
        self.data = mujoco.MjData(self.model)
        self.substeps = substeps
        self.home = self.model.key("home").qpos.copy()
        self.lo, self.hi = self.model.actuator_ctrlrange[:, 0].copy(), self.model.actuator_ctrlrange[:, 1].copy()
        n = self.model.nu
        # Buffers reused every cycle: the loop allocates no arrays of its own.
        self.q = np.zeros(n)
        self.qd = np.zeros(n)
        self.target = np.zeros(n)
        self.target_d = np.zeros(n)
        self.tau = np.zeros(n)

    def reset(self) -> None:
        mujoco.mj_resetDataKeyframe(self.model, self.data, 0)
        mujoco.mj_forward(self.model, self.data)

    def sense(self) -> None:
        s = self.data.sensordata
        n = self.model.nu
        self.q[:] = s[:n]
        self.qd[:] = s[n:2 * n]

    def control(self) -> float:
        """PD toward the moving target, plus gravity and Coriolis from
        ``qfrc_bias``; returns the target's phase (rad)."""
        w = 2 * math.pi * FREQ_HZ
        phase = w * self.data.time
        np.sin(phase + PHASE, out=self.target)
        np.cos(phase + PHASE, out=self.target_d)
        self.target *= AMPLITUDE
        self.target += self.home
        self.target_d *= AMPLITUDE * w
        self.tau[:] = KP * (self.target - self.q) + KD * (self.target_d - self.qd) + self.data.qfrc_bias
        np.clip(self.tau, self.lo, self.hi, out=self.data.ctrl)
        return phase % (2 * math.pi)

    def step(self) -> None:
        for _ in range(self.substeps):
            mujoco.mj_step(self.model, self.data)

    def tracking_error(self) -> float:
        return float(np.max(np.abs(self.target - self.q)))

    def state_hash(self) -> str:
        h = hashlib.sha256()
        for a in (self.data.qpos, self.data.qvel, self.data.act, np.array([self.data.time])):
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
        return h.hexdigest()


def run_rollout(args, session, arm: Arm, stop: dict) -> bool:
    """One rollout from the start pose; returns whether it completed."""
    period_s = 1.0 / args.rate
    warmup_cycles = int(round(args.warmup * args.rate))
    planned = warmup_cycles + int(round(args.duration * args.rate))
    sched = looptime.Scheduler(period_s, rtf=args.rtf)
    episode = session.rollout()
    record = args.control_timing
    rec = looptime.Recorder(
        stages=STAGES,
        phases=["warmup", "running"],
        values={"tracking_error": ("float", "rad"), "target_phase": ("float", "rad")},
        max_cycles=args.timing_max_cycles if record else 1,
        max_spans_per_cycle=len(STAGES) if record else 1,
        nominal_period_ns=int(round(period_s * 1e9)),
        ring="auto" if record else "heap",
        episode_dir=episode.dir,
        metadata={"program": "examples/mujoco/arm_loop.py", "mujoco": mujoco.__version__},
        target_clock=sched.clock,
    )
    for w in episode.setup_control_thread():
        print(f"[warn] {w}", file=sys.stderr)
    warmup, running = rec.phase_id("warmup"), rec.phase_id("running")
    sense, control, step, log = (rec.stage_id(s) for s in STAGES)
    err_id, phase_id = rec.value_id("tracking_error"), rec.value_id("target_phase")
    arm.reset()
    cycle = 0
    while cycle < planned and not stop["requested"]:
        tick = sched.wait(rec if record else None)
        if stop["requested"]:
            break
        if not record:
            arm.sense()
            arm.control()
            arm.step()
            cycle += 1
            continue
        with rec.cycle(warmup if cycle < warmup_cycles else running, tick):
            with rec.span(sense):
                arm.sense()
            with rec.span(control):
                phase = arm.control()
            with rec.span(step):
                arm.step()
            with rec.span(log):
                rec.set_value(err_id, arm.tracking_error())
                rec.set_value(phase_id, phase)
        cycle += 1
    complete = cycle == planned and not stop["requested"]
    status = "complete" if complete else "aborted"
    if record:
        report = rec.finish(episode.dir, status=status)
        print(f"[run] {episode.dir}: {status}, {cycle} cycles, {report.retained_cycles} recorded, "
              f"{report.dropped_cycles} dropped", flush=True)
    episode.finish(rec if record else None, sched, complete=complete, planned_cycles=planned)
    print(f"[run] final state sha256:{arm.state_hash()} after {cycle} cycles, "
          f"max tracking error {arm.tracking_error():.4f} rad", flush=True)
    return complete


def main(argv: list[str]) -> int:
    args = parse(argv)
    stop = {"requested": False}

    def on_signal(signum, frame):  # runs inside Scheduler.wait, between cycles
        stop["requested"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    arm = Arm(args.rate, args.substeps, args.integrator)
    settings = {
        "rate_hz": args.rate, "rtf": args.rtf, "duration_s": args.duration, "warmup_s": args.warmup,
        "integrator": args.integrator, "substeps": args.substeps, "episodes": args.episodes,
        "model": MODEL.name, "mujoco": mujoco.__version__,
    }
    sched = looptime.Scheduler(1.0 / args.rate, rtf=args.rtf)
    print(f"[run] {args.rate:g} Hz, rtf {args.rtf:g}, {args.episodes} rollout(s) of {args.duration:g} s "
          f"(+{args.warmup:g} s warmup), integrator {args.integrator}, {args.substeps} substeps, "
          f"control timing {'on' if args.control_timing else 'off'}", flush=True)
    with looptime.open_session(args.runs_dir, args, sched, rollouts=args.episodes, settings=settings,
                               sources=[__file__, str(MODEL)]) as session:
        for _ in range(args.episodes):
            if not run_rollout(args, session, arm, stop):
                session.close("interrupted by a signal")
                break
    print(f"[run] wrote session {session.dir}", flush=True)
    return 0 if not stop["requested"] else 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
