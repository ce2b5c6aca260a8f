//! The control loop paced by the robot (`[robot] transport = "udp"`,
//! docs/input-paced.md): no sleep of its own. Each cycle blocks in the
//! receive of the robot peer's next state (recorded as the cycle's wait),
//! begins as an input-paced release with the state's arrival and counter,
//! runs the same stages as the deadline-paced loop, and answers the state
//! in its `robot_send_command` span. `dt` is the robot's own clock step
//! (the input pacer). The robot's end of stream ends the rollout complete
//! (states lost on the way are a shortfall, counted); no state within the
//! timeout from a robot that has not finished ends the motion, aborted, as
//! a robot ends it when its states stop. A datagram that is neither a
//! state nor the end is counted (`robot_bad_datagrams`) and skipped.

use std::time::Duration;

use looptime_runtime::input::InputPacer;

use super::*;
use crate::robot::{self, Link, PeerSpec, Received};

/// A receive waits at most this many periods (and at least 100 ms).
const TIMEOUT_PERIODS: u64 = 50;

/// Run the loop against a robot peer started here; the peer stops with it.
/// `peer_rec` records the peer's sends; it comes back in the outcome.
// long-fn: the input-paced control thread's loop, from the first receive to the end of the robot's stream, kept in one place so its allocation-free body reads top to bottom (as control::control_loop)
pub(crate) fn input_loop(
    cfg: &Config,
    mut rec: Recorder,
    ids: &Ids,
    sh: &Shared,
    peer_rec: Option<ThreadRecorder>,
) -> Result<ControlOutcome, ServeError> {
    let mut realtime = realtime_setup(cfg);
    let life = Lifecycle::new(cfg);
    let total = life.warm + cfg.running_cycles();
    let period = cfg.nominal_period_ns();
    let (link, peer, timeout) = start_peer(cfg, total, sh, peer_rec)?;
    if !link.kernel_stamps() {
        realtime.warnings.push(
            "robot: the kernel gives no receive timestamps (SO_TIMESTAMPNS refused); arrivals are when the receive returned, so a state's wait in the socket is invisible".into(),
        );
    }
    let max_dt = (period as f64 * cfg.scheduler.max_dt_periods) as u64;
    let mut pacer = InputPacer::new(max_dt.max(1))?;
    let mut work = Work::with_late_answers(cfg);
    let mut last_phase: Option<PhaseId> = None;
    let mut prev_arrival = looptime_capture::clock::monotonic_ns();
    pacer.start(prev_arrival);
    let (mut cycles, mut aborted) = (0u64, false);
    let mut abort_reason = String::from("signal");
    let mut bad = 0u64;
    sh.state.enter();
    // Test builds count this thread's allocations over the cycles, as the
    // deadline-paced loop's: the receive and the answer make none.
    #[cfg(test)]
    crate::alloc_probe::start();
    for i in 0..total {
        let Some(phase) = next_phase(sh, &life, i, ids, &mut last_phase) else {
            aborted = true;
            break;
        };
        let step = Step {
            ids,
            sh,
            link: &link,
            phase,
            i,
        };
        match step.run(&mut rec, &mut work, &mut pacer, &mut bad)? {
            Cycle::Ran(arrival) => {
                push_stat(sh, i, arrival, prev_arrival);
                prev_arrival = arrival;
                cycles += 1;
            }
            Cycle::Silent if !peer.finished() => {
                realtime.warnings.push(format!(
                    "robot: no state for {} ms after cycle {i}; the motion ended there, as a robot ends it when its states stop",
                    timeout.as_millis()
                ));
                aborted = true;
                abort_reason = "the robot's states stopped".into();
                break;
            }
            Cycle::Silent | Cycle::Ended => {
                realtime.warnings.push(format!(
                    "robot: its stream ended; the loop ran {cycles} of {total} planned cycles ({} states lost on the way, counted, not an abort)",
                    total - cycles
                ));
                break;
            }
        }
    }
    if bad > 0 {
        realtime.warnings.push(format!(
            "robot: {bad} bad datagrams (neither a state nor the end of stream) skipped"
        ));
        abort_reason = format!("{abort_reason}; {bad} bad datagrams skipped");
    }
    #[cfg(test)]
    crate::alloc_probe::CONTROL_LOOP.store(
        crate::alloc_probe::stop(),
        std::sync::atomic::Ordering::SeqCst,
    );
    let aborted = end_loop(sh, cycles, aborted);
    // The peer ends with its last state (or at the stop flag).
    let (_, peer_rec) = peer.join();
    rt::teardown_control_thread(&realtime);
    Ok(ControlOutcome {
        rec,
        abort_reason,
        peer: peer_rec.map(|(rec, work)| ThreadRecorder {
            rec,
            work,
            publish: None,
            source: None,
        }),
        cycles,
        overruns: 0,
        skipped: 0,
        aborted,
        realtime,
    })
}

/// The robot peer for `states` states of `cfg`, recording its sends into
/// `peer_rec`; the loop's link and the receive's timeout.
fn start_peer(
    cfg: &Config,
    states: u64,
    sh: &Shared,
    peer_rec: Option<ThreadRecorder>,
) -> Result<(Link, robot::Peer, Duration), ServeError> {
    let period = cfg.nominal_period_ns();
    let timeout = Duration::from_nanos((period * TIMEOUT_PERIODS).max(100_000_000));
    let spec = PeerSpec {
        period_ns: period,
        states,
        stall_every_ns: (cfg.robot.stall_every_ms * 1e6) as u64,
        stall_ns: (cfg.robot.stall_ms * 1e6) as u64,
    };
    let recorder = peer_rec.map(|t| (t.rec, t.work));
    let (link, peer) =
        robot::start(spec, timeout, sh.stop.clone(), recorder).map_err(|source| {
            ServeError::Thread {
                thread: "robot_peer",
                source,
            }
        })?;
    Ok((link, peer, timeout))
}

/// Cycle `i`'s live statistics: its period from the previous arrival,
/// its work from its own arrival (no deadline: no lag, never overdue).
fn push_stat(sh: &Shared, i: u64, arrival: u64, prev_arrival: u64) {
    sh.live.push_stat(CycleStat {
        cycle: i,
        period_ns: arrival.saturating_sub(prev_arrival),
        work_ns: looptime_capture::clock::monotonic_ns().saturating_sub(arrival),
        lag_ns: 0,
        overdue: false,
        completion_lag_ns: None,
    });
}

/// One cycle of the input-paced loop.
struct Step<'s> {
    ids: &'s Ids,
    sh: &'s Shared,
    link: &'s Link,
    phase: PhaseId,
    i: u64,
}

/// What one step of the loop did.
enum Cycle {
    /// A state was read (at this time) and released a cycle.
    Ran(u64),
    /// The robot's end of stream.
    Ended,
    /// Nothing within the timeout.
    Silent,
}

impl<'s> Step<'s> {
    /// Wait for the next state (skipping bad datagrams, counted in `bad`),
    /// then run the cycle it releases.
    fn run(
        &self,
        rec: &mut Recorder,
        work: &mut Work<'s>,
        pacer: &mut InputPacer,
        bad: &mut u64,
    ) -> Result<Cycle, ServeError> {
        let ids = self.ids;
        rec.begin_wait();
        let got = loop {
            match self.link.receive() {
                Ok((Received::Bad(_), _)) => *bad += 1,
                other => break other,
            }
        };
        rec.end_wait();
        let (got, stamp) = got.map_err(|source| ServeError::Thread {
            thread: "control (robot link)",
            source,
        })?;
        let (state, stamp) = match (got, stamp) {
            (Received::State(s), Some(stamp)) => (s, stamp),
            (Received::End { .. }, _) => return Ok(Cycle::Ended),
            _ => return Ok(Cycle::Silent),
        };
        // The arrival that counts is the kernel's (the state may have
        // waited in the socket while the loop was behind); dt follows it.
        let tick = pacer.arrived(stamp.arrival_ns(), Some(state.seq), Some(state.robot_ns));
        let release = match stamp.arrival {
            Some(k) => tick.release().with_read(stamp.read_ns, Some(k.bound_ns)),
            None => tick.release(),
        };
        let arrival = stamp.read_ns;
        rec.begin_cycle(self.phase, release);
        work.udp = Some((self.link, state.seq));
        let paused = self.phase == ids.paused;
        work.stages(rec, ids, self.sh, paused, self.i, tick.dt_measured_ns);
        rec.set_int(ids.robot_seq, state.seq as i64);
        rec.set_int(ids.robot_ms, (state.robot_ns / 1_000_000) as i64);
        rec.set_float(ids.success, work.robot.success_rate());
        if let Some(v) = ids.robot_success {
            rec.set_float(v, state.success_rate);
        }
        if let Some(v) = ids.robot_bad {
            rec.set_int(v, *bad as i64);
        }
        rec.end_cycle();
        Ok(Cycle::Ran(arrival))
    }
}
