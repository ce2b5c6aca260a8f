-- Per episode and phase: cycles, overruns (and per 1,000 cycles), loop Hz
-- (1e9 / mean period, rounded to 1e-4 Hz as the report rounds it) and the
-- nearest-rank p50, p99 and p99.9 of the period: the value at 1-based rank
-- ceil(q * n) of the sorted periods. `1e3` (a DOUBLE in both engines), not
-- `1000.0`, which Spark reads as a DECIMAL, so that overruns per 1,000 is
-- the same double in Spark and DuckDB; `0.99 * n` is DECIMAL in both, so
-- its ceiling is exact.
WITH ranked AS (
  SELECT robot, session, rollout, phase, period_ns,
         ROW_NUMBER() OVER (PARTITION BY robot, session, rollout, phase ORDER BY period_ns) AS rn,
         COUNT(*) OVER (PARTITION BY robot, session, rollout, phase) AS n
  FROM periods
),
pct AS (
  SELECT robot, session, rollout, phase,
         MAX(n) AS periods,
         ROUND(1e9 / AVG(period_ns), 4) AS loop_hz,
         MAX(CASE WHEN rn = CEIL(0.5 * n) THEN period_ns END) AS period_p50_ns,
         MAX(CASE WHEN rn = CEIL(0.99 * n) THEN period_ns END) AS period_p99_ns,
         MAX(CASE WHEN rn = CEIL(0.999 * n) THEN period_ns END) AS period_p999_ns
  FROM ranked
  GROUP BY robot, session, rollout, phase
),
counts AS (
  SELECT robot, session, rollout, phase,
         COUNT(*) AS cycles,
         SUM(CASE WHEN overdue THEN 1 ELSE 0 END) AS overruns
  FROM cycles
  WHERE thread = 'control'
  GROUP BY robot, session, rollout, phase
)
SELECT c.robot, c.session, c.rollout, c.phase, c.cycles, c.overruns,
       1e3 * c.overruns / c.cycles AS overruns_per_1000,
       p.periods, p.loop_hz, p.period_p50_ns, p.period_p99_ns, p.period_p999_ns
FROM counts c
LEFT JOIN pct p
  ON c.robot = p.robot AND c.session = p.session AND c.rollout = p.rollout AND c.phase = p.phase
ORDER BY c.robot, c.session, c.rollout, c.phase
