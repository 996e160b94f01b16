//! `instrument snapshot` on a pipeline step marked by schedule event (the generator's DualPipeV
//! step, tools/snapgen/scenarios_schedule.py, with the truth it planted): one step, not one per
//! chunk; memory per event as planted; the schedule's peak and the event the process died
//! inside lead the findings; a snapshot without marks reads as before.

use crate::snapshot_common;

use serde_json::Value;
use snapshot_common::*;

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_marked_step_reads_per_event_and_its_peak_leads() {
    let r = report_of("pipeline_step/snapshot.pickle");
    let p = planted("pipeline_step");
    // One pipeline step, marked by the run: no per-chunk "steps", no free bursts.
    let steps = &r["trace"]["steps"];
    assert_eq!(
        (&steps["count"], &steps["method"]),
        (&Value::from(1), &Value::from("schedule"))
    );
    assert!(
        r["patterns"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["name"] != "python_reference_cycles"),
        "{}",
        r["patterns"]
    );
    // Every planted event, in order, with its figures (the stage rows aside).
    let events: Vec<Value> = r["schedule"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["op"] != "stage")
        .cloned()
        .collect();
    let want = p["schedule"]["events"].as_array().unwrap();
    assert_eq!(
        names(&Value::from(events.clone())),
        names(&p["schedule"]["events"])
    );
    for (g, w) in events.iter().zip(want) {
        for k in [
            "live_start_bytes",
            "live_end_bytes",
            "peak_bytes",
            "allocated",
            "freed",
        ] {
            assert_eq!(g[k], w[k], "{} {k}", g["name"]);
        }
    }
    // The first finding is the schedule's peak, at the planted peak event.
    let top = want
        .iter()
        .map(|e| e["peak_bytes"].as_u64().unwrap())
        .max()
        .unwrap();
    let peak = want
        .iter()
        .find(|e| e["peak_bytes"].as_u64() == Some(top))
        .unwrap();
    let f = &r["findings"][0];
    assert_eq!(f["kind"], "schedule-peak");
    assert_eq!(f["where"]["point"], peak["name"]);
    assert_eq!(f["figure"]["value"].as_f64(), Some(top as f64));
    // In text the findings, then the schedule, before the totals; 100 columns.
    let out = run(&[fixture("pipeline_step/snapshot.pickle").to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {text}"))
    };
    assert!(at("Findings:") < at("Schedule (marked by the run)"));
    assert!(at("Schedule (marked by the run)") < at("Totals"));
    let starred: Vec<&str> = text.lines().filter(|l| l.starts_with("* ")).collect();
    assert_eq!(starred.len(), 1, "{text}");
    assert!(starred[0][2..].starts_with(peak["name"].as_str().unwrap()));
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

#[test]
fn the_event_it_died_inside_is_an_error_finding() {
    let r = report_of("pipeline_oom/snapshot.pickle");
    let died = planted("pipeline_oom")["schedule"]["died_inside"].clone();
    let f: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "died-inside-event")
        .collect();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["severity"], "error");
    assert_eq!(f[0]["where"]["point"], died);
    assert_eq!(
        f[0]["what"].as_str().unwrap(),
        format!("out of memory inside {}", died.as_str().unwrap())
    );
    let open: Vec<&Value> = r["schedule"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["open"] == true)
        .collect();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["name"], died);
}

#[test]
fn a_snapshot_without_marks_has_no_schedule() {
    for f in ["annotated_steps", "allocator", "oom"] {
        let dir = fixture(f);
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "pickle"))
            .unwrap();
        let r = report(&[file.to_str().unwrap()]);
        assert!(r.get("schedule").is_none(), "{f}");
        assert_ne!(r["trace"]["steps"]["method"], "schedule", "{f}");
    }
}

/// A second generator's marked step (tools/snapgen/scenarios_run.py `schedule_marks`, written
/// apart from the reader and from `scenarios_schedule.py`): live at each event's start and end,
/// the peak inside and the bytes allocated and freed, as it planted them; its out-of-memory
/// variant dies inside the event it says.
#[test]
fn a_second_generators_marked_step_reads_as_planted() {
    let p = planted("schedule_marks");
    let r = report_of("schedule_marks/snapshot.pickle");
    let events: Vec<&Value> = r["schedule"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["op"] != "stage")
        .collect();
    let want = p["marks"].as_array().unwrap();
    assert_eq!(events.len(), want.len());
    let sum = |v: &Value| -> u64 {
        v.as_array()
            .unwrap()
            .iter()
            .map(|a| a["bytes"].as_u64().unwrap())
            .sum()
    };
    for (g, w) in events.iter().zip(want) {
        assert_eq!(g["name"], w["name"]);
        assert_eq!(g["live_start_bytes"], w["live_at_start"], "{}", w["name"]);
        assert_eq!(g["live_end_bytes"], w["live_at_end"], "{}", w["name"]);
        assert_eq!(g["peak_bytes"], w["peak_inside"], "{}", w["name"]);
        assert_eq!(
            sum(&g["allocated"]),
            w["allocated_bytes"].as_u64().unwrap(),
            "{}",
            w["name"]
        );
        assert_eq!(
            sum(&g["freed"]),
            w["freed_bytes"].as_u64().unwrap(),
            "{}",
            w["name"]
        );
    }
    let oom = report_of("schedule_marks/snapshot_oom.pickle");
    let open: Vec<&Value> = oom["schedule"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["open"] == true)
        .map(|e| &e["name"])
        .collect();
    assert_eq!(open, vec![&p["oom"]["open"]]);
    let closed: Vec<&Value> = oom["schedule"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["open"] == false && e["op"] != "stage")
        .map(|e| &e["name"])
        .collect();
    assert_eq!(
        closed,
        p["oom"]["closed"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>()
    );
}
