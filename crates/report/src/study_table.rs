//! The comparison: one row per configuration with the seeds' columns plus
//! peak server CPU and memory, the efficiency figures and the findings;
//! ranked rows first, then the ones that failed or broke the error budget.

use crate::table::{csv_field, Table};
use crate::terminal::thousands;
use headroom_records::study::Objective;
use headroom_records::study::StudyReport;
use std::io::{self, Write};

/// (terminal header, CSV header) of each column.
const COLUMNS: [(&str, &str); 19] = [
    ("#", "rank"),
    ("Configuration", "configuration"),
    ("Status", "status"),
    ("Samples", "samples"),
    ("Mean ms", "mean_ms"),
    ("Median ms", "median_ms"),
    ("90% ms", "p90_ms"),
    ("99% ms", "p99_ms"),
    ("Min ms", "min_ms"),
    ("Max ms", "max_ms"),
    ("Throughput/s", "throughput_rps"),
    ("Received KiB/s", "received_kib_per_s"),
    ("Errors %", "error_pct"),
    ("Peak CPU %", "peak_cpu_pct"),
    ("Peak MiB", "peak_rss_mib"),
    ("Peak queue", "peak_accept_queue"),
    ("Req/CPU-s", "requests_per_cpu_s"),
    ("Req/s per GiB", "rps_per_gib"),
    ("Findings", "findings"),
];

/// Where the capacity column goes (objective "capacity" only).
const CAPACITY_AT: usize = 3;

/// The comparison as a table; `csv` picks the CSV headers.
pub fn table(report: &StudyReport, csv: bool) -> Table {
    let unit = report
        .configs
        .iter()
        .flat_map(|c| &c.runs)
        .find_map(|r| r.capacity.as_ref())
        .map_or("req/s".to_string(), |c| c.unit.clone());
    let capacity = report.objective == Objective::Capacity;
    let mut headers: Vec<String> = COLUMNS
        .iter()
        .map(|(t, c)| if csv { c } else { t }.to_string())
        .collect();
    if capacity {
        let h = if csv {
            format!("capacity_{}", unit.replace('/', "_per_"))
        } else {
            format!("Capacity {unit}")
        };
        headers.insert(CAPACITY_AT, h);
    }
    let last = headers.len() - 1;
    let mut t = Table {
        headers,
        rows: Vec::new(),
        left: vec![1, 2, last],
    };
    for mut row in rows(report) {
        if capacity {
            row.insert(CAPACITY_AT, String::new());
        }
        t.rows.push(row);
    }
    if has_events(report) {
        // What users felt around the events, after Errors %.
        let at = t
            .headers
            .iter()
            .position(|h| h == "Errors %" || h == "error_pct")
            .map_or(t.headers.len(), |i| i + 1);
        let (gap, failed) = if csv {
            ("event_max_gap_ms", "event_failed")
        } else {
            ("Event gap ms", "Event failed")
        };
        t.insert_headers(at, [gap.into(), failed.into()]);
        for row in &mut t.rows {
            let label = row[1].clone();
            let r = report
                .configs
                .iter()
                .find(|c| c.label == label)
                .and_then(|c| c.results.as_ref());
            let gap = r.and_then(headroom_records::study::rank::event_gap_ms);
            let failed = r.and_then(headroom_records::study::rank::event_failed);
            row.insert(at, failed.map_or("-".into(), |f| f.to_string()));
            row.insert(at, gap.map_or("-".into(), |g| format!("{g:.0}")));
        }
    }
    add_service_columns(report, &mut t, csv);
    if capacity {
        for row in &mut t.rows {
            let label = &row[1];
            let c = report.configs.iter().find(|c| &c.label == label);
            row[CAPACITY_AT] = c
                .and_then(|c| c.stats.as_ref())
                .and_then(|s| s.capacity)
                .map_or("-".into(), |s| {
                    if s.runs >= 2 {
                        format!("{:.1} ±{:.1}", s.median, (s.high - s.low) / 2.0)
                    } else {
                        format!("{:.1}", s.median)
                    }
                });
        }
    }
    t
}

/// A study's services (a database, a cache) each get their peak CPU and
/// memory, after the server's figures: what they took is not the server's.
fn add_service_columns(report: &StudyReport, t: &mut Table, csv: bool) {
    let services = |c: &headroom_records::study::ConfigReport| {
        c.results
            .as_ref()
            .and_then(|r| r.server.as_ref())
            .map(|s| s.summary.services.clone())
            .unwrap_or_default()
    };
    let names: std::collections::BTreeSet<String> = report
        .configs
        .iter()
        .flat_map(|c| services(c).into_keys())
        .collect();
    let Some(mut at) = t
        .headers
        .iter()
        .position(|h| h == "Peak queue" || h == "peak_accept_queue")
        .map(|i| i + 1)
    else {
        return;
    };
    for name in names {
        let (cpu, mem) = if csv {
            (
                format!("{name}_peak_cpu_pct"),
                format!("{name}_peak_rss_mib"),
            )
        } else {
            (format!("{name} CPU %"), format!("{name} MiB"))
        };
        t.insert_headers(at, [cpu, mem]);
        for row in &mut t.rows {
            let service = report
                .configs
                .iter()
                .find(|c| c.label == row[1])
                .and_then(|c| services(c).remove(&name));
            let peak = |v: Option<headroom_records::server::MeanPeak>,
                        f: &dyn Fn(f64) -> String| {
                v.map_or("-".to_string(), |v| f(v.peak))
            };
            let s = service.unwrap_or_default();
            row.insert(at, peak(s.rss_bytes, &|b| format!("{:.0}", b / 1048576.0)));
            row.insert(at, peak(s.cpu_pct, &|p| format!("{p:.0}")));
        }
        at += 2;
    }
}

/// Did any configuration's runs have events?
fn has_events(report: &StudyReport) -> bool {
    report
        .configs
        .iter()
        .filter_map(|c| c.results.as_ref())
        .any(|r| !r.events.is_empty())
}

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
                    row.push(opt(st.and_then(|s| s.peak_accept_queue), &|v| {
                        format!("{v:.0}")
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
                None => row.extend(std::iter::repeat_n("-".to_string(), COLUMNS.len() - 3)),
            }
            row
        })
        .collect()
}

pub fn write(out: &mut dyn Write, report: &StudyReport) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Study: {} — ranked by {}{}",
        report.study,
        report.objective.describe(),
        if report.objective == Objective::Capacity {
            String::new()
        } else {
            format!(" (error budget {:.2} %)", report.error_budget * 100.0)
        }
    )?;
    table(report, false).write_text(out)?;
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

/// `study.csv`: the same table, with units in the header.
pub fn csv(report: &StudyReport) -> String {
    let t = table(report, true);
    let samples = t.headers.iter().position(|h| h == "samples");
    let mut out = t.headers.join(",") + "\n";
    for row in &t.rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            // Samples are printed with thousands separators.
            .map(|(i, c)| {
                if Some(i) == samples {
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
