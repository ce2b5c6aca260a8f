-- Per episode and phase, for the cycles that recorded their work's CPU
-- time (the `cycle` CPU-time mode): how many, the off-CPU share of their
-- work (SUM(max(0, work - cpu)) / SUM(work), rounded to 1e-4 as the report
-- rounds it) and the nearest-rank p99 of the work CPU time (the value at
-- 1-based rank ceil(0.99 * n) of the sorted CPU times). Only the control
-- thread; phases without CPU time have no row. docs/metrics.md, CPU time.
WITH timed AS (
  SELECT robot, session, rollout, phase, work_ns, cpu_ns,
         CASE WHEN work_ns > cpu_ns THEN work_ns - cpu_ns ELSE 0 END AS off_ns,
         ROW_NUMBER() OVER (PARTITION BY robot, session, rollout, phase ORDER BY cpu_ns) AS rn,
         COUNT(*) OVER (PARTITION BY robot, session, rollout, phase) AS n
  FROM cycles
  WHERE thread = 'control' AND cpu_ns IS NOT NULL AND work_ns IS NOT NULL
)
SELECT robot, session, rollout, phase,
       COUNT(*) AS cpu_cycles,
       CASE WHEN SUM(work_ns) > 0 THEN ROUND(1e0 * SUM(off_ns) / SUM(work_ns), 4) END AS off_cpu_share,
       MAX(CASE WHEN rn = CEIL(0.99 * n) THEN cpu_ns END) AS work_cpu_p99_ns
FROM timed
GROUP BY robot, session, rollout, phase
ORDER BY robot, session, rollout, phase
