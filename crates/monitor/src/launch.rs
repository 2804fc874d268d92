//! A server started by headroom: a shell command in its own process group,
//! waited on until its port accepts connections, and stopped — the whole
//! group, SIGTERM then SIGKILL after a grace period — when dropped.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Processes, as (pid, start time in clock ticks since boot): a pid alone
/// may have been reused.
pub type Processes = Vec<(i32, u64)>;

pub struct ServerProcess {
    child: Child,
    pub command: String,
    grace: Duration,
    stop_signal: i32,
    stderr_path: tempfile::TempPath,
    /// When it was started, in clock ticks since boot (a process's start
    /// time in /proc): a process started before it is not its own.
    started: u64,
    /// The port it was started to listen on: whatever still holds it after
    /// the stop and was started after it (a daemon that double-forked and
    /// left both the group and the tree) is a stray of its own.
    port: Option<u16>,
}

/// How to start a server and how to stop it.
#[derive(Clone, Debug)]
pub struct LaunchSpec {
    pub command: String,
    pub dir: Option<std::path::PathBuf>,
    pub env: Vec<(String, String)>,
    /// Sent to the whole group first (SIGTERM by default).
    pub stop_signal: i32,
    /// Then SIGKILL after this long.
    pub grace: Duration,
}

impl LaunchSpec {
    pub fn command(command: &str, grace: Duration) -> LaunchSpec {
        LaunchSpec {
            command: command.to_string(),
            dir: None,
            env: Vec::new(),
            stop_signal: libc::SIGTERM,
            grace,
        }
    }
}

/// A signal by name ("TERM", "SIGINT", "QUIT", ...).
pub fn signal_by_name(name: &str) -> Option<i32> {
    let n = name.trim().to_ascii_uppercase();
    let n = n.strip_prefix("SIG").unwrap_or(&n);
    Some(match n {
        "TERM" => libc::SIGTERM,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "HUP" => libc::SIGHUP,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "WINCH" => libc::SIGWINCH,
        "TTIN" => libc::SIGTTIN,
        "TTOU" => libc::SIGTTOU,
        "STOP" => libc::SIGSTOP,
        "CONT" => libc::SIGCONT,
        _ => return None,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` exited ({status}) before it was ready; stderr ends:\n{stderr}")]
    Exited {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("`{command}` did not open {addr} within {timeout:?}; stderr ends:\n{stderr}")]
    NotReady {
        command: String,
        addr: SocketAddr,
        timeout: Duration,
        stderr: String,
    },
}

impl ServerProcess {
    /// Runs `sh -c command` in a new process group; its stdout and stderr
    /// go to one file (their tail explains a failed start).
    pub fn spawn(command: &str, grace: Duration) -> Result<ServerProcess, LaunchError> {
        Self::launch(&LaunchSpec::command(command, grace))
    }

    pub fn launch(spec: &LaunchSpec) -> Result<ServerProcess, LaunchError> {
        let command = spec.command.as_str();
        let stderr_file = tempfile::NamedTempFile::new().map_err(|source| LaunchError::Spawn {
            command: command.into(),
            source,
        })?;
        let (file, stderr_path) = stderr_file.into_parts();
        let stdout = file.try_clone().map_err(|source| LaunchError::Spawn {
            command: command.into(),
            source,
        })?;
        // Orphans of the server (workers whose master died) become our
        // children, so we can reap them and see the group empty.
        // SAFETY: prctl with an integer flag.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(command);
        if let Some(dir) = &spec.dir {
            cmd.current_dir(dir);
        }
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(file))
            .process_group(0)
            .spawn()
            .map_err(|source| LaunchError::Spawn {
                command: command.into(),
                source,
            })?;
        let started = procfs::process::Process::new(child.id() as i32)
            .and_then(|p| p.stat())
            .map_or(0, |s| s.starttime);
        Ok(ServerProcess {
            child,
            command: command.into(),
            grace: spec.grace,
            stop_signal: spec.stop_signal,
            stderr_path,
            started,
            port: None,
        })
    }

    /// The port the server is to listen on (see [`ServerProcess::stop`]).
    pub fn listens_on(&mut self, port: u16) {
        self.port = Some(port);
    }

    /// Processes listening on its port: those it started — born after it
    /// (the port was checked free before it was) — and the others.
    fn port_holders_by_origin(&self) -> (Processes, Processes) {
        self.port
            .map(crate::port_holders)
            .unwrap_or_default()
            .into_iter()
            .partition(|&(_, start)| start >= self.started)
    }

    /// Processes listening on its port that it started.
    pub fn own_port_holders(&self) -> Processes {
        self.port_holders_by_origin().0
    }

    /// Children of this process that left its session after the server
    /// started, with what runs under them: daemons its command
    /// double-forked out of its tree (this process is a subreaper, so such
    /// orphans land here — or their parent does, still on its way out),
    /// bound to its port yet or not. headroom's own children (shards,
    /// `kubectl`) stay in its session.
    pub fn adopted_daemons(&self) -> Processes {
        let me = std::process::id() as i32;
        let Ok(all) = procfs::process::all_processes() else {
            return Vec::new();
        };
        let stats: Vec<_> = all.flatten().filter_map(|p| p.stat().ok()).collect();
        let Some(my_session) = stats.iter().find(|s| s.pid == me).map(|s| s.session) else {
            return Vec::new();
        };
        stats
            .iter()
            .filter(|s| s.ppid == me && s.session != my_session && s.state != 'Z')
            .filter(|s| s.starttime >= self.started)
            .flat_map(|s| descendants(s.pid))
            .collect()
    }

    /// What the server started that its process group does not hold: the
    /// processes on its port it started, and the daemons it left behind.
    pub fn strays(&self) -> Processes {
        let mut strays = self.own_port_holders();
        strays.extend(self.adopted_daemons());
        strays.sort_unstable();
        strays.dedup();
        strays
    }

    /// Processes listening on its port that it did not start: another
    /// server answering in its place.
    pub fn other_port_holders(&self) -> Processes {
        self.port_holders_by_origin().1
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The last lines the server wrote (stdout and stderr).
    pub fn stderr_tail(&self, lines: usize) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.stderr_path) {
            let _ = f.read_to_string(&mut text);
        }
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Has the process headroom started (the group's leader) exited?
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }

    /// Waits until `addr` accepts a TCP connection.
    pub fn wait_ready(&mut self, addr: SocketAddr, timeout: Duration) -> Result<(), LaunchError> {
        self.wait_until(addr, timeout, |addr| {
            TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        })
    }

    /// Waits until `GET path` on `addr` answers 2xx.
    pub fn wait_ready_http(
        &mut self,
        addr: SocketAddr,
        host: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<(), LaunchError> {
        self.wait_until(addr, timeout, |addr| {
            probe_http(addr, host, path).is_some_and(|s| (200..300).contains(&s))
        })
    }

    /// Waits until the output so far satisfies `ready` (a log line).
    pub fn wait_output(
        &mut self,
        ready: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<(), LaunchError> {
        let path = self.stderr_path.to_path_buf();
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        self.wait_until(addr, timeout, |_| {
            std::fs::read_to_string(&path).is_ok_and(|text| ready(&text))
        })
    }

    fn wait_until(
        &mut self,
        addr: SocketAddr,
        timeout: Duration,
        ready: impl Fn(SocketAddr) -> bool,
    ) -> Result<(), LaunchError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LaunchError::Exited {
                    command: self.command.clone(),
                    status: status.to_string(),
                    stderr: self.stderr_tail(20),
                });
            }
            if ready(addr) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LaunchError::NotReady {
                    command: self.command.clone(),
                    addr,
                    timeout,
                    stderr: self.stderr_tail(20),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Is any process of the group still there (zombies reaped first)?
    pub fn group_alive(&self) -> bool {
        // SAFETY: reaping and probing our own process group.
        unsafe {
            while libc::waitpid(-self.pid(), std::ptr::null_mut(), libc::WNOHANG) > 0 {}
            libc::kill(-self.pid(), 0) == 0
        }
    }

    /// The stop signal to the group, SIGKILL after the grace period; then
    /// any process of the server's tree that left the group (a daemon that
    /// called setsid, like Passenger's agents) is killed too, and any that
    /// still holds its port and was started after it, or left the session
    /// and the tree (a daemon that double-forked — found even before it
    /// binds, when the command exited at once). Returns how many processes
    /// had to be killed that way.
    pub fn stop(&mut self) -> usize {
        let mut left: std::collections::BTreeSet<(i32, u64)> =
            descendants(self.pid()).into_iter().collect();
        left.extend(self.strays());
        self.stop_group();
        // A daemon on its way out of the tree as the group stopped (its
        // parent had not yet exited, it had not yet called setsid) lands
        // here a moment later.
        std::thread::sleep(Duration::from_millis(100));
        left.extend(self.strays());
        let mut killed = Vec::new();
        for (pid, start) in left {
            if alive(pid, start) {
                // SAFETY: a process of the tree we started (pid and start
                // time both match, so not a reused pid).
                unsafe { libc::kill(pid, libc::SIGKILL) };
                killed.push((pid, start));
            }
        }
        // SIGKILL is not instant, and these are not our children to wait
        // for: wait (a little) until they are gone, so their ports are
        // free when the next configuration starts on them.
        let deadline = Instant::now() + Duration::from_secs(2);
        while killed.iter().any(|&(pid, start)| alive(pid, start)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        killed.len()
    }

    fn stop_group(&mut self) {
        let group = -self.pid();
        // SAFETY: signalling our own process group (we made it).
        unsafe { libc::kill(group, self.stop_signal) };
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline {
            let _ = self.child.try_wait();
            if !self.group_alive() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.group_alive() {
            unsafe { libc::kill(group, libc::SIGKILL) };
            // SIGKILL is not instant: wait (a little) until the group is
            // gone, so what is counted a survivor afterwards really is one.
            let deadline = Instant::now() + Duration::from_secs(2);
            while self.group_alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.wait();
    }
}

/// The process `root` and all its descendants, as (pid, start time).
pub fn descendants(root: i32) -> Vec<(i32, u64)> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let stats: Vec<_> = all.flatten().filter_map(|p| p.stat().ok()).collect();
    let mut out = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for s in stats.iter().filter(|s| s.pid == pid && s.state != 'Z') {
            out.push((s.pid, s.starttime));
        }
        queue.extend(stats.iter().filter(|s| s.ppid == pid).map(|s| s.pid));
    }
    out
}

/// Is this very process (pid and start time) still running?
pub fn alive(pid: i32, starttime: u64) -> bool {
    procfs::process::Process::new(pid)
        .and_then(|p| p.stat())
        .is_ok_and(|s| s.starttime == starttime && s.state != 'Z')
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `GET path` on `addr`; the status, if an HTTP response came back.
pub fn probe_http(addr: SocketAddr, host: &str, path: &str) -> Option<u16> {
    use std::io::Write;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).ok()?;
    let text = std::str::from_utf8(&head[..n]).ok()?;
    text.strip_prefix("HTTP/1.")?.get(2..5)?.parse().ok()
}
