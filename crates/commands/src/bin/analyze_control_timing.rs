//! `analyze_control_timing` in the commands wheel: the command crate's own
//! entry point.

fn main() {
    std::process::exit(looptime_analyze::cli::main_entry());
}
