//! The C ABI of looptime: the recorder, the scheduler and the episode
//! layout, for C and C++ control loops (ROS 2 nodes, generated loops).
//!
//! `include/looptime.h` is generated from this file by cbindgen and
//! committed; `include/looptime.hpp` adds RAII guards for C++. The rules
//! every function keeps:
//!
//! * **Handles are opaque.** A recorder, builder, scheduler or episode is a
//!   pointer the library allocated; only `looptime_*_free` releases it.
//! * **Errors are codes.** `0` is success, a negative value an error, and a
//!   positive value a warning (the call did its work, but something needs
//!   attention). After any non-zero code, [`looptime_last_error`] returns a
//!   message for this thread.
//! * **No panic crosses the boundary.** Every entry point catches an unwind
//!   and returns [`LOOPTIME_ERR_PANIC`].
//! * **The recording path** (`looptime_cycle_*`, `looptime_span_*`,
//!   `looptime_wait_*`, `looptime_set_*`, `looptime_scheduler_wait`) does
//!   not allocate, lock, format or do I/O, except to write an error message
//!   when called wrongly.
//! * **One thread per recorder.** A recorder and a scheduler are used by one
//!   thread at a time; they are not synchronised.
//!
//! # Modules
//!
//! One per concept, each importing only the ones above it in this list
//! (docs/architecture.md, checked by `scripts/module_cycles.py`):
//!
//! | module | holds |
//! |---|---|
//! | `consts` | result codes, sentinels, choices, the version |
//! | `error` | the last-error slot, `Fail`, `guard` (no unwind into C), the capture error's mapping to codes |
//! | `ptr` | NULL, string and out-pointer checks; freeing a handle |
//! | `builder` | `looptime_builder_*` |
//! | `recorder` | the recorder handle: new, thread, counts, finish, free |
//! | `scheduler` | `looptime_scheduler_*` and the tick |
//! | `record` | the recording path: the only module the no-allocation rule covers |
//! | `episode` | `looptime_episode_*` |
//! | `bench` | the span benchmark's Rust baseline |
//!
//! cbindgen reads the crate (following these `mod` declarations) to
//! generate `include/looptime.h`; `tests/header.rs` checks the committed
//! header against a fresh generation.

#![allow(unsafe_code)]
#![warn(missing_docs)]

/// Assert at compile time that the `#[repr(C)]` type `$t` has size `$size`
/// and each field the offset given: the ABI's layout, written next to the
/// type (the C++ test, `tests/c/two_units_a.cpp`, asserts the same numbers
/// from the header with a C++ compiler). On a 64-bit target.
macro_rules! abi_layout {
    ($t:ty, size $size:expr, $($field:ident @ $offset:expr),+ $(,)?) => {
        #[cfg(target_pointer_width = "64")]
        const _: () = {
            assert!(std::mem::size_of::<$t>() == $size);
            $(assert!(std::mem::offset_of!($t, $field) == $offset);)+
        };
    };
}

mod consts;
mod error;
mod ptr;

mod builder;
mod recorder;
mod scheduler;

mod net;
mod record;

mod bench;
mod episode;
mod session;

pub use bench::*;
pub use builder::*;
pub use consts::*;
pub use episode::*;
pub use error::looptime_last_error;
pub use net::*;
pub use record::*;
pub use recorder::*;
pub use scheduler::*;
pub use session::*;

#[cfg(test)]
mod tests;
