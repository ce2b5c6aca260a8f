#!/usr/bin/env python3
"""The recorder's cost per cycle of 10 spans in each CPU-time mode, from
Python, against a clock-read baseline, in one run (docs/performance.md,
CPU-time modes).

A cycle: ``with rec.cycle(0):`` holding 5 top-level spans, each with one
nested span (10 ``with rec.span(id):``). The baseline does what a minimal
hand-made Python logger does for the same cycle: 22
``time.perf_counter_ns()`` calls stored into a preallocated list. Each
round times one chunk of ``--cycles`` cycles of every case, the order
rotating by round; the figures are medians over rounds. Also timed: one
``time.thread_time_ns()`` (the CPU clock from Python).

    python3 bench/python_cpu_modes.py [--rounds N] [--cycles N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import looptime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=301)
    ap.add_argument("--cycles", type=int, default=200)
    a = ap.parse_args()
    cycles = a.cycles
    pc = time.perf_counter_ns
    buf = [0] * 22
    modes = ["spans", "cycle", "off"]
    recs = {m: looptime.Recorder(stages=["outer", "inner"], max_cycles=cycles, max_spans_per_cycle=10,
                                 thread_cpu=m, ring="heap") for m in modes}

    def baseline():
        t0 = pc()
        for _ in range(cycles):
            for i in range(22):
                buf[i] = pc()
        return pc() - t0

    def recorder(rec):
        def run():
            t0 = pc()
            for _ in range(cycles):
                with rec.cycle(0):
                    for _ in range(5):
                        with rec.span(0):
                            with rec.span(1):
                                pass
            return pc() - t0
        return run

    def cpu_read():
        tt = time.thread_time_ns
        t0 = pc()
        for _ in range(cycles):
            tt()
        return pc() - t0

    cases = [("baseline: 22 perf_counter_ns stored", baseline)]
    cases += [(f"recorder, `{m}` mode", recorder(recs[m])) for m in modes]
    cases.append(("one CPU-clock read (time.thread_time_ns)", cpu_read))
    per = [[] for _ in cases]
    for r in range(a.rounds):
        for k in range(len(cases)):
            i = (k + r) % len(cases)
            per[i].append(cases[i][1]() / cycles)
    for m in modes:
        assert recs[m].spans_dropped == 0, "the bench must not hit the drop path"
    med = [statistics.median(v) for v in per]
    base = med[0]
    print("| case (Python) | ns per cycle of 10 spans | ratio to the baseline | % of a 1 kHz period |")
    print("|---|---|---|---|")
    for (name, _), v in zip(cases[:-1], med[:-1]):
        print(f"| {name} | {v:.1f} | {v / base:.2f} | {v / 1e4:.3f} |")
    print(f"| {cases[-1][0]} | {med[-1]:.1f} | | |")
    print(f"(medians over {a.rounds} rotating rounds of {cycles} cycles)")


if __name__ == "__main__":
    main()
