#!/usr/bin/env bash
# Analyzer throughput and peak memory against the floor: reading the same
# JSONL line by line into the schema types with serde_json alone, measured in
# the same run. Each measurement is a separate process (peak RSS = VmHWM),
# repeated RUNS times; medians are reported. Beside them, what a Python
# user would write instead: polars (Python) computing the core figures
# (bench/polars_baseline.py); POLARS_PY=0 leaves it out.
#
#   SIZES="200000 1000000" RUNS=3 bash bench/analyze_throughput.sh
#   ANALYZER=/path/to/throughput  (a throughput harness built elsewhere,
#                                  e.g. from an older tree, to compare)
#   BASELINE=/path/to/throughput  (a second harness, e.g. the last landing's,
#                                  run interleaved with the first: its
#                                  analysis is reported as a speed ratio)
#
# The ratio `analysis / floor` (the floor's time over the analysis's: above
# 1, faster than one core of serde_json) is printed at the end; record it
# in docs/performance.md §3 at every landing that touches the loader.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
SIZES="${SIZES:-20000 1000000}"
RUNS="${RUNS:-3}"
WORK="${WORK:-/tmp/looptime-bench}"
if [[ -n "${ANALYZER:-}" ]]; then
    bin=$ANALYZER
else
    bin=$(release_bin examples/throughput -p looptime-analyze --example throughput)
fi
mkdir -p "$WORK"
for n in $SIZES; do
    dir="$WORK/episode-$n"
    if [[ ! -s "$dir/control_timing.jsonl" ]]; then
        echo "generating $n cycles (10 spans each) in $dir ..." >&2
        "$bin" gen "$dir" "$n"
    fi
    for r in $(seq "$RUNS"); do
        "$bin" floor "$dir"
        "$bin" analyze "$dir"
        if [[ -n "${BASELINE:-}" ]]; then
            "$BASELINE" analyze "$dir" | sed 's/"mode":"analyze"/"mode":"baseline"/'
        fi
        if [[ "${POLARS_PY:-1}" == 1 ]]; then
            python3 bench/polars_baseline.py "$dir"
        fi
    done > "$WORK/results-$n.jsonl"
done
python3 - "$WORK" $SIZES <<'PY'
import json, statistics, sys
work, sizes = sys.argv[1], sys.argv[2:]
print("| cycles | JSONL MB | floor MB/s | analysis MB/s | analysis / floor | analysis cycles/s | floor peak RSS MB | analysis peak RSS MB | RSS / JSONL | polars-python s | analysis speed / polars-python | baseline / floor | analysis speed / baseline | baseline peak RSS MB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
ratios = []
for n in sizes:
    rows = [json.loads(l) for l in open(f"{work}/results-{n}.jsonl")]
    def med(mode, key):
        return statistics.median(r[key] for r in rows if r["mode"] == mode)
    size = rows[0]["bytes"] / 1e6
    f_s, a_s = med("floor", "seconds"), med("analyze", "seconds")
    a_rss, f_rss = med("analyze", "peak_rss") / 1e6, med("floor", "peak_rss") / 1e6
    py = [r["seconds"] for r in rows if r["mode"] == "polars_python"]
    py_s = statistics.median(py) if py else None
    py_cells = f"{py_s:.2f} | {py_s / a_s:.1f}×" if py_s else "n/a | n/a"
    if any(r["mode"] == "baseline" for r in rows):
        b_s, b_rss = med("baseline", "seconds"), med("baseline", "peak_rss") / 1e6
        base_cells = f"{f_s / b_s:.2f} | {b_s / a_s:.2f}× | {b_rss:.0f}"
    else:
        base_cells = "n/a | n/a | n/a"
    print(f"| {int(n):,} | {size:.1f} | {size / f_s:.0f} | {size / a_s:.0f} | {f_s / a_s:.2f} | {int(n) / a_s:,.0f} | {f_rss:.0f} | {a_rss:.0f} | {a_rss / size:.2f} | {py_cells} | {base_cells} |")
    # Paired: each run's floor over the analysis that ran right after it,
    # so that a slow stretch of a shared host weighs on both; the median
    # of those, and their range.
    floors = [r["seconds"] for r in rows if r["mode"] == "floor"]
    analyses = [r["seconds"] for r in rows if r["mode"] == "analyze"]
    paired = sorted(f / a for f, a in zip(floors, analyses))
    ratios.append((int(n), f_s / a_s, statistics.median(paired), paired[0], paired[-1]))
print()
for n, r, p, lo, hi in ratios:
    print(f"analysis / floor at {n:,} cycles: {r:.2f} (median of the runs; target >= 1.5); "
          f"paired run by run: median {p:.2f}, range {lo:.2f}-{hi:.2f}")
PY
