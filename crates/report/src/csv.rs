//! `--csv DIR`: the run as spreadsheet-ready files, one header row each,
//! units in the column names — `timeline.csv` (per second),
//! `requests.csv` (per request name and the total) and `server.csv` (the
//! monitor's samples). Written with the `csv` crate.

use headroom_records::results::{Results, Summary};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Writes the three files into `dir` (created if needed); returns their paths.
pub fn write_run(dir: &Path, r: &Results) -> Result<Vec<PathBuf>, csv::Error> {
    std::fs::create_dir_all(dir)?;
    let paths = vec![
        dir.join("timeline.csv"),
        dir.join("requests.csv"),
        dir.join("server.csv"),
    ];
    timeline(&paths[0], r)?;
    requests(&paths[1], r)?;
    server(&paths[2], r)?;
    Ok(paths)
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

fn timeline(path: &Path, r: &Results) -> Result<(), csv::Error> {
    let classes: BTreeSet<&String> = r.timeline.iter().flat_map(|p| p.errors.keys()).collect();
    let mut w = csv::Writer::from_path(path)?;
    let mut header: Vec<String> = [
        "t_s",
        "requests",
        "ok",
        "failed",
        "received_bytes",
        "p50_ms",
        "p90_ms",
        "p99_ms",
        "max_ms",
        "mean_ms",
        "send_lag_p99_ms",
        "active_users",
        "in_flight",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(classes.iter().map(|c| format!("errors_{c}")));
    w.write_record(&header)?;
    for p in &r.timeline {
        let mut row = vec![
            p.t_s.to_string(),
            p.requests.to_string(),
            p.ok.to_string(),
            p.failed.to_string(),
            p.bytes.to_string(),
            opt(p.p50_ms),
            opt(p.p90_ms),
            opt(p.p99_ms),
            opt(p.max_ms),
            opt(p.mean_ms),
            opt(p.send_lag_p99_ms),
            p.active_users.to_string(),
            p.in_flight.to_string(),
        ];
        row.extend(
            classes
                .iter()
                .map(|c| p.errors.get(*c).copied().unwrap_or(0).to_string()),
        );
        w.write_record(&row)?;
    }
    w.flush()?;
    Ok(())
}

fn summary_row(name: &str, s: &Summary) -> Vec<String> {
    let l = &s.latency_ms;
    vec![
        name.to_string(),
        s.requests.total.to_string(),
        s.requests.ok.to_string(),
        s.requests.failed.to_string(),
        (s.requests.error_rate * 100.0).to_string(),
        s.throughput_rps.to_string(),
        s.received_kib_per_s.to_string(),
        l.mean.to_string(),
        l.min.to_string(),
        l.p50.to_string(),
        l.p90.to_string(),
        l.p95.to_string(),
        l.p99.to_string(),
        l.max.to_string(),
    ]
}

fn requests(path: &Path, r: &Results) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_path(path)?;
    w.write_record([
        "name",
        "samples",
        "ok",
        "failed",
        "error_pct",
        "throughput_rps",
        "received_kib_per_s",
        "mean_ms",
        "min_ms",
        "p50_ms",
        "p90_ms",
        "p95_ms",
        "p99_ms",
        "max_ms",
    ])?;
    for (name, s) in &r.per_request {
        w.write_record(summary_row(name, s))?;
    }
    w.write_record(summary_row("TOTAL", &r.summary))?;
    w.flush()?;
    Ok(())
}

fn server(path: &Path, r: &Results) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_path(path)?;
    w.write_record([
        "t_s",
        "server_cpu_pct",
        "server_rss_bytes",
        "server_processes",
        "server_threads",
        "server_fds",
        "machine_cpu_busy_pct",
        "machine_iowait_pct",
        "load1",
        "mem_available_bytes",
        "swap_used_bytes",
        "tcp_established",
        "tcp_time_wait",
        "listen_overflows",
        "generator_cpu_pct",
    ])?;
    for s in r.server.iter().flat_map(|s| &s.samples) {
        let t = s.server.as_ref().filter(|t| t.alive);
        let m = s.machine.as_ref();
        w.write_record([
            s.t_s.to_string(),
            opt(t.map(|t| t.cpu_pct)),
            opt(t.map(|t| t.rss_bytes as f64)),
            opt(t.map(|t| t.processes as f64)),
            opt(t.map(|t| t.threads as f64)),
            opt(t.map(|t| t.fds as f64)),
            opt(m.map(|m| 100.0 - m.cpu_idle_pct)),
            opt(m.map(|m| m.cpu_iowait_pct)),
            opt(m.map(|m| m.load1)),
            opt(m.map(|m| m.mem_available_bytes as f64)),
            opt(m.map(|m| m.swap_used_bytes as f64)),
            opt(m.map(|m| m.tcp_established as f64)),
            opt(m.map(|m| m.tcp_time_wait as f64)),
            opt(m.map(|m| m.listen_overflows as f64)),
            opt(s.generator.as_ref().map(|g| g.cpu_pct)),
        ])?;
    }
    w.flush()?;
    Ok(())
}
