//! results.json as `report` and `compare` read it: any JSON is a run
//! record or refused; a record round-trips through JSON unchanged, and the
//! terminal summary, the HTML report and compare's figures never panic on
//! it.
#![no_main]

use headroom_records::results::Results;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(results) = serde_json::from_slice::<Results>(data) else { return };
    let json = serde_json::to_string(&results).expect("a record serialises");
    let back: Results = serde_json::from_str(&json).expect("a serialised record reads back");
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&results).unwrap(),
        "the round trip through JSON changed the record"
    );
    let mut out = Vec::new();
    let _ = headroom_report::terminal::write_summary(&mut out, &results);
    let _ = headroom_report::html::run_report(&results);
    let _ = headroom_report::compare::run_figures(&results);
});
