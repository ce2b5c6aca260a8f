//! `looptime`: thin entry point; see `looptime_cli::cli`.

fn main() {
    std::process::exit(looptime_cli::cli::main_entry());
}
