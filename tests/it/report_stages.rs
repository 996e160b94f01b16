//! `instrument report`'s memory per DualPipeV layer stage (`stage_memory`), from the Python
//! frames of the step snapshot's allocations: on a generated marked step whose allocations pass
//! through pithtrain's stage functions with sizes the generator chose
//! (tools/snapgen/scenarios_stages.py, its planted truth), exactly; on the fixture run on the
//! fake torch (whose miniature pithtrain runs the plain path's model methods), the forward
//! stages.

use crate::log_common;

use log_common::*;
use serde_json::Value;

fn planted() -> Value {
    let p = repo_root().join("fixtures/snapshots/stage_frames/planted.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn rank(r: &Value, rank: i64) -> &Value {
    r["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rank"] == rank)
        .unwrap()
}

#[test]
fn each_stage_holds_what_was_allocated_inside_it() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let run = crate::report_run::gather(&s);
    // Rank 14's step is the generated one: its stage functions, sizes and what each keeps
    // are the generator's.
    std::fs::copy(
        repo_root().join("fixtures/snapshots/stage_frames/snapshot.pickle"),
        run.path().join("memory_snapshot_rank14_step0.pickle"),
    )
    .unwrap();
    let r: Value = crate::report_run::json_ok(&["report", "--json", run.path().to_str().unwrap()]);
    // The whole per-stage figure, to the byte: the fused stage5_and_stage1_f/_b counted as
    // stage 1, the model methods as their stages, a stage-named function of another file and
    // the engine thread's allocation (no Python frame) unattributed, what was allocated
    // before and after the marked schedule not counted, a tensor freed after the schedule
    // kept at its end.
    assert_eq!(rank(&r, 14)["stage_memory"], planted()["stage_memory"]);

    // The fixture's own run: its model methods (forward_stage1/3/5) make the forward stages.
    let m = &rank(&r, 3)["stage_memory"];
    assert_eq!(m["window"], "schedule");
    let stages: Vec<(&str, u64)> = m["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["stage"].as_str().unwrap(),
                s["allocated_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        stages.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec!["stage1_f", "stage3_f", "stage5_f"],
        "{m}"
    );
    assert!(stages.iter().all(|s| s.1 > 0), "{m}");
    let attributed: u64 = stages.iter().map(|s| s.1).sum();
    assert_eq!(
        attributed + m["unattributed_bytes"].as_u64().unwrap(),
        m["allocated_bytes"].as_u64().unwrap()
    );
}
