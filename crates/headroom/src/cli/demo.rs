//! `headroom demo`: the first thing a new user runs. Starts the built-in
//! target (2 workers × 4 threads) on a free loopback port, loads it with a
//! mix of cheap, CPU-bound, IO-bound and large responses, and prints the
//! summary. (It becomes a small study once studies exist.)

use super::args::DemoArgs;
use super::run::{execute, install_interrupt, Watch};
use anyhow::{bail, Context};
use headroom::engine::StopSignal;
use headroom::report::results::DEFAULT_BUCKETS_MS;
use headroom::scenario::{self, Format};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The demo's scenario; `BASE` and `DURATION` are filled in.
const DEMO_SCENARIO: &str = r#"
base_url = "BASE"

[load]
model = "closed"
vus = 16
ramp_up = "1s"
duration = "DURATION"

[[request]]
name = "hello"
path = "/hello"
weight = 5

[[request]]
name = "fibonacci"
path = "/fibonacci?n=5000"
weight = 2

[[request]]
name = "sleep"
path = "/sleep?ms=20"
weight = 2

[[request]]
name = "bytes"
path = "/bytes?n=50000"
weight = 1
"#;

/// Stops the child server when dropped, whatever happened.
pub struct ServerGuard(pub Child);

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let pid = self.0.id() as libc::pid_t;
        // SAFETY: signalling the child we started, by its PID.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        for _ in 0..100 {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `headroom target` with `args` and returns it with its base URL,
/// read from the first line it prints.
pub fn start_target(args: &[&str]) -> anyhow::Result<(ServerGuard, String)> {
    let exe = std::env::current_exe().context("cannot find the headroom binary")?;
    let mut child = Command::new(exe)
        .arg("target")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start the built-in target")?;
    let stdout = child.stdout.take().expect("piped stdout");
    let guard = ServerGuard(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) else {
        bail!("the built-in target did not start: {}", line.trim());
    };
    Ok((guard, url.to_string()))
}

pub fn demo(a: DemoArgs) -> anyhow::Result<i32> {
    let (server, base) = start_target(&[
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--threads",
        "4",
    ])?;
    println!(
        "headroom demo: built-in target at {base} (2 workers × 4 threads); 16 users for {} on a mix of",
        humantime::format_duration(a.duration)
    );
    println!("  /hello (cheap) 50 %, /fibonacci?n=5000 (CPU) 20 %, /sleep?ms=20 (IO wait) 20 %, /bytes?n=50000 (large) 10 %");
    let text = DEMO_SCENARIO.replace("BASE", &base).replace(
        "DURATION",
        &humantime::format_duration(a.duration).to_string(),
    );
    let raw = scenario::parse(&text, Format::Toml).map_err(|p| anyhow::anyhow!(p.message))?;
    let plan = scenario::build_raw(&raw, "demo", &base)?;
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let pid = server.0.id() as i32;
    let watch = Watch::pid(
        pid,
        headroom::monitor::DEFAULT_INTERVAL,
        format!("built-in target, pid {pid}"),
    );
    execute(
        &plan,
        &stop,
        watch,
        &DEFAULT_BUCKETS_MS,
        a.out.as_deref(),
        false,
    )
}
