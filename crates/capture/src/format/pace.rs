//! What released a cycle: the pace kind a cycle line carries.

/// How a cycle was released: by a deadline of the loop's own (the sleep-
/// to-deadline loop, and every cycle with no schedule information), or by
/// an input that arrived (a loop paced by the robot's state stream or a
/// bus: its blocking receive is the wait).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaceKind {
    /// Released at a deadline of the loop's own (or unscheduled).
    #[default]
    Deadline,
    /// Released by an input's arrival ([`crate::Release::input`]).
    Input,
}

impl PaceKind {
    /// The name the evidence spells (`deadline`, `input`).
    pub fn name(self) -> &'static str {
        match self {
            PaceKind::Deadline => "deadline",
            PaceKind::Input => "input",
        }
    }

    /// Whether this is the default kind (the evidence leaves it out).
    pub fn is_deadline(&self) -> bool {
        *self == PaceKind::Deadline
    }
}
