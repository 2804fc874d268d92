//! Merging the workers' recordings. Workers send one-second [`Interval`]s
//! as they complete; the aggregate adds them into the run total at once and
//! turns each second into a [`TimelinePoint`] once every worker has passed it.

use super::exemplars::{Exemplar, SecondExemplars, Slowest, SLOWEST};
use super::spill::Spilled;
use super::{histogram, Interval, RequestCounts, Stats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One second of the run, all workers together.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct TimelinePoint {
    /// Seconds since the start at the end of this interval (1 = first second).
    pub t_s: u32,
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    pub bytes: u64,
    /// Latency figures of the requests that completed in this second,
    /// from the intended send time; `None` (null) in a second in which none
    /// completed — a stall is a gap, never a fast 0 ms.
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    /// Open model: 99th percentile of how late sends were in this second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag_p99_ms: Option<f64>,
    /// Open model: arrivals the schedule asked for in this second (what
    /// was offered; `requests` is what completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<u64>,
    /// Peak number of users running (closed) during the second.
    pub active_users: u32,
    /// Peak number of requests in flight during the second.
    pub in_flight: u32,
    /// WebSockets and event streams: most open at once during the
    /// second, and the messages sent and received in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets_open: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_sent: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_received: Option<u64>,
    /// Failed requests by class during this second.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// Each request's figures in this second, in the order of the
    /// results' `config.requests` (plans with 2 to 32 requests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_request: Vec<RequestPoint>,
}

/// One request's second.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RequestPoint {
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

impl TimelinePoint {
    /// Second `t_s` (1 = the first) from its merged stats and the peaks of
    /// users, requests in flight and sockets open during it.
    pub fn of_second(t_s: u32, s: &Stats, peaks: Peaks) -> Self {
        let seen = !s.latency.is_empty();
        let q = |q: f64| seen.then(|| histogram::ms(s.latency.value_at_quantile(q)));
        let sockets_seen = peaks.sockets_open.is_some();
        TimelinePoint {
            t_s,
            requests: s.requests,
            ok: s.ok,
            failed: s.failed,
            bytes: s.bytes,
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            max_ms: seen.then(|| histogram::ms(s.latency.max())),
            mean_ms: seen.then(|| s.latency.mean() / 1000.0),
            send_lag_p99_ms: (!s.send_lag.is_empty())
                .then(|| histogram::ms(s.send_lag.value_at_quantile(0.99))),
            offered: None,
            active_users: peaks.active_users,
            in_flight: peaks.in_flight,
            sockets_open: peaks.sockets_open,
            messages_sent: sockets_seen.then_some(s.sockets.messages_sent),
            messages_received: sockets_seen.then_some(s.sockets.messages_received),
            errors: s
                .error_counts()
                .map(|(c, n)| (c.key().to_string(), n))
                .collect(),
            per_request: Vec::new(),
        }
    }

    fn from_merged(index: u32, m: &Merged) -> Self {
        let peaks = Peaks {
            active_users: m.active_peak,
            in_flight: m.in_flight_peak,
            sockets_open: m.sockets_seen.then_some(m.sockets_peak),
        };
        TimelinePoint {
            per_request: m
                .by_request_latency
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let c = m.by_request.get(i).copied().unwrap_or_default();
                    let q = |q: f64| (!h.is_empty()).then(|| histogram::ms(h.value_at_quantile(q)));
                    RequestPoint {
                        requests: c.ok + c.failed,
                        ok: c.ok,
                        failed: c.failed,
                        p50_ms: q(0.5),
                        p95_ms: q(0.95),
                        p99_ms: q(0.99),
                    }
                })
                .collect(),
            ..TimelinePoint::of_second(index + 1, &m.stats, peaks)
        }
    }
}

/// The most users running, requests in flight and sockets open during a
/// second (`sockets_open` is `None` when no socket was open or used).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Peaks {
    pub active_users: u32,
    pub in_flight: u32,
    pub sockets_open: Option<u32>,
}

#[derive(Default)]
struct Merged {
    stats: Stats,
    active_peak: u32,
    in_flight_peak: u32,
    sockets_peak: u32,
    /// A socket was open or used in this second (else its fields are left out).
    sockets_seen: bool,
    by_request: Vec<RequestCounts>,
    by_request_latency: Vec<hdrhistogram::Histogram<u64>>,
    exemplars: SecondExemplars,
}

pub struct Aggregate {
    total: Stats,
    per_request: Vec<Stats>,
    pending: BTreeMap<u32, Merged>,
    watermarks: Vec<u32>,
    /// Finished seconds; all but the newest go to a temp file as the run
    /// goes, so a day's run holds no more of them in memory than a minute's.
    timeline: Spilled<TimelinePoint>,
    /// Each second's latency histogram (V2 + DEFLATE, base64), for the
    /// HdrHistogram interval log and shards' merge — only when asked
    /// ([`Aggregate::keeping_second_histograms`]): ~1 KiB a second.
    latency_intervals: Spilled<String>,
    keep_latency_intervals: bool,
    /// The last finished seconds' stats (newest last), for rolling windows.
    recent: std::collections::VecDeque<Stats>,
    /// OK and failed so far per request, as intervals arrive.
    by_request: Vec<RequestCounts>,
    /// Each finished second's slowest traced requests (spilled as the
    /// timeline is), and the run's.
    exemplars: Spilled<Exemplar>,
    slowest: Slowest,
    /// Those of the seconds finished last, for live metrics.
    newest_exemplars: Vec<Exemplar>,
}

/// How many finished seconds [`Aggregate::recent`] keeps.
pub const RECENT_SECONDS: usize = 60;

impl Aggregate {
    pub fn new(workers: usize, request_count: usize) -> Self {
        Aggregate {
            total: Stats::new(),
            per_request: (0..request_count).map(|_| Stats::new()).collect(),
            pending: BTreeMap::new(),
            watermarks: vec![0; workers],
            timeline: Spilled::new(),
            latency_intervals: Spilled::new(),
            keep_latency_intervals: false,
            recent: std::collections::VecDeque::new(),
            by_request: vec![RequestCounts::default(); request_count],
            exemplars: Spilled::new(),
            slowest: Slowest::new(SLOWEST),
            newest_exemplars: Vec::new(),
        }
    }

    /// Keeps each second's latency histogram for [`Finished`].
    pub fn keeping_second_histograms(mut self, keep: bool) -> Self {
        self.keep_latency_intervals = keep;
        self
    }

    pub fn add_intervals(&mut self, intervals: Vec<Interval>) {
        for i in intervals {
            self.total += &i.stats;
            for (into, c) in self.by_request.iter_mut().zip(&i.by_request) {
                into.ok += c.ok;
                into.failed += c.failed;
            }
            let m = self.pending.entry(i.index).or_default();
            m.stats += &i.stats;
            if m.by_request.len() < i.by_request.len() {
                m.by_request
                    .resize(i.by_request.len(), RequestCounts::default());
            }
            for (into, c) in m.by_request.iter_mut().zip(&i.by_request) {
                into.ok += c.ok;
                into.failed += c.failed;
            }
            while m.by_request_latency.len() < i.by_request_latency.len() {
                m.by_request_latency.push(histogram::new());
            }
            for (into, h) in m.by_request_latency.iter_mut().zip(&i.by_request_latency) {
                histogram::add(into, h);
            }
            m.active_peak += i.active_peak;
            m.in_flight_peak += i.in_flight_peak;
            m.sockets_peak += i.sockets_peak;
            m.sockets_seen |= i.sockets_peak > 0 || !i.stats.sockets.is_empty();
            m.exemplars.merge(&i.exemplars);
        }
    }

    /// Worker `worker` has sent everything before interval `upto`. Returns
    /// how many seconds every worker has now passed (new timeline points).
    pub fn worker_reached(&mut self, worker: usize, upto: u32) -> usize {
        self.watermarks[worker] = self.watermarks[worker].max(upto);
        let all = self.watermarks.iter().copied().min().unwrap_or(0);
        let before = self.timeline.len();
        if all != u32::MAX {
            self.finalize_before(all);
        }
        self.timeline.len() - before
    }

    /// A finished worker no longer holds the timeline back.
    pub fn worker_done(&mut self, worker: usize) -> usize {
        self.worker_reached(worker, u32::MAX)
    }

    fn finalize_before(&mut self, upto: u32) {
        if (self.timeline.len() as u32) < upto {
            self.newest_exemplars.clear();
        }
        // Seconds no worker recorded anything in still get a point.
        while (self.timeline.len() as u32) < upto {
            let index = self.timeline.len() as u32;
            let mut m = self.pending.remove(&index).unwrap_or_default();
            self.timeline.push(TimelinePoint::from_merged(index, &m));
            for e in std::mem::take(&mut m.exemplars).into_list() {
                self.newest_exemplars.push(e);
                self.exemplars.push(e);
            }
            if self.keep_latency_intervals {
                self.latency_intervals
                    .push(histogram::to_base64(&m.stats.latency));
            }
            if self.recent.len() == RECENT_SECONDS {
                self.recent.pop_front();
            }
            self.recent.push_back(m.stats);
        }
    }

    /// OK and failed so far per request (index = the plan's request).
    pub fn by_request(&self) -> &[RequestCounts] {
        &self.by_request
    }

    /// The last finished seconds' stats, newest last.
    pub fn recent(&self) -> &std::collections::VecDeque<Stats> {
        &self.recent
    }

    /// The slowest traced requests of the seconds finished last.
    pub fn newest_exemplars(&self) -> &[Exemplar] {
        &self.newest_exemplars
    }

    /// A finished worker's slowest traced requests.
    pub fn add_slowest(&mut self, slowest: &Slowest) {
        self.slowest.merge(slowest);
    }

    pub fn add_per_request(&mut self, per_request: &[Stats]) {
        for (into, s) in self.per_request.iter_mut().zip(per_request) {
            *into += s;
        }
    }

    /// The newest finished second, and the running total.
    pub fn last_second_and_total(&self) -> (Option<&TimelinePoint>, &Stats) {
        (self.timeline.last(), &self.total)
    }

    /// The run total, per-request totals, the full timeline and each
    /// second's latency histogram.
    pub fn finish(mut self) -> Finished {
        let last = self.pending.keys().next_back().map(|&i| i + 1).unwrap_or(0);
        self.finalize_before(last.max(self.timeline.len() as u32));
        // A one-request plan's workers keep no per-request totals: they
        // are the run's.
        if let [only] = &mut self.per_request[..] {
            *only = self.total.clone();
        }
        Finished {
            total: self.total,
            per_request: self.per_request,
            timeline: self.timeline.into_vec(),
            latency_intervals: self.latency_intervals.into_vec(),
            exemplars: self.exemplars.into_vec(),
            slowest: self.slowest.into_sorted(),
        }
    }
}

pub struct Finished {
    pub total: Stats,
    pub per_request: Vec<Stats>,
    pub timeline: Vec<TimelinePoint>,
    pub latency_intervals: Vec<String>,
    /// Each second's slowest traced requests ([`crate::exemplars::PER_SECOND`]
    /// per request), by second; and the run's slowest, slowest first.
    pub exemplars: Vec<Exemplar>,
    pub slowest: Vec<Exemplar>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Outcome, Recorder};
    use std::time::{Duration, Instant};

    #[test]
    fn two_workers_merge_into_one_timeline_and_exact_totals() {
        let start = Instant::now();
        let ok = Outcome {
            status: Some(200),
            ..Default::default()
        };
        let mut agg = Aggregate::new(2, 1).keeping_second_histograms(true);
        for worker in 0..2 {
            let mut r = Recorder::new(start, 1);
            for ms in [100u64, 1100, 1200, 3500] {
                let t = start + Duration::from_millis(ms + worker as u64);
                r.request_started();
                r.record(0, t, Some(t), t + Duration::from_millis(5), &ok);
            }
            agg.add_intervals(r.take_completed(2));
            let shown = agg.worker_reached(worker, 2);
            assert_eq!(shown, if worker == 0 { 0 } else { 2 });
            let report = r.finish();
            agg.add_intervals(report.intervals);
            agg.add_per_request(&report.per_request);
        }
        let super::Finished {
            total,
            per_request,
            timeline,
            latency_intervals,
            ..
        } = agg.finish();
        assert_eq!(latency_intervals.len(), timeline.len());
        let second_two = histogram::from_base64(&latency_intervals[1]).unwrap();
        assert_eq!(second_two.len(), 4);
        assert_eq!(total.requests, 8);
        // One request in the plan: its totals are the run's.
        assert_eq!(per_request[0].requests, 8);
        assert_eq!(per_request[0].latency.len(), 8);
        let counts: Vec<u64> = timeline.iter().map(|p| p.requests).collect();
        assert_eq!(counts, vec![2, 4, 0, 2]);
        assert_eq!(
            timeline.iter().map(|p| p.requests).sum::<u64>(),
            total.requests
        );
        assert_eq!(timeline[3].t_s, 4);
    }

    #[test]
    fn a_long_timeline_comes_back_whole_from_its_temp_file() {
        let start = Instant::now();
        let ok = Outcome {
            status: Some(200),
            ..Default::default()
        };
        let mut agg = Aggregate::new(1, 1).keeping_second_histograms(true);
        let mut r = Recorder::new(start, 1);
        let seconds = 500u64;
        for s in 0..seconds {
            // s + 1 requests in second s.
            for k in 0..=s {
                let t = start + Duration::from_millis(s * 1000 + k % 900);
                r.request_started();
                r.record(0, t, Some(t), t + Duration::from_millis(1 + s % 7), &ok);
            }
            agg.add_intervals(r.take_completed(s as u32 + 1));
            assert_eq!(agg.worker_reached(0, s as u32 + 1), 1);
            let (last, total) = agg.last_second_and_total();
            assert_eq!(last.map(|p| p.requests), Some(s + 1));
            assert_eq!(total.requests, (s + 1) * (s + 2) / 2);
        }
        let finished = agg.finish();
        assert_eq!(finished.timeline.len(), seconds as usize);
        assert_eq!(finished.latency_intervals.len(), seconds as usize);
        for (s, p) in finished.timeline.iter().enumerate() {
            assert_eq!((p.t_s, p.requests), (s as u32 + 1, s as u64 + 1));
        }
        let h = histogram::from_base64(&finished.latency_intervals[321]).unwrap();
        assert_eq!(h.len(), 322);
    }

    #[test]
    fn traced_requests_become_each_second_s_and_the_run_s_slowest() {
        use crate::exemplars::TraceIds;
        let start = Instant::now();
        let mut agg = Aggregate::new(2, 2);
        for worker in 0..2u64 {
            let mut r = Recorder::new(start, 2);
            for n in 0..20u64 {
                // Requests 0 and 1 alternate; latency grows with n; the
                // second worker's are 1 ms slower.
                let sent = start + Duration::from_millis(100 * n);
                let done = sent + Duration::from_millis(n + worker + 1);
                let outcome = Outcome {
                    status: Some(200),
                    attempts: 1,
                    trace_ids: Some(TraceIds {
                        trace_id: u128::from(worker * 100 + n + 1),
                        span_id: 1,
                    }),
                    ..Default::default()
                };
                r.request_started();
                r.record((n % 2) as usize, sent, Some(sent), done, &outcome);
            }
            // One whose head never left: no exemplar, however slow.
            let never = Outcome {
                attempts: 0,
                trace_ids: Some(TraceIds {
                    trace_id: 999,
                    span_id: 1,
                }),
                ..Default::default()
            };
            r.request_started();
            r.record(0, start, None, start + Duration::from_millis(900), &never);
            let report = r.finish();
            agg.add_intervals(report.intervals);
            agg.add_slowest(&report.slowest);
            agg.worker_done(worker as usize);
        }
        let finished = agg.finish();
        assert!(finished.exemplars.iter().all(|e| e.trace.trace_id != 999));
        assert!(finished.slowest.iter().all(|e| e.trace.trace_id != 999));
        // 40 traced requests: all among the run's slowest, slowest first.
        assert_eq!(finished.slowest.len(), 40);
        assert_eq!(finished.slowest[0].latency_us, 21_000);
        // Seconds 0 and 1 hold 10 requests of each worker; per second and
        // request (5 of each worker) the 5 slowest are kept.
        for second in 0..2 {
            for request in 0..2 {
                let kept: Vec<u64> = (finished.exemplars.iter())
                    .filter(|e| e.second == second && e.request == request)
                    .map(|e| e.latency_us)
                    .collect();
                assert_eq!(kept.len(), 5, "second {second} request {request}");
                let mut sorted = kept.clone();
                sorted.sort_unstable_by(|a, b| b.cmp(a));
                assert_eq!(kept, sorted);
            }
        }
    }
}
