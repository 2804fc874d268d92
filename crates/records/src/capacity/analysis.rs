//! Reading the steps: where latency bends upward (the knee) and what ran
//! out at the first failing load.

use super::Step;
use crate::check::figure;
use headroom_objectives::slo::{Metric, Slo};

/// The latency figure the knee and the step table follow: the objective's
/// first latency bound, else p90.
pub fn knee_metric(slo: &Slo) -> Metric {
    slo.bounds
        .iter()
        .filter(|b| b.request.is_none())
        .map(|b| b.metric)
        .find(|m| m.is_latency())
        .unwrap_or(Metric::P90)
}

/// The knee of latency against load, by Kneedle (Satopää et al., 2011):
/// normalise both to [0, 1] and take the load where the curve lies
/// furthest below the diagonal. Needs three loads and a latency that rises
/// at least 50 % over the range; `None` otherwise.
pub fn knee(steps: &[Step], metric: Metric) -> Option<f64> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    for s in steps.iter().filter(|s| !s.discarded) {
        let Some(y) = s.results.as_ref().and_then(|r| figure(r, metric, None)) else {
            continue;
        };
        // A re-tested load counts once: keep its higher latency.
        match points.iter_mut().find(|(x, _)| *x == s.offered) {
            Some(p) => p.1 = p.1.max(y),
            None => points.push((s.offered, y)),
        }
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    if points.len() < 3 {
        return None;
    }
    let (x0, x1) = (points[0].0, points[points.len() - 1].0);
    let y0 = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let y1 = points.iter().map(|p| p.1).fold(0.0, f64::max);
    if x1 <= x0 || y1 < 1.5 * y0.max(f64::MIN_POSITIVE) {
        return None;
    }
    points
        .iter()
        .map(|&(x, y)| (x, (x - x0) / (x1 - x0) - (y - y0) / (y1 - y0)))
        .filter(|(_, d)| *d > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(x, _)| x)
}

/// The noise of the answer: the relative spread (sample standard
/// deviation over mean) of `metric` among the passed tries of `load` (its
/// re-test and confirmation included). Two searches whose answers differ
/// by less than this cannot be told apart. `None` with fewer than two.
pub fn noise(steps: &[Step], load: f64, metric: Metric) -> Option<f64> {
    let figures: Vec<f64> = steps
        .iter()
        .filter(|s| s.offered == load && s.passed && !s.discarded)
        .filter_map(|s| s.results.as_ref().and_then(|r| figure(r, metric, None)))
        .collect();
    if figures.len() < 2 {
        return None;
    }
    let n = figures.len() as f64;
    let mean = figures.iter().sum::<f64>() / n;
    let variance = figures.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean > 0.0).then(|| variance.sqrt() / mean)
}

/// What gave out at a failing step, most specific first.
pub struct Limit {
    /// generator, server_exited, queue_full, upstream_closed, memory,
    /// fds, accept_queue_full,
    /// worker_pool, listen_queue, server_cpu, machine_cpu, or
    /// none_observed.
    pub kind: String,
    pub detail: String,
}

pub fn limited_by(step: &Step) -> Limit {
    let Some(r) = &step.results else {
        return Limit {
            kind: "none_observed".into(),
            detail: "the step has no results".into(),
        };
    };
    if r.generator_bound {
        return Limit {
            kind: "generator".into(),
            detail: format!(
                "the generator could not keep up: {}",
                r.generator_bound_reasons.join("; ")
            ),
        };
    }
    let findings = r.server.as_ref().map(|s| &s.findings[..]).unwrap_or(&[]);
    for kind in [
        "server_exited",
        "queue_full",
        "upstream_closed",
        "memory",
        "fds",
        "accept_queue_full",
        // The server's own sockets before the kernel's machine-wide
        // overflow counter, which may be another process's.
        "worker_pool",
        "listen_queue",
        "server_cpu",
        "machine_cpu",
    ] {
        if let Some(f) = findings.iter().find(|f| f.kind == kind) {
            return Limit {
                kind: kind.into(),
                detail: f.message.clone(),
            };
        }
    }
    let watched = r
        .server
        .as_ref()
        .is_some_and(|s| s.samples.iter().any(|x| x.server.is_some()));
    Limit {
        kind: "none_observed".into(),
        detail: if watched {
            "no resource ran out (CPU, memory, fds, listen queue): the limit is the \
             server's own concurrency — its workers × threads or queue"
                .into()
        } else {
            "the server was not watched (give --monitor-pid, --monitor-cmd or \
             --monitor-url to see what ran out)"
                .into()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(offered: f64, p90: f64) -> Step {
        let mut r: crate::results::Results =
            serde_json::from_str(include_str!("../../tests/data/results-min.json"))
                .expect("fixture parses");
        r.summary.latency_ms.p90 = p90;
        Step {
            offered,
            results: Some(r),
            ..Step::default()
        }
    }

    #[test]
    fn knee_is_the_last_load_before_latency_bends_up() {
        let steps: Vec<Step> = [
            (10.0, 50.0),
            (20.0, 50.0),
            (40.0, 51.0),
            (60.0, 400.0),
            (80.0, 900.0),
        ]
        .iter()
        .map(|&(x, y)| step(x, y))
        .collect();
        assert_eq!(knee(&steps, Metric::P90), Some(40.0));
        // Flat latency: no knee.
        let flat: Vec<Step> = [10.0, 20.0, 40.0].iter().map(|&x| step(x, 50.0)).collect();
        assert_eq!(knee(&flat, Metric::P90), None);
    }

    #[test]
    fn noise_is_the_spread_of_the_answers_passed_tries() {
        let mut steps: Vec<Step> = [(40.0, 90.0), (40.0, 110.0), (50.0, 900.0)]
            .iter()
            .map(|&(x, y)| step(x, y))
            .collect();
        for s in &mut steps[..2] {
            s.passed = true;
        }
        // 90 and 110: sd 14.1 over mean 100.
        let noise = noise(&steps, 40.0, Metric::P90).unwrap();
        assert!((noise - 0.1414).abs() < 0.001, "{noise}");
        assert_eq!(super::noise(&steps, 50.0, Metric::P90), None);
    }
}
