//! `headroom run`: flags → `Plan` → engine → results file and summary.

use super::args::RunArgs;
use super::{EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK};
use anyhow::{bail, Context};
use headroom::engine::schedule::Schedule;
use headroom::engine::{self, StopSignal};
use headroom::http::{encode_request, Endpoint};
use headroom::plan::{
    ClosedLoad, Expect, Load, OpenLoad, Plan, RequestSpec, DEFAULT_MAX_CONNECTIONS,
};
use headroom::report::live::Live;
use headroom::report::results::{Results, ResultsInput};
use headroom::report::terminal;
use headroom::sysinfo;
use std::path::Path;
use std::time::Duration;

const DEFAULT_VUS: u32 = 10;
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

pub fn plan_from_args(a: &RunArgs) -> anyhow::Result<Plan> {
    let (endpoint, target) = Endpoint::from_url(&a.url).context("--url")?;
    let open = a.rate.is_some() || a.stages.is_some();
    let load = if open {
        if a.vus.is_some() {
            bail!("--vus is for the closed model; with --rate or --stages use --connections to cap connections");
        }
        if a.iterations.is_some() || a.ramp_up.is_some() || a.think_time.is_some() {
            bail!("--iterations, --ramp-up and --think-time are for the closed model (--vus), not --rate/--stages");
        }
        let schedule = match (&a.rate, &a.stages) {
            (Some(rate), _) => Schedule::constant(*rate, a.duration.unwrap_or(DEFAULT_DURATION)),
            (None, Some(stages)) => {
                if a.duration.is_some() {
                    bail!("--duration and --stages both set the length of the run: give one");
                }
                Schedule::new(stages.0.clone())
            }
            (None, None) => unreachable!("open implies rate or stages"),
        }
        .context("--rate/--stages")?;
        Load::Open(OpenLoad {
            schedule,
            max_connections: a
                .connections
                .map_or(DEFAULT_MAX_CONNECTIONS, |c| c as usize),
        })
    } else {
        let vus = a.vus.or(a.connections).unwrap_or(DEFAULT_VUS);
        if vus == 0 {
            bail!("--vus must be at least 1");
        }
        let bounded = a.duration.is_some() || a.requests.is_some() || a.iterations.is_some();
        Load::Closed(ClosedLoad {
            vus,
            ramp_up: a.ramp_up.unwrap_or_default(),
            duration: if bounded {
                a.duration
            } else {
                Some(DEFAULT_DURATION)
            },
            iterations: a.iterations,
            think_time: a.think_time.unwrap_or_default(),
        })
    };
    if a.requests == Some(0) {
        bail!("--requests must be at least 1");
    }
    if a.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    if a.connections == Some(0) {
        bail!("--connections must be at least 1");
    }
    let method = a.method.to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        bail!("--method `{}` is not an HTTP method", a.method);
    }
    let body = a.body.clone().unwrap_or_default().into_bytes();
    let keep_alive = !a.no_keepalive;
    let encoded = encode_request(
        &method,
        &target,
        &endpoint.host_header,
        &a.headers,
        &body,
        keep_alive,
    );
    Ok(Plan {
        label: a.url.clone(),
        requests: vec![RequestSpec {
            name: format!("{method} {target}"),
            method,
            target,
            weight: 1,
            expect: Expect {
                statuses: a.expect_status.clone(),
            },
            encoded,
        }],
        endpoint,
        load,
        keep_alive,
        connect_timeout: a.connect_timeout,
        request_timeout: a.timeout,
        graceful_stop: a.graceful_stop,
        threads: a.threads.unwrap_or_else(sysinfo::available_cores),
        max_requests: a.requests,
    })
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

/// Runs a plan with live progress, writes the results file (even when
/// interrupted), prints the summary.
pub fn execute(
    plan: &Plan,
    stop: &StopSignal,
    buckets_ms: &[u64],
    out: Option<&Path>,
    quiet: bool,
) -> anyhow::Result<i32> {
    let fd_limit = sysinfo::raise_fd_limit();
    let live = Live::new(plan.load_duration());
    let outcome = engine::run(plan, stop, |p| live.update(&p));
    live.finish();
    let results = Results::new(ResultsInput {
        plan,
        outcome: &outcome,
        command: std::env::args().collect(),
        buckets_ms,
        fd_limit,
    });
    if let Some(path) = out {
        let json = serde_json::to_string_pretty(&results)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write results to {}", path.display()))?;
    }
    if !quiet {
        let mut stdout = std::io::stdout().lock();
        terminal::write_summary(&mut stdout, &results)?;
        if let Some(path) = out {
            use std::io::Write;
            writeln!(stdout, "\nresults written to {}", path.display())?;
        }
    }
    let t = &outcome.total;
    let exit_code = if outcome.interrupted {
        EXIT_INTERRUPTED
    } else if t.requests > 0 && t.connections_opened == 0 {
        eprintln!(
            "headroom: error: could not connect to {} ({}): every request failed to connect",
            plan.endpoint.addr,
            t.error_counts()
                .next()
                .map_or("no request was sent", |(c, _)| c.describe())
        );
        EXIT_ERROR
    } else {
        EXIT_OK
    };
    Ok(exit_code)
}

pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    if a.buckets.windows(2).any(|w| w[0] >= w[1]) {
        bail!("--buckets must be increasing, e.g. 800,1200");
    }
    let plan = plan_from_args(&a)?;
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    execute(&plan, &stop, &a.buckets, a.out.as_deref(), a.quiet)
}
