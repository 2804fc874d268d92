//! `headroom demo`: the first thing a new user runs. Starts the built-in
//! target (2 workers × 4 threads) on a free loopback port, loads it with a
//! mix of cheap, CPU-bound, IO-bound and large responses, and prints the
//! summary. (It becomes a small study once studies exist.)

use super::args::DemoArgs;
use super::run::{execute, install_interrupt};
use anyhow::{bail, Context};
use headroom::engine::StopSignal;
use headroom::http::{encode_request, Endpoint};
use headroom::plan::{ClosedLoad, Expect, Load, Plan, RequestSpec};
use headroom::report::results::DEFAULT_BUCKETS_MS;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
    let (_server, base) = start_target(&[
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--threads",
        "4",
    ])?;
    println!("headroom demo: built-in target at {base} (2 workers × 4 threads); 16 users for {} s on a mix of", a.duration.as_secs());
    println!("  /hello (cheap) 50 %, /fibonacci?n=5000 (CPU) 20 %, /sleep?ms=20 (IO wait) 20 %, /bytes?n=50000 (large) 10 %");
    let (endpoint, _) = Endpoint::from_url(&base)?;
    let mix: [(&str, &str, u32); 4] = [
        ("hello", "/hello", 5),
        ("fibonacci", "/fibonacci?n=5000", 2),
        ("sleep", "/sleep?ms=20", 2),
        ("bytes", "/bytes?n=50000", 1),
    ];
    let requests = mix
        .iter()
        .map(|&(name, target, weight)| RequestSpec {
            name: name.into(),
            method: "GET".into(),
            target: target.into(),
            weight,
            expect: Expect::default(),
            encoded: encode_request("GET", target, &endpoint.host_header, &[], &[], true),
        })
        .collect();
    let plan = Plan {
        endpoint,
        label: base.clone(),
        requests,
        load: Load::Closed(ClosedLoad {
            vus: 16,
            ramp_up: Duration::from_secs(1),
            duration: Some(a.duration),
            iterations: None,
            think_time: Duration::ZERO,
        }),
        keep_alive: true,
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(30),
        graceful_stop: Duration::from_secs(5),
        threads: headroom::sysinfo::available_cores(),
        max_requests: None,
    };
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    execute(&plan, &stop, &DEFAULT_BUCKETS_MS, a.out.as_deref(), false)
}
