-- Input-paced phases (docs/input-paced.md): per episode and phase of the
-- control thread with input-paced cycles, the columns `fleet` and the
-- dataset's `phases` table give (docs/fleet.md), recomputed from the
-- cycles: arrival_hz, answer_latency_p50_ns and _p99_ns, late_answers and
-- late_share, the inputs lost by cause, bursts, success_rate_mean and
-- success_rate_min (docs/metrics.md, Input-paced phases).
--
-- Assumptions, as the runs it is checked on: the answer budget P is the
-- episode's nominal period (an input-paced loop runs at rtf 1; the report
-- also takes `--answer-budget-us`, or the median arrival period without a
-- nominal period). The caller values are read through a view named
-- `value_rows` over the `values` table (VALUES is an SQL keyword); the
-- success value is `success_rate`, else `control_command_success_rate`,
-- else the first by name that ends in `_success_rate` (the report takes
-- the header's first).
--
-- Two cycles are successive when the second is the row right after the
-- first in the thread's file order, both input-paced, in one segment.
WITH base AS (
  SELECT c.robot, c.session, c.rollout, c.phase, c.line, c.cycle, c.pace,
         c.arrival_ns, CAST(c.input_seq AS BIGINT) AS seq, c.answer_latency_ns,
         e.nominal_period_ns AS p,
         CASE WHEN LAG(c.pace) OVER w = 'input' AND LAG(c.segment) OVER w = c.segment
              THEN 1 ELSE 0 END AS successive,
         LAG(c.arrival_ns) OVER w AS prev_arrival,
         CAST(LAG(c.input_seq) OVER w AS BIGINT) AS prev_seq,
         LAG(c.answer_latency_ns) OVER w AS prev_latency
  FROM cycles c
  JOIN episodes e ON c.robot = e.robot AND c.session = e.session AND c.rollout = e.rollout
  WHERE c.thread = 'control'
  WINDOW w AS (PARTITION BY c.robot, c.session, c.rollout ORDER BY c.line)
),
steps AS (
  SELECT robot, session, rollout, phase, line, cycle, seq, answer_latency_ns, p,
         CASE WHEN successive = 1 THEN arrival_ns - prev_arrival END AS interval_ns,
         CASE WHEN successive = 1 THEN seq - prev_seq END AS step,
         CASE WHEN successive = 1 AND prev_latency > p THEN 1 ELSE 0 END AS prev_late,
         ROW_NUMBER() OVER (PARTITION BY robot, session, rollout, phase ORDER BY line) AS k
  FROM base
  WHERE pace = 'input'
),
-- A group starts at every arrival that is not closer than P/4 to the one
-- before it; a group that starts with a gap (over 1.5 P) and holds at
-- least two arrivals is a burst.
grouped AS (
  SELECT s.*,
         SUM(CASE WHEN interval_ns IS NOT NULL AND interval_ns < 0.25 * p THEN 0 ELSE 1 END)
           OVER (PARTITION BY robot, session, rollout, phase ORDER BY line
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS grp,
         CASE WHEN interval_ns > 1.5 * p THEN 1 ELSE 0 END AS gap
  FROM steps s
),
-- Within a group only its first arrival can be a gap (the others are
-- closer than P/4), so a group with a gap started with one.
bursts AS (
  SELECT robot, session, rollout, phase, grp
  FROM grouped
  GROUP BY robot, session, rollout, phase, grp
  HAVING COUNT(*) >= 2 AND MAX(gap) = 1
),
flagged AS (
  SELECT g.*, CASE WHEN b.grp IS NOT NULL THEN 1 ELSE 0 END AS in_burst
  FROM grouped g
  LEFT JOIN bursts b
    ON g.robot = b.robot AND g.session = b.session AND g.rollout = b.rollout
   AND g.phase = b.phase AND g.grp = b.grp
),
ranked AS (
  SELECT robot, session, rollout, phase, answer_latency_ns,
         ROW_NUMBER() OVER (PARTITION BY robot, session, rollout, phase ORDER BY answer_latency_ns) AS rn,
         COUNT(*) OVER (PARTITION BY robot, session, rollout, phase) AS n
  FROM steps
  WHERE answer_latency_ns IS NOT NULL
),
latency AS (
  SELECT robot, session, rollout, phase,
         MAX(CASE WHEN rn = CEIL(0.5 * n) THEN answer_latency_ns END) AS answer_latency_p50_ns,
         MAX(CASE WHEN rn = CEIL(0.99 * n) THEN answer_latency_ns END) AS answer_latency_p99_ns
  FROM ranked
  GROUP BY robot, session, rollout, phase
),
success_name AS (
  SELECT robot, session, rollout, name
  FROM (
    SELECT robot, session, rollout, name,
           ROW_NUMBER() OVER (
             PARTITION BY robot, session, rollout
             ORDER BY CASE name WHEN 'success_rate' THEN 0
                                WHEN 'control_command_success_rate' THEN 1 ELSE 2 END, name) AS pick
    FROM (SELECT DISTINCT robot, session, rollout, name FROM value_rows
          WHERE thread = 'control' AND name LIKE '%success_rate') n
  ) t
  WHERE pick = 1
),
success AS (
  SELECT s.robot, s.session, s.rollout, s.phase,
         ROUND(AVG(COALESCE(v.float_value, CAST(v.int_value AS DOUBLE))), 4) AS success_rate_mean,
         MIN(COALESCE(v.float_value, CAST(v.int_value AS DOUBLE))) AS success_rate_min
  FROM steps s
  JOIN success_name sn ON s.robot = sn.robot AND s.session = sn.session AND s.rollout = sn.rollout
  JOIN value_rows v
    ON v.robot = s.robot AND v.session = s.session AND v.rollout = s.rollout
   AND v.thread = 'control' AND v.cycle = s.cycle AND v.name = sn.name
  WHERE s.k > 1
  GROUP BY s.robot, s.session, s.rollout, s.phase
),
figures AS (
  SELECT robot, session, rollout, phase,
         CASE WHEN COUNT(interval_ns) > 0 AND SUM(interval_ns) > 0
              THEN ROUND(COUNT(interval_ns) * 1e9 / SUM(interval_ns), 4) END AS arrival_hz,
         SUM(CASE WHEN answer_latency_ns > p THEN 1 ELSE 0 END) AS late_answers,
         CASE WHEN COUNT(answer_latency_ns) > 0
              THEN ROUND(SUM(CASE WHEN answer_latency_ns > p THEN 1 ELSE 0 END) * 1e0
                         / COUNT(answer_latency_ns), 4) END AS late_share,
         CASE WHEN COUNT(seq) > 0 THEN
           SUM(CASE WHEN step >= 2 AND prev_late = 0 AND in_burst = 0 THEN step - 1 ELSE 0 END) END
           AS lost_before_arrival,
         CASE WHEN COUNT(seq) > 0 THEN
           SUM(CASE WHEN step >= 2 AND prev_late = 1 THEN step - 1 ELSE 0 END) END
           AS lost_after_late_answer,
         CASE WHEN COUNT(seq) > 0 THEN
           SUM(CASE WHEN step >= 2 AND prev_late = 0 AND in_burst = 1 THEN step - 1 ELSE 0 END) END
           AS lost_discarded,
         COUNT(DISTINCT CASE WHEN in_burst = 1 THEN grp END) AS bursts
  FROM flagged
  GROUP BY robot, session, rollout, phase
)
SELECT f.robot, f.session, f.rollout, f.phase, f.arrival_hz,
       l.answer_latency_p50_ns, l.answer_latency_p99_ns,
       f.late_answers, f.late_share,
       f.lost_before_arrival, f.lost_after_late_answer, f.lost_discarded, f.bursts,
       s.success_rate_mean, s.success_rate_min
FROM figures f
LEFT JOIN latency l
  ON f.robot = l.robot AND f.session = l.session AND f.rollout = l.rollout AND f.phase = l.phase
LEFT JOIN success s
  ON f.robot = s.robot AND f.session = s.session AND f.rollout = s.rollout AND f.phase = s.phase
ORDER BY f.robot, f.session, f.rollout, f.phase
