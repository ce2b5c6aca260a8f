//! `looptime` in the commands wheel: the command crate's own entry point.

fn main() {
    std::process::exit(looptime_cli::cli::main_entry());
}
