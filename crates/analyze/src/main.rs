//! `analyze_control_timing`: thin entry point; see `looptime_analyze::cli`.

fn main() {
    std::process::exit(looptime_analyze::cli::main_entry());
}
