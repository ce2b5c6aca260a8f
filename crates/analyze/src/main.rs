//! `analyze_control_timing`: thin entry point; see `looptime_analyze::cli`.

use clap::Parser;

fn main() {
    let cli = looptime_analyze::cli::Cli::parse();
    std::process::exit(looptime_analyze::cli::run(cli));
}
