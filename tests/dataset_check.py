#!/usr/bin/env python3
"""Checks the Parquet dataset (docs/dataset.md) and the SQL of docs/fleet.md:
DuckDB runs docs/sql/*.sql over a dataset of at least 20 episodes and
reproduces, exactly, every episode's per-phase cycles, overruns, loop Hz and
nearest-rank period p50/p99/p99.9, its per-stage span counts and wall
p50/p99, and (where cycles carry their work's CPU time) its per-phase
off-CPU share and work-CPU p99, as `analyze_control_timing report --json`
gives them.

Usage: python3 tests/dataset_check.py ANALYZER LOOPTIME [--spark]

It also runs `analyze_control_timing fleet` over the same episodes and
checks its table (fleet.parquet read with pyarrow: the column types, and
every row equal to the SQL's figures) and its summary (the spiky session's
rollouts are the overrun outliers).

With --spark, the same SQL files also run on PySpark in local mode
(local[2]) over the same dataset, and must give the same rows.
"""
import decimal
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

import duckdb

ROOT = pathlib.Path(__file__).resolve().parent.parent
SQL = ROOT / "docs" / "sql"


def run(*cmd):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True)


def record(looptime, runs, config, episodes):
    """One serve session of `episodes` rollouts; returns its rollout dirs."""
    cfg = runs / "config.toml"
    runs.mkdir(parents=True)
    cfg.write_text(config)
    run(looptime, "serve", "--control-timing", "--config", cfg, "--episodes", episodes, "--runs-dir", runs)
    session = (runs / "latest").resolve().parent
    return sorted(p for p in session.iterdir() if p.name.startswith("rollout-"))


def duckdb_rows(dataset, query):
    con = duckdb.connect()
    for view, table in (("cycles", "cycles"), ("spans", "spans"), ("episodes", "episodes"),
                        ("samples", "samples"), ("value_rows", "values"), ("phases", "phases")):
        con.execute(
            f"CREATE VIEW {view} AS SELECT * FROM read_parquet('{dataset}/{table}/**/*.parquet', "
            "hive_partitioning = true, hive_types_autocast = false)")
    con.execute((SQL / "periods.sql").read_text())
    cur = con.execute((SQL / query).read_text())
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def spark_rows(dataset, query):
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("looptime-dataset-check")
             .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for view, table in (("cycles", "cycles"), ("spans", "spans"), ("episodes", "episodes"),
                        ("samples", "samples"), ("value_rows", "values")):
        spark.read.parquet(f"{dataset}/{table}").createOrReplaceTempView(view)
    spark.sql((SQL / "periods.sql").read_text())
    return [r.asDict() for r in spark.sql((SQL / query).read_text()).collect()]


def same_rows(query, duck, spark):
    """Spark's rows equal DuckDB's: keys and integers exactly, floats to
    within one step of the 1e-4 rounding the queries apply (`ROUND(x, 4)`
    rounds a value on a .5 boundary of its binary form differently in the
    two engines). A difference names the row and the field."""
    def is_num(v):
        return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)

    def key(r):
        return tuple(sorted((k, v) for k, v in r.items() if not is_num(v)))

    d, s = {key(r): r for r in duck}, {key(r): r for r in spark}
    assert len(d) == len(duck) and len(s) == len(spark), f"{query}: duplicate keys"
    assert d.keys() == s.keys(), f"{query}: rows differ: {sorted(d.keys() ^ s.keys())[:5]}"
    for k, row in d.items():
        for field, x in row.items():
            if not is_num(x):
                continue
            y = s[k][field]
            if isinstance(x, int) and isinstance(y, (int, decimal.Decimal)) and y == int(y):
                assert x == int(y), f"{query} {dict(k)} {field}: DuckDB {x}, Spark {y}"
            else:
                assert x is not None and y is not None and abs(float(x) - float(y)) <= 1.0001e-4, \
                    f"{query} {dict(k)} {field}: DuckDB {x}, Spark {y}"


INPUT_COLUMNS = ("arrival_hz", "answer_latency_p50_ns", "answer_latency_p99_ns", "late_answers", "late_share",
                 "lost_before_arrival", "lost_after_late_answer", "lost_discarded", "bursts",
                 "success_rate_mean", "success_rate_min")
STAGES = ("camera_read", "viewer_control", "adapter_decode", "executor", "robot_send_command", "recording")


def check_input_paced(dataset, fleet_out):
    """docs/sql/input_paced.sql over the dataset equals fleet's input-paced
    columns, row for row, and the dataset's `phases` table holds the same;
    the faults of the UDP session show (late answers, bursts)."""
    import pyarrow.parquet as pq
    sql = duckdb_rows(dataset, "input_paced.sql")
    fleet = {(r["robot"], r["session"], r["rollout"], r["phase"]): r
             for r in pq.read_table(fleet_out / "fleet.parquet").to_pylist()}
    stored = {(r["robot"], r["session"], r["rollout"], r["phase"]): r
              for r in duckdb_rows(dataset, "phases_table.sql")}
    assert len(sql) >= 4, f"only {len(sql)} input-paced phases"
    assert len(sql) == sum(1 for r in fleet.values() if r["late_answers"] is not None), "the same phases"
    figures = 0
    for r in sql:
        key = (r["robot"], r["session"], r["rollout"], r["phase"])
        for c in INPUT_COLUMNS:
            assert fleet[key][c] == r[c], (key, c, fleet[key][c], r[c])
            assert stored[key][c] == r[c], (key, c, "phases table", stored[key][c], r[c])
            figures += 1
    assert sum(r["late_answers"] for r in sql) >= 20 and sum(r["bursts"] for r in sql) >= 4, sql
    print(f"input-paced: {len(sql)} phases, {figures} figures of docs/sql/input_paced.sql equal to fleet's "
          f"and to the dataset's phases table")


def check_fleet(analyzer, tmp, eps, phases, dirs, ages=None):
    """`fleet` over the recorded runs and the fixtures: the table's types
    (pyarrow), its rows against the SQL's per-phase figures, and the
    outlier rule naming the two spiky rollouts on overruns."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    out = tmp / "fleet"
    roots = [tmp / "paced", tmp / "uncapped", tmp / "spiky", tmp / "udp", ROOT / "fixtures/v1/serve-episode",
             ROOT / "fixtures/v2/serve-episode", tmp / "odd"]
    res = run(analyzer, "fleet", *roots, "--out", out, "--jobs", "2")
    table = pq.read_table(out / "fleet.parquet")
    types = {f.name: f.type for f in table.schema}
    for col in ("cycles", "segments", "overruns", "nominal_period_ns"):
        assert types[col] == pa.uint64(), (col, types[col])
    for col in ("period_p50_ns", "period_p99_ns", "period_p999_ns", "work_p99_ns", "top_stage_p99_ns"):
        assert types[col] == pa.int64(), (col, types[col])
    assert types["loop_hz"] == pa.float64(), types["loop_hz"]
    assert pa.types.is_list(types["caveats"]) or pa.types.is_large_list(types["caveats"]), types["caveats"]
    rows = table.to_pylist()
    assert len({r["episode_dir"] for r in rows}) == len(eps), "every episode once"
    assert len(rows) == len(phases), (len(rows), len(phases))
    for r in rows:
        sql = phases[(r["robot"], r["session"], r["rollout"], r["phase"])]
        for k in ("cycles", "overruns", "loop_hz", "period_p50_ns", "period_p99_ns", "period_p999_ns"):
            assert r[k] == sql[k], (r["episode_dir"], r["phase"], k, r[k], sql[k])
    # The spiky session's two rollouts overrun (spikes of 12 ms in a 10 ms
    # period with probability 0.2); the 22 others almost never do, so the
    # phase median of overruns per 1000 is 0 and the two stand out.
    spiky = sorted(str(p.resolve()) for p in (tmp / "spiky").glob("session-*/rollout-*"))
    flagged = [line for line in res.stdout.splitlines() if "overruns per 1000 =" in line]
    for ep in spiky:
        key = "/".join(dirs[ep])
        assert any(line.strip().startswith(key + " `running`") for line in flagged), (key, res.stdout)
    # Data age: the long table fleet_sources.parquet, one row per episode,
    # phase and source, equal to the SQL's; fleet.parquet's worst source.
    src = pq.read_table(out / "fleet_sources.parquet").to_pylist()
    assert src, "the recorded sessions have data age"
    by_key = {(r["robot"], r["session"], r["rollout"], r["phase"], r["source"]): r for r in src}
    for k, r in by_key.items():
        want = ages[k]
        for f in ("uses", "age_p50_ns", "age_p99_ns"):
            assert r[f] == want[f], (k, f, r[f], want[f])
        assert (r["stale"] or 0) == want["stale"], (k, r["stale"], want["stale"])
    for r in rows:
        mine = [s for k, s in by_key.items() if k[:4] == (r["robot"], r["session"], r["rollout"], r["phase"])]
        p99s = [s["age_p99_ns"] for s in mine if s["age_p99_ns"] is not None]
        assert r["max_age_p99_ms"] == (max(p99s) / 1e6 if p99s else None), (r["episode_dir"], r["phase"])
    print(f"fleet: {len(src)} source rows equal to the SQL's data age")
    print(f"fleet: {len(rows)} rows, types and figures equal to the SQL's; "
          f"{len(flagged)} overrun outliers, the spiky rollouts among them")


# A robot name with non-ASCII letters, a space and characters Hive escapes,
# and an empty one: the dataset's keys must read back exactly in DuckDB and
# Spark (the empty one as the documented placeholder `unknown`).
ODD_ROBOT = "ü-東京 #1:a=b/c"


def odd_robots(root):
    """Copies of the v1 serve fixture whose manifests name the robots
    ODD_ROBOT and "" (host.hostname)."""
    out = []
    for name, host in (("odd", ODD_ROBOT), ("empty", "")):
        d = root / name
        shutil.copytree(ROOT / "fixtures/v1/serve-episode", d)
        m = json.loads((d / "manifest.json").read_text())
        m["host"]["hostname"] = host
        (d / "manifest.json").write_text(json.dumps(m))
        out.append(d)
    return out


def main():
    analyzer, looptime = sys.argv[1], sys.argv[2]
    spark = "--spark" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        base = "[stats]\ninterval_s = 0\n[run]\nwarmup_s = 0.1\nduration_s = 0.3\n"
        eps = record(looptime, tmp / "paced", base, 10)
        eps += record(looptime, tmp / "uncapped", base + "rtf = 0.0\n", 10)
        eps += record(looptime, tmp / "spiky", base.replace("duration_s = 0.3", "duration_s = 0.5") +
                      "[stages.adapter_decode.cost]\nspike_probability = 0.2\nspike_us = 12000.0\n", 2)
        # Input-paced: the robot peer over loopback UDP at 1 kHz, stages of
        # a few µs, its link stalling and every 40th answer 3 ms late.
        eps += record(looptime, tmp / "udp", base.replace("duration_s = 0.3", "duration_s = 0.6") +
                      "rate_hz = 1000.0\n" + "".join(f"[stages.{s}.cost]\nmean_us = 3.0\n" for s in STAGES) +
                      "[robot]\ntransport = \"udp\"\nstall_every_ms = 150.0\nstall_ms = 5.0\n"
                      "late_answer_every = 40\nlate_answer_us = 3000.0\n", 2)
        eps += [ROOT / "fixtures/v1/serve-episode", ROOT / "fixtures/v2/serve-episode"]
        eps += odd_robots(tmp / "odd")
        assert len(eps) >= 20, len(eps)
        dataset = tmp / "dataset"
        run(analyzer, "export", *eps, "--format", "parquet", "--out", dataset)

        con = duckdb.connect()
        dirs = {r[3]: r[:3] for r in con.execute(
            f"SELECT robot, session, rollout, episode_dir FROM read_parquet('{dataset}/episodes/**/*.parquet', "
            "hive_partitioning = true, hive_types_autocast = false)").fetchall()}
        assert len(dirs) == len(eps), (len(dirs), len(eps))
        robots = {k[0] for k in dirs.values()}
        assert ODD_ROBOT in robots and "unknown" in robots and "" not in robots, robots
        phases = {(r["robot"], r["session"], r["rollout"], r["phase"]): r for r in duckdb_rows(dataset, "phase_figures.sql")}
        stages = {(r["robot"], r["session"], r["rollout"], r["phase"], r["path"], r["attrs"]): r
                  for r in duckdb_rows(dataset, "stage_p99.sql")}
        cpu = {(r["robot"], r["session"], r["rollout"], r["phase"]): r for r in duckdb_rows(dataset, "cpu_share.sql")}
        ages = {(r["robot"], r["session"], r["rollout"], r["phase"], r["source"]): r
                for r in duckdb_rows(dataset, "data_age.sql")}
        all_ages = dict(ages)
        ages_checked = 0
        cpu_checked = 0
        checked = 0
        overruns = 0
        for ep in eps:
            rep = json.loads(run(analyzer, "report", ep, "--json").stdout)
            key = dirs[str(ep)]
            for p in rep["phases"]:
                got = phases[key + (p["phase"],)]
                want = {
                    "cycles": p["cycles"], "overruns": p["overruns"],
                    "loop_hz": p["loop_hz"], "period_p50_ns": p["period"]["p50_ns"] if p["period"]["count"] else None,
                    "period_p99_ns": p["period"]["p99_ns"] if p["period"]["count"] else None,
                    "period_p999_ns": p["period"]["p999_ns"] if p["period"]["count"] else None,
                }
                for k, v in want.items():
                    assert got[k] == v, (str(ep), p["phase"], k, got[k], v)
                    checked += 1
                overruns += p["overruns"]
                # Per-cycle CPU time (the default `cycle` mode of the
                # recorded sessions; the fixtures predate the modes): the
                # SQL's row exists exactly where the report has the figures.
                c = cpu.get(key + (p["phase"],))
                assert (c is None) == ("work_cpu" not in p), (str(ep), p["phase"], c)
                if c is not None:
                    for k, v in (("cpu_cycles", p["work_cpu"]["count"]), ("off_cpu_share", p.get("off_cpu_share")),
                                 ("work_cpu_p99_ns", p["work_cpu"]["p99_ns"])):
                        assert c[k] == v, (str(ep), p["phase"], k, c[k], v)
                        checked += 1
                    cpu_checked += 1
            # Data age (the recorded sessions; the fixtures predate it): each
            # source's uses, age p50/p99 and stale uses per phase.
            for src in (rep.get("data_age") or {}).get("sources", []):
                for p in src["phases"]:
                    got = ages.pop(key + (p["phase"], src["source"]))
                    a = p["age_at_use"] or {}
                    for k, v in (("uses", p["uses"]), ("age_p50_ns", a.get("p50_ns")),
                                 ("age_p99_ns", a.get("p99_ns")), ("stale", p["stale"] or 0)):
                        assert got[k] == v, (str(ep), p["phase"], src["source"], k, got[k], v)
                        checked += 1
                    ages_checked += 1
            for s in rep["stages"]:
                attrs = ";".join(f"{k}={v}" for k, v in sorted(s["attrs"].items()))
                got = stages[key + (s["phase"], s["path"], attrs)]
                for k, v in (("spans", s["count"]), ("wall_p50_ns", s["wall"]["p50_ns"]),
                             ("wall_p99_ns", s["wall"]["p99_ns"])):
                    assert got[k] == v, (str(ep), s["phase"], s["path"], k, got[k], v)
                    checked += 1
        assert overruns > 0, "the spiky session should overrun"
        assert not ages, f"SQL rows the report does not have: {list(ages)[:3]}"
        assert ages_checked >= 60, f"only {ages_checked} data-age rows"
        assert cpu_checked >= 20, f"only {cpu_checked} phases with per-cycle CPU time"
        print(f"duckdb: {len(eps)} episodes, {len(phases)} phase rows, {len(stages)} stage rows, "
              f"{checked} figures equal to the analyzer's")
        check_fleet(analyzer, tmp, eps, phases, dirs, all_ages)
        check_input_paced(dataset, tmp / "fleet")
        if spark:
            for q in ("phase_figures.sql", "stage_p99.sql", "cpu_share.sql", "data_age.sql", "input_paced.sql"):
                a = duckdb_rows(dataset, q)
                b = spark_rows(dataset, q)
                same_rows(q, a, b)
                print(f"spark: {q}: {len(b)} rows, equal to DuckDB's")


if __name__ == "__main__":
    main()
