//! Studies with real servers: the example works as written; failures are
//! results and the study goes on; no process of a configuration survives
//! it; resuming skips what was measured; the ranking follows the objective;
//! Ctrl-C keeps what was measured.
//!
//! The tests take turns (`serial`): the demo compares throughputs, and
//! another study's load beside it would be noise in them.

use crate::common::{ensure, headroom_bin, in_three_tries, serial};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// PATH with the headroom binary first, as a user has it installed.
fn path_with_headroom() -> String {
    let bin = Path::new(headroom_bin())
        .parent()
        .unwrap()
        .display()
        .to_string();
    format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())
}

fn study(file: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(headroom_bin())
        .arg("study")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(extra)
        .env("PATH", path_with_headroom())
        .output()
        .unwrap()
}

/// The stdout of a run that must have exited 0 (both streams shown if not).
fn stdout_of_success(o: &Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Live processes in a process group (zombies excluded).
fn group_alive(pgid: i64) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .is_some_and(|s| {
                    let f: Vec<&str> = s
                        .rsplit(')')
                        .next()
                        .unwrap_or("")
                        .split_whitespace()
                        .collect();
                    f.first() != Some(&"Z")
                        && f.get(2).and_then(|g| g.parse::<i64>().ok()) == Some(pgid)
                })
        })
        .collect()
}

fn assert_no_survivors(report: &Value) {
    for c in report["configs"].as_array().unwrap() {
        for r in c["runs"].as_array().unwrap() {
            assert_eq!(r["survivors"].as_u64(), Some(0), "{}", c["label"]);
            let pgid = r["pgid"].as_i64().unwrap();
            if pgid > 0 {
                assert!(
                    group_alive(pgid).is_empty(),
                    "{}: group {pgid} still has {:?}",
                    c["label"],
                    group_alive(pgid)
                );
            }
        }
    }
}

#[test]
fn example_study_works_as_written() {
    let _serial = serial();
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
        assert!((4.9..6.0).contains(&d), "{d}");
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

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn failures_are_results_and_the_study_goes_on() {
    let _serial = serial();
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

fn two_config_study(dir: &Path, objective: &str, duration: &str) -> PathBuf {
    marked_study(dir, objective, duration, "none")
}

/// `mark` goes into the servers' environment, so a test can find them.
fn marked_study(dir: &Path, objective: &str, duration: &str, mark: &str) -> PathBuf {
    write(
        dir,
        "s.toml",
        &format!(
            r#"
[scenario.load]
vus = 8
duration = "{duration}"
[[scenario.request]]
name = "sleep"
path = "/sleep?ms=10"

[[server]]
name = "target"
command = "headroom target --listen 127.0.0.1:{{port}} --workers 1 --threads {{threads}}"
ready = "/health"
env = {{ HEADROOM_TEST_MARK = "{mark}" }}
[server.grid]
threads = [1, 8]

[measure]
objective = "{objective}"
pause = "0s"
"#
        ),
    )
}

#[test]
fn resuming_skips_finished_configurations_and_gives_the_same_table() {
    let _serial = serial();
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

#[test]
fn ranking_follows_the_objective() {
    let _serial = serial();
    for objective in ["throughput", "p90"] {
        let dir = tempfile::tempdir().unwrap();
        let file = two_config_study(dir.path(), objective, "2s");
        let out = dir.path().join("out");
        assert_eq!(study(&file, &out, &[]).status.code(), Some(0));
        let report = read_json(&out.join("study.json"));
        let ranked: Vec<&Value> = report["ranking"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                report["configs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| &c["label"] == l)
                    .unwrap()
            })
            .collect();
        assert_eq!(ranked.len(), 2);
        let figure = |c: &Value| match objective {
            "throughput" => -c["results"]["throughput_rps"].as_f64().unwrap(),
            _ => c["results"]["latency_ms"]["p90"].as_f64().unwrap(),
        };
        assert!(
            figure(ranked[0]) <= figure(ranked[1]),
            "{objective}: {} then {}",
            ranked[0]["label"],
            ranked[1]["label"]
        );
        // 8 threads serve 8 users at once; 1 thread queues them.
        assert_eq!(report["winner"]["params"]["threads"], 8, "{objective}");
        assert!(report["winner"]["reason"]
            .as_str()
            .unwrap()
            .starts_with(if objective == "p90" {
                "lowest p90"
            } else {
                "highest throughput"
            }));
    }
}

#[test]
fn ctrl_c_stops_the_current_server_and_keeps_what_was_measured() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mark = format!("ctrl-c-{}", std::process::id());
    let file = marked_study(dir.path(), "throughput", "4s", &mark);
    let out = dir.path().join("out");
    let mut child = Command::new(headroom_bin())
        .arg("study")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .env("PATH", path_with_headroom())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The first configuration finishes after ~4.5 s; interrupt the second.
    std::thread::sleep(Duration::from_millis(6500));
    let sent = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(sent.elapsed() < Duration::from_secs(5), "stopped promptly");
    assert_eq!(status.code(), Some(130));
    let report = read_json(&out.join("study.json"));
    assert_eq!(report["interrupted"], true);
    let measured: Vec<&Value> = report["configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "ok")
        .collect();
    assert_eq!(measured.len(), 1, "{}", report["configs"]);
    assert_no_survivors(&report);
    // No process of the interrupted configuration is left either.
    let needle = format!("HEADROOM_TEST_MARK={mark}");
    let stray = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
            let zombie = std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            !zombie
                && String::from_utf8_lossy(&environ)
                    .split('\0')
                    .any(|v| v == needle)
        })
        .count();
    assert_eq!(
        stray, 0,
        "a server of the interrupted configuration survived"
    );
    // Resuming measures only the rest.
    let again = study(&file, &out, &[]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(
        stdout.matches("already measured, skipped").count(),
        1,
        "{stdout}"
    );
    assert_eq!(stdout.matches("starting").count(), 1);
}

#[test]
fn capacity_objective_ranks_configurations_by_the_load_they_carry() {
    let _serial = serial();
    // 1 s steps on a machine that pauses: a search can miss (even find no
    // passing load), so the study gets three tries, each printed.
    in_three_tries("capacity study", || {
        let out = tempfile::tempdir().unwrap();
        let output = Command::new(headroom_bin())
            .arg("study")
            .arg(examples().join("capacity-study.toml"))
            .arg("--out")
            .arg(out.path())
            .env("PATH", path_with_headroom())
            .env("STEP", "1s")
            .env("WARMUP", "500ms")
            .env("PRECISION", "10%")
            .output()
            .unwrap();
        let stdout = stdout_of_success(&output);
        let report = read_json(&out.path().join("study.json"));
        assert_eq!(report["objective"], "capacity");
        assert!(stdout.contains("Capacity req/s"), "{stdout}");
        let csv = std::fs::read_to_string(out.path().join("study.csv")).unwrap();
        assert!(
            csv.lines().next().unwrap().contains("capacity_req_per_s"),
            "{csv}"
        );
        let capacity = |label: &str| -> Option<f64> {
            let c = report["configs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["label"] == label)
                .unwrap_or_else(|| panic!("no {label}: {report:#}"));
            let run = &c["runs"][0];
            assert_eq!(run["capacity"]["unit"], "req/s");
            assert!(!run["capacity"]["steps"].as_array().unwrap().is_empty());
            c["stats"]["capacity"]["median"].as_f64()
        };
        let (two, four) = (capacity("target threads=2"), capacity("target threads=4"));
        // k threads × 50 ms: about 40 and 80 req/s (±15 % with 1 s steps).
        ensure!(
            two.is_some_and(|c| (34.0..=46.0).contains(&c)),
            "threads=2: {two:?}\n{stdout}"
        );
        ensure!(
            four.is_some_and(|c| (68.0..=92.0).contains(&c)),
            "threads=4: {four:?}\n{stdout}"
        );
        ensure!(report["winner"]["label"] == "target threads=4", "{stdout}");
        ensure!(
            stdout.contains("highest capacity within the objective"),
            "{stdout}"
        );
        Ok(())
    });
}

/// The README's first command: a study of the built-in target with
/// workers {1, 2} × threads {1, 4}. Two single-threaded workers serve the
/// mostly-sleeping mix at twice the rate of one; a demo where they did not
/// (all 16 users on one worker) would teach the wrong lesson.
#[test]
fn the_demo_runs_and_two_workers_carry_more_than_one() {
    let _serial = serial();
    in_three_tries("demo", || {
        let out = tempfile::tempdir().unwrap();
        let o = Command::new(headroom_bin())
            .args(["demo", "--duration", "3s", "--out"])
            .arg(out.path())
            .output()
            .unwrap();
        let stdout = stdout_of_success(&o);
        assert!(stdout.contains("Winner: target"), "{stdout}");
        let report = read_json(&out.path().join("study.json"));
        assert_no_survivors(&report);
        let configs = report["configs"].as_array().unwrap();
        assert_eq!(configs.len(), 4);
        let throughput = |workers: i64, threads: i64| {
            let c = configs
                .iter()
                .find(|c| c["params"]["workers"] == workers && c["params"]["threads"] == threads)
                .unwrap();
            assert_eq!(c["status"], "ok", "{}", c["label"]);
            c["results"]["throughput_rps"].as_f64().unwrap()
        };
        let (one, two) = (throughput(1, 1), throughput(2, 1));
        ensure!(
            two > 1.4 * one,
            "workers=2 {two:.1} req/s vs workers=1 {one:.1} req/s\n{stdout}"
        );
        Ok(())
    });
}
