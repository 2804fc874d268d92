//! Events during load against real servers: Debian's Unicorn re-exec'd
//! with USR2 (no request lost, the monitor follows the new master), a
//! plain restart of the built-in target (the gap and the failures by
//! class), a failing command, a signal with no server to send it to, an
//! event at a stage boundary, and thresholds that abort the run.

use crate::common::{free_port, headroom_bin, run, scenario_dir, wait_for_port, Target};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn ruby_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/ruby")
}

/// A server in a process group of its own; the whole group is stopped on
/// drop (a re-exec'd master stays in its group), and so is whatever pid
/// the pidfile names then (a server restarted out of the group).
struct ServerGroup {
    child: Child,
    pidfile: PathBuf,
}

impl ServerGroup {
    fn start(command: &str, dir: &Path, pidfile: PathBuf) -> ServerGroup {
        let child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start the server");
        ServerGroup { child, pidfile }
    }

    fn wait_for_pidfile(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(&self.pidfile).map_or(true, |t| t.trim().is_empty()) {
            assert!(
                Instant::now() < deadline,
                "{} never written",
                self.pidfile.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServerGroup {
    fn drop(&mut self) {
        let group = self.child.id() as i32;
        let named = std::fs::read_to_string(&self.pidfile)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok());
        // SAFETY: signals to the group and the pidfile's process this test
        // started (a pid the test's own server wrote).
        unsafe {
            libc::kill(-group, libc::SIGTERM);
            if let Some(pid) = named {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && unsafe { libc::kill(-group, 0) } == 0 {
            let _ = self.child.try_wait();
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe {
            libc::kill(-group, libc::SIGKILL);
            if let Some(pid) = named {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        let _ = self.child.wait();
    }
}

fn event(r: &Value) -> &Value {
    let events = r["events"].as_array().expect("results have events[]");
    assert_eq!(events.len(), 1, "{events:?}");
    &events[0]
}

fn findings(r: &Value) -> Vec<String> {
    r["server"]["findings"]
        .as_array()
        .map(|f| {
            f.iter()
                .map(|f| f["kind"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The "done when": Unicorn under an open-model load, USR2 at 2 s.
#[test]
fn unicorn_usr2_reexec_under_load_loses_no_request_and_the_monitor_follows() {
    let port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let pidfile = tmp.path().join("unicorn.pid");
    let server = ServerGroup::start(
        &format!(
            "WORKERS=2 LISTEN=127.0.0.1:{port} PIDFILE={} exec unicorn -E production \
             -c unicorn-restart.conf.rb config.ru",
            pidfile.display()
        ),
        &ruby_dir(),
        pidfile.clone(),
    );
    wait_for_port(port);
    server.wait_for_pidfile();
    let first_pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    let html = tmp.path().join("r.html");
    let r = run(&[
        "--url",
        &format!("http://127.0.0.1:{port}/hello"),
        "--rate",
        "100",
        "-d",
        "7s",
        "--monitor-pidfile",
        pidfile.to_str().unwrap(),
        "--event",
        &format!("2s:kill -USR2 $(cat {})", pidfile.display()),
        "--html",
        html.to_str().unwrap(),
    ]);
    let res = r.results();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(res["requests"]["failed"], 0, "{}", res["errors"]);
    let e = event(res);
    assert_eq!(e["exit_code"], 0);
    assert_eq!(e["at_s"], 2.0);
    assert!(e["started_s"].as_f64().unwrap() >= 2.0);
    assert_eq!(e["after"]["failed_total"], 0);
    assert!(e["after"]["requests"].as_u64().unwrap() > 0);
    assert!(e["after"]["max_gap_ms"].as_f64().unwrap() > 0.0);
    assert!(e["before"]["requests"].as_u64().unwrap() > 0);
    assert!(!e["timeline_100ms"].as_array().unwrap().is_empty());
    let restarts = res["server"]["restarts"].as_array().expect("a restart");
    assert_eq!(restarts.len(), 1, "{restarts:?}");
    assert_eq!(restarts[0]["old_pid"].to_string(), first_pid);
    let new_pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    assert_ne!(new_pid, first_pid, "Unicorn re-exec'd a new master");
    assert_eq!(restarts[0]["new_pid"].to_string(), new_pid);
    assert!(!findings(res).contains(&"server_exited".to_string()));
    // Continuous: every sample saw the server, with its workers.
    for s in res["server"]["samples"].as_array().unwrap() {
        assert_eq!(s["server"]["alive"], true, "{s}");
        assert!(s["server"]["processes"].as_u64().unwrap() >= 2, "{s}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h2>Events</h2>"));
    // The event marked on the charts over time (their JSON, in the page).
    let marked = page
        .split("&quot;markers&quot;:[{&quot;label&quot;:&quot;")
        .skip(1)
        .any(|m| m.starts_with("kill -USR2"));
    assert!(marked, "no chart marks the USR2");
    assert!(
        r.stdout.contains("Events") && r.stdout.contains("server restarted"),
        "{}",
        r.stdout
    );
}

/// The built-in target stopped for at least 0.5 s and started again: the
/// gap covers the time it was down, the failures have their class, the
/// monitor finds the new process through the pidfile.
#[test]
fn a_plain_restart_shows_the_gap_and_the_failures_by_class() {
    let port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let pidfile = tmp.path().join("target.pid");
    let start = format!(
        "{} target --listen 127.0.0.1:{port} >/dev/null 2>&1 & echo $! > {}",
        headroom_bin(),
        pidfile.display()
    );
    let server = ServerGroup::start(&format!("{start}; wait"), tmp.path(), pidfile.clone());
    wait_for_port(port);
    server.wait_for_pidfile();
    let r = run(&[
        "--url",
        &format!("http://127.0.0.1:{port}/hello"),
        "--rate",
        "100",
        "-d",
        "5s",
        "--monitor-pidfile",
        pidfile.to_str().unwrap(),
        "--event",
        &format!(
            "1500ms:kill $(cat {}); sleep 0.5; {start}",
            pidfile.display()
        ),
    ]);
    let res = r.results();
    let e = event(res);
    assert_eq!(e["exit_code"], 0, "{e}");
    let after = &e["after"];
    assert!(after["failed_total"].as_u64().unwrap() > 0, "{after}");
    assert!(
        after["failed"]["connect_refused"].as_u64().unwrap() > 0,
        "{after}"
    );
    assert_eq!(
        after["failed_total"].as_u64(),
        Some(
            after["failed"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum()
        ),
    );
    assert!(after["max_gap_ms"].as_f64().unwrap() >= 500.0, "{after}");
    assert_eq!(e["before"]["failed_total"], 0);
    let restarts = res["server"]["restarts"].as_array().expect("a restart");
    assert_eq!(restarts.len(), 1);
    assert_eq!(restarts[0]["how"], "pidfile");
    let now = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(restarts[0]["new_pid"].to_string(), now);
    assert!(!findings(res).contains(&"server_exited".to_string()));
    // Every request is counted: the open model sent its 500.
    assert_eq!(r.total(), 500);
}

#[test]
fn a_failing_event_command_is_recorded_and_the_run_goes_on() {
    let target = Target::start(1, 1);
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "--rate",
        "50",
        "-d",
        "3s",
        "--event",
        "1s:echo oops >&2; exit 3",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let e = event(r.results());
    assert_eq!(e["exit_code"], 3);
    assert!(e["output"].as_str().unwrap().contains("oops"));
    assert_eq!(r.total(), 150);
    assert_eq!(target.requests(), 150);
}

#[test]
fn a_signal_with_no_server_to_send_it_to_is_refused_before_the_load() {
    let target = Target::start(1, 1);
    let dir = scenario_dir(&[(
        "s.toml",
        &format!(
            "base_url = \"{}\"\n[load]\nrate = 20\nduration = \"2s\"\n[[request]]\nname = \"hello\"\npath = \"/hello\"\n\
             [[event]]\nat = \"1s\"\nsignal = \"USR2\"\n",
            target.base
        ),
    )]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no server is monitored"), "{}", r.stderr);
    assert_eq!(target.requests(), 0);
    // A signal that is not one headroom sends is refused where it is written.
    std::fs::write(
        dir.path().join("bad.toml"),
        format!(
            "base_url = \"{}\"\n[[request]]\nname = \"hello\"\npath = \"/hello\"\n[[event]]\nat = \"1s\"\nsignal = \"USR3\"\n",
            target.base
        ),
    )
    .unwrap();
    let r = run(&[dir.path().join("bad.toml").to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("bad.toml:7:") && r.stderr.contains("USR3"),
        "{}",
        r.stderr
    );
}

#[test]
fn an_event_at_a_stage_boundary_runs_when_the_stage_starts() {
    let target = Target::start(1, 1);
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "--stages",
        "1s:20,1s:40",
        "--event",
        "stage:2:echo second stage",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let e = event(r.results());
    assert_eq!(e["at_s"], 1.0);
    assert!(e["started_s"].as_f64().unwrap() >= 1.0);
    assert_eq!(e["exit_code"], 0);
    assert!(e["output"].as_str().unwrap().contains("second stage"));
    assert_eq!(r.total(), 60);
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "--stages",
        "1s:20,1s:40",
        "--event",
        "stage:3:true",
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no such stage"), "{}", r.stderr);
}

/// A run that cannot meet its bound stops, writes what it measured, and
/// fails — from the command line and from a scenario's table form.
#[test]
fn an_aborting_threshold_stops_the_run_and_fails_with_its_results_written() {
    let target = Target::start(1, 1);
    let r = run(&[
        "--url",
        &target.url("/nope"),
        "--rate",
        "50",
        "-d",
        "60s",
        "--abort-on",
        "errors<5%",
        "--abort-window",
        "1s",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let res = r.results();
    assert_eq!(res["stop_reason"], "threshold");
    assert_eq!(res["abort"]["threshold"], "errors<5%");
    assert_eq!(res["abort"]["actual"], 100.0);
    assert!(res["duration_s"].as_f64().unwrap() < 30.0);
    // What reached the server: the requests cut off by the stop before
    // they left are `not_sent` (not delivered), never counted as sent.
    let requests = &res["requests"];
    assert!(r.total() > 0);
    // A head written just before the stop may reach the server's app a
    // moment after headroom has exited: its count settles first.
    let mut served = target.requests();
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let again = target.requests();
        if again == served {
            break;
        }
        served = again;
    }
    assert_eq!(
        requests["attempts"].as_u64(),
        Some(served),
        "{requests} {}",
        res["errors"]
    );
    assert_eq!(
        r.total() - requests["not_delivered"].as_u64().unwrap(),
        served,
        "{requests} {}",
        res["errors"]
    );
    assert!(r.stderr.contains("stopped early"), "{}", r.stderr);

    let dir = scenario_dir(&[(
        "s.toml",
        &format!(
            "base_url = \"{}\"\n[load]\nrate = 50\nduration = \"60s\"\n[[request]]\nname = \"nope\"\npath = \"/nope\"\n\
             [thresholds]\nerrors = {{ bound = \"<5%\", abort = true, delay = \"1s\", window = \"1s\" }}\n",
            target.base
        ),
    )]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let res = r.results();
    assert_eq!(res["stop_reason"], "threshold");
    assert!(
        res["abort"]["at_s"].as_f64().unwrap() >= 2.0,
        "delay 1s + window 1s"
    );
    // The bound is a threshold too, checked at the end.
    assert_eq!(res["thresholds"][0]["passed"], false);
}
