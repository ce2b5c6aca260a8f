#!/usr/bin/env bash
# Calibration of `analyze_control_timing compare` on real, serialised
# `looptime serve` sessions (docs/compare.md, "Calibration").
#
#   * PAIRS A/A pairs: two sessions of the default config, ROLLOUTS
#     rollouts each. Pass: "no clear change" on every metric and rate.
#   * PAIRS shifted pairs: a default session against a session whose
#     adapter_decode stage costs SHIFT_US more (mean_us 300 -> 300 + SHIFT_US).
#     Pass: adapter_decode's stage_wall "worse", and no other stage's
#     stage_wall or stage_cpu "worse".
#   * PAIRS camera pairs (data age): a default session (inline camera)
#     against one with the background camera reader. Pass: the camera's
#     age at use "worse" (the background reader's frames are older).
#     An A/A pair's pass ("no clear change on every metric and rate")
#     includes its age and stale-use tests.
#
# Sessions run one after another (never two loops at once), each with the
# default config's 1 s warmup and 5 s running phase; a shifted pair reuses
# the A side of one A/A pair.
#
# ORDER=interleaved (the default): each side's ROLLOUTS rollouts are
# single-rollout sessions run in turn with the other sides' (A B S A B S
# ...), so a slow spell of the machine falls on every side, and a side is
# compared as `--a E1 --a E2 --a E3`. ORDER=blocked: each side is one
# session of ROLLOUTS rollouts run back to back (serve --episodes N); a
# slow spell then falls on one side only (docs/compare.md shows both).
#
#   bash bench/compare_calibration.sh            # 20 + 20 pairs, 3 rollouts
#   PAIRS=5 ROLLOUTS=3 bash bench/compare_calibration.sh
#   PAIRS=1 ROLLOUTS=2 RUN='duration_s = 1.0; warmup_s = 0.2' bash bench/compare_calibration.sh
#
# RUN (default: none) adds [run] keys, `;`-separated, to every config:
# shorter phases for a run that only checks the script works (its
# verdicts then mean little).
#
# Output: a table per kind of pair, and every pair's failing metrics, in
# $OUT (default target/calibration) as results.json and a Markdown table.
#
# Two analyzers on the same recordings (a before/after of a change to the
# comparison): RECORDED=DIR reuses the sessions an earlier run recorded
# under DIR (its runs/*.path files) instead of recording, and ANALYZE=BIN
# names the analyzer to judge them with:
#
#   OUT=/tmp/cal-after bash bench/compare_calibration.sh
#   RECORDED=/tmp/cal-after OUT=/tmp/cal-before PAIRS=4 ANALYZE=/tmp/analyze_before bash bench/compare_calibration.sh   (the same PAIRS and ROLLOUTS)
#
# DECLARE='compute_budget_us = 2700' (the [scheduler] keys to add to every
# config) declares a compute budget and a deadline tolerance on both sides,
# so the family holds the budget_overrun and completion_miss rate tests too:
#
#   DECLARE=$'compute_budget_us = 2700\ndeadline_tolerance_us = 0' PAIRS=3 bash bench/compare_calibration.sh
#
# ROBOT=udp runs every session against the robot peer over loopback UDP
# (input-paced: the family holds answer_latency, late_answers, the lost
# inputs, bursts and the success shortfall):
#
#   ROBOT=udp PAIRS=3 bash bench/compare_calibration.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
PAIRS=${PAIRS:-20}
ROLLOUTS=${ROLLOUTS:-3}
SHIFT_US=${SHIFT_US:-500}
ORDER=${ORDER:-interleaved}
OUT=${OUT:-$TARGET_DIR/calibration}
RECORDED=${RECORDED:-}
LOOPTIME=$(release_bin looptime -p looptime-cli -p looptime-analyze)
ANALYZE=${ANALYZE:-$(dirname "$LOOPTIME")/analyze_control_timing}
rm -rf "$OUT"
mkdir -p "$OUT/configs"
per_session=$ROLLOUTS
[ "$ORDER" = interleaved ] && per_session=1
RUN=${RUN:-}
RUN=${RUN//;/$'\n'}
printf '[run]\nepisodes = %s\n%s\n[stats]\ninterval_s = 0\n' "$per_session" "$RUN" >"$OUT/configs/default.toml"
printf '[run]\nepisodes = %s\n%s\n[stats]\ninterval_s = 0\n[stages.adapter_decode.cost]\nmean_us = %s\n' \
  "$per_session" "$RUN" "$((300 + SHIFT_US))" >"$OUT/configs/shifted.toml"
printf '[run]\nepisodes = %s\n%s\n[stats]\ninterval_s = 0\n[stages.camera_read]\nmode = "background"\n[stages.camera_read.cost]\nmean_us = 20.0\njitter_us = 5.0\n' \
  "$per_session" "$RUN" >"$OUT/configs/camera.toml"
ROBOT=${ROBOT:-}
if [ -n "$ROBOT" ]; then
  for c in default shifted camera; do
    printf '[robot]\ntransport = "%s"\n' "$ROBOT" >>"$OUT/configs/$c.toml"
  done
fi
DECLARE=${DECLARE:-}
if [ -n "$DECLARE" ]; then
  for c in default shifted camera; do
    printf '[scheduler]\n%s\n' "$DECLARE" >>"$OUT/configs/$c.toml"
  done
fi

session() { # name config -> prints the session directory
  if [ -n "$RECORDED" ]; then
    cat "$RECORDED/runs/$1.path"
    return
  fi
  local runs="$OUT/runs/$1"
  "$LOOPTIME" serve --control-timing --config "$2" --runs-dir "$runs" >/dev/null 2>"$OUT/runs/$1.log"
  dirname "$(readlink -f "$runs/latest")"
}

side_args() { # flag kind pair -> --a DIR --a DIR ... for the side's sessions
  for f in "$OUT/runs/$2$3".*.path; do printf '%s\n%s\n' "$1" "$(cat "$f")"; done
}

mkdir -p "$OUT/runs" "$OUT/pairs"
start=$(date +%s)
rounds=1
[ "$ORDER" = interleaved ] && rounds=$ROLLOUTS
total=$((4 * PAIRS * rounds))
k=0
for i in $(seq 0 $((PAIRS - 1))); do
  for r in $(seq 0 $((rounds - 1))); do
    for kind in a b s c; do
      k=$((k + 1))
      cfg="$OUT/configs/default.toml"
      [ "$kind" = s ] && cfg="$OUT/configs/shifted.toml"
      [ "$kind" = c ] && cfg="$OUT/configs/camera.toml"
      dir=$(session "$kind$i.$r" "$cfg")
      echo "$dir" >"$OUT/runs/$kind$i.$r.path"
      printf '\rsessions %d/%d (%ds)' "$k" "$total" "$(($(date +%s) - start))" >&2
    done
  done
  mapfile -t A < <(side_args --a a "$i")
  mapfile -t B < <(side_args --b b "$i")
  mapfile -t S < <(side_args --b s "$i")
  mapfile -t C < <(side_args --b c "$i")
  "$ANALYZE" compare "${A[@]}" "${B[@]}" --json --output "$OUT/pairs/aa$i.json" >/dev/null
  "$ANALYZE" compare "${A[@]}" "${S[@]}" --json --output "$OUT/pairs/shift$i.json" >/dev/null
  "$ANALYZE" compare "${A[@]}" "${C[@]}" --json --output "$OUT/pairs/camera$i.json" >/dev/null
done
echo >&2
python3 - "$OUT" "$PAIRS" "$ROLLOUTS" "$SHIFT_US" "$ORDER" <<'PY'
import json, sys, pathlib
out, pairs, rollouts, shift, order = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def load(name):
    return json.loads((out / "pairs" / name).read_text())
def name(m):
    return f"{m['phase']}/{m['metric']}" + (f"/{m['stage']}" if m.get("stage") else "")
aa_pass, sh_worse, sh_clean, cam_worse, results = 0, 0, 0, 0, []
age_tested = []
metrics_tested = []
for i in range(pairs):
    c = load(f"aa{i}.json")
    moved = [name(m) + ":" + m["verdict"] for m in c["metrics"] if m["verdict"] != "no_clear_change"]
    moved += [f"{r['phase']}/{r['metric']}:{r['verdict']}" for r in c["rates"] if r["verdict"] != "no_clear_change"]
    aa_pass += not moved
    metrics_tested.append(c["multiplicity"]["tests"])
    age_tested.append(sum(m["metric"] == "age_at_use" for m in c["metrics"]) + sum(r["metric"].startswith("stale:") for r in c["rates"]))
    cam = load(f"camera{i}.json")
    age = [m for m in cam["metrics"] if m["metric"] == "age_at_use" and m["stage"] == "camera" and m["phase"] == "running"]
    cam_worse += bool(age) and age[0]["verdict"] == "worse"
    s = load(f"shift{i}.json")
    stage = [m for m in s["metrics"] if m["metric"] == "stage_wall" and m["stage"] == "adapter_decode" and m["phase"] == "running"]
    worse = bool(stage) and stage[0]["verdict"] == "worse"
    others = [name(m) for m in s["metrics"]
              if m["metric"] in ("stage_wall", "stage_cpu") and m["verdict"] == "worse"
              and not (m["stage"] or "").startswith("adapter_decode")]
    sh_worse += worse
    sh_clean += not others
    results.append({"pair": i, "aa_moved": moved, "shift_detected": worse,
                    "shift_delta_ns": stage[0]["diff_median_ns"] if stage else None,
                    "shift_other_stages_worse": others,
                    "camera_age_worse": bool(age) and age[0]["verdict"] == "worse",
                    "camera_age_delta_ns": age[0]["diff_median_ns"] if age else None})
(out / "results.json").write_text(json.dumps(results, indent=1))
pct = lambda k: f"{k}/{pairs} ({100 * k / pairs:.0f} %)"
table = f"""| pairs ({rollouts} rollouts a side, {order}) | criterion | passed | target |
|---|---|---|---|
| A/A, default config | no clear change on every metric and rate (median {sorted(metrics_tested)[len(metrics_tested)//2]} tests each) | {pct(aa_pass)} | ≥ 95 % |
| +{shift} µs on adapter_decode | adapter_decode stage_wall worse | {pct(sh_worse)} | ≥ 95 % |
| +{shift} µs on adapter_decode | no other stage worse | {pct(sh_clean)} | ≥ 95 % |
| inline against background camera | running age_at_use camera worse | {pct(cam_worse)} | ≥ 95 % |

Each A/A pair held {sorted(age_tested)[len(age_tested)//2]} data-age tests (median) among its tests.
"""
(out / "table.md").write_text(table)
print(table)
for r in results:
    if r["aa_moved"] or not r["shift_detected"] or r["shift_other_stages_worse"] or not r["camera_age_worse"]:
        print("pair", r["pair"], "A/A moved:", r["aa_moved"], "shift detected:", r["shift_detected"],
              "other stages worse:", r["shift_other_stages_worse"], "camera age worse:", r["camera_age_worse"])
PY
