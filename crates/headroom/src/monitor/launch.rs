//! A server started by headroom: a shell command in its own process group,
//! waited on until its port accepts connections, and stopped — the whole
//! group, SIGTERM then SIGKILL after a grace period — when dropped.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct ServerProcess {
    child: Child,
    pub command: String,
    grace: Duration,
    stderr_path: tempfile::TempPath,
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
    /// Runs `sh -c command` in a new process group; stdout is discarded and
    /// stderr kept (its tail explains a failed start).
    pub fn spawn(command: &str, grace: Duration) -> Result<ServerProcess, LaunchError> {
        let stderr_file = tempfile::NamedTempFile::new().map_err(|source| LaunchError::Spawn {
            command: command.into(),
            source,
        })?;
        let (file, stderr_path) = stderr_file.into_parts();
        // Orphans of the server (workers whose master died) become our
        // children, so we can reap them and see the group empty.
        // SAFETY: prctl with an integer flag.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
        let child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(file))
            .process_group(0)
            .spawn()
            .map_err(|source| LaunchError::Spawn {
                command: command.into(),
                source,
            })?;
        Ok(ServerProcess {
            child,
            command: command.into(),
            grace,
            stderr_path,
        })
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The last lines the server wrote to stderr.
    pub fn stderr_tail(&self, lines: usize) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.stderr_path) {
            let _ = f.read_to_string(&mut text);
        }
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Waits until `addr` accepts a TCP connection.
    pub fn wait_ready(&mut self, addr: SocketAddr, timeout: Duration) -> Result<(), LaunchError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LaunchError::Exited {
                    command: self.command.clone(),
                    status: status.to_string(),
                    stderr: self.stderr_tail(20),
                });
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
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

    /// SIGTERM to the group, SIGKILL after the grace period.
    pub fn stop(&mut self) {
        let group = -self.pid();
        // SAFETY: signalling our own process group (we made it).
        unsafe { libc::kill(group, libc::SIGTERM) };
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
        }
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}
