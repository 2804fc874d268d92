//! The live dashboard's feed (`--dashboard`): one JSON event per finished
//! second — the second's own figures, the run's totals so far and the
//! monitor's latest sample — then a final event with the results' exact
//! totals. The CLI serves it as server-sent events; a browser that joins
//! late, or reconnects, is sent the history first.

use headroom_engine::plan::{Load, Plan};
use headroom_engine::Progress;
use headroom_records::results::Results;
use headroom_records::server::sample::Sample;
use serde_json::{json, Value};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Seconds kept for browsers that join late: the last hour.
pub const KEPT_SECONDS: usize = 3600;

/// The events so far, shared by the run and every browser's stream.
#[derive(Clone, Default)]
pub struct Feed {
    inner: Arc<(Mutex<State>, Condvar)>,
}

#[derive(Default)]
struct State {
    /// Events as JSON text, oldest first; `first` is the number of the
    /// oldest kept (older ones were dropped past [`KEPT_SECONDS`]).
    events: std::collections::VecDeque<String>,
    first: usize,
    done: bool,
}

/// The same feed (a recording's copies share one).
impl PartialEq for Feed {
    fn eq(&self, other: &Feed) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Feed {}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Feed")
    }
}

impl Feed {
    pub fn new() -> Feed {
        Feed::default()
    }

    fn push(&self, event: Value, done: bool) {
        let (lock, changed) = &*self.inner;
        let mut state = lock.lock().expect("dashboard feed lock");
        state.events.push_back(event.to_string());
        if state.events.len() > KEPT_SECONDS + 1 {
            state.events.pop_front();
            state.first += 1;
        }
        state.done |= done;
        changed.notify_all();
    }

    /// A second of the run, with the monitor's latest sample.
    pub fn second(&self, plan: &Plan, p: &Progress, sample: Option<&Sample>) {
        let s = p.second;
        let offered = match &plan.load {
            Load::Open(o) => Some(o.schedule.rate_at(p.elapsed)),
            Load::Closed(_) => None,
        };
        let errors: serde_json::Map<String, Value> = s
            .errors
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let statuses: serde_json::Map<String, Value> = p
            .total
            .status
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (code.to_string(), json!(n)))
            .collect();
        let requests: Vec<Value> = plan
            .requests
            .iter()
            .zip(p.by_request)
            .map(|(spec, c)| json!({"name": spec.name, "ok": c.ok, "failed": c.failed}))
            .collect();
        let server = sample
            .and_then(|x| x.server.as_ref())
            .filter(|t| t.alive)
            .map(|t| {
                json!({
                    "cpu_pct": t.cpu_pct,
                    "rss_mib": t.rss_bytes as f64 / 1048576.0,
                    "threads": t.threads,
                    "fds": t.fds,
                    "accept_queue": (!t.accept_queues.is_empty()).then(|| t.accept_queue_depth()),
                })
            });
        let event = json!({
            "kind": "second",
            "t_s": s.t_s,
            "elapsed_s": p.elapsed.as_secs_f64(),
            "offered_rps": offered,
            "requests": s.requests,
            "ok": s.ok,
            "failed": s.failed,
            "p50_ms": s.p50_ms, "p90_ms": s.p90_ms, "p95_ms": s.p95_ms,
            "p99_ms": s.p99_ms, "max_ms": s.max_ms,
            "active_users": s.active_users,
            "in_flight": s.in_flight,
            "errors": errors,
            "total": {
                "requests": p.total.requests,
                "ok": p.total.ok,
                "failed": p.total.failed,
                "statuses": statuses,
            },
            "per_request": requests,
            "server": server,
            "queued_inside": sample.and_then(Sample::probe_queued),
            "machine_cpu_pct": sample.and_then(|x| x.machine.as_ref()).map(|m| 100.0 - m.cpu_idle_pct),
            "generator_cpu_pct": sample.and_then(|x| x.generator.as_ref()).map(|g| g.cpu_pct),
        });
        self.push(event, false);
    }

    /// An event of the caller's (a capacity search's steps).
    pub fn event(&self, event: Value) {
        self.push(event, false);
    }

    /// Nothing follows: browsers' streams end after this.
    pub fn close(&self) {
        self.push(json!({"kind": "end"}), true);
    }

    /// A run is over: its exact totals, from the results (`run_end`; the
    /// command that ran it closes the feed when nothing follows).
    pub fn finish(&self, r: &Results) {
        let l = &r.summary.latency_ms;
        let per_request: Vec<Value> = r
            .config
            .requests
            .iter()
            .filter_map(|c| {
                let s = r.per_request.get(&c.name)?;
                Some(json!({"name": c.name, "ok": s.requests.ok, "failed": s.requests.failed}))
            })
            .collect();
        let event = json!({
            "kind": "run_end",
            "per_request": per_request,
            "duration_s": r.duration_s,
            "stop_reason": r.stop_reason,
            "total": {
                "requests": r.summary.requests.total,
                "ok": r.summary.requests.ok,
                "failed": r.summary.requests.failed,
            },
            "throughput_rps": r.summary.throughput_rps,
            "latency_ms": {"p50": l.p50, "p90": l.p90, "p95": l.p95, "p99": l.p99, "max": l.max},
            "findings": r.server.as_ref().map(|s| s.findings.iter().map(|f| f.message.clone()).collect::<Vec<_>>()),
            "generator_bound": r.generator_bound,
        });
        self.push(event, false);
    }

    /// Events from number `from` on (the history, for a browser that just
    /// joined), waiting up to `wait` for one when there is none yet; the
    /// next number to ask for; and whether the run is over.
    pub fn events_from(&self, from: usize, wait: Duration) -> (Vec<String>, usize, bool) {
        let (lock, changed) = &*self.inner;
        let mut state = lock.lock().expect("dashboard feed lock");
        if state.first + state.events.len() <= from && !state.done {
            state = changed
                .wait_timeout(state, wait)
                .expect("dashboard feed lock")
                .0;
        }
        let start = from.max(state.first);
        let events: Vec<String> = state
            .events
            .iter()
            .skip(start - state.first)
            .cloned()
            .collect();
        let next = state.first + state.events.len();
        (events, next, state.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_browser_gets_the_history_then_each_new_event_and_the_end() {
        let feed = Feed::new();
        feed.push(json!({"kind": "second", "t_s": 1}), false);
        feed.push(json!({"kind": "second", "t_s": 2}), false);
        let (events, next, done) = feed.events_from(0, Duration::ZERO);
        assert_eq!((events.len(), next, done), (2, 2, false));
        // Nothing new: an empty answer once the wait is over.
        let (events, next, _) = feed.events_from(2, Duration::from_millis(1));
        assert_eq!((events.len(), next), (0, 2));
        feed.push(json!({"kind": "final"}), true);
        let (events, next, done) = feed.events_from(2, Duration::ZERO);
        assert_eq!((events.len(), next, done), (1, 3, true));
        assert!(events[0].contains("final"));
    }

    #[test]
    fn only_the_last_hour_is_kept() {
        let feed = Feed::new();
        for t in 0..KEPT_SECONDS + 10 {
            feed.push(json!({"t_s": t}), false);
        }
        let (events, next, _) = feed.events_from(0, Duration::ZERO);
        assert_eq!(events.len(), KEPT_SECONDS + 1);
        assert_eq!(next, KEPT_SECONDS + 10);
        assert_eq!(events[0], json!({"t_s": 9}).to_string());
    }
}
