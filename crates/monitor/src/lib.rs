//! Watching the server while loading it: its process tree, the machine,
//! and the generator itself, sampled on the run's clock (the same interval
//! boundaries as the client timeline), then read for what ran out first.
//!
//! - `proc`: reading /proc via `procfs`; `netstat`: listen-queue counters;
//!   [`queues`]: every listening socket's accept queue (sock_diag netlink);
//!   [`probes`]: the servers' own gauges (Puma, nginx, haproxy, Passenger,
//!   Prometheus text).
//! - [`remote`]: `headroom monitor` on the server's host, and the client
//!   that pulls its samples during a run.
//! - [`launch`]: start a server command in its own process group, wait for
//!   its port, stop the whole group.
//! - [`machine`]: the process's open-files limit.
//!
//! What it records — samples, their summary, the findings read from them
//! (`server` in results.json) — is `headroom_records::server`.

pub mod launch;
pub mod machine;
mod netstat;
pub mod probes;
mod proc;
pub mod queues;
pub mod remote;

use headroom_records::server::{findings, sample, Restart, ServerReport, Summary};

pub use proc::{describe_process, port_holders, unix_ms, Follow, Sampler};
use sample::Sample;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct MonitorConfig {
    /// Root of the server's process tree, when watched locally.
    pub root: Option<i32>,
    pub interval: Duration,
    /// Pull server samples from a `headroom monitor` instead.
    pub remote: Option<remote::RemoteSource>,
    /// How the server was named, for the report.
    pub source: String,
    /// How to find the server again when its main process exits.
    pub follow: Follow,
    /// A study's services (name, main pid), each sampled as its own tree.
    pub services: Vec<(String, i32)>,
    /// The server's own gauges to read at each sample.
    pub probes: Vec<probes::Probe>,
}

/// A monitor running beside a load test.
pub struct Monitor {
    stop: Arc<AtomicBool>,
    latest: Arc<Mutex<Option<Sample>>>,
    /// The server's main process now (0: none watched locally).
    main_pid: Arc<AtomicI32>,
    handle: JoinHandle<(Vec<Sample>, Vec<String>, Vec<Restart>)>,
    config: MonitorConfig,
}

impl Monitor {
    /// Starts sampling at `start` + k × interval (the run's clock);
    /// `start_wall` is the wall-clock time of `start`, for sample times.
    pub fn start(config: MonitorConfig, start: Instant, start_wall: SystemTime) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let latest = Arc::new(Mutex::new(None));
        let main_pid = Arc::new(AtomicI32::new(
            config.root.filter(|_| config.remote.is_none()).unwrap_or(0),
        ));
        let (s, l, c, m) = (
            stop.clone(),
            latest.clone(),
            config.clone(),
            main_pid.clone(),
        );
        let start_unix_ms = start_wall
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let handle = std::thread::Builder::new()
            .name("headroom-monitor".into())
            .spawn(move || sample_loop(c, start, start_unix_ms, s, l, m))
            .expect("a monitor thread can be spawned");
        Monitor {
            stop,
            latest,
            main_pid,
            handle,
            config,
        }
    }

    /// The most recent sample, for live displays.
    pub fn latest(&self) -> Option<Sample> {
        self.latest.lock().expect("monitor lock").clone()
    }

    /// The watched server's main process now (it changes when the server
    /// restarts), when a local server is watched: where signals go.
    pub fn main_pid(&self) -> Option<i32> {
        Some(self.main_pid.load(Ordering::SeqCst)).filter(|&p| p > 0)
    }

    /// A handle on [`Monitor::main_pid`] for another thread.
    pub fn main_pid_handle(&self) -> Arc<AtomicI32> {
        self.main_pid.clone()
    }

    /// Stops (after one last sample) and returns the report.
    pub fn finish(self, generator_cores: usize, client: &findings::ClientFacts) -> ServerReport {
        self.stop.store(true, Ordering::SeqCst);
        let (samples, errors, restarts) = self.handle.join().unwrap_or_default();
        let mut found = findings::findings(&samples, generator_cores);
        found.extend(findings::refused_answers(&samples, client));
        let summary = Summary::of(&samples);
        let generator_cpu_peak = summary.generator_cpu_pct.map(|c| c.peak);
        let generator_bound_reasons =
            findings::generator_bound(&mut found, client, generator_cpu_peak);
        ServerReport {
            source: self.config.source.clone(),
            interval_s: self.config.interval.as_secs_f64(),
            summary,
            samples,
            findings: found,
            generator_bound: !generator_bound_reasons.is_empty(),
            generator_bound_reasons,
            errors,
            restarts,
        }
    }
}

fn sample_loop(
    config: MonitorConfig,
    start: Instant,
    start_unix_ms: u64,
    stop: Arc<AtomicBool>,
    latest: Arc<Mutex<Option<Sample>>>,
    main_pid: Arc<AtomicI32>,
) -> (Vec<Sample>, Vec<String>, Vec<Restart>) {
    let local_server = config.remote.is_none();
    let mut sampler = Sampler::new(config.root.filter(|_| local_server), local_server, true)
        .following(config.follow.clone());
    let mut remote = config
        .remote
        .clone()
        .map(|r| remote::Puller::new(r, start_unix_ms));
    let mut services: Vec<(String, Sampler)> = config
        .services
        .iter()
        .map(|(name, pid)| (name.clone(), Sampler::new(Some(*pid), false, false)))
        .collect();
    let mut probe_failures = ProbeFailures::default();
    let mut probing = probes::Probing::start(&config.probes, config.interval);
    // A day's samples would be tens of MiB: all but the newest wait in a
    // temp file until the run ends.
    let mut samples = headroom_metrics::spill::Spilled::new();
    // A run joined late (a shard after the shared start) samples from now
    // on, not a burst of the intervals already past.
    let past = Instant::now().saturating_duration_since(start);
    let mut k = (past.as_secs_f64() / config.interval.as_secs_f64()).floor() as u32 + 1;
    loop {
        let due = start + config.interval * k;
        // Sleep in short steps so a stop is noticed promptly.
        while Instant::now() < due && !stop.load(Ordering::SeqCst) {
            std::thread::sleep((due - Instant::now()).min(Duration::from_millis(20)));
        }
        let stopping = stop.load(Ordering::SeqCst);
        let t_s = if stopping {
            start.elapsed().as_secs_f64()
        } else {
            (config.interval * k).as_secs_f64()
        };
        let mut s = sampler.sample(t_s);
        if let Some(r) = &mut remote {
            r.fill(&mut s);
        }
        for (i, name, taken) in probing.take() {
            match taken {
                probes::Taken::Fresh(Ok(gauges)) => {
                    probe_failures.read(i);
                    s.probes.insert(name.to_string(), gauges);
                }
                probes::Taken::Fresh(Err(e)) => probe_failures.record(i, e),
                probes::Taken::Carried(gauges) => {
                    s.probes.insert(name.to_string(), gauges);
                }
            }
        }
        for (name, sampler) in &mut services {
            if let Some(tree) = sampler.sample(t_s).server {
                s.services.insert(name.clone(), tree);
            }
        }
        *latest.lock().expect("monitor lock") = Some(s.clone());
        main_pid.store(sampler.root().unwrap_or(0), Ordering::SeqCst);
        samples.push(s);
        if stopping {
            break;
        }
        k += 1;
    }
    let mut errors = remote.map(|r| r.errors()).unwrap_or_default();
    drop(probing);
    errors.extend(probe_failures.into_messages());
    (samples.into_vec(), errors, sampler.restarts().to_vec())
}

/// Probes that failed, told once each at the end (a warning, not an
/// error: the run's figures stand without them).
#[derive(Default)]
struct ProbeFailures {
    /// By probe (its index): readings taken.
    reads: std::collections::BTreeMap<usize, u32>,
    /// By probe: the first failure's message (the probe and target lead
    /// it), and how many readings failed.
    first: std::collections::BTreeMap<usize, (String, u32)>,
}

impl ProbeFailures {
    fn read(&mut self, probe: usize) {
        *self.reads.entry(probe).or_default() += 1;
    }

    fn record(&mut self, probe: usize, message: String) {
        self.read(probe);
        self.first.entry(probe).or_insert((message, 0)).1 += 1;
    }

    fn into_messages(self) -> Vec<String> {
        self.first
            .into_iter()
            .map(|(i, (m, n))| format!("{m} (failed in {n} of {} readings)", self.reads[&i]))
            .collect()
    }
}
