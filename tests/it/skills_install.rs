//! `instrument skills install` / `remove`: what they write into a checkout's `.agents/skills/`,
//! byte for byte; a same-named skill someone else wrote is refused with nothing written; remove
//! deletes exactly the files install wrote and leaves everyone else's.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

const SKILLS: &str = ".agents/skills";

fn run_json(args: &[&str], cwd: &Path) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let out = instrument(&a, cwd);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("the report is JSON")
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The repository's `skills/` files, as install must write them (path under .agents/skills).
fn bundled_files() -> Vec<(String, Vec<u8>)> {
    let root = repo_root().join("skills");
    snapshot_tree(&root).into_iter().collect()
}

#[test]
fn install_writes_every_skill_byte_for_byte_and_remove_restores_the_tree() {
    let dir = scratch_copy(&fixture());
    let root = dir.path();
    let before = snapshot_tree(root);

    let report = run_json(&["skills", "install"], root);
    assert_eq!(report["schema"], "instrument.skills/1");
    let bundled = bundled_files();
    assert!(bundled.len() >= 4, "{bundled:?}");
    let written = names(&report["written"]);
    assert_eq!(written.len(), bundled.len(), "{report}");
    for (rel, bytes) in &bundled {
        let path = root.join(SKILLS).join(rel);
        assert_eq!(&std::fs::read(&path).unwrap(), bytes, "{}", path.display());
        assert!(written.contains(&format!("{SKILLS}/{rel}")), "{rel}");
    }
    let mut skills = names(&report["skills"]);
    skills.sort();
    for s in [
        "instrument-compare",
        "instrument-memory-prints",
        "instrument-memory-snapshots",
        "instrument-nsys-profile",
    ] {
        assert!(skills.contains(&s.to_string()), "{skills:?}");
    }
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(root.join(SKILLS).join(".instrument-skills.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        manifest["files"].as_object().unwrap().len(),
        bundled.len(),
        "{manifest}"
    );

    // Installing again changes nothing and says so.
    let tree = snapshot_tree(root);
    let again = run_json(&["skills", "install"], root);
    assert!(names(&again["written"]).is_empty(), "{again}");
    assert_eq!(names(&again["unchanged"]).len(), bundled.len());
    assert_eq!(snapshot_tree(root), tree);

    let removed = run_json(&["skills", "remove"], root);
    assert_eq!(names(&removed["removed"]).len(), bundled.len(), "{removed}");
    assert_eq!(snapshot_tree(root), before);
    for s in &skills {
        assert!(!root.join(SKILLS).join(s).exists(), "{s} left behind");
    }

    // Nothing left to remove: a note, exit 0.
    let out = instrument(&["skills", "remove"], root);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("nothing to remove"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_same_named_skill_it_did_not_write_is_refused_and_nothing_is_written() {
    let dir = scratch_copy(&fixture());
    let root = dir.path();
    let theirs = root.join(SKILLS).join("instrument-nsys-profile");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(
        theirs.join("SKILL.md"),
        "---\nname: instrument-nsys-profile\n---\n",
    )
    .unwrap();
    let before = snapshot_tree(root);

    let out = instrument(&["skills", "install"], root);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: .agents/skills/instrument-nsys-profile: a skill of this name is there and instrument did not write it"),
        "{err}"
    );
    assert_eq!(snapshot_tree(root), before, "a refused install wrote");
    assert!(!root.join(SKILLS).join("instrument-compare").exists());
}

#[test]
fn remove_deletes_only_what_install_wrote() {
    let dir = scratch_copy(&fixture());
    let root = dir.path();
    run_json(&["skills", "install"], root);
    // Someone else's skill beside ours, and a file of theirs inside one of our folders.
    let skills = root.join(SKILLS);
    std::fs::create_dir_all(skills.join("add-memory-prints")).unwrap();
    std::fs::write(skills.join("add-memory-prints/SKILL.md"), "theirs\n").unwrap();
    std::fs::write(skills.join("instrument-compare/notes.md"), "mine\n").unwrap();

    run_json(&["skills", "remove"], root);
    assert_eq!(
        std::fs::read_to_string(skills.join("add-memory-prints/SKILL.md")).unwrap(),
        "theirs\n"
    );
    assert_eq!(
        std::fs::read_to_string(skills.join("instrument-compare/notes.md")).unwrap(),
        "mine\n"
    );
    assert!(!skills.join("instrument-compare/SKILL.md").exists());
    assert!(!skills.join("instrument-memory-prints").exists());
    assert!(!skills.join(".instrument-skills.json").exists());
}

#[test]
fn an_edited_skill_of_ours_is_kept_unless_forced() {
    let dir = scratch_copy(&fixture());
    let root = dir.path();
    run_json(&["skills", "install"], root);
    let md = root.join(SKILLS).join("instrument-compare/SKILL.md");
    std::fs::write(&md, "edited by hand\n").unwrap();
    let tree = snapshot_tree(root);

    for verb in ["install", "remove"] {
        let out = instrument(&["skills", verb], root);
        assert_eq!(out.status.code(), Some(2), "{verb}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with(
                "error: .agents/skills/instrument-compare/SKILL.md: edited since instrument wrote it"
            ),
            "{}",
            stderr(&out)
        );
        assert_eq!(
            snapshot_tree(root),
            tree,
            "a refused {verb} changed the tree"
        );
    }
    run_json(&["skills", "install", "--force"], root);
    assert_eq!(
        std::fs::read(&md).unwrap(),
        std::fs::read(repo_root().join("skills/instrument-compare/SKILL.md")).unwrap()
    );
    std::fs::write(&md, "edited again\n").unwrap();
    run_json(&["skills", "remove", "--force"], root);
    assert!(!md.exists());
}

#[test]
fn the_checkout_is_found_as_add_finds_it() {
    let dir = scratch_copy(&fixture());
    let root = dir.path();
    // From a folder inside the checkout.
    let report = run_json(&["skills", "install"], &root.join("pithtrain/models"));
    assert_eq!(
        Path::new(report["root"].as_str().unwrap()),
        root.canonicalize().unwrap()
    );
    assert!(
        root.join(SKILLS)
            .join("instrument-compare/SKILL.md")
            .is_file()
    );
    // From outside, with --root.
    let elsewhere = tempfile::tempdir().unwrap();
    let r = root.display().to_string();
    run_json(&["skills", "remove", "--root", &r], elsewhere.path());
    assert!(!root.join(SKILLS).join("instrument-compare").exists());
    // Outside any checkout, without --root: refused, nothing written.
    let out = instrument(&["skills", "install"], elsewhere.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not inside a checkout"),
        "{}",
        stderr(&out)
    );
    assert!(!elsewhere.path().join(".agents").exists());
}

#[test]
fn a_manifest_it_cannot_read_is_refused_naming_the_file() {
    let dir = scratch_copy(&fixture());
    let root = dir.path();
    std::fs::create_dir_all(root.join(SKILLS)).unwrap();
    let manifest = root.join(SKILLS).join(".instrument-skills.json");
    for text in [
        "not json",
        r#"{"schema":"instrument.skills/1","version":"0","files":{"../../pithtrain/__init__.py":"x"}}"#,
    ] {
        std::fs::write(&manifest, text).unwrap();
        for verb in ["install", "remove"] {
            let out = instrument(&["skills", verb], root);
            assert_eq!(out.status.code(), Some(2), "{verb}: {}", stderr(&out));
            assert!(
                stderr(&out).contains(".agents/skills/.instrument-skills.json: not a manifest"),
                "{}",
                stderr(&out)
            );
        }
    }
    assert!(root.join("pithtrain/__init__.py").is_file());
}
