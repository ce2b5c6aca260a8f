#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of outside bytes (fuzz/,
# docs/reliability.md):
#
#   bash scripts/fuzz.sh SECONDS [TARGET...]
#
# Each target runs SECONDS under libFuzzer, starting from the committed
# corpus (fuzz/corpus/TARGET, read only) and the evidence dictionary; new
# inputs go to a working corpus under fuzz/target/corpus/TARGET, kept
# between runs (copy the ones worth keeping into fuzz/corpus after `cargo
# fuzz cmin`). Without TARGET: the capture-level targets (evidence_lines,
# summary, config, ring), the ones CI runs for a short smoke. The
# analyzer-level targets (episode, differential, mcap_into) live in
# fuzz/analyzer (differential seeds from episode's corpus), a
# cargo-fuzz project of their own: they link polars, whose instrumented
# build takes many minutes, so they run only when named. A crash
# stops with libFuzzer's report and the input under fuzz/artifacts/TARGET:
# turn it into a regression test in the normal suite, then fix it.
#
# Installs cargo-fuzz from the Rust crate registry when it is missing. On
# the stable toolchain its sanitizer flags need RUSTC_BOOTSTRAP=1, set here.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(evidence_lines summary config ring)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
export RUSTC_BOOTSTRAP=1
cd fuzz
# The cargo-fuzz project a target belongs to.
project() {
    case $1 in
    episode | differential | mcap_into) echo analyzer ;;
    *) echo . ;;
    esac
}
# The committed corpus a target starts from: the loader's differential
# target reads whole episodes, as `episode` does.
seeds() {
    case $1 in
    differential) echo episode ;;
    *) echo "$1" ;;
    esac
}
echo "[fuzz] building ${targets[*]} (release, coverage instrumented) ..."
for t in "${targets[@]}"; do
    cargo fuzz build --fuzz-dir "$(project "$t")" -O "$t"
done
for t in "${targets[@]}"; do
    work="target/corpus/$t"
    arts="$(project "$t")/artifacts/$t"
    mkdir -p "$work" "$arts"
    echo "[fuzz] $t: ${seconds} s from corpus/$(seeds "$t") ($(ls "corpus/$(seeds "$t")" | wc -l) seeds)"
    log="target/fuzz-$t.log"
    cargo fuzz run --fuzz-dir "$(project "$t")" -O "$t" "$work" "corpus/$(seeds "$t")" -- \
        -max_total_time="$seconds" -dict=dict/evidence.dict -print_final_stats=1 \
        -timeout=10 -rss_limit_mb=2048 >"$log" 2>&1 || true
    grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb)" "$log" || true
    if compgen -G "$arts/crash-*" >/dev/null || compgen -G "$arts/oom-*" >/dev/null ||
        compgen -G "$arts/timeout-*" >/dev/null || ! grep -q "DONE" "$log"; then
        echo "[fuzz] $t: a finding (or no clean end), fuzz/$arts and $PWD/$log:" >&2
        tail -40 "$log" >&2
        exit 1
    fi
done
echo "[fuzz] ${targets[*]}: no finding in ${seconds} s each"
