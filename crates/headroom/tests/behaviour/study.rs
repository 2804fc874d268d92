//! Studies with real servers, checked for what they do: the example works
//! as written; failures are results and the study goes on; no process of a
//! configuration survives it; resuming skips what was measured.

use crate::common::study::{
    assert_no_survivors, examples, marked_alive, path_with_headroom, read_json, stdout_of_success,
    study, two_config_study, write,
};
use std::path::Path;

#[test]
fn example_study_works_as_written() {
    let out = tempfile::tempdir().unwrap();
    let o = study(&examples().join("study.toml"), out.path(), &[]);
    let stdout = stdout_of_success(&o);
    let report = read_json(&out.path().join("study.json"));
    let configs = report["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 4);
    let mut params: Vec<(i64, i64)> = configs
        .iter()
        .map(|c| {
            (
                c["params"]["workers"].as_i64().unwrap(),
                c["params"]["threads"].as_i64().unwrap(),
            )
        })
        .collect();
    params.sort();
    assert_eq!(params, [(1, 1), (1, 4), (2, 1), (2, 4)]);
    for c in configs {
        assert_eq!(c["status"], "ok", "{}", c["label"]);
        let r = &c["results"];
        assert!(r["requests"]["total"].as_u64().unwrap() > 100);
        assert!(r["latency_ms"]["p90"].as_f64().is_some());
        assert!(r["server"]["summary"]["server_cpu_pct"]["peak"]
            .as_f64()
            .is_some());
        // measure.duration = 5s replaced mix.toml's 10s
        let d = r["duration_s"].as_f64().unwrap();
        assert!((4.9..9.0).contains(&d), "{d}");
    }
    let winner = &report["winner"]["params"];
    assert!(
        winner["workers"].is_i64() && winner["threads"].is_i64(),
        "{}",
        report["winner"]
    );
    assert!(stdout.contains("Winner: target"), "{stdout}");
    let csv = std::fs::read_to_string(out.path().join("study.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5);
    assert!(csv.starts_with("rank,configuration,status,samples,mean_ms"));
    assert_no_survivors(&report);
}

#[test]
fn failures_are_results_and_the_study_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.toml",
        r#"
[scenario.load]
vus = 2
duration = "3s"
[[scenario.request]]
name = "hello"
path = "/hello"

[[server]]
name = "good"
command = "headroom target --listen 127.0.0.1:{port} --workers 1 --threads 2"
ready = "/health"

[[server]]
name = "never-ready"
command = "sleep 30"
ready_timeout = "1s"

[[server]]
name = "broken"
command = "echo 'config error: no such file' >&2; exit 3"

[[server]]
name = "crashing"
command = "exec timeout 1.5 headroom target --listen 127.0.0.1:{port} --workers 0"

[[server]]
name = "erroring"
command = "headroom target --listen 127.0.0.1:{port} --workers {workers}"
[[server.config]]
workers = 1

[measure]
pause = "0s"
"#,
    );
    // "erroring" answers 500 to everything: point its scenario at /status.
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "[[server]]\nname = \"erroring\"",
        "[[server]]\nname = \"erroring\"\nbase_url = \"http://127.0.0.1:{port}/status?code=500&x=\"",
    );
    std::fs::write(&file, text).unwrap();
    let out = dir.path().join("out");
    let o = study(&file, &out, &[]);
    let stdout = stdout_of_success(&o);
    let report = read_json(&out.join("study.json"));
    let status = |name: &str| {
        let c = report["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["server"] == name)
            .unwrap();
        (
            c["status"].as_str().unwrap().to_string(),
            c["runs"][0]["stderr_tail"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    };
    assert_eq!(status("good").0, "ok");
    assert_eq!(status("never-ready").0, "not ready within 1s");
    let (broken, tail) = status("broken");
    assert!(broken.starts_with("not ready: exited"), "{broken}");
    assert!(tail.contains("config error: no such file"), "{tail}");
    assert_eq!(status("crashing").0, "died during the run");
    assert!(
        status("erroring")
            .0
            .starts_with("error budget exceeded: 100.00 %"),
        "{:?}",
        status("erroring")
    );
    assert_eq!(report["ranking"].as_array().unwrap().len(), 1);
    assert_eq!(report["winner"]["server"], "good");
    assert!(
        stdout.contains("config error: no such file"),
        "the table shows the stderr tail"
    );
    assert_no_survivors(&report);
}

#[test]
fn resuming_skips_finished_configurations_and_gives_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let file = two_config_study(dir.path(), "throughput", "1s");
    let out = dir.path().join("out");
    let first = study(&file, &out, &[]);
    assert_eq!(first.status.code(), Some(0));
    let before = read_json(&out.join("study.json"));
    let again = study(&file, &out, &[]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(
        stdout.matches("already measured, skipped").count(),
        2,
        "{stdout}"
    );
    assert!(!stdout.contains("starting"));
    let after = read_json(&out.join("study.json"));
    assert_eq!(before["configs"], after["configs"]);
    assert_eq!(before["winner"], after["winner"]);
    let table = |s: &str| {
        s.lines()
            .skip_while(|l| !l.starts_with("Study:"))
            .take(4)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        table(&String::from_utf8_lossy(&first.stdout)),
        table(&stdout)
    );
    // --fresh measures again.
    let fresh = study(&file, &out, &["--fresh"]);
    assert_eq!(
        String::from_utf8_lossy(&fresh.stdout)
            .matches("starting")
            .count(),
        2
    );
}

/// Is process `pid` (from a pid file) still alive (zombies aside)?
fn alive(pid_file: &Path) -> bool {
    let pid = std::fs::read_to_string(pid_file).unwrap();
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn services_are_ready_before_the_server_starts_and_stopped_after() {
    let dir = tempfile::tempdir().unwrap();
    // Service `a` is ready when its log says so (after a pause, and after
    // it wrote a marker); `b` when its /health answers. The server starts
    // only if both are: it checks the marker and b's port itself.
    std::fs::write(
        dir.path().join("study.toml"),
        r#"
scenario = { base_url = "http://127.0.0.1:1", request = [{ name = "hello", path = "/hello" }], load = { vus = 2, duration = "2s" } }

[[service]]
name = "a"
command = "echo $$ > a.pid; sleep 0.5; touch a-{port}.ready; echo 'a is listening'; exec sleep 60"
ready_log = "^a is listening$"

[[service]]
name = "b"
command = "echo $$ > b.pid; exec headroom target --listen 127.0.0.1:{port}"
ready = "/health"

[[server]]
name = "needs-both"
command = "test -f a-{service.a.port}.ready && python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:{service.b.port}/health\")' && exec headroom target --listen 127.0.0.1:{port}"
ready = "/health"
ready_timeout = "10s"
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = study(&dir.path().join("study.toml"), &out, &[]);
    stdout_of_success(&o);
    let report = read_json(&out.join("study.json"));
    let config = &report["configs"][0];
    assert_eq!(config["runs"][0]["status"], "ok", "{config}");
    assert!(config["results"]["requests"]["ok"].as_u64().unwrap() > 0);
    assert_no_survivors(&report);
    // The services are headroom's children too, but not the server's:
    // their CPU and memory are not counted as its own.
    let a: i64 = std::fs::read_to_string(dir.path().join("a.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for sample in config["results"]["server"]["samples"].as_array().unwrap() {
        let pids: Vec<i64> = sample["server"]["per_process"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_i64().unwrap())
            .collect();
        assert!(
            !pids.contains(&a),
            "service a ({a}) counted as the server's: {pids:?}"
        );
        // ... they are sampled apart, each as its own tree.
        let service_a: Vec<i64> = sample["services"]["a"]["per_process"]
            .as_array()
            .unwrap_or_else(|| panic!("no service a in {sample}"))
            .iter()
            .map(|p| p["pid"].as_i64().unwrap())
            .collect();
        assert_eq!(service_a, [a], "{sample}");
        assert!(sample["services"]["b"]["rss_bytes"].as_u64().unwrap() > 1 << 20);
    }
    let services = &config["results"]["server"]["summary"]["services"];
    assert!(
        services["b"]["rss_bytes"]["peak"].as_f64().unwrap() > 1e6,
        "{services}"
    );
    assert!(
        services["a"]["cpu_pct"]["peak"].as_f64().is_some(),
        "{services}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    for column in ["a CPU %", "a MiB", "b CPU %", "b MiB"] {
        assert!(stdout.contains(column), "no column {column:?} in\n{stdout}");
    }
    for service in ["a.pid", "b.pid"] {
        assert!(!alive(&dir.path().join(service)), "{service} still running");
    }
}

#[test]
fn a_service_that_never_gets_ready_fails_its_configuration_with_its_output() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("study.toml"),
        r#"
scenario = { base_url = "http://127.0.0.1:1", request = [{ name = "hello", path = "/hello" }], load = { vus = 1, duration = "1s" } }

[[service]]
name = "bus"
command = "echo $$ > bus.pid; echo 'bus: cannot bind' >&2; exec sleep 60"
ready_timeout = "1s"

[[server]]
name = "router"
command = "exec headroom target --listen 127.0.0.1:{port} # {service.bus.port}"
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = study(&dir.path().join("study.toml"), &out, &[]);
    let report = read_json(&out.join("study.json"));
    let status = report["configs"][0]["runs"][0]["status"].as_str().unwrap();
    assert!(
        status.contains("service `bus`") && status.contains("bus: cannot bind"),
        "{status}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        !alive(&dir.path().join("bus.pid")),
        "the service was left running"
    );
}

#[test]
fn an_unknown_service_in_a_placeholder_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("study.toml"),
        "scenario = { base_url = \"http://127.0.0.1:1\", request = [{ name = \"h\", path = \"/\" }] }\n\n[[server]]\nname = \"s\"\ncommand = \"x {service.nats.port}\"\n",
    )
    .unwrap();
    let o = study(&dir.path().join("study.toml"), &dir.path().join("out"), &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(":5:") && err.contains("no service `nats`"),
        "{err}"
    );
}

#[test]
fn router_example_ranks_nginx_and_haproxy_by_the_users_they_held() {
    let dir = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(crate::common::headroom_bin())
        .arg("study")
        .arg(examples().join("router/study.toml"))
        .arg("--out")
        .arg(dir.path())
        .env("PATH", path_with_headroom())
        .env("RAMP", "500ms")
        .env("MIN_USERS", "5")
        .env("MAX_USERS", "10")
        .output()
        .unwrap();
    stdout_of_success(&o);
    let report = read_json(&dir.path().join("study.json"));
    let configs = report["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 2);
    for c in configs {
        let run = &c["runs"][0];
        assert_eq!(run["status"], "ok", "{}: {run}", c["label"]);
        // Each step: users × 10 requests, every one a 200 from its app.
        let cap = &run["capacity"];
        assert_eq!(cap["unit"], "users");
        for step in cap["steps"].as_array().unwrap() {
            let users = step["offered"].as_f64().unwrap();
            let r = &step["results"]["requests"];
            assert_eq!(r["total"].as_f64(), Some(users * 10.0), "{step}");
            // The scenario's ramp-up is kept at every step.
            let config = &step["results"]["config"];
            assert_eq!(config["ramp_up_s"].as_f64(), Some(0.5), "{config}");
            assert_eq!(config["iterations"].as_u64(), Some(10), "{config}");
        }
        let held = c["stats"]["capacity"]["median"].as_f64().unwrap();
        assert!(held >= 5.0, "{}: {held} users", c["label"]);
    }
    // Ranked by the users each held: a winner, or a tie said as one.
    assert!(
        report["winner"]["label"].is_string(),
        "{}",
        report["winner"]
    );
    assert_no_survivors(&report);
}

/// Whether any process still listens on `port` (IPv4 loopback).
fn listening(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

#[test]
fn a_server_whose_port_is_taken_is_never_measured_and_nothing_measured_exits_2() {
    // The impostor: the sample server on the port the configuration's
    // server was to use (whose own start then fails: address in use).
    let impostor = crate::common::Target::start_with(&["--workers", "0"]);
    let port = impostor
        .base
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.toml",
        &format!(
            r#"
[scenario.load]
vus = 2
duration = "2s"
[[scenario.request]]
name = "hello"
path = "/hello"

[[server]]
name = "late"
base_url = "http://127.0.0.1:{port}"
command = "headroom target --listen 127.0.0.1:{port} --workers 0"

[measure]
pause = "0s"
"#
        ),
    );
    let out = dir.path().join("out");
    let before = impostor.requests();
    let o = study(&file, &out, &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "nothing measured: {stderr}");
    let report = read_json(&out.join("study.json"));
    let status = report["configs"][0]["status"].as_str().unwrap();
    assert!(
        status.starts_with(&format!(
            "error: port {port} in use by pid {}",
            impostor.guard.pid()
        )),
        "{status}"
    );
    assert!(stderr.contains(status), "the reason on stderr: {stderr}");
    assert!(report["ranking"].as_array().unwrap().is_empty());
    assert_eq!(impostor.requests(), before, "the impostor got no load");
}

#[test]
fn a_daemon_that_double_forks_out_of_the_tree_is_found_by_its_port_and_stopped() {
    let dir = tempfile::tempdir().unwrap();
    // `setsid` + `&` inside a subshell: the daemon leaves the process
    // group, the session and the tree; the command's shell waits on
    // nothing it started.
    let file = write(
        dir.path(),
        "s.toml",
        r#"
[scenario.load]
vus = 1
duration = "1s"
[[scenario.request]]
name = "hello"
path = "/hello"

[[server]]
name = "daemon"
command = "(setsid headroom target --listen 127.0.0.1:{port} --workers 0 >/dev/null 2>&1 &); sleep 600"
ready = "/health"

[measure]
pause = "0s"
"#,
    );
    let out = dir.path().join("out");
    let o = study(&file, &out, &[]);
    stdout_of_success(&o);
    let report = read_json(&out.join("study.json"));
    let config = &report["configs"][0];
    assert_eq!(config["status"], "ok", "{config}");
    let url = config["results"]["config"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    let port: u16 = url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    assert!(!listening(port), "the daemon was stopped: {url}");
    assert!(
        config["runs"][0]["stray_killed"].as_u64().unwrap() >= 1,
        "{config}"
    );
    assert_eq!(config["runs"][0]["survivors"], 0, "{config}");
}

/// A command that double-forks a daemon and exits at once: the
/// configuration is not ready (the command exited), and the daemon —
/// out of the group, the session and the tree, perhaps not yet on the
/// port — is found among the orphans this process adopts, stopped and
/// counted (`stray_killed`), not left running.
#[test]
fn a_daemon_whose_command_exits_at_once_is_stopped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mark = format!("exits-at-once-{}", std::process::id());
    // The classic daemon: fork, setsid, fork; the command exits once the
    // daemon is out of its group, session and tree, and the daemon binds
    // the port only later (a bounded 30 s).
    write(
        dir.path(),
        "daemon.py",
        r#"import os, socket, sys, time
port = int(sys.argv[1])
r, w = os.pipe()
if os.fork() > 0:
    os.close(w)
    os.read(r, 1)
    os._exit(0)
os.setsid()
if os.fork() > 0:
    os._exit(0)
os.write(w, b"x")
time.sleep(0.5)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
time.sleep(30)
"#,
    );
    let file = write(
        dir.path(),
        "s.toml",
        &format!(
            r#"
[scenario.load]
vus = 1
duration = "1s"
[[scenario.request]]
name = "hello"
path = "/hello"

[[server]]
name = "daemon"
command = "exec python3 daemon.py {{port}}"
dir = "{dir}"
ready = "/health"
env = {{ HEADROOM_TEST_MARK = "{mark}" }}

[measure]
pause = "0s"
"#,
            dir = dir.path().display()
        ),
    );
    let out = dir.path().join("out");
    let o = study(&file, &out, &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let report = read_json(&out.join("study.json"));
    let config = &report["configs"][0];
    let status = config["status"].as_str().unwrap();
    assert!(
        status.starts_with("not ready: exited"),
        "{status}\n{stderr}"
    );
    let run = &config["runs"][0];
    assert_eq!(run["survivors"], 0, "{config}");
    assert!(run["stray_killed"].as_u64().unwrap() >= 1, "{config}");
    assert_eq!(marked_alive(&mark), 0, "the daemon was left running");
}

#[test]
fn a_server_of_several_processes_gets_a_free_port_for_each() {
    let dir = tempfile::tempdir().unwrap();
    // A second process on {port.2} (as a balancer's backend would be),
    // the loaded one on {port}; both named in the per-process samples.
    let file = write(
        dir.path(),
        "s.toml",
        r#"
[scenario.load]
vus = 1
duration = "2s"
[[scenario.request]]
name = "hello"
path = "/hello"

[[server]]
name = "pair"
command = "headroom target --listen 127.0.0.1:{port.2} --workers 0 & exec headroom target --listen 127.0.0.1:{port} --workers 0"
ready = "/health"
env = { BACKEND = "{port.2}" }

[measure]
pause = "0s"
"#,
    );
    let out = dir.path().join("out");
    let o = study(&file, &out, &[]);
    stdout_of_success(&o);
    let report = read_json(&out.join("study.json"));
    let config = &report["configs"][0];
    assert_eq!(config["status"], "ok", "{config}");
    let samples = config["results"]["server"]["samples"].as_array().unwrap();
    let last = samples.last().unwrap();
    // The shell exec'd the front one; the backend is its child.
    assert_eq!(
        last["server"]["processes"].as_u64(),
        Some(2),
        "two targets: {last}"
    );
    assert_no_survivors(&report);
}

#[test]
fn a_server_that_ignores_its_stop_signal_is_killed_and_leaves_no_survivor() {
    let dir = tempfile::tempdir().unwrap();
    // SIG_IGN survives exec: python's server never hears SIGTERM.
    let file = write(
        dir.path(),
        "s.toml",
        r#"
[scenario.load]
vus = 1
duration = "1s"
[[scenario.request]]
name = "home"
path = "/"

[[server]]
name = "deaf"
command = "trap '' TERM; exec /usr/bin/python3 -m http.server {port} --bind 127.0.0.1"
stop_grace = "1s"

[measure]
pause = "0s"
"#,
    );
    let out = dir.path().join("out");
    let o = study(&file, &out, &[]);
    stdout_of_success(&o);
    let report = read_json(&out.join("study.json"));
    let run = &report["configs"][0]["runs"][0];
    assert_eq!(report["configs"][0]["status"], "ok", "{report}");
    assert_eq!(run["survivors"], 0, "{run}");
    assert_no_survivors(&report);
}
