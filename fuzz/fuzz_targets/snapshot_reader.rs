//! Any bytes: the snapshot reader (pickle or JSON) returns a snapshot or an error and
//! never panics; a snapshot it returns goes through the analysis and every renderer.
#![no_main]

use instrument::snapshot::report::{self, html, text};
use instrument::snapshot::{Options, analysis::Analysis, patterns, read as load};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(snap) = load::load_bytes(data, 4096) else {
        return;
    };
    let opts = Options::default();
    let Ok(mut a) = Analysis::new(&snap, &opts) else {
        return;
    };
    let pats = patterns::detect(&mut a, None);
    let mut rep = report::build(&mut a, "fuzz", 10, true);
    rep.patterns = pats;
    let _ = text::render(&rep);
    let _ = html::render(&rep);
    let _ = serde_json::to_string(&rep);
});
