//! The comparison: one row per configuration with the seeds' columns plus
//! peak server CPU and memory, the efficiency figures and the findings;
//! ranked rows first, then the ones that failed or broke the error budget.

use super::StudyReport;
use crate::report::terminal::thousands;
use std::io::{self, Write};

const HEADERS: [&str; 18] = [
    "#",
    "Configuration",
    "Status",
    "Samples",
    "Mean ms",
    "Median ms",
    "90% ms",
    "99% ms",
    "Min ms",
    "Max ms",
    "Throughput/s",
    "Received KiB/s",
    "Errors %",
    "Peak CPU %",
    "Peak MiB",
    "Req/CPU-s",
    "Req/s per GiB",
    "Findings",
];

fn rows(report: &StudyReport) -> Vec<Vec<String>> {
    let mut order: Vec<usize> = report
        .ranking
        .iter()
        .filter_map(|l| report.configs.iter().position(|c| &c.label == l))
        .collect();
    for (i, _) in report.configs.iter().enumerate() {
        if !order.contains(&i) {
            order.push(i);
        }
    }
    order
        .into_iter()
        .map(|i| {
            let c = &report.configs[i];
            let rank = report
                .ranking
                .iter()
                .position(|l| l == &c.label)
                .map_or("-".to_string(), |p| (p + 1).to_string());
            let mut row = vec![rank, c.label.clone(), c.status.clone()];
            match &c.results {
                Some(r) => {
                    let s = &r.summary;
                    let l = &s.latency_ms;
                    row.extend([
                        thousands(s.requests.total),
                        format!("{:.2}", l.mean),
                        format!("{:.2}", l.p50),
                        format!("{:.2}", l.p90),
                        format!("{:.2}", l.p99),
                        format!("{:.2}", l.min),
                        format!("{:.2}", l.max),
                    ]);
                    let t = c.stats.as_ref().map(|x| x.throughput_rps);
                    row.push(match t {
                        Some(t) if t.runs >= 2 => {
                            format!("{:.1} ±{:.1}", t.median, (t.high - t.low) / 2.0)
                        }
                        Some(t) => format!("{:.1}", t.median),
                        None => format!("{:.1}", s.throughput_rps),
                    });
                    row.push(format!("{:.1}", s.received_kib_per_s));
                    row.push(format!("{:.2}", s.requests.error_rate * 100.0));
                    let st = c.stats.as_ref();
                    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".into(), f);
                    row.push(opt(st.and_then(|s| s.peak_cpu_pct), &|v| format!("{v:.0}")));
                    row.push(opt(st.and_then(|s| s.peak_rss_bytes), &|v| {
                        format!("{:.1}", v / 1048576.0)
                    }));
                    row.push(opt(st.and_then(|s| s.requests_per_cpu_s), &|v| {
                        format!("{v:.0}")
                    }));
                    row.push(opt(st.and_then(|s| s.rps_per_gib), &|v| format!("{v:.0}")));
                    let kinds: Vec<String> = r
                        .server
                        .iter()
                        .flat_map(|s| s.findings.iter().map(|f| f.kind.clone()))
                        .chain(r.generator_bound.then(|| "generator-bound".to_string()))
                        .collect();
                    row.push(if kinds.is_empty() {
                        "-".into()
                    } else {
                        kinds.join(" ")
                    });
                }
                None => row.extend(std::iter::repeat_n("-".to_string(), HEADERS.len() - 3)),
            }
            row
        })
        .collect()
}

pub fn write(out: &mut dyn Write, report: &StudyReport) -> io::Result<()> {
    let mut all = vec![HEADERS.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    all.extend(rows(report));
    let widths: Vec<usize> = (0..HEADERS.len())
        .map(|c| all.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    writeln!(out)?;
    writeln!(
        out,
        "Study: {} — ranked by {} (error budget {:.2} %)",
        report.study,
        report.objective.describe(),
        report.error_budget * 100.0
    )?;
    for row in &all {
        let mut line = String::from(" ");
        for (c, cell) in row.iter().enumerate() {
            let pad = " ".repeat(widths[c] - cell.chars().count());
            if c == 1 || c == 2 || c == HEADERS.len() - 1 {
                line.push_str(&format!(" {cell}{pad}"));
            } else {
                line.push_str(&format!(" {pad}{cell}"));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    writeln!(out)?;
    match &report.winner {
        Some(w) => writeln!(out, "Winner: {} — {}", w.label, w.reason)?,
        None => writeln!(
            out,
            "No winner: no configuration ran within the error budget"
        )?,
    }
    for c in report.configs.iter().filter(|c| c.status != "ok") {
        if let Some(tail) = c
            .runs
            .iter()
            .rev()
            .find_map(|r| r.stderr_tail.as_ref())
            .filter(|t| !t.trim().is_empty())
        {
            writeln!(out, "{} — {}; its stderr ends:", c.label, c.status)?;
            for line in tail.lines() {
                writeln!(out, "    {line}")?;
            }
        }
    }
    if report.interrupted {
        writeln!(
            out,
            "(interrupted: rerun with the same --out to finish the remaining configurations)"
        )?;
    }
    Ok(())
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `study.csv`: the same table, with units in the header.
pub fn csv(report: &StudyReport) -> String {
    let header = [
        "rank",
        "configuration",
        "status",
        "samples",
        "mean_ms",
        "median_ms",
        "p90_ms",
        "p99_ms",
        "min_ms",
        "max_ms",
        "throughput_rps",
        "received_kib_per_s",
        "error_pct",
        "peak_cpu_pct",
        "peak_rss_mib",
        "requests_per_cpu_s",
        "rps_per_gib",
        "findings",
    ];
    let mut out = header.join(",") + "\n";
    for row in rows(report) {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 3 {
                    c.replace(',', "")
                } else {
                    c.clone()
                }
            })
            .map(|c| csv_field(&c))
            .collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}
