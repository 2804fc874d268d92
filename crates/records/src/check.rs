//! Objectives checked against a run: each bound's figure read from the
//! record ([`figure`]) and compared with its limit ([`against`]). Above
//! both the objective language (`headroom-objectives`) and the record.

use crate::results::{Results, Summary};
use headroom_objectives::slo::{BoundCheck, Metric, Slo};

/// Checks every bound of `slo` against `r`. `offered_rps` is the rate `achieved`
/// is measured against (the open model's target when `None`).
pub fn against(slo: &Slo, r: &Results, offered_rps: Option<f64>) -> Vec<BoundCheck> {
    slo.bounds
        .iter()
        .map(|b| {
            let actual = match &b.request {
                None => figure(r, b.metric, offered_rps),
                Some(name) => r
                    .per_request
                    .get(name)
                    .and_then(|s| summary_figure(s, b.metric)),
            };
            BoundCheck {
                bound: b.to_string(),
                metric: b.metric,
                request: b.request.clone(),
                actual,
                limit: b.limit,
                unit: b.metric.unit().to_string(),
                passed: actual.is_none_or(|a| b.op.holds(a, b.limit)),
            }
        })
        .collect()
}

/// OK responses per second of the planned load (the schedule's length, or
/// the run's when it has none): what the server delivered of the offer.
pub fn ok_rate(r: &Results) -> f64 {
    let secs = r
        .config
        .planned_duration_s
        .filter(|s| *s > 0.0)
        .unwrap_or(r.duration_s);
    if secs > 0.0 {
        r.summary.requests.ok as f64 / secs
    } else {
        0.0
    }
}

/// The run's figure for `metric`, in the metric's unit.
pub fn figure(r: &Results, metric: Metric, offered_rps: Option<f64>) -> Option<f64> {
    match metric {
        Metric::Achieved => {
            let offered = offered_rps.or(r.target_rate_rps).filter(|o| *o > 0.0)?;
            Some(ok_rate(r) / offered * 100.0)
        }
        _ => summary_figure(&r.summary, metric),
    }
}

/// A figure of one summary (the run's or one request's); `achieved` has
/// none.
fn summary_figure(s: &Summary, metric: Metric) -> Option<f64> {
    let l = &s.latency_ms;
    Some(match metric {
        Metric::P50 => l.p50,
        Metric::P75 => l.p75,
        Metric::P90 => l.p90,
        Metric::P95 => l.p95,
        Metric::P99 => l.p99,
        Metric::P999 => l.p999,
        Metric::Mean => l.mean,
        Metric::Max => l.max,
        Metric::Errors => s.requests.error_rate * 100.0,
        Metric::Throughput => s.throughput_rps,
        Metric::Achieved => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Results {
        let mut r: Results = serde_json::from_str(include_str!("../tests/data/results-min.json"))
            .expect("fixture parses");
        r.summary.latency_ms.p90 = 450.0;
        r.summary.latency_ms.p99 = 900.0;
        r.summary.requests.error_rate = 0.02;
        r.summary.throughput_rps = 120.0;
        r.summary.requests.ok = 1_000;
        r.config.planned_duration_s = Some(10.0);
        r.duration_s = 10.4;
        r.target_rate_rps = Some(110.0);
        let mut login = r.summary.clone();
        login.latency_ms.p95 = 350.0;
        r.per_request.insert("login".into(), login);
        r
    }

    #[test]
    fn each_bound_is_held_to_its_figure() {
        let r = run();
        let slo =
            Slo::parse("p90<500ms, p99<800ms, errors<5%, rps>=100, p95{login}<300ms").unwrap();
        let checks = against(&slo, &r, None);
        let verdicts: Vec<(&str, Option<f64>, bool)> = checks
            .iter()
            .map(|c| (c.bound.as_str(), c.actual, c.passed))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("p90<500ms", Some(450.0), true),
                ("p99<800ms", Some(900.0), false),
                ("errors<5%", Some(2.0), true),
                ("throughput>=100 req/s", Some(120.0), true),
                ("p95{login}<300ms", Some(350.0), false),
            ]
        );
        assert_eq!(checks[1].unit, "ms");
        assert_eq!(checks[4].request.as_deref(), Some("login"));
    }

    #[test]
    fn achieved_is_ok_responses_per_planned_second_over_the_offer() {
        let r = run();
        // 1000 OK over the planned 10 s (not the 10.4 s to the last answer).
        assert_eq!(ok_rate(&r), 100.0);
        let achieved = |offered| figure(&r, Metric::Achieved, offered).unwrap();
        assert!((achieved(None) - 100.0 / 110.0 * 100.0).abs() < 1e-9);
        assert_eq!(achieved(Some(100.0)), 100.0);
        let slo = Slo::parse("achieved>=95%").unwrap();
        assert!(!against(&slo, &r, None)[0].passed, "90.9 % of 110 req/s");
        assert!(against(&slo, &r, Some(100.0))[0].passed);
        // A closed run has no offered rate: the bound is not measured, so it
        // passes and says so.
        let mut closed = r.clone();
        closed.target_rate_rps = None;
        let c = &against(&slo, &closed, None)[0];
        assert_eq!((c.actual, c.passed), (None, true));
        assert!(c.describe().contains("not measured"));
        // A request the run does not have has no figure either.
        let missing = against(&Slo::parse("p95{nope}<1ms").unwrap(), &r, None);
        assert_eq!((missing[0].actual, missing[0].passed), (None, true));
    }
}
