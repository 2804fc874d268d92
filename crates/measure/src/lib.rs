//! One measured run: the engine and the monitor on one clock, events
//! acted on at their times, thresholds that abort, live metrics — and the
//! record it leaves (`results.json`, assembled in [`assemble`] into
//! `headroom_records`' types). Capacity searches and studies measure
//! through [`measure()`]; readers of the record need only
//! `headroom-records`.
//!
//! - [`run`]: [`measure()`] and [`measure_from`]: start the monitor, run
//!   the plan, act on events, judge abort rules each second, assemble.
//! - [`assemble`]: the record from the plan and what the engine measured.
//! - [`act`]: running an event's command or signal on the run's clock.
//! - [`abort`]: thresholds that stop a run early (k6's abortOnFail).
//! - [`prometheus`]: live metrics, scraped or pushed while the run goes.
//! - [`otlp`]: the same metrics, and a traced run's slowest requests as
//!   spans, for an OpenTelemetry collector.

pub mod abort;
pub mod act;
pub mod assemble;
pub mod dashboard;
pub mod fleet;
pub mod otlp;
pub mod prometheus;
pub mod run;

pub use run::{measure, measure_from, During, Measured, Recording};
