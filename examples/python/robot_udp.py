#!/usr/bin/env python3
"""A loop paced by the robot, in Python: it blocks on the robot's states
over UDP and answers each one (docs/input-paced.md). Start the robot peer
first, then this client with the port it printed:

    ./target/release/looptime robot-peer --rate 1000 --duration 2 --stall-every-ms 250 --stall-ms 5
    python3 examples/python/robot_udp.py --port PORT --runs-dir runs/udp-py
    ./target/release/analyze_control_timing --episode runs/udp-py/latest

Each cycle: the receive (recorded as the wait), an input-paced release
(the arrival: the kernel's receive stamp, `looptime.recv_stamped`, with
the time the loop read it beside it, and the state's own counter), a
`control` span, and the answer in `robot_send_command`. With
``--late-every N`` every N-th answer leaves 2 ms late, a fault the report
must find. The loop ends at the robot's end of stream, or when its states
stop for 100 ms. It writes an episode as every looptime program does:
``<runs-dir>/session-<UTC>/rollout-000`` with its manifest, and
``<runs-dir>/latest``.
"""

from __future__ import annotations

import argparse
import socket
import struct
import time

import looptime

STATE = struct.Struct("<QQd")  # seq, robot clock ns, success rate
ANSWER = struct.Struct("<Q")  # the seq answered
END = b"LTEND\0\0\0"  # the peer's end of stream: these 8 bytes, then its last seq


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True, help="the robot peer's UDP port on 127.0.0.1")
    p.add_argument("--rate", type=float, default=1000.0, help="the robot's state rate, Hz (the nominal period)")
    p.add_argument("--runs-dir", required=True, help="where the session and its episode go")
    p.add_argument("--late-every", type=int, default=0, help="answer every N-th state 2 ms late (0: never)")
    args = p.parse_args()

    # The robot paces the loop: no scheduler; the episode declares the
    # robot's nominal period, and the pacer gives each cycle its dt.
    timing = argparse.Namespace(control_timing=True, timing_max_cycles=looptime.DEFAULT_TIMING_MAX_CYCLES)
    settings = {"rate_hz": args.rate, "late_every": args.late_every}
    episode = looptime.open_episode(args.runs_dir, timing, period_s=1.0 / args.rate, settings=settings)
    pacer = looptime.InputPacer(max_dt_s=3.0 / args.rate)
    rec = looptime.Recorder(
        episode_dir=episode.dir,
        stages=["control", "robot_send_command"],
        phases=["running"],
        values={"control_command_success_rate": ("float", "ratio")},
        nominal_period_ns=round(1e9 / args.rate),
        ring="heap",
    )
    running = rec.phase_id("running")
    control, send = rec.stage_id("control"), rec.stage_id("robot_send_command")
    success = rec.value_id("control_command_success_rate")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", args.port))
    sock.settimeout(0.1)
    # The kernel stamps each state when it reaches the socket: a state that
    # waited there while the loop was behind shows as socket wait.
    looptime.enable_rx_timestamps(sock)
    sock.send(ANSWER.pack(0))  # hello: the peer answers to this address
    cycle = 0
    while True:
        rec.begin_wait()
        try:
            buf, arrival = looptime.recv_stamped(sock, 64)
        except (TimeoutError, ConnectionRefusedError):
            break  # the robot stopped: the motion ends
        finally:
            rec.end_wait()
        if len(buf) == 16 and buf[:8] == END:
            break  # the robot's stream ended
        if len(buf) != STATE.size:
            continue  # neither a state nor the end: skipped
        seq, robot_ns, rate = STATE.unpack_from(buf)
        tick = pacer.arrived(arrival, seq, input_clock_ns=robot_ns)  # tick.dt_measured: the controller's dt
        rec.begin_cycle(running, input=(arrival, seq))
        with rec.span(control):
            if args.late_every and cycle % args.late_every == args.late_every - 1:
                time.sleep(0.002)  # an injected late answer
        with rec.span(send):
            sock.send(ANSWER.pack(seq))
        rec.set_value(success, rate)
        rec.end_cycle()
        cycle += 1
    report = rec.finish(episode.dir)
    episode.finish(rec, complete=True)  # counts the recorder's cycles
    print(f"robot_udp.py: {report.retained_cycles} cycles into {episode.dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
