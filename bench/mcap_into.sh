#!/usr/bin/env bash
# `export --format mcap --into`: wall time and peak memory as the robot
# recording doubles. One episode of CYCLES cycles (an uncapped `serve` of
# bench/fleet/fast.toml, µs stage costs), recordings of SIZES_MB megabytes
# on disk (bench/make_recording.py: four topics, CDR-like payloads, zstd
# chunks, under the ros2 profile, over the episode's wall-clock time), then
# for each size, RUNS times, interleaved: the baseline (reading the
# recording once, `cat > /dev/null`, in the same run) and --into itself.
# Each is a child process measured with os.wait4 (wall, peak RSS). Medians.
#
#   bash bench/mcap_into.sh                                  # 500, 1000 and 2000 MB
#   SIZES_MB="20 40" CYCLES=2000 RUNS=1 bash bench/mcap_into.sh   # CI's smoke size
#   ANALYZER=... LOOPTIME=...   (prebuilt binaries; CI's smoke uses the debug build)
#
# The recordings are kept in WORK (default /tmp/looptime-mcap-into) for a
# second run; they take the sum of SIZES_MB on disk, and each output as much.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
SIZES_MB=${SIZES_MB:-"500 1000 2000"}
CYCLES=${CYCLES:-20000}
RUNS=${RUNS:-3}
WORK=${WORK:-/tmp/looptime-mcap-into}
if [[ -z "${ANALYZER:-}" || -z "${LOOPTIME:-}" ]]; then
    LOOPTIME=$(release_bin looptime -p looptime-cli -p looptime-analyze)
    ANALYZER=$(dirname "$LOOPTIME")/analyze_control_timing
fi
mkdir -p "$WORK"
ep="$WORK/runs-$CYCLES/latest"
if [[ ! -s "$ep/control_timing.jsonl" ]]; then
    running_s=$(python3 -c "print(($CYCLES - 100) / 100)")
    sed -e "s/^duration_s = .*/duration_s = $running_s/" \
        -e "s/^timing_max_cycles = .*/timing_max_cycles = $CYCLES/" \
        bench/fleet/fast.toml >"$WORK/episode.toml"
    echo "recording an episode of $CYCLES cycles ..." >&2
    "$LOOPTIME" serve --config "$WORK/episode.toml" --control-timing \
        --runs-dir "$WORK/runs-$CYCLES" >/dev/null
fi
# The recordings start 0.5 s before the episode's first cycle, so that the
# two overlap whatever the recording's length.
start=$(python3 - "$ep/control_timing.jsonl" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    h = json.loads(f.readline())
    first = json.loads(f.readline())
a = h["wall_clock"]["start"]
print(a["realtime_ns"] + first["start_ns"] - a["monotonic_ns"] - 500_000_000)
PY
)
for mb in $SIZES_MB; do
    rec="$WORK/recording-$mb.mcap"
    if [[ ! -s "$rec" ]]; then
        echo "making a recording of $mb MB ..." >&2
        python3 bench/make_recording.py "$mb" "$start" "$rec" >"$rec.json"
    fi
done
python3 - "$WORK" "$RUNS" "$ANALYZER" "$ep" $SIZES_MB <<'PY'
import json, os, statistics, subprocess, sys, time
work, runs, analyzer, ep, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]

def measure(cmd, stdout=subprocess.DEVNULL):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[:4]}... failed:\n{err.decode()}")
    return wall, ru.ru_maxrss * 1024

res = {mb: {"read": [], "into": []} for mb in sizes}
for r in range(runs):
    for mb in sizes:
        rec = f"{work}/recording-{mb}.mcap"
        out = f"{work}/merged-{mb}.mcap"
        print(f"run {r + 1}/{runs}: {mb} MB ...", file=sys.stderr)
        with open(os.devnull, "wb") as null:
            res[mb]["read"].append(measure(["cat", rec], stdout=null))
        res[mb]["into"].append(measure([analyzer, "export", ep, "--format", "mcap", "--into", rec, "--out", out]))
        os.remove(out)
med = statistics.median
base_rss = None
print(f"{runs} runs (medians); episode {ep}")
print()
print("| recording MB on disk | messages | read once (cat) s | --into s | --into / read | peak RSS MB | RSS / smallest's |")
print("|---|---|---|---|---|---|---|")
for mb in sizes:
    info = json.load(open(f"{work}/recording-{mb}.mcap.json"))
    read = med(x[0] for x in res[mb]["read"])
    wall = med(x[0] for x in res[mb]["into"])
    rss = med(x[1] for x in res[mb]["into"])
    base_rss = base_rss or rss
    print(f"| {info['bytes'] / 1e6:,.0f} | {sum(info['messages'].values()):,} | {read:.2f} | {wall:.1f} | "
          f"{wall / read:.1f}× | {rss / 1e6:.0f} | **{rss / base_rss:.2f}×** |")
PY
