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
# The gate's calibration where CI runs (docs/compare.md, "The gate under
# load"): LOAD=stress records every session beside `stress-ng --cpu 2`;
# SHIFT_PAIRS (default PAIRS) pairs per shift, SHIFTS_US (default SHIFT_US)
# the shifts of adapter_decode's mean_us, each its own kind (the first is
# the one the adapter_decode table judges); CAMERA=0 leaves the camera
# pairs out; every compare runs the gate GATE (default the recommended
# gate) with --fail-on worse, and gate_table.md gives the gate's and the
# whole family's false-alarm rate with the Clopper-Pearson 95 % bound and
# the power per shift:
#
#   LOAD=stress PAIRS=60 SHIFT_PAIRS=20 SHIFTS_US="135 270 486" CAMERA=0 \
#     RUN='duration_s = 4.0; warmup_s = 0.5' bash bench/compare_calibration.sh
#
# The loop's rate as a change: RATES_HZ (for example "95 86") records B
# sessions whose config declares a slower loop (run.rate_hz, a declared
# drop), RTFS (for example "0.86") B sessions run at that real-time factor
# (the same declared rate, an undeclared drop); each is its own kind,
# judged against the pair's A side for the first SHIFT_PAIRS pairs, and
# gate_table.md gives the gate's and running/loop_hz's power on each.
# With RECORDED, a kind the earlier run lacks is recorded now (under LOAD
# if it is set), so rate drops can join a calibration recorded before:
#
#   RECORDED=/tmp/cal-loaded OUT=/tmp/cal-loaded-rates LOAD=stress PAIRS=60 SHIFT_PAIRS=20 \
#     SHIFTS_US="135 270 486" RATES_HZ="95 86" RTFS=0.86 CAMERA=0 \
#     RUN='duration_s = 4.0; warmup_s = 0.5' bash bench/compare_calibration.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
PAIRS=${PAIRS:-20}
ROLLOUTS=${ROLLOUTS:-3}
SHIFT_US=${SHIFT_US:-500}
ORDER=${ORDER:-interleaved}
OUT=${OUT:-$TARGET_DIR/calibration}
RECORDED=${RECORDED:-}
SHIFT_PAIRS=${SHIFT_PAIRS:-$PAIRS}
SHIFTS_US=${SHIFTS_US:-$SHIFT_US}
read -r -a SHIFTS <<<"$SHIFTS_US"
read -r -a RATES <<<"${RATES_HZ:-}"
read -r -a FACTORS <<<"${RTFS:-}"
CAMERA=${CAMERA:-1}
LOAD=${LOAD:-}
GATE=${GATE:-running/period:median,running/period:p99,running/work:median,running/work_cpu:median,running/deadline_miss:rate,running/late_start:rate,running/loop_hz}
LOOPTIME=$(release_bin looptime -p looptime-cli -p looptime-analyze)
ANALYZE=${ANALYZE:-$(dirname "$LOOPTIME")/analyze_control_timing}
rm -rf "$OUT"
mkdir -p "$OUT/configs"
per_session=$ROLLOUTS
[ "$ORDER" = interleaved ] && per_session=1
RUN=${RUN:-}
RUN=${RUN//;/$'\n'}
printf '[run]\nepisodes = %s\n%s\n[stats]\ninterval_s = 0\n' "$per_session" "$RUN" >"$OUT/configs/default.toml"
for us in "${SHIFTS[@]}"; do
  printf '[run]\nepisodes = %s\n%s\n[stats]\ninterval_s = 0\n[stages.adapter_decode.cost]\nmean_us = %s\n' \
    "$per_session" "$RUN" "$((300 + us))" >"$OUT/configs/s$us.toml"
done
for hz in "${RATES[@]}"; do
  printf '[run]\nepisodes = %s\nrate_hz = %s\n%s\n[stats]\ninterval_s = 0\n' "$per_session" "$hz" "$RUN" >"$OUT/configs/hz$hz.toml"
done
for f in "${FACTORS[@]}"; do
  printf '[run]\nepisodes = %s\nrtf = %s\n%s\n[stats]\ninterval_s = 0\n' "$per_session" "$f" "$RUN" >"$OUT/configs/rtf$f.toml"
done
printf '[run]\nepisodes = %s\n%s\n[stats]\ninterval_s = 0\n[stages.camera_read]\nmode = "background"\n[stages.camera_read.cost]\nmean_us = 20.0\njitter_us = 5.0\n' \
  "$per_session" "$RUN" >"$OUT/configs/camera.toml"
ROBOT=${ROBOT:-}
kinds=(default camera)
for us in "${SHIFTS[@]}"; do kinds+=("s$us"); done
for hz in "${RATES[@]}"; do kinds+=("hz$hz"); done
for f in "${FACTORS[@]}"; do kinds+=("rtf$f"); done
if [ -n "$ROBOT" ]; then
  for c in "${kinds[@]}"; do
    printf '[robot]\ntransport = "%s"\n' "$ROBOT" >>"$OUT/configs/$c.toml"
  done
fi
DECLARE=${DECLARE:-}
if [ -n "$DECLARE" ]; then
  for c in "${kinds[@]}"; do
    printf '[scheduler]\n%s\n' "$DECLARE" >>"$OUT/configs/$c.toml"
  done
fi

session() { # name config -> prints the session directory
  if [ -n "$RECORDED" ] && [ -f "$RECORDED/runs/$1.path" ]; then
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
if [ -n "$LOAD" ]; then
  # The load beside every recording: two CPU hogs on the runner's cores.
  stress-ng --cpu 2 --quiet &
  stress_pid=$!
  trap 'kill "$stress_pid" 2>/dev/null || true' EXIT
fi
if [ -n "$RECORDED" ] && [ -f "$RECORDED/load.txt" ]; then
  cp "$RECORDED/load.txt" "$OUT/load.txt"
else
  printf 'condition: %s\nload at start: %s\n' "${LOAD:-quiet}" "$(cat /proc/loadavg)" >"$OUT/load.txt"
fi
start=$(date +%s)
rounds=1
[ "$ORDER" = interleaved ] && rounds=$ROLLOUTS
# Kinds a pair index records: A and B always; each shift and the camera
# for the first SHIFT_PAIRS indices.
pair_kinds() {
  local out=(a b)
  if [ "$1" -lt "$SHIFT_PAIRS" ]; then
    for us in "${SHIFTS[@]}"; do out+=("s$us"); done
    for hz in "${RATES[@]}"; do out+=("hz$hz"); done
    for f in "${FACTORS[@]}"; do out+=("rtf$f"); done
    [ "$CAMERA" = 1 ] && out+=(c)
  fi
  echo "${out[@]}"
}
total=0
for i in $(seq 0 $((PAIRS - 1))); do
  read -r -a ks <<<"$(pair_kinds "$i")"
  total=$((total + ${#ks[@]} * rounds))
done
k=0
gate_cmp() { # out side-args... : compare with the gate; its exit 5 is a result
  local out=$1 rc=0
  shift
  "$ANALYZE" compare "$@" --gate "$GATE" --fail-on worse --json --output "$out" >/dev/null 2>>"$OUT/compare.log" || rc=$?
  if [ "$rc" -eq 2 ]; then
    # A gate test the recordings cannot hold (a p99 below 1,000 samples a
    # side, in a short RUN): the whole family is the gate; the log says so.
    echo "$out: the gate names a test these recordings lack; judged without --gate" >>"$OUT/compare.log"
    rc=0
    "$ANALYZE" compare "$@" --fail-on worse --json --output "$out" >/dev/null 2>>"$OUT/compare.log" || rc=$?
  fi
  [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ]
}
for i in $(seq 0 $((PAIRS - 1))); do
  read -r -a ks <<<"$(pair_kinds "$i")"
  for r in $(seq 0 $((rounds - 1))); do
    for kind in "${ks[@]}"; do
      k=$((k + 1))
      cfg="$OUT/configs/default.toml"
      [[ "$kind" = s* || "$kind" = hz* || "$kind" = rtf* ]] && cfg="$OUT/configs/$kind.toml"
      [ "$kind" = c ] && cfg="$OUT/configs/camera.toml"
      dir=$(session "$kind$i.$r" "$cfg")
      echo "$dir" >"$OUT/runs/$kind$i.$r.path"
      printf '\rsessions %d/%d (%ds)' "$k" "$total" "$(($(date +%s) - start))" >&2
    done
  done
  mapfile -t A < <(side_args --a a "$i")
  mapfile -t B < <(side_args --b b "$i")
  gate_cmp "$OUT/pairs/aa$i.json" "${A[@]}" "${B[@]}"
  if [ "$i" -lt "$SHIFT_PAIRS" ]; then
    for us in "${SHIFTS[@]}"; do
      mapfile -t S < <(side_args --b "s$us" "$i")
      gate_cmp "$OUT/pairs/shift${us}_$i.json" "${A[@]}" "${S[@]}"
    done
    for kind in "${RATES[@]/#/hz}" "${FACTORS[@]/#/rtf}"; do
      [ -n "$kind" ] || continue
      mapfile -t S < <(side_args --b "$kind" "$i")
      gate_cmp "$OUT/pairs/${kind}_$i.json" "${A[@]}" "${S[@]}"
    done
    if [ "$CAMERA" = 1 ]; then
      mapfile -t C < <(side_args --b c "$i")
      gate_cmp "$OUT/pairs/camera$i.json" "${A[@]}" "${C[@]}"
    fi
  fi
done
[ -n "$RECORDED" ] || echo "load at end: $(cat /proc/loadavg)" >>"$OUT/load.txt"
echo >&2
python3 - "$OUT" "$SHIFT_PAIRS" "$ROLLOUTS" "${SHIFTS[0]}" "$ORDER" "$CAMERA" <<'PY'
import json, sys, pathlib
out, pairs, rollouts, shift, order = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
camera = sys.argv[6] == "1"
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
    moved += [f"{h['phase']}/{h['metric']}:{h['verdict']}" for h in c.get("hz", []) if h["verdict"] != "no_clear_change"]
    aa_pass += not moved
    metrics_tested.append(c["multiplicity"]["tests"])
    age_tested.append(sum(m["metric"] == "age_at_use" for m in c["metrics"]) + sum(r["metric"].startswith("stale:") for r in c["rates"]))
    age = []
    if camera:
        cam = load(f"camera{i}.json")
        age = [m for m in cam["metrics"] if m["metric"] == "age_at_use" and m["stage"] == "camera" and m["phase"] == "running"]
    cam_worse += bool(age) and age[0]["verdict"] == "worse"
    s = load(f"shift{shift}_{i}.json")
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
pct = lambda k: f"{k}/{pairs} ({100 * k / pairs:.0f} %)" if camera or k else "-"
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
    if r["aa_moved"] or not r["shift_detected"] or r["shift_other_stages_worse"] or (camera and not r["camera_age_worse"]):
        print("pair", r["pair"], "A/A moved:", r["aa_moved"], "shift detected:", r["shift_detected"],
              "other stages worse:", r["shift_other_stages_worse"], "camera age worse:", r["camera_age_worse"])
PY
python3 - "$OUT" "$PAIRS" "$SHIFT_PAIRS" "$ROLLOUTS" "$SHIFTS_US" "$GATE" "${RATES_HZ:-}" "${RTFS:-}" <<'PY'
# The gate's table: false alarms over every A/A pair, power per shift.
import json, math, pathlib, sys
out, pairs, shift_pairs, rollouts = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
shifts, gate = sys.argv[5].split(), sys.argv[6].split(",")
rates, factors = sys.argv[7].split(), sys.argv[8].split()

def binom_cdf(k, n, p):
    return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k + 1))

def clopper_pearson(k, n):
    """The exact 95 % interval of a binomial proportion (bisection on the
    binomial distribution)."""
    def solve(f):
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) else (lo, mid)
        return (lo + hi) / 2
    lower = 0.0 if k == 0 else solve(lambda p: 1 - binom_cdf(k - 1, n, p) < 0.025)
    upper = 1.0 if k == n else solve(lambda p: binom_cdf(k, n, p) > 0.025)
    return lower, upper

def tests(c):
    """(name, family verdict) of every test, as the gate names them."""
    for m in c["metrics"]:
        base = f"{m['phase']}/{m['metric']}" + (f"/{m['stage']}" if m.get("stage") else "")
        yield base + ":median", m["verdict_median"]
        if m.get("verdict_p99"):
            yield base + ":p99", m["verdict_p99"]
    for r in c["rates"]:
        kind = "share" if r["metric"] == "late_answers" else "rate"
        yield f"{r['phase']}/{r['metric']}:{kind}", r["verdict"]
    for h in c.get("hz", []):
        yield f"{h['phase']}/{h['metric']}", h["verdict"]

def gate_verdicts(c):
    """The gated tests' verdicts: the gate's family where the analyzer
    judged one (`gate`), else (an analyzer before it) the family's."""
    if c.get("gate"):
        return {t["name"]: t["verdict"] for t in c["gate"]["tests"]}
    return {n: v for n, v in tests(c) if n in gate}

def load_pair(name):
    p = out / "pairs" / name
    return json.loads(p.read_text()) if p.exists() else None

rows = []
def rate(k, n):
    lo, hi = clopper_pearson(k, n)
    return f"{k}/{n} = {100 * k / n:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"

fam = gat = n = 0
for i in range(pairs):
    c = load_pair(f"aa{i}.json")
    if c is None:
        continue
    n += 1
    fam += any(v != "no_clear_change" for _, v in tests(c))
    gat += any(v != "no_clear_change" for v in gate_verdicts(c).values())
rows.append(f"| A/A | false alarm: any test moved (whole family) | {rate(fam, n)} |")
rows.append(f"| A/A | false alarm: any gated test moved (the gate) | {rate(gat, n)} |")
for name in ("running/loop_hz", "running/work_cpu:median"):
    k = sum(dict(tests(c)).get(name, "no_clear_change") != "no_clear_change"
            for c in (load_pair(f"aa{i}.json") for i in range(pairs)) if c is not None)
    rows.append(f"| A/A | false alarm: {name} moved (whole family) | {rate(k, n)} |")
for us in shifts:
    trip = work = famwork = m = cpu = famcpu = 0
    for i in range(shift_pairs):
        c = load_pair(f"shift{us}_{i}.json")
        if c is None:
            continue
        m += 1
        g = gate_verdicts(c)
        trip += any(v == "worse" for v in g.values())
        work += g.get("running/work:median") == "worse"
        famwork += dict(tests(c)).get("running/work:median") == "worse"
        cpu += g.get("running/work_cpu:median") == "worse"
        famcpu += dict(tests(c)).get("running/work_cpu:median") == "worse"
    if m:
        rows.append(f"| +{us} µs on adapter_decode | the gate tripped | {rate(trip, m)} |")
        rows.append(f"| +{us} µs on adapter_decode | running/work:median worse in the gate | {rate(work, m)} |")
        rows.append(f"| +{us} µs on adapter_decode | running/work:median worse in the whole family | {rate(famwork, m)} |")
        if "running/work_cpu:median" in gate:
            rows.append(f"| +{us} µs on adapter_decode | running/work_cpu:median worse in the gate | {rate(cpu, m)} |")
        rows.append(f"| +{us} µs on adapter_decode | running/work_cpu:median worse in the whole family | {rate(famcpu, m)} |")
def rate_rows(kind, label):
    trip = hz = famhz = m = 0
    for i in range(shift_pairs):
        c = load_pair(f"{kind}_{i}.json")
        if c is None:
            continue
        m += 1
        g = gate_verdicts(c)
        trip += any(v == "worse" for v in g.values())
        hz += g.get("running/loop_hz") == "worse"
        famhz += dict(tests(c)).get("running/loop_hz") == "worse"
    if m:
        rows.append(f"| {label} | the gate tripped | {rate(trip, m)} |")
        rows.append(f"| {label} | running/loop_hz worse in the gate | {rate(hz, m)} |")
        rows.append(f"| {label} | running/loop_hz worse in the whole family | {rate(famhz, m)} |")
for hz in rates:
    rate_rows(f"hz{hz}", f"rate_hz 100 -> {hz} (declared)")
for f in factors:
    rate_rows(f"rtf{f}", f"--rtf {f} (undeclared)")
load = "; ".join((out / "load.txt").read_text().split("\n")).strip("; ")
table = (f"{load}; {rollouts} rollouts a side; "
         f"gate {','.join(gate)}; rates with their Clopper-Pearson 95 % interval\n\n"
         "| pairs | criterion | rate |\n|---|---|---|\n" + "\n".join(rows) + "\n")
(out / "gate_table.md").write_text(table)
print(table)
PY
