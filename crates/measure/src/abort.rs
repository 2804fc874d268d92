//! Thresholds that stop a run early (`abort = true`, k6's abortOnFail):
//! after each finished second past the rule's delay, the bound is judged
//! on the last `window` seconds, merged exactly (HDR histograms, counts).

use headroom_engine::plan::{Load, Plan};
use headroom_engine::Progress;
use headroom_metrics::{histogram, Stats};
use headroom_objectives::abort::AbortRule;
use headroom_objectives::slo::{LatencyFigure, Metric, Observed};
use headroom_records::results::AbortRecord;
use std::time::Duration;

pub struct AbortWatch {
    rules: Vec<AbortRule>,
    /// Open model: the arrivals planned before each second's end, for
    /// `achieved`.
    schedule: Option<headroom_engine::plan::schedule::Schedule>,
}

impl AbortWatch {
    pub fn new(rules: &[AbortRule], plan: &Plan) -> AbortWatch {
        AbortWatch {
            rules: rules.to_vec(),
            schedule: match &plan.load {
                Load::Open(o) => Some(o.schedule.clone()),
                Load::Closed(_) => None,
            },
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The first rule breached after this second, if any.
    pub fn judge(&self, p: &Progress) -> Option<AbortRecord> {
        let now_s = p.second.t_s as u64;
        for rule in &self.rules {
            let n = rule.window_seconds();
            if (now_s as f64) < rule.delay.as_secs_f64() + n as f64 || p.recent.len() < n {
                continue;
            }
            let mut window = Stats::new();
            for s in p.recent.iter().rev().take(n) {
                window += s;
            }
            let offered = self.schedule.as_ref().map(|s| {
                let end = Duration::from_secs(now_s);
                let begin = end.saturating_sub(Duration::from_secs(n as u64));
                (s.arrivals_before(end) - s.arrivals_before(begin)) as f64 / n as f64
            });
            let Some(actual) = figure(&window, rule.bound.metric, n as f64, offered) else {
                continue;
            };
            if !rule.bound.op.holds(actual, rule.bound.limit) {
                return Some(AbortRecord {
                    threshold: rule.bound.to_string(),
                    actual,
                    window_s: n as f64,
                    at_s: now_s as f64,
                });
            }
        }
        None
    }
}

/// A window's figure for `metric`, in its unit; `None` when it has none
/// (no request completed; `achieved` in a closed run). The formula is
/// [`Metric::value`], the one thresholds use.
fn figure(w: &Stats, metric: Metric, seconds: f64, offered_rps: Option<f64>) -> Option<f64> {
    let observed = Observed {
        requests: w.requests,
        ok: w.ok,
        failed: w.failed,
        span_s: seconds,
        offered: offered_rps.map(|rate| (seconds, rate)),
    };
    metric.value(&observed, |figure| {
        let l = &w.latency;
        (!l.is_empty()).then(|| match figure {
            LatencyFigure::Quantile(q) => histogram::ms(l.value_at_quantile(q)),
            LatencyFigure::Mean => l.mean() / 1000.0,
            LatencyFigure::Max => histogram::ms(l.max()),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_records::results::{Results, Summary, DEFAULT_BUCKETS_MS};

    /// An abort rule over a window and a threshold over a run of the same
    /// requests read the same figure, for every metric.
    #[test]
    fn abort_and_threshold_agree_on_every_metric() {
        let mut window = Stats::new();
        for i in 0..500u64 {
            let ok = i % 10 != 0;
            window.requests += 1;
            window.attempts += 1;
            let us = 1_000 + i * 997 % 250_000;
            window.latency.record(us).unwrap();
            if ok {
                window.ok += 1;
                window.latency_ok.record(us).unwrap();
            } else {
                window.failed += 1;
            }
        }
        let (seconds, offered) = (5.0, 120.0);
        let mut run: Results =
            serde_json::from_str(include_str!("../../records/tests/data/results-min.json"))
                .unwrap();
        run.summary = Summary::new(
            &window,
            Duration::from_secs_f64(seconds),
            &DEFAULT_BUCKETS_MS,
            &[],
        );
        run.duration_s = seconds;
        run.config.planned_duration_s = Some(seconds);
        run.target_rate_rps = Some(offered);
        for metric in Metric::ALL {
            let aborts = figure(&window, metric, seconds, Some(offered));
            let thresholds = headroom_records::check::figure(&run, metric, None);
            assert_eq!(aborts, thresholds, "{}", metric.name());
            assert!(aborts.is_some(), "{} has a figure", metric.name());
        }
    }
}
