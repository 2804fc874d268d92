//! What a measured run leaves behind: the results file (or `--out -`:
//! JSON on stdout), HTML, CSV, the HdrHistogram log, JUnit, the summary —
//! and the exit code. Shared by `run`, `run --processes`, `merge` and
//! `k8s collect`, so a merged run is written exactly as a single one.

use super::args::RunArgs;
use super::exit::{exit_interrupted, EXIT_ERROR, EXIT_NOT_WRITTEN, EXIT_OK, EXIT_THRESHOLDS};
use super::report::write_silently;
use anyhow::Context;
use headroom_objectives::slo::Slo;
use headroom_records::Results;
use headroom_report::html;
use headroom_report::terminal;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Where `execute` writes what it measured, besides the summary.
#[derive(Default)]
pub struct Outputs<'args> {
    pub out: Option<&'args Path>,
    /// Where the results go when `out` cannot be written (else the
    /// system's temporary folder).
    pub out_fallback: Option<&'args Path>,
    pub html: Option<&'args Path>,
    pub csv: Option<&'args Path>,
    pub hdr_log: Option<&'args Path>,
    pub junit: Option<&'args Path>,
    pub markdown: bool,
    /// Nothing but errors.
    pub quiet: bool,
    pub progress: crate::cli::live::ProgressMode,
    /// Flags' thresholds (the plan's own are added).
    pub thresholds: Slo,
    /// The live dashboard, which links the HTML report at the end.
    pub dashboard: Option<headroom_measure::dashboard::Feed>,
    /// A shard of a fleet (`--report-to`): its coordinator is sent the
    /// results, and judges the thresholds (this exit code does not).
    pub reporter: Option<&'args super::fleet::report::Reporter>,
}

impl<'args> Outputs<'args> {
    /// Every output path can be written: checked before the load.
    pub fn check_writable(&self) -> anyhow::Result<()> {
        for (path, flag) in [
            (self.out.filter(|p| !is_stdout(p)), "--out"),
            (self.html, "--html"),
            (self.hdr_log, "--hdr-log"),
            (self.junit, "--junit"),
        ] {
            if let Some(path) = path {
                super::report::check_writable(path, flag)?;
            }
        }
        if let Some(dir) = self.csv {
            super::report::check_writable_dir(dir, "--csv")?;
        }
        Ok(())
    }

    pub fn from_args(args: &'args RunArgs) -> Outputs<'args> {
        Outputs {
            out: args.out.as_deref(),
            out_fallback: args.out_fallback.as_deref(),
            html: args.reports.html.as_deref(),
            csv: args.csv.as_deref(),
            hdr_log: args.hdr_log.as_deref(),
            junit: args.junit.as_deref(),
            markdown: args.reports.markdown,
            quiet: args.quiet,
            progress: args.progress.into(),
            thresholds: Slo {
                // An --abort-on bound is a threshold too.
                bounds: args
                    .thresholds
                    .iter()
                    .chain(&args.abort_on)
                    .flat_map(|s| s.bounds.clone())
                    .collect(),
            },
            dashboard: None,
            reporter: None,
        }
    }
}

/// Writes the results JSON to `path`; when that fails (a full disk, a
/// folder gone), to `fallback` or else a file in the system's temporary
/// folder, so what was measured is never lost. An error either way: the
/// results are not where they were asked for.
fn write_results(path: &Path, fallback: Option<&Path>, json: &str) -> anyhow::Result<String> {
    let Err(e) = headroom_records::write_replacing(path, json.as_bytes()) else {
        return Ok(format!("results written to {}", path.display()));
    };
    let fallback = fallback.map(Path::to_path_buf).unwrap_or_else(|| {
        let stamp = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        std::env::temp_dir().join(format!(
            "headroom-results-{stamp}-{}.json",
            std::process::id()
        ))
    });
    match headroom_records::write_replacing(&fallback, json.as_bytes()) {
        Ok(()) => anyhow::bail!(
            "cannot write results to {} ({e}); they were written to {} instead",
            path.display(),
            fallback.display()
        ),
        Err(again) => anyhow::bail!(
            "cannot write results to {} ({e}), nor to {} ({again}): only the summary above is left",
            path.display(),
            fallback.display()
        ),
    }
}

/// `-` as an output file: standard output.
pub fn is_stdout(path: &Path) -> bool {
    path == Path::new("-")
}

/// Checks the thresholds (the plan's and the flags'), writes every output
/// and prints the summary of measured `results`. Returns the exit code.
pub fn finish(
    mut results: Results,
    plan_thresholds: &Slo,
    outputs: &Outputs,
    latency_intervals: &[String],
) -> anyhow::Result<i32> {
    let mut thresholds = plan_thresholds.clone();
    thresholds
        .bounds
        .extend(outputs.thresholds.bounds.iter().cloned());
    results.thresholds = headroom_records::check::against(&thresholds, &results, None);
    let breached = results.thresholds.iter().any(|c| !c.passed);
    // `--out -`: the results JSON is stdout; everything for people goes to
    // stderr, so the JSON can be piped as it is.
    let json_to_stdout = outputs.out.is_some_and(is_stdout);
    let mut people: Box<dyn std::io::Write> = if json_to_stdout {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    };
    // The summary first: whatever happens to the files (a full disk), the
    // figures are on the terminal. Then the files, then the lines naming
    // them (or saying what could not be written, and where it went). A
    // reader that closed the output (`| head`) stops the printing, never
    // the files: the results measured are written all the same.
    let printed = write_summary(&mut people, &results, outputs)
        .and_then(|()| people.flush().map_err(anyhow::Error::from));
    let (written, not_written) = write_files(&results, outputs, latency_intervals)?;
    if printed.is_ok() && !outputs.quiet && !outputs.markdown {
        let named = (|| -> std::io::Result<()> {
            if !written.is_empty() {
                writeln!(people)?;
            }
            for line in &written {
                writeln!(people, "{line}")?;
            }
            people.flush()
        })();
        // The files are written; only their names went unread.
        let _ = named;
    }
    drop(people);
    for e in &not_written {
        eprintln!("headroom: error: {e}");
    }
    if !not_written.is_empty() {
        return Ok(EXIT_NOT_WRITTEN);
    }
    Ok(exit_code(&results, outputs, breached))
}

/// The run's summary (and its thresholds) for people, or its Markdown.
fn write_summary(
    people: &mut dyn std::io::Write,
    results: &Results,
    outputs: &Outputs,
) -> anyhow::Result<()> {
    if outputs.markdown {
        write!(people, "{}", super::report::run_markdown(results))?;
    } else if !outputs.quiet {
        let stdout = people;
        terminal::write_summary(stdout, results)?;
        if !results.thresholds.is_empty() {
            writeln!(stdout, "\nThresholds:")?;
            for c in &results.thresholds {
                writeln!(
                    stdout,
                    "  {} {}",
                    if c.passed { "pass" } else { "FAIL" },
                    c.describe()
                )?;
            }
        }
    }
    Ok(())
}

/// Every output file asked for (and the results to a coordinator, or as
/// JSON on stdout): the lines naming what was written, and what could
/// not be.
fn write_files(
    results: &Results,
    outputs: &Outputs,
    latency_intervals: &[String],
) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let json_to_stdout = outputs.out.is_some_and(is_stdout);
    let mut written = Vec::new();
    let mut not_written = Vec::new();
    let mut keep = |outcome: anyhow::Result<String>| match outcome {
        Ok(line) => written.push(line),
        Err(e) => not_written.push(format!("{e:#}")),
    };
    if let Some(reporter) = outputs.reporter {
        keep(
            reporter
                .results(&serde_json::to_string(results)?)
                .map(|()| "results sent to the fleet's coordinator".to_string()),
        );
    }
    if let Some(path) = outputs.out {
        let json = serde_json::to_string_pretty(results)? + "\n";
        if json_to_stdout {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(json.as_bytes())?;
            stdout.flush()?;
        } else {
            keep(write_results(path, outputs.out_fallback, &json));
        }
    }
    if let Some(path) = outputs.html {
        keep(write_silently(
            path,
            "HTML report",
            html::run_report(results).as_bytes(),
        ));
    }
    if let Some(feed) = &outputs.dashboard {
        let results = results.clone();
        feed.offer_report(move || html::run_report(&results));
    }
    if let Some(dir) = outputs.csv {
        keep(
            headroom_report::csv::write_run(dir, results)
                .with_context(|| format!("cannot write CSV files into {}", dir.display()))
                .map(|_| format!("CSV files written to {}", dir.display())),
        );
    }
    if let Some(path) = outputs.hdr_log {
        let started_at = results
            .meta
            .started_at_unix_ms
            .map_or_else(SystemTime::now, |ms| {
                std::time::UNIX_EPOCH + Duration::from_millis(ms)
            });
        let log = headroom_report::hdrlog::interval_log(latency_intervals, started_at)?;
        keep(write_silently(path, "HdrHistogram interval log", &log));
    }
    if let Some(path) = outputs.junit {
        let xml = headroom_report::thresholds::junit_xml(
            &results.config.url,
            &results.thresholds,
            results.duration_s,
        );
        keep(write_silently(path, "JUnit XML", xml.as_bytes()));
    }
    Ok((written, not_written))
}

/// The exit code of a run whose outputs were written: interrupted, no
/// request sent, never connected, a shard (the fleet judges), stopped by
/// an abort, thresholds breached, or OK.
fn exit_code(results: &Results, outputs: &Outputs, breached: bool) -> i32 {
    let t = &results.summary.requests;
    let not_sent = results
        .summary
        .errors
        .get(headroom_metrics::ErrorClass::NotSent.key())
        .copied()
        .unwrap_or(0);
    // Requests a `before` script stopped were never meant to connect.
    let unsent_by_scripts = results
        .summary
        .errors
        .get(headroom_metrics::ErrorClass::ScriptError.key())
        .copied()
        .unwrap_or(0);
    let never_connected = t.total > not_sent + unsent_by_scripts && results.connections_opened == 0;
    let exit_code = if results.interrupted {
        exit_interrupted()
    } else if t.total > 0 && t.total == not_sent {
        let late = results.start_at.as_ref().filter(|s| s.late_ms >= 1.0);
        match late {
            Some(s) => eprintln!(
                "headroom: error: no request was sent: the run began {:.0} ms after --start-at {}, \
                 when every arrival of its schedule was already past",
                s.late_ms, s.at
            ),
            None => eprintln!(
                "headroom: error: no request was sent: every arrival was due while no connection \
                 was free"
            ),
        }
        EXIT_ERROR
    } else if never_connected {
        let why = results
            .summary
            .errors
            .keys()
            .next()
            .and_then(|k| headroom_metrics::ErrorClass::from_key(k))
            .map_or("no request was sent", |c| c.describe());
        eprintln!(
            "headroom: error: could not connect to {} ({why}): every request failed to connect",
            results.config.url,
        );
        EXIT_ERROR
    } else if outputs.reporter.is_some() {
        if breached && !outputs.quiet {
            eprintln!(
                "headroom: thresholds breached on this shard's share; the fleet's verdict is its \
                 coordinator's"
            );
        }
        EXIT_OK
    } else if let Some(a) = &results.abort {
        eprintln!(
            "headroom: stopped early at {:.0} s: {} breached over the last {:.0} s ({:.2})",
            a.at_s, a.threshold, a.window_s, a.actual
        );
        EXIT_THRESHOLDS
    } else if breached {
        let failed: Vec<&str> = results
            .thresholds
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.bound.as_str())
            .collect();
        eprintln!("headroom: thresholds breached: {}", failed.join(", "));
        EXIT_THRESHOLDS
    } else {
        EXIT_OK
    };
    exit_code
}
