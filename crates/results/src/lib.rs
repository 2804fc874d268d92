//! The run record and what reads it first: the record `results.json`
//! ([`record`]), objectives (`p90<500ms, errors<5%`, from
//! `headroom-objectives`) checked against it ([`check`]), and the one
//! function that produces it ([`measure()`]: the engine and the monitor on
//! one clock). Everything above — capacity search, studies, reports,
//! compare — reads [`Results`]; nothing here knows of them.

pub mod abort;
pub mod check;
pub mod events;
pub mod measure;
pub mod merge;
pub mod prometheus;
pub mod record;

pub use measure::{measure, Measured, Recording};
pub use record::Results;

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
