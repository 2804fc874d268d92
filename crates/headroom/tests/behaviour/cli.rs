//! The command line: bad input gets one clear line and exit code 2, no
//! panic; Ctrl-C and SIGTERM stop a run promptly and still write results.

use crate::common::{headroom_bin, Target};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn headroom(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(headroom_bin()).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn bad_input_is_one_clear_error_and_exit_2() {
    let url = "http://127.0.0.1:9/";
    // (args, what the message must mention)
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--url", url, "--bogus"], "--bogus"),
        (
            &["run", "--url", url, "--duration", "ten"],
            "not a duration",
        ),
        (&["run", "--url", url, "--rate=-5"], "not a rate"),
        (&["run", "--url", url, "--rate", "fast"], "not a rate"),
        (&["run", "--url", "not a url"], "not a valid URL"),
        (&["run", "--url", url, "--otlp", "127.0.0.1:4318"], "--otlp"),
        (&["run", "--url", "ftp://127.0.0.1/"], "unsupported scheme"),
        (&["run", "--url", url, "--stages", "10s"], "DURATION:RATE"),
        (
            &["run", "--url", url, "--rate", "5", "--vus", "3"],
            "--vus is for the closed model",
        ),
        (&["run", "--url", url, "--vus", "0"], "at least 1"),
        (&["run", "--url", url, "-H", "nocolon"], "not a header"),
        (
            &["run", "--url", url, "--expect-status", "42"],
            "not an HTTP status",
        ),
        (&["run"], "SCENARIO"),
        (&["target", "--listen", "8.8.8.8:80"], "non-loopback"),
        (
            &["target", "--listen", "nonsense"],
            "cannot parse listen address",
        ),
        (&["frobnicate"], "frobnicate"),
        // Absurd values are refused before any load, never a panic (exit
        // 101) or a silently short run.
        (
            &["run", "--url", url, "--duration", "18446744073709551615s"],
            "longer than headroom accepts",
        ),
        (
            &["run", "--url", url, "--stages", "18446744073709551615s:10"],
            "longer than headroom accepts",
        ),
        (
            &[
                "run",
                "--url",
                url,
                "--graceful-stop",
                "18446744073709551615s",
            ],
            "longer than headroom accepts",
        ),
        (
            &["run", "--url", url, "--ramp-up", "18446744073709551615s"],
            "longer than headroom accepts",
        ),
        (
            &["run", "--url", url, "--think-time", "18446744073709551615s"],
            "longer than headroom accepts",
        ),
        (
            &["run", "--url", url, "--duration", "0s"],
            "--duration must be greater than zero",
        ),
        (
            &["run", "--url", url, "--timeout", "0s"],
            "--timeout must be greater than zero",
        ),
        (&["run", "--url", url, "--rate", "1e12"], "at most"),
    ];
    for (args, needle) in cases {
        let (code, _, stderr) = headroom(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn help_and_version_exit_0() {
    assert_eq!(headroom(&["--help"]).0, 0);
    let (code, out, _) = headroom(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.contains(env!("CARGO_PKG_VERSION")));
}

/// `headroom completions SHELL`: a script the shell itself accepts —
/// bash completes `headroom` with it, and its subcommands are in it.
#[test]
fn completions_load_in_bash() {
    let (code, script, stderr) = headroom(&["completions", "bash"]);
    assert_eq!(code, 0, "{stderr}");
    for sub in ["run", "capacity", "study", "report"] {
        assert!(script.contains(sub), "no `{sub}` in the bash script");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("headroom.bash");
    std::fs::write(&file, &script).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p headroom", file.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("-F _headroom headroom"));
    let (code, zsh, _) = headroom(&["completions", "zsh"]);
    assert_eq!((code, zsh.starts_with("#compdef headroom")), (0, true));
    let (code, _, stderr) = headroom(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("possible values"), "{stderr}");
}

fn interrupt_mid_run(signal: i32) {
    let target = Target::start(1, 4);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let url = target.url("/sleep?ms=5");
    let child = Command::new(headroom_bin())
        .args([
            "run",
            "--url",
            &url,
            "--vus",
            "4",
            "--duration",
            "60s",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let sent = Instant::now();
    unsafe { libc::kill(child.id() as i32, signal) };
    let output = child.wait_with_output().unwrap();
    // Stopped, not run to its planned 60 s (the bound is for a paused VM).
    assert!(sent.elapsed() < Duration::from_secs(30), "stopped promptly");
    // 128 + the signal, as shells report it: 130 for SIGINT, 143 for SIGTERM.
    assert_eq!(output.status.code(), Some(128 + signal));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("stopping — results so far are kept; press Ctrl-C again to abort"),
        "{stderr}"
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(results["interrupted"], true);
    let name = if signal == libc::SIGTERM {
        "SIGTERM"
    } else {
        "SIGINT"
    };
    assert!(
        results["stop_reason"].as_str().unwrap().contains(name),
        "{}",
        results["stop_reason"]
    );
    let total = results["requests"]["total"].as_u64().unwrap();
    assert!(total > 0);
    assert_eq!(total, target.requests(), "exact even when interrupted");
    assert!(results["duration_s"].as_f64().unwrap() < 30.0);
}

#[test]
fn sigint_mid_run_writes_valid_results() {
    interrupt_mid_run(libc::SIGINT);
}

#[test]
fn sigterm_mid_run_writes_valid_results() {
    interrupt_mid_run(libc::SIGTERM);
}

/// The habits users bring from wrk, oha and k6: the URL first, a heartbeat
/// in CI logs, `-q` for nothing but errors, the summary before the list of
/// files, and a `capacity --help` without the flags a search sets itself.
#[test]
fn the_cli_habits_of_wrk_oha_and_k6() {
    let target = crate::common::Target::start(1, 2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let html = dir.path().join("r.html");
    // Positional URL, with one-liner flags.
    let (code, stdout, stderr) = headroom(&[
        "run",
        &target.url("/hello"),
        "-n",
        "30",
        "-c",
        "2",
        "-m",
        "GET",
        "--out",
        out.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(results["requests"]["total"], 30);
    // The summary first, the files after it; no server block without a server.
    let summary = stdout
        .find("Response time distribution")
        .expect("a summary");
    let files = stdout.find("results written to").expect("the files");
    let page = stdout.find("HTML report written to").expect("the files");
    assert!(summary < files && summary < page, "{stdout}");
    assert!(!stdout.contains("Server and machine"), "{stdout}");
    // -q: nothing but errors.
    let (code, stdout, stderr) = headroom(&[
        "run",
        &target.url("/hello"),
        "-n",
        "10",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!((stdout.as_str(), stderr.as_str()), ("", ""));
    // Not a terminal: a plain progress line every 10 s (here, one at 10 s).
    let (code, _, stderr) = headroom(&[
        "run",
        &target.url("/hello"),
        "--rate",
        "20",
        "-d",
        "11s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let beats: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("headroom: 1"))
        .collect();
    assert_eq!(beats.len(), 1, "{stderr}");
    assert!(
        beats[0].contains("/11 s") && beats[0].contains("req/s"),
        "{stderr}"
    );
    let (_, _, stderr) = headroom(&[
        "run",
        &target.url("/hello"),
        "--rate",
        "20",
        "-d",
        "2s",
        "--progress",
        "always",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        !stderr.contains("headroom: 1"),
        "no line before 10 s: {stderr}"
    );
    let (_, _, stderr) = headroom(&[
        "run",
        &target.url("/hello"),
        "--rate",
        "20",
        "-d",
        "11s",
        "--progress",
        "never",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!stderr.contains("headroom: 1"), "{stderr}");
    // A scenario file does not take one-liner flags.
    let mix = format!("{}/../../examples/mix.toml", env!("CARGO_MANIFEST_DIR"));
    let (code, _, stderr) = headroom(&["run", &mix, "-m", "POST"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--method is for a URL"), "{stderr}");
    // capacity --help lists only what applies to a search.
    let (code, help, _) = headroom(&["capacity", "--help"]);
    assert_eq!(code, 0);
    for gone in [
        "--rate",
        "--stages",
        "--duration",
        "--vus",
        "--threshold",
        "--event",
        "--junit",
    ] {
        assert!(
            !help.contains(&format!("{gone} ")),
            "{gone} in capacity --help"
        );
    }
    for kept in [
        "--slo",
        "--axis",
        "--step-duration",
        "--monitor-cmd",
        "--metrics-listen",
    ] {
        assert!(help.contains(kept), "{kept} missing from capacity --help");
    }
    // ... and still refuses them when given.
    let (code, _, stderr) = headroom(&["capacity", &target.url("/hello"), "--rate", "5"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--rate does not apply"), "{stderr}");
}

/// Runs of different loads are shown side by side but not judged: a p99
/// jump from 10 req/s to 400 req/s is not a regression.
#[test]
fn compare_says_when_loads_differ_instead_of_calling_it_a_regression() {
    let target = Target::start(1, 2);
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (name, rate) in [
        ("slow.json", "10"),
        ("fast.json", "400"),
        ("again.json", "10"),
    ] {
        let out = dir.path().join(name);
        let (code, _, stderr) = headroom(&[
            "run",
            &target.url("/sleep?ms=2"),
            "--rate",
            rate,
            "-d",
            "2s",
            "-q",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stderr}");
        files.push(out.to_str().unwrap().to_string());
    }
    let (code, stdout, _) = headroom(&["compare", &files[0], &files[1], "--fail-on-regression"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("DIFFERENT") && stdout.contains("not comparable"),
        "{stdout}"
    );
    assert!(
        stdout.contains("note: fast ran a different load (open, 400.0/s"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("WORSE") && !stdout.contains("better"),
        "{stdout}"
    );
    // The same load is compared as before.
    let (_, stdout, _) = headroom(&["compare", &files[0], &files[2]]);
    assert!(
        stdout.contains("same") && !stdout.contains("not comparable"),
        "{stdout}"
    );
}

/// A reader that closes the output early (`headroom run … | head -1`)
/// stops the printing, not the results: the file is written all the same
/// and the run's exit code is its own.
#[test]
fn a_reader_that_closes_the_output_loses_no_results() {
    let target = crate::common::Target::start(1, 2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut child = std::process::Command::new(crate::common::headroom_bin())
        .args([
            "run",
            "--url",
            &target.url("/hello"),
            "-n",
            "200",
            "--vus",
            "2",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The reader is gone before anything is printed.
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r["requests"]["total"], 200);
}
