//! Shards run as one fleet, shown and judged while they run: each shard
//! reports its seconds (`report`: `run --report-to`), the coordinator
//! merges them exactly and publishes them as one run's (`view`).
//!
//! ```text
//!  shard ──Report line per second──▶ pipe (run --processes)
//!                                    pod log (k8s run, kubectl logs -f)
//!                                    HTTP POST (headroom fleet)
//!                                        │
//!                      coordinator: Fleet (exact merge) → FleetView
//!                      live line · metrics · dashboard · aborts → stop shards
//! ```

pub mod report;
pub mod serve;
pub mod view;

use super::args::{DashboardArgs, FleetOutputArgs, MetricsArgs};
use super::dashboard::Dashboard;
use super::live::{Live, ProgressMode};
use super::metrics::Exporter;
use super::outputs::{finish, Outputs};
use anyhow::Context;
use clap::Parser;
use headroom_engine::StopSignal;
use headroom_objectives::slo::Slo;
use headroom_records::merge::{merge, ShardFile};
use std::path::Path;

/// The scenario as the shards build it (`run SCENARIO RUN_FLAGS`), and
/// the thresholds of the run flags: the coordinator's plan, for the
/// fleet's view, thresholds and aborts.
pub fn fleet_scenario(
    scenario: &Path,
    run_flags: &[String],
) -> anyhow::Result<(headroom_scenario::Scenario, Slo)> {
    let words = ["run".to_string(), scenario.display().to_string()]
        .into_iter()
        .chain(run_flags.iter().cloned());
    let run = super::args::RunOnly::try_parse_from(words)
        .map_err(|e| anyhow::anyhow!("the run flags after `--`: {e}"))?;
    let thresholds = Outputs::from_args(&run.run).thresholds;
    Ok((plan_of(&run.run)?, thresholds))
}

/// The scenario with the run flags over it; a host only the cluster can
/// resolve is stood in for (the plan is used for its requests and load).
fn plan_of(run: &super::args::RunArgs) -> anyhow::Result<headroom_scenario::Scenario> {
    match super::run::scenario_from_args(run) {
        Err(e) if format!("{e:#}").contains("cannot resolve host") => {
            let mut stand_in = run.clone();
            stand_in.connect_to.push("::127.0.0.1:9".into());
            super::run::scenario_from_args(&stand_in)
                .or_else(|_| {
                    stand_in.connect_to.clear();
                    stand_in.base_url = Some("http://127.0.0.1:9".into());
                    super::run::scenario_from_args(&stand_in)
                })
                .context("the scenario's plan")
        }
        other => other,
    }
}

/// A coordinator's live side: the fleet's view, and where it is
/// published (`--metrics-*`, `--dashboard`).
pub struct Coordinator<'a> {
    pub view: view::FleetView<'a>,
    exporter: Option<Exporter>,
    dashboard: Option<Dashboard>,
}

impl<'a> Coordinator<'a> {
    /// The view of `shards` shards of `scenario`'s plan (a second waits
    /// `grace` for late ones: see `headroom_measure::fleet`), its aborting
    /// thresholds judged on the fleet; `title` names the fleet on the page.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        scenario: &'a headroom_scenario::Scenario,
        (shards, grace): (usize, std::time::Duration),
        progress: ProgressMode,
        quiet: bool,
        metrics: &MetricsArgs,
        dashboard: &DashboardArgs,
        stop: &StopSignal,
        title: &str,
    ) -> anyhow::Result<Coordinator<'a>> {
        let exporter = Exporter::start(metrics)?;
        let dashboard = Dashboard::start(dashboard, stop, title, None)?;
        let mode = if quiet { ProgressMode::Never } else { progress };
        let plan = &scenario.plan;
        let view = view::FleetView::new(
            plan,
            headroom_measure::fleet::Fleet::new(shards, grace),
            &scenario.aborts,
            Live::new(plan.load_duration(), mode),
            exporter.as_ref().map(|e| e.metrics.clone()),
            dashboard.as_ref().map(|d| d.feed.clone()),
            quiet,
        );
        Ok(Coordinator {
            view,
            exporter,
            dashboard,
        })
    }
}

/// The outputs of a coordinator's flags, with the run flags' thresholds.
pub fn outputs(args: &FleetOutputArgs, thresholds: Slo) -> Outputs<'_> {
    Outputs {
        out: args.out.as_deref(),
        html: args.reports.html.as_deref(),
        markdown: args.reports.markdown,
        quiet: args.quiet,
        progress: args.progress.into(),
        thresholds,
        ..Outputs::default()
    }
}

/// What a coordinator holds when its shards have ended.
pub struct FleetEnd<'a> {
    pub stop: &'a StopSignal,
    pub coordinator: Coordinator<'a>,
    /// The plan's own thresholds (the flags' are in the outputs').
    pub thresholds: &'a Slo,
    /// The coordinator's monitor, when it watched the server: it saw the
    /// server and the generators as a whole, its findings judge the merge.
    pub monitor: Option<headroom_monitor::Monitor>,
}

/// The shards' results merged, stopped early as the fleet was, published
/// and written; the thresholds judged on the merge. The exit code.
pub fn finish_fleet(
    files: Vec<ShardFile>,
    end: FleetEnd,
    mut outputs: Outputs,
) -> anyhow::Result<i32> {
    let FleetEnd {
        stop,
        coordinator,
        thresholds,
        monitor,
    } = end;
    if files.is_empty() {
        anyhow::bail!("no shard left results: nothing to merge");
    }
    let mut results = merge(files, true, super::common::recording(&[], &[]).command)
        .context("the shards' results")?;
    if let Some(monitor) = monitor {
        let cores = headroom_records::server::machine::available_cores();
        results.attach_server(monitor.finish(cores, &results.client_facts()));
    }
    // The shards were stopped by the coordinator: interrupted only when
    // it was (Ctrl-C), stopped early when the fleet breached a threshold.
    results.interrupted = stop.was_interrupted();
    if let Some(breach) = coordinator.view.aborted() {
        results.abort = Some(breach.clone());
        results.interrupted = false;
    }
    // The shards measure; the coordinator publishes the merged figures.
    if let Some(exporter) = coordinator.exporter {
        exporter.metrics.finish(&Vec::new(), &results);
        super::metrics::finish(Some(exporter));
    }
    if let Some(d) = &coordinator.dashboard {
        d.feed.finish(&results);
        outputs.dashboard = Some(d.feed.clone());
    }
    let intervals = results.histograms.per_second.clone();
    let code = finish(results, thresholds, &outputs, &intervals);
    // Everything written: the page may stay up (--dashboard-linger).
    if let Some(d) = coordinator.dashboard {
        d.finish();
    }
    code
}
