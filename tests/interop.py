#!/usr/bin/env python3
"""Checks the evidence-format claim: pandas and polars load
control_timing.jsonl (and, schema 2, every background thread's file) with
their stock JSON-lines readers, no custom code.

Usage: python3 tests/interop.py EPISODE_DIR [EPISODE_DIR ...]
"""
import json
import pathlib
import sys

import pandas as pd
import polars as pl

def check(ep: pathlib.Path) -> None:
    path = ep / "control_timing.jsonl"
    n_lines = sum(1 for _ in open(path))

    # pandas: one call; the header is the row whose type is "header".
    df = pd.read_json(path, lines=True)
    cycles = df[df["type"] == "cycle"]
    assert len(cycles) == n_lines - 1, (len(cycles), n_lines)
    assert (cycles["start_ns"].diff().dropna() > 0).all(), "starts increase"
    spans = pd.json_normalize(cycles.to_dict("records"), record_path="spans", meta=["cycle", "phase"])
    assert {"stage", "wall_ns", "cpu_ns", "depth"} <= set(spans.columns)
    print(f"pandas: {len(cycles)} cycles, {len(spans)} spans, stages {sorted(spans['stage'].unique())}")

    # polars: one call; filter the header out.
    pf = pl.read_ndjson(path, infer_schema_length=None)
    pc = pf.filter(pl.col("type") == "cycle")
    assert pc.height == n_lines - 1
    ps = pc.select("cycle", "phase", "spans").explode("spans").unnest("spans")
    per = pc.select((pl.col("start_ns").diff() / 1e6).alias("period_ms")).drop_nulls()
    print(f"polars: {pc.height} cycles, {ps.height} spans, median period {per['period_ms'].median():.3f} ms")

    summary = json.loads((ep / "control_timing_summary.json").read_text())
    assert summary["capture"]["retained_cycles"] == len(cycles)

    # Schema 2: each background thread's file loads the same way.
    for t in summary.get("threads", []):
        tp = ep / t["cycles_file"]
        tdf = pd.read_json(tp, lines=True)
        tc = tdf[tdf["type"] == "cycle"]
        tpl = pl.read_ndjson(tp, infer_schema_length=None).filter(pl.col("type") == "cycle")
        assert len(tc) == tpl.height == t["retained_cycles"], (t, len(tc), tpl.height)
        print(f"thread {t['name']}: pandas and polars {len(tc)} cycles")
    print("interop: ok")


for arg in sys.argv[1:]:
    check(pathlib.Path(arg))
