//! `instrument`: the command line. All logic lives in the library; this file only
//! hands over to `cli::run` and turns its outcome into an exit code.

fn main() -> std::process::ExitCode {
    instrument::cli::run()
}
