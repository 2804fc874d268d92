//! `headroom run`: a scenario file or a one-liner URL → `Plan` → engine →
//! results file and summary. Flags override the scenario file; the
//! one-liner is turned into a scenario too, so both are validated alike.

use super::args::{RunArgs, RunCmdArgs};
use super::common::recording;
use super::exit::install_interrupt;
use super::outputs::{finish, Outputs};
use crate::cli::live::{Live, ProgressMode};
use anyhow::{bail, Context};
use headroom_engine::plan::HttpVersion;
use headroom_engine::plan::Plan;
use headroom_engine::StopSignal;
use headroom_http::routes::{ConnectTo, Resolve, Routes};
use headroom_http::Endpoint;
use headroom_measure::{measure_from, During, Recording};
use headroom_monitor::launch::ServerProcess;
use headroom_monitor::remote::RemoteSource;
use headroom_monitor::{Follow, MonitorConfig};
use headroom_objectives::abort::AbortRule;
use headroom_objectives::slo::Slo;
use headroom_records::results::StartAt;
use headroom_scenario::overrides::{Overrides, TraceOverrides};
use headroom_scenario::raw::{
    RawExpect, RawHttp, RawRequest, RawScenario, RawStaleRetry, RawStatus,
};
use headroom_scenario::Scenario;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The flags that lay over a scenario, as the scenario crate takes them.
fn overrides(args: &RunArgs) -> Overrides {
    Overrides {
        base_url: args.base_url.clone(),
        rate: args.rate,
        stages: args.stages.as_ref().map(|s| s.0.clone()),
        vus: args.vus,
        vu_stages: args.vu_stages.as_ref().map(|s| s.0.clone()),
        iterations: args.iterations,
        ramp_up: args.ramp_up,
        think_time: args.think_time,
        connections: args.connections,
        http_version: if args.http2 {
            Some(HttpVersion::Http2)
        } else if args.http3 {
            Some(HttpVersion::Http3)
        } else {
            args.http_version.as_deref().and_then(HttpVersion::parse)
        },
        streams: args.streams,
        zero_rtt: args.zero_rtt,
        duration: args.duration,
        graceful_stop: args.graceful_stop,
        requests: args.requests,
        timeout: args.timeout,
        connect_timeout: args.connect_timeout,
        no_keepalive: args.no_keepalive,
        threads: args.threads,
        // clap took only the policies' names.
        stale_connection_retry: args
            .stale_connection_retry
            .as_deref()
            .and_then(RawStaleRetry::parse),
        insecure: args.insecure,
        ca_file: args.ca_file.clone(),
        connect_to: args.connect_to.clone(),
        resolve: args.resolve.clone(),
        headers: args.headers.clone(),
        trace: TraceOverrides {
            on: args.trace.trace,
            per: args.trace.trace_per,
            unsampled: args.trace.trace_unsampled,
            state: args.trace.trace_state.clone(),
            url: args.trace.trace_url.clone(),
        },
    }
}

/// The one-liner as a scenario: one request to `--url`.
fn one_liner(args: &RunArgs, url: &str) -> anyhow::Result<RawScenario> {
    let routes = Routes {
        connect_to: args
            .connect_to
            .iter()
            .filter_map(|r| ConnectTo::parse(r).ok())
            .collect(),
        resolve: args
            .resolve
            .iter()
            .filter_map(|r| Resolve::parse(r).ok())
            .collect(),
    };
    let (endpoint, target) = Endpoint::from_url_via(url, &routes).context("--url")?;
    let method = args
        .method
        .clone()
        .unwrap_or_else(|| "GET".into())
        .to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        bail!("--method `{method}` is not an HTTP method");
    }
    let scheme = if endpoint.https { "https" } else { "http" };
    // `user:password@` in the URL is sent as Basic auth (a -H
    // Authorization given too replaces it).
    let http = endpoint.basic_auth.map(|auth| RawHttp {
        headers: Some([("Authorization".to_string(), auth)].into()),
        ..RawHttp::default()
    });
    Ok(RawScenario {
        base_url: Some(format!("{scheme}://{}", endpoint.host_header)),
        http,
        requests: vec![RawRequest {
            name: format!("{method} {target}"),
            method: Some(method),
            path: Some(target),
            body: args.body.clone(),
            expect: args.expect_status.as_ref().map(|s| RawExpect {
                status: Some(RawStatus::List(s.clone())),
            }),
            ..RawRequest::default()
        }],
        ..RawScenario::default()
    })
}

/// The scenario file with the flags over it, or the one-liner.
pub fn scenario_from_args(args: &RunArgs) -> anyhow::Result<Scenario> {
    overrides(args).check()?;
    if args.buckets.windows(2).any(|w| w[0] >= w[1]) {
        bail!("--buckets must be increasing, e.g. 800,1200");
    }
    let mut scenario = file_or_one_liner(args)?;
    // Every second's latency histogram, for the interval log only.
    scenario.plan.keep_second_histograms = args.hdr_log.is_some();
    if let Some(local) = &args.local_address {
        scenario.plan.local_addresses = local.0.clone();
    }
    // clap took only the engines' names.
    if let Some(engine) = args
        .engine
        .as_deref()
        .and_then(headroom_engine::plan::Engine::parse)
    {
        scenario.plan.engine = engine;
    }
    for event in &args.events {
        if scenario.plan.event_time(event.at).is_none() {
            bail!(
                "--event `{}`: the load has no such stage (stages are the open model's --stages)",
                event.label
            );
        }
        scenario.plan.events.push(event.clone());
    }
    for slo in &args.abort_on {
        for bound in &slo.bounds {
            if bound.request.is_some() {
                bail!("--abort-on {bound}: an abort judges the whole run, not one request");
            }
            let mut rule = AbortRule::new(bound.clone());
            rule.delay = args.abort_delay.unwrap_or_default();
            rule.window = args.abort_window.unwrap_or(rule.window);
            if rule.window > headroom_objectives::abort::MAX_WINDOW {
                bail!("--abort-window: at most 60s");
            }
            scenario.aborts.push(rule);
        }
    }
    if (args.abort_delay.is_some() || args.abort_window.is_some()) && args.abort_on.is_empty() {
        bail!("--abort-delay and --abort-window go with --abort-on");
    }
    Ok(scenario)
}

/// A signal event without a pidfile goes to the watched server: there
/// must be one, watched on this machine.
fn check_event_targets(plan: &Plan, watch: &Watch) -> anyhow::Result<()> {
    use headroom_engine::plan::events::Action;
    let local_server = watch.config.root.is_some() && watch.config.remote.is_none();
    for event in &plan.events {
        if let Action::Signal {
            name,
            pidfile: None,
        } = &event.action
        {
            if !local_server {
                bail!(
                    "event `{}`: SIG{name} goes to the monitored server, but no server is \
                     monitored on this machine: add --monitor-pid, --monitor-pidfile or \
                     --monitor-cmd, or give the event a pidfile",
                    event.label
                );
            }
        }
    }
    Ok(())
}

/// The positional argument is a URL (`headroom run http://…`, as wrk and
/// oha take it) or a scenario file.
fn positional_url(args: &RunArgs) -> Option<String> {
    let text = args.scenario.as_ref()?.to_str()?;
    (text.starts_with("http://") || text.starts_with("https://")).then(|| text.to_string())
}

fn file_or_one_liner(args: &RunArgs) -> anyhow::Result<Scenario> {
    let url = positional_url(args).or_else(|| args.url.clone());
    let file = args
        .scenario
        .as_ref()
        .filter(|_| positional_url(args).is_none());
    if file.is_some() {
        for (set, flag) in [
            (args.method.is_some(), "--method"),
            (args.body.is_some(), "--body"),
            (args.expect_status.is_some(), "--expect-status"),
        ] {
            if set {
                bail!("{flag} is for a URL without a scenario file; the file says the requests");
            }
        }
    } else if args.base_url.is_some() {
        bail!("--base-url goes with a scenario file; give the URL itself");
    }
    match (file, &url) {
        (Some(path), _) => {
            let mut file = headroom_scenario::read(path)?;
            overrides(args).apply(&mut file.raw);
            Ok(file.build_bounded(args.max_feeder_size << 20)?)
        }
        (None, Some(url)) => {
            let mut raw = one_liner(args, url)?;
            overrides(args).apply(&mut raw);
            let mut scenario = headroom_scenario::build_raw(&raw, "command line", url)?;
            scenario.plan.label = headroom_http::redact::url(url);
            Ok(scenario)
        }
        (None, None) => match &args.grpc {
            Some(url) => {
                let mut raw = grpc_one_liner(args, url)?;
                overrides(args).apply(&mut raw);
                let mut scenario = headroom_scenario::build_raw(&raw, "command line", url)?;
                scenario.plan.label = headroom_http::redact::url(url);
                Ok(scenario)
            }
            None => bail!("give a scenario file, --url or --grpc"),
        },
    }
}

/// `--grpc URL --call METHOD --data JSON` as a scenario: one gRPC call,
/// over HTTP/2 (cleartext for grpc://, TLS for grpcs://), its types from
/// `--proto`/`--protoset` or the server's reflection.
fn grpc_one_liner(args: &RunArgs, url: &str) -> anyhow::Result<RawScenario> {
    let base = if let Some(rest) = url.strip_prefix("grpc://") {
        format!("http://{rest}")
    } else if let Some(rest) = url.strip_prefix("grpcs://") {
        format!("https://{rest}")
    } else {
        bail!("--grpc `{url}`: give grpc://HOST:PORT (cleartext) or grpcs://HOST:PORT (TLS)");
    };
    if base.trim_end_matches('/').matches('/').count() > 2 {
        bail!("--grpc `{url}`: a server, not a path (the method is --call)");
    }
    let call = args.call.clone().unwrap_or_default();
    let absolute = |p: &std::path::PathBuf| {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.clone())
            .display()
            .to_string()
    };
    Ok(RawScenario {
        base_url: Some(base.trim_end_matches('/').to_string()),
        http: Some(RawHttp {
            version: Some(headroom_scenario::raw::RawHttpVersion(HttpVersion::Http2)),
            ..RawHttp::default()
        }),
        grpc: Some(headroom_scenario::raw::RawGrpc {
            proto: args.proto.iter().map(absolute).collect(),
            import_path: args.import_path.iter().map(absolute).collect(),
            protoset: args.protoset.as_ref().map(absolute),
            compression: args.grpc_compression.clone(),
            keepalive: args.grpc_keepalive.clone(),
        }),
        requests: vec![RawRequest {
            name: call.clone(),
            grpc: Some(call),
            body: Some(args.data.clone().unwrap_or_else(|| "{}".into())),
            stream: (args.stream_call_count.is_some() || args.stream_interval.is_some()).then(
                || headroom_scenario::raw::RawGrpcStream {
                    count: args.stream_call_count,
                    interval: args.stream_interval.clone(),
                },
            ),
            ..RawRequest::default()
        }],
        ..RawScenario::default()
    })
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
                follow: Follow::default(),
                services: Vec::new(),
                probes: Vec::new(),
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
                follow: Follow::default(),
                services: Vec::new(),
                probes: Vec::new(),
            },
            server: None,
        }
    }
}

/// The --monitor-* flags → what to watch (starting the server for
/// --monitor-cmd, checking the token for --monitor-url), with the
/// server's own gauges (--probe).
pub fn watch_from_args(args: &RunArgs, plan: &Plan) -> anyhow::Result<Watch> {
    let mut watch = what_to_watch(args, plan)?;
    watch.config.probes = args.probe.clone();
    Ok(watch)
}

fn what_to_watch(args: &RunArgs, plan: &Plan) -> anyhow::Result<Watch> {
    let interval = args.monitor_interval;
    if let Some(pid) = args.monitor_pid {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("--monitor-pid {pid}: no such process");
        }
        return Ok(Watch::pid(pid, interval, format!("pid {pid}")));
    }
    if let Some(file) = &args.monitor_pidfile {
        let pid = read_pidfile(file)?;
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("--monitor-pidfile {}: no process {pid}", file.display());
        }
        let mut watch = Watch::pid(pid, interval, format!("pid {pid} from {}", file.display()));
        watch.config.follow.pidfile = Some(std::path::absolute(file).unwrap_or(file.clone()));
        return Ok(watch);
    }
    if let Some(cmd) = &args.monitor_cmd {
        let mut server = ServerProcess::spawn(cmd, Duration::from_secs(5))?;
        server.wait_ready(plan.endpoint.addr, args.monitor_ready_timeout)?;
        let mut watch = Watch::pid(server.pid(), interval, format!("command `{cmd}`"));
        // headroom started it on the plan's port: what listens there, and
        // the daemons it leaves with headroom, are the server's.
        watch.config.follow.listen_port = Some(plan.endpoint.addr.port());
        watch.config.follow.adopt_orphans = true;
        watch.server = Some(server);
        return Ok(watch);
    }
    if let Some(url) = &args.monitor_url {
        let source = RemoteSource {
            url: url.trim_end_matches('/').to_string(),
            token: args.monitor_token.clone().unwrap_or_default(),
        };
        // Fail before loading anything if the monitor is not there or
        // refuses the token.
        headroom_monitor::remote::fetch(&source, headroom_monitor::unix_ms())?;
        return Ok(Watch {
            config: MonitorConfig {
                root: None,
                interval,
                remote: Some(source),
                source: format!("remote {url}"),
                follow: Follow::default(),
                services: Vec::new(),
                probes: Vec::new(),
            },
            server: None,
        });
    }
    Ok(Watch::generator_only(interval))
}

/// Runs a plan with live progress and the monitor, writes the results file
/// and the other outputs (even when interrupted), prints the summary.
/// `start`: when the load starts (soon, unless `--start-at` says).
/// Returns the exit code.
pub fn execute(
    scenario: &Scenario,
    stop: &StopSignal,
    watch: Watch,
    recording: &Recording,
    outputs: &Outputs,
    start: Option<SystemTime>,
) -> anyhow::Result<i32> {
    let plan = &scenario.plan;
    if plan.tls.as_ref().is_some_and(|t| t.insecure) {
        eprintln!(
            "headroom: warning: {}",
            headroom_measure::assemble::INSECURE_TLS
        );
    }
    super::common::check_protocol(plan)?;
    let start_instant = match start {
        Some(at) => {
            let instant = instant_of(at);
            let now = std::time::Instant::now();
            if instant > now && !outputs.quiet {
                eprintln!(
                    "headroom: waiting for the start at {} (in {:.1} s)",
                    humantime::format_rfc3339_millis(at),
                    (instant - now).as_secs_f64()
                );
            }
            headroom_engine::Start::Shared(instant)
        }
        None => headroom_engine::start_soon(),
    };
    let mode = if outputs.quiet {
        ProgressMode::Never
    } else {
        outputs.progress
    };
    let live = Live::new(plan.load_duration(), mode);
    let during = During {
        aborts: scenario.aborts.clone(),
        // Commands go with the server headroom started, so whatever they
        // start is stopped with it.
        event_group: watch.server.as_ref().map(|s| s.pid()),
        event_dir: None,
    };
    let reporter = outputs.reporter;
    let measured = measure_from(
        plan,
        stop,
        watch.config.clone(),
        recording,
        &during,
        start_instant,
        |p, sample| {
            live.update(p, sample);
            if let Some(r) = reporter {
                r.second(p);
            }
        },
    );
    live.finish();
    drop(watch.server);
    let mut results = measured.results;
    if let Some(r) = reporter {
        // Every report line out before the results (on the same stdout).
        r.end(&results);
    }
    if let Some(at) = start {
        let late_ms = measured.late_by.as_secs_f64() * 1000.0;
        results.start_at = Some(StartAt {
            at: humantime::format_rfc3339_millis(at).to_string(),
            late_ms,
        });
        if late_ms >= 1.0 {
            results.warnings.push(format!(
                "started {late_ms:.0} ms after --start-at: the open-model arrivals due meanwhile \
                 are counted not_sent"
            ));
        }
    }
    finish(
        results,
        &scenario.thresholds,
        outputs,
        &measured.latency_intervals,
    )
}

/// The `Instant` of a wall-clock time (ahead or past).
pub fn instant_of(at: SystemTime) -> std::time::Instant {
    let now = std::time::Instant::now();
    match at.duration_since(SystemTime::now()) {
        Ok(ahead) => now + ahead,
        Err(past) => now.checked_sub(past.duration()).unwrap_or(now),
    }
}

pub fn run(args: RunCmdArgs) -> anyhow::Result<i32> {
    let RunCmdArgs { run: args, scale } = args;
    let mut scenario = scenario_from_args(&args)?;
    let at_load = |duration| match scale.capacity_step {
        Some(step) => headroom_capacity::plan_at(&scenario.plan, step.axis, step.load, duration),
        None => scenario.plan.lasting(duration),
    };
    let mut warmup = scale.warmup_first.map(|d| {
        let mut warm = at_load(d);
        warm.events.clear();
        warm
    });
    if let Some(d) = scale.lasting {
        scenario.plan = scenario.plan.lasting(d);
    }
    if let Some(step) = scale.capacity_step {
        scenario.plan =
            headroom_capacity::plan_at(&scenario.plan, step.axis, step.load, step.duration);
    }
    if let Some(shard) = scale.shard {
        scenario.plan.set_shard(shard);
        if let Some(warm) = &mut warmup {
            warm.set_shard(shard);
        }
    }
    let mut outputs = Outputs::from_args(&args);
    check_request_names(&outputs.thresholds, &scenario.plan, "--threshold")?;
    outputs.check_writable()?;
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let reporter = match &scale.report_to {
        Some(dest) => {
            // The fleet's coordinator judges the aborting thresholds, on
            // the fleet's figures.
            scenario.aborts.clear();
            Some(super::fleet::report::Reporter::start(
                dest,
                scenario.plan.shard,
                &stop,
            )?)
        }
        None => None,
    };
    outputs.reporter = reporter.as_ref();
    let watch = watch_from_args(&args, &scenario.plan)?;
    check_event_targets(&scenario.plan, &watch)?;
    let exporter = super::metrics::Exporter::start(&args.metrics)?;
    let dashboard = super::dashboard::Dashboard::start(
        &args.dashboard,
        &stop,
        &format!(
            "{}://{}",
            if scenario.plan.endpoint.https {
                "https"
            } else {
                "http"
            },
            scenario.plan.endpoint.host_header
        ),
        None,
    )?;
    let mut recording = recording(&args.buckets, &args.secret_header);
    recording.live = exporter.as_ref().map(|e| e.metrics.clone());
    recording.dashboard = dashboard.as_ref().map(|d| d.feed.clone());
    outputs.dashboard = recording.dashboard.clone();
    let start_at = match &warmup {
        Some(warm) => Some(warm_up(
            warm,
            scale.start_at.unwrap_or_else(SystemTime::now),
            &stop,
        )),
        None => scale.start_at,
    };
    let code = execute(&scenario, &stop, watch, &recording, &outputs, start_at);
    super::metrics::finish(exporter);
    if let Some(d) = dashboard {
        d.finish();
    }
    code
}

/// The warm-up of a step or study run in this process (`--warmup-first`,
/// for a Job's pods): its load from `at`, unmeasured. Returns the measured
/// run's start, 1 s after the warm-up's planned end, the same in every pod:
/// what the warm-up still has in flight then is cut off (only a load the
/// server cannot sustain leaves any, and its step fails either way).
fn warm_up(warm: &Plan, at: SystemTime, stop: &StopSignal) -> SystemTime {
    let measured_from =
        at + warm.load_duration().unwrap_or_default() + std::time::Duration::from_secs(1);
    let ahead = at.duration_since(SystemTime::now()).unwrap_or_default();
    stop.sleep(ahead);
    let warm_stop = stop.child();
    let cut_off = warm_stop.clone();
    let until_cut = measured_from
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        .saturating_sub(std::time::Duration::from_millis(50));
    std::thread::spawn(move || {
        cut_off.sleep(until_cut);
        cut_off.abort();
    });
    let _ = headroom_engine::run(warm, &warm_stop, |_| {});
    warm_stop.abort();
    measured_from
}

/// Bounds that name a request (`p95{login}<500ms`) must name one of the
/// plan's, before any load is sent.
pub fn check_request_names(slo: &Slo, plan: &Plan, flag: &str) -> anyhow::Result<()> {
    slo.check_requests(plan.requests.iter().map(|r| r.name.as_str()))
        .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}
