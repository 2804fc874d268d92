//! The task path: one tokio task per user (closed model) or per arrival
//! (open model) on each worker's single-threaded runtime. Everything the
//! event loop does not take runs here: sessions, templates, checks,
//! extraction, feeders, TLS, user stages, the open model, pooled
//! connections.
//!
//! - `closed` / `open`: the two load models, each a loop per user or per
//!   connection.
//! - `user`: one virtual user's state and iteration (a request from the
//!   mix, or a session of steps; checks, extraction, feeders).
//! - `timeout`: the one request timer per user.
//! - `arrival_clock`: the open model's microsecond timer.

mod arrival_clock;
pub(crate) mod closed;
pub(crate) mod open;
mod timeout;
mod user;
