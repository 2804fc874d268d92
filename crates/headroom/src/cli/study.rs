//! `headroom study STUDY.toml`: run every configuration, print the
//! comparison, write study.json and study.csv.

use super::args::StudyArgs;
use super::common::recording;
use super::exit::install_interrupt;
use super::exit::{exit_interrupted, EXIT_ERROR, EXIT_OK};
use anyhow::Context;
use headroom_engine::StopSignal;
use headroom_report::study_table;
use headroom_study::file::Study;
use headroom_study::{Event, StudyOptions};

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
    run_study(
        &loaded,
        out_dir,
        args.fresh,
        &args.buckets,
        &args.reports,
        &args.metrics,
    )
}

pub fn run_study(
    loaded: &Study,
    out_dir: std::path::PathBuf,
    fresh: bool,
    buckets_ms: &[u64],
    reports: &super::args::ReportArgs,
    metrics: &super::args::MetricsArgs,
) -> anyhow::Result<i32> {
    super::report::check_writable_dir(&out_dir, "--out")?;
    if let Some(html) = &reports.html {
        super::report::check_writable(html, "--html")?;
    }
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let exporter = super::metrics::Exporter::start(metrics)?;
    let mut recording = recording(buckets_ms, &[]);
    recording.live = exporter.as_ref().map(|e| e.metrics.clone());
    let opts = StudyOptions {
        out_dir: out_dir.clone(),
        fresh,
        recording,
    };
    println!(
        "headroom study: {} configurations × {} run(s); results in {}",
        loaded.configs.len(),
        loaded.repeat,
        out_dir.display()
    );
    let mut csv_error = None;
    let report = headroom_study::run(loaded, &opts, &stop, |e| match e {
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
        Event::Finished { label, record } => {
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
        // study.csv beside study.json, rewritten with it after every run.
        Event::Saved(so_far) => {
            let csv = out_dir.join("study.csv");
            if let Err(e) =
                headroom_records::write_replacing(&csv, study_table::csv(so_far).as_bytes())
            {
                csv_error.get_or_insert(e);
            }
        }
    })
    .with_context(|| format!("cannot write the study's results in {}", out_dir.display()))?;
    super::metrics::finish(exporter);
    if let Some(e) = csv_error {
        return Err(e).with_context(|| format!("cannot write study.csv in {}", out_dir.display()));
    }
    if let Some(path) = &reports.html {
        super::report::write_file(
            path,
            "HTML report",
            headroom_report::html::study_report(&report).as_bytes(),
        )?;
    }
    let mut stdout = std::io::stdout().lock();
    if reports.markdown {
        use std::io::Write;
        write!(stdout, "{}", study_table::table(&report, false).markdown())?;
    } else {
        study_table::write(&mut stdout, &report)?;
    }
    use std::io::Write;
    writeln!(
        stdout,
        "\nresults written to {}/study.json and study.csv",
        out_dir.display()
    )?;
    let measured = report.configs.iter().any(|c| {
        c.results
            .as_ref()
            .is_some_and(|r| r.summary.requests.total > 0)
    });
    Ok(if report.interrupted {
        exit_interrupted()
    } else if !measured {
        eprintln!("headroom: error: no configuration could be measured:");
        for c in &report.configs {
            eprintln!("  {}: {}", c.label, c.status);
        }
        EXIT_ERROR
    } else {
        EXIT_OK
    })
}
