//! Study files: any text is a study or a list of located problems, never
//! a panic (the scenario is inline, so no file is read; nothing is run).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Keep file reads out: a study naming a scenario file is refused here.
    if text.contains("scenario =") || text.contains("scenario=") {
        return;
    }
    if let Err(e) = headroom_study_file::from_text(text, Path::new("/nonexistent/fuzz.toml")) {
        assert!(!e.problems.is_empty());
        assert!(e.problems.iter().all(|p| !p.message.is_empty()));
    }
});
