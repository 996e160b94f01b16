//! `instrument snapshot`: argument definitions and glue to `crate::snapshot`.

use clap::Args;

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// A snapshot (.pickle/.pkl/.json) or a directory of per-rank snapshots.
    pub path: std::path::PathBuf,
}

pub fn run(_args: SnapshotArgs) -> anyhow::Result<u8> {
    Err(crate::exit::user_error(
        "instrument snapshot is not built yet",
    ))
}
