//! Flags, and the parsers for values that need more than clap gives
//! (durations, rates, stage lists). Each parse error says what was wrong
//! and what would be right.
//!
//! Over 1,000 lines: every subcommand's flags, whose doc comments are the
//! generated command-line reference; one file keeps the shared flags
//! (load, HTTP, outputs) in one place for every subcommand.

use clap::Args;
use headroom_engine::plan::limits;
use headroom_engine::plan::schedule::Stage;
use headroom_engine::plan::UserStage;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Scenario file (.toml, .yaml): requests, sessions, feeders, checks,
    /// load — or a URL to load without one, as wrk and oha take it
    /// (`headroom run http://127.0.0.1:8080/`). Flags override the file.
    #[arg(value_name = "SCENARIO|URL", required_unless_present_any = ["url", "grpc"])]
    pub scenario: Option<std::path::PathBuf>,

    /// URL to load without a scenario file, e.g. http://127.0.0.1:8080/hello
    #[arg(long, value_name = "URL", conflicts_with = "scenario")]
    pub url: Option<String>,

    /// A gRPC server to call without a scenario file: grpc://HOST:PORT
    /// (HTTP/2 in cleartext) or grpcs://HOST:PORT (TLS, ALPN h2); the
    /// method is --call, its message --data.
    #[arg(long, value_name = "URL", conflicts_with_all = ["scenario", "url"], requires = "call")]
    pub grpc: Option<String>,

    /// The gRPC method to call: package.Service/Method.
    #[arg(long, value_name = "METHOD", requires = "grpc")]
    pub call: Option<String>,

    /// The gRPC call's message, as JSON (proto3's JSON mapping) [default: {}];
    /// a call that streams its requests also takes an array of messages.
    #[arg(long, value_name = "JSON", requires = "grpc")]
    pub data: Option<String>,

    /// gRPC message compression both ways: gzip, or identity [default: identity].
    #[arg(long, value_name = "ENCODING", requires = "grpc")]
    pub grpc_compression: Option<String>,

    /// An HTTP/2 PING on each connection this often (gRPC's keepalive);
    /// one unanswered when the next is due closes the connection.
    #[arg(long, value_name = "DURATION", requires = "grpc")]
    pub grpc_keepalive: Option<String>,

    /// A call that streams its requests: messages sent in all, --data's
    /// message (or its array's messages) in turn [default: each once].
    #[arg(long, value_name = "N", requires = "grpc")]
    pub stream_call_count: Option<u32>,

    /// A call that streams its requests: time between one message and the
    /// next, paced from the stream's start [default: all at once].
    #[arg(long, value_name = "DURATION", requires = "grpc")]
    pub stream_interval: Option<String>,

    /// A .proto file with the method's message types, compiled at the
    /// start (no protoc needed; repeatable). Without --proto or
    /// --protoset the server's reflection service is asked.
    #[arg(long, value_name = "FILE", requires = "grpc")]
    pub proto: Vec<std::path::PathBuf>,

    /// A folder where the .proto files' imports are found (repeatable).
    #[arg(long, value_name = "DIR", requires = "proto")]
    pub import_path: Vec<std::path::PathBuf>,

    /// A protoset (FileDescriptorSet: `protoc --descriptor_set_out
    /// --include_imports`) with the method's message types.
    #[arg(long, value_name = "FILE", requires = "grpc", conflicts_with = "proto")]
    pub protoset: Option<std::path::PathBuf>,

    /// With a scenario: the base URL its request paths are joined to.
    #[arg(long, value_name = "URL", requires = "scenario")]
    pub base_url: Option<String>,

    /// Closed model: number of virtual users, each with its own connection.
    #[arg(short = 'u', long, value_name = "N", conflicts_with = "connections")]
    pub vus: Option<u32>,

    /// Closed model: same as --vus. Open model: most connections (requests in
    /// flight) at once [default: 10000].
    #[arg(short = 'c', long, value_name = "N")]
    pub connections: Option<u32>,

    /// How long to apply load, e.g. 30s, 2m, 1m30s [default: 10s unless
    /// --requests or --iterations bound the run].
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Stop after N requests in all.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,

    /// Closed model: requests per user, then the user stops.
    #[arg(long, value_name = "N")]
    pub iterations: Option<u64>,

    /// Closed model: start users evenly over this time.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub ramp_up: Option<Duration>,

    /// Closed model: pause after each response.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub think_time: Option<Duration>,

    /// Open model: send R requests per second for --duration, whatever the
    /// server's speed; latency counts from each request's intended time.
    #[arg(short = 'r', long, value_name = "R", value_parser = parse_rate, conflicts_with = "stages")]
    pub rate: Option<f64>,

    /// Open model with stages: DURATION:RATE holds a rate, DURATION:A->B ramps
    /// linearly, e.g. "10s:10,10s:15,10s:20" or "30s:0->500,1m:500".
    #[arg(long, value_name = "STAGES", value_parser = parse_stages)]
    pub stages: Option<StageList>,

    /// Closed model with stages over users (k6's ramping-vus): DURATION:N
    /// holds N users, DURATION:A->B ramps from A to B users, e.g.
    /// "30s:0->100,1m:100,10s:100->0". Users that leave finish their
    /// iteration first.
    #[arg(long, value_name = "STAGES", value_parser = parse_vu_stages,
          conflicts_with_all = ["rate", "stages", "vus", "ramp_up", "duration"])]
    pub vu_stages: Option<UserStageList>,

    /// Open a new connection for every request (sends Connection: close).
    #[arg(long)]
    pub no_keepalive: bool,

    /// Time allowed for the TCP (and TLS) handshake [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub connect_timeout: Option<Duration>,

    /// Time allowed for a whole response after sending [default: 60s, as
    /// Gatling].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// After the load ends, how long in-flight requests may finish before
    /// being cut off (counted as `aborted`) [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub graceful_stop: Option<Duration>,

    /// HTTP method (one-liner) [default: GET].
    #[arg(short = 'm', long)]
    pub method: Option<String>,

    /// Extra request header, "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,

    /// Request body (one-liner).
    #[arg(long, value_name = "TEXT")]
    pub body: Option<String>,

    /// Statuses that count as OK, e.g. 200,404 (one-liner) [default:
    /// anything below 400].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_status)]
    pub expect_status: Option<Vec<u16>>,

    /// Skip TLS certificate verification (as curl -k). A warning is printed
    /// and kept in the results.
    #[arg(short = 'k', long)]
    pub insecure: bool,

    /// Trust the CA certificates (or the self-signed server certificate) in
    /// this PEM file, besides the system's.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,

    /// A header whose value is a secret: sent, but written as *** in the
    /// results and reports (repeatable). Authorization, Proxy-Authorization,
    /// Cookie and Set-Cookie always are.
    #[arg(long, value_name = "NAME")]
    pub secret_header: Vec<String>,

    /// Speak HTTP/2: over https:// the server must agree in TLS (ALPN
    /// `h2`; a clear error before any load if it does not), over http://
    /// HTTP/2 with prior knowledge (h2c). Same as --http-version 2.
    #[arg(long, conflicts_with = "http_version")]
    pub http2: bool,

    /// Speak HTTP/3 over QUIC (https:// only): TLS 1.3 with ALPN `h3` over
    /// UDP to the URL's port; a clear error before any load if the server
    /// does not answer it. Same as --http-version 3.
    #[arg(long, conflicts_with_all = ["http_version", "http2"])]
    pub http3: bool,

    /// HTTP/3: resume QUIC connections with 0-RTT where the server allows
    /// it (a session ticket from an earlier connection): idempotent
    /// requests go before the handshake completes, others wait for it.
    /// Off by default: early data can be replayed.
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,

    /// HTTP version: 1.1, 2 (as --http2), 3 (as --http3) or auto (over
    /// https:// ALPN h2,http/1.1 and what the server chooses) [default:
    /// the scenario's `[http] version`, else 1.1].
    #[arg(long, value_name = "VERSION", value_parser = headroom_http::HttpVersion::NAMES)]
    pub http_version: Option<String>,

    /// HTTP/2 and HTTP/3: most streams in flight on one connection
    /// [default: 10; never above what the server allows]. With the closed
    /// model, --connections C and no number of users run C × streams
    /// users, as h2load's -c and -m.
    #[arg(long, value_name = "M")]
    pub streams: Option<u32>,

    /// When a reused keep-alive connection turns out closed by the server
    /// before the request reached it, send the request again on a new
    /// connection: idempotent (GET, HEAD, PUT, DELETE, OPTIONS, TRACE), all,
    /// or never [default: idempotent].
    #[arg(long, value_name = "WHICH", value_parser = headroom_http::exchange::StaleRetry::NAMES)]
    pub stale_connection_retry: Option<String>,

    /// Open connections from these source addresses, in turn: a list and
    /// ranges, e.g. 127.0.0.2-127.0.0.9 (one source address reaches a server
    /// address and port through at most ~28k ephemeral ports).
    #[arg(long, value_name = "ADDRS", value_parser = parse_local_addresses)]
    pub local_address: Option<LocalAddresses>,

    /// Connect to HOST2:PORT2 for requests to HOST1:PORT1, keeping the URL
    /// and Host header (curl's --connect-to; repeatable). An empty HOST1 or
    /// PORT1 matches any: `::127.0.0.1:8080` sends every host name to
    /// 127.0.0.1:8080, as a router test needs.
    #[arg(long, value_name = "HOST1:PORT1:HOST2:PORT2", value_parser = check_connect_to)]
    pub connect_to: Vec<String>,

    /// Resolve HOST on PORT to ADDRESS without asking DNS (curl's
    /// --resolve; repeatable; HOST `*` matches any).
    #[arg(long, value_name = "HOST:PORT:ADDRESS", value_parser = check_resolve)]
    pub resolve: Vec<String>,

    /// Generator threads (one event loop each) [default: the CPUs available].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// How the load runs: `auto` — HTTP/1.1 (over TLS too) to the plan's
    /// endpoint, closed or open, plain requests or whole sessions
    /// (templates, checks, extraction, feeders, cookies), from one event
    /// loop per thread, the fast path; user stages, other origins,
    /// per-host pools, WebSockets, event streams, HTTP/2 and HTTP/3 a task
    /// per user or arrival — or `tasks`, a task per user or arrival always
    /// [default: auto]. results.json says which ran
    /// (`meta.generator_engine`).
    #[arg(long, value_name = "ENGINE", value_parser = headroom_engine::plan::Engine::NAMES)]
    pub engine: Option<String>,

    /// Bounds of the response-time distribution in ms.
    #[arg(
        long,
        value_name = "MS,MS",
        value_delimiter = ',',
        default_value = "800,1200"
    )]
    pub buckets: Vec<u64>,

    /// Write the results (JSON) to this file; `-` writes them to standard
    /// output (and the summary to standard error).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,

    /// Largest feeder file read, in MiB: its rows are held in memory for
    /// the run. A larger file (or one that is not a regular file) is
    /// refused before any load, naming the file and the limit.
    #[arg(long, value_name = "MIB", default_value_t = 1024)]
    pub max_feeder_size: u64,

    /// Where the results go when --out cannot be written at the end (a
    /// full disk) [default: a file in the system's temporary folder]; the
    /// exit code is then 3 and the path is printed.
    #[arg(long, value_name = "FILE")]
    pub out_fallback: Option<std::path::PathBuf>,

    /// Print nothing but errors (no progress, no summary, no list of the
    /// files written).
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Progress while the load runs: auto (a live line on a terminal, a
    /// plain line every 10 s otherwise, so CI logs show a heartbeat),
    /// always (the plain line every 10 s, even on a terminal), never.
    #[arg(long, value_enum, default_value_t = ProgressFlag::Auto)]
    pub progress: ProgressFlag,

    #[command(flatten)]
    pub reports: ReportArgs,

    #[command(flatten)]
    pub metrics: MetricsArgs,

    #[command(flatten)]
    pub dashboard: DashboardArgs,

    #[command(flatten)]
    pub trace: TraceArgs,

    /// Pass/fail bound, e.g. 'p95<500ms' or 'errors<1%', or for one request
    /// 'p95{login}<300ms' (repeatable; also `[thresholds]` in the scenario).
    /// Any breach makes the exit code 1.
    #[arg(long = "threshold", value_name = "BOUND", value_parser = parse_slo)]
    pub thresholds: Vec<headroom_objectives::slo::Slo>,

    /// Stop the run early when this bound is breached over the last
    /// --abort-window (k6's abortOnFail), e.g. 'p99<2s' or 'errors<5%':
    /// results so far are written, `stop_reason` is "threshold", exit
    /// code 1. Repeatable; each is also a --threshold.
    #[arg(long = "abort-on", value_name = "BOUND", value_parser = parse_slo)]
    pub abort_on: Vec<headroom_objectives::slo::Slo>,

    /// Judge --abort-on only after this long (warm-up, ramp-up) [default: 0s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub abort_delay: Option<Duration>,

    /// The rolling window --abort-on is judged on, at most 60s [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub abort_window: Option<Duration>,

    /// Run a command at a moment of the run, e.g.
    /// '4s:kill -USR2 $(cat unicorn.pid)' or 'stage:2:touch tmp/restart.txt'
    /// (repeatable; also `[[event]]` in the scenario, which can send
    /// signals). What users saw after each is in results' `events`.
    #[arg(long = "event", value_name = "AT:COMMAND", value_parser = parse_event)]
    pub events: Vec<headroom_engine::plan::events::Event>,

    /// Write the thresholds as JUnit XML (a test case each) for CI.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,

    /// Write the timeline, per-request figures and server samples as CSV
    /// files (timeline.csv, requests.csv, server.csv) into DIR.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<std::path::PathBuf>,

    /// Write each second's latency histogram in HdrHistogram's interval
    /// log format.
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<std::path::PathBuf>,

    /// Watch this server process and all its descendants.
    #[arg(long, value_name = "PID", conflicts_with_all = ["monitor_pidfile", "monitor_cmd", "monitor_url"])]
    pub monitor_pid: Option<i32>,

    /// Watch the process whose pid is in FILE (and its descendants).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["monitor_cmd", "monitor_url"])]
    pub monitor_pidfile: Option<std::path::PathBuf>,

    /// Start the server with `sh -c CMD` (own process group), wait until the
    /// target's port accepts connections, watch it, stop it after the run.
    #[arg(long, value_name = "CMD", conflicts_with = "monitor_url")]
    pub monitor_cmd: Option<String>,

    /// How long --monitor-cmd may take to open the port.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub monitor_ready_timeout: Duration,

    /// Pull server samples from `headroom monitor` on the server's host.
    #[arg(long, value_name = "URL", requires = "monitor_token")]
    pub monitor_url: Option<String>,

    /// The token `headroom monitor` printed.
    #[arg(long, value_name = "TOKEN")]
    pub monitor_token: Option<String>,

    /// Sampling interval (100ms or more).
    #[arg(long, value_name = "DURATION", value_parser = parse_interval, default_value = "1s")]
    pub monitor_interval: Duration,

    /// Read the server's own gauges at each sample (repeatable):
    /// `puma=URL` (its control app's /stats?token=…), `nginx=URL`
    /// (stub_status), `haproxy=SOCKET` (stats socket), `passenger`
    /// (passenger-status), `prometheus=URL#name,name` (series to keep).
    /// A probe that fails is a warning.
    #[arg(long, value_name = "KIND=TARGET", value_parser = parse_probe)]
    pub probe: Vec<headroom_monitor::probes::Probe>,
}

fn parse_probe(spec: &str) -> Result<headroom_monitor::probes::Probe, String> {
    spec.parse()
}

/// `headroom run`: the run's flags, and how it is spread over processes
/// and machines.
#[derive(Args, Debug, Clone)]
pub struct RunCmdArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub scale: ScaleArgs,
}

/// `headroom run`'s flags alone, as `k8s run` reads the run flags its
/// pods get (to know their plan, thresholds and aborts).
#[derive(clap::Parser, Debug, Clone)]
pub struct RunOnly {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub scale: ScaleArgs,
}

/// W3C trace context on every request, and where a trace ID leads.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Trace context")]
pub struct TraceArgs {
    /// Send W3C `traceparent` on every request (HTTP/1.1, HTTP/2, HTTP/3,
    /// WebSocket handshakes, gRPC metadata) and keep the slowest requests'
    /// trace IDs in the results (`exemplars`), the report and the
    /// OpenMetrics output. Also `[trace]` in the scenario.
    #[arg(long)]
    pub trace: bool,

    /// A fresh trace ID for every request (default), or one per session
    /// iteration whose requests are its spans. Implies --trace.
    #[arg(long, value_name = "request|iteration", value_parser = parse_trace_per)]
    pub trace_per: Option<headroom_engine::plan::trace_context::TracePer>,

    /// Send traceparent's sampled flag as 00 (default 01: the server's
    /// tracer is asked to record every trace). Implies --trace.
    #[arg(long)]
    pub trace_unsampled: bool,

    /// A `tracestate` header sent as given on every request, e.g.
    /// 'vendor=value'. Implies --trace.
    #[arg(long, value_name = "VALUE")]
    pub trace_state: Option<String>,

    /// Where a trace ID leads from the report: a URL with {id}, e.g.
    /// 'http://127.0.0.1:16686/trace/{id}'. Implies --trace.
    #[arg(long, value_name = "URL")]
    pub trace_url: Option<String>,
}

fn parse_trace_per(s: &str) -> Result<headroom_engine::plan::trace_context::TracePer, String> {
    headroom_engine::plan::trace_context::TracePer::from_name(s).ok_or_else(|| {
        format!(
            "`{s}` is not one of {}",
            headroom_engine::plan::trace_context::TracePer::NAMES.join(", ")
        )
    })
}

/// Scale-out: shards of one plan that together run exactly the plan.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Scale-out")]
pub struct ScaleArgs {
    /// Run shard K of N (K = 1…N): its share of the users, arrivals,
    /// --requests budget and feeder rows. The N shards together are exactly
    /// the plan; merge their results with `headroom merge`.
    #[arg(long, value_name = "K/N", value_parser = parse_shard, conflicts_with = "processes")]
    pub shard: Option<headroom_engine::plan::shard::Shard>,

    /// Start the load at TIME — RFC 3339 UTC (2026-11-23T10:00:00Z) or
    /// +DURATION from now (+30s) — so shards on several machines share one
    /// time axis. A run started after TIME says how late it was and counts
    /// the arrivals it missed as not sent.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,

    /// Run P shards as child processes of this one and merge their results:
    /// one command, one summary, for more connections than one process's
    /// open-files limit allows (P = 1: the run in this process).
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub processes: Option<u32>,

    /// A shard of a fleet: send each finished second (counts and HDR
    /// histograms, a few KB) to the process that shows and judges the
    /// fleet — `-` (standard output, one JSON line each, as `k8s run`
    /// follows the pods' logs) or http://HOST:PORT (a `headroom fleet`
    /// coordinator, which is sent the results too). The fleet's aborting
    /// thresholds and verdict are judged there: this shard does not abort
    /// on its own share, and its exit code does not carry thresholds.
    #[arg(long, value_name = "-|URL", requires = "shard")]
    pub report_to: Option<String>,

    /// A capacity search's step, for its shards in child processes
    /// (`capacity --processes`): the scenario at LOAD on AXIS for DURATION,
    /// as the search's own steps are made.
    #[arg(long, hide = true, value_name = "AXIS:LOAD:DURATION", value_parser = parse_capacity_step)]
    pub capacity_step: Option<CapacityStep>,

    /// A study's run, for its shards in child processes (`study
    /// --processes`): the load cut to DURATION as the study cuts it
    /// (closed: runs for it; open: the stages scaled to it).
    #[arg(long, hide = true, value_name = "DURATION", value_parser = parse_duration)]
    pub lasting: Option<Duration>,

    /// A warm-up in the same process before the measured run (`capacity
    /// --k8s`, `study --k8s`: one Job per step): the run's load for
    /// DURATION, unmeasured, from --start-at (or now); the measured run
    /// starts DURATION + 1 s after it.
    #[arg(long, hide = true, value_name = "DURATION", value_parser = parse_duration)]
    pub warmup_first: Option<Duration>,
}

/// `--capacity-step rate:400:10s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapacityStep {
    pub axis: headroom_objectives::capacity::Axis,
    pub load: f64,
    pub duration: Duration,
}

impl CapacityStep {
    pub fn to_arg(self) -> String {
        let axis = match self.axis {
            headroom_objectives::capacity::Axis::Rate => "rate",
            headroom_objectives::capacity::Axis::Users => "users",
        };
        format!("{axis}:{}:{}ms", self.load, self.duration.as_millis())
    }
}

pub fn parse_capacity_step(s: &str) -> Result<CapacityStep, String> {
    let mut parts = s.splitn(3, ':');
    let (Some(axis), Some(load), Some(duration)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("`{s}`: write AXIS:LOAD:DURATION"));
    };
    Ok(CapacityStep {
        axis: parse_axis(axis)?,
        load: load
            .parse()
            .map_err(|_| format!("`{load}` is not a load"))?,
        duration: parse_duration(duration)?,
    })
}

pub fn parse_shard(s: &str) -> Result<headroom_engine::plan::shard::Shard, String> {
    headroom_engine::plan::shard::Shard::parse(s)
}

/// The latest start accepted: a day ahead (a typo should not leave a
/// process waiting for a year).
const MAX_START_AHEAD: Duration = Duration::from_secs(24 * 3600);

pub fn parse_start_at(s: &str) -> Result<std::time::SystemTime, String> {
    let now = std::time::SystemTime::now();
    let t = s.trim();
    let at = if let Some(ahead) = t.strip_prefix('+') {
        now + parse_duration(ahead)?
    } else {
        humantime::parse_rfc3339_weak(t).map_err(|e| {
            format!("`{s}` is not a start time ({e}); write RFC 3339 UTC, e.g. 2026-11-23T10:00:00Z, or +30s")
        })?
    };
    if at.duration_since(now).is_ok_and(|d| d > MAX_START_AHEAD) {
        return Err(format!("`{s}` is more than a day ahead"));
    }
    Ok(at)
}

/// `headroom merge`.
#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// The shards' results files (`run --shard K/N --out FILE`).
    #[arg(required = true, value_name = "SHARD.json")]
    pub files: Vec<std::path::PathBuf>,
    /// Write the merged results (JSON) to this file.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
    /// Merge even when shards are missing (a warning names them).
    #[arg(long)]
    pub allow_partial: bool,
    /// Print no summary.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    #[command(flatten)]
    pub reports: ReportArgs,
}

/// `headroom k8s`: manifests for an Indexed Job, the whole run on a
/// cluster (`run`), or (`collect`) the Job's results.
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct K8sArgs {
    #[command(subcommand)]
    pub collect: Option<K8sCommand>,
    #[command(flatten)]
    pub job: K8sJobArgs,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum K8sCommand {
    /// Read the results of the Job's pods (`kubectl logs`) and merge them.
    Collect(K8sCollectArgs),
    /// The whole run on a cluster: apply the Job, follow the shards live,
    /// merge, judge the thresholds on the merge, delete the Job.
    Run(Box<K8sRunArgs>),
}

/// `headroom fleet`: the coordinator of shards started by hand.
#[derive(Args, Debug, Clone)]
pub struct FleetArgs {
    /// The scenario the shards run (for the fleet's plan, thresholds and
    /// aborting thresholds; give the shards' run flags after `--` too).
    #[arg(value_name = "SCENARIO")]
    pub scenario: std::path::PathBuf,
    /// How many shards report here.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub shards: u32,
    /// Where the shards report (`--report-to http://ADDR`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7099")]
    pub listen: std::net::SocketAddr,
    /// A token every shard must send (`--report-to http://TOKEN@HOST:PORT`);
    /// needed off loopback.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Give up on shards that have not sent their results this long after
    /// the coordinator started.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1h")]
    pub wait: Duration,
    #[command(flatten)]
    pub fleet: FleetOutputArgs,
    /// The shards' `headroom run` flags, after `--` (for the plan, and
    /// thresholds judged on the merge), e.g. -- --rate 900 -d 10m
    #[arg(last = true, value_name = "RUN FLAGS")]
    pub run_flags: Vec<String>,
}

/// What the pods run, and where: shared by `k8s` and `k8s run`.
#[derive(Args, Debug, Clone)]
pub struct K8sPodArgs {
    /// The scenario file; it and the files it reads (feeders, bodies, CA
    /// file) go into a ConfigMap.
    #[arg(value_name = "SCENARIO", required = true)]
    pub scenario: Option<std::path::PathBuf>,
    /// Shards, one pod each.
    #[arg(long, value_name = "N", required = true)]
    pub shards: Option<u32>,
    /// The container image with headroom (see the Dockerfile).
    #[arg(long, value_name = "IMAGE", required = true)]
    pub image: Option<String>,
    /// The Kubernetes namespace.
    #[arg(short = 'n', long, value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// The Job's name [default: headroom-<scenario name>].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    #[command(flatten)]
    pub placement: PodPlacement,
    /// More `headroom run` flags for every pod, after `--`, e.g. -- --threads 2
    #[arg(last = true, value_name = "RUN FLAGS")]
    pub run_flags: Vec<String>,
}

/// What each pod asks of a node, and which nodes it may run on: shared by
/// `k8s`, `k8s run`, `capacity --k8s` and `study --k8s`.
#[derive(Args, Debug, Clone)]
pub struct PodPlacement {
    /// CPU requested per pod.
    #[arg(long, default_value = "1")]
    pub cpu: String,
    /// Memory requested (and limited to) per pod.
    #[arg(long, default_value = "1Gi")]
    pub memory: String,
    /// The pods use the node's network (hostNetwork: no overlay or NAT in
    /// the way of a large run; one pod per node and port range; refused in
    /// a namespace that enforces the `restricted` profile).
    #[arg(long)]
    pub host_network: bool,
    /// Run the pods only on nodes with this label (repeatable), e.g.
    /// --node-selector pool=load.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_label)]
    pub node_selector: Vec<(String, String)>,
    /// Let the pods run on nodes with this taint (repeatable):
    /// KEY[=VALUE][:EFFECT], e.g. --toleration dedicated=load:NoSchedule.
    #[arg(long, value_name = "TAINT", value_parser = headroom_k8s::parse_toleration)]
    pub toleration: Vec<headroom_k8s::k8s_openapi::api::core::v1::Toleration>,
}

/// `capacity --k8s` and `study --k8s`: every measured run's load (a
/// search's steps, a study's runs) generated by pods of a cluster.
#[derive(Args, Debug, Clone)]
pub struct ClusterLoadArgs {
    /// Generate the load on pods of a Kubernetes cluster: one Indexed Job
    /// per step or run (its warm-up in the same pods), every pod on one
    /// start, the load split across them, their results merged exactly
    /// before the verdict. Needs a scenario file, --shards and --image.
    #[arg(long, requires_all = ["shards", "image"], conflicts_with = "processes")]
    pub k8s: bool,
    /// Pods per step or run with --k8s (one shard each).
    #[arg(long, value_name = "N", requires = "k8s", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub shards: Option<u32>,
    /// The container image with headroom, with --k8s (see the Dockerfile).
    #[arg(long, value_name = "IMAGE", requires = "k8s")]
    pub image: Option<String>,
    /// The Kubernetes namespace, with --k8s.
    #[arg(long, value_name = "NS", default_value = "default")]
    pub namespace: String,
    #[command(flatten)]
    pub placement: PodPlacement,
    /// The kubectl to run, with --k8s.
    #[arg(long, value_name = "PATH", default_value = "kubectl")]
    pub kubectl: String,
    /// From applying the first Job to its pods' start, with --k8s (the
    /// next Jobs' lead is learned: twice the time the last Job's pods took
    /// to run, plus 2 s, within 3–30 s) [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "k8s")]
    pub start_lead: Option<Duration>,
    /// Give up on a pod still not running this long after its Job's start
    /// (it is left out of that run's merge, and named), with --k8s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2m")]
    pub start_timeout: Duration,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("`{s}`: write KEY=VALUE")),
    }
}

#[derive(Args, Debug, Clone)]
pub struct K8sJobArgs {
    #[command(flatten)]
    pub pods: K8sPodArgs,
    /// When every shard starts: RFC 3339 UTC or +DURATION from now. Apply
    /// the manifests before then.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at, default_value = "+2m")]
    pub start_at: std::time::SystemTime,
    /// Folder the YAML manifests are written into.
    #[arg(short = 'o', long, value_name = "DIR", required = true)]
    pub out: Option<std::path::PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct K8sRunArgs {
    #[command(flatten)]
    pub pods: K8sPodArgs,
    /// When every shard starts: RFC 3339 UTC or +DURATION from now
    /// [default: 30 s after the Job is applied]. Given, the run is refused
    /// when the nodes cannot hold every pod by then.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Give up on a pod still not running this long after the start (it
    /// is left out of the merge, and named).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2m")]
    pub start_timeout: Duration,
    /// Leave the Job and ConfigMap in the cluster afterwards.
    #[arg(long)]
    pub keep: bool,
    /// The kubectl to run.
    #[arg(long, value_name = "PATH", default_value = "kubectl")]
    pub kubectl: String,
    /// Keep each shard's results file in this folder too.
    #[arg(long, value_name = "DIR")]
    pub shards_dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub fleet: FleetOutputArgs,
}

/// What a fleet's coordinator (`k8s run`, `fleet`) shows and writes.
#[derive(Args, Debug, Clone)]
pub struct FleetOutputArgs {
    /// Write the merged results (JSON) here.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
    /// Nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
    /// The fleet's live line: auto (on a terminal, a plain line every 10 s
    /// otherwise), always (the plain line), never.
    #[arg(long, value_enum, default_value_t = ProgressFlag::Auto)]
    pub progress: ProgressFlag,
    #[command(flatten)]
    pub reports: ReportArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub dashboard: DashboardArgs,
}

#[derive(Args, Debug, Clone)]
pub struct K8sCollectArgs {
    /// The Job's name.
    pub job: String,
    /// The Kubernetes namespace.
    #[arg(short = 'n', long, value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// Write the merged results (JSON) here.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
    /// Keep each shard's results file in this folder too.
    #[arg(long, value_name = "DIR")]
    pub shards_dir: Option<std::path::PathBuf>,
    /// Merge even when shards are missing (a warning names them).
    #[arg(long)]
    pub allow_partial: bool,
    /// The kubectl to run.
    #[arg(long, value_name = "PATH", default_value = "kubectl")]
    pub kubectl: String,
    #[command(flatten)]
    pub reports: ReportArgs,
}

/// Outputs for people, shared by run, study, capacity, report, compare.
#[derive(Args, Debug, Clone, Default)]
pub struct ReportArgs {
    /// Write a self-contained HTML report (charts included, nothing loaded
    /// from the network).
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,

    /// Print the summary and comparison tables as Markdown, ready to paste.
    #[arg(long)]
    pub markdown: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ReportCmdArgs {
    /// A results file of `run` (--out), a study.json or a capacity report.
    pub results: std::path::PathBuf,
    #[command(flatten)]
    pub reports: ReportArgs,
    /// Write the CSV files of a run into DIR.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<std::path::PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Results files of `run` and/or study.json files; the first is the
    /// baseline.
    #[arg(required = true, num_args = 2..)]
    pub files: Vec<std::path::PathBuf>,
    /// Exit with code 1 when any figure of a later run is WORSE than the
    /// baseline's beyond noise (for CI: fail a build that regressed).
    #[arg(long)]
    pub fail_on_regression: bool,
    #[command(flatten)]
    pub reports: ReportArgs,
}

#[derive(Args, Debug, Clone)]
pub struct CapacityArgs {
    /// The scenario (file or --url), its HTTP settings and the monitor
    /// flags, as for `headroom run`. The load is set by the search.
    #[command(flatten)]
    pub run: RunArgs,

    /// Run every step as P shards in child processes on one shared start,
    /// merged exactly before the search decides its next step — for a
    /// server that one generator process cannot load (the generator-bound
    /// verdict sees every shard's).
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub processes: Option<u32>,

    #[command(flatten)]
    pub cluster: ClusterLoadArgs,

    /// The objective every step must meet, e.g. 'p90<500ms,errors<5%'
    /// (p50 p75 p90 p95 p99 p999 mean max in ms/s, errors and achieved in %,
    /// throughput in req/s). On the rate axis achieved>=95% is added unless
    /// given. Overrides `[capacity]` slo in the scenario.
    #[arg(long, value_name = "OBJECTIVE", value_parser = parse_slo)]
    pub slo: Option<headroom_objectives::slo::Slo>,

    /// What to grow: rate (arrivals per second, open model) or users
    /// (closed model) [default: rate].
    #[arg(long, value_name = "AXIS", value_parser = parse_axis)]
    pub axis: Option<headroom_objectives::capacity::Axis>,

    /// First load tried [default: 10 req/s, or 1 user].
    #[arg(long, value_name = "X", value_parser = parse_rate)]
    pub min: Option<f64>,

    /// Highest load tried [default: 100000 req/s, or 10000 users].
    #[arg(long, value_name = "X", value_parser = parse_rate)]
    pub max: Option<f64>,

    /// Factor between loads while growing [default: 2].
    #[arg(long, value_name = "F")]
    pub growth: Option<f64>,

    /// Width of the final interval [default: 5%].
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub precision: Option<f64>,

    /// Length of each measured step [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub step_duration: Option<Duration>,

    /// Load before each step at the step's level, not counted [default: 5s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub warmup: Option<Duration>,

    /// Pause between steps for the server to drain [default: 5s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub pause: Option<Duration>,

    /// Bound on the whole search [default: 30m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub max_time: Option<Duration>,

    /// The answer run again this long before it is given; a failed
    /// confirmation moves the answer down. 0s for none [default: 3 × --step-duration].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub confirm_duration: Option<Duration>,
}

pub fn parse_slo(s: &str) -> Result<headroom_objectives::slo::Slo, String> {
    headroom_objectives::slo::Slo::parse(s).map_err(|e| e.to_string())
}

fn parse_axis(s: &str) -> Result<headroom_objectives::capacity::Axis, String> {
    headroom_objectives::capacity::Axis::parse(s).ok_or_else(|| format!("`{s}`: use rate or users"))
}

/// "5%" → 0.05.
fn parse_percent(s: &str) -> Result<f64, String> {
    s.trim()
        .strip_suffix('%')
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| *v > 0.0 && *v < 100.0)
        .map(|v| v / 100.0)
        .ok_or_else(|| format!("`{s}` is not a percentage between 0 and 100, e.g. 5%"))
}

#[derive(Args, Debug, Clone)]
pub struct MonitorArgs {
    /// Address to serve samples on.
    #[arg(long, default_value = "127.0.0.1:9099")]
    pub listen: String,
    /// The server process to watch (with its descendants).
    #[arg(long, value_name = "PID", required_unless_present = "pidfile")]
    pub pid: Option<i32>,
    #[arg(long, value_name = "FILE", conflicts_with = "pid")]
    pub pidfile: Option<std::path::PathBuf>,
    /// Bearer token clients must present [default: a random one, printed].
    #[arg(long)]
    pub token: Option<String>,
    #[arg(long, value_name = "DURATION", value_parser = parse_interval, default_value = "1s")]
    pub interval: Duration,
    /// Allow listening on a non-loopback address.
    #[arg(long)]
    pub public: bool,
    /// Read the server's own gauges at each sample, on its host (as
    /// `run --probe`: puma=URL, nginx=URL, haproxy=SOCKET, passenger,
    /// prometheus=URL#name,…).
    #[arg(long, value_name = "KIND=TARGET", value_parser = parse_probe)]
    pub probe: Vec<headroom_monitor::probes::Probe>,
}

pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < headroom_monitor::MIN_INTERVAL {
        return Err(format!("`{s}`: the monitor samples at most every 100ms"));
    }
    Ok(d)
}

#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Address to listen on (port 0 picks a free port; the first line of
    /// output says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Worker processes sharing the port (0 = serve from one process).
    #[arg(short = 'w', long, default_value_t = 1)]
    pub workers: u32,
    /// App threads per worker: requests served at once by each worker.
    #[arg(short = 't', long, default_value_t = 4)]
    pub threads: u32,
    /// Allow listening on a non-loopback address.
    #[arg(long)]
    pub public: bool,
    /// Listen backlog (the kernel's accept queue).
    #[arg(long, default_value_t = 1024)]
    pub backlog: u32,
    /// Requests that may wait for an app thread in each worker; more are
    /// answered 503 at once, like Passenger's full request queue
    /// [default: unbounded].
    #[arg(long, value_name = "N")]
    pub queue: Option<u32>,

    /// Append a line to FILE for every request as it reaches the app: the
    /// server's own count, kept across a kill and a restart.
    #[arg(long, value_name = "FILE")]
    pub request_log: Option<std::path::PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct StudyArgs {
    /// The study file (.toml).
    pub study: std::path::PathBuf,
    /// Folder for study.json and study.csv [default: next to the study,
    /// named after it].
    #[arg(short = 'o', long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
    /// Measure every configuration again (ignore an earlier study.json).
    #[arg(long)]
    pub fresh: bool,
    /// Run every measured run (and each capacity step) as P shards in
    /// child processes on one shared start, merged exactly: for servers
    /// one generator process cannot load. The study's events are not acted
    /// on then (they belong beside the server, in one process).
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub processes: Option<u32>,
    #[command(flatten)]
    pub cluster: ClusterLoadArgs,
    #[command(flatten)]
    pub reports: ReportArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub dashboard: DashboardArgs,
    /// Bounds of the response-time distribution in ms.
    #[arg(
        long,
        value_name = "MS,MS",
        value_delimiter = ',',
        default_value = "800,1200"
    )]
    pub buckets: Vec<u64>,
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// How long to load each configuration.
    #[arg(short = 'd', long, value_parser = parse_duration, default_value = "8s")]
    pub duration: Duration,
    /// Folder for the demo study's study.json and study.csv [default: a
    /// temporary folder].
    #[arg(short = 'o', long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub reports: ReportArgs,
    #[command(flatten)]
    pub dashboard: DashboardArgs,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StageList(pub Vec<Stage>);

#[derive(Clone, Debug, PartialEq)]
pub struct LocalAddresses(pub Vec<std::net::IpAddr>);

/// At most this many source addresses (a /16).
const MAX_LOCAL_ADDRESSES: usize = 65_536;

pub fn parse_event(s: &str) -> Result<headroom_engine::plan::events::Event, String> {
    headroom_engine::plan::events::parse_flag(s)
}

/// `127.0.0.2-127.0.0.9,::1`: addresses and IPv4 ranges.
fn check_connect_to(s: &str) -> Result<String, String> {
    headroom_http::routes::ConnectTo::parse(s).map(|_| s.to_string())
}

fn check_resolve(s: &str) -> Result<String, String> {
    headroom_http::routes::Resolve::parse(s).map(|_| s.to_string())
}

pub fn parse_local_addresses(s: &str) -> Result<LocalAddresses, String> {
    use std::net::{IpAddr, Ipv4Addr};
    let mut all = Vec::new();
    for part in s.split(',').map(str::trim) {
        let bad = |what: &str| format!("`{part}` in --local-address: {what}");
        match part.split_once('-') {
            None => all.push(
                part.parse::<IpAddr>()
                    .map_err(|_| bad("not an IP address"))?,
            ),
            Some((a, b)) => {
                let a: Ipv4Addr = a
                    .trim()
                    .parse()
                    .map_err(|_| bad("ranges are IPv4, e.g. 127.0.0.2-127.0.0.9"))?;
                let b: Ipv4Addr = b
                    .trim()
                    .parse()
                    .map_err(|_| bad("ranges are IPv4, e.g. 127.0.0.2-127.0.0.9"))?;
                let (a, b) = (u32::from(a), u32::from(b));
                if a > b {
                    return Err(bad("the range goes backwards"));
                }
                if (b - a) as usize >= MAX_LOCAL_ADDRESSES {
                    return Err(bad("more than 65536 addresses"));
                }
                all.extend((a..=b).map(|n| IpAddr::V4(Ipv4Addr::from(n))));
            }
        }
        if all.len() > MAX_LOCAL_ADDRESSES {
            return Err(format!(
                "--local-address: more than {MAX_LOCAL_ADDRESSES} addresses"
            ));
        }
    }
    Ok(LocalAddresses(all))
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("`{s}` is not a duration ({e}); write e.g. 500ms, 30s, 2m, 1h30m"))?;
    limits::check_duration(&format!("`{s}`"), d, false)
}

pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches("/s");
    match t.parse::<f64>() {
        Ok(r) if r > limits::MAX_RATE => Err(format!(
            "`{s}` is more than headroom sends: at most {} requests per second",
            limits::MAX_RATE
        )),
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "`{s}` is not a rate; write requests per second as a positive number, e.g. 500 or 12.5"
        )),
    }
}

fn parse_stage_rate(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches("/s");
    match t.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 0.0 => Ok(r),
        _ => Err(format!("`{s}` is not a rate (requests per second ≥ 0)")),
    }
}

pub fn parse_stages(s: &str) -> Result<StageList, String> {
    let mut stages = Vec::new();
    for (i, part) in s.split(',').enumerate() {
        let n = i + 1;
        let (d, rate) = part.split_once(':').ok_or_else(|| {
            format!("stage {n} `{part}`: expected DURATION:RATE or DURATION:FROM->TO, e.g. 30s:100")
        })?;
        let duration = parse_duration(d).map_err(|e| format!("stage {n}: {e}"))?;
        if duration.is_zero() {
            return Err(format!("stage {n}: duration must be greater than zero"));
        }
        let stage = match rate.split_once("->") {
            Some((from, to)) => Stage::Ramp {
                from: parse_stage_rate(from).map_err(|e| format!("stage {n}: {e}"))?,
                to: parse_stage_rate(to).map_err(|e| format!("stage {n}: {e}"))?,
                duration,
            },
            None => Stage::Hold {
                rate: parse_stage_rate(rate).map_err(|e| format!("stage {n}: {e}"))?,
                duration,
            },
        };
        stages.push(stage);
    }
    Ok(StageList(stages))
}

/// `--vu-stages`: user counts over time.
#[derive(Clone, Debug)]
pub struct UserStageList(pub Vec<UserStage>);

pub fn parse_vu_stages(s: &str) -> Result<UserStageList, String> {
    let users = |n: usize, t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| format!("stage {n}: `{t}` is not a number of users"))
    };
    let mut stages = Vec::new();
    for (i, part) in s.split(',').enumerate() {
        let n = i + 1;
        let (d, count) = part.split_once(':').ok_or_else(|| {
            format!(
                "stage {n} `{part}`: expected DURATION:USERS or DURATION:FROM->TO, e.g. 30s:0->100"
            )
        })?;
        let duration = parse_duration(d).map_err(|e| format!("stage {n}: {e}"))?;
        let (from, to) = match count.split_once("->") {
            Some((a, b)) => (users(n, a)?, users(n, b)?),
            None => (users(n, count)?, users(n, count)?),
        };
        stages.push(UserStage { duration, from, to });
    }
    if UserStage::peak(&stages) == 0 {
        return Err("no stage has any users".into());
    }
    Ok(UserStageList(stages))
}

pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not a header; write \"Name: value\""))?;
    let name = name.trim();
    if name.is_empty() || name.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(format!("`{name}` is not a valid header name"));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n') {
        return Err("header values cannot contain line breaks".into());
    }
    Ok((name.to_string(), value.trim().to_string()))
}

pub fn parse_status(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u16>() {
        Ok(c) if (100..=599).contains(&c) => Ok(c),
        _ => Err(format!("`{s}` is not an HTTP status (100..599)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_lists() {
        let s = parse_stages("10s:10, 10s:15,1m:0->50/s").unwrap().0;
        assert_eq!(
            s,
            vec![
                Stage::Hold {
                    rate: 10.0,
                    duration: Duration::from_secs(10)
                },
                Stage::Hold {
                    rate: 15.0,
                    duration: Duration::from_secs(10)
                },
                Stage::Ramp {
                    from: 0.0,
                    to: 50.0,
                    duration: Duration::from_secs(60)
                },
            ]
        );
        for bad in ["10s", "x:10", "10s:-1", "10s:a->b", "0s:5", ""] {
            assert!(parse_stages(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn values() {
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert!(parse_duration("ten")
            .unwrap_err()
            .contains("not a duration"));
        assert_eq!(parse_rate("500/s").unwrap(), 500.0);
        assert!(parse_rate("1e12").unwrap_err().contains("at most"));
        assert!(parse_duration("18446744073709551615s")
            .unwrap_err()
            .contains("longer than headroom accepts"));
        assert!(parse_stages("18446744073709551615s:10").is_err());
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("fast").is_err());
        assert_eq!(
            parse_header("X-A:  b ").unwrap(),
            ("X-A".to_string(), "b".to_string())
        );
        assert!(parse_header("nocolon").is_err());
        assert!(parse_status("99").is_err());
        let local = parse_local_addresses("127.0.0.2-127.0.0.4, ::1").unwrap().0;
        assert_eq!(local.len(), 4);
        assert_eq!(local[2].to_string(), "127.0.0.4");
        for bad in ["127.0.0.9-127.0.0.2", "x", "::1-::2", "10.0.0.0-10.2.0.0"] {
            assert!(parse_local_addresses(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_status("404").unwrap(), 404);
    }
}

/// Which file's JSON Schema `headroom schema` prints.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SchemaKind {
    /// Scenario files (`headroom run`, `capacity`).
    #[default]
    Scenario,
    /// Study files (`headroom study`).
    Study,
    /// results.json (`--out`).
    Results,
}

#[derive(Args, Debug, Clone)]
pub struct SchemaArgs {
    /// scenario, study or results.
    #[arg(value_enum, default_value_t = SchemaKind::Scenario)]
    pub which: SchemaKind,
}

/// `--progress`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProgressFlag {
    #[default]
    Auto,
    Always,
    Never,
}

impl From<ProgressFlag> for crate::cli::live::ProgressMode {
    fn from(f: ProgressFlag) -> Self {
        use crate::cli::live::ProgressMode;
        match f {
            ProgressFlag::Auto => ProgressMode::Auto,
            ProgressFlag::Always => ProgressMode::Always,
            ProgressFlag::Never => ProgressMode::Never,
        }
    }
}

/// Where `--dashboard` serves when given no address (k6's port).
pub const DASHBOARD_ADDR: &str = "127.0.0.1:5665";

/// The live dashboard (`run`, `capacity`, `study`, `demo`).
#[derive(Args, Debug, Clone, Default)]
pub struct DashboardArgs {
    /// Serve a live dashboard while the load runs: charts updated every
    /// second, the totals, a stop button. `--dashboard` alone serves on
    /// 127.0.0.1:5665; `--dashboard=ADDR` elsewhere (an address that is
    /// not loopback needs --dashboard-token).
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = DASHBOARD_ADDR
    )]
    pub dashboard: Option<std::net::SocketAddr>,

    /// The token the dashboard asks of every request (`?token=TOKEN` or
    /// `Authorization: Bearer TOKEN`); required off loopback.
    #[arg(long, value_name = "TOKEN")]
    pub dashboard_token: Option<String>,

    /// After the load, keep the dashboard up this long, so its final
    /// figures can be read.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub dashboard_linger: Duration,
}

/// Live metrics for Prometheus (`run`, `capacity`, `study`).
#[derive(Args, Debug, Clone, Default)]
pub struct MetricsArgs {
    /// Serve live metrics at http://ADDR/metrics while the load runs
    /// (OpenMetrics text for a Prometheus scrape), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// Send the live metrics every 5 s and at the end with Prometheus
    /// remote write (protobuf + snappy) to URL, e.g.
    /// http://127.0.0.1:9090/api/v1/write: for runs that end before a scrape.
    #[arg(long, value_name = "URL")]
    pub metrics_push: Option<String>,

    /// Send the live metrics every 5 s and at the end to an OpenTelemetry
    /// collector over OTLP/HTTP (protobuf): URL is its base, e.g.
    /// http://127.0.0.1:4318 (POST URL/v1/metrics). With --trace, each
    /// run's exemplars (its slowest requests) go to URL/v1/traces as
    /// spans, the parents of the server's spans.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,

    /// After the load, keep --metrics-listen up until it has been scraped
    /// once more (at most this long), so the final figures are collected.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    pub metrics_linger: Duration,
}

/// `headroom import`.
#[derive(Args, Debug, Clone)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub from: ImportFrom,
    /// Write the scenario here [default: standard output].
    #[arg(short = 'o', long, value_name = "FILE", global = true)]
    pub out: Option<std::path::PathBuf>,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum ImportFrom {
    /// A curl command line: `headroom import curl curl -X POST https://… -d …`
    /// (or the whole command quoted as one argument).
    Curl {
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true, trailing_var_arg = true)]
        command: Vec<String>,
    },
    /// A HAR file saved by a browser's developer tools.
    Har { file: std::path::PathBuf },
    /// A JMeter test plan (.jmx).
    Jmx { file: std::path::PathBuf },
    /// A Postman collection (exported as Collection v2.1 or v2.0).
    Postman { file: std::path::PathBuf },
    /// An OpenAPI 3.0/3.1 document (YAML or JSON): one request per
    /// operation, as a weighted mix.
    Openapi { file: std::path::PathBuf },
    /// A k6 script (.js): its options, default function, data files and
    /// thresholds.
    K6 { file: std::path::PathBuf },
    /// A Gatling simulation (.scala, .java or .kt): its protocol, scenario,
    /// feeders, injection profile and assertions.
    Gatling { file: std::path::PathBuf },
}

impl ImportFrom {
    /// The file imported, when there is one.
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            ImportFrom::Curl { .. } => None,
            ImportFrom::Har { file }
            | ImportFrom::Jmx { file }
            | ImportFrom::Postman { file }
            | ImportFrom::Openapi { file }
            | ImportFrom::K6 { file }
            | ImportFrom::Gatling { file } => Some(file),
        }
    }
}
