"""Measurements of bench/fleet.sh (run it through that script).

    python3 bench/fleet_measure.py WORK RUNS ANALYZER

WORK/root holds robot/session/rollout episode directories (made by
bench/make_fleet.sh). Every figure is a child process measured with
os.wait4: wall time (perf_counter around it), CPU time (user + system) and
peak RSS (ru_maxrss). Medians of RUNS.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SQL = ROOT / "docs" / "sql"


def measure(cmd):
    """(wall s, cpu s, peak RSS bytes, stdout) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode not in (0,):
        sys.exit(f"{cmd[:3]}... exited {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, out


def duckdb_child(dataset):
    """Runs in a child: the fleet's phase figures and stage p99 over the
    dataset with docs/sql, printing the query time and row counts."""
    import duckdb
    t0 = time.perf_counter()
    con = duckdb.connect()
    for t in ("cycles", "spans", "episodes"):
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{dataset}/{t}/**/*.parquet', "
                    "hive_partitioning = true, hive_types_autocast = false)")
    con.execute((SQL / "periods.sql").read_text())
    phases = con.execute((SQL / "phase_figures.sql").read_text()).fetchall()
    stages = con.execute((SQL / "stage_p99.sql").read_text()).fetchall()
    print(json.dumps({"seconds": time.perf_counter() - t0, "phase_rows": len(phases),
                      "stage_rows": len(stages)}))


def du(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--duckdb":
        return duckdb_child(sys.argv[2])
    work, runs, analyzer = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    root = work / "root"
    episodes = sorted(p.parent for p in root.glob("*/*/*/control_timing.jsonl")
                      if not any(part.startswith(".") for part in p.relative_to(root).parts))
    # Every thread's JSONL, counted once per episode (copies are hard
    # links on disk, but each is read as a file of its own).
    files = [f for e in episodes for f in e.glob("control_timing*.jsonl")]
    jsonl = sum(f.stat().st_size for f in files)
    robots = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    print(f"{len(episodes)} episodes, {jsonl / 1e6:,.0f} MB of JSONL; warming the page cache ...",
          file=sys.stderr)
    for f in set(p.resolve() for p in files):
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass

    # The jobs are passed, not left to fleet's default, so that every
    # label below names the number that ran.
    jobs = len(os.sched_getaffinity(0))

    def fleet(roots, name):
        out = work / f"out-{name}"
        return measure([analyzer, "fleet", *map(str, roots), "--out", str(out), "--jobs", str(jobs)])

    single, f2, scale, export, duck = [], [], {}, [], []
    dataset = work / "dataset"
    for run in range(runs):
        print(f"run {run + 1}/{runs}: single-episode analyzer over {len(episodes)} ...", file=sys.stderr)
        w = c = rss = 0
        for e in episodes:
            wall, cpu, r, _ = measure([analyzer, "report", str(e), "--json"])
            w, c, rss = w + wall, c + cpu, max(rss, r)
        single.append((w, c, rss))
        print(f"run {run + 1}/{runs}: fleet --jobs {jobs}, and over one robot's episodes ...",
              file=sys.stderr)
        f2.append(fleet([root], "all")[:3])
        scale.setdefault(len(episodes), []).append(f2[-1])
        n = sum(1 for e in episodes if e.parents[1] == robots[0])
        scale.setdefault(n, []).append(fleet(robots[:1], "one-robot")[:3])
        print(f"run {run + 1}/{runs}: export parquet, DuckDB ...", file=sys.stderr)
        shutil.rmtree(dataset, ignore_errors=True)
        export.append(measure([analyzer, "export", *map(str, episodes), "--format", "parquet",
                               "--out", str(dataset)])[:3])
        wall, cpu, r, out = measure([sys.executable, __file__, "--duckdb", str(dataset)])
        duck.append((wall, cpu, r, json.loads(out)))

    med = statistics.median
    mb = jsonl / 1e6
    rows = [("single-episode `report --json`, one process per episode", single)]
    rows += [(f"`fleet --jobs {jobs}`", f2)]
    print(f"{len(episodes)} episodes, {mb:,.0f} MB of JSONL, {runs} runs (medians)")
    print()
    print("| run | wall s | CPU s | cores used | MB/s | wall vs single | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    s_wall = med(x[0] for x in single)
    for name, xs in rows:
        wall, cpu, rss = med(x[0] for x in xs), med(x[1] for x in xs), med(x[2] for x in xs)
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {cpu / wall:.2f} | {mb / wall:.0f} "
              f"| **{wall / s_wall:.2f}×** | {rss / 1e6:.0f} |")
    print()
    print("| episodes in `fleet` | wall s | peak RSS MB |")
    print("|---|---|---|")
    for n in sorted(scale):
        xs = scale[n]
        print(f"| {n} | {med(x[0] for x in xs):.1f} | {med(x[2] for x in xs) / 1e6:.0f} |")
    lo, hi = min(scale), max(scale)
    r_lo, r_hi = med(x[2] for x in scale[lo]), med(x[2] for x in scale[hi])
    print(f"\npeak RSS at {hi} episodes / at {lo}: **{r_hi / r_lo:.2f}×**")
    print()
    pq = du(dataset)
    e_wall = med(x[0] for x in export)
    d_wall = med(x[0] for x in duck)
    d_query = med(x[3]["seconds"] for x in duck)
    f2_wall = med(x[0] for x in f2)
    print(f"export --format parquet: {e_wall:.1f} s wall ({mb / e_wall:.0f} MB/s of JSONL), "
          f"peak RSS {med(x[2] for x in export) / 1e6:.0f} MB; dataset {pq / 1e6:,.0f} MB against "
          f"{mb:,.0f} MB of JSONL (**{pq / jsonl:.3f}×**)")
    print(f"DuckDB phase_figures.sql + stage_p99.sql over the dataset: {d_query:.1f} s query "
          f"({d_wall:.1f} s with Python's start), peak RSS {med(x[2] for x in duck) / 1e6:.0f} MB; "
          f"rerunning `fleet --jobs {jobs}`: {f2_wall:.1f} s; DuckDB / fleet **{d_query / f2_wall:.2f}×** "
          f"({duck[0][3]['phase_rows']} phase rows, {duck[0][3]['stage_rows']} stage rows)")


if __name__ == "__main__":
    main()
