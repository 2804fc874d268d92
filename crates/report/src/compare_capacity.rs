//! `headroom compare before/cap.json after/cap.json …`: capacity searches
//! side by side. A search's answer is an interval — its capacity (the
//! highest load that passed, confirmed) up to the lowest load that failed —
//! so two answers are told apart only when their intervals do not overlap:
//! the later search is then better (wholly above) or worse (wholly below).
//! Searches with different objectives, axes or units are shown, not judged.

use crate::table::Table;
use headroom_records::capacity::CapacityReport;
use std::path::Path;

/// The searches compared, the first the baseline.
pub struct CapacityComparison {
    pub names: Vec<String>,
    pub reports: Vec<CapacityReport>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    Noise,
    /// Another objective, axis or unit: not the same question.
    DifferentQuestion,
}

/// Whether `value` is a capacity search's `cap.json`.
pub fn is_capacity(value: &serde_json::Value) -> bool {
    value.get("steps").is_some() && value.get("axis").is_some() && value.get("slo").is_some()
}

/// The answer as an interval: [capacity, lowest fail]; an open end is the
/// capacity itself (met up to `--max`: nothing failed).
fn range(r: &CapacityReport) -> Option<(f64, f64)> {
    let low = r.capacity?;
    Some((low, r.interval[1].unwrap_or(low).max(low)))
}

impl CapacityComparison {
    /// Reads `cap.json` files; every one must be a capacity search.
    pub fn load(paths: &[impl AsRef<Path>]) -> Result<CapacityComparison, String> {
        let mut names = Vec::new();
        let mut reports = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let value = crate::compare::read_json(p)?;
            if !is_capacity(&value) {
                return Err(format!(
                    "{}: not a cap.json — capacity searches compare only with capacity searches",
                    p.display()
                ));
            }
            let report: CapacityReport = serde_json::from_value(value)
                .map_err(|e| format!("{}: not a cap.json: {e}", p.display()))?;
            names.push(name_of(p));
            reports.push(report);
        }
        if reports.len() < 2 {
            return Err("compare needs at least two capacity searches".into());
        }
        Ok(CapacityComparison { names, reports })
    }

    /// How search `col` compares with the first.
    pub fn verdict(&self, col: usize) -> Verdict {
        let (a, b) = (&self.reports[0], &self.reports[col]);
        if a.slo != b.slo || a.axis != b.axis || a.unit != b.unit {
            return Verdict::DifferentQuestion;
        }
        match (range(a), range(b)) {
            (Some((_, a_high)), Some((b_low, _))) if b_low > a_high => Verdict::Better,
            (Some((a_low, _)), Some((_, b_high))) if b_high < a_low => Verdict::Worse,
            (Some(_), None) => Verdict::Worse,
            (None, Some(_)) => Verdict::Better,
            _ => Verdict::Noise,
        }
    }

    /// The later searches whose answer is below the first's beyond noise.
    pub fn regressions(&self) -> Vec<String> {
        (1..self.reports.len())
            .filter(|&c| self.verdict(c) == Verdict::Worse)
            .map(|c| {
                format!(
                    "capacity of {}: {} → {}",
                    self.names[c],
                    answer(&self.reports[0]),
                    answer(&self.reports[c])
                )
            })
            .collect()
    }

    /// What the reader must know: searches that asked another question.
    pub fn notes(&self) -> Vec<String> {
        let first = &self.reports[0];
        (1..self.reports.len())
            .filter(|&c| self.verdict(c) == Verdict::DifferentQuestion)
            .map(|c| {
                let r = &self.reports[c];
                format!(
                    "{} searched another objective or axis ({}, {}) than {} ({}, {}): shown, not judged",
                    self.names[c], r.slo, r.unit, self.names[0], first.slo, first.unit
                )
            })
            .collect()
    }

    /// A row per search: its answer, interval, confirmation, noise, knee,
    /// what ran out, and the verdict against the first.
    pub fn table(&self) -> Table {
        let mut t = Table::new(
            &[
                "Search",
                "Capacity",
                "Interval",
                "Confirmed",
                "Noise %",
                "Knee",
                "Limited by",
                "Objective",
                "vs first",
            ],
            &[0, 2, 3, 6, 7, 8],
        );
        for (c, r) in self.reports.iter().enumerate() {
            let interval = format!(
                "{} – {}",
                r.interval[0].map_or("-".into(), fmt),
                r.interval[1].map_or("-".into(), fmt)
            );
            let verdict = match (c, self.verdict(c)) {
                (0, _) => "baseline",
                (_, Verdict::Better) => "better",
                (_, Verdict::Worse) => "WORSE",
                (_, Verdict::Noise) => "noise (intervals overlap)",
                (_, Verdict::DifferentQuestion) => "not comparable",
            };
            t.push(vec![
                self.names[c].clone(),
                answer(r),
                interval,
                r.confirmed.map_or("no".into(), |_| "yes".into()),
                r.noise.map_or("-".into(), |n| format!("{:.1}", n * 100.0)),
                r.knee.map_or("-".into(), fmt),
                r.limited_by.clone().unwrap_or_else(|| "-".into()),
                r.slo.clone(),
                verdict.into(),
            ]);
        }
        t
    }
}

fn answer(r: &CapacityReport) -> String {
    r.capacity
        .map_or("none".into(), |c| format!("{} {}", fmt(c), r.unit))
}

fn fmt(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// A column's name: the file's folder and stem when the stems repeat
/// (`before/cap.json`), else the stem.
fn name_of(p: &Path) -> String {
    let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("search");
    match p
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|d| d.to_str())
    {
        Some(dir) if stem == "cap" => format!("{dir}/{stem}"),
        _ => stem.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(capacity: Option<f64>, high: Option<f64>) -> CapacityReport {
        let mut r: CapacityReport = serde_json::from_value(serde_json::json!({
            "headroom_version": "0", "target": "t", "axis": "rate", "unit": "req/s",
            "slo": "p90<300ms", "capacity": capacity, "interval": [capacity, high],
            "outcome": "found", "verdict": "", "limited_by": null, "limited_by_detail": null,
            "generator_bound": false, "knee": null, "knee_metric": "p90",
            "settings": {"min": 1.0, "max": 100.0, "growth": 2.0, "precision": 0.05,
                "step_duration_s": 2.0, "warmup_s": 1.0, "pause_s": 0.5, "max_time_s": 60.0},
            "elapsed_s": 1.0, "steps": []
        }))
        .unwrap();
        r.confirmed = capacity;
        r
    }

    #[test]
    fn answers_are_told_apart_only_when_their_intervals_do_not_overlap() {
        let cmp = CapacityComparison {
            names: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            reports: vec![
                search(Some(40.0), Some(41.25)),
                search(Some(41.0), Some(43.0)),
                search(Some(45.0), Some(47.0)),
                search(Some(30.0), Some(31.5)),
            ],
        };
        assert_eq!(cmp.verdict(1), Verdict::Noise);
        assert_eq!(cmp.verdict(2), Verdict::Better);
        assert_eq!(cmp.verdict(3), Verdict::Worse);
        assert_eq!(
            cmp.regressions(),
            vec!["capacity of d: 40 req/s → 30 req/s"]
        );
        let mut other = search(Some(45.0), Some(47.0));
        other.slo = "p99<1s".into();
        let cmp = CapacityComparison {
            names: vec!["a".into(), "e".into()],
            reports: vec![search(Some(40.0), Some(41.25)), other],
        };
        assert_eq!(cmp.verdict(1), Verdict::DifferentQuestion);
        assert_eq!(cmp.notes().len(), 1);
    }
}
