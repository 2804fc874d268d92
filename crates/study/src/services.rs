//! Companion services: what a server under test needs running beside it —
//! backends behind a router, a message bus and a route registrar. Each
//! `[[service]]` is started before the servers of a configuration (or once
//! for the whole study), on its own free `{port}`, waited for, and stopped
//! after them with the same process-group handling as servers. Servers and
//! later services find it as `{service.NAME.port}`.

use crate::file::{Ready, Service};
use crate::free_port;
use headroom_monitor::launch::{LaunchError, LaunchSpec, ServerProcess};
use std::net::SocketAddr;

/// Services that are running, in the order started; dropping stops them
/// in reverse order (a registrar before the bus it talks to).
#[derive(Default)]
pub struct Running {
    ports: Vec<(String, u16)>,
    processes: Vec<ServerProcess>,
}

impl Drop for Running {
    fn drop(&mut self) {
        while let Some(p) = self.processes.pop() {
            drop(p);
        }
    }
}

impl Running {
    /// The services' process groups (each runs in its own): not the
    /// server's, though headroom started them too.
    pub fn groups(&self) -> Vec<i32> {
        self.processes.iter().map(ServerProcess::pid).collect()
    }

    /// Each service's name and main process.
    pub fn named_pids(&self) -> Vec<(String, i32)> {
        let names = self.ports.iter().map(|(name, _)| name.clone());
        names
            .zip(self.processes.iter().map(ServerProcess::pid))
            .collect()
    }

    /// Fills `{service.NAME.port}` with these services' ports.
    pub fn fill(&self, text: &str) -> String {
        self.ports.iter().fold(text.to_string(), |t, (name, port)| {
            t.replace(&format!("{{service.{name}.port}}"), &port.to_string())
        })
    }

    /// Starts `services` in order (each may use the ports of those before
    /// it, and of `outer`, the study-wide ones) and waits for each to be
    /// ready. On failure, what was started is stopped and the reason is
    /// returned.
    pub fn start(services: &[&Service], outer: &Running) -> Result<Running, String> {
        let mut running = Running::default();
        for s in services {
            let port =
                free_port().map_err(|e| format!("service `{}`: no free port: {e}", s.name))?;
            let fill = |t: &str| running.fill(&outer.fill(&t.replace("{port}", &port.to_string())));
            let spec = LaunchSpec {
                command: fill(&s.command),
                dir: s.dir.clone(),
                env: s.env.iter().map(|(k, v)| (k.clone(), fill(v))).collect(),
                stop_signal: s.stop_signal,
                grace: s.stop_grace,
            };
            let mut process =
                ServerProcess::launch(&spec).map_err(|e| format!("service `{}`: {e}", s.name))?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let ready = match &s.ready {
                Ready::Tcp if s.ready_log.is_some() => Ok(()),
                Ready::Tcp => process.wait_ready(addr, s.ready_timeout),
                Ready::Http(path) => {
                    process.wait_ready_http(addr, &addr.to_string(), path, s.ready_timeout)
                }
            };
            let ready = ready.and_then(|()| match &s.ready_log {
                Some(re) => process.wait_output(|text| re.is_match(text), s.ready_timeout),
                None => Ok(()),
            });
            if let Err(e) = ready {
                let why = match e {
                    LaunchError::Exited { status, stderr, .. } => {
                        format!("exited ({status}) during start-up; its output ends:\n{stderr}")
                    }
                    LaunchError::NotReady {
                        timeout, stderr, ..
                    } => format!(
                        "not ready within {}; its output ends:\n{stderr}",
                        humantime::format_duration(timeout)
                    ),
                    other => other.to_string(),
                };
                return Err(format!("service `{}` {why}", s.name));
            }
            running.ports.push((s.name.clone(), port));
            running.processes.push(process);
        }
        Ok(running)
    }
}
