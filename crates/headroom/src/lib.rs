//! headroom: a load generator and capacity benchmark for web servers.
//!
//! The pipeline, one module per stage:
//!
//! - [`scenario`]: scenario files (TOML/YAML) → validated [`plan::Plan`].
//! - [`plan`]: the resolved description of a run, with its templates,
//!   feeders and checks.
//! - [`http`]: HTTP/1.1 client — connect, send, parse the response.
//! - [`engine`]: workers, the closed and open load models, stopping.
//! - [`metrics`]: per-worker recording, exact merge, the timeline.
//! - [`report`]: `results.json`, the terminal summary and live progress.
//! - [`capacity`]: capacity search — the highest load meeting an objective.
//! - [`slo`]: objectives and thresholds (`p90<500ms, errors<5%`).
//! - [`target`]: the built-in sample server (`headroom target`).
//! - [`sysinfo`]: the machine, for results' `meta`.

pub mod capacity;
pub mod engine;
pub mod http;
pub mod measure;
pub mod metrics;
pub mod monitor;
pub mod plan;
pub mod report;
pub mod scenario;
pub mod slo;
pub mod study;
pub mod sysinfo;
pub mod target;
