//! `looptime`: thin entry point; see `looptime_runtime::cli`.

use clap::Parser;

fn main() {
    let cli = looptime_runtime::cli::Cli::parse();
    match looptime_runtime::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(looptime_runtime::cli::EXIT_ERROR);
        }
    }
}
