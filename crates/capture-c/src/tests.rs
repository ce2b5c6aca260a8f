//! Unit tests of the boundary's own rules (codes, messages, panics).

use std::ffi::CStr;

use crate::error::{fail, guard};
use crate::*;

fn last() -> String {
    // SAFETY: looptime_last_error returns a NUL-terminated string.
    unsafe { CStr::from_ptr(looptime_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_panic_becomes_a_code_and_a_message_not_an_unwind() {
    let code = guard("looptime_test", || panic!("boom {}", 7));
    assert_eq!(code, LOOPTIME_ERR_PANIC);
    let msg = last();
    assert!(
        msg.contains("looptime_test") && msg.contains("boom 7"),
        "{msg}"
    );
    let code = guard("looptime_test", || std::panic::panic_any(42u8));
    assert_eq!(code, LOOPTIME_ERR_PANIC);
    assert!(last().contains("unknown panic"));
}

#[test]
fn errors_and_warnings_keep_their_codes() {
    assert_eq!(
        guard("t", || Err(fail(LOOPTIME_ERR_STATE, "twice"))),
        LOOPTIME_ERR_STATE
    );
    assert_eq!(last(), "t: twice");
    assert_eq!(
        guard("t", || Ok(LOOPTIME_WARN_LEFT_OPEN)),
        LOOPTIME_WARN_LEFT_OPEN
    );
    // A message with a NUL byte is still a C string.
    assert_eq!(
        guard("t", || Err(fail(LOOPTIME_ERR_INVALID, "a\0b"))),
        LOOPTIME_ERR_INVALID
    );
    assert_eq!(last(), "t: a b");
}

#[test]
fn the_c_tick_is_the_runtime_tick_field_for_field() {
    // Distinct values in every field, so a swapped pair shows.
    let t = looptime_runtime::scheduler::Tick {
        cycle: 1,
        target_ns: 2,
        wait_start_ns: 3,
        sleep_return_ns: 4,
        wake_ns: 5,
        spin_ns: 6,
        overdue: true,
        skipped: 7,
        dt_measured_ns: 8,
        dt_clamped: false,
        spin_margin_ns: 9,
    };
    let c = Tick::from(t);
    assert_eq!(
        (c.cycle, c.target_ns, c.wait_start_ns, c.sleep_return_ns),
        (1, 2, 3, 4)
    );
    assert_eq!((c.wake_ns, c.spin_ns, c.dt_measured_ns), (5, 6, 8));
    assert_eq!((c.skipped, c.overdue, c.dt_clamped), (7, true, false));
    assert_eq!(c.spin_margin_ns, 9);
    // Its layout (seven u64, a u32, two bools padded to 8 bytes, then the
    // margin, added last so the fields before it keep their offsets) is
    // asserted at compile time beside the type (`abi_layout!`).
}
