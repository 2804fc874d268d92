//! The `headroom` binary: parse the command line, call the library, map
//! the outcome to an exit code. All logic lives in the library.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
