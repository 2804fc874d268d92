//! The per-worker recorder. One per worker thread, never shared across
//! threads, so recording is a few additions and three histogram increments.

use super::exemplars::{Exemplar, SecondExemplars, Slowest, TraceIds, SLOWEST};
use super::trace::Trace;
use super::{histogram, ConnectionEvent, ErrorClass, LimitReached, Stats, MAX_STATUS};
use hdrhistogram::Histogram;
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
    /// Times its head went out on the wire: 0 for a request that never
    /// left, 2 for one sent again (a stale connection, a refused stream).
    pub attempts: u32,
    /// The trace context it was sent with (a run with `--trace`).
    pub trace_ids: Option<TraceIds>,
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
    /// Most WebSockets and event streams open at once.
    pub sockets_peak: u32,
    /// The slowest traced requests of this second, per request.
    pub exemplars: SecondExemplars,
}

impl Interval {
    fn new(index: u32, gauges: Gauges) -> Self {
        Interval {
            index,
            stats: Stats::new(),
            by_request: Vec::new(),
            by_request_latency: Vec::new(),
            active_peak: gauges.active,
            in_flight_peak: gauges.in_flight,
            sockets_peak: gauges.sockets,
            exemplars: SecondExemplars::default(),
        }
    }
}

/// What is open now: an interval's peaks start from these.
#[derive(Clone, Copy, Debug, Default)]
struct Gauges {
    active: u32,
    in_flight: u32,
    sockets: u32,
}

pub struct Recorder {
    start: Instant,
    current: Interval,
    /// The current interval's histograms kept as exceptions until sealed.
    current_exceptions: Exceptions,
    completed: Vec<Interval>,
    /// Each request's totals — only when the plan has more than one: with
    /// one they are the run's totals, which the aggregate copies (one
    /// record per request instead of two: four histogram increments fewer).
    per_request: Vec<Stats>,
    per_request_exceptions: Vec<Exceptions>,
    active: u32,
    in_flight: u32,
    sockets_open: u32,
    last_sent: Option<Instant>,
    last_done: Option<Instant>,
    waited_for_connection: u64,
    /// Completions around planned events, when the plan has any.
    trace: Option<Trace>,
    /// Keep each request's latencies per second (see `Interval`).
    per_request_timeline: bool,
    /// The run's slowest traced requests, so far.
    slowest: Slowest,
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
    /// This worker's slowest traced requests.
    pub slowest: Slowest,
}

impl Recorder {
    pub fn new(start: Instant, request_count: usize) -> Self {
        Recorder {
            start,
            current: Interval::new(0, Gauges::default()),
            current_exceptions: Exceptions::default(),
            completed: Vec::new(),
            per_request: if request_count > 1 {
                (0..request_count).map(|_| Stats::new()).collect()
            } else {
                Vec::new()
            },
            per_request_exceptions: if request_count > 1 {
                (0..request_count).map(|_| Exceptions::default()).collect()
            } else {
                Vec::new()
            },
            active: 0,
            in_flight: 0,
            sockets_open: 0,
            last_sent: None,
            last_done: None,
            waited_for_connection: 0,
            trace: None,
            per_request_timeline: (2..=PER_REQUEST_TIMELINE_MAX).contains(&request_count),
            slowest: Slowest::new(SLOWEST),
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
            let gauge = Interval::new(skipped, self.gauges());
            self.close_current(gauge);
        }
        let next = Interval::new(index, self.gauges());
        self.close_current(next);
    }

    /// Seals the current interval into the completed ones; `next` follows.
    fn close_current(&mut self, next: Interval) {
        let mut done = std::mem::replace(&mut self.current, next);
        std::mem::take(&mut self.current_exceptions).seal(&mut done.stats);
        self.completed.push(done);
    }

    fn gauges(&self) -> Gauges {
        Gauges {
            active: self.active,
            in_flight: self.in_flight,
            sockets: self.sockets_open,
        }
    }

    /// The current second's socket counts, to add what just happened to.
    pub fn scripts(&mut self) -> &mut crate::ScriptStats {
        &mut self.current.stats.scripts
    }

    pub fn sockets(&mut self) -> &mut crate::SocketStats {
        self.advance_to(Instant::now());
        &mut self.current.stats.sockets
    }

    /// A WebSocket or event stream opened (`true`) or closed (`false`).
    pub fn socket_open(&mut self, open: bool) {
        self.advance_to(Instant::now());
        if open {
            self.sockets_open += 1;
            self.current.sockets_peak = self.current.sockets_peak.max(self.sockets_open);
        } else {
            self.sockets_open = self.sockets_open.saturating_sub(1);
        }
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

    /// What QUIC counted on HTTP/3 connections that closed (whole run, not
    /// per request).
    pub fn quic(&mut self, quic: &crate::QuicStats) {
        self.advance_to(Instant::now());
        self.current.stats.quic += quic;
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
        // Each instant as nanoseconds from the start, then integers: one
        // clock subtraction per instant, not one per figure.
        let since_start = |at: Instant| at.saturating_duration_since(self.start).as_nanos() as u64;
        let (intended_ns, done_ns) = (since_start(intended), since_start(done));
        let sent_ns = sent.map(since_start);
        self.move_to((done_ns / NANOS_PER_SECOND) as u32);
        self.last_done = Some(done);
        if sent.is_some() {
            self.last_sent = self.last_sent.max(sent);
        }
        let micros_between = |from: u64, to: u64| to.saturating_sub(from) / 1000;
        let latency = micros_between(intended_ns, done_ns);
        let service = sent_ns.map(|s| micros_between(s, done_ns));
        let lag = sent_ns.map(|s| micros_between(intended_ns, s));
        if let Some(trace) = &mut self.trace {
            trace.record(self.start, done, latency, outcome.error);
        }
        // A request whose head never left carries a trace nobody saw.
        if let Some(ids) = outcome.trace_ids.filter(|_| outcome.attempts > 0) {
            let exemplar = Exemplar {
                request: request as u32,
                trace: ids,
                latency_us: latency,
                second: self.current.index,
                end_us: done_ns / 1000,
                status: outcome.status,
                error: outcome.error,
            };
            self.current.exemplars.offer(exemplar);
            self.slowest.offer(exemplar);
        }
        let times = Times {
            latency,
            service,
            lag,
        };
        record_into(
            &mut self.current.stats,
            &mut self.current_exceptions,
            times,
            outcome,
        );
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
            record_into(
                stats,
                &mut self.per_request_exceptions[request],
                times,
                outcome,
            );
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
    pub fn finish(mut self) -> WorkerReport {
        if self.sockets_open > 0 {
            // Sockets still open when the run ended: their close is the stop's.
            *self
                .current
                .stats
                .sockets
                .closes
                .entry("open_at_end".into())
                .or_default() += u64::from(self.sockets_open);
        }
        self.current_exceptions.seal(&mut self.current.stats);
        for (stats, exceptions) in self.per_request.iter_mut().zip(self.per_request_exceptions) {
            exceptions.seal(stats);
        }
        let mut intervals = self.completed;
        intervals.push(self.current);
        WorkerReport {
            intervals,
            per_request: self.per_request,
            last_sent: self.last_sent,
            last_done: self.last_done,
            waited_for_connection: self.waited_for_connection,
            trace: self.trace,
            slowest: self.slowest,
        }
    }
}

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// One request's times in microseconds; `service` and `lag` are `None`
/// when it was never sent.
#[derive(Clone, Copy)]
struct Times {
    latency: u64,
    service: Option<u64>,
    lag: Option<u64>,
}

/// Most requests repeat a value another histogram already holds: an OK
/// request's latency is in `latency` (so `latency_ok` is `latency` less the
/// failed ones), a closed-model request's service time is its latency,
/// and its send lag is 0. Only the exceptions are recorded per request;
/// [`Exceptions::seal`] derives the three histograms from them — the same
/// counts in every bucket — once per second instead of three histogram
/// increments per request.
#[derive(Default)]
struct Exceptions {
    /// Latencies of failed requests.
    failed: Option<Histogram<u64>>,
    /// Latencies of requests whose service time differed (or which were
    /// never sent), and those service times.
    latency_not_service: Option<Histogram<u64>>,
    service_not_latency: Option<Histogram<u64>>,
    /// Requests sent at their intended time (to the microsecond).
    lags_of_zero: u64,
}

impl Exceptions {
    /// Fills `latency_ok`, `service_time` and `send_lag` of `stats`, whose
    /// `latency` holds every request recorded with these exceptions.
    fn seal(self, stats: &mut Stats) {
        stats.latency_ok = stats.latency.clone();
        if let Some(failed) = &self.failed {
            // Every failed latency was also recorded in `latency`.
            stats
                .latency_ok
                .subtract(failed)
                .expect("failed latencies are a subset of all latencies");
        }
        stats.service_time = stats.latency.clone();
        if let Some(unlike) = &self.latency_not_service {
            stats
                .service_time
                .subtract(unlike)
                .expect("these latencies are a subset of all latencies");
        }
        if let Some(service) = &self.service_not_latency {
            histogram::add(&mut stats.service_time, service);
        }
        if self.lags_of_zero > 0 {
            stats
                .send_lag
                .record_n(0, self.lags_of_zero)
                .expect("0 is in every histogram's range");
        }
    }
}

fn record_exception(h: &mut Option<Histogram<u64>>, us: u64) {
    histogram::record_us(h.get_or_insert_with(histogram::new), us);
}

fn record_into(stats: &mut Stats, exceptions: &mut Exceptions, times: Times, outcome: &Outcome) {
    let Times {
        latency,
        service,
        lag,
    } = times;
    stats.requests += 1;
    stats.attempts += u64::from(outcome.attempts);
    stats.bytes += outcome.bytes;
    if let Some(code) = outcome.status {
        stats.status[(code as usize).min(MAX_STATUS)] += 1;
    }
    histogram::record_us(&mut stats.latency, latency);
    if service != Some(latency) {
        record_exception(&mut exceptions.latency_not_service, latency);
        if let Some(service) = service {
            record_exception(&mut exceptions.service_not_latency, service);
        }
    }
    match lag {
        Some(0) => exceptions.lags_of_zero += 1,
        Some(lag) => histogram::record_us(&mut stats.send_lag, lag),
        None => {}
    }
    match outcome.error {
        None => stats.ok += 1,
        Some(class) => {
            record_exception(&mut exceptions.failed, latency);
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

    fn micros(d: Duration) -> u64 {
        d.as_micros() as u64
    }

    /// Every bucket's count, for comparing histograms built two ways.
    fn buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
        h.iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }

    proptest::proptest! {
        /// The histograms sealed from exceptions hold, bucket for bucket,
        /// what recording every request into each of them would: any mix
        /// of OK, failed and never-sent requests, sent on time or late.
        #[test]
        fn sealed_histograms_equal_recording_each_request(
            requests in proptest::collection::vec(
                (0u64..5_000_000, 0u64..3, 0u64..200_000, 0u8..6),
                1..300,
            )
        ) {
            let start = Instant::now();
            let mut r = Recorder::new(start, 2);
            let mut want = Stats::new();
            for (i, &(at, lag, service, kind)) in requests.iter().enumerate() {
                let intended = start + Duration::from_micros(at);
                // lag: on time (0), within the microsecond, or late.
                let lag = [0, 400, 1_700][lag as usize];
                let sent = intended + Duration::from_nanos(lag);
                let done = sent + Duration::from_micros(service);
                let outcome = Outcome {
                    status: Some(200),
                    error: (kind == 0).then_some(ErrorClass::Http5xx),
                    ..Default::default()
                };
                let latency = micros(done - intended);
                histogram::record_us(&mut want.latency, latency);
                if kind == 1 {
                    r.record_not_sent(i % 2, intended, done);
                    continue;
                }
                if kind != 0 {
                    histogram::record_us(&mut want.latency_ok, latency);
                }
                histogram::record_us(&mut want.service_time, micros(done - sent));
                histogram::record_us(&mut want.send_lag, micros(sent - intended));
                r.request_started();
                r.record(i % 2, intended, Some(sent), done, &outcome);
            }
            let report = r.finish();
            let mut got = Stats::new();
            for stats in &report.per_request {
                got += stats;
            }
            for (got, want) in [
                (&got.latency, &want.latency),
                (&got.latency_ok, &want.latency_ok),
                (&got.service_time, &want.service_time),
                (&got.send_lag, &want.send_lag),
            ] {
                proptest::prop_assert_eq!(buckets(got), buckets(want));
                proptest::prop_assert_eq!(got.max(), want.max());
                proptest::prop_assert_eq!(got.min(), want.min());
            }
            let mut by_second = Stats::new();
            for interval in &report.intervals {
                by_second += &interval.stats;
            }
            proptest::prop_assert_eq!(buckets(&by_second.service_time), buckets(&want.service_time));
            proptest::prop_assert_eq!(buckets(&by_second.latency_ok), buckets(&want.latency_ok));
        }
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
