//! Reading /proc (through the `procfs` crate): the watched process tree —
//! the root and every descendant, found again at each sample so workers
//! forked or respawned later are included — the machine, and the
//! generator itself. CPU figures are deltas since the previous sample.

use super::netstat;
use super::sample::{AcceptQueue, FdUse, MachineSample, ProcessSample, Sample, TreeSample};
use headroom_records::server::Restart;
use procfs::process::{LimitValue, Process, Stat};
use procfs::FromRead;
use procfs::{Current, CurrentSI};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Read as _;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A process's counters at the previous sample, keyed by pid and start
/// time (a reused pid is a different process).
#[derive(Clone, Copy)]
struct Prev {
    starttime: u64,
    ppid: i32,
    utime: u64,
    stime: u64,
    /// Times it was scheduled in (`/proc/PID/schedstat`), where known.
    timeslices: Option<u64>,
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
    /// The server's main process: the one signals go to. It changes when
    /// the server restarts (see [`Follow`]).
    root: Option<i32>,
    follow: Follow,
    /// Processes that own the server's listening socket, found again
    /// every `OWNERS_EVERY` samples.
    owners: Vec<i32>,
    restarts: Vec<Restart>,
    /// The server had nothing left since this sample time (a restart in
    /// progress, or the end).
    down_since: Option<f64>,
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
    /// Which listening sockets are the tree's (see `accept_queues`).
    listeners: Listeners,
}

/// The listening sockets a tree holds, by inode. Reading every process's
/// fd links each second would cost more than the rest of a sample, so
/// they are read again only when a listening socket the last reading did
/// not see appears, or the tree gains a process.
#[derive(Default)]
struct Listeners {
    /// Listening inodes on the machine at the last reading.
    known: HashSet<u32>,
    /// Those of them the tree held.
    ours: HashSet<u32>,
    /// The tree's processes at the last reading.
    pids: HashSet<i32>,
}

const LIMITS_EVERY: u64 = 10;
const OWNERS_EVERY: u64 = 5;

/// How the monitor finds the server again when its main process exits —
/// a re-exec (Unicorn's USR2: the new master is a child of the old one,
/// which then quits), a restart that writes a new pidfile, or processes
/// that left the tree (Passenger's agents call `setsid`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Follow {
    /// Re-read when the main process exits: the new main process.
    pub pidfile: Option<std::path::PathBuf>,
    /// The processes that own this port's listening socket are the
    /// server's, whatever tree they are in.
    pub listen_port: Option<u16>,
    /// Children of headroom that are not headroom (a server's daemons
    /// re-parented to headroom, the subreaper) are the server's.
    pub adopt_orphans: bool,
    /// Process groups that are not the server's, though headroom started
    /// them too (a study's `[[service]]`s): never adopted.
    pub not_adopted: Vec<i32>,
}

fn uptime_ticks(ticks_per_s: f64) -> u64 {
    procfs::Uptime::current()
        .map(|u| (u.uptime * ticks_per_s) as u64)
        .unwrap_or(0)
}

/// Every live process's `/proc/PID/stat` (zombies left out: they have
/// exited and only wait to be reaped), read with one reused buffer —
/// procfs's `all_processes` opens and stats each process's directory
/// first, which cost as much again as the reads.
fn all_stats() -> HashMap<i32, Stat> {
    let mut stats = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return stats;
    };
    let mut path = String::new();
    let mut buf = Vec::with_capacity(512);
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        path.clear();
        let _ = write!(path, "/proc/{pid}/stat");
        buf.clear();
        let read = std::fs::File::open(&path).and_then(|mut f| f.read_to_end(&mut buf));
        if read.is_err() {
            continue;
        }
        if let Ok(stat) = Stat::from_read(&buf[..]) {
            if stat.state != 'Z' {
                stats.insert(pid, stat);
            }
        }
    }
    stats
}

/// A process's open files: the size Linux ≥ 6.2 gives `/proc/PID/fd`,
/// else its entries counted (a getdents that makes a dentry per fd: a
/// quarter of the monitor's time on a 200-process tree of 25 fds each).
/// Without procfs's directory handle (an open and a stat per process).
fn fd_count(pid: i32) -> Option<u64> {
    let path = format!("/proc/{pid}/fd");
    match std::fs::metadata(&path) {
        Ok(m) if m.len() > 0 => Some(m.len()),
        Ok(_) => std::fs::read_dir(&path).ok().map(|d| d.count() as u64),
        Err(_) => None,
    }
}

/// The processes (other than this one) with a TCP socket listening on
/// `port`, IPv4 or IPv6, as (pid, start time in clock ticks since boot).
/// The listening sockets come from sock_diag, which the kernel filters to
/// LISTEN: /proc/net/tcp lists every socket, and a loaded machine has tens
/// of thousands in TIME-WAIT.
pub fn port_holders(port: u16) -> Vec<(i32, u64)> {
    let inodes: HashSet<u64> = match crate::queues::listening() {
        Ok(listening) => listening
            .iter()
            .filter(|l| {
                l.address
                    .parse::<std::net::SocketAddr>()
                    .is_ok_and(|a| a.port() == port)
            })
            .map(|l| u64::from(l.inode))
            .collect(),
        Err(_) => {
            let listening = |entries: procfs::ProcResult<Vec<procfs::net::TcpNetEntry>>| {
                entries.into_iter().flatten().filter(move |e| {
                    e.state == procfs::net::TcpState::Listen && e.local_address.port() == port
                })
            };
            listening(procfs::net::tcp())
                .chain(listening(procfs::net::tcp6()))
                .map(|e| e.inode)
                .collect()
        }
    };
    if inodes.is_empty() {
        return Vec::new();
    }
    let me = std::process::id() as i32;
    let mut holders = Vec::new();
    for p in procfs::process::all_processes()
        .into_iter()
        .flatten()
        .flatten()
    {
        if p.pid == me {
            continue;
        }
        let holds = p.fd().into_iter().flatten().flatten().any(
            |fd| matches!(fd.target, procfs::process::FDTarget::Socket(i) if inodes.contains(&i)),
        );
        if holds {
            if let Ok(stat) = p.stat() {
                holders.push((p.pid, stat.starttime));
            }
        }
    }
    holders
}

/// `pid (command)` for a person to read.
pub fn describe_process(pid: i32) -> String {
    let command = procfs::process::Process::new(pid)
        .and_then(|p| p.cmdline())
        .map(|c| c.join(" "))
        .unwrap_or_default();
    if command.is_empty() {
        format!("pid {pid}")
    } else {
        format!("pid {pid} ({command})")
    }
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
            follow: Follow::default(),
            owners: Vec::new(),
            restarts: Vec::new(),
            down_since: None,
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
            listeners: Listeners::default(),
            cores: procfs::CpuInfo::current()
                .map_or(1, |c| c.num_cores() as u32)
                .max(1),
        };
        s.sample(0.0);
        s
    }

    /// Follows the server through restarts as `follow` says.
    pub fn following(mut self, follow: Follow) -> Sampler {
        self.follow = follow;
        self.owners = self.listen_owners();
        self
    }

    /// The server's main process now.
    pub fn root(&self) -> Option<i32> {
        self.root
    }

    /// The restarts seen so far.
    pub fn restarts(&self) -> &[Restart] {
        &self.restarts
    }

    pub fn sample(&mut self, t_s: f64) -> Sample {
        let now = Instant::now();
        let dt = now.duration_since(self.prev_at).as_secs_f64().max(1e-3);
        let uptime = uptime_ticks(self.ticks_per_s);
        let sample = Sample {
            t_s,
            unix_ms: unix_ms(),
            server: self.root.map(|root| self.tree(root, dt, t_s)),
            machine: self.watch_machine.then(|| self.machine()),
            generator: self.watch_generator.then(|| self.generator(dt)),
            services: Default::default(),
            probes: Default::default(),
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

    /// Where the walk of the server's processes starts: the main
    /// process, every process that was the server's at the last sample
    /// and still runs (old workers finishing after their master quit),
    /// the listening socket's owners and the adopted orphans.
    fn roots(
        &self,
        root: i32,
        stats: &HashMap<i32, Stat>,
        children: &HashMap<i32, Vec<i32>>,
    ) -> Vec<i32> {
        let mut queue = vec![root];
        let survivors = self
            .prev
            .iter()
            .filter(|(pid, p)| stats.get(pid).is_some_and(|s| s.starttime == p.starttime));
        queue.extend(survivors.map(|(pid, _)| *pid));
        queue.extend(self.owners.iter().copied());
        if self.follow.adopt_orphans {
            queue.extend(adopted_orphans(children, stats).into_iter().filter(|pid| {
                stats
                    .get(pid)
                    .is_none_or(|s| !self.follow.not_adopted.contains(&s.pgrp))
            }));
        }
        queue
    }

    /// A process's context switches since the last sample, added to the
    /// tree's; what to remember of it for the next.
    fn switches(&self, stat: &Stat, tree: &mut TreeSample) -> Prev {
        let pid = stat.pid;
        let prev = self
            .prev
            .get(&pid)
            .filter(|p| p.starttime == stat.starttime);
        // A process not scheduled in since the last sample has had no
        // context switch since (a switch out is followed by a switch in):
        // its counts stand, and its status is not read.
        let timeslices = netstat::read_timeslices(pid);
        let (voluntary, involuntary) = match prev {
            Some(p) if timeslices.is_some() && timeslices == p.timeslices => {
                (p.voluntary, p.involuntary)
            }
            _ => netstat::read_context_switches(pid),
        };
        if let Some(p) = prev {
            tree.ctx_voluntary += voluntary.saturating_sub(p.voluntary);
            tree.ctx_involuntary += involuntary.saturating_sub(p.involuntary);
        }
        Prev {
            starttime: stat.starttime,
            ppid: stat.ppid,
            utime: stat.utime,
            stime: stat.stime,
            timeslices,
            voluntary,
            involuntary,
        }
    }

    /// A process's soft open-files limit (`None`: unlimited, or gone),
    /// read once per process.
    fn open_files_limit(&mut self, pid: i32, starttime: u64) -> Option<u64> {
        *self.limits.entry((pid, starttime)).or_insert_with(|| {
            Process::new(pid)
                .and_then(|p| p.limits())
                .ok()
                .and_then(|l| match l.max_open_files.soft_limit {
                    LimitValue::Value(v) => Some(v),
                    LimitValue::Unlimited => None,
                })
        })
    }

    fn tree(&mut self, root: i32, dt: f64, t_s: f64) -> TreeSample {
        // One pass over /proc: parent links, then the server's processes.
        let stats = all_stats();
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for stat in stats.values() {
            children.entry(stat.ppid).or_default().push(stat.pid);
        }
        if self.follow.listen_port.is_some()
            && (self.samples_taken.is_multiple_of(OWNERS_EVERY) || !stats.contains_key(&root))
        {
            self.owners = self.listen_owners();
        }
        let root = if stats.contains_key(&root) {
            root
        } else {
            self.next_root(root, &stats, &children, t_s)
        };
        // The main process's tree, and every process that was the
        // server's at the last sample and still runs (old workers
        // finishing after their master quit), the listening socket's
        // owners and the adopted orphans.
        let mut queue = self.roots(root, &stats, &children);
        let mut tree = TreeSample {
            alive: false,
            root_pid: root,
            ..TreeSample::default()
        };
        let mut next_prev: HashMap<i32, Prev> = HashMap::new();
        let page = procfs::page_size();
        while let Some(pid) = queue.pop() {
            let Some(stat) = stats.get(&pid) else {
                continue;
            };
            if next_prev.contains_key(&pid) {
                continue;
            }
            // Gone since the scan: not sampled.
            let Some(fds) = fd_count(pid) else {
                continue;
            };
            queue.extend(children.get(&pid).into_iter().flatten().copied());
            let (du, ds) = self.delta(pid, stat.starttime, stat.utime, stat.stime);
            next_prev.insert(pid, self.switches(stat, &mut tree));
            if let Some(limit) = self.open_files_limit(pid, stat.starttime) {
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
                command: stat.comm.clone(),
                cpu_pct: self.pct(du + ds, dt),
                rss_bytes: rss,
                threads,
                fds,
            });
        }
        tree.cpu_pct = tree.cpu_user_pct + tree.cpu_system_pct;
        tree.per_process.sort_by_key(|p| p.pid);
        tree.accept_queues = self.accept_queues(&tree);
        tree.alive = tree.processes > 0;
        self.prev = next_prev;
        if tree.alive {
            self.down_since = None;
        } else {
            self.down_since.get_or_insert(t_s);
        }
        tree
    }

    /// The accept queues of the sockets the tree listens on (none where
    /// the kernel's sock_diag cannot be read).
    fn accept_queues(&mut self, tree: &TreeSample) -> Vec<AcceptQueue> {
        let Ok(listening) = crate::queues::listening() else {
            return Vec::new();
        };
        let pids: HashSet<i32> = tree.per_process.iter().map(|p| p.pid).collect();
        let unseen = listening
            .iter()
            .any(|l| !self.listeners.known.contains(&l.inode));
        if unseen || !pids.is_subset(&self.listeners.pids) {
            let known: HashSet<u32> = listening.iter().map(|l| l.inode).collect();
            let mut ours = HashSet::new();
            for pid in &pids {
                let Ok(process) = Process::new(*pid) else {
                    continue;
                };
                for fd in process.fd().into_iter().flatten().flatten() {
                    if let procfs::process::FDTarget::Socket(inode) = fd.target {
                        if let Ok(inode) = u32::try_from(inode) {
                            if known.contains(&inode) {
                                ours.insert(inode);
                            }
                        }
                    }
                }
            }
            self.listeners = Listeners { known, ours, pids };
        }
        let mut queues: Vec<AcceptQueue> = listening
            .into_iter()
            .filter(|l| self.listeners.ours.contains(&l.inode))
            .map(|l| AcceptQueue {
                address: l.address,
                depth: l.depth,
                limit: l.limit,
            })
            .collect();
        queues.sort_by(|a, b| a.address.cmp(&b.address));
        queues
    }

    /// The main process `old` is gone: its successor, if there is one
    /// yet — the pidfile's process, the old one's child that outlived it
    /// (a re-exec), or the listening socket's owner. The restart is
    /// recorded; without a successor `old` stays, for the next sample.
    fn next_root(
        &mut self,
        old: i32,
        stats: &HashMap<i32, Stat>,
        children: &HashMap<i32, Vec<i32>>,
        t_s: f64,
    ) -> i32 {
        let from_pidfile = self
            .follow
            .pidfile
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| t.trim().parse::<i32>().ok())
            .filter(|pid| *pid != old && stats.contains_key(pid));
        let heir = || {
            // The old main's children that still run; the one with the
            // most processes under it (a new master with its workers).
            let descendants = |pid: i32| {
                let mut n = 0;
                let mut todo = vec![pid];
                while let Some(p) = todo.pop() {
                    n += 1;
                    todo.extend(children.get(&p).into_iter().flatten());
                }
                n
            };
            self.prev
                .iter()
                .filter(|(pid, p)| {
                    p.ppid == old && stats.get(pid).is_some_and(|s| s.starttime == p.starttime)
                })
                .max_by_key(|(pid, p)| (descendants(**pid), std::cmp::Reverse(p.starttime)))
                .map(|(pid, _)| *pid)
        };
        let owner = || self.owners.iter().copied().find(|p| stats.contains_key(p));
        let found = from_pidfile
            .map(|p| (p, "pidfile"))
            .or_else(|| heir().map(|p| (p, "child")))
            .or_else(|| owner().map(|p| (p, "listener")));
        let Some((new, how)) = found else {
            return old;
        };
        self.restarts.push(Restart {
            t_s,
            unix_ms: unix_ms(),
            old_pid: old,
            new_pid: new,
            how: how.into(),
            down_ms: self.down_since.map(|d| (t_s - d) * 1000.0),
        });
        self.root = Some(new);
        new
    }

    /// The processes whose sockets listen on the followed port.
    fn listen_owners(&self) -> Vec<i32> {
        match self.follow.listen_port {
            Some(port) => port_holders(port).into_iter().map(|(pid, _)| pid).collect(),
            None => Vec::new(),
        }
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
        let Ok(me) = Process::myself() else {
            return ProcessSample::default();
        };
        let Ok(stat) = me.stat() else {
            return ProcessSample::default();
        };
        let mut fds = me.fd_count().unwrap_or(0) as u64;
        let page = procfs::page_size();
        let mut ticks = stat.utime + stat.stime;
        let mut rss = stat.rss * page;
        let mut threads = stat.num_threads.max(0) as u64;
        for child in self.generator_children(stat.pid) {
            fds += Process::new(child.pid)
                .and_then(|p| p.fd_count())
                .unwrap_or(0) as u64;
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
            command: stat.comm.clone(),
            cpu_pct: cpu,
            rss_bytes: rss,
            threads,
            fds,
        }
    }

    /// The descendants of `me` that are load generators: all but the
    /// watched server's tree. Cheap when there are none (the usual case).
    fn generator_children(&self, me: i32) -> Vec<procfs::process::Stat> {
        let server: std::collections::HashSet<i32> = self.prev.keys().copied().collect();
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
                if Some(child.pid) == self.root || server.contains(&child.pid) {
                    continue;
                }
                todo.push(child.pid);
                found.push(child);
            }
        }
        found
    }
}

/// Children of this process that are not headroom itself: with headroom as
/// the subreaper of the servers it starts, a daemon that detached from its
/// server's tree (double fork, `setsid`) lands here.
/// Not adopted: headroom's own helpers — its shards (its own executable)
/// and what it runs in its own process group (`kubectl logs -f` for a
/// Job's pods); the server is started in a group of its own, and what
/// leaves its tree keeps that group or makes a new one.
fn adopted_orphans(children: &HashMap<i32, Vec<i32>>, stats: &HashMap<i32, Stat>) -> Vec<i32> {
    let me = std::process::id() as i32;
    let exe = |pid: i32| std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let mine = exe(me);
    let my_group = stats.get(&me).map(|s| s.pgrp);
    children
        .get(&me)
        .into_iter()
        .flatten()
        .copied()
        .filter(|pid| my_group.is_none() || stats.get(pid).map(|s| s.pgrp) != my_group)
        .filter(|&pid| exe(pid) != mine)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long run's samples wait in a temp file (`Spilled`): each must come
    /// back from it exactly as sampled.
    #[test]
    fn samples_come_back_from_the_spill_file_unchanged() {
        let mut sampler = Sampler::new(Some(std::process::id() as i32), true, true);
        let taken: Vec<Sample> = (0..150).map(|i| sampler.sample(i as f64 * 0.5)).collect();
        assert!(
            taken.iter().all(|s| s.server.is_some()),
            "our own process is sampled"
        );
        let mut spilled = headroom_metrics::spill::Spilled::new();
        for s in &taken {
            spilled.push(s.clone());
        }
        assert_eq!(spilled.into_vec(), taken);
    }

    /// Context switches are counted exactly whether or not a process's
    /// status is read again: a shell that waits for 100 `sleep`s between
    /// two samples, then blocks, has the samples' sum of its switches
    /// equal to what its status says.
    #[test]
    fn context_switches_are_counted_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("done");
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "read go; i=0; while [ $i -lt 100 ]; do sleep 0.001; i=$((i+1)); done; touch {}; read end",
                done.display()
            ))
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut stdin = child.stdin.take().unwrap();
        // Blocked in `read go` once its status says so.
        while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap()
            .contains(") S ")
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut sampler = Sampler::new(Some(pid), false, false);
        sampler.sample(0.0);
        let (before, _) = netstat::read_context_switches(pid);
        use std::io::Write;
        stdin.write_all(b"go\n").unwrap();
        while !done.exists() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let counted: u64 = (1..4)
            .map(|i| sampler.sample(i as f64).server.unwrap().ctx_voluntary)
            .sum();
        let (after, _) = netstat::read_context_switches(pid);
        drop(stdin);
        let _ = child.wait();
        assert!(after - before >= 100, "{before} → {after}");
        assert_eq!(counted, after - before);
    }
}
