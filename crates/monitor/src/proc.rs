//! Reading /proc (through the `procfs` crate): the watched process tree —
//! the root and every descendant, found again at each sample so workers
//! forked or respawned later are included — the machine, and the
//! generator itself. CPU figures are deltas since the previous sample.

use super::netstat;
use super::sample::{FdUse, MachineSample, ProcessSample, Sample, TreeSample};
use procfs::process::{LimitValue, Process};
use procfs::{Current, CurrentSI};
use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A process's counters at the previous sample, keyed by pid and start
/// time (a reused pid is a different process).
#[derive(Clone, Copy)]
struct Prev {
    starttime: u64,
    utime: u64,
    stime: u64,
    voluntary: u64,
    involuntary: u64,
}

#[derive(Clone, Copy, Default)]
struct CpuTicks {
    user: u64,
    system: u64,
    idle: u64,
    iowait: u64,
    steal: u64,
}

impl CpuTicks {
    fn total(&self) -> u64 {
        self.user + self.system + self.idle + self.iowait + self.steal
    }
}

pub struct Sampler {
    root: Option<i32>,
    watch_machine: bool,
    watch_generator: bool,
    ticks_per_s: f64,
    prev: HashMap<i32, Prev>,
    prev_at: Instant,
    /// Uptime in ticks at the previous sample: a process that started
    /// after it has all its CPU time inside this interval.
    prev_uptime_ticks: u64,
    prev_cpu: Option<CpuTicks>,
    prev_listen: Option<(u64, u64)>,
    prev_generator: Option<u64>,
    cores: u32,
    /// Open-files limits by (pid, start time), re-read every
    /// `LIMITS_EVERY` samples: they rarely change and cost a file parse.
    limits: HashMap<(i32, u64), Option<u64>>,
    samples_taken: u64,
}

const LIMITS_EVERY: u64 = 10;

fn uptime_ticks(ticks_per_s: f64) -> u64 {
    procfs::Uptime::current()
        .map(|u| (u.uptime * ticks_per_s) as u64)
        .unwrap_or(0)
}

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Sampler {
    /// Starts watching: the first `sample()` reports the interval since now.
    pub fn new(root: Option<i32>, watch_machine: bool, watch_generator: bool) -> Sampler {
        let ticks_per_s = procfs::ticks_per_second() as f64;
        let mut s = Sampler {
            root,
            watch_machine,
            watch_generator,
            ticks_per_s,
            prev: HashMap::new(),
            prev_at: Instant::now(),
            prev_uptime_ticks: uptime_ticks(ticks_per_s),
            prev_cpu: None,
            prev_listen: None,
            prev_generator: None,
            limits: HashMap::new(),
            samples_taken: 0,
            cores: procfs::CpuInfo::current()
                .map_or(1, |c| c.num_cores() as u32)
                .max(1),
        };
        s.sample(0.0);
        s
    }

    pub fn sample(&mut self, t_s: f64) -> Sample {
        let now = Instant::now();
        let dt = now.duration_since(self.prev_at).as_secs_f64().max(1e-3);
        let uptime = uptime_ticks(self.ticks_per_s);
        let sample = Sample {
            t_s,
            unix_ms: unix_ms(),
            server: self.root.map(|root| self.tree(root, dt)),
            machine: self.watch_machine.then(|| self.machine()),
            generator: self.watch_generator.then(|| self.generator(dt)),
        };
        self.prev_at = now;
        self.prev_uptime_ticks = uptime;
        self.samples_taken += 1;
        if self.samples_taken.is_multiple_of(LIMITS_EVERY) {
            self.limits.clear();
        }
        sample
    }

    fn pct(&self, ticks: u64, dt: f64) -> f64 {
        ticks as f64 / self.ticks_per_s / dt * 100.0
    }

    /// CPU ticks a process spent since the previous sample.
    fn delta(&self, pid: i32, starttime: u64, utime: u64, stime: u64) -> (u64, u64) {
        match self.prev.get(&pid) {
            Some(p) if p.starttime == starttime => {
                (utime.saturating_sub(p.utime), stime.saturating_sub(p.stime))
            }
            // Born during this interval: all its time is in it.
            _ if starttime >= self.prev_uptime_ticks => (utime, stime),
            // First seen now but older: no baseline yet.
            _ => (0, 0),
        }
    }

    fn tree(&mut self, root: i32, dt: f64) -> TreeSample {
        // One pass over /proc: parent links, then the root's descendants.
        let mut stats = HashMap::new();
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        if let Ok(all) = procfs::process::all_processes() {
            for p in all.flatten() {
                // A zombie has exited; it only waits to be reaped.
                if let Some(stat) = p.stat().ok().filter(|s| s.state != 'Z') {
                    children.entry(stat.ppid).or_default().push(stat.pid);
                    stats.insert(stat.pid, (p, stat));
                }
            }
        }
        let mut tree = TreeSample {
            alive: stats.contains_key(&root),
            root_pid: root,
            ..TreeSample::default()
        };
        let mut next_prev = HashMap::new();
        let mut queue = vec![root];
        let page = procfs::page_size();
        while let Some(pid) = queue.pop() {
            let Some((process, stat)) = stats.get(&pid) else {
                continue;
            };
            queue.extend(children.get(&pid).into_iter().flatten().copied());
            let (du, ds) = self.delta(pid, stat.starttime, stat.utime, stat.stime);
            let (voluntary, involuntary) = netstat::read_context_switches(pid);
            if let Some(p) = self
                .prev
                .get(&pid)
                .filter(|p| p.starttime == stat.starttime)
            {
                tree.ctx_voluntary += voluntary.saturating_sub(p.voluntary);
                tree.ctx_involuntary += involuntary.saturating_sub(p.involuntary);
            }
            next_prev.insert(
                pid,
                Prev {
                    starttime: stat.starttime,
                    utime: stat.utime,
                    stime: stat.stime,
                    voluntary,
                    involuntary,
                },
            );
            let fds = process.fd_count().unwrap_or(0) as u64;
            let limit = *self.limits.entry((pid, stat.starttime)).or_insert_with(|| {
                process
                    .limits()
                    .ok()
                    .and_then(|l| match l.max_open_files.soft_limit {
                        LimitValue::Value(v) => Some(v),
                        LimitValue::Unlimited => None,
                    })
            });
            if let Some(limit) = limit {
                tree.fd_limit_min = Some(tree.fd_limit_min.map_or(limit, |m| m.min(limit)));
                let fuller = tree
                    .fd_fullest
                    .as_ref()
                    .is_none_or(|f| fds as f64 / limit as f64 > f.fds as f64 / f.limit as f64);
                if fuller {
                    tree.fd_fullest = Some(FdUse { pid, fds, limit });
                }
            }
            let rss = stat.rss * page;
            let threads = stat.num_threads.max(0) as u64;
            tree.processes += 1;
            tree.threads += threads;
            tree.rss_bytes += rss;
            tree.fds += fds;
            tree.cpu_user_pct += self.pct(du, dt);
            tree.cpu_system_pct += self.pct(ds, dt);
            tree.per_process.push(ProcessSample {
                pid,
                ppid: stat.ppid,
                cpu_pct: self.pct(du + ds, dt),
                rss_bytes: rss,
                threads,
                fds,
            });
        }
        tree.cpu_pct = tree.cpu_user_pct + tree.cpu_system_pct;
        tree.per_process.sort_by_key(|p| p.pid);
        self.prev = next_prev;
        tree
    }

    fn machine(&mut self) -> MachineSample {
        let mut m = MachineSample {
            cores: self.cores,
            ..MachineSample::default()
        };
        if let Ok(stats) = procfs::KernelStats::current() {
            let c = &stats.total;
            let now = CpuTicks {
                user: c.user + c.nice,
                system: c.system + c.irq.unwrap_or(0) + c.softirq.unwrap_or(0),
                idle: c.idle,
                iowait: c.iowait.unwrap_or(0),
                steal: c.steal.unwrap_or(0),
            };
            if let Some(prev) = self.prev_cpu {
                let total = now.total().saturating_sub(prev.total()).max(1) as f64;
                let pct = |a: u64, b: u64| a.saturating_sub(b) as f64 / total * 100.0;
                m.cpu_user_pct = pct(now.user, prev.user);
                m.cpu_system_pct = pct(now.system, prev.system);
                m.cpu_idle_pct = pct(now.idle, prev.idle);
                m.cpu_iowait_pct = pct(now.iowait, prev.iowait);
                m.cpu_steal_pct = pct(now.steal, prev.steal);
            }
            self.prev_cpu = Some(now);
        }
        if let Ok(l) = procfs::LoadAverage::current() {
            (m.load1, m.load5, m.load15) = (l.one as f64, l.five as f64, l.fifteen as f64);
        }
        if let Ok(mem) = procfs::Meminfo::current() {
            m.mem_total_bytes = mem.mem_total;
            m.mem_available_bytes = mem.mem_available.unwrap_or(mem.mem_free);
            m.swap_used_bytes = mem.swap_total.saturating_sub(mem.swap_free);
        }
        // Counters, not a walk over every socket (/proc/net/tcp).
        if let Ok(snmp) = procfs::net::snmp() {
            m.tcp_established = snmp.tcp_curr_estab;
        }
        m.tcp_time_wait = netstat::read_time_wait().unwrap_or(0);
        if let Some((overflows, drops)) = netstat::read_listen_counters() {
            if let Some((po, pd)) = self.prev_listen {
                m.listen_overflows = overflows.saturating_sub(po);
                m.listen_drops = drops.saturating_sub(pd);
            }
            self.prev_listen = Some((overflows, drops));
        }
        m
    }

    /// This headroom process — and, with `run --processes`, its shards,
    /// the child processes that send the load (not the server it may
    /// have started: that tree is the server's).
    fn generator(&mut self, dt: f64) -> ProcessSample {
        let Ok(stat) = Process::myself().and_then(|p| p.stat()) else {
            return ProcessSample::default();
        };
        let page = procfs::page_size();
        let mut ticks = stat.utime + stat.stime;
        let mut rss = stat.rss * page;
        let mut threads = stat.num_threads.max(0) as u64;
        for child in self.generator_children(stat.pid) {
            ticks += child.utime + child.stime;
            rss += child.rss * page;
            threads += child.num_threads.max(0) as u64;
        }
        let cpu = self
            .prev_generator
            .map_or(0.0, |p| self.pct(ticks.saturating_sub(p), dt));
        self.prev_generator = Some(ticks);
        ProcessSample {
            pid: stat.pid,
            ppid: stat.ppid,
            cpu_pct: cpu,
            rss_bytes: rss,
            threads,
            fds: 0,
        }
    }

    /// The descendants of `me` that are load generators: all but the
    /// watched server's tree. Cheap when there are none (the usual case).
    fn generator_children(&self, me: i32) -> Vec<procfs::process::Stat> {
        let direct = std::fs::read_dir(format!("/proc/{me}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .any(|c| !c.trim().is_empty());
        if !direct {
            return Vec::new();
        }
        let mut children: HashMap<i32, Vec<procfs::process::Stat>> = HashMap::new();
        if let Ok(all) = procfs::process::all_processes() {
            for stat in all.flatten().filter_map(|p| p.stat().ok()) {
                children.entry(stat.ppid).or_default().push(stat);
            }
        }
        let mut found = Vec::new();
        let mut todo = vec![me];
        while let Some(pid) = todo.pop() {
            for child in children.remove(&pid).unwrap_or_default() {
                if Some(child.pid) == self.root {
                    continue;
                }
                todo.push(child.pid);
                found.push(child);
            }
        }
        found
    }
}
