#!/usr/bin/env bash
# Time from a fresh clone to the first analysed episode: the README's main
# command (`cargo build --release`, a 5 s `looptime serve
# --control-timing`, the analyzer on `runs/latest`), in a new clone with an
# empty target directory, for each revision given, one after the other.
# The cargo registry is whatever this machine has cached (CARGO_HOME);
# nothing else should run meanwhile.
#
#   bash bench/first_episode.sh [REV...]        (default: HEAD)
#   TIMINGS=1 bash bench/first_episode.sh REV   (adds cargo's --timings
#                                               report; the path is printed)
#   LOOPTIME_BIN_DIR=DIR bash bench/first_episode.sh
#       the clone, the serve and the analysis with the binaries in DIR and
#       no build (the docs runner's smoke run: it checks the script, not
#       the build's time, which is the figure; the build's columns then
#       read "-", never a figure of a build that did not happen)
#
# Prints one line per revision: rev, build seconds, serve + analyze
# seconds, total seconds, the number of compiled units, and the size of
# target/release.
set -euo pipefail
repo=$(cd -P "$(dirname "$0")/.." && pwd)
revs=("$@")
[[ ${#revs[@]} -gt 0 ]] || revs=(HEAD)
work=$(mktemp -d /tmp/looptime-first-episode.XXXXXX)
trap 'rm -rf "$work"' EXIT
printf '%-10s %9s %9s %9s %6s %8s\n' rev build_s run_s total_s units release
for rev in "${revs[@]}"; do
    dir="$work/$rev"
    git clone -q "$repo" "$dir"
    git -C "$dir" checkout -q "$(git -C "$repo" rev-parse "$rev")"
    cd "$dir"
    # A fresh target directory in the clone, whatever CARGO_TARGET_DIR the
    # caller has (the measure is a fresh clone's first build).
    export CARGO_TARGET_DIR="$dir/target"
    extra=()
    [[ "${TIMINGS:-0}" == 1 ]] && extra=(--timings)
    bin="$CARGO_TARGET_DIR/release"
    t0=$(date +%s.%N)
    if [[ -n "${LOOPTIME_BIN_DIR:-}" ]]; then
        bin=$LOOPTIME_BIN_DIR
    else
        cargo build --release -q "${extra[@]}" 2>"$dir/build.log"
    fi
    t1=$(date +%s.%N)
    "$bin/looptime" serve --control-timing >/dev/null
    "$bin/analyze_control_timing" --episode runs/latest >/dev/null
    t2=$(date +%s.%N)
    if [[ -n "${LOOPTIME_BIN_DIR:-}" ]]; then
        build=- units=- size=- total=-
    else
        build=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
        total=$(awk -v a="$t0" -v c="$t2" 'BEGIN { printf "%.1f", c - a }')
        units=$(find "$CARGO_TARGET_DIR/release/.fingerprint" -mindepth 1 -maxdepth 1 -type d | wc -l)
        size=$(du -sh "$CARGO_TARGET_DIR/release" | cut -f1)
    fi
    run=$(awk -v b="$t1" -v c="$t2" 'BEGIN { printf "%.1f", c - b }')
    printf '%-10s %9s %9s %9s %6s %8s\n' "${rev:0:10}" "$build" "$run" "$total" "$units" "$size"
    if [[ "${TIMINGS:-0}" == 1 ]]; then
        keep="/tmp/looptime-timings-${rev:0:10}.html"
        cp "$CARGO_TARGET_DIR/cargo-timings/cargo-timing.html" "$keep"
        echo "  timings: $keep"
    fi
    cd "$repo"
done
