//! Reports from real runs, checked for what they show: the HTML opened in
//! headless Chromium (no console message, no request from the page, every
//! chart drew points, a screenshot saved), CSV and HDR logs read back to
//! the results' figures.

use crate::common::chromium::{assert_clean, charts, dark_screenshot, open_in_chromium};
use crate::common::{capacity, headroom_bin, run, Target};
use std::path::Path;
use std::process::Command;

#[test]
fn the_checks_catch_a_page_that_logs_or_fetches() {
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
    // Latency, throughput, errors, offered and achieved, distribution,
    // CPU, memory, fds.
    assert_clean(&opened, 8);
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
    assert_clean(&open_in_chromium(&again, "run-after.png"), 8);
}

/// Gatling's tables and charts: status codes, errors by class with their
/// share, OK/KO per request, and each request's latency and responses over
/// time — from a run of two requests, one of which answers 503.
#[test]
fn run_report_has_status_codes_errors_and_per_request_charts() {
    let target = Target::start(1, 2);
    let dir = crate::common::scenario_dir(&[(
        "two.toml",
        &format!(
            "base_url = \"{}\"\n[load]\nrate = 60\nduration = \"3s\"\n\
             [[request]]\nname = \"hello\"\npath = \"/hello\"\nweight = 2\n\
             [[request]]\nname = \"flaky\"\npath = \"/status?code=503\"\n",
            target.base
        ),
    )]);
    let html = dir.path().join("two.html");
    let r = run(&[
        dir.path().join("two.toml").to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let failed = r.error("http_5xx");
    assert!(failed > 0 && failed < r.total());
    let opened = open_in_chromium(&html, "two-requests.png");
    // Latency, throughput, errors, p95 by request, responses by request,
    // offered and achieved, distribution, CPU, memory, fds.
    assert_clean(&opened, 10);
    for text in [
        "Status codes",
        "% of requests",
        "http_5xx",
        "p95 latency by request",
        "flaky KO",
        "KO %",
    ] {
        assert!(opened.dom.contains(text), "{text} missing");
    }
    // The timeline has both requests' seconds.
    let second = &r.results()["timeline"][1]["per_request"];
    assert_eq!(second.as_array().map(Vec::len), Some(2), "{second}");
}

#[test]
fn study_and_capacity_reports_open_offline_with_every_chart_drawn() {
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
        // A second with no answer (the machine paused) has no p90: empty.
        match point["p90_ms"].as_f64() {
            Some(p90) => assert_eq!(num(row, "p90_ms"), p90),
            None => assert_eq!(row["p90_ms"], "", "{point}"),
        }
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

#[test]
fn a_results_file_with_a_wrong_type_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut results: serde_json::Value =
        serde_json::from_str(include_str!("../../../records/tests/data/results-min.json")).unwrap();
    results["requests"]["total"] = "many".into();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, results.to_string()).unwrap();
    let bad = bad.to_str().unwrap();
    let html = dir.path().join("r.html");
    for args in [
        vec!["report", bad, "--html", html.to_str().unwrap()],
        vec!["compare", bad, bad],
        vec![
            "merge",
            bad,
            "--out",
            dir.path().join("m.json").to_str().unwrap(),
        ],
    ] {
        let out = Command::new(headroom_bin()).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("requests.total") && stderr.contains("\"many\""),
            "{args:?}: {stderr}"
        );
    }
}
