//! The per-worker recorder. One per worker thread, never shared across
//! threads, so recording is a few additions and three histogram increments.

use super::trace::Trace;
use super::{histogram, ConnectionEvent, ErrorClass, LimitReached, Stats, MAX_STATUS};
use std::time::{Duration, Instant};

/// What became of one request, as the client saw it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// Status of the final response, when one was read.
    pub status: Option<u16>,
    /// Why the request failed, if it did.
    pub error: Option<ErrorClass>,
    /// Response bytes read (head + body).
    pub bytes: u64,
    /// Which scenario check failed (with `error: Some(CheckFailed)`).
    pub failed_check: Option<u32>,
}

/// Plans with more requests than this get no per-request timeline (a
/// histogram per request per second would cost more than it shows).
pub const PER_REQUEST_TIMELINE_MAX: usize = 32;

/// OK and failed requests of one request name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    pub ok: u64,
    pub failed: u64,
}

/// One second of one worker's recordings. `index` 0 is [start, start+1s).
#[derive(Debug)]
pub struct Interval {
    pub index: u32,
    pub stats: Stats,
    /// OK and failed requests per request (index = the plan's request),
    /// for live per-request counters; grows on first use.
    pub by_request: Vec<RequestCounts>,
    /// Each request's latencies in this second, for per-request charts
    /// over time — when the plan has 2 to [`PER_REQUEST_TIMELINE_MAX`]
    /// requests (empty otherwise).
    pub by_request_latency: Vec<hdrhistogram::Histogram<u64>>,
    /// Most users active (closed) or requests in flight (open) at once.
    pub active_peak: u32,
    pub in_flight_peak: u32,
}

impl Interval {
    fn new(index: u32, active: u32, in_flight: u32) -> Self {
        Interval {
            index,
            stats: Stats::new(),
            by_request: Vec::new(),
            by_request_latency: Vec::new(),
            active_peak: active,
            in_flight_peak: in_flight,
        }
    }
}

pub struct Recorder {
    start: Instant,
    current: Interval,
    completed: Vec<Interval>,
    /// Each request's totals — only when the plan has more than one: with
    /// one they are the run's totals, which the aggregate copies (one
    /// record per request instead of two: four histogram increments fewer).
    per_request: Vec<Stats>,
    active: u32,
    in_flight: u32,
    last_sent: Option<Instant>,
    last_done: Option<Instant>,
    waited_for_connection: u64,
    /// Completions around planned events, when the plan has any.
    trace: Option<Trace>,
    /// Keep each request's latencies per second (see `Interval`).
    per_request_timeline: bool,
}

/// What a worker hands over when it finishes.
#[derive(Debug)]
pub struct WorkerReport {
    pub intervals: Vec<Interval>,
    pub per_request: Vec<Stats>,
    /// When this worker sent its last request and finished its last one.
    pub last_sent: Option<Instant>,
    pub last_done: Option<Instant>,
    /// Open model: arrivals that found every connection busy and the pool
    /// at its cap, so they waited in the generator.
    pub waited_for_connection: u64,
    pub trace: Option<Trace>,
}

impl Recorder {
    pub fn new(start: Instant, request_count: usize) -> Self {
        Recorder {
            start,
            current: Interval::new(0, 0, 0),
            completed: Vec::new(),
            per_request: if request_count > 1 {
                (0..request_count).map(|_| Stats::new()).collect()
            } else {
                Vec::new()
            },
            active: 0,
            in_flight: 0,
            last_sent: None,
            last_done: None,
            waited_for_connection: 0,
            trace: None,
            per_request_timeline: (2..=PER_REQUEST_TIMELINE_MAX).contains(&request_count),
        }
    }

    /// Also traces every completion inside `windows` (from the start).
    pub fn tracing(mut self, windows: &[(Duration, Duration)]) -> Self {
        if !windows.is_empty() {
            self.trace = Some(Trace::new(windows));
        }
        self
    }

    fn interval_index(&self, at: Instant) -> u32 {
        at.saturating_duration_since(self.start).as_secs() as u32
    }

    /// Moves to the interval `at` falls in (times only move forward here:
    /// one thread, one monotonic clock).
    fn advance_to(&mut self, at: Instant) {
        let index = self.interval_index(at);
        self.move_to(index);
    }

    /// Closes the current interval and opens `index`. Seconds skipped on
    /// the way (a thread starved past a tick) still get an interval with
    /// the users and requests that were active through them: a gauge does
    /// not drop to 0 because nothing happened.
    fn move_to(&mut self, index: u32) {
        if index <= self.current.index {
            return;
        }
        for skipped in self.current.index + 1..index {
            let gauge = Interval::new(skipped, self.active, self.in_flight);
            self.completed
                .push(std::mem::replace(&mut self.current, gauge));
        }
        let next = Interval::new(index, self.active, self.in_flight);
        self.completed
            .push(std::mem::replace(&mut self.current, next));
    }

    pub fn user_started(&mut self) {
        self.active += 1;
        self.current.active_peak = self.current.active_peak.max(self.active);
    }

    pub fn user_finished(&mut self) {
        self.active -= 1;
    }

    /// An open-model arrival found every connection busy and the pool at
    /// its cap: it waits in the generator, not in the server.
    pub fn arrival_waited_for_connection(&mut self) {
        self.waited_for_connection += 1;
    }

    /// Something happened to the connection of a request (of `request`),
    /// counted at once so that a request cut off later keeps it.
    pub fn connection_event(&mut self, request: usize, event: ConnectionEvent) {
        self.advance_to(Instant::now());
        self.current.stats.connection_events[event as usize] += 1;
        if let Some(stats) = self.per_request.get_mut(request) {
            stats.connection_events[event as usize] += 1;
        }
    }

    /// A per-user memory bound was reached `times` times by request `request`.
    pub fn limit_reached(&mut self, request: usize, limit: LimitReached, times: u64) {
        self.advance_to(Instant::now());
        self.current.stats.limits_reached[limit as usize] += times;
        if let Some(stats) = self.per_request.get_mut(request) {
            stats.limits_reached[limit as usize] += times;
        }
    }

    /// A request is about to be sent (or waits for a connection).
    pub fn request_started(&mut self) {
        self.in_flight += 1;
        self.current.in_flight_peak = self.current.in_flight_peak.max(self.in_flight);
    }

    /// Files a finished request. `sent` is `None` when it was never sent.
    pub fn record(
        &mut self,
        request: usize,
        intended: Instant,
        sent: Option<Instant>,
        done: Instant,
        outcome: &Outcome,
    ) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.advance_to(done);
        self.last_done = Some(done);
        if sent.is_some() {
            self.last_sent = self.last_sent.max(sent);
        }
        let latency = micros(done.saturating_duration_since(intended));
        let service = sent.map(|s| micros(done.saturating_duration_since(s)));
        let lag = sent.map(|s| micros(s.saturating_duration_since(intended)));
        if let Some(trace) = &mut self.trace {
            trace.record(self.start, done, latency, outcome.error);
        }
        record_into(&mut self.current.stats, latency, service, lag, outcome);
        let by_request = &mut self.current.by_request;
        if by_request.len() <= request {
            by_request.resize(request + 1, RequestCounts::default());
        }
        match outcome.error {
            None => by_request[request].ok += 1,
            Some(_) => by_request[request].failed += 1,
        }
        if self.per_request_timeline {
            let by = &mut self.current.by_request_latency;
            while by.len() <= request {
                by.push(histogram::new());
            }
            histogram::record_us(&mut by[request], latency);
        }
        if let Some(stats) = self.per_request.get_mut(request) {
            record_into(stats, latency, service, lag, outcome);
        }
    }

    /// Files a request that was due but never sent (it was never counted
    /// in flight).
    pub fn record_not_sent(&mut self, request: usize, intended: Instant, done: Instant) {
        self.in_flight += 1;
        let outcome = Outcome {
            error: Some(ErrorClass::NotSent),
            ..Outcome::default()
        };
        self.record(request, intended, None, done, &outcome);
    }

    /// Intervals that ended before `upto` (an interval index), oldest first.
    pub fn take_completed(&mut self, upto: u32) -> Vec<Interval> {
        self.move_to(upto);
        std::mem::take(&mut self.completed)
    }

    /// Everything left: the remaining intervals and the per-request totals.
    pub fn finish(self) -> WorkerReport {
        let mut intervals = self.completed;
        intervals.push(self.current);
        WorkerReport {
            intervals,
            per_request: self.per_request,
            last_sent: self.last_sent,
            last_done: self.last_done,
            waited_for_connection: self.waited_for_connection,
            trace: self.trace,
        }
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

fn record_into(
    stats: &mut Stats,
    latency: u64,
    service: Option<u64>,
    lag: Option<u64>,
    outcome: &Outcome,
) {
    stats.requests += 1;
    stats.bytes += outcome.bytes;
    if let Some(code) = outcome.status {
        stats.status[(code as usize).min(MAX_STATUS)] += 1;
    }
    histogram::record_us(&mut stats.latency, latency);
    if let Some(service) = service {
        histogram::record_us(&mut stats.service_time, service);
    }
    if let Some(lag) = lag {
        histogram::record_us(&mut stats.send_lag, lag);
    }
    match outcome.error {
        None => {
            stats.ok += 1;
            histogram::record_us(&mut stats.latency_ok, latency);
        }
        Some(class) => {
            stats.failed += 1;
            stats.errors[class.index()] += 1;
            if let Some(check) = outcome.failed_check {
                let i = check as usize;
                if stats.checks.len() <= i {
                    stats.checks.resize(i + 1, 0);
                }
                stats.checks[i] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker starved past its tick: the seconds it skipped keep the
    /// users that were running through them.
    #[test]
    fn skipped_seconds_keep_their_gauges() {
        let start = Instant::now();
        let mut r = Recorder::new(start, 1);
        for _ in 0..3 {
            r.user_started();
        }
        let mut got = r.take_completed(1);
        r.connection_event(0, ConnectionEvent::Opened);
        // An event in second 4 before the ticks for seconds 2, 3 and 4 ran.
        r.advance_to(start + Duration::from_millis(4200));
        got.extend(r.take_completed(2));
        got.extend(r.take_completed(5));
        let seconds: Vec<(u32, u32)> = got.iter().map(|i| (i.index, i.active_peak)).collect();
        assert_eq!(seconds, [(0, 3), (1, 3), (2, 3), (3, 3), (4, 3)]);
    }

    #[test]
    fn outcomes_land_in_the_second_they_complete() {
        let start = Instant::now();
        // Two requests in the plan: each keeps its own totals.
        let mut r = Recorder::new(start, 2);
        let ok = Outcome {
            status: Some(200),
            ..Default::default()
        };
        let at = |ms| start + Duration::from_millis(ms);
        r.request_started();
        r.record(0, at(0), Some(at(0)), at(10), &ok);
        r.request_started();
        r.record(0, at(900), Some(at(950)), at(1500), &ok);
        let failed = Outcome {
            error: Some(ErrorClass::ConnectRefused),
            ..Default::default()
        };
        r.request_started();
        r.record(0, at(2100), Some(at(2100)), at(2101), &failed);
        let done = r.take_completed(2);
        assert_eq!(done.iter().map(|i| i.index).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(done[1].stats.requests, 1);
        // latency counts from the intended time: 1500 - 900 = 600 ms
        assert_eq!(done[1].stats.latency.max() / 1000, 600);
        assert_eq!(done[1].stats.service_time.max() / 1000, 550);
        assert_eq!(done[1].stats.send_lag.max() / 1000, 50);
        let report = r.finish();
        assert_eq!(report.intervals.len(), 1);
        assert_eq!(report.intervals[0].stats.failed, 1);
        assert_eq!(report.per_request[0].requests, 3);
        assert_eq!(report.per_request[1].requests, 0);
        assert_eq!(report.per_request[0].ok, 2);
        assert_eq!(
            report.per_request[0].error_count(ErrorClass::ConnectRefused),
            1
        );
        assert_eq!(report.last_done, Some(at(2101)));
        assert_eq!(report.last_sent, Some(at(2100)));
    }
}
