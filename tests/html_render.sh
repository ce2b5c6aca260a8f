#!/usr/bin/env bash
# Renders the analyzer's HTML report and comparison in headless Chromium
# (Debian's `chromium`) and fails on any console error, a missing figure, or
# an external request. With UPDATE_SCREENSHOT=1 it also refreshes
# docs/report-screenshot.png.
#
#   bash tests/html_render.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
if ! command -v chromium >/dev/null; then
    echo "installing chromium ..." >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
fi
# The binary the README's test command builds: `cargo test --workspace`
# resolves features across the whole workspace, so a `cargo build -p` here
# would compile polars a second time with different dependency features
# (gigabytes of disk on CI). After CI's test step this is a no-op.
cargo test -q --workspace --no-run
bin="$TARGET_DIR/debug/analyze_control_timing"
out="$(mktemp -d)"
ep=fixtures/v1/serve-episode
"$bin" --episode "$ep" --html "$out/report" >/dev/null
"$bin" compare "$ep" "$ep" --html "$out/compare" >/dev/null

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --user-data-dir="$out/profile" --enable-logging=stderr --v=0)
fail=0
for page in report/report.html compare/compare.html; do
    url="file://$out/$page"
    chromium "${flags[@]}" --dump-dom "$url" >"$out/dom.html" 2>"$out/console.log" || true
    if grep -E "CONSOLE|Uncaught|ERR_FILE_NOT_FOUND|net::ERR" "$out/console.log" | grep -v "^$" >"$out/errors.log"; then
        echo "FAIL $page: console errors:" >&2
        cat "$out/errors.log" >&2
        fail=1
    fi
    figures=$(grep -o "<figure" "$out/dom.html" | wc -l)
    svgs=$(grep -o "<svg" "$out/dom.html" | wc -l)
    if [[ "$figures" -lt 3 || "$svgs" -lt "$figures" ]]; then
        echo "FAIL $page: $figures figures, $svgs inline svgs" >&2
        fail=1
    fi
    if grep -qE "<(script|link|img)[^>]*(src|href)=\"(https?:)?//" "$out/dom.html"; then
        echo "FAIL $page: references an external asset" >&2
        fail=1
    fi
    echo "ok $page: $figures figures, $svgs inline svgs, no console errors"
done
# The report's first screen: a summary card per phase, each with its state
# in words, then the long tables folded away.
dom="$out/report-dom.html"
chromium "${flags[@]}" --dump-dom "file://$out/report/report.html" >"$dom" 2>/dev/null || true
phases=$("$bin" --episode "$ep" --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)['phases']))")
cards=$(grep -o 'class="card [a-z_]*"' "$dom" | wc -l)
words=$(grep -oE '<h3>[a-z_]+: (PASS|WARN|FAIL|NOT JUDGED)</h3>' "$dom" | wc -l)
folded=$(grep -o "<details>" "$dom" | wc -l)
if [[ "$cards" -ne "$phases" || "$words" -ne "$phases" || "$folded" -lt 2 ]]; then
    echo "FAIL report.html: $cards cards and $words stated in words for $phases phases, $folded folded sections" >&2
    fail=1
else
    echo "ok report.html: $cards summary cards, each with its state in words; $folded folded sections"
fi
# A screenshot at 1280 px wide, the width the first screen is checked at.
shot="$out/report.png"
[[ "${UPDATE_SCREENSHOT:-0}" == 1 ]] && shot="$PWD/docs/report-screenshot.png"
chromium "${flags[@]}" --window-size=1280,1600 --screenshot="$shot" "file://$out/report/report.html" 2>/dev/null || true
width=$(python3 -c "import struct,sys; d=open(sys.argv[1],'rb').read(24); print(struct.unpack('>I', d[16:20])[0] if d[:8]==b'\x89PNG\r\n\x1a\n' else 0)" "$shot" 2>/dev/null || echo 0)
if [[ "$width" -ne 1280 ]]; then
    echo "FAIL screenshot: $shot is not a 1280 px wide PNG ($width)" >&2
    fail=1
else
    echo "ok screenshot: $shot, 1280 px wide"
fi
exit "$fail"
