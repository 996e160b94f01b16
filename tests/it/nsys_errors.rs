//! Errors a user can cause with `instrument nsys report`: one line naming the file and what was
//! expected, exit code 2, never a panic.

use std::path::Path;
use std::process::Command;

fn report(path: &Path) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(["nsys", "report"])
        .arg(path)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn assert_user_error(path: &Path, needle: &str) {
    let (code, err) = report(path);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains(&path.display().to_string()),
        "names the file: {err}"
    );
    assert!(err.contains(needle), "expected {needle:?} in {err}");
    assert!(!err.contains("panicked"));
}

fn db(path: &Path, sql: &str) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(sql).unwrap();
}

#[test]
fn missing_file_and_directory() {
    let d = tempfile::tempdir().unwrap();
    assert_user_error(&d.path().join("nope.sqlite"), "no such file");
    // A folder is read as every .sqlite in it; an empty one says so.
    assert_user_error(d.path(), "no .sqlite export in this folder");
}

#[test]
fn not_sqlite_and_nsys_rep() {
    let d = tempfile::tempdir().unwrap();
    let txt = d.path().join("notes.sqlite");
    std::fs::write(
        &txt,
        "this is not a database, just some text that is long enough to have a header ......",
    )
    .unwrap();
    assert_user_error(&txt, "not a SQLite database");
    let rep = d.path().join("run.nsys-rep");
    std::fs::write(&rep, vec![0x51u8; 4096]).unwrap();
    assert_user_error(&rep, "nsys export --type sqlite");
}

#[test]
fn sqlite_that_is_not_an_nsys_export() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("other.sqlite");
    db(&p, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);");
    assert_user_error(
        &p,
        "not an Nsight Systems SQLite export (no StringIds table)",
    );
    let empty = d.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    assert_user_error(&empty, "no StringIds table");
}

#[test]
fn export_without_kernels_or_with_a_missing_column() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("cpu_only.sqlite");
    db(
        &p,
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);",
    );
    assert_user_error(
        &p,
        "no CUDA kernel data (no CUPTI_ACTIVITY_KIND_KERNEL or CUPTI_ACTIVITY_KIND_GRAPH_TRACE table); profile with --trace cuda",
    );
    let q = d.path().join("odd.sqlite");
    db(
        &q,
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER, globalPid INTEGER, demangledName INTEGER);",
    );
    assert_user_error(
        &q,
        "CUPTI_ACTIVITY_KIND_KERNEL has no column `correlationId`",
    );
}

/// What the capture recorded (META_DATA_CAPTURE) decides what the one line tells the user.
#[test]
fn export_without_kernels_says_what_was_traced_and_what_to_add() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("nvtx_only.sqlite");
    db(
        &p,
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT);
         INSERT INTO META_DATA_CAPTURE VALUES ('CAPTURE_EVENT_TYPE', 'OSRuntime'), ('CAPTURE_EVENT_TYPE', 'NvtxEvents');",
    );
    assert_user_error(
        &p,
        "the capture traced osrt,nvtx but not cuda; profile with --trace cuda,nvtx",
    );
    // cuda traced, but nothing ran on the GPU while nsys recorded (a capture window that never opened).
    let q = d.path().join("empty_window.sqlite");
    db(
        &q,
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT);
         INSERT INTO META_DATA_CAPTURE VALUES ('CAPTURE_EVENT_TYPE', 'Cuda');
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL);",
    );
    assert_user_error(
        &q,
        "nothing ran on the GPU while nsys recorded; with --capture-range=cudaProfilerApi",
    );
    // How the window opens is the trainer's: the built-in table's hint, none in a table without.
    assert_user_error(&q, "(pithtrain: set training.nsys_start and nsys_stop)");
    let builtin = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/nsys/conventions.toml"),
    )
    .unwrap();
    let table = d.path().join("other.toml");
    let cut = builtin
        .find("[capture]")
        .expect("the built-in table has a hint");
    std::fs::write(&table, &builtin[..cut]).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(["nsys", "report", "--conventions"])
        .arg(&table)
        .arg(&q)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cudaProfilerStop is recorded\n"), "{err}");
    assert!(!err.contains("pithtrain"), "{err}");
}

#[test]
fn kernels_only_export_reports_with_notes() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("kernels_only.sqlite");
    let gpid: i64 = (1 << 48) | (77 << 24);
    db(
        &p,
        &format!(
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO StringIds VALUES (1, 'ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)'), (2, 'nvjet_tst_64x8_64x16_4x1_v_bz_TNN');
             CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL);
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (0, 300, 0, 7, 1, {gpid}, 1, 1), (100, 200, 0, 20, 2, {gpid}, 2, 2);"
        ),
    );
    let o = Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(["nsys", "report", "--json"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &doc["exports"][0];
    let proc0 = &v["processes"][0];
    assert_eq!(proc0["pid"], 77);
    assert_eq!(proc0["overlap"]["hidden_ns"], 100);
    assert_eq!(proc0["overlap"]["exposed_ns"], 200);
    let kinds: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"no_runtime_table") && kinds.contains(&"no_nvtx_table"),
        "{kinds:?}"
    );
}
