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
//! - [`server`]: what the monitor saw — samples, summary, findings.
//! - [`study`]: `study.json`, and the ranking of configurations.
//! - [`capacity`]: `cap.json`, and the knee and limit read from its steps.

pub mod capacity;
pub mod check;
pub mod events;
pub mod merge;
pub mod results;
pub mod server;
pub mod study;

pub use results::Results;

use std::path::Path;

/// Writes `bytes` to `path` through a temporary file beside it and a
/// rename, so a reader (or a crash mid-write) never sees half a file and a
/// record rewritten after every step always holds a whole one.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
