-- Periods: start-to-start intervals of adjacent cycles in the same segment
-- (same phase, consecutive cycle indices), control thread, one row per cycle
-- with a period. docs/metrics.md "Segments and phases".
CREATE OR REPLACE TEMPORARY VIEW periods AS
SELECT robot, session, rollout, phase, period_ns
FROM (
  SELECT robot, session, rollout, phase,
         CASE WHEN LAG(phase) OVER (PARTITION BY robot, session, rollout ORDER BY line) = phase
               AND LAG(cycle) OVER (PARTITION BY robot, session, rollout ORDER BY line) + 1 = cycle
              THEN start_ns - LAG(start_ns) OVER (PARTITION BY robot, session, rollout ORDER BY line)
         END AS period_ns
  FROM cycles
  WHERE thread = 'control'
) t
WHERE period_ns IS NOT NULL
