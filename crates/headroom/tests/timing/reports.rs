//! Reports from real runs: the HTML opened in headless Chromium (no
//! console message, no request from the page, every chart drew points, a
//! screenshot saved), CSV and HDR logs read back to the results' figures,
//! compare on different and on equal setups, thresholds and JUnit.
//!
//! The tests take turns (`serial`): Chromium beside a measured run is noise
//! in its figures on a two-core machine.

use crate::common::{capacity, ensure, headroom_bin, in_three_tries, run, serial, Target};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where screenshots are kept for people to look at after the tests.
fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Opened {
    dom: String,
    /// Console messages the page logged.
    console: Vec<String>,
    /// Requests the page itself started (not Chromium's own background ones).
    page_requests: Vec<String>,
}

fn chromium_args(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-pings",
        // Chromium's own background requests must not leave the machine either.
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// A screenshot of `page` with the reader's system in dark mode.
fn dark_screenshot(page: &Path, shot: &str) {
    let work = tempfile::tempdir().unwrap();
    let png = shots().join(shot);
    let out = Command::new("chromium")
        .args(chromium_args(&work.path().join("profile")))
        .args([
            "--window-size=1200,2400",
            "--hide-scrollbars",
            "--force-dark-mode",
            "--blink-settings=preferredColorScheme=0",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
}

/// Opens `page` in headless Chromium; saves a screenshot as `shot`.
fn open_in_chromium(page: &Path, shot: &str) -> Opened {
    let work = tempfile::tempdir().unwrap();
    let netlog = work.path().join("net.json");
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let output = Command::new("chromium")
        .args(chromium_args(&work.path().join("profile")))
        .args(["--enable-logging=stderr", "--v=0"])
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium is installed (apt-get install chromium; .ci/run does)");
    assert!(output.status.success(), "chromium failed: {output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let console = stderr
        .lines()
        .filter(|l| l.contains("CONSOLE"))
        .map(str::to_string)
        .collect();
    let log: Value = serde_json::from_str(&std::fs::read_to_string(&netlog).unwrap()).unwrap();
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].clone();
    let page_requests = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == start_job)
        .filter(|e| e["params"]["initiator"] != "not an origin")
        .filter_map(|e| e["params"]["url"].as_str().map(str::to_string))
        .collect();

    let png = shots().join(shot);
    let status = Command::new("chromium")
        .args(chromium_args(&work.path().join("profile2")))
        .args(["--window-size=1200,2400", "--hide-scrollbars"])
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    assert!(
        std::fs::metadata(&png).unwrap().len() > 10_000,
        "screenshot {png:?}"
    );
    Opened {
        dom: String::from_utf8_lossy(&output.stdout).into(),
        console,
        page_requests,
    }
}

/// Each `<svg class="chart">` in the DOM Chromium built, with its data marks.
fn charts(dom: &str) -> Vec<(String, usize)> {
    dom.split("<svg class=\"chart\"")
        .skip(1)
        .map(|chunk| {
            let svg = chunk.split("</svg>").next().unwrap_or("");
            let title = svg
                .split("aria-label=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or("?")
                .to_string();
            (title, svg.matches("class=\"pt ").count())
        })
        .collect()
}

fn assert_clean(opened: &Opened, min_charts: usize) {
    assert!(opened.console.is_empty(), "console: {:?}", opened.console);
    assert!(
        opened.page_requests.is_empty(),
        "the page made requests: {:?}",
        opened.page_requests
    );
    let charts = charts(&opened.dom);
    assert!(charts.len() >= min_charts, "charts: {charts:?}");
    for (title, points) in &charts {
        assert!(*points > 0, "chart `{title}` drew no data points");
    }
}

#[test]
fn the_checks_catch_a_page_that_logs_or_fetches() {
    let _serial = serial();
    // The detector itself must be able to fail.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<html><body><img src=\"http://127.0.0.1:9/x.png\"><script>console.error('boom')</script>\
         <svg class=\"chart\" aria-label=\"empty\"></svg></body></html>",
    )
    .unwrap();
    let opened = open_in_chromium(&page, "negative-control.png");
    assert!(opened.console.iter().any(|l| l.contains("boom")));
    assert_eq!(opened.page_requests, vec!["http://127.0.0.1:9/x.png"]);
    assert_eq!(charts(&opened.dom), vec![("empty".to_string(), 0)]);
}

#[test]
fn run_report_opens_offline_with_every_chart_drawn() {
    let _serial = serial();
    let target = Target::start(1, 2);
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("run.html");
    let pid = target.guard.pid().to_string();
    let r = run(&[
        "--url",
        &target.url("/sleep?ms=5"),
        "--rate",
        "100",
        "-d",
        "3s",
        "--monitor-pid",
        &pid,
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let opened = open_in_chromium(&html, "run.png");
    // Latency, throughput, errors, distribution, CPU, memory, fds.
    assert_clean(&opened, 7);
    assert!(opened.dom.contains("TOTAL"));
    assert!(opened.dom.contains("t &lt; 800 ms"));
    dark_screenshot(&html, "run-dark.png");

    // The same report after the fact, from the results file.
    let again = dir.path().join("again.html");
    let out = Command::new(headroom_bin())
        .args(["report", r.results_path().to_str().unwrap(), "--html"])
        .arg(&again)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_clean(&open_in_chromium(&again, "run-after.png"), 7);
}

#[test]
fn study_and_capacity_reports_open_offline_with_every_chart_drawn() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let study = dir.path().join("s.toml");
    std::fs::write(
        &study,
        "[scenario.load]\nvus = 4\nduration = \"1s\"\n[[scenario.request]]\nname = \"sleep\"\npath = \"/sleep?ms=5\"\n\n\
         [[server]]\nname = \"target\"\n\
         command = \"headroom target --listen 127.0.0.1:{port} --workers {workers} --threads {threads}\"\n\
         ready = \"/health\"\n[server.grid]\nworkers = [1, 2]\nthreads = [1, 2]\n[measure]\npause = \"0s\"\n",
    )
    .unwrap();
    let html = dir.path().join("study.html");
    let bin_dir = Path::new(headroom_bin())
        .parent()
        .unwrap()
        .display()
        .to_string();
    let out = Command::new(headroom_bin())
        .arg("study")
        .arg(&study)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--html")
        .arg(&html)
        .env(
            "PATH",
            format!("{bin_dir}:{}", std::env::var("PATH").unwrap_or_default()),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let opened = open_in_chromium(&html, "study.png");
    // Throughput, latency, CPU, memory, and the workers × threads heat-map.
    assert_clean(&opened, 5);
    assert!(
        opened.dom.contains("Throughput by threads × workers")
            || opened.dom.contains("Throughput by workers × threads")
    );
    assert!(opened.dom.contains("class=\"best\""), "winner highlighted");

    let target = Target::start(1, 2);
    let html = dir.path().join("cap.html");
    let r = capacity(&[
        "--url",
        &target.url("/sleep?ms=50"),
        "--slo",
        "p90<100ms",
        "--min",
        "10",
        "--step-duration",
        "1s",
        "--warmup",
        "0s",
        "--pause",
        "0s",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let opened = open_in_chromium(&html, "capacity.png");
    assert_clean(&opened, 3);
    assert!(opened.dom.contains("capacity "), "capacity marked");
}

#[test]
fn csv_files_parse_back_to_the_results() {
    let _serial = serial();
    let target = Target::start(1, 2);
    let dir = tempfile::tempdir().unwrap();
    let csv_dir = dir.path().join("csv");
    let pid = target.guard.pid().to_string();
    let r = run(&[
        "--url",
        &target.url("/sleep?ms=2"),
        "--rate",
        "200",
        "-d",
        "3s",
        "--monitor-pid",
        &pid,
        "--csv",
        csv_dir.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let res = r.results();
    let read = |name: &str| -> Vec<std::collections::HashMap<String, String>> {
        csv::Reader::from_path(csv_dir.join(name))
            .unwrap()
            .deserialize()
            .map(|row| row.unwrap())
            .collect()
    };
    let num = |row: &std::collections::HashMap<String, String>, k: &str| -> f64 {
        row[k]
            .parse()
            .unwrap_or_else(|_| panic!("{k} = {:?}", row[k]))
    };
    let requests = read("requests.csv");
    let total = requests.iter().find(|r| r["name"] == "TOTAL").unwrap();
    assert_eq!(
        num(total, "samples"),
        res["requests"]["total"].as_f64().unwrap()
    );
    for (col, key) in [
        ("p50_ms", "p50"),
        ("p90_ms", "p90"),
        ("p99_ms", "p99"),
        ("max_ms", "max"),
    ] {
        assert_eq!(
            num(total, col),
            res["latency_ms"][key].as_f64().unwrap(),
            "{col}"
        );
    }
    assert_eq!(
        num(total, "throughput_rps"),
        res["throughput_rps"].as_f64().unwrap()
    );

    let timeline = read("timeline.csv");
    let tl = res["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), tl.len());
    for (row, point) in timeline.iter().zip(tl) {
        assert_eq!(num(row, "requests"), point["requests"].as_f64().unwrap());
        assert_eq!(num(row, "p90_ms"), point["p90_ms"].as_f64().unwrap());
    }
    let sum: f64 = timeline.iter().map(|r| num(r, "requests")).sum();
    assert_eq!(sum, res["requests"]["total"].as_f64().unwrap());

    let server = read("server.csv");
    let samples = res["server"]["samples"].as_array().unwrap();
    assert_eq!(server.len(), samples.len());
    for (row, s) in server.iter().zip(samples) {
        assert_eq!(num(row, "t_s"), s["t_s"].as_f64().unwrap());
        assert_eq!(
            num(row, "server_cpu_pct"),
            s["server"]["cpu_pct"].as_f64().unwrap()
        );
        assert_eq!(
            num(row, "server_rss_bytes"),
            s["server"]["rss_bytes"].as_f64().unwrap()
        );
    }
}

#[test]
fn hdr_log_round_trips_through_the_interval_log_reader() {
    let _serial = serial();
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;
    let target = Target::start(1, 2);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("latency.hlog");
    let r = run(&[
        "--url",
        &target.url("/sleep?ms=3"),
        "--rate",
        "150",
        "-d",
        "3s",
        "--hdr-log",
        log.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bytes = std::fs::read(&log).unwrap();
    let mut total = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    let mut intervals = 0;
    for entry in IntervalLogIterator::new(&bytes) {
        if let LogEntry::Interval(i) = entry.expect("a valid interval log") {
            let raw = base64_decode(i.encoded_histogram());
            let h: hdrhistogram::Histogram<u64> = Deserializer::new()
                .deserialize(&mut raw.as_slice())
                .unwrap();
            assert_eq!(i.start_timestamp().as_secs(), intervals);
            total.add(&h).unwrap();
            intervals += 1;
        }
    }
    let res = r.results();
    assert_eq!(
        intervals as usize,
        res["timeline"].as_array().unwrap().len()
    );
    assert_eq!(total.len(), res["requests"]["total"].as_u64().unwrap());
    for (q, key) in [(0.5, "p50"), (0.9, "p90"), (0.99, "p99")] {
        let ms = total.value_at_quantile(q) as f64 / 1000.0;
        assert_eq!(ms, res["latency_ms"][key].as_f64().unwrap(), "{key}");
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

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
    let _serial = serial();
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
