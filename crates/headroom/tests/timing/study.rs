//! Studies whose outcome rests on measured figures or moments: the
//! ranking follows the objective; Ctrl-C mid-study keeps what was measured;
//! a capacity objective; the demo.
//!
//! The tests take turns (`serial`): the demo compares throughputs, and
//! another study's load beside it would be noise in them.

use crate::common::study::{
    assert_no_survivors, examples, marked_alive, marked_study, path_with_headroom, read_json,
    shard_scenarios_left, stdout_of_success, study, two_config_study,
};
use crate::common::{ensure, headroom_bin, in_three_tries, light, serial};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn ranking_follows_the_objective() {
    // 8 users against servers that sleep 10 ms; the two configurations
    // differ eightfold, far beyond a light neighbour's noise.
    let _light = light();
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

/// `--processes 2`: every run of the study two shards in child processes,
/// merged — and the ranking is the one-process study's.
#[test]
fn a_study_across_two_processes_ranks_as_one_process_does() {
    let _light = light();
    let dir = tempfile::tempdir().unwrap();
    let file = two_config_study(dir.path(), "throughput", "2s");
    let out = dir.path().join("out");
    let o = study(&file, &out, &["--processes", "2"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report = read_json(&out.join("study.json"));
    assert_eq!(report["winner"]["params"]["threads"], 8, "{report}");
    for c in report["configs"].as_array().unwrap() {
        let r = &c["results"];
        assert_eq!(r["meta"]["shards"].as_array().unwrap().len(), 2, "{c}");
        assert!(r["requests"]["total"].as_u64().unwrap() > 0);
        // The study's monitor watched the configuration's server.
        assert!(r["server"]["samples"]
            .as_array()
            .is_some_and(|s| !s.is_empty()));
    }
    // No scenario file of the shards is left beside the study's.
    assert_eq!(shard_scenarios_left(dir.path()), 0);
}

#[test]
fn ctrl_c_stops_the_current_server_and_keeps_what_was_measured() {
    // The same light study; what it measures is when the stop comes.
    let _light = light();
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
    assert_eq!(
        marked_alive(&mark),
        0,
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
    // Capacity searches against sleeping servers: a light load.
    let _light = light();
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
            .env("CONFIRM", "1s")
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
