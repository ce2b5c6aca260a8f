//! Data age on the hot path: the samples a cycle uses (`sample`) or a
//! producer thread publishes (`produced`), into the cycle's preallocated
//! sample slots, and their counters.

use super::*;

impl Recorder {
    /// Record that this cycle used sample `seq` of `source`, stamped
    /// `stamp_ns` on the source's clock (for a host-monotonic source, a
    /// [`clock::monotonic_ns`](crate::clock::monotonic_ns) reading). Pass the
    /// sample's capture time, or for a polled state the time it was
    /// *requested*, so that a late reply cannot make an old state look
    /// fresh. The moment of use is read here (one TSC read, as a span's
    /// start): record the use where the cycle takes the sample, so its age
    /// is measured from then, not from the cycle's start.
    ///
    /// Outside a cycle the call is counted (`samples_outside_cycle`) and not
    /// stored; beyond the cycle's sample slots it is counted in the cycle's
    /// `samples_dropped`. No allocation, lock or system call.
    #[inline]
    pub fn sample(&mut self, source: SourceId, seq: u64, stamp_ns: u64) {
        self.put_sample(source, seq, stamp_ns, false);
    }

    /// Record that this thread published sample `seq` of `source`, stamped
    /// `stamp_ns` (a producer thread's recorder: a camera reader, a policy
    /// worker). The analyzer then reports each sample's wait from
    /// production to first use, and samples never used. As
    /// [`sample`](Self::sample) otherwise.
    #[inline]
    pub fn produced(&mut self, source: SourceId, seq: u64, stamp_ns: u64) {
        self.put_sample(source, seq, stamp_ns, true);
    }

    #[inline]
    fn put_sample(&mut self, source: SourceId, seq: u64, stamp_ns: u64, produced: bool) {
        if !self.enabled {
            return;
        }
        if !self.in_cycle {
            self.samples_outside_cycle += 1;
            return;
        }
        let at = self.clock.raw();
        let c = &mut self.cycles[self.cur];
        let n = c.n_samples as usize;
        if n >= self.max_samples || source.index() >= self.spec.sources.len() {
            c.samples_dropped = c.samples_dropped.saturating_add(1);
            self.samples_dropped += 1;
            return;
        }
        c.n_samples += 1;
        let x = &mut self.samples[self.cur * self.max_samples + n];
        x.seq = seq;
        x.stamp = stamp_ns;
        x.at = at;
        x.source = source.0;
        x.produced = produced as u8;
    }

    /// Samples not stored: beyond a cycle's slots, or of an undeclared
    /// source.
    pub fn samples_dropped(&self) -> u64 {
        self.samples_dropped
    }

    /// Samples recorded outside any cycle (counted, not stored).
    pub fn samples_outside_cycle(&self) -> u64 {
        self.samples_outside_cycle
    }
}
