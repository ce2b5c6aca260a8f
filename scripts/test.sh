#!/usr/bin/env bash
# looptime's test command: installs what the suites need (when it can) and
# runs every suite, Rust, C/C++ and Python.
#
#   bash scripts/test.sh
#
# 1. cargo test --workspace (Rust; leaves the analyzer in target/debug);
# 2. C and C++: the ABI tests under ctest (strict C99, a counting malloc
#    across 100,000 cycles, the C++ RAII header), then the C++ example
#    end to end (build, run, analyze, SIGINT, install + find_package +
#    pkg-config), tests/cpp_example.sh;
# 3. Python: maturin builds the abi3 wheel; it is installed, its .pyi
#    checked against the module (mypy.stubtest), pytest crates/python/tests
#    run, then the wheel is installed into a clean venv with no Rust on
#    PATH and runs examples/python (tests/python_wheel.sh);
# 3b. ROS 2: looptime.ros against a real rclpy, Jazzy and Kilted, each in
#    its own venv from the ros-python-wheels PyPI wheels, DDS on loopback
#    (tests/ros2.sh);
# 4. the evidence JSONL loads in stock pandas and polars (tests/interop.py);
# 5. the HTML report renders in headless Chromium (tests/html_render.sh);
# 6. the HdrHistogram export decodes in the Python hdrhistogram package
#    and agrees with the analyzer (tests/hdr_check.py);
# 6b. the MCAP export reads back in Python's mcap package and in the MCAP
#    project's TypeScript reader (@mcap/core, tests/mcap-ts), every message
#    valid against its channel's JSON Schema, on the wall clock through the
#    evidence's anchor, recovered evidence too (tests/mcap_check.py); and
#    --into copies a recording (made with the mcap writer, and a rosbag2
#    bag written with rosbags) unchanged beside the timing
#    (tests/mcap_into_check.py);
# 7. DuckDB runs docs/sql over a Parquet dataset of 24 episodes and
#    reproduces the analyzer's figures, and PySpark in local[2] runs the
#    same SQL files and gives DuckDB's rows, and `fleet` over the same
#    episodes gives those figures in its Parquet table, read with pyarrow
#    (tests/dataset_check.py --spark);
# 8. bench/fleet.sh at a tiny size (6 episodes of 2,000 cycles), and
#    bench/mcap_into.sh at 10 and 20 MB, as smoke tests of the benchmarks;
# 8b. docs that run: the shell and Python blocks of README.md and 15 pages of docs/
#    as a user types them, docs/ci.md's GitHub workflow in a local
#    repository, synopses against --help, docs/c.md's C fragment compiled
#    with -Wall -Werror, docs/performance.md's benchmarks at small sizes,
#    and every page's figures measured here naming their command and host
#    state, each such command one a test runs (scripts/docs_run.py,
#    docs/docs-run.md);
# 9. a loop paced by the robot: the Python and C++ robot_udp examples
#    against `looptime robot-peer` (tests/robot_udp_example.sh), and a
#    fuzzing smoke: the capture-level fuzz targets 30 s each on the
#    committed corpus under ASan (scripts/fuzz.sh 30; it installs
#    cargo-fuzz);
# 0. before all of them, scripts/module_cycles.py: no crate's modules
#    import each other in a circle; and scripts/check_scripts.py: every
#    script finds cargo's output through scripts/lib/target_dir
#    ($CARGO_TARGET_DIR, else target/); and scripts/code_size.py: no
#    source file over 700 lines and no function over 80 without a
#    `long-file`/`long-fn` reason.
#
# System packages (cmake, g++, pkg-config, tmux, chromium, fonts) come from
# apt-get when it is there and something is missing; Python packages from
# pip. LOOPTIME_NO_INSTALL=1 skips both and uses what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
failed=()
passed=1  # the Rust suite: under `set -e` a failure there stops the script
suite() {
    local name=$1
    shift
    step "$name"
    if "$@"; then
        echo "--- $name: ok"
        passed=$((passed + 1))
    else
        echo "--- $name: FAILED" >&2
        failed+=("$name")
    fi
}

if [[ "${LOOPTIME_NO_INSTALL:-0}" != 1 ]]; then
    step "install what the suites need"
    need=()
    for tool in cmake:cmake g++:g++ pkg-config:pkg-config tmux:tmux chromium:chromium java:openjdk-17-jre-headless node:nodejs npm:npm cyclictest:rt-tests stress-ng:stress-ng; do
        command -v "${tool%%:*}" >/dev/null || need+=("${tool##*:}")
    done
    # NodeSource's nodejs carries npm and conflicts with Debian's npm package:
    # ask Debian for npm only together with its own nodejs.
    if command -v node >/dev/null && ! command -v npm >/dev/null; then
        kept=()
        for pkg in "${need[@]}"; do [[ "$pkg" == npm ]] || kept+=("$pkg"); done
        need=("${kept[@]+"${kept[@]}"}")
        echo "warning: node without npm; the TypeScript MCAP reader check will be skipped" >&2
    fi
    [[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || need+=(fonts-dejavu-core)
    if [[ ${#need[@]} -gt 0 ]]; then
        if command -v apt-get >/dev/null; then
            echo "apt-get install ${need[*]}"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
        else
            echo "missing ${need[*]} and no apt-get: install them, or the suites that need them fail" >&2
        fi
    fi
    python3 -m pip install -q --disable-pip-version-check maturin pytest mypy pandas polars pyarrow duckdb hdrhistogram pyspark mcap jsonschema rosbags junitparser -r examples/mujoco/requirements.txt
    # The MCAP project's TypeScript reader, pinned by tests/mcap-ts's lockfile.
    npm ci --prefix tests/mcap-ts --no-audit --no-fund --loglevel=error
fi

# The module ladder: no crate's modules import each other in a circle
# (docs/architecture.md); a few seconds, before the long build.
module_ladder() {
    python3 scripts/module_cycles.py --self-test && python3 scripts/module_cycles.py
}
suite "module ladder: no import circle in any crate (scripts/module_cycles.py)" module_ladder
code_size() {
    python3 scripts/code_size.py --self-test && python3 scripts/code_size.py
}
suite "code size: no source file over 700 lines, no function over 80 without a reason (scripts/code_size.py)" code_size
script_rule() {
    python3 scripts/check_scripts.py --self-test && python3 scripts/check_scripts.py
}
suite "scripts find cargo's output through one rule (scripts/check_scripts.py)" script_rule

# Rust first: the other suites use the analyzer it builds.
step "Rust: cargo test --workspace"
cargo test --workspace

c_abi_tests() {
    local build="$TARGET_DIR/capture-c-tests"
    cmake -S crates/capture-c -B "$build" -DLOOPTIME_BUILD_TESTS=ON -DLOOPTIME_CARGO_PROFILE=dev >/dev/null &&
        cmake --build "$build" &&
        (cd "$build" && ctest --output-on-failure)
}
suite "C and C++: ABI tests (ctest)" c_abi_tests
suite "C++: the example end to end" bash tests/cpp_example.sh

python_tests() {
    # One build of the abi3 wheel (maturin, the pyproject's release-lib
    # profile), installed here for pytest and the stub check, then into a
    # clean virtual environment without Rust (tests/python_wheel.sh).
    local wheels="$TARGET_DIR/wheels-test"
    rm -rf "$wheels"
    (cd crates/python && python3 -m maturin build -q -o "$wheels") &&
        python3 -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheels"/looptime-*.whl &&
        python3 -m mypy.stubtest looptime._looptime &&
        python3 -m pytest -q crates/python/tests &&
        bash tests/python_wheel.sh "$wheels"
}
suite "Python: the wheel (maturin build), the .pyi against the module (stubtest), pytest, and the wheel in a clean venv without Rust" python_tests
suite "ROS 2: looptime.ros against rclpy in a Jazzy and a Kilted venv (DDS on loopback)" bash tests/ros2.sh "$TARGET_DIR/wheels-test"
cargo build -q -p looptime-cli --bin looptime
suite "a loop paced by the robot: the Python, C++ and C robot_udp examples against looptime robot-peer (stalls and late answers found)" bash tests/robot_udp_example.sh
suite "MuJoCo arm examples, Python and C++: paced, uncapped bit-identical, sessions, SIGINT, a reduced A/B" bash tests/mujoco_examples.sh
docs_run() {
    # The pages whose recipes run whole (docs/docs-run.md lists what is
    # held and what it found), against the binaries and the wheel built
    # above.
    python3 scripts/docs_run.py --self-test &&
    python3 scripts/docs_run.py --figures --jobs 2 --wheel "$(ls "$TARGET_DIR"/wheels-test/looptime-*.whl)" \
        README.md docs/ci.md docs/input-paced.md docs/docs-run.md docs/runtime.md docs/durability.md \
        docs/export.md docs/fleet.md docs/dataset.md docs/metrics.md docs/reliability.md docs/compare.md \
        docs/python.md docs/c.md docs/evidence-format.md docs/performance.md
}
suite "docs that run: README.md and 15 pages of docs/ as a user types them (scripts/docs_run.py)" docs_run
suite "interoperability: pandas and polars read the JSONL" python3 tests/interop.py fixtures/v1/serve-episode fixtures/v2/serve-episode
suite "HTML report renders in headless Chromium" bash tests/html_render.sh
cargo build -q -p looptime-cli --bin looptime
suite "HdrHistogram export decodes in Python's hdrhistogram" \
    python3 tests/hdr_check.py "$TARGET_DIR/debug/analyze_control_timing" fixtures/v1/serve-episode fixtures/v2/serve-episode
suite "MCAP export reads back in Python's mcap, validates with jsonschema, incl. recovered evidence" \
    python3 tests/mcap_check.py "$TARGET_DIR/debug/analyze_control_timing" "$TARGET_DIR/debug/looptime"
suite "the timing gate's JUnit XML reads back in junitparser" \
    python3 tests/junit_check.py "$TARGET_DIR/debug/analyze_control_timing"
suite "MCAP --into: a recording's records come back unchanged, a rosbag2 bag's CDR decodes, bad input refused" \
    python3 tests/mcap_into_check.py "$TARGET_DIR/debug/analyze_control_timing" "$TARGET_DIR/debug/looptime"
suite "Parquet dataset: DuckDB reproduces the analyzer's figures, Spark matches DuckDB" \
    python3 tests/dataset_check.py "$TARGET_DIR/debug/analyze_control_timing" "$TARGET_DIR/debug/looptime" --spark
mcap_into_bench_smoke() {
    local work
    work=$(mktemp -d)
    SIZES_MB="10 20" CYCLES=2000 RUNS=1 WORK="$work" ANALYZER="$TARGET_DIR/debug/analyze_control_timing" \
        LOOPTIME="$TARGET_DIR/debug/looptime" bash bench/mcap_into.sh
    local rc=$?
    rm -rf "$work"
    return $rc
}
suite "MCAP --into benchmark at smoke size (bench/mcap_into.sh: 10 and 20 MB recordings)" mcap_into_bench_smoke
fleet_bench_smoke() {
    local work
    work=$(mktemp -d)
    EPISODES=6 CYCLES=2000 RUNS=1 WORK="$work" ANALYZER="$TARGET_DIR/debug/analyze_control_timing" \
        LOOPTIME="$TARGET_DIR/debug/looptime" bash bench/fleet.sh
    local rc=$?
    rm -rf "$work"
    return $rc
}
suite "fleet benchmark at smoke size (bench/fleet.sh: 6 episodes x 2,000 cycles)" fleet_bench_smoke

# Coverage-guided fuzzing, a smoke on the committed corpus: the four
# capture-level targets (docs/reliability.md), 30 s each, under ASan. The
# analyzer-level targets need an instrumented polars build: scripts only.
suite "fuzzing smoke: evidence lines, summary, config, ring (scripts/fuzz.sh 30)" bash scripts/fuzz.sh 30
step "summary"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "failed: ${failed[*]}" >&2
fi
echo "suites: $passed passed, ${#failed[@]} failed"
[[ ${#failed[@]} -eq 0 ]]
