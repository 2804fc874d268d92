//! The servers' own gauges (`--probe`), read from real servers: nginx's
//! stub_status, haproxy's stats socket (its backend queue is where the
//! requests wait when its servers are at their maxconn), and probes that
//! fail — a warning each, never a failed run. Puma's control app is in
//! `ruby_servers.rs`.

use crate::common::{free_port, run, wait_for_port, Nginx, ProcessGuard, Target};
use std::process::{Command, Stdio};

/// Every sample's gauges of probe `kind`.
fn probed(results: &serde_json::Value, kind: &str) -> Vec<serde_json::Value> {
    results["server"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["probes"].get(kind).cloned())
        .collect()
}

#[test]
fn nginx_stub_status_is_sampled() {
    let nginx = Nginx::start_with(
        "",
        "location = /nginx_status { stub_status; access_log off; }",
    );
    let r = run(&[
        "--url",
        &nginx.url("/"),
        "--vus",
        "4",
        "--duration",
        "2s",
        "--monitor-pid",
        &nginx.guard.pid().to_string(),
        "--probe",
        &format!("nginx={}", nginx.url("/nginx_status")),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let gauges = probed(r.results(), "nginx");
    assert!(gauges.len() >= 2, "{}", r.results()["server"]);
    // The probe's own request is one active connection, writing.
    for g in &gauges {
        assert!(g["active"].as_f64().unwrap() >= 1.0, "{g}");
        assert!(g["writing"].as_f64().unwrap() >= 1.0, "{g}");
    }
    assert!(
        r.results()["server"]["errors"].is_null(),
        "{}",
        r.results()["server"]
    );
}

#[test]
fn haproxy_backend_queue_is_the_worker_pool_when_its_server_is_at_maxconn() {
    let target = Target::start(1, 16);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let socket = dir.path().join("stats.sock");
    let backend = target.base.trim_start_matches("http://").to_string();
    std::fs::write(
        dir.path().join("haproxy.cfg"),
        format!(
            "global
  stats socket {}
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout queue 30s
frontend web
  bind 127.0.0.1:{port}
  default_backend app
backend app
  server s1 {backend} maxconn 1
",
            socket.display()
        ),
    )
    .unwrap();
    let child = Command::new("haproxy")
        .args(["-db", "-f", "haproxy.cfg"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy (.ci/run installs it)");
    let haproxy = ProcessGuard { child };
    wait_for_port(port);
    let html = dir.path().join("report.html");
    // The live dashboard's events, read while the run goes and until it
    // ends (the page closes with the run): a fixed window could end before
    // the first queued sample on a loaded machine.
    let dashboard = free_port();
    let watching = std::thread::spawn(move || {
        wait_for_port(dashboard);
        crate::dashboard::events_for(dashboard, std::time::Duration::from_secs(60))
    });
    let r = run(&[
        &format!("--dashboard=127.0.0.1:{dashboard}"),
        "--url",
        &format!("http://127.0.0.1:{port}/sleep?ms=50"),
        "--vus",
        "8",
        "--duration",
        "3s",
        "--monitor-pid",
        &haproxy.pid().to_string(),
        "--probe",
        &format!("haproxy={}", socket.display()),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let gauges = probed(r.results(), "haproxy");
    let queue_peak = gauges
        .iter()
        .filter_map(|g| g["app.queue"].as_f64())
        .fold(0.0, f64::max);
    // 8 users, 1 at the server: up to 7 wait in haproxy's queue.
    assert!(
        (4.0..=7.0).contains(&queue_peak),
        "{queue_peak}: {gauges:?}"
    );
    let findings = &r.results()["server"]["findings"];
    let pool = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "worker_pool")
        .unwrap_or_else(|| panic!("no worker_pool finding: {findings}"));
    assert!(
        pool["message"].as_str().unwrap().contains("own queue"),
        "{pool}"
    );
    // The dashboard showed it as it filled.
    let shown = watching
        .join()
        .unwrap()
        .iter()
        .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
        .filter_map(|e| e["queued_inside"].as_f64())
        .fold(0.0, f64::max);
    assert!(shown >= 4.0, "the dashboard showed at most {shown} queued");
    // The report draws the queue over time beside the accept queues, and
    // every gauge of the probe.
    let html = std::fs::read_to_string(&html).unwrap();
    for drawn in [
        "queued inside the server (probes)",
        "own gauges: haproxy probe",
        "app.queue",
        "web.sessions",
    ] {
        assert!(html.contains(drawn), "{drawn} not in the report");
    }
    // ... and so does the Markdown report: the server's figures and the
    // finding.
    let md = Command::new(crate::common::headroom_bin())
        .arg("report")
        .arg(r.results_path())
        .arg("--markdown")
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    for shown in [
        "#### Server and machine",
        "| server accept queue (connections waiting) |",
        "- `worker_pool`: worker pool saturated",
    ] {
        assert!(md.contains(shown), "{shown} not in:\n{md}");
    }
}

#[test]
fn probes_that_fail_are_warnings_and_the_run_goes_on() {
    let target = Target::start(1, 4);
    let closed = free_port();
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "--vus",
        "2",
        "--duration",
        "2s",
        "--monitor-pid",
        &target.guard.pid().to_string(),
        // A page that is not stub_status, and a port nobody listens on.
        "--probe",
        &format!("nginx={}", target.url("/hello")),
        "--probe",
        &format!("puma=http://127.0.0.1:{closed}/stats?token=x"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.results()["requests"]["ok"].as_u64().unwrap() > 0);
    let errors: Vec<&str> = r.results()["server"]["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no monitor errors: {}", r.results()["server"]))
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("nginx probe") && errors[0].contains("not an nginx stub_status page"),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("puma probe") && errors[1].contains("failed in"),
        "{errors:?}"
    );
    assert!(r.stdout.contains("monitor: nginx probe"), "{}", r.stdout);
    // A probe that is not one is refused before any load.
    let bad = run(&[
        "--url",
        &target.url("/"),
        "--probe",
        "unicorn=x",
        "--requests",
        "1",
    ]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("probe `unicorn`: unknown"),
        "{}",
        bad.stderr
    );
}
