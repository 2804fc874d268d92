//! What runs are held to, as users write it — below the engine's results
//! and the capacity search that check it, and the scenario files that hold
//! it:
//!
//! - [`slo`]: the objective language of thresholds and capacity searches
//!   (`p90<500ms, errors<5%, achieved>=95%`), parsed and printed; checking
//!   it against a run's record is `headroom-records`' part.
//! - [`abort`]: thresholds that stop a run early, on a rolling window.
//! - [`capacity`]: the settings of a capacity search, laid over one another
//!   (scenario, study, flags) and resolved into the search's options.

pub mod abort;
pub mod capacity;
pub mod slo;
