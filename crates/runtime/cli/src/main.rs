//! `looptime`: thin entry point; see `looptime_cli::cli`.

use clap::Parser;

fn main() {
    let cli = match looptime_cli::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; a usage
            // error prints clap's message and exits EXIT_USAGE.
            let _ = e.print();
            std::process::exit(if e.use_stderr() {
                looptime_cli::cli::EXIT_USAGE
            } else {
                looptime_cli::cli::EXIT_OK
            });
        }
    };
    match looptime_cli::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(looptime_cli::cli::EXIT_ERROR);
        }
    }
}
