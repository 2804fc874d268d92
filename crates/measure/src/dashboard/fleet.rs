//! A fleet's dashboard (`run --processes P --dashboard`): each shard's
//! seconds, read from its own dashboard, merged into the fleet's — counts
//! summed, percentiles from the shards' histograms merged (exact, as the
//! final merge of results files is) — and a row per shard (late, running,
//! done). A second is merged once every running shard has sent it, or
//! [`GRACE`] after the first did: a shard behind by more is shown late.

use super::{add_monitor, distribution};
use hdrhistogram::Histogram;
use headroom_metrics::histogram;
use headroom_records::server::sample::Sample;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a second waits for the shards that have not sent it yet.
pub const GRACE: Duration = Duration::from_millis(1500);

#[derive(Clone, Debug, PartialEq)]
enum State {
    /// Started, no second yet.
    Waiting,
    Running,
    Done,
    /// Ended without its final figures.
    Failed(String),
}

#[derive(Debug)]
struct Shard {
    state: State,
    /// The newest second it sent.
    t_s: u64,
    /// Its totals and per-request counts as of that second.
    total: Value,
    per_request: Vec<Value>,
    rate: u64,
}

/// The fleet's seconds as the shards send them.
pub struct Fleet {
    shards: Vec<Shard>,
    /// Seconds not merged yet: when the first shard sent it, and each
    /// shard's event.
    pending: BTreeMap<u64, (Instant, Vec<Option<Value>>)>,
    /// Seconds already merged (a shard's late copy only moves its totals).
    merged_up_to: u64,
    total_latency: Histogram<u64>,
}

impl Fleet {
    pub fn new(shards: usize) -> Fleet {
        Fleet {
            shards: (0..shards)
                .map(|_| Shard {
                    state: State::Waiting,
                    t_s: 0,
                    total: json!({"requests": 0, "ok": 0, "failed": 0, "statuses": {}}),
                    per_request: Vec::new(),
                    rate: 0,
                })
                .collect(),
            pending: BTreeMap::new(),
            merged_up_to: 0,
            total_latency: histogram::new(),
        }
    }

    /// An event from shard `shard` (0-based)'s stream.
    pub fn event(&mut self, shard: usize, event: Value, now: Instant) {
        let Some(s) = self.shards.get_mut(shard) else {
            return;
        };
        match event["kind"].as_str() {
            Some("second") => {
                let t = event["t_s"].as_u64().unwrap_or(0);
                s.state = State::Running;
                s.t_s = s.t_s.max(t);
                s.total = event["total"].clone();
                s.per_request = event["per_request"].as_array().cloned().unwrap_or_default();
                s.rate = event["requests"].as_u64().unwrap_or(0);
                if t > self.merged_up_to {
                    let count = self.shards.len();
                    let (_, seconds) = self
                        .pending
                        .entry(t)
                        .or_insert_with(|| (now, vec![None; count]));
                    seconds[shard] = Some(event);
                }
            }
            Some("run_end") => {
                s.state = State::Done;
                s.total = event["total"].clone();
            }
            _ => {}
        }
    }

    /// Shard `shard`'s process ended; `why` when it left no results.
    pub fn ended(&mut self, shard: usize, why: Option<String>) {
        if let Some(s) = self.shards.get_mut(shard) {
            match why {
                Some(why) => s.state = State::Failed(why),
                None if s.state != State::Done => s.state = State::Done,
                None => {}
            }
        }
    }

    /// The seconds complete by `now` (every running shard's in, or the
    /// grace over), merged in order, each with the monitor's `sample`,
    /// then the shards' rows when anything was merged.
    pub fn ready(&mut self, now: Instant, sample: Option<&Sample>) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some((&t, (first, seconds))) = self.pending.iter().next() {
            let all_in =
                self.shards.iter().zip(seconds).all(|(s, got)| {
                    got.is_some() || matches!(s.state, State::Done | State::Failed(_))
                });
            if !all_in && now.duration_since(*first) < GRACE {
                break;
            }
            let (_, seconds) = self.pending.remove(&t).expect("the first pending second");
            let seconds: Vec<Value> = seconds.into_iter().flatten().collect();
            self.merged_up_to = t;
            out.push(self.merge(t, &seconds, sample));
        }
        if !out.is_empty() {
            out.push(self.rows());
        }
        out
    }

    /// One second of the fleet from its shards' (those that sent it).
    fn merge(&mut self, t: u64, seconds: &[Value], sample: Option<&Sample>) -> Value {
        let sum = |field: &str| -> u64 { seconds.iter().filter_map(|s| s[field].as_u64()).sum() };
        let offered: Option<f64> = seconds
            .iter()
            .map(|s| s["offered_rps"].as_f64())
            .sum::<Option<f64>>();
        let mut latency = histogram::new();
        for s in seconds {
            if let Some(h) = s["latency_hdr"]
                .as_str()
                .and_then(|b| histogram::from_base64(b).ok())
            {
                histogram::add(&mut latency, &h);
            }
        }
        histogram::add(&mut self.total_latency, &latency);
        let seen = !latency.is_empty();
        let q = |q: f64| seen.then(|| histogram::ms(latency.value_at_quantile(q)));
        let mut event = json!({
            "kind": "second",
            "t_s": t,
            "shards_in": seconds.len(),
            "offered_rps": offered,
            "requests": sum("requests"),
            "ok": sum("ok"),
            "failed": sum("failed"),
            "p50_ms": q(0.5), "p90_ms": q(0.9), "p95_ms": q(0.95), "p99_ms": q(0.99),
            "max_ms": seen.then(|| histogram::ms(latency.max())),
            "send_lag_p99_ms": seconds.iter().filter_map(|s| s["send_lag_p99_ms"].as_f64()).reduce(f64::max),
            "active_users": sum("active_users"),
            "in_flight": sum("in_flight"),
            "errors": sum_maps(seconds.iter().map(|s| &s["errors"])),
            "status_classes": sum_maps(seconds.iter().map(|s| &s["status_classes"])),
            "total": self.total(),
            "distribution": distribution(&self.total_latency),
            "per_request": self.per_request(),
        });
        add_monitor(&mut event, sample);
        event
    }

    /// The fleet's totals: each shard's as of its newest second.
    fn total(&self) -> Value {
        let totals: Vec<&Value> = self.shards.iter().map(|s| &s.total).collect();
        let sum = |f: &str| -> u64 { totals.iter().filter_map(|t| t[f].as_u64()).sum() };
        json!({
            "requests": sum("requests"),
            "ok": sum("ok"),
            "failed": sum("failed"),
            "statuses": sum_maps(totals.iter().map(|t| &t["statuses"])),
        })
    }

    /// OK and failed per request, summed (the shards' per-second
    /// percentiles cannot be merged: the final figures have them).
    fn per_request(&self) -> Vec<Value> {
        let Some(first) = self.shards.iter().find(|s| !s.per_request.is_empty()) else {
            return Vec::new();
        };
        (0..first.per_request.len())
            .map(|i| {
                let sum = |f: &str| -> u64 {
                    self.shards
                        .iter()
                        .filter_map(|s| s.per_request.get(i)?[f].as_u64())
                        .sum()
                };
                json!({"name": first.per_request[i]["name"], "ok": sum("ok"), "failed": sum("failed")})
            })
            .collect()
    }

    /// A row per shard: its state (late when it is behind the fleet), its
    /// newest second and its totals.
    pub fn rows(&self) -> Value {
        let rows: Vec<Value> = self
            .shards
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let behind = s.t_s + 1 < self.merged_up_to;
                let state = match &s.state {
                    State::Waiting if self.merged_up_to > 0 => "late".to_string(),
                    State::Waiting => "starting".to_string(),
                    State::Running if behind => "late".to_string(),
                    State::Running => "running".to_string(),
                    State::Done => "done".to_string(),
                    State::Failed(why) => format!("failed: {why}"),
                };
                json!({
                    "shard": i + 1,
                    "state": state,
                    "t_s": s.t_s,
                    "requests": s.total["requests"],
                    "ok": s.total["ok"],
                    "failed": s.total["failed"],
                    "rate": s.rate,
                })
            })
            .collect();
        json!({"kind": "shards", "rows": rows})
    }
}

/// `{name: count}` maps added up.
fn sum_maps<'a>(maps: impl Iterator<Item = &'a Value>) -> Value {
    let mut out: Map<String, Value> = Map::new();
    for m in maps.filter_map(Value::as_object) {
        for (k, v) in m {
            let n = out.get(k).and_then(Value::as_u64).unwrap_or(0) + v.as_u64().unwrap_or(0);
            out.insert(k.clone(), json!(n));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shard's second: `us` its response times.
    fn second(t: u64, us: &[u64], total: u64) -> Value {
        let mut h = histogram::new();
        for &u in us {
            histogram::record_us(&mut h, u);
        }
        json!({
            "kind": "second", "t_s": t, "requests": us.len(), "ok": us.len(), "failed": 0,
            "offered_rps": 50.0, "active_users": 0, "in_flight": 1,
            "errors": {}, "status_classes": {"2xx": us.len()},
            "total": {"requests": total, "ok": total, "failed": 0, "statuses": {"200": total}},
            "per_request": [{"name": "home", "ok": total, "failed": 0}],
            "latency_hdr": histogram::to_base64(&h),
        })
    }

    #[test]
    fn a_second_is_merged_when_every_shard_sent_it_with_exact_percentiles() {
        let start = Instant::now();
        let mut fleet = Fleet::new(2);
        fleet.event(0, second(1, &[1000; 99], 99), start);
        assert!(fleet.ready(start, None).is_empty(), "shard 2 is not in yet");
        fleet.event(1, second(1, &[100_000], 1), start);
        let out = fleet.ready(start, None);
        assert_eq!(out.len(), 2);
        let s = &out[0];
        assert_eq!(
            (s["requests"].as_u64(), s["shards_in"].as_u64()),
            (Some(100), Some(2))
        );
        assert_eq!(s["offered_rps"].as_f64(), Some(100.0));
        assert_eq!(s["status_classes"]["2xx"], 100);
        assert_eq!(s["total"]["statuses"]["200"], 100);
        assert_eq!(s["per_request"][0]["ok"], 100);
        // 99 of 100 at 1 ms, one at 100 ms: p99 is 1 ms, the max 100 ms —
        // what no average of the shards' own p99s (1 and 100) would give.
        assert!((s["p99_ms"].as_f64().unwrap() - 1.0).abs() < 0.01, "{s}");
        assert!((s["max_ms"].as_f64().unwrap() - 100.0).abs() < 0.1, "{s}");
        let rows = out[1]["rows"].as_array().unwrap();
        assert_eq!(rows[0]["state"], "running");
        assert_eq!(rows[1]["requests"], 1);
    }

    #[test]
    fn a_shard_behind_by_more_than_the_grace_is_late_and_a_finished_one_is_not_waited_for() {
        let start = Instant::now();
        let mut fleet = Fleet::new(3);
        fleet.event(0, second(1, &[1000], 1), start);
        fleet.event(1, second(1, &[1000], 1), start);
        assert!(fleet.ready(start + GRACE / 2, None).is_empty());
        let out = fleet.ready(start + GRACE, None);
        assert_eq!(out[0]["requests"], 2);
        fleet.event(0, second(2, &[1000], 2), start + GRACE);
        fleet.event(1, second(2, &[1000], 2), start + GRACE);
        fleet.event(0, second(3, &[1000], 3), start + GRACE);
        fleet.event(1, second(3, &[1000], 3), start + GRACE);
        let out = fleet.ready(start + GRACE * 3, None);
        let rows = out.last().unwrap()["rows"].as_array().unwrap();
        assert_eq!(rows[2]["state"], "late");
        // The late shard's first second comes after it was merged: its
        // totals count, the merged second is not sent again.
        fleet.event(2, second(1, &[1000], 1), start + GRACE * 3);
        assert!(fleet.ready(start + GRACE * 3, None).is_empty());
        fleet.ended(2, Some("exit status 1".into()));
        fleet.event(
            0,
            json!({"kind": "run_end", "total": {"requests": 3, "ok": 3, "failed": 0}}),
            start,
        );
        fleet.event(1, second(4, &[1000], 4), start + GRACE * 3);
        // Shard 1 done, shard 3 failed: second 4 needs only shard 2.
        let out = fleet.ready(start + GRACE * 3, None);
        assert_eq!(out[0]["t_s"], 4);
        assert_eq!(out[0]["total"]["requests"], 3 + 4 + 1);
        let rows = out[1]["rows"].as_array().unwrap();
        assert_eq!(rows[0]["state"], "done");
        assert_eq!(rows[2]["state"], "failed: exit status 1");
    }
}
