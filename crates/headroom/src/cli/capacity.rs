//! `headroom capacity`: the scenario (file or one-liner) and monitor as for
//! `run`, the search settings from flags over the scenario's `[capacity]`;
//! step-by-step progress, the step table and the answer; `cap.json`.

use super::args::CapacityArgs;
use super::common::recording;
use super::exit::install_interrupt;
use super::exit::{exit_interrupted, EXIT_ERROR, EXIT_OK};
use super::run::{scenario_from_args, watch_from_args};
use anyhow::{bail, Context};
use headroom_capacity::Event;
use headroom_engine::StopSignal;
use headroom_objectives::capacity::{Axis, Settings};
use headroom_records::capacity::{CapacityReport, Outcome};
use headroom_report::capacity_table;
use std::io::Write;
use std::time::Duration;

/// `run`'s flags that a capacity search sets itself or has no use for:
/// refused when given, and left out of `capacity --help` (by clap id).
pub const NOT_FOR_CAPACITY: &[&str] = &[
    "rate",
    "stages",
    "duration",
    "requests",
    "iterations",
    "vus",
    "ramp_up",
    "thresholds",
    "junit",
    "csv",
    "hdr_log",
    "events",
    "abort_on",
    "abort_delay",
    "abort_window",
];

fn check_flags(args: &CapacityArgs) -> anyhow::Result<()> {
    let r = &args.run;
    for (set, flag) in [
        (r.rate.is_some(), "--rate"),
        (r.stages.is_some(), "--stages"),
        (r.duration.is_some(), "--duration"),
        (r.requests.is_some(), "--requests"),
        (r.iterations.is_some(), "--iterations"),
        (r.vus.is_some(), "--vus"),
        (r.ramp_up.is_some(), "--ramp-up"),
        (!r.thresholds.is_empty(), "--threshold"),
        (r.junit.is_some(), "--junit"),
        (r.csv.is_some(), "--csv"),
        (r.hdr_log.is_some(), "--hdr-log"),
        (!r.events.is_empty(), "--event"),
        (!r.abort_on.is_empty(), "--abort-on"),
        (r.abort_delay.is_some(), "--abort-delay"),
        (r.abort_window.is_some(), "--abort-window"),
    ] {
        if set {
            bail!(
                "{flag} does not apply to a capacity search: the search sets the load of each \
                 step (use --axis, --min, --max and --step-duration)"
            );
        }
    }
    Ok(())
}

/// The children's `headroom run` words: this command line after
/// `capacity`, without the search's own flags and what the parent keeps
/// (outputs, monitor, dashboard).
fn shard_words(processes: u32, share_threads: bool) -> Vec<String> {
    use clap::Args;
    let run_flags: Vec<String> = super::args::RunArgs::augment_args(clap::Command::new("run"))
        .get_arguments()
        .filter_map(|a| a.get_long().map(String::from))
        .collect();
    // The search's own flags: capacity's that `run` does not have.
    let search: Vec<(String, Option<char>, bool)> =
        CapacityArgs::augment_args(clap::Command::new("capacity"))
            .get_arguments()
            .filter_map(|a| {
                let long = a.get_long()?;
                (!run_flags.iter().any(|r| r == long)).then(|| {
                    (
                        format!("--{long}"),
                        a.get_short(),
                        a.get_action().takes_values(),
                    )
                })
            })
            .collect();
    let search: Vec<(&str, Option<char>, bool)> = search
        .iter()
        .map(|(l, s, v)| (l.as_str(), *s, *v))
        .collect();
    let words: Vec<String> = std::env::args().collect();
    let after = words
        .iter()
        .position(|w| w == "capacity")
        .map_or(&words[1..], |i| &words[i + 1..]);
    let mut kept = super::processes::child_args(after, &search);
    if share_threads {
        kept.extend(super::processes::threads_each(processes));
    }
    kept
}

/// Every step on pods of a cluster (`--k8s`): the scenario file and this
/// command line's run flags in each step's Job.
fn cluster_steps<'a>(
    args: &CapacityArgs,
    watch: &'a headroom_monitor::MonitorConfig,
    stop: &'a StopSignal,
    command: &[String],
) -> anyhow::Result<Option<super::k8s_steps::ClusterSteps<'a>>> {
    if !args.cluster.k8s {
        return Ok(None);
    }
    let Some(scenario) = args
        .run
        .scenario
        .clone()
        .filter(|s| !s.to_string_lossy().contains("://"))
    else {
        bail!(
            "--k8s needs a scenario file: the pods read it (and the files it reads) from a \
             ConfigMap; write the URL into one as base_url"
        );
    };
    // The run flags as given, without the scenario (the Job names its
    // copy in the ConfigMap) and without --threads shared out (each pod
    // has its own CPUs).
    let given = scenario.to_string_lossy();
    let run_flags = shard_words(1, false)
        .into_iter()
        .filter(|w| *w != given)
        .collect();
    let name = super::k8s_job::default_name(&scenario);
    let Some(runs) =
        super::k8s_steps::ClusterRuns::new(&args.cluster, &name, run_flags, command.to_vec())?
    else {
        return Ok(None);
    };
    eprintln!(
        "headroom: every step on {} pods of a Job ({name}-1, {name}-2, …) in namespace {}",
        args.cluster.shards.unwrap_or(1),
        args.cluster.namespace
    );
    Ok(Some(super::k8s_steps::ClusterSteps {
        runs,
        scenario,
        watch,
        stop,
    }))
}

/// The capacity report (`--out`), rewritten after every step.
fn save_report(path: Option<&std::path::Path>, report: &CapacityReport) -> anyhow::Result<()> {
    if let Some(path) = path {
        let json = serde_json::to_string_pretty(report)? + "\n";
        headroom_records::write_replacing(path, json.as_bytes())
            .with_context(|| format!("cannot write the capacity report to {}", path.display()))?;
    }
    Ok(())
}

/// The dashboard's last word on the search: its answer.
fn answer_event(report: &CapacityReport) -> serde_json::Value {
    serde_json::json!({
        "kind": "capacity",
        "capacity": report.capacity,
        "unit": report.unit,
        "verdict": report.verdict,
        "limited_by": report.limited_by,
        "knee": report.knee,
    })
}

/// The search's settings as the flags give them (the scenario's
/// `[capacity]` is laid under them).
fn search_settings(args: &CapacityArgs) -> Settings {
    Settings {
        slo: args.slo.clone(),
        axis: args.axis,
        min: args.min,
        max: args.max,
        growth: args.growth,
        precision: args.precision,
        step_duration: args.step_duration,
        warmup: args.warmup,
        pause: args.pause,
        max_time: args.max_time,
        confirm_duration: args.confirm_duration,
    }
}

/// What is searched, against what objective, how.
fn print_heading(
    plan: &headroom_engine::plan::Plan,
    opts: &headroom_capacity::Options,
    unit: &str,
) {
    println!(
        "headroom capacity: {} — objective {}; {} axis from {} to {} {unit}, steps of {} (+{} warm-up), at most {}",
        plan.label,
        opts.slo,
        match opts.axis {
            Axis::Rate => "rate",
            Axis::Users => "users",
        },
        opts.min,
        opts.max,
        humantime::format_duration(opts.step_duration),
        humantime::format_duration(opts.warmup),
        humantime::format_duration(opts.max_time),
    );
}

/// A step's line as it starts: its load and why it runs.
fn print_start(
    index: u32,
    (load, unit): (f64, &str),
    retest: bool,
    confirmation: Option<Duration>,
) {
    let why = match (confirmation, retest) {
        (Some(d), _) => format!(" (confirmation, {})", humantime::format_duration(d)),
        (None, true) => " (re-test)".into(),
        (None, false) => String::new(),
    };
    print!("  step {index}: {load} {unit}{why} … ");
}

/// A step's line, once it is measured: its rate, p90, errors, verdict.
fn print_step(step: &headroom_records::capacity::Step) {
    let (p90, errors) = step.results.as_ref().map_or((0.0, 0.0), |r| {
        (
            r.summary.latency_ms.p90,
            r.summary.requests.error_rate * 100.0,
        )
    });
    let failed = step.failed_checks();
    println!(
        "{:.1} req/s, p90 {p90:.2} ms, errors {errors:.2} % — {}",
        step.achieved,
        if step.discarded {
            let why = step
                .results
                .as_ref()
                .map_or(String::new(), |r| r.generator_bound_reasons.join("; "));
            format!("void, the generator could not keep up ({why}): trying this load again")
        } else if step.passed {
            "pass".to_string()
        } else {
            format!("FAIL: {}", failed.join(", "))
        }
    );
}

/// The HTML report, the dashboard's copy of it, and the step table (or
/// Markdown) on the terminal.
fn write_reports(
    args: &CapacityArgs,
    report: &CapacityReport,
    dashboard: Option<&super::dashboard::Dashboard>,
) -> anyhow::Result<()> {
    if let Some(path) = &args.run.reports.html {
        super::report::write_file(
            path,
            "HTML report",
            headroom_report::html::capacity_report(report).as_bytes(),
        )?;
    }
    if let Some(d) = dashboard {
        let report = report.clone();
        d.feed
            .offer_report(move || headroom_report::html::capacity_report(&report));
    }
    if args.run.reports.markdown {
        print!("{}", capacity_table::steps(report).markdown());
        println!("\n**{}**", report.verdict);
    } else if !args.run.quiet {
        let mut out = std::io::stdout().lock();
        capacity_table::write(&mut out, report)?;
        if let Some(path) = &args.run.out {
            writeln!(out, "\ncapacity report written to {}", path.display())?;
        }
    }
    Ok(())
}

pub fn capacity(args: CapacityArgs) -> anyhow::Result<i32> {
    check_flags(&args)?;
    let scenario = scenario_from_args(&args.run)?;
    let plan = &scenario.plan;
    let opts = scenario
        .capacity
        .overlay(&search_settings(&args))
        .resolve()
        .map_err(anyhow::Error::msg)?;
    super::run::check_request_names(&opts.slo, plan, "the objective")?;
    super::outputs::Outputs::from_args(&args.run).check_writable()?;
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let watch = watch_from_args(&args.run, plan)?;
    let unit = headroom_capacity::unit(opts.axis, plan);
    print_heading(plan, &opts, unit);
    let save = |report: &CapacityReport| save_report(args.run.out.as_deref(), report);
    super::common::check_protocol(plan)?;
    let mut save_error = None;
    let exporter = super::metrics::Exporter::start(&args.run.metrics)?;
    let dashboard = super::dashboard::Dashboard::start(
        &args.run.dashboard,
        &stop,
        &format!(
            "capacity of {}://{} ({})",
            if plan.endpoint.https { "https" } else { "http" },
            plan.endpoint.host_header,
            opts.slo
        ),
        None,
    )?;
    let mut record = recording(&args.run.buckets, &args.run.secret_header);
    record.live = exporter.as_ref().map(|e| e.metrics.clone());
    record.dashboard = dashboard.as_ref().map(|d| d.feed.clone());
    let feed = record.dashboard.clone();
    let mut sharded =
        args.processes
            .filter(|&p| p > 1)
            .map(|processes| super::processes::ShardedSteps {
                words: shard_words(processes, args.run.threads.is_none()),
                processes,
                stop: &stop,
                watch: &watch.config,
                command: record.command.clone(),
            });
    let mut on_cluster = cluster_steps(&args, &watch.config, &stop, &record.command)?;
    let mut in_process = headroom_capacity::InProcess {
        watch: &watch.config,
        stop: &stop,
        recording: &record,
    };
    let stepper: &mut dyn headroom_capacity::Stepper = match (&mut sharded, &mut on_cluster) {
        (Some(s), _) => s,
        (None, Some(c)) => c,
        (None, None) => &mut in_process,
    };
    let report = headroom_capacity::run_with(plan, &opts, &stop, stepper, |e| {
        if let Some(feed) = &feed {
            super::dashboard::capacity_event(feed, &e, unit);
        }
        match e {
            Event::Snapshot(so_far) => {
                if let Err(e) = save(so_far) {
                    save_error.get_or_insert(e);
                }
            }
            Event::Starting {
                index,
                load,
                retest,
                confirmation,
            } => print_start(index, (load, unit), retest, confirmation),
            Event::Finished(step) => print_step(step),
        }
        let _ = std::io::stdout().flush();
    });
    drop(watch.server);
    super::metrics::finish(exporter);
    if let Some(d) = &dashboard {
        d.feed.event(answer_event(&report));
    }
    save(&report)?;
    if let Some(e) = save_error {
        eprintln!("warning: a snapshot of the search could not be written: {e:#}");
    }
    write_reports(&args, &report, dashboard.as_ref())?;
    // Everything written: the page may stay up (--dashboard-linger).
    if let Some(d) = dashboard {
        d.finish();
    }
    Ok(match report.outcome {
        // A step that could not be measured (said on stderr: pods refused,
        // a shard that failed) ends the search as an interruption would,
        // but nobody interrupted it: an error.
        Outcome::Interrupted if !stop.is_stopping() => EXIT_ERROR,
        Outcome::Interrupted => exit_interrupted(),
        Outcome::ServerExited => EXIT_ERROR,
        _ => EXIT_OK,
    })
}
