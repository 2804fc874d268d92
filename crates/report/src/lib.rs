//! Reports: what people and CI read of a run, a study or a capacity
//! search. The top floor of the library: it reads the records of every
//! crate below and is read by none.
//!
//! - [`table`]: the table type every printed table goes through (text or
//!   Markdown); [`terminal`]: the run summary; [`live`]: the progress line.
//! - [`study_table`] and [`capacity_table`]: the comparison and the step
//!   tables.
//! - [`html`] (self-contained pages with SVG charts), [`csv`], [`hdrlog`],
//!   [`thresholds`] (JUnit), [`compare`] (runs side by side).
//! - [`events`]: the events table (what users saw after each event).

pub mod capacity_table;
pub mod compare;
pub mod csv;
pub mod events;
pub mod hdrlog;
pub mod html;
pub mod live;
pub mod study_table;
pub mod table;
pub mod terminal;
pub mod thresholds;
