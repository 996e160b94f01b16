//! The same object graph written with `pickle.dumps` (any protocol, or
//! torch::jit::Pickler) and with `json.dumps` gives the same report, over many
//! randomly shared graphs (tools/snapgen/randomized.py): frame dicts and frame lists
//! reused across owners, trace entries appended twice, records under unknown keys,
//! one string object for equal strings. JSON writes every shared object out in full,
//! so it is the reference reading of the sharing.

use crate::snapshot_common;

use serde_json::Value;
use snapshot_common::*;

fn report(path: &std::path::Path) -> Value {
    let opts = instrument::snapshot::Options::default();
    let (rep, _) = instrument::snapshot::analyse_file(path, &opts, false, usize::MAX)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut v = serde_json::to_value(&rep).unwrap();
    v.as_object_mut().unwrap().remove("source");
    v
}

#[test]
fn pickle_and_json_of_randomly_shared_graphs_give_the_same_report() {
    let Some(dir) = generate(&["--random", "48", "--seed", "8"]) else {
        return;
    };
    let mut shared = 0;
    for i in 0..48 {
        let p = dir.path().join(format!("case_{i:03}.pickle"));
        let j = dir.path().join(format!("case_{i:03}.json"));
        let (a, b) = (report(&p), report(&j));
        if a != b {
            let keys: Vec<&String> = a
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| a[*k] != b[*k])
                .collect();
            panic!("case {i}: the pickle and the JSON differ in {keys:?}");
        }
        let snap = instrument::snapshot::read::load(&p, 1_000_000).unwrap();
        shared += snap.layout.shared_records as usize;
    }
    // The cases that share records were read a second time, keeping them.
    assert!(shared >= 5, "only {shared} cases shared records");
}
