//! `headroom run`: a scenario file or a one-liner URL → `Plan` → engine →
//! results file and summary. Flags override the scenario file; the
//! one-liner is turned into a scenario too, so both are validated alike.

use super::args::RunArgs;
use super::report::write_file;
use super::{EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_THRESHOLDS};
use anyhow::{bail, Context};
use headroom::engine::schedule::Stage;
use headroom::engine::StopSignal;
use headroom::http::Endpoint;
use headroom::measure::measure;
use headroom::monitor::launch::ServerProcess;
use headroom::monitor::remote::RemoteSource;
use headroom::monitor::MonitorConfig;
use headroom::plan::Plan;
use headroom::report::html;
use headroom::report::live::Live;
use headroom::report::terminal;
use headroom::scenario::raw::{
    Model, RawExpect, RawLoad, RawRequest, RawScenario, RawStage, RawStatus,
};
use headroom::slo::Slo;
use std::path::Path;
use std::time::Duration;

fn duration_text(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Flag combinations that make no sense, said in terms of flags.
fn check_flags(a: &RunArgs) -> anyhow::Result<()> {
    let open = a.rate.is_some() || a.stages.is_some();
    if open && a.vus.is_some() {
        bail!("--vus is for the closed model; with --rate or --stages use --connections to cap connections");
    }
    if open && (a.iterations.is_some() || a.ramp_up.is_some() || a.think_time.is_some()) {
        bail!("--iterations, --ramp-up and --think-time are for the closed model (--vus), not --rate/--stages");
    }
    if a.stages.is_some() && a.duration.is_some() {
        bail!("--duration and --stages both set the length of the run: give one");
    }
    for (value, flag) in [
        (a.vus.map(u64::from), "--vus"),
        (a.connections.map(u64::from), "--connections"),
        (a.requests, "--requests"),
        (a.threads.map(|t| t as u64), "--threads"),
    ] {
        if value == Some(0) {
            bail!("{flag} must be at least 1");
        }
    }
    if a.buckets.windows(2).any(|w| w[0] >= w[1]) {
        bail!("--buckets must be increasing, e.g. 800,1200");
    }
    Ok(())
}

/// Lays the flags over a scenario (file or one-liner): flags win.
fn apply_flags(raw: &mut RawScenario, a: &RunArgs) {
    if let Some(base) = &a.base_url {
        raw.base_url = Some(base.clone());
    }
    let load = raw.load.get_or_insert_with(RawLoad::default);
    let open_flag = a.rate.is_some() || a.stages.is_some();
    let closed_flag =
        a.vus.is_some() || a.iterations.is_some() || a.ramp_up.is_some() || a.think_time.is_some();
    if open_flag {
        *load = RawLoad {
            model: Some(Model::Open),
            max_connections: load.max_connections,
            max_requests: load.max_requests,
            graceful_stop: load.graceful_stop.clone(),
            duration: load.duration.clone().filter(|_| a.stages.is_none()),
            ..RawLoad::default()
        };
        load.rate = a.rate;
        load.stages = a.stages.as_ref().map(|s| {
            s.0.iter()
                .map(|stage| match *stage {
                    Stage::Hold { rate, duration } => RawStage {
                        duration: duration_text(duration),
                        rate: Some(rate),
                        ..RawStage::default()
                    },
                    Stage::Ramp { from, to, duration } => RawStage {
                        duration: duration_text(duration),
                        from: Some(from),
                        to: Some(to),
                        ..RawStage::default()
                    },
                })
                .collect()
        });
    } else if closed_flag {
        let was_open = load.model == Some(Model::Open)
            || load.rate.is_some()
            || load.stages.is_some()
            || load.users.is_some()
            || load.users_per_second.is_some();
        if was_open {
            // Switching a file's open load to closed drops its open fields.
            *load = RawLoad {
                duration: load.duration.clone(),
                max_requests: load.max_requests,
                graceful_stop: load.graceful_stop.clone(),
                ..RawLoad::default()
            };
        }
        load.model = Some(Model::Closed);
    }
    let open = load.model == Some(Model::Open)
        || (load.model.is_none()
            && (load.rate.is_some()
                || load.stages.is_some()
                || load.users.is_some()
                || load.users_per_second.is_some()));
    if let Some(c) = a.connections {
        if open {
            load.max_connections = Some(c);
        } else {
            load.vus = Some(c);
        }
    }
    if let Some(v) = a.vus {
        load.vus = Some(v);
    }
    let set = |slot: &mut Option<String>, d: Option<Duration>| {
        if let Some(d) = d {
            *slot = Some(duration_text(d));
        }
    };
    set(&mut load.duration, a.duration);
    set(&mut load.ramp_up, a.ramp_up);
    set(&mut load.think_time, a.think_time);
    set(&mut load.graceful_stop, a.graceful_stop);
    if a.requests.is_some() {
        load.max_requests = a.requests;
    }
    if a.iterations.is_some() {
        load.iterations = a.iterations;
    }
    let http = raw.http.get_or_insert_with(Default::default);
    set(&mut http.timeout, a.timeout);
    set(&mut http.connect_timeout, a.connect_timeout);
    if a.no_keepalive {
        http.keep_alive = Some(false);
    }
    if a.threads.is_some() {
        http.threads = a.threads;
    }
    if !a.headers.is_empty() {
        let headers = http.headers.get_or_insert_with(Default::default);
        for (k, v) in &a.headers {
            headers.retain(|old, _| !old.eq_ignore_ascii_case(k));
            headers.insert(k.clone(), v.clone());
        }
    }
}

/// The one-liner as a scenario: one request to `--url`.
fn one_liner(a: &RunArgs, url: &str) -> anyhow::Result<RawScenario> {
    let (endpoint, target) = Endpoint::from_url(url).context("--url")?;
    let method = a
        .method
        .clone()
        .unwrap_or_else(|| "GET".into())
        .to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        bail!("--method `{method}` is not an HTTP method");
    }
    let scheme = if endpoint.https { "https" } else { "http" };
    Ok(RawScenario {
        base_url: Some(format!("{scheme}://{}", endpoint.host_header)),
        requests: vec![RawRequest {
            name: format!("{method} {target}"),
            method: Some(method),
            path: Some(target),
            body: a.body.clone(),
            expect: a.expect_status.as_ref().map(|s| RawExpect {
                status: Some(RawStatus::List(s.clone())),
            }),
            ..RawRequest::default()
        }],
        ..RawScenario::default()
    })
}

pub fn plan_from_args(a: &RunArgs) -> anyhow::Result<Plan> {
    check_flags(a)?;
    match (&a.scenario, &a.url) {
        (Some(path), _) => {
            let mut file = headroom::scenario::read(path)?;
            apply_flags(&mut file.raw, a);
            Ok(file.build()?)
        }
        (None, Some(url)) => {
            let mut raw = one_liner(a, url)?;
            apply_flags(&mut raw, a);
            let mut plan = headroom::scenario::build_raw(&raw, "command line", url)?;
            plan.label = url.clone();
            Ok(plan)
        }
        (None, None) => bail!("give a scenario file or --url"),
    }
}

/// Ctrl-C and SIGTERM stop the run gracefully; a second one aborts.
pub fn install_interrupt(stop: &StopSignal) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let stop = stop.clone();
    std::thread::Builder::new()
        .name("headroom-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                stop.interrupt();
            }
        })?;
    Ok(())
}

pub fn read_pidfile(path: &Path) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read pid file {}", path.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("{} does not hold a process id", path.display()))
}

/// What the monitor watches, and the server headroom started, if any.
pub struct Watch {
    pub config: MonitorConfig,
    /// Kept alive for the run; stopped (whole group) when dropped.
    pub server: Option<ServerProcess>,
}

impl Watch {
    /// The generator and machine only.
    pub fn generator_only(interval: Duration) -> Watch {
        Watch {
            config: MonitorConfig {
                root: None,
                interval,
                remote: None,
                source: "generator only".into(),
            },
            server: None,
        }
    }

    pub fn pid(pid: i32, interval: Duration, source: String) -> Watch {
        Watch {
            config: MonitorConfig {
                root: Some(pid),
                interval,
                remote: None,
                source,
            },
            server: None,
        }
    }
}

/// The --monitor-* flags → what to watch (starting the server for
/// --monitor-cmd, checking the token for --monitor-url).
pub fn watch_from_args(a: &RunArgs, plan: &Plan) -> anyhow::Result<Watch> {
    let interval = a.monitor_interval;
    if let Some(pid) = a.monitor_pid {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("--monitor-pid {pid}: no such process");
        }
        return Ok(Watch::pid(pid, interval, format!("pid {pid}")));
    }
    if let Some(file) = &a.monitor_pidfile {
        let pid = read_pidfile(file)?;
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("--monitor-pidfile {}: no process {pid}", file.display());
        }
        return Ok(Watch::pid(
            pid,
            interval,
            format!("pid {pid} from {}", file.display()),
        ));
    }
    if let Some(cmd) = &a.monitor_cmd {
        let mut server = ServerProcess::spawn(cmd, Duration::from_secs(5))?;
        server.wait_ready(plan.endpoint.addr, a.monitor_ready_timeout)?;
        let mut watch = Watch::pid(server.pid(), interval, format!("command `{cmd}`"));
        watch.server = Some(server);
        return Ok(watch);
    }
    if let Some(url) = &a.monitor_url {
        let source = RemoteSource {
            url: url.trim_end_matches('/').to_string(),
            token: a.monitor_token.clone().unwrap_or_default(),
        };
        // Fail before loading anything if the monitor is not there or
        // refuses the token.
        headroom::monitor::remote::fetch(&source, headroom::monitor::unix_ms())?;
        return Ok(Watch {
            config: MonitorConfig {
                root: None,
                interval,
                remote: Some(source),
                source: format!("remote {url}"),
            },
            server: None,
        });
    }
    Ok(Watch::generator_only(interval))
}

/// Where `execute` writes what it measured, besides the summary.
#[derive(Default)]
pub struct Outputs<'a> {
    pub out: Option<&'a Path>,
    pub html: Option<&'a Path>,
    pub csv: Option<&'a Path>,
    pub hdr_log: Option<&'a Path>,
    pub junit: Option<&'a Path>,
    pub markdown: bool,
    pub quiet: bool,
    /// Flags' thresholds (the plan's own are added).
    pub thresholds: Slo,
}

impl<'a> Outputs<'a> {
    pub fn from_args(a: &'a RunArgs) -> Outputs<'a> {
        Outputs {
            out: a.out.as_deref(),
            html: a.reports.html.as_deref(),
            csv: a.csv.as_deref(),
            hdr_log: a.hdr_log.as_deref(),
            junit: a.junit.as_deref(),
            markdown: a.reports.markdown,
            quiet: a.quiet,
            thresholds: Slo {
                bounds: a.thresholds.iter().flat_map(|s| s.bounds.clone()).collect(),
            },
        }
    }
}

/// Runs a plan with live progress and the monitor, writes the results file
/// and the other outputs (even when interrupted), prints the summary.
/// Returns the exit code.
pub fn execute(
    plan: &Plan,
    stop: &StopSignal,
    watch: Watch,
    buckets_ms: &[u64],
    outputs: &Outputs,
) -> anyhow::Result<i32> {
    let live = Live::new(plan.load_duration());
    let measured = measure(plan, stop, watch.config.clone(), buckets_ms, |p, sample| {
        live.update(p, sample)
    });
    live.finish();
    drop(watch.server);
    let mut results = measured.results;
    let mut thresholds = plan.thresholds.clone();
    thresholds
        .bounds
        .extend(outputs.thresholds.bounds.iter().cloned());
    results.thresholds = thresholds.check(&results, None);
    let breached = results.thresholds.iter().any(|c| !c.passed);
    if let Some(path) = outputs.out {
        let json = serde_json::to_string_pretty(&results)?;
        headroom::report::write_replacing(path, (json + "\n").as_bytes())
            .with_context(|| format!("cannot write results to {}", path.display()))?;
    }
    if let Some(path) = outputs.html {
        write_file(path, "HTML report", html::run_report(&results).as_bytes())?;
    }
    if let Some(dir) = outputs.csv {
        headroom::report::csv::write_run(dir, &results)
            .with_context(|| format!("cannot write CSV files into {}", dir.display()))?;
        println!("CSV files written to {}", dir.display());
    }
    if let Some(path) = outputs.hdr_log {
        let log = headroom::report::hdrlog::interval_log(
            &measured.latency_intervals,
            measured.started_at,
        )?;
        write_file(path, "HdrHistogram interval log", &log)?;
    }
    if let Some(path) = outputs.junit {
        let xml = headroom::report::thresholds::junit_xml(
            &results.config.url,
            &results.thresholds,
            results.duration_s,
        );
        write_file(path, "JUnit XML", xml.as_bytes())?;
    }
    if outputs.markdown {
        print!("{}", super::report::run_markdown(&results));
    } else if !outputs.quiet {
        let mut stdout = std::io::stdout().lock();
        terminal::write_summary(&mut stdout, &results)?;
        use std::io::Write;
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
        if let Some(path) = outputs.out {
            writeln!(stdout, "\nresults written to {}", path.display())?;
        }
    }
    let exit_code = if results.interrupted {
        EXIT_INTERRUPTED
    } else if measured.never_connected {
        let why = results
            .summary
            .errors
            .keys()
            .next()
            .and_then(|k| headroom::metrics::ErrorClass::from_key(k))
            .map_or("no request was sent", |c| c.describe());
        eprintln!(
            "headroom: error: could not connect to {} ({why}): every request failed to connect",
            plan.endpoint.addr,
        );
        EXIT_ERROR
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
    Ok(exit_code)
}

pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    let plan = plan_from_args(&a)?;
    let outputs = Outputs::from_args(&a);
    check_request_names(&outputs.thresholds, &plan, "--threshold")?;
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let watch = watch_from_args(&a, &plan)?;
    execute(&plan, &stop, watch, &a.buckets, &outputs)
}

/// Bounds that name a request (`p95{login}<500ms`) must name one of the
/// plan's, before any load is sent.
pub fn check_request_names(slo: &Slo, plan: &Plan, flag: &str) -> anyhow::Result<()> {
    slo.check_requests(plan.requests.iter().map(|r| r.name.as_str()))
        .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}
