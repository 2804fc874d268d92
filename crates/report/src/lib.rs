//! Reports: what people and CI read of a run, a study or a capacity
//! search. It reads records (`headroom-records`) and nothing that runs
//! load or starts servers, so it builds and runs without them.
//!
//! - [`table`]: the table type every printed table goes through (text or
//!   Markdown); [`terminal`]: the run summary.
//! - [`study_table`] and [`capacity_table`]: the comparison and the step
//!   tables.
//! - [`html`] (self-contained pages with SVG charts), [`csv`], [`hdrlog`],
//!   [`thresholds`] (JUnit), [`compare`] (runs side by side).
//! - [`events`]: the events table (what users saw after each event).

pub mod capacity_table;
pub mod compare;
pub mod compare_capacity;
pub mod csv;
pub mod events;
pub mod hdrlog;
pub mod html;
pub mod study_table;
pub mod table;
pub mod terminal;
pub mod thresholds;
