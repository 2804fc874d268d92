//! The events of a run as a table (terminal, Markdown, HTML): when each
//! ran, how it ended, and what users saw after it next to the same length
//! of time before it.

use crate::table::Table;
use headroom_records::events::{EventRecord, WindowFigures};
use headroom_records::Results;

fn ms(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{v:.1}"))
}

fn failed(w: &WindowFigures) -> String {
    if w.failed.is_empty() {
        return "0".into();
    }
    let classes: Vec<String> = w.failed.iter().map(|(c, n)| format!("{n} {c}")).collect();
    classes.join(", ")
}

fn outcome(e: &EventRecord) -> String {
    match (&e.error, e.exit_code) {
        (Some(err), _) => err.clone(),
        (None, Some(code)) => format!("exit {code}"),
        (None, None) => "—".into(),
    }
}

/// One row per event; `None` when the run had none.
pub fn table(r: &Results) -> Option<Table> {
    if r.events.is_empty() {
        return None;
    }
    let mut t = Table::new(
        &[
            "Event",
            "at s",
            "ran s",
            "outcome",
            "window s",
            "requests",
            "failed",
            "p99 ms",
            "max gap ms",
            "before: failed",
            "p99 ms",
            "max gap ms",
        ],
        &[0, 3, 6, 9],
    );
    for e in &r.events {
        let label: String = e.label.chars().take(40).collect();
        let mut row = vec![
            label,
            format!("{:.1}", e.at_s),
            format!("{:.3}–{:.3}", e.started_s, e.ended_s),
            outcome(e),
        ];
        match (&e.after, &e.before) {
            (Some(a), Some(b)) => row.extend([
                format!("{:.1}", a.to_s - a.from_s),
                a.requests.to_string(),
                failed(a),
                ms(a.p99_ms),
                format!("{:.0}", a.max_gap_ms),
                failed(b),
                ms(b.p99_ms),
                format!("{:.0}", b.max_gap_ms),
            ]),
            _ => row.extend(std::iter::repeat_n("—".to_string(), 8)),
        }
        t.push(row);
    }
    Some(t)
}
