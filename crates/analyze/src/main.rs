//! `analyze_control_timing`: thin entry point; see `looptime_analyze::cli`.

use clap::Parser;

fn main() {
    let cli = match looptime_analyze::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version succeed; a usage error exits EXIT_USAGE.
            let _ = e.print();
            if let Some(hint) = looptime_analyze::cli::usage_hint(&e) {
                eprintln!("{hint}");
            }
            std::process::exit(if e.use_stderr() {
                looptime_analyze::cli::EXIT_USAGE
            } else {
                looptime_analyze::cli::EXIT_OK
            });
        }
    };
    std::process::exit(looptime_analyze::cli::run(cli));
}
