-- The dataset's `phases` table as it is: one row per episode and phase,
-- the columns of `fleet`'s table (docs/fleet.md), written by `export`.
SELECT * FROM phases ORDER BY robot, session, rollout, phase
