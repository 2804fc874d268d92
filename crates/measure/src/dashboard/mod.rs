//! The live dashboard's feed (`--dashboard`): one JSON event per finished
//! second — the second's own figures, the run's totals so far and the
//! monitor's latest sample — then a final event with the results' exact
//! totals. Studies, capacity searches and fleets add events of their own
//! ([`Feed::event`]). The CLI serves it as server-sent events; a browser
//! that joins late, or reconnects, is sent the history first.

use hdrhistogram::Histogram;
use headroom_engine::plan::{Load, Plan};
use headroom_engine::Progress;
use headroom_metrics::histogram;
use headroom_records::results::Results;
use headroom_records::server::findings::CPU_SATURATED;
use headroom_records::server::machine::available_cores;
use headroom_records::server::sample::Sample;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Seconds kept at full resolution for browsers that join late: the
/// last hour.
pub const KEPT_SECONDS: usize = 3600;
/// Older seconds are kept one in this many (a point a minute).
pub const OLDER_ONE_IN: usize = 60;
/// At most this many older seconds; past it they are thinned again (one
/// in two), so a run of days still fits in a few MB.
pub const OLDER_SECONDS_MAX: usize = 1440;
/// The percentiles of the response-time distribution sent every second.
const DISTRIBUTION: [f64; 9] = [0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0];

/// Makes an HTML report.
type Report = Arc<dyn Fn() -> String + Send + Sync>;

/// The events so far, shared by the run and every browser's stream.
#[derive(Clone, Default)]
pub struct Feed {
    inner: Arc<(Mutex<State>, Condvar)>,
}

/// One event as sent, numbered in the order it came.
struct Kept {
    number: usize,
    text: String,
    second: bool,
}

#[derive(Default)]
struct State {
    /// Older events: every one that is not a second, and one second in
    /// [`OLDER_ONE_IN`] (numbers ascending, with gaps).
    older: VecDeque<Kept>,
    /// The newest events, holding at most [`KEPT_SECONDS`] seconds.
    recent: VecDeque<Kept>,
    seconds_in_recent: usize,
    seconds_moved: usize,
    next: usize,
    done: bool,
    /// Makes the HTML report of what was measured, once there is one
    /// (made when a browser asks for it: a run that nobody looks at pays
    /// nothing for it).
    report: Option<Report>,
}

impl State {
    fn push(&mut self, text: String, second: bool) {
        self.recent.push_back(Kept {
            number: self.next,
            text,
            second,
        });
        self.next += 1;
        self.seconds_in_recent += usize::from(second);
        while self.seconds_in_recent > KEPT_SECONDS {
            let Some(oldest) = self.recent.pop_front() else {
                break;
            };
            if !oldest.second {
                self.older.push_back(oldest);
                continue;
            }
            self.seconds_in_recent -= 1;
            self.seconds_moved += 1;
            if (self.seconds_moved - 1).is_multiple_of(OLDER_ONE_IN) {
                self.older.push_back(oldest);
                self.thin_older();
            }
        }
    }

    /// Past [`OLDER_SECONDS_MAX`] older seconds, every other one goes
    /// (the other events stay).
    fn thin_older(&mut self) {
        if self.older.iter().filter(|k| k.second).count() <= OLDER_SECONDS_MAX {
            return;
        }
        let mut nth = 0;
        self.older.retain(|k| {
            if !k.second {
                return true;
            }
            nth += 1;
            nth % 2 == 1
        });
    }

    /// Kept events numbered `from` or later, oldest first.
    fn from(&self, from: usize) -> Vec<String> {
        let older = self.older.partition_point(|k| k.number < from);
        let recent = self.recent.partition_point(|k| k.number < from);
        self.older
            .range(older..)
            .chain(self.recent.range(recent..))
            .map(|k| k.text.clone())
            .collect()
    }
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
        let second = event["kind"] == "second";
        let (lock, changed) = &*self.inner;
        let mut state = lock.lock().expect("dashboard feed lock");
        state.push(event.to_string(), second);
        state.done |= done;
        changed.notify_all();
    }

    /// A run begins: its planned length and events (markers on the
    /// charts).
    pub fn run_start(&self, plan: &Plan) {
        let events: Vec<Value> = plan
            .events
            .iter()
            .filter_map(|e| {
                let at = plan.event_time(e.at)?;
                Some(json!({"label": e.label, "at_s": at.as_secs_f64()}))
            })
            .collect();
        let planned_s = match &plan.load {
            Load::Open(o) => Some(o.schedule.duration().as_secs_f64()),
            Load::Closed(c) => c.duration.map(|d| d.as_secs_f64()),
        };
        let trace_url = plan.trace_context.as_ref().and_then(|t| t.url.clone());
        self.push(
            json!({"kind": "run_start", "planned_s": planned_s, "events": events,
                   "trace_url": trace_url}),
            false,
        );
    }

    /// A second of the run, with the monitor's latest sample.
    pub fn second(&self, plan: &Plan, p: &Progress, sample: Option<&Sample>) {
        let s = p.second;
        // A shard sends one arrival in `count`.
        let offered = match &plan.load {
            Load::Open(o) => {
                Some(o.schedule.rate_at(p.elapsed) / f64::from(plan.shard.count.max(1)))
            }
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
        // This second's statuses by class: 2xx, 3xx, 4xx, 5xx.
        let mut classes = serde_json::Map::new();
        if let Some(this) = p.recent.back() {
            for class in 1..=5 {
                let n: u64 = this.status[class * 100..(class + 1) * 100].iter().sum();
                if n > 0 {
                    classes.insert(format!("{class}xx"), json!(n));
                }
            }
        }
        let requests: Vec<Value> = plan
            .requests
            .iter()
            .zip(p.by_request)
            .enumerate()
            .map(|(i, (spec, c))| {
                let last = s.per_request.get(i);
                json!({
                    "name": spec.name, "ok": c.ok, "failed": c.failed,
                    "p50_ms": last.and_then(|r| r.p50_ms),
                    "p95_ms": last.and_then(|r| r.p95_ms),
                    "p99_ms": last.and_then(|r| r.p99_ms),
                })
            })
            .collect();
        let mut event = json!({
            "kind": "second",
            "t_s": s.t_s,
            "elapsed_s": p.elapsed.as_secs_f64(),
            "offered_rps": offered,
            "requests": s.requests,
            "ok": s.ok,
            "failed": s.failed,
            "p50_ms": s.p50_ms, "p90_ms": s.p90_ms, "p95_ms": s.p95_ms,
            "p99_ms": s.p99_ms, "max_ms": s.max_ms,
            "send_lag_p99_ms": s.send_lag_p99_ms,
            "active_users": s.active_users,
            "in_flight": s.in_flight,
            "sockets_open": s.sockets_open,
            "messages_sent": s.messages_sent,
            "messages_received": s.messages_received,
            "errors": errors,
            "status_classes": classes,
            "total": {
                "requests": p.total.requests,
                "ok": p.total.ok,
                "failed": p.total.failed,
                "statuses": statuses,
            },
            "distribution": distribution(&p.total.latency),
            "per_request": requests,
        });
        if !p.exemplars.is_empty() {
            // The second's slowest traced requests, for the page's list.
            let traced: Vec<Value> = (p.exemplars.iter())
                .map(|e| {
                    json!({
                        "trace_id": e.trace.trace_hex(),
                        "name": plan.requests.get(e.request as usize).map(|r| &r.name),
                        "second": e.second + 1,
                        "latency_ms": e.latency_us as f64 / 1000.0,
                    })
                })
                .collect();
            event["exemplars"] = json!(traced);
        }
        add_monitor(&mut event, sample);
        // A fleet's shard: the second's histogram, for the parent to
        // merge the fleet's percentiles exactly.
        if !plan.shard.is_whole() {
            if let Some(this) = p.recent.back() {
                event["latency_hdr"] = json!(histogram::to_base64(&this.latency));
            }
        }
        self.push(event, false);
    }

    /// An event of the caller's (a capacity search's steps, a study's
    /// configurations, a fleet's shards).
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
        self.push(run_end(r), false);
    }

    /// The HTML report can be made: the page links it (served at
    /// `/report`, made by `make` when asked for).
    pub fn offer_report(&self, make: impl Fn() -> String + Send + Sync + 'static) {
        {
            let (lock, _) = &*self.inner;
            lock.lock().expect("dashboard feed lock").report = Some(Arc::new(make));
        }
        self.push(json!({"kind": "report", "path": "/report"}), false);
    }

    /// The HTML report, when there is one.
    pub fn report(&self) -> Option<String> {
        let (lock, _) = &*self.inner;
        let make = lock.lock().expect("dashboard feed lock").report.clone()?;
        Some(make())
    }

    /// Events from number `from` on (the history, for a browser that just
    /// joined), waiting up to `wait` for one when there is none yet; the
    /// next number to ask for; and whether the run is over.
    pub fn events_from(&self, from: usize, wait: Duration) -> (Vec<String>, usize, bool) {
        let (lock, changed) = &*self.inner;
        let mut state = lock.lock().expect("dashboard feed lock");
        if state.next <= from && !state.done {
            state = changed
                .wait_timeout(state, wait)
                .expect("dashboard feed lock")
                .0;
        }
        (state.from(from), state.next, state.done)
    }
}

/// Percentiles of the response times so far ([`DISTRIBUTION`]), as
/// `[percentile, ms]` pairs.
pub fn distribution(latency: &Histogram<u64>) -> Vec<Value> {
    if latency.is_empty() {
        return Vec::new();
    }
    DISTRIBUTION
        .iter()
        .map(|&pct| json!([pct, histogram::ms(latency.value_at_percentile(pct))]))
        .collect()
}

/// The monitor's latest sample on a second's event: the server, the
/// machine and the generator.
pub fn add_monitor(event: &mut Value, sample: Option<&Sample>) {
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
    let generator_cpu = sample.and_then(|x| x.generator.as_ref()).map(|g| g.cpu_pct);
    // The rule the results' `generator_cpu` finding applies, on one
    // sample: the page warns when it holds for consecutive seconds.
    let generator_saturated =
        generator_cpu.is_some_and(|c| c >= CPU_SATURATED * available_cores() as f64 * 100.0);
    let machine = sample.and_then(|x| x.machine.as_ref());
    event["server"] = json!(server);
    event["queued_inside"] = json!(sample.and_then(Sample::probe_queued));
    event["machine_cpu_pct"] = json!(machine.map(|m| 100.0 - m.cpu_idle_pct));
    event["machine_memory_pct"] = json!(machine.and_then(memory_used_pct));
    event["generator_cpu_pct"] = json!(generator_cpu);
    event["generator_saturated"] = json!(generator_saturated);
}

/// Memory in use, % of the machine's.
fn memory_used_pct(m: &headroom_records::server::sample::MachineSample) -> Option<f64> {
    (m.mem_total_bytes > 0)
        .then(|| 100.0 * (1.0 - m.mem_available_bytes as f64 / m.mem_total_bytes as f64))
}

/// The `run_end` event of finished results (a run's, or a fleet's merged
/// results): exact totals, latency, findings, event windows.
pub fn run_end(r: &Results) -> Value {
    let l = &r.summary.latency_ms;
    let per_request: Vec<Value> = r
        .config
        .requests
        .iter()
        .filter_map(|c| {
            let s = r.per_request.get(&c.name)?;
            let l = &s.latency_ms;
            Some(json!({
                "name": c.name, "ok": s.requests.ok, "failed": s.requests.failed,
                "p50_ms": l.p50, "p95_ms": l.p95, "p99_ms": l.p99,
            }))
        })
        .collect();
    let events: Vec<Value> = r
        .events
        .iter()
        .map(|e| {
            json!({
                "label": e.label, "started_s": e.started_s, "ended_s": e.ended_s,
                "window_to_s": e.after.as_ref().map(|a| a.to_s),
                "error": e.error,
            })
        })
        .collect();
    json!({
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
        "generator_bound_reasons": r.generator_bound_reasons,
        "events": events,
        // The run's slowest traced requests, as results.json ranks them.
        "slowest": exemplars_shown(r),
    })
}

/// Traced requests the page lists.
const SLOWEST_SHOWN: usize = 10;

fn exemplars_shown(r: &Results) -> Vec<Value> {
    headroom_records::exemplars::ranked(&r.exemplars, SLOWEST_SHOWN)
        .into_iter()
        .map(|e| {
            json!({"trace_id": e.trace_id, "name": e.name, "second": e.second,
                   "latency_ms": e.latency_ms})
        })
        .collect()
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
    fn the_last_hour_is_whole_older_seconds_one_a_minute_and_other_events_all_kept() {
        let feed = Feed::new();
        let extra = 2 * 3600;
        for t in 0..KEPT_SECONDS + extra {
            feed.push(json!({"kind": "second", "t_s": t}), false);
            if t % 1000 == 0 {
                feed.push(json!({"kind": "step", "at": t}), false);
            }
        }
        let (events, next, _) = feed.events_from(0, Duration::ZERO);
        assert_eq!(
            next,
            KEPT_SECONDS + extra + (KEPT_SECONDS + extra).div_ceil(1000)
        );
        let seconds: Vec<u64> = events
            .iter()
            .map(|e| serde_json::from_str::<Value>(e).unwrap())
            .filter(|v| v["kind"] == "second")
            .map(|v| v["t_s"].as_u64().unwrap())
            .collect();
        // The last hour, every second of it ...
        let last_hour = &seconds[seconds.len() - KEPT_SECONDS..];
        assert!(last_hour.windows(2).all(|w| w[1] == w[0] + 1));
        assert_eq!(
            *last_hour.last().unwrap(),
            (KEPT_SECONDS + extra - 1) as u64
        );
        // ... and before it, a second a minute, from the first.
        let older = &seconds[..seconds.len() - KEPT_SECONDS];
        assert_eq!(older.len(), extra / OLDER_ONE_IN);
        assert!(older.iter().enumerate().all(|(i, &t)| t == (i * 60) as u64));
        // No step is lost, however old.
        let steps = events.iter().filter(|e| e.contains("\"step\"")).count();
        assert_eq!(steps, (KEPT_SECONDS + extra).div_ceil(1000));
        // A browser that reconnects after number n gets what follows it.
        let (after, _, _) = feed.events_from(next - 3, Duration::ZERO);
        assert_eq!(after.len(), 3);
    }

    #[test]
    fn a_run_of_days_is_thinned_past_the_older_bound() {
        let mut state = State::default();
        let seconds = KEPT_SECONDS + OLDER_ONE_IN * (OLDER_SECONDS_MAX + 10);
        for t in 0..seconds {
            state.push(format!("{t}"), true);
        }
        let older = state.older.len();
        assert!(older <= OLDER_SECONDS_MAX, "{older}");
        assert!(older > OLDER_SECONDS_MAX / 2 - 10, "{older}");
        assert_eq!(state.recent.len(), KEPT_SECONDS);
    }
}
