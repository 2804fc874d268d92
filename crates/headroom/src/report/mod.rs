//! Reports: the `results.json` model ([`results`]), the terminal summary
//! ([`terminal`]) and the live progress line ([`live`]).

pub mod live;
pub mod results;
pub mod terminal;
