//! Statistics over a configuration's runs, and the ranking by the study's
//! objective. With repeats, each figure is the median with a 95 %
//! confidence interval of the mean (Student's t); two configurations whose
//! intervals overlap are "within noise" of each other, and the study says
//! so instead of naming a winner by a hair. A single run per configuration
//! gets its interval from its own seconds (the figure ± t·sd/√n of the
//! per-second values: how much the run wandered while it ran); between
//! single runs, overlapping intervals or a difference under 3 % count as
//! noise.

use super::{ConfigReport, Objective, StudyReport, Winner};
use crate::results::Results;
use headroom_metrics::aggregate::TimelinePoint;
use serde::{Deserialize, Serialize};

/// What the ranking reads of a study file.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranking {
    /// The study file, as named in `study.json`.
    pub study: String,
    pub objective: Objective,
    /// Highest error rate (0–1) for a configuration to be eligible.
    pub error_budget: f64,
    pub repeat: u32,
}

/// Relative difference under which two figures are noise whatever their
/// intervals say.
pub const NOISE_FLOOR: f64 = 0.03;

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    /// 95 % confidence interval of the mean; for one run, of its seconds
    /// around its figure (equal to it when the run had too few seconds).
    pub low: f64,
    pub high: f64,
    pub runs: u32,
}

/// Two-sided 95 % Student's t for n − 1 degrees of freedom.
fn t95(n: usize) -> f64 {
    const T: [f64; 10] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    ];
    match n {
        0 | 1 => 0.0,
        n if n - 2 < T.len() => T[n - 2],
        _ => 1.96,
    }
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let mean = v.iter().sum::<f64>() / n as f64;
        let (low, high) = if n < 2 {
            (median, median)
        } else {
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let half = t95(n) * (var / n as f64).sqrt();
            (mean - half, mean + half)
        };
        Some(Spread {
            median,
            low,
            high,
            runs: n as u32,
        })
    }

    /// One run's figure, with the interval its per-second values give
    /// (seconds without a value left out; none with fewer than 5).
    pub fn of_one_run(figure: f64, per_second: &[f64]) -> Spread {
        let n = per_second.len();
        let (low, high) = if n < 5 {
            (figure, figure)
        } else {
            let mean = per_second.iter().sum::<f64>() / n as f64;
            let var = per_second.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let half = t95(n) * (var / n as f64).sqrt();
            (figure - half, figure + half)
        };
        Spread {
            median: figure,
            low,
            high,
            runs: 1,
        }
    }

    /// Whether two figures cannot be told apart: a difference under 3 %,
    /// or overlapping intervals (where both have one). The one rule for a
    /// study's ranking and `headroom compare`.
    pub fn overlaps(&self, other: &Spread) -> bool {
        let base = self.median.abs().max(other.median.abs());
        if base == 0.0 || (self.median - other.median).abs() / base < NOISE_FLOOR {
            return true;
        }
        let has_interval = |s: &Spread| s.high > s.low;
        has_interval(self)
            && has_interval(other)
            && self.low <= other.high
            && other.low <= self.high
    }
}

/// A configuration's figures over its successful runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ConfigStats {
    pub throughput_rps: Spread,
    /// The objective's latency (p50/p90/p95/p99/mean) in ms; p90 when the
    /// objective is throughput.
    pub latency_ms: Spread,
    pub error_rate: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_cpu_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<f64>,
    /// The most connections waiting in the server's accept queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_accept_queue: Option<f64>,
    /// Requests served per second of server CPU time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_cpu_s: Option<f64>,
    /// Requests per second per GiB of peak resident memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps_per_gib: Option<f64>,
    /// Objective "capacity": the capacities found, in the search axis's unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Spread>,
    /// Runs with events: the longest time without an OK response after
    /// them (the largest of a run's events), in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_gap_ms: Option<Spread>,
    /// Runs with events: the most requests failed in a run's event windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_failed: Option<u64>,
}

/// A run's longest gap after any of its events (ms), if it had events.
pub fn event_gap_ms(r: &Results) -> Option<f64> {
    r.events
        .iter()
        .filter_map(|e| e.after.as_ref().map(|a| a.max_gap_ms))
        .reduce(f64::max)
}

/// Requests failed in a run's event windows, if it had events.
pub fn event_failed(r: &Results) -> Option<u64> {
    let windows: Vec<u64> = r
        .events
        .iter()
        .filter_map(|e| e.after.as_ref().map(|a| a.failed_total))
        .collect();
    (!windows.is_empty()).then(|| windows.iter().sum())
}

/// A run's seconds as values of a figure: whole seconds only (the first
/// and last, partly run, left out), and those that have the value.
pub fn per_second(r: &Results, value: impl Fn(&TimelinePoint) -> Option<f64>) -> Vec<f64> {
    let n = r.timeline.len();
    if n < 3 {
        return Vec::new();
    }
    r.timeline[1..n - 1].iter().filter_map(value).collect()
}

/// The objective's latency in one second of the timeline.
fn second_latency(p: &TimelinePoint, objective: Objective) -> Option<f64> {
    match objective {
        Objective::P50 => p.p50_ms,
        Objective::P95 => p.p95_ms,
        Objective::P99 => p.p99_ms,
        Objective::Mean => p.mean_ms,
        Objective::P90 | Objective::Throughput | Objective::Capacity | Objective::MaxGap => {
            p.p90_ms
        }
    }
}

pub fn latency(r: &Results, objective: Objective) -> f64 {
    let l = &r.summary.latency_ms;
    match objective {
        Objective::P50 => l.p50,
        Objective::P95 => l.p95,
        Objective::P99 => l.p99,
        Objective::Mean => l.mean,
        Objective::P90 | Objective::Throughput | Objective::Capacity | Objective::MaxGap => l.p90,
    }
}

/// Server CPU-seconds over a run, from the monitor's samples.
pub fn server_cpu_seconds(r: &Results) -> Option<f64> {
    let samples = &r.server.as_ref()?.samples;
    let mut total = 0.0;
    for w in samples.windows(2) {
        let cpu = w[1]
            .server
            .as_ref()
            .filter(|t| t.alive)
            .map_or(0.0, |t| t.cpu_pct);
        total += cpu / 100.0 * (w[1].t_s - w[0].t_s).max(0.0);
    }
    (total > 0.0).then_some(total)
}

fn stats(runs: &[&Results], objective: Objective) -> Option<ConfigStats> {
    let throughput: Vec<f64> = runs.iter().map(|r| r.summary.throughput_rps).collect();
    let peak = |f: &dyn Fn(&crate::server::Summary) -> Option<f64>| {
        runs.iter()
            .filter_map(|r| r.server.as_ref().and_then(|s| f(&s.summary)))
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let peak_rss = peak(&|s| s.server_rss_bytes.map(|m| m.peak));
    let total_requests: u64 = runs.iter().map(|r| r.summary.requests.total).sum();
    let cpu_s: f64 = runs.iter().filter_map(|r| server_cpu_seconds(r)).sum();
    let latencies: Vec<f64> = runs.iter().map(|r| latency(r, objective)).collect();
    let (t, latency_ms) = match runs {
        [one] => (
            Spread::of_one_run(
                one.summary.throughput_rps,
                &per_second(one, |p| Some(p.requests as f64)),
            ),
            Spread::of_one_run(
                latencies[0],
                &per_second(one, |p| second_latency(p, objective)),
            ),
        ),
        _ => (Spread::of(&throughput)?, Spread::of(&latencies)?),
    };
    Some(ConfigStats {
        throughput_rps: t,
        latency_ms,
        error_rate: runs
            .iter()
            .map(|r| r.summary.requests.error_rate)
            .fold(0.0, f64::max),
        peak_cpu_pct: peak(&|s| s.server_cpu_pct.map(|m| m.peak)),
        peak_rss_bytes: peak_rss,
        peak_accept_queue: peak(&|s| s.server_accept_queue.map(|m| m.peak)),
        requests_per_cpu_s: (cpu_s > 0.0).then(|| total_requests as f64 / cpu_s),
        rps_per_gib: peak_rss
            .filter(|b| *b > 0.0)
            .map(|b| t.median / (b / (1u64 << 30) as f64)),
        capacity: None,
        event_gap_ms: Spread::of(
            &runs
                .iter()
                .filter_map(|r| event_gap_ms(r))
                .collect::<Vec<_>>(),
        ),
        event_failed: runs.iter().filter_map(|r| event_failed(r)).max(),
    })
}

/// The objective's figure and whether higher is better.
fn score(s: &ConfigStats, objective: Objective) -> (Spread, bool) {
    match objective {
        Objective::Throughput => (s.throughput_rps, true),
        Objective::Capacity => (s.capacity.unwrap_or_default(), true),
        Objective::MaxGap => (s.event_gap_ms.unwrap_or_default(), false),
        _ => (s.latency_ms, false),
    }
}

/// Fills each configuration's status, stats and representative results,
/// ranks the eligible ones, and names the winner.
pub fn summarise(study: &Ranking, configs: &mut [ConfigReport], interrupted: bool) -> StudyReport {
    for c in configs.iter_mut() {
        fill_config(study, c);
    }
    let eligible = eligible_ranked(study, configs);
    let ranking: Vec<String> = eligible.iter().map(|c| c.label.clone()).collect();
    let mut within_noise = Vec::new();
    let winner = eligible
        .first()
        .map(|best| winner(study, best, &eligible[1..], &mut within_noise));
    StudyReport {
        headroom_version: env!("CARGO_PKG_VERSION").into(),
        study: study.study.clone(),
        objective: study.objective,
        error_budget: study.error_budget,
        repeat: study.repeat,
        configs: configs.to_vec(),
        ranking,
        winner,
        within_noise,
        interrupted,
    }
}

/// A configuration's status, stats over its runs, and representative
/// results (the median run by the objective).
fn fill_config(study: &Ranking, c: &mut ConfigReport) {
    let ok: Vec<&Results> = c
        .runs
        .iter()
        .filter(|r| r.status == "ok")
        .filter_map(|r| r.results.as_ref())
        .collect();
    c.status = match c.runs.iter().rev().find(|r| r.status != "ok") {
        Some(bad) => bad.status.clone(),
        None if c.runs.is_empty() => "not run".into(),
        None => "ok".into(),
    };
    c.stats = stats(&ok, study.objective);
    if let Some(st) = &mut c.stats {
        let found: Vec<f64> = c
            .runs
            .iter()
            .filter(|r| r.status == "ok")
            .filter_map(|r| r.capacity.as_ref()?.capacity)
            .collect();
        st.capacity = Spread::of(&found);
    }
    // The representative run: the median by the objective.
    let mut ranked: Vec<&Results> = ok.clone();
    let key = |r: &&Results| match study.objective {
        Objective::Throughput => r.summary.throughput_rps,
        Objective::MaxGap => event_gap_ms(r).unwrap_or(f64::MAX),
        o => latency(r, o),
    };
    ranked.sort_by(|a, b| key(a).total_cmp(&key(b)));
    c.results = ranked
        .get(ranked.len().saturating_sub(1) / 2)
        .map(|r| (*r).clone())
        .or_else(|| c.runs.iter().rev().find_map(|r| r.results.clone()));
}

/// The configurations that ran and kept within the error budget, best
/// first by the objective.
fn eligible_ranked<'c>(study: &Ranking, configs: &'c [ConfigReport]) -> Vec<&'c ConfigReport> {
    let mut eligible: Vec<&ConfigReport> = configs
        .iter()
        .filter(|c| {
            c.status == "ok"
                && c.stats.as_ref().is_some_and(|s| {
                    // A capacity already holds the objective's own error bound.
                    if study.objective == Objective::Capacity {
                        s.capacity.is_some()
                    } else if study.objective == Objective::MaxGap {
                        s.event_gap_ms.is_some() && s.error_rate <= study.error_budget
                    } else {
                        s.error_rate <= study.error_budget
                    }
                })
        })
        .collect();
    eligible.sort_by(|a, b| {
        let (sa, higher) = score(
            a.stats.as_ref().expect("eligible has stats"),
            study.objective,
        );
        let (sb, _) = score(
            b.stats.as_ref().expect("eligible has stats"),
            study.objective,
        );
        if higher {
            sb.median.total_cmp(&sa.median)
        } else {
            sa.median.total_cmp(&sb.median)
        }
    });
    eligible
}

/// The winner, and why; the others within noise of it are added to
/// `within_noise`.
fn winner(
    study: &Ranking,
    best: &ConfigReport,
    others: &[&ConfigReport],
    within_noise: &mut Vec<String>,
) -> Winner {
    let s = best.stats.as_ref().expect("eligible has stats");
    let (spread, _) = score(s, study.objective);
    for other in others {
        let (o, _) = score(
            other.stats.as_ref().expect("eligible has stats"),
            study.objective,
        );
        if spread.overlaps(&o) {
            within_noise.push(other.label.clone());
        }
    }
    let figure = match study.objective {
        Objective::Throughput => format!("{:.1} req/s", spread.median),
        Objective::Capacity => {
            let unit = best
                .runs
                .iter()
                .find_map(|r| r.capacity.as_ref())
                .map_or("req/s", |c| c.unit.as_str());
            format!("{:.1} {unit}", spread.median)
        }
        Objective::MaxGap => format!(
            "{:.0} ms without an OK response, {} requests failed around events",
            spread.median,
            s.event_failed.unwrap_or(0)
        ),
        _ => format!("{:.2} ms", spread.median),
    };
    let mut reason = match best.runs.iter().find_map(|r| r.capacity.as_ref()) {
        Some(cap) => format!("{}: {figure} at {}", study.objective.describe(), cap.slo),
        None => format!(
            "{}: {figure} with errors {:.2} % (budget {:.2} %)",
            study.objective.describe(),
            s.error_rate * 100.0,
            study.error_budget * 100.0
        ),
    };
    if spread.runs >= 2 {
        reason.push_str(&format!(
            " over {} runs (95 % CI {:.1}–{:.1})",
            spread.runs, spread.low, spread.high
        ));
    }
    if !within_noise.is_empty() {
        reason.push_str(&format!(
            "; within noise of {} — not a clear winner{}",
            within_noise.join(", "),
            if spread.runs < 2 {
                " (one run each: use repeat = 3 to tell them apart)"
            } else {
                ""
            }
        ));
    }
    Winner {
        server: best.server.clone(),
        params: best.params.clone(),
        label: best.label.clone(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::RunRecord;
    use std::collections::BTreeMap;

    /// A run with the given throughput (req/s), p90 (ms) and error rate.
    fn results(throughput: f64, p90: f64, error_rate: f64) -> Results {
        let mut r: Results =
            serde_json::from_str(include_str!("../../tests/data/results-min.json"))
                .expect("fixture parses");
        r.summary.throughput_rps = throughput;
        r.summary.latency_ms.p90 = p90;
        r.summary.requests.error_rate = error_rate;
        r
    }

    fn config(label: &str, runs: Vec<(&str, Results)>) -> ConfigReport {
        ConfigReport {
            server: "s".into(),
            params: BTreeMap::new(),
            label: label.into(),
            status: String::new(),
            results: None,
            runs: runs
                .into_iter()
                .enumerate()
                .map(|(i, (status, r))| RunRecord {
                    round: i as u32 + 1,
                    status: status.into(),
                    results: Some(r),
                    stderr_tail: None,
                    pgid: 0,
                    capacity: None,
                    survivors: 0,
                    stray_killed: 0,
                })
                .collect(),
            stats: None,
        }
    }

    fn study(objective: Objective) -> Ranking {
        Ranking {
            study: "study.toml".into(),
            objective,
            error_budget: 0.01,
            repeat: 1,
        }
    }

    fn four_configs() -> Vec<ConfigReport> {
        vec![
            config("a", vec![("ok", results(1000.0, 10.0, 0.0))]),
            // The fastest, but over the 1 % error budget.
            config("b", vec![("ok", results(1500.0, 5.0, 0.05))]),
            config("c", vec![("ok", results(1200.0, 20.0, 0.005))]),
            config(
                "d",
                vec![("died during the run", results(2000.0, 1.0, 0.0))],
            ),
        ]
    }

    #[test]
    fn ranks_by_the_objective_within_the_error_budget() {
        let mut configs = four_configs();
        let report = summarise(&study(Objective::Throughput), &mut configs, false);
        assert_eq!(report.ranking, ["c", "a"]);
        let winner = report.winner.expect("a winner");
        assert_eq!(winner.label, "c");
        assert!(winner.reason.contains("1200.0 req/s"), "{}", winner.reason);
        assert_eq!(report.configs[3].status, "died during the run");
        // Single runs 20 % apart are not within noise of each other.
        assert!(report.within_noise.is_empty());

        let mut configs = four_configs();
        let report = summarise(&study(Objective::P90), &mut configs, false);
        assert_eq!(report.ranking, ["a", "c"], "lowest p90 first");
    }

    #[test]
    fn the_representative_run_is_the_median_and_overlapping_runs_are_noise() {
        let mut configs = vec![
            config(
                "x",
                vec![
                    ("ok", results(100.0, 10.0, 0.0)),
                    ("ok", results(110.0, 10.0, 0.0)),
                    ("ok", results(105.0, 10.0, 0.0)),
                ],
            ),
            config(
                "y",
                vec![
                    ("ok", results(104.0, 10.0, 0.0)),
                    ("ok", results(108.0, 10.0, 0.0)),
                    ("ok", results(102.0, 10.0, 0.0)),
                ],
            ),
        ];
        let mut s = study(Objective::Throughput);
        s.repeat = 3;
        let report = summarise(&s, &mut configs, false);
        let x = &report.configs[0];
        assert_eq!(
            x.results.as_ref().map(|r| r.summary.throughput_rps),
            Some(105.0)
        );
        assert_eq!(x.stats.as_ref().map(|s| s.throughput_rps.runs), Some(3));
        assert_eq!(report.winner.as_ref().map(|w| w.label.as_str()), Some("x"));
        assert_eq!(report.within_noise, ["y"]);
        assert!(report.winner.unwrap().reason.contains("not a clear winner"));
    }

    #[test]
    fn spread_and_noise() {
        let s = Spread::of(&[100.0, 102.0, 98.0]).unwrap();
        assert_eq!(s.median, 100.0);
        // mean 100, sd 2, t(2 df) = 4.303: ±4.97
        assert!(
            (s.high - 104.97).abs() < 0.01 && (s.low - 95.03).abs() < 0.01,
            "{s:?}"
        );
        let far = Spread::of(&[150.0, 151.0, 149.0]).unwrap();
        assert!(!s.overlaps(&far));
        let near = Spread::of(&[103.0, 101.0, 104.0]).unwrap();
        assert!(s.overlaps(&near));
        let one = Spread::of(&[100.0]).unwrap();
        assert!(one.overlaps(&Spread::of(&[102.0]).unwrap()));
        assert!(!one.overlaps(&Spread::of(&[110.0]).unwrap()));
        assert_eq!(Spread::of(&[]), None);
    }

    /// A single run with the given seconds (requests completed in each).
    fn run_of_seconds(requests: &[u64]) -> Results {
        let mut r = results(0.0, 10.0, 0.0);
        r.timeline = requests
            .iter()
            .enumerate()
            .map(|(i, &n)| TimelinePoint {
                t_s: i as u32 + 1,
                requests: n,
                ok: n,
                p90_ms: Some(10.0),
                ..Default::default()
            })
            .collect();
        let whole = &requests[1..requests.len() - 1];
        r.summary.throughput_rps = whole.iter().sum::<u64>() as f64 / whole.len() as f64;
        r
    }

    #[test]
    fn single_runs_that_wandered_more_than_they_differ_are_a_tie() {
        // Poisson-like seconds around 44 and 41 req/s (8 % apart; 5.6 % in
        // seed 003's open-model study): the seconds say it is noise.
        let noisy_a = [
            20, 52, 38, 49, 35, 47, 41, 55, 40, 44, 37, 50, 43, 39, 48, 30,
        ];
        let noisy_b = [
            25, 36, 47, 40, 33, 45, 50, 38, 42, 35, 44, 39, 46, 41, 37, 12,
        ];
        let mut configs = vec![
            config("a", vec![("ok", run_of_seconds(&noisy_a))]),
            config("b", vec![("ok", run_of_seconds(&noisy_b))]),
        ];
        let a = configs[0].runs[0]
            .results
            .as_ref()
            .unwrap()
            .summary
            .throughput_rps;
        let b = configs[1].runs[0]
            .results
            .as_ref()
            .unwrap()
            .summary
            .throughput_rps;
        assert!(a / b > 1.04 && a / b < 1.09, "{a} vs {b}");
        let report = summarise(&study(Objective::Throughput), &mut configs, false);
        assert_eq!(report.ranking, ["a", "b"]);
        assert_eq!(report.within_noise, ["b"]);
        let spread = report.configs[0].stats.as_ref().unwrap().throughput_rps;
        assert!(
            spread.low < a && spread.high > a && spread.runs == 1,
            "{spread:?}"
        );

        // Steady seconds 5 % apart: a clear winner.
        let steady_a = [10, 105, 104, 106, 105, 105, 104, 106, 5];
        let steady_b = [10, 100, 99, 101, 100, 100, 101, 99, 5];
        let mut configs = vec![
            config("a", vec![("ok", run_of_seconds(&steady_a))]),
            config("b", vec![("ok", run_of_seconds(&steady_b))]),
        ];
        let report = summarise(&study(Objective::Throughput), &mut configs, false);
        assert_eq!(report.ranking, ["a", "b"]);
        assert!(
            report.within_noise.is_empty(),
            "{:?}",
            report.configs[0].stats
        );
    }

    #[test]
    fn one_run_with_few_seconds_has_no_interval() {
        let s = Spread::of_one_run(100.0, &[90.0, 110.0, 100.0]);
        assert_eq!((s.low, s.high), (100.0, 100.0));
        let s = Spread::of_one_run(100.0, &[98.0, 102.0, 98.0, 102.0, 100.0]);
        // sd 2, n 5, t(4 df) = 2.776: ±2.48
        assert!((s.high - 102.48).abs() < 0.01, "{s:?}");
    }
}
