//! Reduced studies of Debian's Ruby servers (examples/ruby): Puma workers
//! × threads, Thin against Unicorn, Passenger pool sizes, and load
//! balancers (Unicorn behind nginx over TCP and a unix socket; a Thin
//! cluster behind haproxy and nginx). Every
//! configuration must produce results and leave no process behind. Needs
//! `apt-get install ruby ruby-rack puma unicorn thin passenger nginx-light
//! haproxy` (.ci/run installs them).

use crate::common::headroom_bin;
use std::path::{Path, PathBuf};
use std::process::Command;

fn require(tool: &str) {
    let found = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| Path::new(d).join(tool).exists());
    assert!(
        found,
        "`{tool}` is required: apt-get install -y ruby ruby-rack puma unicorn thin passenger"
    );
}

/// Runs `headroom study examples/ruby/FILE` with `env` (headroom itself on
/// PATH, for the studies that start it); asserts exit 0 and returns the
/// printed comparison and study.json.
pub(crate) fn study(file: &str, env: &[(&str, &str)]) -> (String, serde_json::Value) {
    let study = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/ruby")
        .join(file);
    let out = tempfile::tempdir().unwrap();
    // The servers' own files (Passenger's pid and log) go here, removed
    // with it.
    let scratch = tempfile::tempdir().unwrap();
    let bin = Path::new(headroom_bin())
        .parent()
        .unwrap()
        .display()
        .to_string();
    let o = Command::new(headroom_bin())
        .arg("study")
        .arg(&study)
        .arg("--out")
        .arg(out.path())
        .env(
            "PATH",
            format!("{bin}:{}", std::env::var("PATH").unwrap_or_default()),
        )
        .env("TMPDIR", scratch.path())
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{file}: {stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("study.json")).unwrap())
            .unwrap();
    (stdout, report)
}

fn reduced_study(file: &str, configs: usize) -> serde_json::Value {
    let (stdout, report) = study(
        file,
        &[("DURATION", "2s"), ("WARMUP", "1s"), ("USERS", "8")],
    );
    let all = report["configs"].as_array().unwrap();
    assert_eq!(all.len(), configs, "{file}");
    for c in all {
        assert_eq!(c["status"], "ok", "{file}: {} — {stdout}", c["label"]);
        assert!(
            c["results"]["requests"]["total"].as_u64().unwrap() > 20,
            "{}",
            c["label"]
        );
        assert_eq!(
            c["results"]["requests"]["failed"].as_u64(),
            Some(0),
            "{}: {}",
            c["label"],
            c["results"]["errors"]
        );
        let run = &c["runs"][0];
        assert_eq!(run["survivors"].as_u64(), Some(0), "{}", c["label"]);
        assert_eq!(
            run["stray_killed"].as_u64(),
            Some(0),
            "{}: a process ignored the stop",
            c["label"]
        );
    }
    assert!(report["winner"]["label"].is_string(), "{file}");
    report
}

#[test]
fn puma_workers_by_threads() {
    require("puma");
    reduced_study("puma.toml", 4);
}

#[test]
fn thin_against_unicorn_which_close_every_connection() {
    require("thin");
    require("unicorn");
    reduced_study("thin-vs-unicorn.toml", 3);
}

#[test]
fn passenger_builtin_engine_pool_sizes() {
    require("passenger");
    reduced_study("passenger.toml", 2);
}

#[test]
fn load_balancers_in_front_of_unicorn_and_thin() {
    require("unicorn");
    require("thin");
    require("haproxy");
    let report = reduced_study("balancers.toml", 4);
    // Each balancer's own gauges were read at every sample.
    for c in report["configs"].as_array().unwrap() {
        let label = c["label"].as_str().unwrap();
        let server = &c["results"]["server"];
        assert!(server["errors"].is_null(), "{label}: {}", server["errors"]);
        let kind = if label.contains("haproxy") {
            "haproxy"
        } else {
            "nginx"
        };
        let gauges: Vec<&serde_json::Value> = server["samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["probes"].get(kind))
            .collect();
        assert!(!gauges.is_empty(), "{label}: {}", server["samples"]);
        let key = if kind == "haproxy" {
            "thin.sessions"
        } else {
            "active"
        };
        assert!(
            gauges.iter().all(|g| g[key].is_number()),
            "{label}: {gauges:?}"
        );
    }
}

/// examples/ruby/restart.toml, reduced: Unicorn restarted by USR2 against
/// a stop/start, 2 s into 6 s runs. The USR2 re-exec loses nothing and
/// wins; the stop/start fails requests in its window; the monitor follows
/// both restarts, and nothing is left running.
#[test]
fn unicorn_restart_strategies_ranked_by_what_users_felt() {
    require("unicorn");
    let (stdout, report) = study(
        "restart.toml",
        &[("DURATION", "6s"), ("WARMUP", "1s"), ("RESTART_AT", "2s")],
    );
    assert!(
        stdout.contains("Event gap ms") && stdout.contains("Event failed"),
        "{stdout}"
    );
    assert_eq!(report["winner"]["label"], "usr2", "{stdout}");
    for c in report["configs"].as_array().unwrap() {
        let r = &c["results"];
        let after = &r["events"][0]["after"];
        assert_eq!(r["events"][0]["exit_code"], 0, "{}", c["label"]);
        assert_eq!(
            r["server"]["restarts"].as_array().map(Vec::len),
            Some(1),
            "{}",
            c["label"]
        );
        let run = &c["runs"][0];
        assert_eq!(run["survivors"].as_u64(), Some(0), "{}", c["label"]);
        assert_eq!(run["stray_killed"].as_u64(), Some(0), "{}", c["label"]);
        match c["label"].as_str().unwrap() {
            "usr2" => assert_eq!(after["failed_total"], 0, "{after}"),
            _ => assert!(after["failed_total"].as_u64().unwrap() > 0, "{after}"),
        }
    }
}

/// examples/ruby/queues.toml, reduced: 2 Unicorn workers under 20 users
/// of a 50 ms wait. The connections wait in the accept queue of Unicorn's
/// own socket — TCP, or a unix socket behind nginx — with the CPU idle,
/// and the monitor names the worker pool; with a backlog of 8 the queue
/// fills and that is named too.
#[test]
fn unicorn_past_its_workers_names_the_accept_queue() {
    require("unicorn");
    require("nginx");
    // Long enough for the 2 samples in a row a finding needs, with the
    // machine busy with other tests.
    let (stdout, report) = study(
        "queues.toml",
        &[("DURATION", "4s"), ("WARMUP", "1s"), ("USERS", "20")],
    );
    assert!(stdout.contains("Peak queue"), "{stdout}");
    for c in report["configs"].as_array().unwrap() {
        let label = c["label"].as_str().unwrap();
        assert_eq!(c["status"], "ok", "{label}: {}", c["runs"]);
        let server = &c["results"]["server"];
        let kinds: Vec<&str> = server["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap())
            .collect();
        assert!(
            kinds.contains(&"worker_pool"),
            "{label}: {}",
            server["findings"]
        );
        assert!(
            !kinds.contains(&"server_cpu"),
            "{label}: {}",
            server["findings"]
        );
        let peak = c["stats"]["peak_accept_queue"].as_f64().unwrap_or_else(|| {
            panic!(
                "{label}: no stats: {} {}",
                c["status"], c["runs"][0]["status"]
            )
        });
        let queues: Vec<&serde_json::Value> = server["samples"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| {
                s["server"]["accept_queues"]
                    .as_array()
                    .into_iter()
                    .flatten()
            })
            .collect();
        match label {
            // 20 users, 2 in the workers' hands: up to 18 wait.
            "unicorn" => {
                assert!((10.0..=18.0).contains(&peak), "{label}: {peak}");
                assert!(queues.iter().all(|q| q["limit"] == 1024), "{label}");
            }
            "unicorn-backlog-8" => {
                assert!(kinds.contains(&"accept_queue_full"), "{label}: {kinds:?}");
                assert!(queues.iter().all(|q| q["limit"] == 8), "{label}");
            }
            "nginx+unicorn" => {
                // Unicorn's unix socket holds the queue; nginx's own is empty.
                let unix = queues
                    .iter()
                    .filter(|q| q["address"].as_str().unwrap().ends_with("unicorn.sock"))
                    .map(|q| q["depth"].as_u64().unwrap())
                    .max();
                assert!(unix.is_some_and(|d| d >= 10), "{label}: {queues:?}");
            }
            other => panic!("unexpected configuration {other}"),
        }
    }
}

/// A 1-thread Puma under 16 users, its control app probed: the one thread
/// busy, its pool at 0 capacity, the connections waiting in the accept
/// queue — and the worker pool named, with the CPU idle.
#[test]
fn puma_with_its_control_app_is_probed() {
    require("puma");
    let app = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/ruby/config.ru");
    let (port, control) = (crate::common::free_port(), crate::common::free_port());
    let r = crate::common::run(&[
        "--url",
        &format!("http://127.0.0.1:{port}/sleep?ms=50"),
        "--vus",
        "16",
        // 3 samples or more, though a saturated machine (CI runs tests
        // side by side) may delay the first by seconds.
        "--duration",
        "5s",
        "--monitor-cmd",
        &format!(
            "exec puma -t 1:1 -e production -b tcp://127.0.0.1:{port} --control-url tcp://127.0.0.1:{control} --control-token secret {}",
            app.display()
        ),
        "--probe",
        &format!("puma=http://127.0.0.1:{control}/stats?token=secret"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let server = &r.results()["server"];
    let puma: Vec<&serde_json::Value> = server["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["probes"].get("puma"))
        .collect();
    assert!(puma.len() >= 3, "{server}");
    assert!(puma.iter().all(|g| g["max_threads"] == 1.0), "{puma:?}");
    assert!(
        puma.iter()
            .any(|g| g["busy_threads"] == 1.0 && g["pool_capacity"] == 0.0),
        "{puma:?}"
    );
    let pool = server["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "worker_pool")
        .unwrap_or_else(|| panic!("no worker_pool: {}", server["findings"]));
    assert!(
        pool["message"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.1:{port}")),
        "{pool}"
    );
    assert!(
        server["summary"]["server_accept_queue"]["peak"]
            .as_f64()
            .unwrap()
            >= 8.0
    );
}

/// `headroom run` of 12 users on a 50 ms wait against one Passenger
/// process (builtin engine) with a request queue of `queue`, probed with
/// `passenger-status`.
fn passenger_under_12_users(queue: u32) -> crate::common::Run {
    require("passenger");
    let app = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/ruby");
    let registry = tempfile::tempdir().unwrap();
    let port = crate::common::free_port();
    crate::common::run(&[
        "--url",
        &format!("http://127.0.0.1:{port}/sleep?ms=50"),
        "--vus",
        "12",
        // Long enough for the 2 samples in a row a finding needs, on a
        // saturated machine too.
        "--duration",
        "8s",
        "--monitor-cmd",
        &format!(
            "cd {} && exec passenger start --engine=builtin --environment production --address 127.0.0.1 --port {port} --max-pool-size 1 --min-instances 1 --max-request-queue-size {queue} --disable-security-update-check --disable-anonymous-telemetry --instance-registry-dir {} --log-file {}/passenger.log",
            app.display(),
            registry.path().display(),
            registry.path().display()
        ),
        "--monitor-ready-timeout",
        "90s",
        "--probe",
        &format!("passenger={}", registry.path().display()),
    ])
}

/// Passenger with one process under 12 users: its request queue holds what
/// the process is not serving, and the worker pool is named.
#[test]
fn passenger_request_queue_is_probed() {
    // A saturated machine can starve `passenger-status` (a Ruby program)
    // past its timeout or the generator between samples: three tries.
    crate::common::in_three_tries("Passenger's queue probed", || {
        let r = passenger_under_12_users(100);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let server = &r.results()["server"];
        let queue: Vec<f64> = server["samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["probes"]["passenger"]["request_queue"].as_f64())
            .collect();
        if !server["errors"].is_null() {
            return Err(format!("probe errors: {}", server["errors"]));
        }
        // 12 users, 1 served at a time: about 11 wait in Passenger's queue.
        // Passenger's snapshot can hold the request it is handing to its
        // process both in the wait list and as a session (seen: 12 waiting
        // and 1 session, and 12 waiting while the process spawned), so the
        // bound is the users plus that one; counting the pool's and the
        // group's lists twice would show ~22.
        let peak = queue.iter().copied().fold(0.0, f64::max);
        assert!(peak <= 13.0, "more waiting than users: {queue:?}");
        if peak < 6.0 {
            return Err(format!("queue samples {queue:?}: {server}"));
        }
        let kinds: Vec<&str> = server["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap())
            .collect();
        assert!(kinds.contains(&"worker_pool"), "{kinds:?}");
        Ok(())
    });
}

/// The same with a request queue of 4: Passenger answers 503 "Request
/// queue is full" to the rest, and the finding says so.
#[test]
fn passenger_queue_full_503s_are_named() {
    let r = passenger_under_12_users(4);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let unavailable = r.results()["status_codes"]["503"].as_u64().unwrap_or(0);
    assert!(unavailable > 0, "{}", r.results()["status_codes"]);
    let findings = &r.results()["server"]["findings"];
    let full = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "queue_full")
        .unwrap_or_else(|| panic!("no queue_full: {findings}"));
    assert!(
        full["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{unavailable} × 503")),
        "{full}"
    );
}

/// A capacity search of 2 Unicorn workers on a 50 ms wait (about 40 req/s
/// at most): what ran out at the failing load is the worker pool — the
/// connections queue in Unicorn's accept queue with the CPU idle.
#[test]
fn a_worker_bound_unicorn_capacity_is_limited_by_its_worker_pool() {
    require("unicorn");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/ruby");
    let port = crate::common::free_port();
    let out = tempfile::tempdir().unwrap();
    let cap = out.path().join("cap.json");
    let o = Command::new(headroom_bin())
        .args(["capacity", "--url"])
        .arg(format!("http://127.0.0.1:{port}/sleep?ms=50"))
        .arg("--monitor-cmd")
        .arg(format!(
            "cd {} && WORKERS=2 LISTEN=127.0.0.1:{port} exec unicorn -E production -c unicorn.conf.rb config.ru",
            dir.display()
        ))
        .args(["--slo", "p90<200ms", "--min", "30", "--max", "60"])
        // Steps long enough for the 2 samples in a row a finding needs.
        .args(["--step-duration", "4s", "--warmup", "1s", "--pause", "0s"])
        // What ran out is asked here, not the confirmation's verdict.
        .args(["--confirm-duration", "4s"])
        .arg("--out")
        .arg(&cap)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cap).unwrap()).unwrap();
    assert_eq!(report["limited_by"], "worker_pool", "{stdout}");
    let capacity = report["capacity"].as_f64().unwrap();
    assert!((20.0..=60.0).contains(&capacity), "{capacity}: {stdout}");
}
