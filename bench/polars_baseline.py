#!/usr/bin/env python3
"""What a Python user would write instead of the analyzer: polars (Python)
computing the core figures of an episode from control_timing.jsonl.

    python3 bench/polars_baseline.py EPISODE_DIR

Figures, per phase: loop Hz and period p50/p99/p99.9 (periods only between
adjacent cycles of one segment, as docs/metrics.md defines them), work,
sleep overshoot (cycles that waited and were not overdue) and deadline lag
p50/p99; per (phase, stage): span wall p50/p99. Percentiles use polars'
`interpolation="higher"`, the nearest to the analyzer's nearest-rank rule a
user would reach for (it picks rank ⌈q·(n−1)⌉ + 1, not ⌈q·n⌉, so a figure
may differ from the analyzer's by one sample).

Prints one JSON line like the throughput harness: mode "polars_python",
seconds (read and compute, in this process), bytes, cycles and peak RSS.
"""
import io
import json
import pathlib
import resource
import sys
import time

import polars as pl


def main(ep: pathlib.Path) -> None:
    path = ep / "control_timing.jsonl"
    t0 = time.perf_counter()
    raw = path.read_bytes()
    body = raw[raw.index(b"\n") + 1:]  # the header line has its own shape
    df = pl.read_ndjson(io.BytesIO(body))
    df = df.sort("cycle")
    seg = (
        (pl.col("phase") != pl.col("phase").shift(1))
        | (pl.col("cycle") != pl.col("cycle").shift(1) + 1)
    ).fill_null(True).cum_sum()
    df = df.with_columns(segment=seg)
    df = df.with_columns(
        period=pl.col("start_ns").diff().over("segment"),
        work=pl.col("end_ns") - pl.col("start_ns"),
        overshoot=pl.when(~pl.col("overdue").fill_null(False))
        .then(pl.col("wake_ns") - pl.col("target_ns")),
        lag=pl.col("start_ns") - pl.col("target_ns"),
    )
    q = lambda c, x: pl.col(c).quantile(x, interpolation="higher")  # noqa: E731
    phases = df.group_by("phase").agg(
        cycles=pl.len(),
        loop_hz=1e9 / pl.col("period").mean(),
        period_p50=q("period", 0.5),
        period_p99=q("period", 0.99),
        period_p999=q("period", 0.999),
        work_p50=q("work", 0.5),
        work_p99=q("work", 0.99),
        overshoot_p50=q("overshoot", 0.5),
        overshoot_p99=q("overshoot", 0.99),
        lag_p50=q("lag", 0.5),
        lag_p99=q("lag", 0.99),
    )
    spans = (
        df.select("phase", "spans")
        .explode("spans")
        .drop_nulls("spans")
        .unnest("spans")
    )
    stages = spans.group_by("phase", "stage").agg(
        spans=pl.len(),
        wall_p50=q("wall_ns", 0.5),
        wall_p99=q("wall_ns", 0.99),
    )
    secs = time.perf_counter() - t0
    assert phases.height > 0 and stages.height > 0
    print(json.dumps({
        "mode": "polars_python",
        "seconds": round(secs, 4),
        "bytes": len(raw),
        "cycles": df.height,
        # ru_maxrss is in KiB on Linux.
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
