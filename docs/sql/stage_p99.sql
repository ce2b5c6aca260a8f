-- Per episode, phase and stage group (tree path and attributes), control
-- thread: span count and the nearest-rank p50 and p99 of the wall time,
-- as the report's stage table gives them.
WITH ranked AS (
  SELECT robot, session, rollout, phase, path, attrs, wall_ns,
         ROW_NUMBER() OVER (PARTITION BY robot, session, rollout, phase, path, attrs ORDER BY wall_ns) AS rn,
         COUNT(*) OVER (PARTITION BY robot, session, rollout, phase, path, attrs) AS n
  FROM spans
  WHERE thread = 'control'
)
SELECT robot, session, rollout, phase, path, attrs,
       MAX(n) AS spans,
       MAX(CASE WHEN rn = CEIL(0.5 * n) THEN wall_ns END) AS wall_p50_ns,
       MAX(CASE WHEN rn = CEIL(0.99 * n) THEN wall_ns END) AS wall_p99_ns
FROM ranked
GROUP BY robot, session, rollout, phase, path, attrs
ORDER BY robot, session, rollout, phase, path, attrs
