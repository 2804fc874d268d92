//! `headroom study STUDY.toml`: run every configuration, print the
//! comparison, write study.json and study.csv.

use super::args::{DashboardArgs, StudyArgs};
use super::common::recording;
use super::dashboard::Dashboard;
use super::exit::install_interrupt;
use super::exit::{exit_interrupted, EXIT_ERROR, EXIT_OK};
use anyhow::Context;
use headroom_engine::StopSignal;
use headroom_measure::dashboard::Feed;
use headroom_records::study::{RunRecord, StudyReport};
use headroom_report::study_table;
use headroom_study::file::Study;
use headroom_study::{Event, Skips, StudyOptions};
use serde_json::json;

pub fn study(args: StudyArgs) -> anyhow::Result<i32> {
    let loaded = headroom_study::file::load(&args.study)?;
    headroom_study::check_scenario(&loaded).map_err(anyhow::Error::msg)?;
    let out_dir = args.out.clone().unwrap_or_else(|| {
        let stem = args
            .study
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("study");
        args.study.with_file_name(format!("{stem}-results"))
    });
    let command = recording(&args.buckets, &[]).command;
    let name = super::k8s_job::default_name(&args.study);
    let on_cluster =
        super::k8s_steps::ClusterRuns::new(&args.cluster, &name, Vec::new(), command.clone())?;
    let sharded = match on_cluster {
        Some(runs) => {
            Some(std::sync::Arc::new(runs) as std::sync::Arc<dyn headroom_study::Sharded>)
        }
        None => args.processes.filter(|&p| p > 1).map(|processes| {
            std::sync::Arc::new(super::processes::StudyShards { processes, command })
                as std::sync::Arc<dyn headroom_study::Sharded>
        }),
    };
    run_study(
        &loaded,
        out_dir,
        Measuring {
            fresh: args.fresh,
            sharded,
        },
        &args.buckets,
        &args.reports,
        &args.metrics,
        &args.dashboard,
    )
}

/// How a study measures: from scratch or resuming; in this process or as
/// shards in several.
pub struct Measuring {
    pub fresh: bool,
    pub sharded: Option<std::sync::Arc<dyn headroom_study::Sharded>>,
}

pub fn run_study(
    loaded: &Study,
    out_dir: std::path::PathBuf,
    measuring: Measuring,
    buckets_ms: &[u64],
    reports: &super::args::ReportArgs,
    metrics: &super::args::MetricsArgs,
    dashboard: &DashboardArgs,
) -> anyhow::Result<i32> {
    let Measuring { fresh, sharded } = measuring;
    super::report::check_writable_dir(&out_dir, "--out")?;
    if let Some(html) = &reports.html {
        super::report::check_writable(html, "--html")?;
    }
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let exporter = super::metrics::Exporter::start(metrics)?;
    let skips = Skips::default();
    let dashboard = Dashboard::start(
        dashboard,
        &stop,
        &format!("study {}", loaded.path.display()),
        Some(skips.clone()),
    )?;
    let feed = dashboard.as_ref().map(|d| d.feed.clone());
    let mut recording = recording(buckets_ms, &[]);
    recording.live = exporter.as_ref().map(|e| e.metrics.clone());
    recording.dashboard = feed.clone();
    let opts = StudyOptions {
        out_dir: out_dir.clone(),
        fresh,
        recording,
        skips,
        sharded,
    };
    if let Some(feed) = &feed {
        feed.event(start_event(loaded));
    }
    println!(
        "headroom study: {} configurations × {} run(s); results in {}",
        loaded.configs.len(),
        loaded.repeat,
        out_dir.display()
    );
    let mut csv_error = None;
    let report = headroom_study::run(loaded, &opts, &stop, |e| {
        if let Some(feed) = &feed {
            study_event(feed, &e);
        }
        match e {
            Event::Skipped { label, round } => {
                println!("  {label} (run {round}): already measured, skipped")
            }
            Event::Starting {
                label,
                round,
                index,
                total,
            } => {
                println!("  [{index}/{total}] {label} (run {round}): starting")
            }
            Event::Finished { label, record } => print_finished(label, record),
            // study.csv beside study.json, rewritten with it after every run.
            Event::Saved(so_far) => {
                let csv = out_dir.join("study.csv");
                if let Err(e) =
                    headroom_records::write_replacing(&csv, study_table::csv(so_far).as_bytes())
                {
                    csv_error.get_or_insert(e);
                }
            }
            Event::Phase { .. } | Event::Capacity { .. } => {}
        }
    })
    .with_context(|| format!("cannot write the study's results in {}", out_dir.display()))?;
    super::metrics::finish(exporter);
    if let Some(e) = csv_error {
        return Err(e).with_context(|| format!("cannot write study.csv in {}", out_dir.display()));
    }
    write_report(&report, reports, feed.as_ref())?;
    print_table(&report, reports.markdown, &out_dir)?;
    // Everything written: the page may stay up (--dashboard-linger).
    if let Some(d) = dashboard {
        d.finish();
    }
    Ok(exit_code(&report))
}

/// The HTML report, and the dashboard's last word and copy of it.
fn write_report(
    report: &headroom_records::study::StudyReport,
    reports: &super::args::ReportArgs,
    feed: Option<&Feed>,
) -> anyhow::Result<()> {
    if let Some(path) = &reports.html {
        super::report::write_file(
            path,
            "HTML report",
            headroom_report::html::study_report(report).as_bytes(),
        )?;
    }
    if let Some(feed) = feed {
        feed.event(json!({
            "kind": "study_end",
            "interrupted": report.interrupted,
            "winner": report.winner.as_ref().map(|w| json!({"label": w.label, "reason": w.reason})),
        }));
        let report = report.clone();
        feed.offer_report(move || headroom_report::html::study_report(&report));
    }
    Ok(())
}

/// The dashboard's first word on a study: its grid, repeats, objective.
fn start_event(loaded: &Study) -> serde_json::Value {
    let configs: Vec<String> = loaded
        .configs
        .iter()
        .map(|c| headroom_records::study::label(&loaded.servers[c.server].name, &c.params))
        .collect();
    json!({
        "kind": "study_start",
        "configs": configs,
        "repeat": loaded.repeat,
        "objective": loaded.objective,
    })
}

/// A run's line once it is done: its status and figures.
fn print_finished(label: &str, record: &headroom_records::study::RunRecord) {
    let figures = record.results.as_ref().map_or(String::new(), |r| {
        format!(
            ": {:.1} req/s, p90 {:.2} ms, errors {:.2} %",
            r.summary.throughput_rps,
            r.summary.latency_ms.p90,
            r.summary.requests.error_rate * 100.0
        )
    });
    println!(
        "  {label} (run {round}): {}{figures}",
        record.status,
        round = record.round
    );
}

/// The comparison table (or its Markdown), and where the results are.
fn print_table(
    report: &headroom_records::study::StudyReport,
    markdown: bool,
    out_dir: &std::path::Path,
) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if markdown {
        write!(stdout, "{}", study_table::table(report, false).markdown())?;
    } else {
        study_table::write(&mut stdout, report)?;
    }
    writeln!(
        stdout,
        "\nresults written to {}/study.json and study.csv",
        out_dir.display()
    )?;
    Ok(())
}

/// Interrupted; no configuration measured (each one's status said); or OK.
fn exit_code(report: &headroom_records::study::StudyReport) -> i32 {
    let measured = report.configs.iter().any(|c| {
        c.results
            .as_ref()
            .is_some_and(|r| r.summary.requests.total > 0)
    });
    if report.interrupted {
        exit_interrupted()
    } else if !measured {
        eprintln!("headroom: error: no configuration could be measured:");
        for c in &report.configs {
            eprintln!("  {}: {}", c.label, c.status);
        }
        EXIT_ERROR
    } else {
        EXIT_OK
    }
}

/// A study's progress for the dashboard: each configuration's state, its
/// row when a run is done, the ranking (the terminal's table) so far.
fn study_event(feed: &Feed, e: &Event) {
    let state = |label: &str, round: u32, state: &str| {
        feed.event(json!({"kind": "config_state", "label": label, "round": round, "state": state}))
    };
    match e {
        Event::Skipped { label, round } => state(label, *round, "done (measured earlier)"),
        Event::Starting { label, round, .. } => state(label, *round, "starting"),
        Event::Phase {
            label,
            round,
            phase,
        } => state(label, *round, phase),
        Event::Capacity { event, unit } => super::dashboard::capacity_event(feed, event, unit),
        Event::Finished { label, record } => feed.event(config_done(label, record)),
        Event::Saved(so_far) => feed.event(ranking(so_far)),
    }
}

fn config_done(label: &str, record: &RunRecord) -> serde_json::Value {
    let state = match record.status.as_str() {
        "ok" => "done",
        headroom_study::SKIPPED => "skipped",
        _ => "failed",
    };
    let r = record.results.as_ref();
    json!({
        "kind": "config_state",
        "label": label,
        "round": record.round,
        "state": state,
        "status": record.status,
        "throughput_rps": r.map(|r| r.summary.throughput_rps),
        "p90_ms": r.map(|r| r.summary.latency_ms.p90),
        "p99_ms": r.map(|r| r.summary.latency_ms.p99),
        "error_pct": r.map(|r| r.summary.requests.error_rate * 100.0),
        "capacity": record.capacity.as_ref().and_then(|c| c.capacity),
    })
}

/// The comparison so far, as the terminal prints it.
fn ranking(so_far: &StudyReport) -> serde_json::Value {
    let t = study_table::table(so_far, false);
    json!({
        "kind": "ranking",
        "headers": t.headers,
        "rows": t.rows,
        "left": t.left,
        "winner": so_far.winner.as_ref().map(|w| w.label.clone()),
    })
}
