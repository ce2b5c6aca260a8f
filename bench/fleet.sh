#!/usr/bin/env bash
# `fleet` at fleet scale (docs/performance.md §9):
# * `fleet` wall time against the single-episode analyzer run one episode
#   after another over the same files;
# * peak RSS of `fleet` over a quarter of the episodes and over all;
# * the Parquet dataset's size against the JSONL's, and the docs/sql
#   queries on DuckDB over it against rerunning `fleet`.
# Medians of RUNS; every measurement is its own process (wall time, CPU
# time and peak RSS from wait4).
#
#   EPISODES=200 CYCLES=20000 RUNS=3 bash bench/fleet.sh    # full size
#   EPISODES=6 CYCLES=2000 RUNS=1 ANALYZER=target/debug/analyze_control_timing \
#     LOOPTIME=target/debug/looptime bash bench/fleet.sh    # CI's smoke test
#
# ANALYZER and LOOPTIME name prebuilt binaries (default: release builds,
# built here).
#
# The episodes come from bench/make_fleet.sh (4 uncapped `serve` runs with
# µs stage costs, replicated by hard links), so the disk holds four
# episodes whatever EPISODES is, plus the Parquet dataset (about 0.1× the
# JSONL). The files are read from the page cache after a warm-up pass, so
# the figures are the analyzer's CPU cost, not the disk's. Needs Python
# with duckdb.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
EPISODES="${EPISODES:-200}"
CYCLES="${CYCLES:-20000}"
RUNS="${RUNS:-3}"
WORK="${WORK:-/tmp/looptime-fleet-$EPISODES-$CYCLES}"
if [[ -z "${ANALYZER:-}" ]]; then
    ANALYZER=$(release_bin analyze_control_timing -p looptime-analyze --bin analyze_control_timing)
fi
bash bench/make_fleet.sh "$EPISODES" "$CYCLES" "$WORK/root"
python3 bench/fleet_measure.py "$WORK" "$RUNS" "$ANALYZER"
