//! Whether a step's server kept up with its arrivals, whatever its
//! percentiles say. A load above capacity that runs only a few seconds
//! adds little queueing delay — 6 % over for 2 s adds ~125 ms — so a
//! generous objective passes it; but the requests waiting keep growing.
//!
//! The backlog after each second of the step is the arrivals the schedule
//! made so far minus the requests completed so far (answers finished in
//! the graceful stop, after the step's window, do not count). A server
//! that keeps up holds it level (at about rate × latency, Little's law); one
//! that does not adds (rate − capacity) every second. The rule:
//!
//! - judged from the first second by which the first answers came back
//!   (that second's median latency, rounded up; at least 1 s), so a slow
//!   server's backlog filling to its level is not taken for growth;
//! - the growth is the least-squares trend of the backlog over the judged
//!   seconds times their span, in requests;
//! - allowed: 2 requests plus 3 × the backlog's scatter about that trend
//!   (its standard deviation; over only two seconds, 2 × √ of the first
//!   backlog): a server whose backlog swings by itself is given room;
//! - `not sustained` when the growth is above what is allowed. Fewer than
//!   two judged seconds, or no arrival counts (a closed model, sessions
//!   whose arrivals are not requests): not judged.
//!
//! Where the monitor sees the server, its own queue is a second witness
//! ([`judge_server_queue`]): the connections waiting in its accept queues
//! plus the requests its probes say are queued (Puma's backlog,
//! Passenger's queue), sampled each second of the step, by the same rule
//! (three samples at least: a 2 s step has too few). Either growing
//! fails the step.
//!
//! Measured false alarms, 2026-11-28: a server at 80 % of its capacity
//! (4 threads, service 20–180 ms uniform) passed every 2 s and 10 s
//! window (see the guide's capacity chapter).

use crate::server::sample::Sample;
use headroom_metrics::aggregate::TimelinePoint;
use serde::{Deserialize, Serialize};

/// A step's backlog and the verdict on it, as `cap.json` keeps it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Backlog {
    /// The second (1 = the step's first) whose end the judged backlog
    /// starts at.
    pub from_s: u32,
    /// Arrivals minus completions at the end of each judged second.
    pub backlog: Vec<i64>,
    /// The backlog's trend over the judged seconds, in requests.
    pub growth: f64,
    /// The most growth a server that keeps up shows, in requests.
    pub allowed: f64,
    pub sustained: bool,
}

impl Backlog {
    /// The step's failure, said with its figures.
    pub fn describe(&self) -> String {
        self.describe_as("the backlog")
    }

    /// The failure of `what` (the backlog, the server's queue).
    pub fn describe_as(&self, what: &str) -> String {
        format!(
            "not sustained: {what} grew by {:.1} requests over {} s (allowed {:.1}): {:?}",
            self.growth,
            self.backlog.len().saturating_sub(1),
            self.allowed,
            self.backlog
        )
    }
}

/// Judges the seconds of `timeline` inside a step of `window_s` seconds
/// (later seconds are the graceful stop). `None` when it cannot be judged.
pub fn judge(timeline: &[TimelinePoint], window_s: f64) -> Option<Backlog> {
    judge_window(timeline, 0, window_s)
}

/// Judges the `window_s` seconds of a run's `timeline` after its second
/// `after_s`, the backlog counted from the run's start.
pub fn judge_window(timeline: &[TimelinePoint], after_s: u32, window_s: f64) -> Option<Backlog> {
    let end = after_s + window_s.floor() as u32;
    let seconds: Vec<&TimelinePoint> = timeline.iter().filter(|p| p.t_s <= end).collect();
    if seconds.iter().any(|p| p.offered.is_none()) {
        return None;
    }
    let in_window: Vec<&TimelinePoint> = seconds
        .iter()
        .copied()
        .filter(|p| p.t_s > after_s)
        .collect();
    let from_s = settled_after(&in_window)?;
    let mut level = 0i64;
    let mut backlog = Vec::new();
    for p in &seconds {
        level += p.offered.unwrap_or(0) as i64 - p.requests as i64;
        if p.t_s >= from_s {
            backlog.push(level);
        }
    }
    if backlog.len() < 2 {
        return None;
    }
    let (slope, scatter) = trend(&backlog);
    let growth = slope * (backlog.len() - 1) as f64;
    // Over two seconds the scatter is not seen: the in-flight count's own
    // (Poisson-like) swing about its level stands in, at two of them.
    let allowed = match scatter {
        Some(scatter) => 2.0 + 3.0 * scatter,
        None => 2.0 + 2.0 * (backlog[0].max(0) as f64).sqrt(),
    };
    Some(Backlog {
        from_s,
        growth,
        allowed,
        sustained: growth <= allowed,
        backlog,
    })
}

/// Judges the server's own queue over a step of `window_s` seconds: the
/// accept queues' depth plus the probes' queued requests at each sample
/// inside the window. `None` with fewer than three samples, or when the
/// queue was empty throughout (nothing to judge).
pub fn judge_server_queue(samples: &[Sample], window_s: f64) -> Option<Backlog> {
    let inside = samples.iter().filter(|s| s.t_s > 0.0 && s.t_s <= window_s);
    let points: Vec<(f64, i64)> = inside
        .map(|s| {
            let accept = s.server.as_ref().map_or(0, |t| t.accept_queue_depth());
            let probed = s.probe_queued().unwrap_or(0.0).round() as u64;
            (s.t_s, (accept + probed) as i64)
        })
        .collect();
    if points.len() < 3 || points.iter().all(|&(_, q)| q == 0) {
        return None;
    }
    let queue: Vec<i64> = points.iter().map(|&(_, q)| q).collect();
    let (slope, scatter) = trend(&queue);
    let growth = slope * (queue.len() - 1) as f64;
    let allowed = 2.0 + 3.0 * scatter.unwrap_or(0.0);
    Some(Backlog {
        from_s: points[0].0.floor() as u32,
        growth,
        allowed,
        sustained: growth <= allowed,
        backlog: queue,
    })
}

/// The first second by which answers have come back: the first second
/// with completions, its median latency rounded up (at least that second).
fn settled_after(seconds: &[&TimelinePoint]) -> Option<u32> {
    let first = seconds.iter().find(|p| p.requests > 0)?;
    let latency_s = first.p50_ms.unwrap_or(0.0) / 1000.0;
    Some(first.t_s.max(latency_s.ceil() as u32).max(1))
}

/// Least-squares slope of `y` against its index, and the standard
/// deviation of `y` about that line (`None` with two points: a line
/// through two points has no scatter to show).
fn trend(y: &[i64]) -> (f64, Option<f64>) {
    let n = y.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = y.iter().sum::<i64>() as f64 / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, &v) in y.iter().enumerate() {
        let dx = i as f64 - mean_x;
        sxy += dx * (v as f64 - mean_y);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    if y.len() < 3 {
        return (slope, None);
    }
    let residuals: f64 = y
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let fitted = mean_y + slope * (i as f64 - mean_x);
            (v as f64 - fitted).powi(2)
        })
        .sum();
    (slope, Some((residuals / (n - 2.0)).sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timeline from (offered, completed, p50 ms) per second.
    fn seconds(points: &[(u64, u64, f64)]) -> Vec<TimelinePoint> {
        points
            .iter()
            .enumerate()
            .map(|(i, &(offered, requests, p50))| TimelinePoint {
                t_s: i as u32 + 1,
                offered: Some(offered),
                requests,
                p50_ms: (requests > 0).then_some(p50),
                ..TimelinePoint::default()
            })
            .collect()
    }

    /// Backlogs measured against the built-in target (4 threads × 100 ms,
    /// capacity 40 req/s): the judged series and the verdict.
    fn verdict_of(backlog: &[i64]) -> Backlog {
        // Rebuild a timeline whose running backlog is `backlog`: a rate of
        // 40 per second, completions making up the difference.
        let mut points = Vec::new();
        let mut previous = 0;
        for &b in backlog {
            points.push((40, (40 + previous - b) as u64, 100.0));
            previous = b;
        }
        judge(&seconds(&points), backlog.len() as f64).unwrap()
    }

    #[test]
    fn a_level_backlog_is_sustained_and_a_growing_one_is_not() {
        // 32 req/s (80 %): level at 3.
        assert!(verdict_of(&[3, 3, 3, 3, 3]).sustained);
        // 42.5 req/s (106 %) for 5 s: +2.5 a second.
        let over = verdict_of(&[7, 9, 12, 14, 17]);
        assert!(!over.sustained, "{over:?}");
        assert!((over.growth - 10.0).abs() < 0.5, "{over:?}");
        // 57.5 req/s (144 %) for 2 s: the case, caught in 2 s.
        assert!(!verdict_of(&[22, 39]).sustained);
        // 42.5 req/s for 2 s: +2.5 is within what two seconds can tell.
        assert!(verdict_of(&[7, 9]).sustained);
    }

    #[test]
    fn a_server_whose_backlog_swings_is_given_room() {
        // 32 req/s against service times of 20–180 ms (80 %): measured.
        for series in [
            [3, 2, 2, 0, 3, 4, 3, 2, 4, 4],
            [2, 4, 4, 3, 2, 4, 3, 5, 4, 4],
            [3, 2, 3, 2, 2, 3, 5, 2, 4, 3],
        ] {
            let b = verdict_of(&series);
            assert!(b.sustained, "{b:?}");
        }
        // 40.8 req/s on the same server (102 %): the backlog walks up.
        let b = verdict_of(&[6, 12, 14, 13, 13, 19, 25, 30, 28, 28]);
        assert!(!b.sustained, "{b:?}");
    }

    #[test]
    fn a_server_queue_that_grows_is_not_sustained() {
        let sample = |t_s: f64, depth: u32| -> Sample {
            serde_json::from_value(serde_json::json!({
                "t_s": t_s, "unix_ms": 0,
                "server": {"alive": true, "root_pid": 1, "processes": 1, "threads": 1,
                    "cpu_pct": 0.0, "cpu_user_pct": 0.0, "cpu_system_pct": 0.0,
                    "rss_bytes": 0, "fds": 0, "ctx_voluntary": 0, "ctx_involuntary": 0,
                    "per_process": [],
                    "accept_queues": [{"address": "127.0.0.1:1", "depth": depth, "limit": 1024}]}
            }))
            .unwrap()
        };
        let growing: Vec<Sample> = (1..=6).map(|t| sample(t as f64, 5 * t)).collect();
        let b = judge_server_queue(&growing, 6.0).unwrap();
        assert!(!b.sustained, "{b:?}");
        assert!(b
            .describe_as("the server's queue")
            .starts_with("not sustained: the server's queue grew by 25.0"));
        let level: Vec<Sample> = (1..=6).map(|t| sample(t as f64, 3 + t % 2)).collect();
        assert!(judge_server_queue(&level, 6.0).unwrap().sustained);
        // Empty throughout, or too few samples: not judged.
        let empty: Vec<Sample> = (1..=6).map(|t| sample(t as f64, 0)).collect();
        assert!(judge_server_queue(&empty, 6.0).is_none());
        assert!(judge_server_queue(&growing[..2], 2.0).is_none());
    }

    #[test]
    fn the_graceful_stop_and_a_slow_first_answer_are_not_judged() {
        // Seconds past the window (the graceful stop) are left out.
        let mut t = seconds(&[(40, 36, 100.0), (40, 40, 100.0), (0, 4, 100.0)]);
        let b = judge(&t, 2.0).unwrap();
        assert_eq!(b.backlog, vec![4, 4]);
        // A server answering in 2.5 s fills its backlog for 3 s: judged
        // from the third second on.
        t = seconds(&[
            (10, 0, 0.0),
            (10, 0, 0.0),
            (10, 5, 2500.0),
            (10, 10, 2500.0),
            (10, 10, 2500.0),
        ]);
        let b = judge(&t, 5.0).unwrap();
        assert_eq!((b.from_s, b.backlog.clone()), (3, vec![25, 25, 25]));
        assert!(b.sustained);
        // A window later in the run: the backlog counted from its start.
        let b = judge_window(&t, 3, 2.0).unwrap();
        assert_eq!((b.from_s, b.backlog), (4, vec![25, 25]));
        // One judged second is not a trend; no arrival counts, no verdict.
        assert!(judge(&t, 3.0).is_none());
        t[0].offered = None;
        assert!(judge(&t, 5.0).is_none());
    }
}
