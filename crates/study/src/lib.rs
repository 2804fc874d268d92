//! Studies: start each server configuration, warm it up, load it with the
//! monitor on its process tree, stop it (the whole group), and compare.
//!
//! - [`file`](mod@file) (the crate `headroom-study-file`): the study file,
//!   grid expansion, `{param}`/`{port}` filling.
//! - statistics over repeats, the objective, the winner, and `study.json`
//!   itself: `headroom_records::study`.
//! - [`services`]: companion services started before a configuration's
//!   server (or once for the study) and stopped after it.
//!
//! The comparison table and `study.csv` are drawn by `headroom-report`
//! from the `StudyReport` each [`Event::Saved`] carries.
//!
//! Runs are interleaved (round 1 of every configuration, then round 2, …)
//! so a drift of the machine does not favour one configuration, and
//! `study.json` is rewritten after every run: an interrupted study resumes
//! where it stopped.

/// The study file, parsed and checked (a crate of its own: see its manifest).
pub use headroom_study_file as file;
pub mod services;

use file::{Config, Ready, Study};
use headroom_engine::plan::Plan;
use headroom_engine::StopSignal;
use headroom_measure::{measure_from, During, Recording};
use headroom_monitor::launch::{LaunchError, LaunchSpec, ServerProcess};
use headroom_monitor::{describe_process, port_holders, Follow, MonitorConfig};
use headroom_records::results::Results;
use headroom_records::study::rank;
use headroom_records::study::{label, ConfigReport, Objective, RunRecord, StudyReport};
use headroom_records::write_replacing;
use headroom_scenario::raw::{RawEvent, RawRoutes};
use headroom_scenario::Scenario;
use services::Running;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub struct StudyOptions {
    pub out_dir: PathBuf,
    /// Measure everything again, ignoring an earlier study.json.
    pub fresh: bool,
    /// How each run is recorded (distribution buckets, command line).
    pub recording: Recording,
    /// Configurations the user asked to skip while the study runs.
    pub skips: Skips,
    /// Each run as shards in several processes, merged (`--processes`);
    /// in this process when `None`.
    pub sharded: Option<Arc<dyn Sharded>>,
}

/// Runs a configuration's load as shards in several processes and merges
/// them — what `study --processes` does with each run (the CLI starts
/// the processes; this crate does not know its own executable).
pub trait Sharded: Send + Sync {
    /// The scenario `scenario` (TOML, as the study built it for the
    /// configuration; relative paths from `dir`) for `duration`, or at a
    /// capacity search's `step`, after `warmup` at the same load
    /// (unmeasured); the server watched with `watch`. `None` when it could
    /// not be measured (said on stderr).
    fn run(
        &self,
        scenario: &str,
        dir: &Path,
        load: (ShardedLoad, std::time::Duration),
        watch: &MonitorConfig,
        stop: &StopSignal,
    ) -> Option<Results>;
}

/// What a sharded run of a study loads.
#[derive(Clone, Copy, Debug)]
pub enum ShardedLoad {
    /// The scenario as written, for this long when given.
    Scenario(Option<std::time::Duration>),
    /// A capacity search's step.
    Step {
        axis: headroom_objectives::capacity::Axis,
        load: f64,
        duration: std::time::Duration,
    },
}

impl ShardedLoad {
    /// The same load for `duration` (a warm-up's).
    pub fn lasting(self, duration: std::time::Duration) -> ShardedLoad {
        match self {
            ShardedLoad::Scenario(_) => ShardedLoad::Scenario(Some(duration)),
            ShardedLoad::Step { axis, load, .. } => ShardedLoad::Step {
                axis,
                load,
                duration,
            },
        }
    }
}

/// A capacity search's steps as sharded runs of the configuration's
/// scenario.
struct ShardedSteps<'a> {
    sharded: &'a dyn Sharded,
    scenario: &'a str,
    dir: &'a Path,
    watch: &'a MonitorConfig,
    stop: &'a StopSignal,
}

impl headroom_capacity::Stepper for ShardedSteps<'_> {
    fn step(&mut self, s: &headroom_capacity::StepRun) -> Option<Results> {
        let at = |duration| ShardedLoad::Step {
            axis: s.axis,
            load: s.load,
            duration,
        };
        let load = (at(s.duration), s.warmup);
        (self.sharded).run(self.scenario, self.dir, load, self.watch, self.stop)
    }
}

/// The status of a configuration skipped while the study ran.
pub const SKIPPED: &str = "skipped from the dashboard";

/// Configurations to skip, asked for while the study runs (the
/// dashboard's "skip this configuration"): the one under load stops
/// gracefully, one still waiting is never started; either is recorded as
/// [`SKIPPED`], unranked, for every round.
#[derive(Clone, Default)]
pub struct Skips {
    inner: Arc<Mutex<SkipState>>,
}

#[derive(Default)]
struct SkipState {
    /// The study's configurations.
    labels: BTreeSet<String>,
    asked: BTreeSet<String>,
    /// The configuration under way and its own stop signal.
    running: Option<(String, StopSignal)>,
}

impl Skips {
    /// Skip the configuration labelled `label`; false when the study has
    /// none of that name.
    pub fn skip(&self, label: &str) -> bool {
        let mut state = self.inner.lock().expect("skips lock");
        if !state.labels.contains(label) {
            return false;
        }
        state.asked.insert(label.to_string());
        if let Some((running, stop)) = &state.running {
            if running == label {
                stop.stop_because(SKIPPED.into());
            }
        }
        true
    }

    pub fn asked(&self, label: &str) -> bool {
        self.inner.lock().expect("skips lock").asked.contains(label)
    }

    fn running(&self, label: &str, stop: &StopSignal) {
        self.inner.lock().expect("skips lock").running = Some((label.to_string(), stop.clone()));
    }

    fn over(&self) {
        self.inner.lock().expect("skips lock").running = None;
    }
}

/// What the runner tells the terminal as it goes.
pub enum Event<'a> {
    Skipped {
        label: &'a str,
        round: u32,
    },
    Starting {
        label: &'a str,
        round: u32,
        index: usize,
        total: usize,
    },
    /// What the configuration under way is doing: "warming", "loading"
    /// or "searching" (objective capacity).
    Phase {
        label: &'a str,
        round: u32,
        phase: &'static str,
    },
    /// A step of the configuration's capacity search (objective capacity),
    /// its load in `unit`.
    Capacity {
        event: headroom_capacity::Event<'a>,
        unit: &'static str,
    },
    Finished {
        label: &'a str,
        record: &'a RunRecord,
    },
    /// `study.json` was rewritten with the report so far (after every run,
    /// and at the end), for files kept beside it such as `study.csv`.
    Saved(&'a StudyReport),
}

/// Every template of a server (command, base URL, folder, env, events'
/// commands and pid files, connect_to, probes): where `{port}`s may be.
fn server_templates(server: &file::Server) -> impl Iterator<Item = &str> {
    [server.command.as_str(), server.base_url.as_str()]
        .into_iter()
        .chain(server.env.iter().map(|(_, v)| v.as_str()))
        .chain(server.connect_to.iter().map(String::as_str))
        .chain(server.dir.iter().filter_map(|d| d.to_str()))
        .chain(server.pidfile.iter().map(String::as_str))
        .chain(server.probes.iter().map(String::as_str))
        .chain(
            server
                .events
                .iter()
                .flat_map(|e| e.command.iter().chain(e.pidfile.iter()).map(String::as_str)),
        )
}

/// `wanted` distinct free ports.
fn free_ports(wanted: usize) -> std::io::Result<Vec<u16>> {
    let mut ports: Vec<u16> = Vec::new();
    while ports.len() < wanted {
        let port = free_port()?;
        if !ports.contains(&port) {
            ports.push(port);
        }
    }
    Ok(ports)
}

/// A free loopback port for a server under test, outside the kernel's
/// ephemeral range: a port from inside it may still be the local end of
/// one of the generator's own connections (in TIME_WAIT after the last
/// run), and then a server binding it with SO_REUSEPORT is refused.
pub fn free_port() -> std::io::Result<u16> {
    let (low, high) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut w = s.split_whitespace().map(|v| v.parse::<u16>().ok());
            Some((w.next()??, w.next()??))
        })
        .unwrap_or((32768, 60999));
    // Below the range if there is room for it, else above it.
    let (from, to) = if low > 10_000 {
        (10_000, low)
    } else {
        (high.saturating_add(1).max(1024), u16::MAX)
    };
    for _ in 0..200 {
        let port = fastrand::u16(from..to);
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return Ok(l.local_addr()?.port());
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Builds the scenario against one configuration's base URL, with the
/// configuration's events and `connect_to` rules after the scenario's own.
fn scenario_for(
    study: &Study,
    base_url: &str,
    events: &[RawEvent],
    connect_to: &[String],
) -> Result<Scenario, String> {
    scenario_file_for(study, base_url, events, connect_to)
        .build()
        .map_err(|e| e.to_string())
}

fn scenario_file_for(
    study: &Study,
    base_url: &str,
    events: &[RawEvent],
    connect_to: &[String],
) -> headroom_scenario::ScenarioFile {
    let mut raw = study.scenario.clone();
    raw.base_url = Some(base_url.to_string());
    raw.events.extend(events.iter().cloned());
    RawRoutes::extend(&mut raw.connect_to, connect_to);
    let text = toml::to_string(&raw).unwrap_or_default();
    let path = study.scenario_dir.join("(study scenario)");
    headroom_scenario::ScenarioFile { path, text, raw }
}

/// Checks the scenario once, before any server starts.
pub fn check_scenario(study: &Study) -> Result<(), String> {
    for server in &study.servers {
        let connect_to: Vec<String> = server
            .connect_to
            .iter()
            .map(|c| with_placeholders_as_port(c, 9))
            .collect();
        scenario_for(study, "http://127.0.0.1:9", &server.events, &connect_to)?;
    }
    scenario_for(study, "http://127.0.0.1:9", &[], &[]).map(|_| ())
}

/// A template with every `{…}` placeholder replaced by `port`, for
/// checking its shape before any port is known.
fn with_placeholders_as_port(template: &str, port: u16) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => {
                out.push_str(&port.to_string());
                rest = &rest[open + close + 1..];
            }
            None => {
                rest = &rest[open..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Runs one configuration once: its services and server started, the
/// server checked to be the one answering, then measured (or searched),
/// judged, and stopped as a group.
fn run_config(
    study: &Study,
    config: &Config,
    round: u32,
    opts: &StudyOptions,
    stop: &StopSignal,
    study_wide: &Running,
    tell: &mut dyn FnMut(&'static str, Option<Event>),
) -> RunRecord {
    let server = &study.servers[config.server];
    let recording = opts
        .recording
        .labelled("config", label(&server.name, &config.params));
    let mut record = unmeasured(round, String::new());
    // This configuration's own services, before its server.
    let own: Vec<&file::Service> = study
        .services
        .iter()
        .filter(|s| s.scope == file::Scope::Config)
        .collect();
    let running = match Running::start(&own, study_wide) {
        Ok(r) => r,
        Err(e) => {
            record.status = format!("error: {e}");
            return record;
        }
    };
    let launch = match Launch::of(study, config, opts, [&running, study_wide]) {
        Ok(l) => l,
        Err(status) => {
            record.status = status;
            return record;
        }
    };
    let Some(mut process) = start_server(server, &launch, &mut record) else {
        return record;
    };
    let watch = launch.watch(server, &process, [&running, study_wide]);
    let sharded = opts
        .sharded
        .as_deref()
        .zip(launch.shard_scenario.as_deref());
    let plan = &launch.scenario.plan;
    if study.objective == Objective::Capacity {
        let settings = launch.scenario.capacity.overlay(&study.capacity);
        tell("searching", None);
        let mut in_process = headroom_capacity::InProcess {
            watch: &watch,
            stop,
            recording: &recording,
        };
        let mut steps;
        let stepper: &mut dyn headroom_capacity::Stepper = match sharded {
            Some((sharded, scenario)) => {
                steps = ShardedSteps {
                    sharded,
                    scenario,
                    dir: &study.scenario_dir,
                    watch: &watch,
                    stop,
                };
                &mut steps
            }
            None => &mut in_process,
        };
        capacity_search(plan, &settings, stepper, stop, &mut record, tell);
    } else {
        let during = During {
            aborts: Vec::new(),
            event_group: Some(process.pid()),
            event_dir: launch.dir.clone(),
        };
        let results = load(
            study,
            plan,
            (watch, during),
            sharded,
            stop,
            &recording,
            tell,
        );
        record.status = judged(study, results.as_ref(), &mut process);
        record.results = results;
    }
    if record.status != "ok" {
        record.stderr_tail = Some(process.stderr_tail(20));
    }
    finish(&mut process, &mut record);
    record
}

/// A configuration's server, made concrete: its placeholders filled
/// (`{param}`, `{port}`, then `{service.NAME.port}`), its scenario built
/// against its base URL, how to launch it.
struct Launch {
    scenario: Scenario,
    /// Sharded runs load the scenario as written for this configuration
    /// (events act in one process, beside the server: not in shards).
    shard_scenario: Option<String>,
    spec: LaunchSpec,
    dir: Option<PathBuf>,
    pidfile: Option<PathBuf>,
    /// The server's probes, filled.
    probes: Vec<String>,
}

impl Launch {
    fn of(
        study: &Study,
        config: &Config,
        opts: &StudyOptions,
        services: [&Running; 2],
    ) -> Result<Launch, String> {
        let server = &study.servers[config.server];
        // `{port}`, and `{port.2}`… for a server of several processes (a
        // balancer and its backends), each a free port of its own — picked
        // once its services are up, just before it starts, so that another
        // program has little time to take one first.
        let wanted = server_templates(server)
            .map(file::ports_used)
            .max()
            .unwrap_or(0)
            .max(1);
        let ports = free_ports(wanted).map_err(|e| format!("error: no free port: {e}"))?;
        let [own, study_wide] = services;
        let fill = |t: &str| own.fill(&study_wide.fill(&file::fill(t, &config.params, &ports)));
        let base_url = fill(&server.base_url);
        let connect_to: Vec<String> = server.connect_to.iter().map(|c| fill(c)).collect();
        let dir = server
            .dir
            .as_ref()
            .map(|d| PathBuf::from(fill(&d.display().to_string())));
        let in_dir = |p: String| match &dir {
            Some(d) => d.join(p).display().to_string(),
            None => p,
        };
        let events: Vec<RawEvent> = server
            .events
            .iter()
            .map(|e| RawEvent {
                command: e.command.as_ref().map(|c| fill(c)),
                pidfile: e.pidfile.as_ref().map(|p| in_dir(fill(p))),
                ..e.clone()
            })
            .collect();
        let scenario = scenario_for(study, &base_url, &events, &connect_to)
            .map_err(|e| format!("error: {e}"))?;
        let shard_scenario = opts.sharded.as_ref().map(|_| {
            let mut file = scenario_file_for(study, &base_url, &[], &connect_to);
            file.raw.events.clear();
            toml::to_string(&file.raw).unwrap_or_default()
        });
        Ok(Launch {
            scenario,
            shard_scenario,
            spec: LaunchSpec {
                command: fill(&server.command),
                dir: dir.clone(),
                env: server
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), fill(v)))
                    .collect(),
                stop_signal: server.stop_signal,
                grace: server.stop_grace,
            },
            pidfile: server
                .pidfile
                .as_ref()
                .map(|p| PathBuf::from(in_dir(fill(p)))),
            probes: server.probes.iter().map(|p| fill(p)).collect(),
            dir,
        })
    }

    /// What the monitor watches: the server's tree, followed through its
    /// pidfile and port; the services sampled apart.
    fn watch(
        &self,
        server: &file::Server,
        process: &ServerProcess,
        services: [&Running; 2],
    ) -> MonitorConfig {
        let addr = self.scenario.plan.endpoint.addr;
        MonitorConfig {
            root: Some(process.pid()),
            interval: headroom_monitor::DEFAULT_INTERVAL,
            remote: None,
            source: format!("{} (pid {})", server.name, process.pid()),
            // The study picked the port: whatever listens on it is this
            // server's, as are the daemons it leaves with headroom.
            follow: Follow {
                pidfile: self.pidfile.clone(),
                listen_port: Some(addr.port()),
                adopt_orphans: true,
                // The services are headroom's children too, not the server's.
                not_adopted: services.iter().flat_map(|s| s.groups()).collect(),
            },
            // ... and sampled apart, each as its own tree.
            services: services.iter().flat_map(|s| s.named_pids()).collect(),
            // Checked when the study file was read.
            probes: self.probes.iter().filter_map(|p| p.parse().ok()).collect(),
        }
    }
}

/// Starts the configuration's server and waits until it is ready on its
/// port — and is the one answering there. `None` when it is not (the
/// record says why; whatever was started is stopped).
fn start_server(
    server: &file::Server,
    launch: &Launch,
    record: &mut RunRecord,
) -> Option<ServerProcess> {
    let endpoint = &launch.scenario.plan.endpoint;
    let addr = endpoint.addr;
    // Another process on the port would answer in the server's place.
    let holders = port_holders(addr.port());
    if !holders.is_empty() {
        let who: Vec<String> = holders
            .iter()
            .map(|&(pid, _)| describe_process(pid))
            .collect();
        record.status = format!("error: port {} in use by {}", addr.port(), who.join(", "));
        return None;
    }
    let mut process = match ServerProcess::launch(&launch.spec) {
        Ok(p) => p,
        Err(e) => {
            record.status = format!("error: {e}");
            return None;
        }
    };
    process.listens_on(addr.port());
    record.pgid = process.pid();
    let ready = match &server.ready {
        Ready::Tcp => process.wait_ready(addr, server.ready_timeout),
        Ready::Http(path) => {
            process.wait_ready_http(addr, &endpoint.host_header, path, server.ready_timeout)
        }
    };
    // Ready — but by whom? Whatever listens on the port must have been
    // started by the server's command (it was free before).
    let impostors: Vec<String> = match ready {
        Ok(()) => process
            .other_port_holders()
            .into_iter()
            .map(|(pid, _)| describe_process(pid))
            .collect(),
        Err(_) => Vec::new(),
    };
    record.status = match ready {
        Err(LaunchError::Exited { status, .. }) => {
            format!("not ready: exited ({status}) during start-up")
        }
        Err(LaunchError::NotReady { timeout, .. }) => {
            format!("not ready within {}", humantime::format_duration(timeout))
        }
        Err(other) => format!("not ready: {other}"),
        Ok(()) if !impostors.is_empty() => format!(
            "error: port {} is held by {}, not by the server's command",
            addr.port(),
            impostors.join(", ")
        ),
        Ok(()) => return Some(process),
    };
    record.stderr_tail = Some(process.stderr_tail(20));
    finish(&mut process, record);
    None
}

/// Warms the configuration up, then measures it (in shards, or in this
/// process beside the monitor). `None` when the study was stopped first.
fn load(
    study: &Study,
    plan: &Plan,
    (watch, during): (MonitorConfig, During),
    sharded: Option<(&dyn Sharded, &str)>,
    stop: &StopSignal,
    recording: &Recording,
    tell: &mut dyn FnMut(&'static str, Option<Event>),
) -> Option<Results> {
    if let Some((sharded, scenario)) = sharded {
        // The warm-up is the sharded run's own (in the same pods, for
        // `--k8s`).
        tell("loading", None);
        let load = (ShardedLoad::Scenario(study.duration), study.warmup);
        return sharded.run(scenario, &study.scenario_dir, load, &watch, stop);
    }
    if !study.warmup.is_zero() {
        tell("warming", None);
        let mut warm = plan.lasting(study.warmup);
        warm.events.clear();
        let _ = headroom_engine::run(&warm, stop, |_| {});
    }
    if stop.is_stopping() {
        return None;
    }
    tell("loading", None);
    let measured_plan = match study.duration {
        Some(d) => plan.lasting(d),
        None => plan.clone(),
    };
    let start = headroom_engine::start_soon();
    let measured = measure_from(
        &measured_plan,
        stop,
        watch,
        recording,
        &during,
        start,
        |_, _| {},
    );
    Some(measured.results)
}

/// A measured run's status: `ok`, or why it does not count.
fn judged(study: &Study, results: Option<&Results>, process: &mut ServerProcess) -> String {
    // Died: nothing of the server left (a restart under an event, which
    // replaces the process headroom started, is not a death).
    let died = match results {
        Some(r) => r
            .server
            .as_ref()
            .is_some_and(|s| s.findings.iter().any(|f| f.kind == "server_exited")),
        None => process.exited().is_some(),
    };
    match results {
        _ if died => "died during the run".to_string(),
        Some(r) if r.summary.requests.error_rate > study.error_budget => format!(
            "error budget exceeded: {:.2} % > {:.2} %",
            r.summary.requests.error_rate * 100.0,
            study.error_budget * 100.0
        ),
        Some(r) if r.interrupted => "interrupted".to_string(),
        Some(_) => "ok".to_string(),
        None => "interrupted".to_string(),
    }
}

/// Objective "capacity": a capacity search on the running configuration;
/// the record keeps the search and, as its results, the step at the
/// capacity.
fn capacity_search(
    plan: &Plan,
    settings: &headroom_objectives::capacity::Settings,
    stepper: &mut dyn headroom_capacity::Stepper,
    stop: &StopSignal,
    record: &mut RunRecord,
    tell: &mut dyn FnMut(&'static str, Option<Event>),
) {
    use headroom_records::capacity::Outcome;
    let options = match settings.resolve() {
        Ok(o) => o,
        Err(e) => {
            record.status = format!("error: {e}");
            return;
        }
    };
    let unit = headroom_capacity::unit(options.axis, plan);
    let report = headroom_capacity::run_with(plan, &options, stop, stepper, |event| {
        tell("searching", Some(Event::Capacity { event, unit }))
    });
    record.results = report.capacity.and_then(|cap| {
        report
            .steps
            .iter()
            .rev()
            .find(|s| s.passed && s.offered == cap)
            .and_then(|s| s.results.clone())
    });
    record.status = match report.outcome {
        Outcome::Found | Outcome::MetUpToMax => "ok".into(),
        Outcome::TimeLimit if report.capacity.is_some() => "ok".into(),
        Outcome::Interrupted => "interrupted".into(),
        Outcome::ServerExited => "died during the run".into(),
        _ => report.verdict.clone(),
    };
    record.capacity = Some(report);
}

/// A run's record before anything is measured.
fn unmeasured(round: u32, status: String) -> RunRecord {
    RunRecord {
        round,
        status,
        results: None,
        stderr_tail: None,
        capacity: None,
        pgid: 0,
        survivors: 0,
        stray_killed: 0,
    }
}

/// Stops the configuration's whole process group (and any process of its
/// tree that left the group) and counts what had to be killed or survived.
fn finish(process: &mut ServerProcess, record: &mut RunRecord) {
    let stray = process.stop();
    // Still in the group, or still holding the port it was started on.
    let mut survivors: std::collections::BTreeSet<i32> =
        group_members(process.pid()).into_iter().collect();
    survivors.extend(process.strays().into_iter().map(|(pid, _)| pid));
    record.survivors = survivors.len() as u32;
    record.stray_killed = stray as u32;
}

/// Live (not zombie) processes in process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.flatten()
        .filter_map(|p| p.stat().ok())
        .filter(|s| s.pgrp == pgid && s.state != 'Z')
        .map(|s| s.pid)
        .collect()
}

fn load_previous(path: &Path) -> Option<StudyReport> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn save(report: &StudyReport, dir: &Path) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    write_replacing(&dir.join("study.json"), (json + "\n").as_bytes())
}

/// Each configuration's report, with the runs `previous` (the study.json
/// resumed from) kept of it.
fn config_reports(study: &Study, previous: Option<&StudyReport>) -> Vec<ConfigReport> {
    study
        .configs
        .iter()
        .map(|c| {
            let server = &study.servers[c.server].name;
            let label = label(server, &c.params);
            let runs = previous
                .and_then(|p| p.configs.iter().find(|x| x.label == label))
                .map(|x| x.runs.clone())
                .unwrap_or_default();
            ConfigReport {
                server: server.clone(),
                params: c.params.clone(),
                label,
                status: String::new(),
                results: None,
                runs,
                stats: None,
            }
        })
        .collect()
}

/// Runs the study (resuming from `out_dir/study.json` unless fresh).
pub fn run(
    study: &Study,
    opts: &StudyOptions,
    stop: &StopSignal,
    mut event: impl FnMut(Event),
) -> std::io::Result<StudyReport> {
    std::fs::create_dir_all(&opts.out_dir)?;
    let previous = if opts.fresh {
        None
    } else {
        load_previous(&opts.out_dir.join("study.json"))
    };
    let mut configs = config_reports(study, previous.as_ref());
    let total = configs.len() * study.repeat as usize;
    opts.skips.inner.lock().expect("skips lock").labels =
        configs.iter().map(|c| c.label.clone()).collect();
    let wide: Vec<&file::Service> = study
        .services
        .iter()
        .filter(|s| s.scope == file::Scope::Study)
        .collect();
    let study_wide = Running::start(&wide, &Running::default()).map_err(std::io::Error::other)?;
    let mut index = 0;
    'rounds: for round in 1..=study.repeat {
        for (i, config) in study.configs.iter().enumerate() {
            index += 1;
            if stop.is_stopping() {
                break 'rounds;
            }
            if configs[i].runs.iter().any(|r| r.round == round) {
                event(Event::Skipped {
                    label: &configs[i].label,
                    round,
                });
                continue;
            }
            let label = configs[i].label.clone();
            let record = if opts.skips.asked(&label) {
                unmeasured(round, SKIPPED.into())
            } else {
                event(Event::Starting {
                    label: &label,
                    round,
                    index,
                    total,
                });
                // A signal of the configuration's own, for a skip.
                let config_stop = stop.child();
                opts.skips.running(&label, &config_stop);
                let mut tell = |phase, inner: Option<Event>| match inner {
                    Some(e) => event(e),
                    None => event(Event::Phase {
                        label: &label,
                        round,
                        phase,
                    }),
                };
                let mut record = run_config(
                    study,
                    config,
                    round,
                    opts,
                    &config_stop,
                    &study_wide,
                    &mut tell,
                );
                opts.skips.over();
                if opts.skips.asked(&label) && !stop.is_stopping() {
                    record.status = SKIPPED.into();
                }
                record
            };
            // An interrupted run is not kept: resuming measures it again.
            if record.status == "interrupted" {
                break 'rounds;
            }
            event(Event::Finished {
                label: &configs[i].label,
                record: &record,
            });
            configs[i].runs.push(record);
            let so_far = rank::summarise(&study.ranking(), &mut configs, false);
            save(&so_far, &opts.out_dir)?;
            event(Event::Saved(&so_far));
            if !stop.is_stopping() && !study.pause.is_zero() {
                std::thread::sleep(study.pause);
            }
        }
    }
    let report = rank::summarise(&study.ranking(), &mut configs, stop.is_stopping());
    save(&report, &opts.out_dir)?;
    event(Event::Saved(&report));
    Ok(report)
}
