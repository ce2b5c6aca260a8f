#!/usr/bin/env bash
# `fleet` with the analyzer against a baseline analyzer (e.g. the last
# landing's build) over the same synthetic fleet, interleaved: medians of
# RUNS of the wall time and peak RSS, and the speed ratio
# (docs/performance.md §3, "fleet").
#
#   BASELINE=/path/to/old/analyze_control_timing EPISODES=200 CYCLES=20000 RUNS=3 \
#     bash bench/fleet_speed.sh
#
# ANALYZER names the analyzer to measure (default: the release build, built
# here). The fleet comes from bench/make_fleet.sh (reused when present).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
EPISODES="${EPISODES:-200}"
CYCLES="${CYCLES:-20000}"
RUNS="${RUNS:-3}"
JOBS="${JOBS:-2}"
WORK="${WORK:-/tmp/looptime-fleet-$EPISODES-$CYCLES}"
: "${BASELINE:?BASELINE must name the analyzer to compare against}"
if [[ -z "${ANALYZER:-}" ]]; then
    ANALYZER=$(release_bin analyze_control_timing -p looptime-analyze --bin analyze_control_timing)
fi
[[ -d "$WORK/root" ]] || bash bench/make_fleet.sh "$EPISODES" "$CYCLES" "$WORK/root"
python3 - "$WORK" "$RUNS" "$JOBS" "$ANALYZER" "$BASELINE" <<'PY'
import os, statistics, subprocess, sys, time
work, runs, jobs, analyzer, baseline = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def fleet(binary, name):
    out = os.path.join(work, f"speed-{name}")
    t = time.perf_counter()
    p = subprocess.Popen([binary, "fleet", os.path.join(work, "root"), "--out", out, "--jobs", jobs],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{binary} fleet exited {status}")
    return time.perf_counter() - t, ru.ru_maxrss / 1024
fleet(analyzer, "warm")  # the page cache
res = {"analyzer": [], "baseline": []}
for r in range(runs):
    res["baseline"].append(fleet(baseline, "baseline"))
    res["analyzer"].append(fleet(analyzer, "analyzer"))
    print(f"run {r + 1}/{runs}: baseline {res['baseline'][-1][0]:.2f} s, analyzer {res['analyzer'][-1][0]:.2f} s", file=sys.stderr)
med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in res.items()}
print("| fleet --jobs", jobs, "| wall s | peak RSS MB |")
print("|---|---|---|")
for k in ("baseline", "analyzer"):
    print(f"| {k} | {med[k][0]:.2f} | {med[k][1]:.0f} |")
print(f"\nfleet speed / baseline: {med['baseline'][0] / med['analyzer'][0]:.2f}x (median of {runs})")
PY
