//! What ran out first: findings from the samples, each from an explicit
//! threshold, and the verdict on whether the generator (not the server)
//! was the bottleneck.
//!
//! | finding | threshold |
//! |---|---|
//! | `server_cpu` | tree CPU ≥ 90 % of the machine's cores for 2 samples in a row |
//! | `machine_cpu` | machine idle ≤ 5 % for 2 samples in a row |
//! | `memory` | available memory < 5 % of total (and whether swap grew) |
//! | `fds` | a process's open files ≥ 90 % of its soft limit |
//! | `listen_queue` | the kernel's ListenOverflows/ListenDrops grew during the run |
//! | `worker_pool` | ≥ 4 requests waiting — the server's accept queues, plus Puma's backlog, Passenger's and haproxy's queues where probed — for 2 samples in a row while its CPU is under 90 % |
//! | `accept_queue_full` | a server socket's accept queue at its limit (the backlog) |
//! | `queue_full` | 503 responses while requests waited in the server's queues |
//! | `upstream_closed` | 502 responses while the queues behind the proxy filled |
//! | `server_exited` | nothing of the server is left (a restart is not an exit) |
//! | `generator_cpu` | generator CPU ≥ 90 % of the cores it may use for 2 samples in a row |
//! | `late_sends` | sends ran late (as below) while the generator was idle with connections to spare |
//!
//! Generator-bound when: `generator_cpu` fired; or (open model) the sends
//! fell behind — achieved rate < 99 % of the target; or they ran late —
//! more than 1 % of sends (and at least 10 of them) left over 10 ms after
//! their intended time — *and* the generator was the cause: it was busy
//! (CPU peak ≥ 50 % of a core) or arrivals waited for a connection because
//! the pool was at its cap; or connections ran out — requests `not_sent`,
//! `too_many_open_files`.
//!
//! The "at least 10" matters in short runs: at 45 req/s for 2 s, p99 is one
//! send, and one scheduling hiccup of the machine would otherwise call the
//! whole step generator-bound. The "generator was the cause" matters on
//! virtual machines: a vCPU paused for 100 ms makes ten sends late while
//! the generator idles at 3 % CPU. That is the machine, not headroom's
//! limit; it is reported as `late_sends` (latency still counts from the
//! intended times, so the pause is in the figures).

use super::sample::Sample;
use serde::{Deserialize, Serialize};

pub const CPU_SATURATED: f64 = 0.90;
pub const SUSTAINED_SAMPLES: usize = 2;
pub const IDLE_SATURATED_PCT: f64 = 5.0;
pub const MEMORY_LOW: f64 = 0.05;
pub const FDS_NEAR_LIMIT: f64 = 0.90;
/// Connections waiting in the accept queues from which every worker is
/// taken to be busy (one or two are a sample catching an accept midway).
pub const ACCEPT_QUEUE_BUSY: f64 = 4.0;
pub const SEND_LAG_LATE_MS: f64 = 10.0;
/// Late sends must be more than this share of all sends…
pub const LATE_SENDS_MAX_SHARE: f64 = 0.01;
/// …and at least this many, so one hiccup is not a verdict.
pub const LATE_SENDS_MIN: u64 = 10;
pub const ACHIEVED_RATE_MIN: f64 = 0.99;
/// Generator CPU (% of one core, peak over the run) from which late sends
/// are put down to the generator's own work. An idle generator sending
/// 100 req/s uses 2–8 %; one saturated worker thread, ~100 %.
pub const GENERATOR_BUSY_PCT: f64 = 50.0;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Finding {
    /// Stable name: server_cpu, machine_cpu, memory, fds, listen_queue,
    /// worker_pool, accept_queue_full, server_exited, generator_cpu,
    /// late_sends.
    pub kind: String,
    /// When it began, seconds since the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<f64>,
    pub message: String,
}

pub fn clock(t_s: f64) -> String {
    let s = t_s.max(0.0).round() as u64;
    format!("{:02}:{:02}", s / 60, s % 60)
}

/// The first sample of the first run of `SUSTAINED_SAMPLES` (or all the
/// samples there are, if fewer) for which `hot` holds; and the peak value.
fn sustained(
    samples: &[&Sample],
    hot: impl Fn(&Sample) -> Option<f64>,
    limit: f64,
) -> Option<(f64, f64)> {
    let need = SUSTAINED_SAMPLES.min(samples.len()).max(1);
    let mut run = 0;
    let mut found = None;
    let mut peak: f64 = 0.0;
    for s in samples {
        let Some(v) = hot(s) else { continue };
        if v >= limit {
            run += 1;
            peak = peak.max(v);
            if run >= need && found.is_none() {
                let first = samples
                    .iter()
                    .position(|x| std::ptr::eq(*x, *s))
                    .unwrap_or(0)
                    + 1
                    - run;
                found = Some(samples[first].t_s);
            }
        } else {
            run = 0;
        }
    }
    found.map(|at| (at, peak))
}

/// What the accept queues say: connections waiting while the server's CPU
/// had room (its workers, not its cores, ran out), and a queue at its
/// limit (the kernel refuses or drops what comes next).
fn accept_queue_findings(timed: &[&Sample], cores: f64) -> Vec<Finding> {
    let mut out = Vec::new();
    let cpu_limit = CPU_SATURATED * cores * 100.0;
    // Waiting: in the kernel's accept queues, and inside the server where
    // a probe shows it (Puma's backlog, Passenger's and haproxy's queues).
    let waiting = |s: &Sample| {
        let t = s.server.as_ref().filter(|t| t.alive)?;
        let queues = (!t.accept_queues.is_empty()).then(|| t.accept_queue_depth() as f64);
        match (queues, s.probe_queued()) {
            (None, None) => None,
            (a, b) => Some((a.unwrap_or(0.0) + b.unwrap_or(0.0), t.cpu_pct)),
        }
    };
    let waiting_with_cpu_to_spare = |s: &Sample| {
        let (n, cpu) = waiting(s)?;
        Some(if cpu < cpu_limit { n } else { 0.0 })
    };
    if let Some((at, peak)) = sustained(timed, waiting_with_cpu_to_spare, ACCEPT_QUEUE_BUSY) {
        let cpu_peak = timed
            .iter()
            .filter_map(|s| s.server.as_ref().filter(|t| t.alive))
            .map(|t| t.cpu_pct)
            .fold(0.0, f64::max);
        // Where they waited: the fullest socket, and the server's own queue.
        let mut places = Vec::new();
        let fullest = timed
            .iter()
            .filter_map(|s| s.server.as_ref())
            .flat_map(|t| &t.accept_queues)
            .filter(|q| q.depth > 0)
            .max_by_key(|q| q.depth);
        if let Some(q) = fullest {
            places.push(format!("the accept queue of {}", q.address));
        }
        let inside = timed
            .iter()
            .filter_map(|s| s.probe_queued())
            .reduce(f64::max)
            .filter(|q| *q > 0.0);
        if let Some(q) = inside {
            places.push(format!("the server's own queue (up to {q:.0})"));
        }
        out.push(Finding {
            kind: "worker_pool".into(),
            at_s: Some(at),
            message: format!(
                "worker pool saturated from {}: up to {peak:.0} requests waiting, in {}, while server CPU stayed under {:.0} % (peak {cpu_peak:.0} % of {cores:.0} cores): add workers or threads, not CPU",
                clock(at),
                places.join(" and "),
                CPU_SATURATED * 100.0,
            ),
        });
    }
    let full = timed.iter().find_map(|s| {
        let t = s.server.as_ref()?;
        let q = t
            .accept_queues
            .iter()
            .find(|q| q.limit > 0 && q.depth >= q.limit)?;
        Some((s.t_s, q.clone()))
    });
    if let Some((at, q)) = full {
        out.push(Finding {
            kind: "accept_queue_full".into(),
            at_s: Some(at),
            message: format!(
                "accept queue of {} full ({} of {}) at {}: connections beyond it are dropped (TCP) or refused (unix sockets)",
                q.address,
                q.depth,
                q.limit,
                clock(at)
            ),
        });
    }
    out
}

/// Memory available under its floor (and swap growing, if it did).
fn memory_finding(samples: &[Sample]) -> Option<Finding> {
    let low_memory = samples.iter().find(|s| {
        s.machine.as_ref().is_some_and(|m| {
            m.mem_total_bytes > 0
                && (m.mem_available_bytes as f64) < MEMORY_LOW * m.mem_total_bytes as f64
        })
    });
    if let Some(s) = low_memory {
        let swap = |s: &Sample| s.machine.as_ref().map_or(0, |m| m.swap_used_bytes);
        let grew = samples
            .last()
            .is_some_and(|last| swap(last) > swap(&samples[0]));
        return Some(Finding {
            kind: "memory".into(),
            at_s: Some(s.t_s),
            message: format!(
                "memory available under {:.0} %{} from {}",
                MEMORY_LOW * 100.0,
                if grew { " and swap growing" } else { "" },
                clock(s.t_s)
            ),
        });
    }
    None
}

/// A process of the server near its open-files limit.
fn fds_finding(samples: &[Sample]) -> Option<Finding> {
    let fds = samples.iter().find_map(|s| {
        let f = s.server.as_ref()?.fd_fullest.as_ref()?;
        (f.limit > 0 && f.fds as f64 >= FDS_NEAR_LIMIT * f.limit as f64).then(|| (s.t_s, f.clone()))
    });
    if let Some((at, f)) = fds {
        let peak = samples
            .iter()
            .filter_map(|s| s.server.as_ref()?.fd_fullest.as_ref())
            .filter(|x| x.pid == f.pid)
            .map(|x| x.fds)
            .max()
            .unwrap_or(f.fds);
        return Some(Finding {
            kind: "fds".into(),
            at_s: Some(at),
            message: format!(
                "fds at {peak} of {} (pid {}) from {}",
                f.limit,
                f.pid,
                clock(at)
            ),
        });
    }
    None
}

/// The machine's listen queues overflowed (SYNs dropped).
fn listen_queue_finding(samples: &[Sample]) -> Option<Finding> {
    let overflows: u64 = samples
        .iter()
        .filter_map(|s| s.machine.as_ref())
        .map(|m| m.listen_overflows)
        .sum();
    let drops: u64 = samples
        .iter()
        .filter_map(|s| s.machine.as_ref())
        .map(|m| m.listen_drops)
        .sum();
    if overflows > 0 || drops > 0 {
        let at = samples
            .iter()
            .find(|s| {
                s.machine
                    .as_ref()
                    .is_some_and(|m| m.listen_overflows + m.listen_drops > 0)
            })
            .map(|s| s.t_s);
        return Some(Finding {
            kind: "listen_queue".into(),
            at_s: at,
            message: format!(
                "listen queue overflowed {overflows} times ({drops} SYNs dropped) from {}",
                clock(at.unwrap_or(0.0))
            ),
        });
    }
    None
}

/// Nothing of the server is left from some sample to the end (a restart
/// that comes back is `server.restarts`, not an exit).
fn exited_finding(samples: &[Sample]) -> Option<Finding> {
    let down = |s: &Sample| s.server.as_ref().is_some_and(|t| !t.alive);
    let last_up = samples.iter().rposition(|s| !down(s));
    let first_down_for_good = match last_up {
        Some(i) => samples.get(i + 1),
        None => samples.first(),
    };
    if let Some(s) = first_down_for_good.filter(|s| down(s)) {
        let pid = s.server.as_ref().map_or(0, |t| t.root_pid);
        return Some(Finding {
            kind: "server_exited".into(),
            at_s: Some(s.t_s),
            message: format!("server process {pid} exited before {}", clock(s.t_s)),
        });
    }
    None
}

/// Findings from a run's samples. `generator_cores` is how many CPUs the
/// generator may use.
pub fn findings(samples: &[Sample], generator_cores: usize) -> Vec<Finding> {
    // The first sample covers the time before the load began: skip it for
    // rates (CPU) but keep it for levels.
    let timed: Vec<&Sample> = samples.iter().filter(|s| s.t_s > 0.0).collect();
    let mut out = Vec::new();
    let cores = samples
        .iter()
        .find_map(|s| s.machine.as_ref().map(|m| m.cores))
        .unwrap_or_else(|| super::machine::Machine::current().cores as u32)
        .max(1) as f64;

    if let Some((at, peak)) = sustained(
        &timed,
        |s| s.server.as_ref().filter(|t| t.alive).map(|t| t.cpu_pct),
        CPU_SATURATED * cores * 100.0,
    ) {
        out.push(Finding {
            kind: "server_cpu".into(),
            at_s: Some(at),
            message: format!(
                "server CPU at {peak:.0} % of {cores:.0} cores from {}",
                clock(at)
            ),
        });
    }
    if let Some((at, _)) = sustained(
        &timed,
        |s| s.machine.as_ref().map(|m| 100.0 - m.cpu_idle_pct),
        100.0 - IDLE_SATURATED_PCT,
    ) {
        out.push(Finding {
            kind: "machine_cpu".into(),
            at_s: Some(at),
            message: format!(
                "machine CPU saturated (idle ≤ {IDLE_SATURATED_PCT:.0} %) from {}",
                clock(at)
            ),
        });
    }
    out.extend(memory_finding(samples));
    out.extend(fds_finding(samples));
    out.extend(listen_queue_finding(samples));
    out.extend(accept_queue_findings(&timed, cores));
    out.extend(exited_finding(samples));
    let gen_limit = CPU_SATURATED * generator_cores.max(1) as f64 * 100.0;
    if let Some((at, peak)) = sustained(
        &timed,
        |s| s.generator.as_ref().map(|g| g.cpu_pct),
        gen_limit,
    ) {
        out.push(Finding {
            kind: "generator_cpu".into(),
            at_s: Some(at),
            message: format!(
                "generator CPU saturated ({peak:.0} % of {generator_cores} cores) from {}: results limited by the load generator",
                clock(at)
            ),
        });
    }
    out
}

/// Client-side facts that say the generator could not keep up.
#[derive(Clone, Debug, Default)]
pub struct ClientFacts {
    pub open: bool,
    pub target_rate_rps: Option<f64>,
    pub achieved_rate_rps: Option<f64>,
    pub send_lag_p99_ms: Option<f64>,
    /// Sends that left more than `SEND_LAG_LATE_MS` after their intended time.
    pub late_sends: u64,
    /// All sends with a send lag (open model).
    pub sends: u64,
    /// Arrivals that waited because every connection was busy and the
    /// pool was at its cap.
    pub waited_for_connection: u64,
    pub not_sent: u64,
    pub too_many_open_files: u64,
    /// Responses `502 Bad Gateway` and `503 Service Unavailable`, and the
    /// first second (from the start) with a 5xx: what a proxy or a server
    /// answers when the queue behind it is full or its backend gave up.
    pub bad_gateway: u64,
    pub unavailable: u64,
    pub first_5xx_s: Option<f64>,
    /// The share of the generator's worker threads' time its scenario
    /// scripts took (0 without scripts).
    pub script_share: f64,
}

/// 502s and 503s read beside the queues: a server that refuses what its
/// queue cannot hold (Passenger's "Request queue is full" 503), or a proxy
/// whose backend closed or refused while its queue was full (nginx's 502
/// "upstream prematurely closed", EAGAIN on a full unix socket).
pub fn refused_answers(samples: &[Sample], client: &ClientFacts) -> Vec<Finding> {
    let queued_peak = samples
        .iter()
        .filter_map(|s| {
            let t = s.server.as_ref()?;
            let queued = t.accept_queue_depth() as f64 + s.probe_queued().unwrap_or(0.0);
            (!t.accept_queues.is_empty() || s.probe_queued().is_some()).then_some(queued)
        })
        .reduce(f64::max);
    let full_socket = samples
        .iter()
        .filter_map(|s| s.server.as_ref())
        .flat_map(|t| &t.accept_queues)
        .find(|q| q.limit > 0 && q.depth >= q.limit);
    let at = client.first_5xx_s;
    let when = at.map_or(String::new(), |t| format!(" from {}", clock(t)));
    let mut out = Vec::new();
    if client.unavailable > 0 {
        if let Some(peak) = queued_peak.filter(|p| *p > 0.0) {
            out.push(Finding {
                kind: "queue_full".into(),
                at_s: at,
                message: format!(
                    "queue full: {} × 503{when} while up to {peak:.0} requests waited: the server refused what its queue could not hold",
                    client.unavailable
                ),
            });
        }
    }
    if client.bad_gateway > 0 && (queued_peak.is_some_and(|p| p > 0.0) || full_socket.is_some()) {
        let behind = full_socket.map_or(String::new(), |q| {
            format!(
                "; the accept queue of {} was full ({} of {})",
                q.address, q.depth, q.limit
            )
        });
        out.push(Finding {
            kind: "upstream_closed".into(),
            at_s: at,
            message: format!(
                "upstream closed or refused: {} × 502{when} as the queue behind the proxy filled{behind}",
                client.bad_gateway
            ),
        });
    }
    out
}

/// Scripts taking this share of the generator's worker time limit the
/// run by themselves; from the second share on, a busy generator's reason
/// says how much was theirs.
pub const SCRIPTS_LIMIT_SHARE: f64 = 0.5;
pub const SCRIPTS_NOTE_SHARE: f64 = 0.2;

/// Why the run's figures describe the generator's limit, not the
/// server's (empty when they describe the server). `generator_cpu_peak`
/// is the generator's peak CPU (% of one core), `None` when not sampled.
/// Late sends the generator did not cause are added to `findings` as
/// `late_sends`.
pub fn generator_bound(
    findings: &mut Vec<Finding>,
    client: &ClientFacts,
    generator_cpu_peak: Option<f64>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if let Some(f) = findings.iter().find(|f| f.kind == "generator_cpu") {
        reasons.push(f.message.clone());
    }
    // Scripts that take most of the generator's time are its limit
    // whatever its CPU peak; a busy generator is told how much of it they
    // were.
    let share = 100.0 * client.script_share;
    if client.script_share >= SCRIPTS_LIMIT_SHARE {
        reasons.push(format!(
            "scripts took {share:.0} % of the generator's worker time: the scripts, not the server, limit the run (see Scripts)"
        ));
    } else if client.script_share >= SCRIPTS_NOTE_SHARE {
        if let Some(first) = reasons.first_mut() {
            first.push_str(&format!(" (scripts took {share:.0} % of its worker time)"));
        }
    }
    if client.open {
        if let (Some(target), Some(achieved)) = (client.target_rate_rps, client.achieved_rate_rps) {
            if achieved < ACHIEVED_RATE_MIN * target {
                reasons.push(format!(
                    "sends fell behind: {achieved:.1} req/s sent of {target:.1} requested"
                ));
            }
        }
        let late = client.late_sends;
        if late >= LATE_SENDS_MIN && late as f64 > LATE_SENDS_MAX_SHARE * client.sends as f64 {
            let share = 100.0 * late as f64 / client.sends as f64;
            let p99 = client
                .send_lag_p99_ms
                .map_or(String::new(), |p| format!("; send lag p99 {p:.1} ms"));
            let lateness = format!(
                "{late} of {} sends ({share:.1} %) over {SEND_LAG_LATE_MS:.0} ms after their intended time{p99}",
                client.sends
            );
            let waited = client.waited_for_connection;
            let cpu = generator_cpu_peak.map_or(String::new(), |c| format!("{c:.0} %"));
            if waited > 0 {
                reasons.push(format!(
                    "sends ran late: {lateness}; {waited} arrivals waited for a connection (the pool was at its cap: raise --connections / max_connections)"
                ));
            } else if generator_cpu_peak.is_none_or(|c| c >= GENERATOR_BUSY_PCT) {
                let busy = generator_cpu_peak.map_or(String::new(), |_| {
                    format!(" (generator CPU peak {cpu} of a core)")
                });
                reasons.push(format!("sends ran late: {lateness}{busy}"));
            } else {
                findings.push(Finding {
                    kind: "late_sends".into(),
                    at_s: None,
                    message: format!(
                        "sends ran late while the generator was idle (CPU peak {cpu} of a core) with connections to spare: {lateness}. The machine did not run it on time (a paused virtual CPU or another busy process); latency counts from the intended times, so the delay is in the figures"
                    ),
                });
            }
        }
    }
    if client.not_sent > 0 {
        reasons.push(format!(
            "connections exhausted: {} requests were due but never sent",
            client.not_sent
        ));
    }
    if client.too_many_open_files > 0 {
        reasons.push("the generator ran out of file descriptors".into());
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::sample::{FdUse, MachineSample, ProcessSample, TreeSample};

    fn sample(t: f64, server_cpu: f64, gen_cpu: f64) -> Sample {
        Sample {
            t_s: t,
            server: Some(TreeSample {
                alive: true,
                root_pid: 10,
                cpu_pct: server_cpu,
                ..TreeSample::default()
            }),
            machine: Some(MachineSample {
                cores: 2,
                cpu_idle_pct: 50.0,
                mem_total_bytes: 1000,
                mem_available_bytes: 500,
                ..MachineSample::default()
            }),
            generator: Some(ProcessSample {
                cpu_pct: gen_cpu,
                ..ProcessSample::default()
            }),
            ..Sample::default()
        }
    }

    /// A sample whose server has `depth` of `limit` connections waiting.
    fn queued(t: f64, server_cpu: f64, depth: u32, limit: u32) -> Sample {
        let mut s = sample(t, server_cpu, 10.0);
        if let Some(tree) = s.server.as_mut() {
            tree.accept_queues = vec![crate::server::sample::AcceptQueue {
                address: "/run/app.sock".into(),
                depth,
                limit,
            }];
        }
        s
    }

    #[test]
    fn connections_waiting_while_the_cpu_idles_are_the_worker_pool() {
        let kinds =
            |s: &[Sample]| -> Vec<String> { findings(s, 1).into_iter().map(|f| f.kind).collect() };
        let waiting = [
            queued(0.0, 0.0, 0, 1024),
            queued(1.0, 20.0, 3, 1024),
            queued(2.0, 20.0, 6, 1024),
            queued(3.0, 25.0, 7, 1024),
        ];
        let f = findings(&waiting, 1);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, "worker_pool");
        assert_eq!(f[0].at_s, Some(2.0));
        assert!(
            f[0].message.contains("up to 7 requests"),
            "{}",
            f[0].message
        );
        assert!(f[0].message.contains("/run/app.sock"), "{}", f[0].message);
        // One sample of a queue is a sample catching accepts midway.
        assert!(kinds(&waiting[..3]).is_empty());
        // A queue while the CPU is saturated is the CPU's, not the pool's.
        let busy = [queued(1.0, 190.0, 6, 1024), queued(2.0, 195.0, 8, 1024)];
        assert_eq!(kinds(&busy), ["server_cpu"]);
        // Puma's own backlog counts as waiting too.
        let puma = |t: f64, backlog: f64| {
            let mut s = sample(t, 30.0, 10.0);
            s.probes.insert(
                "puma".into(),
                [("backlog".to_string(), backlog)].into_iter().collect(),
            );
            s
        };
        let f = findings(&[puma(1.0, 5.0), puma(2.0, 6.0)], 1);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].message.contains("own queue (up to 6)"),
            "{}",
            f[0].message
        );
        // A queue at its limit (the kernel lets one more in).
        let full = [queued(1.0, 10.0, 9, 8), queued(2.0, 10.0, 2, 8)];
        let f = findings(&full, 1);
        assert_eq!(
            f.iter().map(|f| f.kind.as_str()).collect::<Vec<_>>(),
            ["accept_queue_full"]
        );
        assert!(f[0].message.contains("9 of 8"), "{}", f[0].message);
    }

    #[test]
    fn thresholds() {
        // Server at 185 % of 2 cores from 00:02 (one hot sample alone is not enough).
        let s = vec![
            sample(0.0, 0.0, 0.0),
            sample(1.0, 190.0, 10.0),
            sample(2.0, 100.0, 10.0),
            sample(3.0, 185.0, 10.0),
            sample(4.0, 198.0, 10.0),
        ];
        let f = findings(&s, 1);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].kind, "server_cpu");
        assert_eq!(f[0].at_s, Some(3.0));
        assert_eq!(f[0].message, "server CPU at 198 % of 2 cores from 00:03");
        // Just under 90 %: nothing.
        let s = vec![sample(1.0, 179.0, 0.0), sample(2.0, 179.0, 0.0)];
        assert!(findings(&s, 1).is_empty());
        // Generator on one core at 95 %: saturated.
        let s = vec![sample(1.0, 10.0, 95.0), sample(2.0, 10.0, 97.0)];
        let mut f = findings(&s, 1);
        assert_eq!(f[0].kind, "generator_cpu");
        let reasons = generator_bound(&mut f, &ClientFacts::default(), Some(97.0));
        assert_eq!(reasons.len(), 1);
    }

    #[test]
    fn fds_memory_listen_and_exit() {
        let mut a = sample(1.0, 0.0, 0.0);
        a.server.as_mut().unwrap().fd_fullest = Some(FdUse {
            pid: 7,
            fds: 1019,
            limit: 1024,
        });
        let mut b = sample(2.0, 0.0, 0.0);
        let m = b.machine.as_mut().unwrap();
        m.mem_available_bytes = 40;
        m.listen_overflows = 312;
        m.listen_drops = 312;
        let mut c = sample(3.0, 0.0, 0.0);
        c.server.as_mut().unwrap().alive = false;
        let f = findings(&[a, b, c], 1);
        let kinds: Vec<&str> = f.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["memory", "fds", "listen_queue", "server_exited"]);
        assert_eq!(f[1].message, "fds at 1019 of 1024 (pid 7) from 00:01");
        assert!(f[2]
            .message
            .starts_with("listen queue overflowed 312 times"));
    }

    /// The reasons for `facts` with a busy generator, and the findings
    /// that were added.
    fn verdict(facts: &ClientFacts, cpu_peak: Option<f64>) -> (Vec<String>, Vec<Finding>) {
        let mut found = vec![];
        let reasons = generator_bound(&mut found, facts, cpu_peak);
        (reasons, found)
    }

    #[test]
    fn five_hundreds_beside_a_filling_queue_are_named() {
        let answers = |bad_gateway, unavailable| ClientFacts {
            bad_gateway,
            unavailable,
            first_5xx_s: Some(3.0),
            ..ClientFacts::default()
        };
        let waiting = [queued(1.0, 20.0, 5, 8), queued(2.0, 20.0, 9, 8)];
        let kinds = |s: &[Sample], c: &ClientFacts| -> Vec<String> {
            refused_answers(s, c).into_iter().map(|f| f.kind).collect()
        };
        let f = refused_answers(&waiting, &answers(0, 40));
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].kind.as_str(), f[0].at_s), ("queue_full", Some(3.0)));
        assert!(
            f[0].message.contains("40 × 503 from 00:03"),
            "{}",
            f[0].message
        );
        let f = refused_answers(&waiting, &answers(7, 0));
        assert_eq!(f[0].kind, "upstream_closed");
        assert!(
            f[0].message.contains("/run/app.sock was full (9 of 8)"),
            "{}",
            f[0].message
        );
        // 5xx with nothing waiting are the application's, not a queue's.
        let idle = [queued(1.0, 20.0, 0, 8), queued(2.0, 20.0, 0, 8)];
        assert!(kinds(&idle, &answers(7, 40)).is_empty());
        // Nor without any queue watched.
        assert!(kinds(&[sample(1.0, 20.0, 1.0)], &answers(7, 40)).is_empty());
    }

    #[test]
    fn scripts_taking_most_of_the_generator_are_its_limit() {
        let facts = |script_share| ClientFacts {
            script_share,
            ..ClientFacts::default()
        };
        let reasons = generator_bound(&mut Vec::new(), &facts(0.7), Some(40.0));
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].contains("scripts took 70 %"), "{reasons:?}");
        assert!(generator_bound(&mut Vec::new(), &facts(0.3), Some(40.0)).is_empty());
        let mut busy = vec![Finding {
            kind: "generator_cpu".into(),
            at_s: None,
            message: "generator CPU 98 %".into(),
        }];
        let reasons = generator_bound(&mut busy, &facts(0.3), Some(98.0));
        assert!(
            reasons[0].ends_with("(scripts took 30 % of its worker time)"),
            "{reasons:?}"
        );
    }

    #[test]
    fn open_model_lateness_is_generator_bound() {
        let facts = ClientFacts {
            open: true,
            target_rate_rps: Some(1000.0),
            achieved_rate_rps: Some(950.0),
            send_lag_p99_ms: Some(35.0),
            late_sends: 40,
            sends: 1000,
            not_sent: 3,
            ..ClientFacts::default()
        };
        assert_eq!(verdict(&facts, Some(95.0)).0.len(), 3);
        // Not sampled: late sends are put down to the generator.
        assert_eq!(verdict(&facts, None).0.len(), 3);
        let fine = ClientFacts {
            open: true,
            target_rate_rps: Some(1000.0),
            achieved_rate_rps: Some(999.5),
            send_lag_p99_ms: Some(0.4),
            ..ClientFacts::default()
        };
        assert_eq!(verdict(&fine, Some(95.0)), (vec![], vec![]));
    }

    fn late(late_sends: u64, sends: u64) -> ClientFacts {
        ClientFacts {
            open: true,
            send_lag_p99_ms: Some(29.5),
            late_sends,
            sends,
            ..ClientFacts::default()
        }
    }

    #[test]
    fn one_late_send_in_a_short_run_is_a_hiccup_not_a_verdict() {
        let busy = Some(GENERATOR_BUSY_PCT);
        // 45 req/s for 2 s: p99 is a single send.
        assert!(verdict(&late(2, 90), busy).0.is_empty());
        // Ten late sends of ninety, from a busy generator, is it falling behind.
        let (reasons, _) = verdict(&late(10, 90), busy);
        assert_eq!(
            reasons,
            ["sends ran late: 10 of 90 sends (11.1 %) over 10 ms after their intended time; send lag p99 29.5 ms (generator CPU peak 50 % of a core)"]
        );
        // With many sends, the 1 % share decides (as a p99 over 10 ms would).
        assert!(verdict(&late(100, 10_000), busy).0.is_empty());
        assert_eq!(verdict(&late(101, 10_000), busy).0.len(), 1);
    }

    #[test]
    fn late_sends_from_an_idle_generator_are_the_machine_not_a_verdict() {
        // A paused virtual CPU: 27 of 200 sends late, the generator at 4 %.
        let (reasons, found) = verdict(&late(27, 200), Some(4.0));
        assert!(reasons.is_empty(), "{reasons:?}");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, "late_sends");
        assert!(
            found[0].message.starts_with(
                "sends ran late while the generator was idle (CPU peak 4 % of a core) with connections to spare: 27 of 200 sends (13.5 %)"
            ),
            "{}",
            found[0].message
        );
        // The same lateness from a pool at its cap is the generator's limit.
        let capped = ClientFacts {
            waited_for_connection: 150,
            ..late(27, 200)
        };
        let (reasons, found) = verdict(&capped, Some(4.0));
        assert!(found.is_empty());
        assert_eq!(reasons.len(), 1);
        assert!(
            reasons[0].contains("150 arrivals waited for a connection (the pool was at its cap"),
            "{reasons:?}"
        );
    }
}
