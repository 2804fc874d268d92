//! Reports: the `results.json` model ([`results`]), the terminal summary
//! ([`terminal`]), the live progress line ([`live`]) and the table type
//! every printed table goes through ([`table`]).

pub mod live;
pub mod results;
pub mod table;
pub mod terminal;
