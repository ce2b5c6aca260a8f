#!/usr/bin/env python3
"""Cost of a looptime span from Python, against a pure-Python baseline, in
the same run.

Baseline: ``time.perf_counter_ns()`` twice, both values stored into a
preallocated list (what a home-made Python logger does at the least).
Cases, all on one heap-ring recorder inside one open cycle per chunk:

* ``with rec.span(STAGE):`` with the stage id (wall time only);
* ``with rec.span(STAGE, attrs=((KEY, VALUE),)):`` with one attribute by
  ids;
* ``with rec.span("name"):`` by name;
* ``begin_span`` / ``end_span``;
* ``with rec.span(STAGE):`` with thread CPU time (two more clock reads,
  a system call each on most kernels), against the baseline plus two
  ``time.thread_time_ns()`` calls.

Each round times one chunk of 1,000 operations of every case, the case
order rotating by round; the figures are medians over rounds of the
per-operation cost, so drift of the machine cancels out. Target: the
``with`` span at most 1.5x the baseline.

    python3 bench/python_span.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import looptime

CHUNK = 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=400)
    rounds = ap.parse_args().rounds

    wall = looptime.Recorder(stages=["work"], attributes={"camera": ["left", "right"]}, max_cycles=16,
                             max_spans_per_cycle=CHUNK, thread_cpu=False, ring="heap")
    cpu = looptime.Recorder(stages=["work"], max_cycles=16, max_spans_per_cycle=CHUNK, thread_cpu=True, ring="heap")
    work = 0
    buf = [0] * (2 * CHUNK)
    pc = time.perf_counter_ns
    tt = time.thread_time_ns

    def baseline():
        t0 = pc()
        for i in range(CHUNK):
            a = pc()
            b = pc()
            buf[2 * i] = a
            buf[2 * i + 1] = b
        return pc() - t0

    def baseline_cpu():
        t0 = pc()
        for i in range(CHUNK):
            c = tt()
            a = pc()
            b = pc()
            d = tt()
            buf[2 * i] = a - c
            buf[2 * i + 1] = b - d
        return pc() - t0

    def with_id(rec):
        def run():
            rec.begin_cycle(0)
            t0 = pc()
            for _ in range(CHUNK):
                with rec.span(work):
                    pass
            t = pc() - t0
            rec.end_cycle()
            return t

        return run

    right = (wall.attr_id("camera", "right"),)

    def with_attr():
        wall.begin_cycle(0)
        t0 = pc()
        for _ in range(CHUNK):
            with wall.span(work, attrs=right):
                pass
        t = pc() - t0
        wall.end_cycle()
        return t

    def with_name():
        wall.begin_cycle(0)
        t0 = pc()
        for _ in range(CHUNK):
            with wall.span("work"):
                pass
        t = pc() - t0
        wall.end_cycle()
        return t

    def begin_end():
        wall.begin_cycle(0)
        t0 = pc()
        for _ in range(CHUNK):
            wall.end_span(wall.begin_span(work))
        t = pc() - t0
        wall.end_cycle()
        return t

    def empty_loop():
        t0 = pc()
        for _ in range(CHUNK):
            pass
        return pc() - t0

    cases = {
        "baseline: 2x perf_counter_ns + 2 list stores": baseline,
        "with rec.span(id)": with_id(wall),
        "with rec.span(id, attrs=((key_id, value_id),))": with_attr,
        'with rec.span("name")': with_name,
        "begin_span / end_span": begin_end,
        "baseline + 2x thread_time_ns": baseline_cpu,
        "with rec.span(id), thread CPU time": with_id(cpu),
        "empty loop (not subtracted)": empty_loop,
    }
    names = list(cases)
    per = {n: [] for n in names}
    for r in range(rounds + 20):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            t = cases[n]()
            if r >= 20:  # warm-up rounds
                per[n].append(t / CHUNK)
    assert wall.spans_dropped == 0 and cpu.spans_dropped == 0, "the bench must not hit the drop path"
    med = {n: statistics.median(v) for n, v in per.items()}
    base = med[names[0]]
    base_cpu = med["baseline + 2x thread_time_ns"]
    print("| case | median per op (ns) | ratio |")
    print("|---|---|---|")
    for n in names:
        ref = base_cpu if "thread" in n or "CPU" in n else base
        ratio = "" if n.startswith("empty") or n.startswith("baseline:") else f"{med[n] / ref:.2f}"
        if n == "baseline + 2x thread_time_ns":
            ratio = f"{med[n] / base:.2f} (of the baseline)"
        print(f"| {n} | {med[n]:.1f} | {ratio} |")
    print(f"(medians over {rounds} rounds of {CHUNK}; ratios against the baseline of the same kind; "
          f"target: `with rec.span(id)` <= 1.5x the baseline)")


if __name__ == "__main__":
    main()
