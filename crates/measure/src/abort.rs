//! Thresholds that stop a run early (`abort = true`, k6's abortOnFail):
//! after each finished second past the rule's delay, the bound is judged
//! on the last `window` seconds, merged exactly (HDR histograms, counts).

use headroom_engine::plan::{Load, Plan};
use headroom_engine::Progress;
use headroom_metrics::{histogram, Stats};
use headroom_objectives::abort::AbortRule;
use headroom_objectives::slo::Metric;
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
/// (no request completed; `achieved` in a closed run).
fn figure(w: &Stats, metric: Metric, seconds: f64, offered_rps: Option<f64>) -> Option<f64> {
    let q = |q: f64| (!w.latency.is_empty()).then(|| histogram::ms(w.latency.value_at_quantile(q)));
    match metric {
        Metric::P50 => q(0.5),
        Metric::P75 => q(0.75),
        Metric::P90 => q(0.9),
        Metric::P95 => q(0.95),
        Metric::P99 => q(0.99),
        Metric::P999 => q(0.999),
        Metric::Max => (!w.latency.is_empty()).then(|| histogram::ms(w.latency.max())),
        Metric::Mean => (!w.latency.is_empty()).then(|| w.latency.mean() / 1000.0),
        Metric::Errors => (w.requests > 0).then(|| w.failed as f64 / w.requests as f64 * 100.0),
        Metric::Throughput => Some(w.ok as f64 / seconds),
        Metric::Achieved => offered_rps
            .filter(|o| *o > 0.0)
            .map(|o| w.ok as f64 / seconds / o * 100.0),
    }
}
