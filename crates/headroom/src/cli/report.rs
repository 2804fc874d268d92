//! `headroom report FILE --html OUT` (after the fact) and `headroom
//! compare A B …`; and the writers `run`, `study` and `capacity` share.

use super::args::{CompareArgs, ReportCmdArgs};
use super::exit::{EXIT_OK, EXIT_THRESHOLDS};
use anyhow::{bail, Context};
use headroom_records::capacity::CapacityReport;
use headroom_records::results::Results;
use headroom_records::study::StudyReport;
use headroom_records::{from_json, results_from_json};
use headroom_report::compare::Comparison;
use headroom_report::table::Table;
use headroom_report::{html, terminal};
use std::path::Path;

pub fn write_file(path: &Path, what: &str, bytes: &[u8]) -> anyhow::Result<()> {
    println!("{}", write_silently(path, what, bytes)?);
    Ok(())
}

/// Writes `bytes` to `path`; returns the line that says so, for the
/// caller to print after its summary.
pub fn write_silently(path: &Path, what: &str, bytes: &[u8]) -> anyhow::Result<String> {
    headroom_records::write_replacing(path, bytes)
        .with_context(|| format!("cannot write the {what} to {}", path.display()))?;
    Ok(format!("{what} written to {}", path.display()))
}

/// Checks, before any load is sent, that `path` can be written (`flag`
/// names it in the error): finding out after the run would lose what was
/// measured. Creates and removes the temporary file the write will use.
pub fn check_writable(path: &Path, flag: &str) -> anyhow::Result<()> {
    if path.is_dir() {
        bail!("{flag} {}: is a folder; give a file name", path.display());
    }
    let mut probe = path.as_os_str().to_owned();
    probe.push(".tmp");
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .with_context(|| format!("{flag} {}: cannot write there", path.display()))
}

/// As [`check_writable`], for a folder files will be written into (made
/// if missing).
pub fn check_writable_dir(dir: &Path, flag: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{flag} {}: cannot make the folder", dir.display()))?;
    check_writable(&dir.join(".headroom-write-check"), flag)
}

/// The run's summary tables as Markdown.
pub fn run_markdown(r: &Results) -> String {
    let mut md = format!("### {}\n\n", r.config.url);
    md.push_str(&terminal::aggregate_table(r).markdown());
    md.push('\n');
    md.push_str(&terminal::distribution_table(r).markdown());
    if !r.thresholds.is_empty() {
        md.push('\n');
        md.push_str(&headroom_report::thresholds::table(&r.thresholds).markdown());
    }
    if let Some(events) = headroom_report::events::table(r) {
        md.push('\n');
        md.push_str(&events.markdown());
    }
    if let Some(server) = &r.server {
        md.push_str(&server_markdown(server));
    }
    md
}

/// The server's block: its figures (when one was watched), restarts,
/// findings and what the monitor could not read.
fn server_markdown(server: &headroom_records::server::ServerReport) -> String {
    let mut md = String::new();
    if server.samples.iter().any(|s| s.server.is_some()) {
        md.push_str(&format!(
            "\n#### Server and machine ({}, every {:.1} s)\n\n",
            server.source, server.interval_s
        ));
        md.push_str(&terminal::server_table(server).markdown());
        md.push_str(&format!(
            "\nListen queue overflows: {}, SYNs dropped: {}.\n",
            server.summary.listen_overflows, server.summary.listen_drops
        ));
    }
    for r in &server.restarts {
        md.push_str(&format!(
            "\n- Server restarted by {:.1} s: pid {} → {} (found by {}).",
            r.t_s, r.old_pid, r.new_pid, r.how
        ));
    }
    if !server.findings.is_empty() {
        md.push_str("\n**Findings**\n\n");
        for f in &server.findings {
            md.push_str(&format!("- `{}`: {}\n", f.kind, f.message));
        }
    }
    for e in &server.errors {
        md.push_str(&format!("\nMonitor: {e}\n"));
    }
    md
}

/// What a JSON file written by headroom holds.
enum Kind {
    Run(Box<Results>),
    Study(Box<StudyReport>),
    Capacity(Box<CapacityReport>),
}

fn load(path: &Path) -> anyhow::Result<Kind> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let not_a = |what: &str, e: String| anyhow::anyhow!("{}: not {what}: {e}", path.display());
    let kind = if value.get("steps").is_some() {
        Kind::Capacity(Box::new(
            from_json(&value).map_err(|e| not_a("a capacity report", e))?,
        ))
    } else if value.get("configs").is_some() {
        Kind::Study(Box::new(
            from_json(&value).map_err(|e| not_a("a study.json", e))?,
        ))
    } else if value.get("meta").is_some() {
        Kind::Run(Box::new(
            results_from_json(&value).map_err(|e| not_a("a results file of `headroom run`", e))?,
        ))
    } else {
        bail!(
            "{}: not a file headroom wrote (results, study.json or capacity report)",
            path.display()
        );
    };
    Ok(kind)
}

pub fn report(args: ReportCmdArgs) -> anyhow::Result<i32> {
    let kind = load(&args.results)?;
    if args.reports.html.is_none() && !args.reports.markdown && args.csv.is_none() {
        bail!("say what to write: --html FILE, --markdown or --csv DIR");
    }
    match kind {
        Kind::Run(r) => {
            if let Some(p) = &args.reports.html {
                write_file(p, "HTML report", html::run_report(&r).as_bytes())?;
            }
            if let Some(dir) = &args.csv {
                headroom_report::csv::write_run(dir, &r)
                    .with_context(|| format!("cannot write CSV files into {}", dir.display()))?;
                println!("CSV files written to {}", dir.display());
            }
            if args.reports.markdown {
                print!("{}", run_markdown(&r));
            }
        }
        Kind::Study(s) => {
            if args.csv.is_some() {
                bail!("--csv is for a run's results (a study writes study.csv itself)");
            }
            if let Some(p) = &args.reports.html {
                write_file(p, "HTML report", html::study_report(&s).as_bytes())?;
            }
            if args.reports.markdown {
                print!(
                    "{}",
                    headroom_report::study_table::table(&s, false).markdown()
                );
            }
        }
        Kind::Capacity(c) => {
            if args.csv.is_some() {
                bail!("--csv is for a run's results");
            }
            if let Some(p) = &args.reports.html {
                write_file(p, "HTML report", html::capacity_report(&c).as_bytes())?;
            }
            if args.reports.markdown {
                print!("{}", headroom_report::capacity_table::steps(&c).markdown());
            }
        }
    }
    Ok(EXIT_OK)
}

/// Whether the first file compared is a capacity search's `cap.json`
/// (then every one must be).
fn first_is_capacity(files: &[std::path::PathBuf]) -> bool {
    let first = files
        .first()
        .map(|p| headroom_report::compare::read_json(p));
    first.is_some_and(|v| v.is_ok_and(|v| headroom_report::compare_capacity::is_capacity(&v)))
}

/// A comparison's table on the terminal (or as Markdown) under its
/// `heading`, then what the reader must know.
fn show_comparison(
    args: &CompareArgs,
    heading: &str,
    table: &Table,
    notes: Vec<String>,
) -> anyhow::Result<()> {
    if args.reports.markdown {
        print!("{}", table.markdown());
    } else {
        println!("{heading}");
        table.write_text(&mut std::io::stdout().lock())?;
    }
    for note in notes {
        println!("note: {note}");
    }
    Ok(())
}

/// `--fail-on-regression`: the exit code, naming every regression against
/// `baseline`.
fn regression_gate(args: &CompareArgs, baseline: &str, regressions: Vec<String>) -> i32 {
    if args.fail_on_regression && !regressions.is_empty() {
        eprintln!("regressed against {baseline}: {}", regressions.join("; "));
        return EXIT_THRESHOLDS;
    }
    EXIT_OK
}

/// `compare` of capacity searches: their answers side by side, each
/// judged by whether its interval overlaps the first's.
fn compare_capacities(args: &CompareArgs) -> anyhow::Result<i32> {
    use headroom_report::compare_capacity::CapacityComparison;
    let cmp = CapacityComparison::load(&args.files).map_err(anyhow::Error::msg)?;
    if args.reports.html.is_some() {
        anyhow::bail!(
            "--html: compared capacity searches have no HTML report yet (each search's own: \
             `headroom capacity … --html`)"
        );
    }
    let heading = format!(
        "Capacity compared with {} (noise: the intervals overlap):",
        cmp.names[0]
    );
    show_comparison(args, &heading, &cmp.table(), cmp.notes())?;
    Ok(regression_gate(args, &cmp.names[0], cmp.regressions()))
}

pub fn compare(args: CompareArgs) -> anyhow::Result<i32> {
    if first_is_capacity(&args.files) {
        return compare_capacities(&args);
    }
    let cmp = Comparison::load(&args.files).map_err(anyhow::Error::msg)?;
    let heading = format!(
        "Compared with {} (noise: spreads overlap, or a change under 3 %):",
        cmp.names[0]
    );
    show_comparison(&args, &heading, &cmp.table(), cmp.notes())?;
    if let Some(p) = &args.reports.html {
        write_file(p, "HTML report", html::compare_report(&cmp).as_bytes())?;
    }
    Ok(regression_gate(&args, &cmp.names[0], cmp.regressions()))
}
