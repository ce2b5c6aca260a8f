-- Per episode, phase and data-age source, control thread: the uses, the
-- nearest-rank p50 and p99 of the age at use, and the stale uses, as the
-- report's data_age gives them (`uses`, `age_at_use.p50_ns`, `.p99_ns`,
-- `stale`). A use without an age (a source on another clock, or stamped
-- more than 1 µs after its use) counts among the uses, not the ages: its
-- age_ns is null and sorts last.
WITH uses AS (
  SELECT robot, session, rollout, phase, source, age_ns, stale
  FROM samples
  WHERE thread = 'control' AND NOT produced
),
ranked AS (
  SELECT robot, session, rollout, phase, source, age_ns, stale,
         ROW_NUMBER() OVER (PARTITION BY robot, session, rollout, phase, source ORDER BY age_ns ASC NULLS LAST) AS rn,
         COUNT(age_ns) OVER (PARTITION BY robot, session, rollout, phase, source) AS n
  FROM uses
)
SELECT robot, session, rollout, phase, source,
       COUNT(*) AS uses,
       MAX(CASE WHEN rn = CEIL(0.5 * n) THEN age_ns END) AS age_p50_ns,
       MAX(CASE WHEN rn = CEIL(0.99 * n) THEN age_ns END) AS age_p99_ns,
       SUM(CASE WHEN stale THEN 1 ELSE 0 END) AS stale
FROM ranked
GROUP BY robot, session, rollout, phase, source
ORDER BY robot, session, rollout, phase, source
