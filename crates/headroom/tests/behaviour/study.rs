//! Studies with real servers, checked for what they do: the example works
//! as written; failures are results and the study goes on; no process of a
//! configuration survives it; resuming skips what was measured.

use crate::common::study::{
    assert_no_survivors, examples, read_json, stdout_of_success, study, two_config_study, write,
};

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
