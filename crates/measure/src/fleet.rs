//! A fleet of shards seen as one run while it runs. Each shard started
//! with `--report-to` sends a [`Report`] per finished second — its counts
//! and histograms as [`StatsWire`], a few KB — over a pipe, its stdout
//! (followed through `kubectl logs`) or HTTP. [`Fleet`] adds the shards'
//! seconds up with the same `+=` a run's own workers use, so the fleet's
//! live line, metrics, dashboard and aborting thresholds get a
//! [`Progress`] as exact as one process's: merged histograms, never
//! averaged percentiles.
//!
//! A second is merged once every running shard has sent it, or a grace
//! after the first did (how late a shard's lines may come depends on the
//! transport: [`GRACE`] over a pipe, [`GRACE_LOGS`] through Kubernetes'
//! logs); a shard behind by more is shown late, and its seconds that come
//! after their merge still count in the totals.

use headroom_engine::Progress;
use headroom_metrics::aggregate::{Peaks, TimelinePoint, RECENT_SECONDS};
use headroom_metrics::wire::StatsWire;
use headroom_metrics::{RequestCounts, Stats};
use headroom_records::results::Results;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a second waits for the shards that have not sent it yet,
/// when they report over pipes or HTTP.
pub const GRACE: Duration = Duration::from_millis(1500);
/// The same through `kubectl logs -f`: the kubelet and the API server pass
/// the lines on, seconds late under load.
pub const GRACE_LOGS: Duration = Duration::from_secs(5);

/// One line of a shard's report stream (JSON, tagged `headroom_fleet`, so
/// it is told apart from anything else in a pod's log).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "headroom_fleet", rename_all = "snake_case")]
pub enum Report {
    /// First: which shard this is, and which headroom sends it.
    Hello {
        shard: u32,
        of: u32,
        version: String,
    },
    Second(Box<SecondReport>),
    /// The run ended; its results' totals (the last part-second too).
    End {
        requests: u64,
        ok: u64,
        failed: u64,
    },
}

/// A shard's finished second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecondReport {
    /// Seconds since the shared start (1 = the first).
    pub t_s: u32,
    pub stats: StatsWire,
    pub active_users: u32,
    pub in_flight: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets_open: Option<u32>,
    /// OK and failed so far, per request of the plan.
    pub by_request: Vec<[u64; 2]>,
}

impl Report {
    /// The second `p` has just finished.
    pub fn second(p: &Progress) -> Report {
        let empty = Stats::new();
        Report::Second(Box::new(SecondReport {
            t_s: p.second.t_s,
            stats: StatsWire::from(p.recent.back().unwrap_or(&empty)),
            active_users: p.second.active_users,
            in_flight: p.second.in_flight,
            sockets_open: p.second.sockets_open,
            by_request: p.by_request.iter().map(|c| [c.ok, c.failed]).collect(),
        }))
    }

    /// The seconds of a shard's `results` after second `after` (those
    /// its run ended before reporting), from its timeline and per-second
    /// histograms: counts, bytes, error classes and latencies (statuses
    /// and checks per second are not in a timeline; the results have
    /// them exactly). A timeline has no attempts: the results' attempts
    /// less the `attempts_reported` in earlier seconds go on the last one,
    /// so that a shard's seconds add up to its results.
    pub fn tail_seconds(results: &Results, after: u32, attempts_reported: u64) -> Vec<Report> {
        let per_second = &results.histograms.per_second;
        let mut tail: Vec<Report> = results
            .timeline
            .iter()
            .enumerate()
            .filter(|(_, p)| p.t_s > after)
            .map(|(i, p)| {
                let mut stats = Stats::new();
                stats.requests = p.requests;
                stats.ok = p.ok;
                stats.failed = p.failed;
                stats.bytes = p.bytes;
                if let Some(h) = per_second
                    .get(i)
                    .and_then(|b| headroom_metrics::histogram::from_base64(b).ok())
                {
                    stats.latency = h;
                }
                for (key, n) in &p.errors {
                    if let Some(class) = headroom_metrics::ErrorClass::from_key(key) {
                        stats.errors[class.index()] += n;
                    }
                }
                Report::Second(Box::new(SecondReport {
                    t_s: p.t_s,
                    stats: StatsWire::from(&stats),
                    active_users: p.active_users,
                    in_flight: p.in_flight,
                    sockets_open: p.sockets_open,
                    // In the plan's order, as the shard's seconds send them.
                    by_request: results
                        .config
                        .requests
                        .iter()
                        .map(|r| {
                            results
                                .per_request
                                .get(&r.name)
                                .map_or([0, 0], |s| [s.requests.ok, s.requests.failed])
                        })
                        .collect(),
                }))
            })
            .collect();
        if let Some(Report::Second(last)) = tail.last_mut() {
            last.stats.attempts = results
                .summary
                .requests
                .attempts
                .saturating_sub(attempts_reported);
        }
        tail
    }

    /// One line of NDJSON.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a report serialises")
    }

    /// A line of a shard's output: `None` when it is not a report (other
    /// output, the results JSON), an error when it is a broken one.
    pub fn from_line(line: &str) -> Option<Result<Report, String>> {
        let line = line.trim();
        if !line.starts_with("{\"headroom_fleet\"") {
            return None;
        }
        Some(serde_json::from_str(line).map_err(|e| e.to_string()))
    }
}

#[derive(Clone, Debug, PartialEq)]
enum State {
    /// Started, nothing heard yet.
    Waiting,
    Running,
    Done,
    /// Ended without its results.
    Failed(String),
}

#[derive(Debug)]
struct Shard {
    state: State,
    /// The newest second it sent.
    t_s: u32,
    by_request: Vec<RequestCounts>,
    requests: u64,
    ok: u64,
    failed: u64,
    /// Requests in its newest second.
    rate: u64,
}

struct Pending {
    /// When the first shard sent it.
    first: Instant,
    seconds: Vec<Option<(Stats, Peaks)>>,
}

/// The fleet's seconds as the shards send them.
pub struct Fleet {
    grace: Duration,
    shards: Vec<Shard>,
    pending: BTreeMap<u32, Pending>,
    merged_up_to: u32,
    total: Stats,
    recent: VecDeque<Stats>,
    by_request: Vec<RequestCounts>,
}

impl Fleet {
    /// A fleet of `shards` whose seconds wait `grace` for the late ones.
    pub fn new(shards: usize, grace: Duration) -> Fleet {
        Fleet {
            grace,
            shards: (0..shards)
                .map(|_| Shard {
                    state: State::Waiting,
                    t_s: 0,
                    by_request: Vec::new(),
                    requests: 0,
                    ok: 0,
                    failed: 0,
                    rate: 0,
                })
                .collect(),
            pending: BTreeMap::new(),
            merged_up_to: 0,
            total: Stats::new(),
            recent: VecDeque::new(),
            by_request: Vec::new(),
        }
    }

    pub fn grace(&self) -> Duration {
        self.grace
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// A report from shard `shard` (0-based).
    pub fn report(&mut self, shard: usize, report: Report, now: Instant) -> Result<(), String> {
        let count = self.shards.len();
        let Some(s) = self.shards.get_mut(shard) else {
            return Err(format!("shard {} of a fleet of {count}", shard + 1));
        };
        match report {
            Report::Hello { .. } => {}
            Report::Second(r) => {
                let stats = r.stats.to_stats().map_err(|e| e.to_string())?;
                s.state = State::Running;
                s.t_s = s.t_s.max(r.t_s);
                s.rate = stats.requests;
                s.requests += stats.requests;
                s.ok += stats.ok;
                s.failed += stats.failed;
                s.by_request = r
                    .by_request
                    .iter()
                    .map(|&[ok, failed]| RequestCounts { ok, failed })
                    .collect();
                let peaks = Peaks {
                    active_users: r.active_users,
                    in_flight: r.in_flight,
                    sockets_open: r.sockets_open,
                };
                if r.t_s > self.merged_up_to {
                    let pending = self.pending.entry(r.t_s).or_insert_with(|| Pending {
                        first: now,
                        seconds: (0..count).map(|_| None).collect(),
                    });
                    pending.seconds[shard] = Some((stats, peaks));
                } else {
                    // Too late for its second: the totals still count it.
                    self.total += &stats;
                }
            }
            Report::End {
                requests,
                ok,
                failed,
            } => {
                s.state = State::Done;
                (s.requests, s.ok, s.failed) = (requests, ok, failed);
            }
        }
        Ok(())
    }

    /// Shard `shard`'s process or pod ended; `why` when it left no results.
    pub fn ended(&mut self, shard: usize, why: Option<String>) {
        if let Some(s) = self.shards.get_mut(shard) {
            match why {
                Some(why) => s.state = State::Failed(why),
                None => s.state = State::Done,
            }
        }
    }

    /// The seconds complete by `now` (every running shard's in, or the
    /// grace over), merged in order: `each` sees the fleet's progress as of
    /// each one. Returns how many.
    pub fn ready(&mut self, now: Instant, mut each: impl FnMut(&Progress)) -> usize {
        let mut merged = 0;
        while let Some((&t, pending)) = self.pending.iter().next() {
            let all_in =
                self.shards.iter().zip(&pending.seconds).all(|(s, got)| {
                    got.is_some() || matches!(s.state, State::Done | State::Failed(_))
                });
            if !all_in && now.duration_since(pending.first) < self.grace {
                break;
            }
            let pending = self.pending.remove(&t).expect("the first pending second");
            let mut second = Stats::new();
            let mut peaks = Peaks::default();
            for (stats, p) in pending.seconds.iter().flatten() {
                second += stats;
                peaks.active_users += p.active_users;
                peaks.in_flight += p.in_flight;
                if let Some(n) = p.sockets_open {
                    peaks.sockets_open = Some(peaks.sockets_open.unwrap_or(0) + n);
                }
            }
            self.total += &second;
            self.merged_up_to = t;
            self.sum_requests();
            let point = TimelinePoint::of_second(t, &second, peaks);
            if self.recent.len() == RECENT_SECONDS {
                self.recent.pop_front();
            }
            self.recent.push_back(second);
            each(&Progress {
                elapsed: Duration::from_secs(t as u64),
                second: &point,
                total: &self.total,
                recent: &self.recent,
                by_request: &self.by_request,
                // Exemplars stay in each shard's results (merged exactly).
                exemplars: &[],
            });
            merged += 1;
        }
        merged
    }

    /// OK and failed per request: each shard's newest counts, summed.
    fn sum_requests(&mut self) {
        let n = self.shards.iter().map(|s| s.by_request.len()).max();
        self.by_request = vec![RequestCounts::default(); n.unwrap_or(0)];
        for s in &self.shards {
            for (into, c) in self.by_request.iter_mut().zip(&s.by_request) {
                into.ok += c.ok;
                into.failed += c.failed;
            }
        }
    }

    /// The newest merged second.
    pub fn merged_up_to(&self) -> u32 {
        self.merged_up_to
    }

    /// Shards (1-based) that are late: nothing yet though the fleet has
    /// merged seconds, or more than a second behind it.
    pub fn late(&self) -> Vec<usize> {
        self.shards
            .iter()
            .enumerate()
            .filter(|(_, s)| self.is_late(s))
            .map(|(i, _)| i + 1)
            .collect()
    }

    fn is_late(&self, s: &Shard) -> bool {
        match s.state {
            State::Waiting => self.merged_up_to > 0,
            State::Running => s.t_s + 1 < self.merged_up_to,
            _ => false,
        }
    }

    /// A row per shard, for the dashboard: its state, newest second and
    /// totals.
    pub fn rows(&self) -> Value {
        let rows: Vec<Value> = self
            .shards
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let state = match &s.state {
                    _ if self.is_late(s) => "late".to_string(),
                    State::Waiting => "starting".to_string(),
                    State::Running => "running".to_string(),
                    State::Done => "done".to_string(),
                    State::Failed(why) => format!("failed: {why}"),
                };
                json!({
                    "shard": i + 1,
                    "state": state,
                    "t_s": s.t_s,
                    "requests": s.requests,
                    "ok": s.ok,
                    "failed": s.failed,
                    "rate": s.rate,
                })
            })
            .collect();
        json!({"kind": "shards", "rows": rows})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_metrics::histogram;

    /// A shard's second `t`: `us` its response times, `total` its OK so far.
    fn second(t: u32, us: &[u64], total: u64) -> Report {
        let mut s = Stats::new();
        for &u in us {
            histogram::record_us(&mut s.latency, u);
            s.requests += 1;
            s.ok += 1;
            s.status[200] += 1;
        }
        Report::Second(Box::new(SecondReport {
            t_s: t,
            stats: StatsWire::from(&s),
            active_users: 1,
            in_flight: 1,
            sockets_open: None,
            by_request: vec![[total, 0]],
        }))
    }

    /// The fleet's merged seconds: (t, requests, p99 ms, max ms, total).
    fn merged(fleet: &mut Fleet, now: Instant) -> Vec<(u32, u64, f64, f64, u64)> {
        let mut out = Vec::new();
        fleet.ready(now, |p| {
            out.push((
                p.second.t_s,
                p.second.requests,
                p.second.p99_ms.unwrap_or(0.0),
                p.second.max_ms.unwrap_or(0.0),
                p.total.requests,
            ))
        });
        out
    }

    #[test]
    fn reports_round_trip_as_lines_and_other_lines_are_not_reports() {
        let r = second(3, &[1000, 2000], 2);
        let line = r.to_line();
        assert!(!line.contains('\n'));
        assert_eq!(Report::from_line(&line), Some(Ok(r)));
        assert_eq!(Report::from_line("{"), None);
        assert_eq!(Report::from_line("headroom: warning"), None);
        assert!(matches!(
            Report::from_line("{\"headroom_fleet\":\"second\"}"),
            Some(Err(_))
        ));
    }

    #[test]
    fn a_second_is_merged_when_every_shard_sent_it_with_exact_percentiles() {
        let start = Instant::now();
        let mut fleet = Fleet::new(2, GRACE);
        fleet.report(0, second(1, &[1000; 99], 99), start).unwrap();
        assert!(
            merged(&mut fleet, start).is_empty(),
            "shard 2 is not in yet"
        );
        fleet.report(1, second(1, &[100_000], 1), start).unwrap();
        let mut requests = Vec::new();
        fleet.ready(start, |p| {
            requests = p.by_request.to_vec();
            // 99 of 100 at 1 ms, one at 100 ms: p99 is 1 ms, the max 100
            // ms — what no average of the shards' own p99s would give.
            assert_eq!(p.second.requests, 100);
            assert!((p.second.p99_ms.unwrap() - 1.0).abs() < 0.01);
            assert!((p.second.max_ms.unwrap() - 100.0).abs() < 0.1);
            assert_eq!(p.total.status[200], 100);
            assert_eq!(p.second.active_users, 2);
            assert_eq!(p.recent.len(), 1);
        });
        assert_eq!(requests, vec![RequestCounts { ok: 100, failed: 0 }]);
        let rows = fleet.rows();
        assert_eq!(rows["rows"][0]["state"], "running");
        assert_eq!(rows["rows"][1]["requests"], 1);
    }

    #[test]
    fn a_shard_behind_by_more_than_the_grace_is_late_and_a_finished_one_is_not_waited_for() {
        let start = Instant::now();
        let mut fleet = Fleet::new(3, GRACE);
        fleet.report(0, second(1, &[1000], 1), start).unwrap();
        fleet.report(1, second(1, &[1000], 1), start).unwrap();
        assert!(merged(&mut fleet, start + GRACE / 2).is_empty());
        assert_eq!(merged(&mut fleet, start + GRACE)[0].1, 2);
        for t in 2..=3 {
            fleet
                .report(0, second(t, &[1000], t as u64), start)
                .unwrap();
            fleet
                .report(1, second(t, &[1000], t as u64), start)
                .unwrap();
        }
        assert_eq!(merged(&mut fleet, start + GRACE * 3).len(), 2);
        assert_eq!(fleet.late(), vec![3]);
        assert_eq!(fleet.rows()["rows"][2]["state"], "late");
        // The late shard's first second comes after it was merged: its
        // count goes into the totals, the merged second is not sent again.
        fleet.report(2, second(1, &[1000], 1), start).unwrap();
        assert!(merged(&mut fleet, start + GRACE * 3).is_empty());
        fleet.ended(2, Some("exit status 1".into()));
        fleet
            .report(
                0,
                Report::End {
                    requests: 3,
                    ok: 3,
                    failed: 0,
                },
                start,
            )
            .unwrap();
        fleet
            .report(1, second(4, &[1000], 4), start + GRACE * 3)
            .unwrap();
        // Shard 1 done, shard 3 failed: second 4 needs only shard 2.
        let out = merged(&mut fleet, start + GRACE * 3);
        assert_eq!(out, vec![(4, 1, 1.0, 1.0, 3 + 4 + 1)]);
        assert_eq!(fleet.rows()["rows"][0]["state"], "done");
        assert_eq!(fleet.rows()["rows"][2]["state"], "failed: exit status 1");
        assert!(fleet.report(3, second(1, &[1], 1), start).is_err());
    }
}
