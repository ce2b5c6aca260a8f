#!/usr/bin/env bash
# A synthetic fleet in seconds: N episodes of CYCLES cycles under DIR.
#
#   bash bench/make_fleet.sh N CYCLES DIR
#
# Never records a benchmark fleet in real time (200 episodes of 20,000
# cycles at 100 Hz would be 11 hours). Instead:
#
# 1. four distinct base episodes are recorded with `looptime serve --rtf 0`
#    (uncapped) and bench/fleet/fast.toml, whose stage costs are a few µs
#    (about 0.7 s per 20,000 cycles): seed 1 plain; seed 2 with 2 ms spikes
#    in adapter_decode on 1 % of cycles; seed 3 with a pause halfway (a
#    third phase); seed 4 with the keep-phase overrun policy and rarer,
#    longer spikes;
# 2. episode i is a copy of base `(i / 4) % 4` under its own robot,
#    session and rollout names (DIR/robot-{i % 4}/session-S/rollout-NNN): the
#    evidence files are hard links, so N episodes cost the disk of four,
#    and each copy gets its own manifest.json with its session, rollout
#    and host name (the dataset's partition keys).
#
# Copies share their figures with their base, so a fleet of them measures
# the analyzer's cost, not a spread of behaviours.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
if [[ $# -ne 3 ]]; then
    echo "usage: bash bench/make_fleet.sh N CYCLES DIR" >&2
    exit 2
fi
N="$1"
CYCLES="$2"
DIR="$3"
if ! [[ "$N" =~ ^[0-9]+$ && "$CYCLES" =~ ^[0-9]+$ ]] || ((N < 1 || CYCLES < 200)); then
    echo "N must be at least 1 and CYCLES at least 200 (got N=$N CYCLES=$CYCLES)" >&2
    exit 2
fi
start=$(date +%s.%N)
# LOOPTIME names a prebuilt binary (CI's smoke test uses the debug build).
if [[ -z "${LOOPTIME:-}" ]]; then
    LOOPTIME=$(release_bin looptime -p looptime-cli --bin looptime)
fi
looptime="$LOOPTIME"
mkdir -p "$DIR/.base"
base_dir="$(cd "$DIR/.base" && pwd)"

# Warmup is 100 cycles (1 s at 100 Hz); the rest is the running phase.
running_s=$(python3 -c "print(($CYCLES - 100) / 100)")

variant() { # $1 = seed: the config of that base episode on stdout
    local seed="$1"
    sed -e "s/^duration_s = .*/duration_s = $running_s/" \
        -e "s/^timing_max_cycles = .*/timing_max_cycles = $CYCLES/" \
        -e "/^\[run\]/a seed = $seed" bench/fleet/fast.toml
}

for seed in 1 2 3 4; do
    out="$base_dir/b$seed"
    if [[ -s "$out/latest/control_timing.jsonl" ]]; then
        continue
    fi
    rm -rf "$out"
    mkdir -p "$out"
    cfg="$out/config.toml"
    variant "$seed" >"$cfg"
    case "$seed" in
        2) sed -i -e "/^\[stages.adapter_decode.cost\]/a spike_probability = 0.01\nspike_us = 2000.0" "$cfg" ;;
        3) printf '\n[lifecycle]\npause_at_s = %s\npause_s = 5.0\n' \
               "$(python3 -c "print($running_s / 2)")" >>"$cfg" ;;
        4) printf '\n[scheduler]\noverrun_policy = "keep-phase"\n' >>"$cfg"
           sed -i -e "/^\[stages.executor.cost\]/a spike_probability = 0.002\nspike_us = 5000.0" "$cfg" ;;
    esac
    "$looptime" serve --config "$cfg" --control-timing --runs-dir "$out" >"$out/serve.log" 2>&1 ||
        { cat "$out/serve.log" >&2; exit 1; }
done

python3 - "$DIR" "$base_dir" "$N" <<'EOF'
import json, os, pathlib, sys
root, base, n = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
bases = [(base / f"b{s}" / "latest").resolve() for s in (1, 2, 3, 4)]
robots = 4
for i in range(n):
    src = bases[(i // robots) % 4]
    robot = f"robot-{i % robots}"
    session = f"session-{(i // robots) // 10:03d}"
    rollout = f"rollout-{(i // robots) % 10:03d}"
    dst = root / robot / session / rollout
    if (dst / "manifest.json").exists():
        continue
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name == "manifest.json" or not f.is_file():
            continue
        target = dst / f.name
        if not target.exists():
            os.link(f, target)
    m = json.loads((src / "manifest.json").read_text())
    m["session"], m["rollout"] = session, rollout
    m.setdefault("host", {})["hostname"] = robot
    (dst / "manifest.json").write_text(json.dumps(m, indent=2) + "\n")
EOF
end=$(date +%s.%N)
echo "fleet: $N episodes of $CYCLES cycles under $DIR (4 base episodes, hard links) in $(python3 -c "print(f'{$end - $start:.1f}')") s" >&2
