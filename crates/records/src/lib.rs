//! headroom's records: what a run, a study and a capacity search leave
//! behind, and the pure logic that reads them. Everything that reads
//! results — `report`, `compare`, `merge`, the fuzzers — depends on this
//! crate alone, never on the crates that run load or start servers.
//!
//! - [`results`]: `results.json`, one run's record (the contract of
//!   `report`, `compare` and shard merge).
//! - [`check`]: objectives (`p90<500ms, errors<5%`) judged on a record.
//! - [`merge`]: shards' records into one, exactly (HDR histograms).
//! - [`events`]: what users saw around each event of a run.
//! - [`exemplars`]: the slowest traced requests, with their trace IDs.
//! - [`server`]: what the monitor saw — samples, summary, findings.
//! - [`study`]: `study.json`, and the ranking of configurations.
//! - [`capacity`]: `cap.json`, and the knee and limit read from its steps.

pub mod capacity;
pub mod check;
pub mod events;
pub mod exemplars;
pub mod merge;
pub mod results;
pub mod server;
pub mod study;

pub use results::Results;

use std::path::Path;

/// Writes `bytes` to `path` through a temporary file beside it and a
/// rename, so a reader (or a crash mid-write) never sees half a file and a
/// record rewritten after every step always holds a whole one.
/// A write that fails (a full disk) leaves no temporary file behind.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A record read from JSON: a value of the wrong type names the field it
/// is in (`requests.total: invalid type: string "many", expected u64`),
/// not only what it expected.
pub fn from_json<T: serde::de::DeserializeOwned>(value: &serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.into_inner().to_string()
        } else {
            format!("{path}: {}", e.into_inner())
        }
    })
}

/// A `results.json` read from JSON (see [`from_json`]). Its totals are a
/// flattened part, which serde reads without a path: an error there is
/// looked for again in them alone.
pub fn results_from_json(value: &serde_json::Value) -> Result<Results, String> {
    from_json(value).map_err(|e| match from_json::<results::Summary>(value) {
        Err(in_totals) => in_totals,
        Ok(_) => e,
    })
}
