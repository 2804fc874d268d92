//! Objectives checked against a run: each bound's figure read from the
//! record ([`figure`]) and compared with its limit ([`against`]). Above
//! both the objective language (`headroom-objectives`) and the record.

use crate::results::{Results, Summary};
use headroom_objectives::slo::{BoundCheck, LatencyFigure, Metric, Observed, Slo};

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
                    .and_then(|s| summary_figure(s, r.duration_s, b.metric, None)),
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

/// The planned load's length (the schedule's, or the run's when it has
/// none): what `achieved` spreads the offer over.
fn planned_s(r: &Results) -> f64 {
    r.config
        .planned_duration_s
        .filter(|s| *s > 0.0)
        .unwrap_or(r.duration_s)
}

/// OK responses per second of the planned load: what the server delivered
/// of the offer.
pub fn ok_rate(r: &Results) -> f64 {
    let secs = planned_s(r);
    if secs > 0.0 {
        r.summary.requests.ok as f64 / secs
    } else {
        0.0
    }
}

/// The run's figure for `metric`, in the metric's unit.
pub fn figure(r: &Results, metric: Metric, offered_rps: Option<f64>) -> Option<f64> {
    let offered = offered_rps
        .or(r.target_rate_rps)
        .map(|rate| (planned_s(r), rate));
    summary_figure(&r.summary, r.duration_s, metric, offered)
}

/// A figure of one summary (the run's or one request's) over the run's
/// `duration_s`, by the one formula abort rules use too
/// ([`Metric::value`]); `achieved` only with an offer.
fn summary_figure(
    s: &Summary,
    duration_s: f64,
    metric: Metric,
    offered: Option<(f64, f64)>,
) -> Option<f64> {
    let observed = Observed {
        requests: s.requests.total,
        ok: s.requests.ok,
        failed: s.requests.failed,
        span_s: duration_s,
        offered,
    };
    let l = &s.latency_ms;
    metric.value(&observed, |figure| {
        Some(match figure {
            LatencyFigure::Quantile(q) => l.at_quantile(q)?,
            LatencyFigure::Mean => l.mean,
            LatencyFigure::Max => l.max,
        })
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
        // 1,040 requests, 40 failed, over the 10.4 s the run lasted: an
        // error rate of 3.85 % and 100 requests a second.
        r.summary.requests.total = 1_040;
        r.summary.requests.failed = 40;
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
        let verdicts: Vec<(&str, Option<String>, bool)> = checks
            .iter()
            .map(|c| {
                (
                    c.bound.as_str(),
                    c.actual.map(|a| format!("{a:.2}")),
                    c.passed,
                )
            })
            .collect();
        let figure = |s: &str| Some(s.to_string());
        assert_eq!(
            verdicts,
            [
                ("p90<500ms", figure("450.00"), true),
                ("p99<800ms", figure("900.00"), false),
                ("errors<5%", figure("3.85"), true),
                ("throughput>=100 req/s", figure("100.00"), true),
                ("p95{login}<300ms", figure("350.00"), false),
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
