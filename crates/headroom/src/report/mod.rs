//! Reports: the `results.json` model ([`results`]), the terminal summary
//! ([`terminal`]), the live progress line ([`live`]), the table type every
//! printed table goes through ([`table`]), and the outputs for people and
//! CI — [`html`], [`csv`], [`hdrlog`], [`compare`], [`thresholds`].

pub mod compare;
pub mod csv;
pub mod hdrlog;
pub mod html;
pub mod live;
pub mod results;
pub mod table;
pub mod terminal;
pub mod thresholds;

use std::path::Path;

/// Writes `bytes` to `path` through a temporary file beside it and a
/// rename, so a reader (or a crash mid-write) never sees half a file and a
/// report rewritten after every step always holds a whole one.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
