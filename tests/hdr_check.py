#!/usr/bin/env python3
"""Checks `analyze_control_timing export --format hdr`: the Python
`hdrhistogram` package (a third-party decoder) reads every histogram of
the log, its counts equal the analyzer's, and its percentiles agree with
the analyzer's nearest-rank p50, p90 and p99 within one bucket, and its
maximum (decoded, and the line's Interval_Max) is the analyzer's max within
one bucket.

Usage: python3 tests/hdr_check.py ANALYZER EPISODE_DIR [EPISODE_DIR ...]

"Within one bucket": HdrHistogram reports a value as the highest value of
its bucket (3 significant digits: a bucket spans at most 1/1024 of its
values), and ranks a percentile as round(p/100 * n) where the analyzer
takes ceil(p/100 * n). Where the two rules give the same rank, the decoded
value must lie in the bucket of the analyzer's value; where they differ
(they then pick neighbouring samples), it must lie within the
distribution's range. The script prints how many were checked each way.
"""
import json
import math
import pathlib
import subprocess
import sys
import tempfile

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader


def report(analyzer: str, ep: pathlib.Path) -> dict:
    out = subprocess.run([analyzer, "report", str(ep), "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def expected(r: dict, prefix: str = "") -> dict:
    """tag -> the analyzer's distribution figures, from its report."""
    out = {}
    for p in r["phases"]:
        for m in ("period", "work", "sleep_overshoot", "deadline_lag"):
            d = p.get(m)
            if d and d.get("count"):
                out[f"{prefix}{p['phase']}/{m}"] = d
    for s in r.get("stages", []):
        name = s["path"]
        if s.get("attrs"):
            name += "[" + ";".join(f"{k}={v}" for k, v in sorted(s["attrs"].items())) + "]"
        name = name.replace(",", "_").replace(" ", "_")
        out[f"{prefix}{s['phase']}/stage_wall/{name}"] = s["wall"]
        if s.get("cpu") and s["cpu"].get("count"):
            out[f"{prefix}{s['phase']}/stage_cpu/{name}"] = s["cpu"]
    return out


def check(analyzer: str, ep: pathlib.Path) -> None:
    r = report(analyzer, ep)
    want = expected(r)
    for t in r.get("threads", []):
        want.update(expected(t, t["thread"] + "/"))
    with tempfile.TemporaryDirectory() as tmp:
        log = pathlib.Path(tmp) / "episode.hlog"
        subprocess.run([analyzer, "export", str(ep), "--format", "hdr", "--out", str(log)],
                       check=True, capture_output=True)
        ref = HdrHistogram(1, 3_600_000_000_000, 3)
        reader = HistogramLogReader(str(log), ref)
        got = {}
        while True:
            h = reader.get_next_interval_histogram()
            if h is None:
                break
            got[h.get_tag()] = h
        # Interval_Max (ms), from each line as written.
        interval_max = {}
        for line in log.read_text().splitlines():
            if line.startswith("Tag="):
                tag, _start, _length, mx = line[4:].split(",")[:4]
                interval_max[tag] = float(mx)
    missing = sorted(set(want) - set(got))
    assert not missing, f"{ep}: tags missing from the log: {missing}"
    checked = exact = 0
    for tag, d in want.items():
        h = got[tag]
        assert h.get_total_count() == d["count"], (tag, h.get_total_count(), d["count"])
        # The maximum, decoded and as Interval_Max, is the analyzer's exact
        # max to within its bucket (HdrHistogram reports a bucket's top).
        top = max(d["max_ns"], 0)
        lo, hi = h.get_lowest_equivalent_value(top), h.get_highest_equivalent_value(top)
        assert lo <= h.get_max_value() <= hi, (tag, h.get_max_value(), d["max_ns"])
        assert lo / 1e6 - 5e-4 <= interval_max[tag] <= hi / 1e6 + 5e-4, (tag, interval_max[tag], d)
        for q, key in ((50, "p50_ns"), (90, "p90_ns"), (99, "p99_ns")):
            v = max(d[key], 0)
            hv = h.get_value_at_percentile(q)
            same = h.get_lowest_equivalent_value(v) <= hv <= h.get_highest_equivalent_value(v)
            n = d["count"]
            ranks_agree = math.ceil(q / 100 * n) == max(1, int(q / 100 * n + 0.5))
            if ranks_agree:
                assert same, (tag, q, v, hv, d)
            else:
                # The two rank rules pick neighbouring samples: the decoded
                # value is still one of this distribution's buckets.
                assert max(d["min_ns"], 0) <= h.get_highest_equivalent_value(hv) and \
                    h.get_lowest_equivalent_value(hv) <= d["max_ns"], (tag, q, v, hv, d)
            exact += same
            checked += 1
    print(f"{ep}: {len(want)} histograms, {checked} percentiles, {exact} in the analyzer's bucket")


if __name__ == "__main__":
    analyzer = sys.argv[1]
    for arg in sys.argv[2:]:
        check(analyzer, pathlib.Path(arg))
