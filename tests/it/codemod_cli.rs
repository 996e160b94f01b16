//! Command-line conventions: colour (`--color`, `NO_COLOR`, terminals), `--json` for
//! add / remove / check, shell completions.

use crate::common;

use std::process::Command;

use common::*;
use instrument::codemod::diff::colorize;

/// Run `args` under a pseudo-terminal (util-linux `script`), so colour decisions see a tty.
fn in_terminal(args: &str, cwd: &std::path::Path, no_color: bool) -> Option<String> {
    let script = tool("script", "INSTRUMENT_REQUIRE_SCRIPT")?;
    let mut cmd = Command::new(script);
    cmd.args([
        "-qec",
        &format!("{} {args}", env!("CARGO_BIN_EXE_instrument")),
        "/dev/null",
    ])
    .current_dir(cwd)
    .env_remove("NO_COLOR");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd.output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).to_string())
}

#[test]
fn colour_follows_the_terminal_no_color_and_the_flag() {
    let dir = scratch_copy(&fixture());
    let dry = ["add", "qwen3-moe", "--dry-run"];
    // Into a pipe: no colour, the diff as git writes it (its text is pinned in
    // codemod_output); with --color=always, the same diff coloured.
    let piped = instrument(&dry, dir.path());
    assert_eq!(piped.status.code(), Some(0), "{}", stderr(&piped));
    let (diff, report) = (stdout(&piped), stderr(&piped));
    assert!(diff.is_ascii() && !diff.bytes().any(|b| b == 0x1b));
    let coloured = colorize(&diff);
    assert_ne!(coloured, diff, "colouring changes the diff");
    let mut always = dry.to_vec();
    always.push("--color=always");
    let out = instrument(&always, dir.path());
    assert_eq!(
        (stdout(&out), stderr(&out)),
        (coloured.clone(), report.clone())
    );
    // A terminal (where stdout and stderr meet, its line ends CRLF) gets colour, unless
    // NO_COLOR or --color never says otherwise.
    let on_a_terminal = |text: &str| text.replace('\n', "\r\n");
    if let Some(tty) = in_terminal("add qwen3-moe --dry-run", dir.path(), false) {
        assert_eq!(tty, on_a_terminal(&format!("{coloured}{report}")));
        let plain = in_terminal("add qwen3-moe --dry-run", dir.path(), true).unwrap();
        assert_eq!(plain, on_a_terminal(&format!("{diff}{report}")));
        let never =
            in_terminal("--color never add qwen3-moe --dry-run", dir.path(), false).unwrap();
        assert_eq!(never, on_a_terminal(&format!("{diff}{report}")));
    }
}

#[test]
fn add_remove_and_check_speak_json() {
    let dir = scratch_copy(&fixture());
    let out = instrument(
        &["add", "qwen3-moe", "--ranks", "3,14", "--json"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "instrument.add/1");
    assert_eq!(doc["verdict"], "applied");
    assert_eq!(doc["changes"].as_array().unwrap().len(), 6);
    let ranks = doc["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "RANKS")
        .unwrap();
    assert_eq!(ranks["literal"], "{3, 14}");
    assert_eq!(ranks["origin"], "flag");
    let out = instrument(&["check", "--json"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "instrument.status/1");
    assert_eq!(doc["instrumented"], true);
    let out = instrument(&["remove", "--json"], dir.path());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "instrument.remove/1");
    assert_eq!(doc["changes"].as_array().unwrap().len(), 6);
    // A refused add is a report too, with exit 2.
    std::fs::write(dir.path().join("pithtrain/tasks/pretrain_lm.py"), "x = (\n").unwrap();
    let out = instrument(&["add", "qwen3-moe", "--json"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verdict"], "refused");
    assert_eq!(
        doc["advice"],
        "5 of 8 groups cannot apply; nothing was changed. Next: fix the syntax error (or check that the file is Python)"
    );
}

#[test]
fn completions_cover_the_commands_and_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let out = instrument(&["completions", shell], &repo_root());
        assert_eq!(out.status.code(), Some(0));
        let text = stdout(&out);
        assert!(
            text.contains("snapshot-dir") && text.contains("remove"),
            "{shell}"
        );
    }
    let out = instrument(&["completions", "tcsh"], &repo_root());
    assert_eq!(out.status.code(), Some(2));
}

/// Every `--json` names its schema one way, `instrument.<name>/<n>`: add, remove,
/// status, check, rules, explain, log and snapshot (issue #26 found five spellings).
#[test]
fn every_json_output_names_its_schema_instrument_name_slash_n() {
    let dir = scratch_copy(&fixture());
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("rank0.log");
    std::fs::write(
        &log,
        "[rank=0 pp=0] Before pipeline: 1.00 GiB | alloc=1.00 cached=0.00 non-pt=0.50\n",
    )
    .unwrap();
    let snapshot = repo_root().join("fixtures/snapshots/ddp/snapshot.pickle");
    let (log, snapshot) = (log.to_str().unwrap(), snapshot.to_str().unwrap());
    let runs: [(&[&str], &str); 8] = [
        (&["add", "qwen3-moe", "--json"], "instrument.add/1"),
        (&["status", "--json"], "instrument.status/1"),
        (&["check", "--json"], "instrument.status/1"),
        (&["explain", "qwen3-moe", "--json"], "instrument.explain/1"),
        (&["rules", "--json"], "instrument.rules/1"),
        (&["log", log, "--json"], "instrument.log/1"),
        (&["snapshot", snapshot, "--json"], "instrument.snapshot/1"),
        (&["remove", "--json"], "instrument.remove/1"),
    ];
    let form = regex::Regex::new(r"^instrument\.[a-z]+(\.[a-z]+)*/[0-9]+$").unwrap();
    for (args, schema) in runs {
        let out = instrument(args, dir.path());
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stderr(&out)));
        assert_eq!(doc["schema"], schema, "{args:?}");
        assert!(form.is_match(schema), "{schema}");
    }
}

/// `status` names the model, sorts the groups, and says which values the inserted code
/// chooses at run time instead of printing `None`.
#[test]
fn status_names_the_model_sorts_groups_and_says_chosen_at_run_time() {
    let dir = scratch_copy(&fixture());
    let out = instrument(&["add", "qwen35-moe"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = instrument(&["status", "--json"], dir.path());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["models"], serde_json::json!(["qwen35-moe"]));
    let groups: std::collections::BTreeSet<&str> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["regions"].as_array().unwrap())
        .map(|r| r["group"].as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        ["1", "2", "3", "4", "5", "6", "7", "8"]
            .into_iter()
            .collect()
    );
    // The text: the model first, groups sorted, and no `None`.
    let out = instrument(&["status"], dir.path());
    assert_eq!(
        (out.status.code(), stdout(&out), stderr(&out)),
        (
            Some(0),
            "model: qwen35-moe\n\
             pithtrain/dualpipe/dualpipev.py: memory-prints groups 1, 4, 8 (37 regions); ranks={0}\n\
             pithtrain/dualpipe/execution.py: memory-prints groups 1, 5 (8 regions); detail_layers chosen at run time, ranks={0}\n\
             pithtrain/models/qwen35_moe.py: memory-prints groups 5 (21 regions)\n\
             pithtrain/modules/distributed.py: memory-prints groups 2 (5 regions); ranks={0}\n\
             pithtrain/modules/training.py: memory-prints groups 1, 3 (6 regions); ranks={0}\n\
             pithtrain/tasks/pretrain_lm.py: memory-prints groups 6, 7 (5 regions); ranks={0}, snapshot_dir=\"/tmp\", stacks=\"python\", step chosen at run time\n"
                .to_string(),
            String::new()
        )
    );
}

/// The README's `add` options table is one table (issue #26: its last rows rendered as
/// text) and has a row for every flag `add --help` lists.
#[test]
fn the_readme_add_table_is_whole_and_lists_every_flag() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme
        .find("`add` options:")
        .expect("the add options table");
    let rows: Vec<&str> = readme[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let after = readme[start..].lines().skip(2 + rows.len()).take(3);
    for l in after {
        assert!(!l.starts_with('|'), "a row after the table ended: {l}");
    }
    // The flags `add --help` lists (each option line's flag), and the flags the table's
    // rows are for: the same, but for --help and --color (every command has those).
    let help = stdout(&instrument(&["add", "--help"], &repo_root()));
    let listed: std::collections::BTreeSet<&str> = help
        .lines()
        .map(str::trim_start)
        .filter_map(|l| l.strip_prefix("-h, ").or(Some(l)))
        .filter(|l| l.starts_with("--"))
        .map(|l| l.split([' ', '=']).next().unwrap())
        .filter(|f| !matches!(*f, "--help" | "--color"))
        .collect();
    let documented: std::collections::BTreeSet<&str> = rows
        .iter()
        .filter_map(|r| r.strip_prefix("| `"))
        .map(|r| r.split(['`', ' ', '=']).next().unwrap())
        .filter(|f| f.starts_with("--"))
        .collect();
    assert!(listed.len() >= 13, "{listed:?}");
    assert_eq!(
        listed.difference(&documented).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "README's add table has no row for these"
    );
    // And Cargo.toml states the Rust it needs, as the README does.
    let cargo: toml::Table =
        toml::from_str(&std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap()).unwrap();
    assert_eq!(cargo["package"]["rust-version"].as_str(), Some("1.95"));
    assert!(readme.lines().any(|l| l.contains("Rust 1.95 or newer")));
}
