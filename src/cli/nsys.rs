//! `instrument nsys ...`: argument definitions and glue to `crate::nsys`.

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum NsysCommand {
    /// Summarise an nsys SQLite export.
    Report {
        /// The `.sqlite` file written by `nsys export` / `nsys profile --export sqlite`.
        file: std::path::PathBuf,
    },
}

pub fn run(_cmd: NsysCommand) -> anyhow::Result<u8> {
    Err(crate::exit::user_error("instrument nsys is not built yet"))
}
