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
