//! `headroom compare before.json after.json …`: runs (or a study's
//! configurations) side by side, with each figure's change against the
//! first and a verdict — better, worse, or within noise.
//!
//! Noise: for a run, each figure's spread is the 95 % confidence interval
//! of its per-second values (full seconds only); for a study's
//! configuration, the interval over its repeats. A change is noise when
//! the intervals overlap, or when it is under 3 % (too small to matter on
//! a shared machine even when the seconds agree tightly).

use crate::table::Table;
use headroom_records::results::Results;
use headroom_records::study::rank::{per_second, Spread};
use headroom_records::study::StudyReport;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figure {
    /// The run's figure (its overall value, not a mean of seconds).
    pub value: f64,
    /// The spread used to judge noise; `None` when there is none.
    pub spread: Option<Spread>,
}

impl Figure {
    /// The figure as a spread for the noise rule (a point without one).
    fn spread_or_point(&self) -> Spread {
        self.spread.unwrap_or(Spread {
            median: self.value,
            low: self.value,
            high: self.value,
            runs: 1,
        })
    }
}

/// One compared metric.
pub struct Metric {
    pub key: &'static str,
    pub label: &'static str,
    pub higher_is_better: bool,
}

pub const METRICS: [Metric; 6] = [
    Metric {
        key: "throughput_rps",
        label: "Throughput req/s",
        higher_is_better: true,
    },
    Metric {
        key: "mean_ms",
        label: "Mean ms",
        higher_is_better: false,
    },
    Metric {
        key: "p50_ms",
        label: "p50 ms",
        higher_is_better: false,
    },
    Metric {
        key: "p90_ms",
        label: "p90 ms",
        higher_is_better: false,
    },
    Metric {
        key: "p99_ms",
        label: "p99 ms",
        higher_is_better: false,
    },
    Metric {
        key: "error_pct",
        label: "Errors %",
        higher_is_better: false,
    },
];

/// Everything compared: one column per run or configuration.
pub struct Comparison {
    pub names: Vec<String>,
    /// `figures[column][metric]`, in `METRICS` order.
    pub figures: Vec<Vec<Figure>>,
    /// Each column's load, as [`load_of`] describes it.
    pub loads: Vec<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    Noise,
    /// The runs had different loads: a p99 from 10 req/s and one from
    /// 1,000 req/s are not a regression of each other.
    DifferentLoad,
}

/// The load a run was measured under, in words: runs compare only when
/// theirs are the same.
pub fn load_of(r: &Results) -> String {
    let c = &r.config;
    let secs = |s: Option<f64>| s.map_or(String::new(), |s| format!(" for {s:.0} s"));
    match c.model.as_str() {
        "open" => format!(
            "open, {:.1}/s{}",
            r.target_rate_rps.unwrap_or(0.0),
            secs(c.planned_duration_s)
        ),
        _ => {
            let mut text = format!("closed, {} users", c.vus.unwrap_or(0));
            if let Some(i) = c.iterations {
                text.push_str(&format!(" × {i} iterations"));
            }
            if c.ramp_up_s.is_some_and(|r| r > 0.0) {
                text.push_str(&format!(", ramp-up {:.0} s", c.ramp_up_s.unwrap_or(0.0)));
            }
            if c.think_time_s.is_some_and(|t| t > 0.0) {
                text.push_str(&format!(", think {:.2} s", c.think_time_s.unwrap_or(0.0)));
            }
            text + &secs(c.planned_duration_s)
        }
    }
}

/// A run's figures, each with the interval its seconds give.
pub fn run_figures(r: &Results) -> Vec<Figure> {
    let l = &r.summary.latency_ms;
    let fig = |value: f64, seconds: Vec<f64>| {
        let spread = Spread::of_one_run(value, &seconds);
        Figure {
            value,
            spread: (spread.high > spread.low).then_some(spread),
        }
    };
    vec![
        fig(
            r.summary.throughput_rps,
            per_second(r, |p| Some(p.requests as f64)),
        ),
        fig(l.mean, per_second(r, |p| p.mean_ms)),
        fig(l.p50, per_second(r, |p| p.p50_ms)),
        fig(l.p90, per_second(r, |p| p.p90_ms)),
        fig(l.p99, per_second(r, |p| p.p99_ms)),
        fig(
            r.summary.requests.error_rate * 100.0,
            per_second(r, |p| {
                (p.requests > 0).then(|| p.failed as f64 * 100.0 / p.requests as f64)
            }),
        ),
    ]
}

/// A study's configuration: its representative run, with the spreads over
/// repeats where the study has them.
fn config_figures(c: &headroom_records::study::ConfigReport) -> Option<Vec<Figure>> {
    let r = c.results.as_ref()?;
    let mut f = run_figures(r);
    if let Some(st) = &c.stats {
        if st.throughput_rps.runs >= 2 {
            f[0] = Figure {
                value: st.throughput_rps.median,
                spread: Some(st.throughput_rps),
            };
        }
    }
    Some(f)
}

/// A compared file read as JSON; the error names the file.
pub fn read_json(p: &Path) -> Result<serde_json::Value, String> {
    let text =
        std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", p.display()))
}

impl Comparison {
    /// Reads run results and study results; a study adds a column per
    /// configuration.
    pub fn load(paths: &[impl AsRef<Path>]) -> Result<Comparison, String> {
        let mut names = Vec::new();
        let mut figures = Vec::new();
        let mut loads = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let value = read_json(p)?;
            let name = p
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("run")
                .to_string();
            if value.get("configs").is_some() {
                let study: StudyReport = headroom_records::from_json(&value)
                    .map_err(|e| format!("{}: not a study.json: {e}", p.display()))?;
                for c in &study.configs {
                    if let (Some(f), Some(r)) = (config_figures(c), &c.results) {
                        names.push(format!("{name}: {}", c.label));
                        figures.push(f);
                        loads.push(load_of(r));
                    }
                }
            } else {
                let r: Results = headroom_records::results_from_json(&value).map_err(|e| {
                    format!(
                        "{}: not a results file of `headroom run` or a study.json: {e}",
                        p.display()
                    )
                })?;
                names.push(name);
                figures.push(run_figures(&r));
                loads.push(load_of(&r));
            }
        }
        if names.len() < 2 {
            return Err(
                "compare needs at least two runs (or a study with two configurations)".into(),
            );
        }
        Ok(Comparison {
            names,
            figures,
            loads,
        })
    }

    /// Was column `col` measured under the first one's load?
    pub fn comparable(&self, col: usize) -> bool {
        self.loads.get(col) == self.loads.first()
    }

    /// What the reader must know before reading the deltas: the columns
    /// whose load differs from the first's.
    pub fn notes(&self) -> Vec<String> {
        (1..self.names.len())
            .filter(|&c| !self.comparable(c))
            .map(|c| {
                format!(
                    "{} ran a different load ({}) than {} ({}): its figures are shown, not \
                     judged — compare runs of the same load",
                    self.names[c], self.loads[c], self.names[0], self.loads[0]
                )
            })
            .collect()
    }

    /// How column `col` compares to the first on metric `m`.
    pub fn verdict(&self, col: usize, m: usize) -> Verdict {
        if !self.comparable(col) {
            return Verdict::DifferentLoad;
        }
        let (a, b) = (&self.figures[0][m], &self.figures[col][m]);
        if a.spread_or_point().overlaps(&b.spread_or_point()) {
            return Verdict::Noise;
        }
        let up = b.value > a.value;
        if up == METRICS[m].higher_is_better {
            Verdict::Better
        } else {
            Verdict::Worse
        }
    }

    /// Every figure of a later column that is worse than the first's
    /// beyond noise, as "p90 ms of after.json (+42.0 %)".
    pub fn regressions(&self) -> Vec<String> {
        let mut out = Vec::new();
        for col in 1..self.names.len() {
            for (m, metric) in METRICS.iter().enumerate() {
                if self.verdict(col, m) == Verdict::Worse {
                    let (a, b) = (self.figures[0][m].value, self.figures[col][m].value);
                    out.push(format!(
                        "{} of {}: {a:.2} → {b:.2}",
                        metric.label, self.names[col]
                    ));
                }
            }
        }
        out
    }

    pub fn values(&self, key: &str) -> Vec<f64> {
        let m = METRICS.iter().position(|x| x.key == key).unwrap_or(0);
        self.figures.iter().map(|f| f[m].value).collect()
    }

    /// Metric rows; for every column after the first, its value and the
    /// change against the first with the verdict.
    pub fn table(&self) -> Table {
        let mut headers = vec!["Metric".to_string(), self.names[0].clone()];
        for n in &self.names[1..] {
            headers.push(n.clone());
            headers.push(format!("Δ {n}"));
        }
        let mut left = vec![0];
        left.extend((1..self.names.len()).map(|i| 2 * i + 1));
        let mut t = Table {
            headers,
            rows: Vec::new(),
            left,
        };
        let mut load = vec!["Load".to_string(), self.loads[0].clone()];
        for col in 1..self.names.len() {
            load.push(self.loads[col].clone());
            load.push(
                if self.comparable(col) {
                    "same"
                } else {
                    "DIFFERENT"
                }
                .into(),
            );
        }
        t.push(load);
        for (m, metric) in METRICS.iter().enumerate() {
            let show = |f: &Figure| match f.spread {
                Some(s) if s.runs >= 2 => format!("{:.2} ±{:.2}", f.value, (s.high - s.low) / 2.0),
                _ => format!("{:.2}", f.value),
            };
            let mut row = vec![metric.label.to_string(), show(&self.figures[0][m])];
            for col in 1..self.names.len() {
                let (a, b) = (self.figures[0][m].value, self.figures[col][m].value);
                row.push(show(&self.figures[col][m]));
                let change = if a != 0.0 {
                    format!("{:+.1} %", (b - a) / a.abs() * 100.0)
                } else {
                    format!("{:+.2}", b - a)
                };
                let verdict = match self.verdict(col, m) {
                    Verdict::Noise => "noise",
                    Verdict::Better => "better",
                    Verdict::Worse => "WORSE",
                    Verdict::DifferentLoad => "not comparable",
                };
                row.push(format!("{change} {verdict}"));
            }
            t.push(row);
        }
        t
    }
}
