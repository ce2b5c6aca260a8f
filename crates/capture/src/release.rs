//! What released a cycle: the scheduler's release point, or the input
//! that arrived (an input-paced loop). A plain value the loop hands to
//! `begin_cycle`; below the builder and the recorder, which both name it.

use crate::format::PaceKind;

/// What released a cycle: the scheduler's release point, or the input
/// that arrived. Made with a constructor of its kind ([`Release::NONE`],
/// [`Release::at`], [`Release::input`]) and the `with_*` methods; it is
/// `non_exhaustive` so that kinds and fields can be added without breaking
/// callers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Release {
    /// The scheduled target, in the domain declared with
    /// [`RecorderBuilder::target_clock`](crate::RecorderBuilder::target_clock).
    pub target_ns: Option<u64>,
    /// The release point had already passed when the scheduler came to it.
    pub overdue: bool,
    /// Whole release points skipped before this cycle.
    pub skipped: u32,
    /// The spin margin the scheduler's wait before this cycle used.
    pub spin_margin_ns: Option<u64>,
    /// How long that wait spun.
    pub spin_ns: Option<u64>,
    /// What released the cycle.
    pub pace: PaceKind,
    /// When the releasing input arrived (host monotonic ns, taken right
    /// after the blocking receive returned); input-paced cycles only.
    pub arrival_ns: Option<u64>,
    /// The releasing input's own counter (the robot's sequence number),
    /// when it carries one.
    pub input_seq: Option<u64>,
    /// When the loop read the input (host monotonic ns, right after its
    /// receive returned), kept beside an `arrival_ns` that is the kernel's
    /// receive stamp ([`crate::net`]): the difference is how long the
    /// input waited in the socket.
    pub read_ns: Option<u64>,
    /// The bound of the kernel stamp's conversion onto the monotonic clock
    /// (ns; [`crate::net::KernelArrival::bound_ns`]).
    pub arrival_bound_ns: Option<u64>,
}

impl Release {
    /// A cycle with no schedule information.
    pub const NONE: Release = Release {
        target_ns: None,
        overdue: false,
        skipped: 0,
        spin_margin_ns: None,
        spin_ns: None,
        pace: PaceKind::Deadline,
        arrival_ns: None,
        input_seq: None,
        read_ns: None,
        arrival_bound_ns: None,
    };

    /// An on-time cycle scheduled for `target_ns`.
    pub const fn at(target_ns: u64) -> Release {
        Release {
            target_ns: Some(target_ns),
            ..Release::NONE
        }
    }

    /// A cycle released by an input that arrived at `arrival_ns` (host
    /// monotonic ns, read right after the blocking receive returned),
    /// carrying the source's own counter `input_seq` when it has one. Such
    /// a cycle has no target of the loop's own (docs/input-paced.md).
    ///
    /// ```
    /// use looptime_capture::{PaceKind, RecorderBuilder, Release};
    /// let mut b = RecorderBuilder::new();
    /// let running = b.phase("running").unwrap();
    /// let send_command = b.stage("robot_send_command").unwrap();
    /// let mut rec = b.build().unwrap();
    /// // In the loop: block in the receive, then read the clock.
    /// let (arrival_ns, seq) = (1_000_000_u64, 7_u64);
    /// rec.begin_cycle(running, Release::input(arrival_ns, Some(seq)));
    /// {
    ///     let _answer = rec.span(send_command); // the command leaves here
    /// }
    /// rec.end_cycle();
    /// let release = Release::input(arrival_ns, Some(seq));
    /// assert_eq!((release.pace, release.target_ns), (PaceKind::Input, None));
    /// ```
    pub const fn input(arrival_ns: u64, input_seq: Option<u64>) -> Release {
        Release {
            pace: PaceKind::Input,
            arrival_ns: Some(arrival_ns),
            input_seq,
            ..Release::NONE
        }
    }

    /// This release, overdue or not.
    pub const fn with_overdue(mut self, overdue: bool) -> Release {
        self.overdue = overdue;
        self
    }

    /// This release, with `skipped` release points skipped before it.
    pub const fn with_skipped(mut self, skipped: u32) -> Release {
        self.skipped = skipped;
        self
    }

    /// This release, with the wait's spin margin and spin time.
    pub const fn with_spin(mut self, spin_margin_ns: Option<u64>, spin_ns: Option<u64>) -> Release {
        self.spin_margin_ns = spin_margin_ns;
        self.spin_ns = spin_ns;
        self
    }

    /// This input release, whose `arrival_ns` is a kernel receive stamp,
    /// with the time the loop read the input (`read_ns`, host monotonic)
    /// and the stamp's conversion bound; [`crate::net::Received::release`]
    /// makes it from a receive.
    pub const fn with_read(mut self, read_ns: u64, arrival_bound_ns: Option<u64>) -> Release {
        self.read_ns = Some(read_ns);
        self.arrival_bound_ns = arrival_bound_ns;
        self
    }
}
