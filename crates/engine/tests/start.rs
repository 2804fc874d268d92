//! A run's start already past when it begins: its own start (a loaded
//! machine took longer than the lead to start it) sends every arrival,
//! late; a shared start (a shard that missed `--start-at`) skips what was
//! due and counts it `not_sent`. Counts only, no timing asserted.

mod common;

use headroom_engine::metrics::ErrorClass;
use headroom_engine::plan::schedule::Schedule;
use headroom_engine::plan::{Load, OpenLoad, Plan, DEFAULT_MAX_CONNECTIONS};
use headroom_engine::{run_at, Start, StopSignal};
use std::time::{Duration, Instant};

/// 100 arrivals a second for 0.5 s (50) against the in-process sample
/// server; each test starts the run's clock `AGO` in the past.
fn open_plan() -> Plan {
    let url = format!("{}/hello", common::sample_server(2));
    let mut plan = Plan::get(&url).unwrap();
    plan.load = Load::Open(OpenLoad {
        users: false,
        schedule: Schedule::constant(100.0, Duration::from_millis(500)).unwrap(),
        max_connections: DEFAULT_MAX_CONNECTIONS,
    });
    plan
}

const AGO: Duration = Duration::from_millis(300);

#[test]
fn a_run_that_starts_after_its_own_start_sends_every_arrival() {
    let plan = open_plan();
    let start = Start::Own(Instant::now() - AGO);
    let outcome = run_at(&plan, &StopSignal::new(), start, |_| {});
    assert_eq!(outcome.total.requests, 50);
    assert_eq!(outcome.total.failed, 0, "{:?}", outcome.total.errors);
    assert_eq!(outcome.total.ok, 50);
    assert_eq!(outcome.late_by, Duration::ZERO);
}

#[test]
fn a_run_that_joins_a_shared_start_late_counts_what_it_missed() {
    let plan = open_plan();
    let start = Start::Shared(Instant::now() - AGO);
    let outcome = run_at(&plan, &StopSignal::new(), start, |_| {});
    // The whole schedule is accounted for: sent, or missed and said so.
    assert_eq!(outcome.total.requests, 50);
    assert!(outcome.late_by >= AGO, "{:?}", outcome.late_by);
    // At least the arrivals of the 300 ms before the run began; the rest
    // went out.
    let not_sent = outcome.total.error_count(ErrorClass::NotSent);
    assert!(not_sent >= 30, "{:?}", outcome.total.errors);
    assert_eq!(
        outcome.total.ok + not_sent,
        50,
        "{:?}",
        outcome.total.errors
    );
}
