//! `headroom study STUDY.toml`: run every configuration, print the
//! comparison, write study.json and study.csv.

use super::args::StudyArgs;
use super::run::install_interrupt;
use super::{EXIT_INTERRUPTED, EXIT_OK};
use anyhow::Context;
use headroom::engine::StopSignal;
use headroom::study::{self, Event, StudyOptions};

pub fn study(a: StudyArgs) -> anyhow::Result<i32> {
    let loaded = study::file::load(&a.study)?;
    study::check_scenario(&loaded).map_err(anyhow::Error::msg)?;
    let out_dir = a.out.clone().unwrap_or_else(|| {
        let stem = a
            .study
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("study");
        a.study.with_file_name(format!("{stem}-results"))
    });
    run_study(&loaded, out_dir, a.fresh, a.buckets, &a.reports)
}

pub fn run_study(
    loaded: &study::file::Study,
    out_dir: std::path::PathBuf,
    fresh: bool,
    buckets_ms: Vec<u64>,
    reports: &super::args::ReportArgs,
) -> anyhow::Result<i32> {
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let opts = StudyOptions {
        out_dir: out_dir.clone(),
        fresh,
        buckets_ms,
    };
    println!(
        "headroom study: {} configurations × {} run(s); results in {}",
        loaded.configs.len(),
        loaded.repeat,
        out_dir.display()
    );
    let report = study::run(loaded, &opts, &stop, |e| match e {
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
    })
    .with_context(|| format!("cannot write the study's results in {}", out_dir.display()))?;
    if let Some(path) = &reports.html {
        super::report::write_file(
            path,
            "HTML report",
            headroom::report::html::study_report(&report).as_bytes(),
        )?;
    }
    let mut stdout = std::io::stdout().lock();
    if reports.markdown {
        use std::io::Write;
        write!(stdout, "{}", study::table::table(&report, false).markdown())?;
    } else {
        study::table::write(&mut stdout, &report)?;
    }
    use std::io::Write;
    writeln!(
        stdout,
        "\nresults written to {}/study.json and study.csv",
        out_dir.display()
    )?;
    Ok(if report.interrupted {
        EXIT_INTERRUPTED
    } else {
        EXIT_OK
    })
}
