//! Reports whose verdicts rest on measured figures: compare on different
//! and on equal setups, thresholds and JUnit. The tests take turns
//! (`serial`): another run beside a measured one is noise in its figures.

use crate::common::chromium::{assert_clean, open_in_chromium};
use crate::common::{ensure, headroom_bin, in_three_tries, light, run, serial, Target};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `headroom compare` text output: the verdict cell of `metric`'s row.
fn verdict(stdout: &str, metric: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(metric))
        .unwrap_or_else(|| panic!("no {metric} row:\n{stdout}"));
    line.split_whitespace().last().unwrap().to_string()
}

#[test]
fn compare_flags_a_real_difference_and_calls_the_same_setup_noise() {
    let _serial = serial();
    let target = Target::start(1, 8);
    let dir = tempfile::tempdir().unwrap();
    let measure = |ms: u32, name: &str| -> PathBuf {
        let r = run(&[
            "--url",
            &target.url(&format!("/sleep?ms={ms}")),
            "--rate",
            "50",
            "-d",
            "4s",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let path = dir.path().join(format!("{name}.json"));
        std::fs::copy(r.results_path(), &path).unwrap();
        path
    };
    let compare = |a: &Path, b: &Path| {
        let out = Command::new(headroom_bin())
            .arg("compare")
            .arg(a)
            .arg(b)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    // A paused VM can put a real spike into one of two identical runs.
    let mut measured = None;
    in_three_tries("compare", || {
        let fast = measure(20, "fast");
        let fast_again = measure(20, "fast-again");
        let slow = measure(40, "slow");
        // The median doubles; the tail's spread on a noisy machine may
        // overlap (then compare rightly says noise), but never "better".
        let different = compare(&fast, &slow);
        ensure!(verdict(&different, "p50 ms") == "WORSE", "{different}");
        ensure!(!different.contains("BETTER"), "{different}");
        let same = compare(&fast, &fast_again);
        ensure!(verdict(&same, "p90 ms") == "noise", "{same}");
        ensure!(verdict(&same, "p50 ms") == "noise", "{same}");
        ensure!(verdict(&same, "Throughput req/s") == "noise", "{same}");
        measured = Some((fast, slow));
        Ok(())
    });
    let (fast, slow) = measured.unwrap();

    // --fail-on-regression: exit 1 naming the regressed figures when the
    // later run is worse; 0 when it improved.
    let gate = |a: &Path, b: &Path| {
        Command::new(headroom_bin())
            .arg("compare")
            .arg(a)
            .arg(b)
            .arg("--fail-on-regression")
            .output()
            .unwrap()
    };
    let regressed = gate(&fast, &slow);
    let stderr = String::from_utf8_lossy(&regressed.stderr);
    assert_eq!(regressed.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("p50 ms of slow"), "{stderr}");
    let improved = gate(&slow, &fast);
    assert_eq!(improved.status.code(), Some(0), "{improved:?}");

    // The HTML version opens offline too.
    let html = dir.path().join("compare.html");
    let out = Command::new(headroom_bin())
        .arg("compare")
        .arg(&fast)
        .arg(&slow)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_clean(&open_in_chromium(&html, "compare.png"), 3);
}

#[test]
fn thresholds_set_the_exit_code_and_junit() {
    // 20 req/s against a server that sleeps 20 ms: a light load.
    let _light = light();
    let target = Target::start(1, 4);
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let url = target.url("/sleep?ms=20");
    let breached = run(&[
        "--url",
        &url,
        "--rate",
        "20",
        "-d",
        "2s",
        "--threshold",
        "p95<5ms",
        "--threshold",
        "errors<1%",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(breached.code, 1, "{}", breached.stderr);
    assert!(breached.stdout.contains("FAIL p95"), "{}", breached.stdout);
    assert!(
        breached.stdout.contains("pass errors"),
        "{}",
        breached.stdout
    );
    let checks = breached.results()["thresholds"].as_array().unwrap().clone();
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0]["passed"], false);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
    assert!(xml.contains("<failure message=\"p95"), "{xml}");

    let met = run(&[
        "--url",
        &url,
        "--rate",
        "20",
        "-d",
        "2s",
        "--threshold",
        "p95<1s,errors<1%",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(met.code, 0, "{}", met.stderr);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("failures=\"0\"") && !xml.contains("<failure"),
        "{xml}"
    );

    // [thresholds] in the scenario, with the comparison implied.
    let scenario = crate::common::scenario_dir(&[(
        "t.toml",
        &format!(
            "base_url = \"{}\"\n[load]\nmodel = \"open\"\nrate = 20\nduration = \"2s\"\n\
             [[request]]\nname = \"sleep\"\npath = \"/sleep?ms=20\"\n[thresholds]\np90 = \"5ms\"\n",
            target.base
        ),
    )]);
    let r = run(&[scenario.path().join("t.toml").to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("thresholds breached: p90<5ms"),
        "{}",
        r.stderr
    );
    // --markdown prints the tables ready to paste.
    let md = run(&["--url", &url, "--rate", "20", "-d", "1s", "--markdown"]);
    assert!(md.stdout.contains("| Label | Samples |"), "{}", md.stdout);
    assert!(md.stdout.contains("|:---|---:|"), "{}", md.stdout);
}

/// A threshold may hold one request to a bound (k6's tag thresholds): the
/// fast request passes a bound the slow one breaches, over the same run.
#[test]
fn per_request_thresholds_judge_each_request_by_its_own_figures() {
    let _serial = serial();
    let target = Target::start(1, 4);
    let scenario = |thresholds: &str| {
        crate::common::scenario_dir(&[(
            "t.toml",
            &format!(
                "base_url = \"{}\"\n[load]\nmodel = \"open\"\nrate = 40\nduration = \"2s\"\n\n\
                 [[request]]\nname = \"fast page\"\npath = \"/hello\"\n\n\
                 [[request]]\nname = \"slow\"\npath = \"/sleep?ms=30\"\n\n\
                 [thresholds]\n{thresholds}\n",
                target.base
            ),
        )])
    };
    let dir = scenario("\"p90{fast page}\" = \"25ms\"\n\"p90{slow}\" = \"25ms\"");
    let file = dir.path().join("t.toml");
    // /hello answers in well under 25 ms, unless the machine pauses.
    in_three_tries("fast page within 25 ms", || {
        let r = run(&[file.to_str().unwrap()]);
        assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
        let checks = r.results()["thresholds"].as_array().unwrap().clone();
        let verdict = |name: &str| {
            checks
                .iter()
                .find(|c| c["request"] == name)
                .unwrap_or_else(|| panic!("no check of {name}: {checks:?}"))["passed"]
                .clone()
        };
        assert_eq!(verdict("slow"), false, "{checks:?}");
        assert!(r.stdout.contains("p90{slow}<25ms"), "{}", r.stdout);
        // Each check's figure is its request's own p90 in per_request.
        for c in &checks {
            let name = c["request"].as_str().unwrap();
            assert_eq!(
                c["actual"],
                r.results()["per_request"][name]["latency_ms"]["p90"]
            );
        }
        ensure!(verdict("fast page") == true, "{checks:?}");
        Ok(())
    });

    // On the command line too, next to a whole-run bound.
    let r = run(&[
        file.to_str().unwrap(),
        "--threshold",
        "p90{fast page}<25ms, errors<1%",
    ]);
    let checks = r.results()["thresholds"].as_array().unwrap();
    assert_eq!(checks.len(), 4);

    // A request that is not in the scenario: located, exit 2, no load sent.
    let before = target.requests();
    let dir = scenario("\"p90{slwo}\" = \"25ms\"");
    let r = run(&[dir.path().join("t.toml").to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("t.toml:"), "{}", r.stderr);
    assert!(r.stderr.contains("no request named `slwo`"), "{}", r.stderr);
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "-d",
        "1s",
        "--threshold",
        "p90{home}<5ms",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--threshold"), "{}", r.stderr);
    assert_eq!(target.requests(), before, "no load was sent");
}
