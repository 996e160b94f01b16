//! `instrument skills`: argument definitions and glue to `crate::skills`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::exit::{Error, OK};
use crate::skills::{self, Report};

#[derive(Subcommand, Debug)]
pub enum SkillsCommand {
    /// Write instrument's skills into the checkout's .agents/skills/ (updates its own;
    /// refuses a skill of the same name it did not write).
    Install(SkillsArgs),
    /// Delete exactly the skill files `skills install` wrote.
    Remove(SkillsArgs),
    /// List the skills this binary carries.
    List,
}

#[derive(Args, Debug)]
pub struct SkillsArgs {
    /// The pithtrain checkout (default: the current folder or the first parent holding
    /// `pithtrain/`).
    #[arg(long, value_name = "CHECKOUT")]
    pub root: Option<PathBuf>,
    /// Also overwrite (install) or delete (remove) skill files of ours edited since they were
    /// written.
    #[arg(long)]
    pub force: bool,
    /// Print the report as JSON (schema `instrument.skills/1`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: SkillsCommand) -> Result<u8, Error> {
    let (args, install) = match cmd {
        SkillsCommand::Install(a) => (a, true),
        SkillsCommand::Remove(a) => (a, false),
        SkillsCommand::List => {
            for s in skills::bundled() {
                println!("{}", s.name);
            }
            return Ok(OK);
        }
    };
    // The checkout is found the way `add` finds it.
    let manifest = crate::rules::load::load_manifest(crate::rules::DEFAULT_SET)?;
    let root = crate::codemod::checkout::root_for(args.root.as_deref(), &manifest)?;
    let report = if install {
        skills::install(&root, args.force)?
    } else {
        skills::remove(&root, args.force)?
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report, install));
    }
    Ok(OK)
}

fn render(r: &Report, install: bool) -> String {
    let mut out = String::new();
    for (verb, files) in [
        ("wrote", &r.written),
        ("removed", &r.removed),
        ("already gone", &r.missing),
    ] {
        for f in files {
            out.push_str(&format!("{verb} {f}\n"));
        }
    }
    if install {
        out.push_str(&format!(
            "instrument skills install: {} skill(s) in {}/{} ({} written, {} unchanged): {}\n",
            r.skills.len(),
            r.root,
            skills::SKILLS_DIR,
            r.written.len(),
            r.unchanged.len(),
            r.skills.join(", ")
        ));
    } else if r.skills.is_empty() {
        out.push_str(&format!(
            "instrument skills remove: nothing to remove ({}/{}/{} not found)\n",
            r.root,
            skills::SKILLS_DIR,
            skills::MANIFEST
        ));
    } else {
        out.push_str(&format!(
            "instrument skills remove: {} file(s) of {} skill(s) removed from {}/{}\n",
            r.removed.len(),
            r.skills.len(),
            r.root,
            skills::SKILLS_DIR
        ));
    }
    out
}
