//! Integration tests that measure time — rates, latencies, CPU figures,
//! capacity answers, compare's noise verdict — against real servers on
//! loopback. They run one at a time (`common::serial()`): on a two-core
//! machine one test's load is another's noise. Tests that only need to see
//! a behaviour are in `tests/behaviour`, which runs in parallel.

#[path = "../common/mod.rs"]
mod common;

mod capacity;
mod models;
mod monitor;
mod reports;
mod shards;
mod study;
