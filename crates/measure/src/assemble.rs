//! Assembling the record of one run (`results.json`) from its plan and
//! what the engine measured: the configuration as run, the totals, the
//! rates an open model was asked for and achieved, and the warnings.

use headroom_engine::plan::schedule::Stage;
use headroom_engine::plan::{HttpVersion, Load, Plan};
use headroom_engine::RunOutcome;
use headroom_metrics::{histogram, ErrorClass, LimitReached};
use headroom_records::exemplars::Exemplar;
use headroom_records::results::{
    Connections, Histograms, LatencySummary, LimitsReached, LoadStage, Meta, RequestConfig,
    RequestHistograms, Results, RunConfig, ShardInfo, Sockets, Summary, TraceConfig,
};
use headroom_records::server::machine::Machine;
use std::collections::BTreeMap;
use std::time::Duration;

/// `config` in results.json: the plan as run.
pub fn run_config(plan: &Plan) -> RunConfig {
    let mut c = RunConfig {
        url: plan.label.clone(),
        model: String::new(),
        vus: None,
        ramp_up_s: None,
        iterations: None,
        think_time_s: None,
        max_connections: None,
        arrivals: None,
        rate: None,
        stages: Vec::new(),
        max_connections_per_host: plan.max_connections_per_host,
        max_streams: (plan.http_version != HttpVersion::Http1).then_some(plan.max_streams),
        planned_duration_s: plan.load_duration().map(|d| d.as_secs_f64()),
        max_requests: plan.max_requests,
        keep_alive: plan.keep_alive,
        connect_timeout_s: plan.connect_timeout.as_secs_f64(),
        request_timeout_s: plan.request_timeout.as_secs_f64(),
        requests: plan
            .requests
            .iter()
            .map(|r| RequestConfig {
                name: r.name.clone(),
                method: r.method.clone(),
                target: r.target.clone(),
                weight: r.weight,
                expect_status: r.expect.statuses.as_ref().map(|s| s.describe()),
            })
            .collect(),
        trace: plan.trace_context.as_ref().map(|t| TraceConfig {
            per: t.per.name().into(),
            sampled: t.sampled,
            tracestate: t.tracestate.clone(),
            url: t.url.clone(),
        }),
    };
    match &plan.load {
        Load::Closed(l) => {
            c.model = "closed".into();
            c.vus = Some(l.vus);
            if l.stages.is_empty() {
                c.ramp_up_s = Some(l.ramp_up.as_secs_f64());
            }
            c.iterations = l.iterations;
            c.think_time_s = Some(l.think_time.as_secs_f64());
            c.stages = l
                .stages
                .iter()
                .map(|s| LoadStage {
                    duration_s: s.duration.as_secs_f64(),
                    from: s.from as f64,
                    to: s.to as f64,
                    unit: "users".into(),
                })
                .collect();
        }
        Load::Open(l) => {
            c.model = "open".into();
            c.max_connections = Some(l.max_connections);
            let users = l.users;
            c.arrivals = Some(if users { "users" } else { "requests" }.into());
            let unit = if users { "users/s" } else { "req/s" };
            c.stages = l
                .schedule
                .stages()
                .iter()
                .map(|s| {
                    let (from, to) = match *s {
                        Stage::Hold { rate, .. } => (rate, rate),
                        Stage::Ramp { from, to, .. } => (from, to),
                    };
                    LoadStage {
                        duration_s: s.duration().as_secs_f64(),
                        from,
                        to,
                        unit: unit.into(),
                    }
                })
                .collect();
            if let [only] = &c.stages[..] {
                if only.from == only.to {
                    c.rate = Some(only.from);
                }
            }
        }
    }
    c
}

/// Said whenever certificates are not checked.
pub const INSECURE_TLS: &str =
    "TLS certificate verification is off (--insecure / [tls] insecure): \
     the server was not authenticated";

/// Advice for a run whose figures need reading with care.
pub fn warnings(plan: &Plan, outcome: &RunOutcome, fd_limit: (u64, u64)) -> Vec<String> {
    let t = &outcome.total;
    let mut w = Vec::new();
    if plan.tls.as_ref().is_some_and(|t| t.insecure) {
        w.push(INSECURE_TLS.into());
    }
    if t.error_count(ErrorClass::TooManyOpenFiles) > 0 {
        w.push(format!(
            "the generator hit its open-files limit ({} soft, {} hard): raise it with \
             `ulimit -n {}` (up to the hard limit) or in /etc/security/limits.conf, \
             or use fewer connections",
            fd_limit.0,
            fd_limit.1,
            (fd_limit.1).max(65_536)
        ));
    }
    let bodies = t.limit_count(LimitReached::BodyCapture);
    if bodies > 0 {
        w.push(format!(
            "{bodies} response bodies reached the {} MiB kept for checks and extraction: \
             they judged only the start of those bodies",
            headroom_http::MAX_CAPTURED_BODY >> 20
        ));
    }
    let cookies = t.limit_count(LimitReached::CookieJar);
    if cookies > 0 {
        w.push(format!(
            "{cookies} cookies were not stored: a user's jar holds at most {} \
             (the server sets a new cookie name again and again?)",
            headroom_engine::plan::limits::MAX_COOKIES_PER_USER
        ));
    }
    if plan.http_version == headroom_engine::plan::HttpVersion::Http3 {
        let asked = headroom_http::h3::UDP_BUFFER;
        if let Some((receive, send)) = headroom_http::h3::kernel_udp_buffer_caps() {
            if receive < asked || send < asked {
                w.push(format!(
                    "HTTP/3: the kernel caps UDP socket buffers at {} KiB receive, {} KiB send \
                     (net.core.rmem_max, wmem_max), below the {} KiB asked: bursts of responses \
                     may be dropped and sent again (`sysctl -w net.core.rmem_max={asked} \
                     net.core.wmem_max={asked}`)",
                    receive >> 10,
                    send >> 10,
                    asked >> 10
                ));
            }
        }
        if t.quic.packets_lost > 0 {
            w.push(format!(
                "HTTP/3: QUIC declared {} of {} packets lost (sent again): on loopback that \
                 is socket buffers overflowing, not the network",
                t.quic.packets_lost, t.quic.packets_sent
            ));
        }
    }
    if t.requests > 0 && t.connections_opened() == 0 {
        w.push("no connection to the server succeeded".into());
    }
    let not_sent = t.error_count(ErrorClass::NotSent);
    if not_sent > 0 {
        w.push(format!(
            "{not_sent} requests were due but never sent: every allowed connection was busy \
             (raise --connections, or the server is saturated)"
        ));
    }
    if outcome.interrupted {
        w.push("the run was interrupted: figures cover the part that ran".into());
    }
    if let Load::Closed(c) = &plan.load {
        if plan.shard.share(c.vus as u64) == 0 {
            w.push(format!(
                "shard {} ran no users: the plan has {} users for {} shards",
                plan.shard, c.vus, plan.shard.count
            ));
        }
    }
    w
}

/// How much of an open-model schedule ran: all of it, or up to an early
/// stop (Ctrl-C, a feeder running dry), or up to the last arrival a
/// `--requests` budget allowed. Rates are judged over this, so a bounded or
/// interrupted run is not mistaken for a generator falling behind.
fn schedule_that_ran(
    schedule: &headroom_engine::plan::schedule::Schedule,
    max_requests: Option<u64>,
    outcome: &RunOutcome,
) -> Duration {
    let mut ran = schedule.duration();
    if let Some(stopped) = outcome.stopped_after {
        ran = ran.min(stopped);
    }
    if let Some(last) = max_requests.and_then(|n| schedule.at(n)) {
        ran = ran.min(last);
    }
    ran
}

pub struct ResultsInput<'a> {
    pub plan: &'a Plan,
    pub outcome: &'a RunOutcome,
    pub command: Vec<String>,
    pub buckets_ms: &'a [u64],
    pub fd_limit: (u64, u64),
}

/// The record of one run, from its plan and what the engine measured.
pub fn results(input: ResultsInput) -> Results {
    let ResultsInput {
        plan,
        outcome,
        command,
        buckets_ms,
        fd_limit,
    } = input;
    let t = &outcome.total;
    let open = matches!(plan.load, Load::Open(_));
    let (target_rate_rps, achieved_rate_rps) = open_rates(plan, outcome).unzip();
    Results {
        meta: meta(plan, outcome, command, fd_limit),
        config: run_config(plan),
        summary: Summary::new(t, outcome.duration, buckets_ms, &plan.check_names),
        duration_s: outcome.duration.as_secs_f64(),
        service_time_ms: LatencySummary::from_histogram(&t.service_time),
        target_rate_rps,
        achieved_rate_rps,
        send_lag_ms: open.then(|| LatencySummary::from_histogram(&t.send_lag)),
        waited_for_connection: open.then_some(outcome.waited_for_connection),
        per_request: plan
            .requests
            .iter()
            .zip(&outcome.per_request)
            .map(|(r, s)| {
                (
                    r.name.clone(),
                    Summary::new(s, outcome.duration, buckets_ms, &plan.check_names),
                )
            })
            .collect(),
        timeline: outcome.timeline.clone(),
        exemplars: exemplars(plan, outcome),
        connections_opened: t.connections_opened(),
        connections: Connections::from_stats(t),
        scripts: headroom_records::results::ScriptFunction::from_stats(&t.scripts),
        sockets: Sockets::from_stats(
            &t.sockets,
            &outcome.timeline,
            outcome.duration.as_secs_f64(),
        ),
        limits_reached: LimitsReached {
            body_capture: t.limit_count(LimitReached::BodyCapture),
            cookie_jar: t.limit_count(LimitReached::CookieJar),
        },
        interrupted: outcome.interrupted,
        stop_reason: outcome.stop_reason.clone(),
        warnings: warnings(plan, outcome, fd_limit),
        generator_bound: false,
        generator_bound_reasons: Vec::new(),
        thresholds: Vec::new(),
        server: None,
        shard: (!plan.shard.is_whole()).then(|| ShardInfo {
            index: plan.shard.index + 1,
            count: plan.shard.count,
            plan_hash: plan.fingerprint(),
        }),
        start_at: None,
        shard_servers: BTreeMap::new(),
        events: Vec::new(),
        abort: None,
        histograms: histograms(plan, outcome),
    }
}

/// The run's slowest traced requests: each second's and the run's,
/// named and ranked.
fn exemplars(plan: &Plan, outcome: &RunOutcome) -> Vec<Exemplar> {
    let names: Vec<String> = plan.requests.iter().map(|r| r.name.clone()).collect();
    let measured = outcome.exemplars.iter().chain(&outcome.slowest);
    headroom_records::exemplars::select(measured.map(|e| Exemplar::of(e, &names)))
}

/// Open model: the rate asked for (over the part of the schedule that
/// ran) and the rate sent (late sends past its end lower it).
fn open_rates(plan: &Plan, outcome: &RunOutcome) -> Option<(f64, f64)> {
    match &plan.load {
        Load::Open(l) => {
            let t = &outcome.total;
            let sent = t.requests - t.error_count(ErrorClass::NotSent);
            let ran = schedule_that_ran(&l.schedule, plan.max_requests, outcome);
            let due = l.schedule.arrivals_before(ran);
            let due = plan.max_requests.map_or(due, |n| due.min(n));
            // A shard was asked for its share of the arrivals.
            let due = plan.shard.share(due);
            // Late sends past the end of the part that ran lower it.
            let window = outcome.send_window.max(ran).as_secs_f64();
            let ran = ran.as_secs_f64();
            Some((
                if ran > 0.0 {
                    due as f64 / ran
                } else {
                    l.schedule.mean_rate()
                },
                if window > 0.0 {
                    sent as f64 / window
                } else {
                    0.0
                },
            ))
        }
        Load::Closed(_) => None,
    }
}

/// `meta`: this build, the command, when and where it ran, how.
fn meta(plan: &Plan, outcome: &RunOutcome, command: Vec<String>, fd_limit: (u64, u64)) -> Meta {
    Meta {
        headroom_version: env!("CARGO_PKG_VERSION").into(),
        command,
        started_at: humantime::format_rfc3339_seconds(outcome.started_at).to_string(),
        machine: Machine::current(),
        generator_threads: outcome.threads,
        generator_engine: Some(
            match headroom_engine::runs_on_event_loop(plan) {
                true => "event_loop",
                false => "tasks",
            }
            .into(),
        ),
        fd_limit: [fd_limit.0, fd_limit.1],
        http_version: plan.http_version.as_str().into(),
        started_at_unix_ms: outcome
            .started_at
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis() as u64),
        shards: Vec::new(),
    }
}

/// The run's histograms; per request and per second too when the run is
/// a shard, for an exact merge.
fn histograms(plan: &Plan, outcome: &RunOutcome) -> Histograms {
    let t = &outcome.total;
    let sharded = !plan.shard.is_whole();
    Histograms {
        unit: "us".into(),
        latency: histogram::to_base64(&t.latency),
        latency_ok: histogram::to_base64(&t.latency_ok),
        service_time: histogram::to_base64(&t.service_time),
        send_lag: histogram::to_base64(&t.send_lag),
        per_request: if sharded {
            plan.requests
                .iter()
                .zip(&outcome.per_request)
                .map(|(r, s)| {
                    let h = RequestHistograms {
                        latency: histogram::to_base64(&s.latency),
                        latency_ok: histogram::to_base64(&s.latency_ok),
                    };
                    (r.name.clone(), h)
                })
                .collect()
        } else {
            BTreeMap::new()
        },
        per_second: if sharded {
            outcome.latency_intervals.clone()
        } else {
            Vec::new()
        },
    }
}
