//! The step table and the answer, for the terminal (and Markdown).

use crate::table::Table;
use headroom_objectives::capacity::Axis;
use headroom_records::capacity::{CapacityReport, Step};
use std::io::{self, Write};

fn fmt_load(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// One row per step in the order run.
pub fn steps(report: &CapacityReport) -> Table {
    let offered = format!("Offered {}", report.unit);
    let mut t = Table::new(
        &[
            "Step",
            &offered,
            "Achieved req/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "Errors %",
            "Server CPU % (peak)",
            "Server MiB (peak)",
            "Result",
        ],
        &[9],
    );
    for s in &report.steps {
        t.push(row(s));
    }
    t
}

fn row(s: &Step) -> Vec<String> {
    let dash = || "-".to_string();
    let mut row = vec![
        s.index.to_string(),
        fmt_load(s.offered),
        format!("{:.1}", s.achieved),
    ];
    match &s.results {
        Some(r) => {
            let l = &r.summary.latency_ms;
            row.extend([
                format!("{:.2}", l.p50),
                format!("{:.2}", l.p90),
                format!("{:.2}", l.p99),
                format!("{:.2}", r.summary.requests.error_rate * 100.0),
            ]);
            let summary = r.server.as_ref().map(|s| &s.summary);
            row.push(
                summary
                    .and_then(|s| s.server_cpu_pct)
                    .map_or_else(dash, |m| format!("{:.0}", m.peak)),
            );
            row.push(
                summary
                    .and_then(|s| s.server_rss_bytes)
                    .map_or_else(dash, |m| format!("{:.1}", m.peak / 1048576.0)),
            );
        }
        None => row.extend(std::iter::repeat_n(dash(), 6)),
    }
    let mut failed: Vec<&str> = s
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.bound.as_str())
        .collect();
    if s.not_sustained() {
        failed.push("not sustained");
    }
    let mut result = if s.discarded {
        "void: generator-bound, tried again".to_string()
    } else if s.passed {
        "pass".to_string()
    } else {
        format!("FAIL {}", failed.join(" "))
    };
    if s.confirmation {
        result.push_str(" (confirmation)");
    } else if s.retest {
        result.push_str(" (re-test)");
    }
    row.push(result);
    row
}

/// The answer under the table.
pub fn write(out: &mut dyn Write, report: &CapacityReport) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Capacity search on {} — {} axis, objective {}",
        report.target,
        match report.axis {
            Axis::Rate => "arrival-rate",
            Axis::Users => "users",
        },
        report.slo
    )?;
    steps(report).write_text(out)?;
    writeln!(out)?;
    writeln!(out, "Answer: {}", report.verdict)?;
    if let Some(knee) = report.knee {
        writeln!(
            out,
            "Knee: {} {} ({} starts to climb there)",
            fmt_load(knee),
            report.unit,
            report.knee_metric
        )?;
    }
    if let (Some(kind), Some(detail)) = (&report.limited_by, &report.limited_by_detail) {
        writeln!(out, "Limited by: {kind} — {detail}")?;
    }
    if report.generator_bound {
        writeln!(
            out,
            "GENERATOR-BOUND: the figures describe headroom's limit on this machine, not the server's."
        )?;
    }
    Ok(())
}
