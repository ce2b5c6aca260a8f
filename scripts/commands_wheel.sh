#!/usr/bin/env bash
# The commands as a wheel (docs/python.md): build `looptime-commands`
# (crates/commands: maturin's `bin` bindings around the two command crates'
# entry points, release build) and the `looptime` library wheel, install
# both into a clean virtual environment with no Rust toolchain on PATH,
# then record with the Python example and analyze, compare and export with
# the installed commands only.
#
#   bash scripts/commands_wheel.sh          # builds (about 10 minutes on 2 cores), then checks
#   SKIP_BUILD=1 bash scripts/commands_wheel.sh   # reuse the wheels of the last build
#
# Not part of CI: the release build of the analyzer is the long part; the
# run's figures are in docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
wheels="$TARGET_DIR/wheels-commands"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    rm -rf "$wheels"
    start=$(date +%s)
    (cd crates/commands && CARGO_TARGET_DIR="$TARGET_DIR/commands" python3 -m maturin build --release -q -o "$wheels")
    echo "commands wheel: built in $(($(date +%s) - start)) s"
    (cd crates/python && python3 -m maturin build -q -o "$wheels")
fi
cmd_whl=$(ls "$wheels"/looptime_commands-*.whl)
lib_whl=$(ls "$wheels"/looptime-*.whl)
echo "commands wheel: $(basename "$cmd_whl") ($(du -h "$cmd_whl" | cut -f1))"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
clean_path="$work/venv/bin:/usr/local/bin:/usr/bin:/bin"
if env PATH="$clean_path" bash -c 'command -v cargo || command -v rustc' >/dev/null; then
    clean_path="$work/venv/bin:/usr/bin:/bin"
fi
env PATH="$clean_path" bash -c '! command -v cargo && ! command -v rustc' >/dev/null || {
    echo "cannot make a PATH without a Rust toolchain for the check" >&2
    exit 1
}
run() { env -u CARGO_HOME -u RUSTUP_HOME PATH="$clean_path" "$@"; }
run python -m pip install -q --disable-pip-version-check "$lib_whl" "$cmd_whl"
[[ "$(run bash -c 'command -v analyze_control_timing')" == "$work/venv/bin/analyze_control_timing" ]] || {
    echo "analyze_control_timing is not the venv's" >&2
    exit 1
}
run looptime --version
run analyze_control_timing --version
# Two sessions recorded by the Python example with the library wheel...
for side in a b; do
    run python examples/python/robot_loop.py --control-timing --duration 1 --warmup 0.2 \
        --runs-dir "$work/runs-$side" --label "$side" >/dev/null
done
# ...analyzed, compared and exported with the installed commands only.
run analyze_control_timing --episode "$work/runs-a/latest" --json --output "$work/report.json" >/dev/null
run analyze_control_timing compare "$work/runs-a/latest-session" "$work/runs-b/latest-session" \
    --json --output "$work/compare.json" --resamples 100 >/dev/null
run analyze_control_timing export "$work/runs-a/latest" --format mcap --out "$work/a.mcap" 2>/dev/null
run analyze_control_timing export "$work/runs-a/latest" --format chrome --out "$work/a.json" 2>/dev/null
run looptime serve --control-timing --rtf 0 --duration 0.5 --warmup 0 --runs-dir "$work/runs-serve" >/dev/null
run analyze_control_timing --episode "$work/runs-serve/latest" >/dev/null
python3 - "$work" <<'PY'
import json, pathlib, sys
w = pathlib.Path(sys.argv[1])
r = json.loads((w / "report.json").read_text())
assert r["state"] == "complete" and r["run"]["label"] == "a", (r["state"], r["run"])
assert r["data_age"]["sources"][0]["source"] == "camera"
c = json.loads((w / "compare.json").read_text())
assert c["a"].startswith("a ") and c["b"].startswith("b "), (c["a"], c["b"])
assert (w / "a.mcap").stat().st_size > 0 and json.loads((w / "a.json").read_text())["traceEvents"]
print("commands wheel: recorded with the library wheel; report, compare, MCAP and Chrome exports and serve from the installed commands, no Rust on PATH")
PY
