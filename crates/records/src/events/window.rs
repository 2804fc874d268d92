//! What users saw around an event, from the run's fine trace (every
//! completion near the event, in completion order): the "after" window
//! from the event's start until the latency has been back within the
//! pre-event p99 for 5 s (at most 60 s after the event's end), the
//! "before" window of the same length, and 100 ms buckets over both.

use super::{EventRecord, FinePoint, WindowFigures};
use headroom_metrics::histogram;
use headroom_metrics::trace::Completion;
use std::collections::BTreeMap;
use std::time::Duration;

/// Back to normal: this long with p99 within the pre-event p99 and no
/// failure.
pub const RECOVERED_FOR: Duration = Duration::from_secs(5);
/// The after window ends at most this long after the event's end.
pub const MAX_AFTER: Duration = Duration::from_secs(60);
/// The pre-event p99 is taken over at most this long before the event.
pub const BASELINE: Duration = Duration::from_secs(60);
const BUCKET_US: u64 = 100_000;
/// Recovery is judged every so often.
const STEP_US: u64 = 100_000;

fn us(s: f64) -> u64 {
    (s.max(0.0) * 1e6) as u64
}

fn s(us: u64) -> f64 {
    us as f64 / 1e6
}

/// The completions in [from, to) µs.
fn slice(trace: &[Completion], from: u64, to: u64) -> &[Completion] {
    let a = trace.partition_point(|c| c.done_us < from);
    let b = trace.partition_point(|c| c.done_us < to);
    &trace[a..b.max(a)]
}

/// Exact p99 (nearest rank) of a stretch, for judging recovery.
fn p99_us(c: &[Completion]) -> Option<u64> {
    if c.is_empty() {
        return None;
    }
    let mut v: Vec<u32> = c.iter().map(|c| c.latency_us).collect();
    let rank = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1;
    Some(*v.select_nth_unstable(rank).1 as u64)
}

/// Has the stretch from `t` been normal for [`RECOVERED_FOR`]?
fn recovered(trace: &[Completion], t: u64, baseline_p99: u64) -> bool {
    let stretch = slice(trace, t, t + RECOVERED_FOR.as_micros() as u64);
    // Within a quarter (or a millisecond) of the pre-event p99: a 5 s
    // stretch's p99 wanders that much under an unchanged load.
    let limit = (baseline_p99 + baseline_p99 / 4).max(baseline_p99 + 1000);
    stretch.iter().all(|c| c.error.is_none()) && p99_us(stretch).is_some_and(|p| p <= limit)
}

/// Fills `record.after`, `.before` and `.timeline_100ms` from `trace`
/// (sorted by completion). `run_end_s`: where the run's figures end.
/// `window`: the event's own after-window length, when it gave one.
pub fn measure(
    record: &mut EventRecord,
    trace: &[Completion],
    run_end_s: f64,
    window: Option<Duration>,
) {
    if record.error.is_some() && record.started_s == 0.0 && record.ended_s == 0.0 {
        return; // it never ran
    }
    let started = us(record.started_s);
    let ended = us(record.ended_s).max(started);
    let end_of_run = us(run_end_s);
    let to = match window {
        Some(w) => started + w.as_micros() as u64,
        None => {
            let baseline = slice(
                trace,
                started.saturating_sub(BASELINE.as_micros() as u64),
                started,
            );
            let cap = ended + MAX_AFTER.as_micros() as u64;
            let back = p99_us(baseline).and_then(|p99| {
                (ended..cap)
                    .step_by(STEP_US as usize)
                    .take_while(|t| *t + RECOVERED_FOR.as_micros() as u64 <= end_of_run)
                    .find(|&t| recovered(trace, t, p99))
            });
            back.map_or(cap, |t| t + RECOVERED_FOR.as_micros() as u64)
        }
    }
    .min(end_of_run.max(started));
    let length = to - started;
    let from = started.saturating_sub(length);
    record.after = Some(figures(trace, started, to, Gaps::Whole));
    // Before: a gap the event began is the event's, not the baseline's.
    record.before = Some(figures(trace, from, started, Gaps::Clipped));
    record.timeline_100ms = fine(trace, from, to);
}

/// How gaps that reach past a window's ends are measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gaps {
    /// Whole, as far as the trace reaches (the downtime an event caused
    /// began a little before its window, or lasts past it).
    Whole,
    /// Only the part inside the window.
    Clipped,
}

/// The figures of [from, to).
pub fn figures(trace: &[Completion], from: u64, to: u64, gaps: Gaps) -> WindowFigures {
    let inside = slice(trace, from, to);
    let mut h = histogram::new();
    let mut failed: BTreeMap<String, u64> = BTreeMap::new();
    let mut ok = 0;
    for c in inside {
        histogram::record_us(&mut h, c.latency_us as u64);
        match c.error {
            None => ok += 1,
            Some(class) => *failed.entry(class.key().to_string()).or_default() += 1,
        }
    }
    let (gap, gap_from) = longest_gap(trace, from, to, gaps);
    WindowFigures {
        from_s: s(from),
        to_s: s(to),
        requests: inside.len() as u64,
        ok,
        failed_total: failed.values().sum(),
        failed,
        p99_ms: (!h.is_empty()).then(|| histogram::ms(h.value_at_quantile(0.99))),
        max_gap_ms: gap as f64 / 1000.0,
        max_gap_from_s: s(gap_from),
    }
}

/// The longest time between two consecutive OK completions among the gaps
/// that overlap [from, to), measured as `gaps` says. Returns (µs, where it
/// began).
pub fn longest_gap(trace: &[Completion], from: u64, to: u64, gaps: Gaps) -> (u64, u64) {
    let first = trace.first().map_or(from, |c| c.done_us.min(from));
    let last = trace.last().map_or(to, |c| c.done_us.max(to));
    // The last OK at or before `from`, every OK inside, the first OK at
    // or after `to`; the trace's ends where there is none.
    let before = trace[..trace.partition_point(|c| c.done_us <= from)]
        .iter()
        .rev()
        .find(|c| c.error.is_none())
        .map_or(first, |c| c.done_us);
    let after_at = trace.partition_point(|c| c.done_us < to);
    let after = trace[after_at..]
        .iter()
        .find(|c| c.error.is_none())
        .map_or(last, |c| c.done_us);
    let inside = slice(trace, from, to)
        .iter()
        .filter(|c| c.error.is_none())
        .map(|c| c.done_us);
    let (before, after) = match gaps {
        Gaps::Whole => (before, after),
        Gaps::Clipped => (before.max(from), after.min(to)),
    };
    let mut best = (0, from);
    let mut prev = before;
    for t in inside.chain(std::iter::once(after)) {
        if t.saturating_sub(prev) > best.0 {
            best = (t - prev, prev);
        }
        prev = prev.max(t);
    }
    best
}

fn fine(trace: &[Completion], from: u64, to: u64) -> Vec<FinePoint> {
    let from = from / BUCKET_US * BUCKET_US;
    (from..to)
        .step_by(BUCKET_US as usize)
        .map(|a| {
            let b = slice(trace, a, a + BUCKET_US);
            let ok = b.iter().filter(|c| c.error.is_none()).count() as u64;
            FinePoint {
                t_s: s(a + BUCKET_US),
                requests: b.len() as u64,
                ok,
                failed: b.len() as u64 - ok,
                p99_ms: p99_us(b).map(|p| p as f64 / 1000.0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_metrics::ErrorClass;

    /// An OK completion every 10 ms of 2 ms, except for `down` (ms), in
    /// which requests fail (refused) every 10 ms.
    fn trace(until_ms: u64, down: (u64, u64)) -> Vec<Completion> {
        (0..until_ms / 10)
            .map(|i| {
                let t = i * 10;
                let failing = t >= down.0 && t < down.1;
                Completion {
                    done_us: t * 1000,
                    latency_us: 2000,
                    error: failing.then_some(ErrorClass::ConnectRefused),
                }
            })
            .collect()
    }

    #[test]
    fn the_gap_is_the_time_without_an_ok_response_measured_whole() {
        let t = trace(20_000, (5_000, 6_500));
        // Last OK at 4.99 s, next at 6.5 s.
        let (gap, from) = longest_gap(&t, 5_200_000, 5_400_000, Gaps::Whole);
        assert_eq!((gap, from), (1_510_000, 4_990_000));
        // Only the part inside the window, when clipped.
        let clipped = longest_gap(&t, 4_000_000, 5_400_000, Gaps::Clipped);
        assert_eq!(clipped, (410_000, 4_990_000));
        // Outside the outage, the gap is the 10 ms spacing.
        assert_eq!(
            longest_gap(&t, 10_000_000, 11_000_000, Gaps::Whole).0,
            10_000
        );
    }

    #[test]
    fn after_window_runs_until_latency_is_back_then_five_seconds() {
        let t = trace(30_000, (10_000, 11_500));
        let mut e = EventRecord {
            started_s: 10.0,
            ended_s: 10.1,
            ..EventRecord::default()
        };
        measure(&mut e, &t, 30.0, None);
        let after = e.after.unwrap();
        // Failures until 11.5 s: recovered from the first 100 ms step at
        // or after 11.5 s (from the event's end), plus 5 s.
        assert_eq!(after.from_s, 10.0);
        assert!((after.to_s - 16.5).abs() < 1e-9, "{}", after.to_s);
        assert_eq!(after.failed_total, 150);
        assert_eq!(after.failed["connect_refused"], 150);
        assert!((after.max_gap_ms - 1510.0).abs() < 1e-9);
        let before = e.before.unwrap();
        assert_eq!(before.failed_total, 0);
        assert!((before.to_s - before.from_s - (after.to_s - after.from_s)).abs() < 1e-9);
        assert_eq!(before.max_gap_ms, 10.0);
        // 100 ms buckets over both windows: one with no OK at all.
        assert_eq!(e.timeline_100ms.len(), 130);
        assert!(e.timeline_100ms.iter().any(|p| p.ok == 0 && p.failed == 10));
    }

    #[test]
    fn an_event_users_did_not_notice_has_a_short_window_and_no_gap() {
        let t = trace(30_000, (0, 0));
        let mut e = EventRecord {
            started_s: 10.0,
            ended_s: 10.002,
            ..EventRecord::default()
        };
        measure(&mut e, &t, 30.0, None);
        let after = e.after.unwrap();
        // Normal from the event's end on: its end plus 5 s.
        assert!((after.to_s - 15.002).abs() < 1e-9, "{}", after.to_s);
        assert_eq!(after.failed_total, 0);
        assert_eq!(after.max_gap_ms, 10.0);
    }

    #[test]
    fn a_given_window_is_used_as_is_and_clipped_to_the_run() {
        let t = trace(12_000, (0, 0));
        let mut e = EventRecord {
            started_s: 10.0,
            ended_s: 10.0,
            ..EventRecord::default()
        };
        measure(&mut e, &t, 12.0, Some(Duration::from_secs(5)));
        assert_eq!(e.after.unwrap().to_s, 12.0);
    }
}
