//! `instrument snapshot`: argument definitions and glue to `crate::snapshot`.

use std::path::PathBuf;

use clap::Args;

use crate::exit::{Error, OK, user_error};
use crate::gate::Gate;
use crate::snapshot::report::{html, text};
use crate::snapshot::{Options, analyse};

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// A snapshot (.pickle/.pkl from torch.cuda.memory._dump_snapshot, or .json) or a
    /// directory of per-rank snapshots (rank read from names like snapshot-rank00003.pickle).
    pub path: PathBuf,
    /// Compare with a later snapshot of the same run (PATH earlier, OTHER later).
    #[arg(long, value_name = "OTHER")]
    pub diff: Option<PathBuf>,
    /// With --diff: exit 1 when the peak allocated or reserved, or the live bytes of a
    /// category, grew by more than PCT per cent; exit 2 when the files are not comparable.
    #[arg(long, value_name = "PCT", requires = "diff")]
    pub gate: Option<Gate>,
    /// Analyse this device's segments and trace (default: the device the segments are on).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    /// How many sites (and OOM holders) to list.
    #[arg(long, value_name = "N", default_value_t = super::TOP)]
    pub top: usize,
    /// List every site and holder (as `nsys report --all` lists every row).
    #[arg(long, conflicts_with = "top")]
    pub all: bool,
    /// In a folder of ranks: only this rank's snapshot (repeatable, as in `log` and `nsys
    /// report`).
    #[arg(long = "rank", value_name = "N")]
    pub ranks: Vec<u32>,
    /// Keep only the newest N trace events per device (older ones are counted as dropped).
    /// By default the trace is read whole.
    #[arg(long, value_name = "N")]
    pub max_trace_events: Option<usize>,
    /// Treat frames whose file matches GLOB as framework internals (repeatable), in
    /// addition to torch/nn/modules/*, torch/autograd/*, torch/optim/*, torch/utils/*, torch/*.
    #[arg(long, value_name = "GLOB")]
    pub internal: Vec<String>,
    /// Show the C++ frames of OOM stacks too (the Python frames are shown always).
    #[arg(long)]
    pub cpp_frames: bool,
    /// Print the report as JSON (schema: docs/snapshot.md).
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub fn run(args: SnapshotArgs) -> Result<u8, Error> {
    if args.max_trace_events == Some(0) {
        return Err(user_error("--max-trace-events must be at least 1"));
    }
    if args.top == 0 {
        return Err(user_error("--top must be at least 1"));
    }
    let opts = Options {
        device: args.device,
        top: if args.all { usize::MAX } else { args.top },
        internal: args.internal.clone(),
        max_trace_events: args.max_trace_events.unwrap_or(usize::MAX),
        assume_distributed: false,
        cpp_frames: args.cpp_frames,
        ranks: args.ranks.clone(),
    };
    if !args.path.exists() {
        return Err(user_error(format!(
            "{}: no such file or directory",
            args.path.display()
        )));
    }
    if !args.ranks.is_empty() && !args.path.is_dir() {
        return Err(user_error(format!(
            "{}: --rank picks ranks in a folder of rank snapshots; this is one file (give the \
             folder)",
            args.path.display()
        )));
    }
    if let Some(o) = &args.diff
        && !o.exists()
    {
        return Err(user_error(format!(
            "{}: no such file or directory",
            o.display()
        )));
    }
    if let Some(h) = &args.html {
        super::output::check_folder(h, "the HTML page")?;
    }
    let mut report = analyse(&args.path, args.diff.as_deref(), &opts, args.html.is_some())?;
    if let (Some(g), Some(d)) = (args.gate, &report.diff) {
        report.gate = Some(crate::snapshot::diff::gate(d, g));
    }
    super::output::emit(
        &report,
        args.json,
        text::render,
        args.html.as_deref(),
        html::render,
    )?;
    Ok(report.gate.as_ref().map_or(OK, |g| g.code()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::Class;
    use crate::snapshot::SnapshotError;

    #[test]
    fn engine_errors_map_to_exit_codes_here() {
        let user = Error::from(SnapshotError::Pickle {
            path: "x.pickle: ".into(),
            offset: 64,
            msg: "refused opcode STACK_GLOBAL (imports a name)".into(),
            io: None,
        });
        assert_eq!((user.class(), user.code()), (Class::User, 2));
        assert_eq!(
            user.to_string(),
            "x.pickle: byte 64: refused opcode STACK_GLOBAL (imports a name)"
        );
        let io = Error::from(SnapshotError::Io {
            path: "x.pickle".into(),
            source: std::io::Error::other("disk gone"),
        });
        assert_eq!((io.class(), io.code()), (Class::Io, 3));
        // One line: the cause is in the message once.
        assert_eq!(io.to_string(), "cannot read x.pickle: disk gone");
        // A read that failed inside the pickle is the system's; a missing file, the user's.
        let mid_read = Error::from(SnapshotError::Pickle {
            path: "x.pickle: ".into(),
            offset: 1 << 20,
            msg: "read failed: Input/output error (os error 5)".into(),
            io: Some(std::io::ErrorKind::Other),
        });
        assert_eq!((mid_read.class(), mid_read.code()), (Class::Io, 3));
        let missing = Error::from(SnapshotError::Open {
            path: "x.pickle".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        assert_eq!((missing.class(), missing.code()), (Class::User, 2));
    }
}
