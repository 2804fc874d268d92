//! Live metrics against a real Prometheus (Debian's `prometheus` package):
//! `promtool check metrics` accepts the endpoint's exposition, and a
//! Prometheus started here — its own data folder, loopback only, the
//! remote-write receiver on — both scrapes the endpoint and receives the
//! remote-write stream; after the run, a query of
//! `headroom_requests_total` equals `requests.total` in results.json. The
//! scrape is OpenMetrics (what Prometheus asks for), and the traced run's
//! exemplars it stored are requests results.json lists as exemplars.

use crate::common::{free_port, http_get, run, wait_for_port, ProcessGuard, Target};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn require(tool: &str) {
    assert!(
        Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool}"))
            .output()
            .is_ok_and(|o| o.status.success()),
        "`{tool}` is required: apt-get install -y prometheus"
    );
}

/// Percent-encodes a PromQL query for a URL.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of a PromQL instant query that returns one number.
fn query(prometheus: u16, q: &str) -> Option<f64> {
    let body = http_get(&format!(
        "http://127.0.0.1:{prometheus}/api/v1/query?query={}",
        encode(q)
    ));
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let result = v["data"]["result"].as_array()?.first()?.clone();
    result["value"][1].as_str()?.parse().ok()
}

#[test]
fn a_real_prometheus_scrapes_and_receives_what_the_run_counted() {
    require("prometheus");
    require("promtool");
    let target = Target::start(1, 2);
    let metrics_port = free_port();
    let prom_port = free_port();
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: headroom\n    \
             static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
    )
    .unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            data.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .arg("--web.enable-remote-write-receiver")
        .arg("--enable-feature=exemplar-storage")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let _prometheus = ProcessGuard { child };
    wait_for_port(prom_port);

    // promtool reads the live exposition while the load runs.
    let endpoint = format!("http://127.0.0.1:{metrics_port}/metrics");
    // Every family the run publishes: counters from the first second on,
    // the gauges once the first monitor sample is in.
    const FAMILIES: [&str; 7] = [
        "headroom_requests_total{",
        "headroom_connections_opened_total{",
        "headroom_responses_total{",
        "headroom_request_duration_seconds_bucket{",
        "headroom_in_flight",
        "headroom_target_rate",
        "headroom_generator_cpu_cores",
    ];
    let checker = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut text = String::new();
        loop {
            assert!(
                Instant::now() < deadline,
                "the endpoint never served every family; last:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(300));
            if std::net::TcpStream::connect(("127.0.0.1", metrics_port)).is_err() {
                continue;
            }
            text = http_get(&endpoint);
            if !FAMILIES.iter().all(|name| text.contains(name)) {
                continue;
            }
            let mut promtool = Command::new("promtool")
                .args(["check", "metrics"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            promtool
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            let out = promtool.wait_with_output().unwrap();
            return (
                out.status.success(),
                String::from_utf8_lossy(&out.stderr).to_string(),
                text,
            );
        }
    });
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "--rate",
        "200",
        "-d",
        "4s",
        "--metrics-listen",
        &format!("127.0.0.1:{metrics_port}"),
        "--metrics-linger",
        "10s",
        "--metrics-push",
        &format!("http://127.0.0.1:{prom_port}/api/v1/write"),
        "--trace",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    let (ok, complaints, text) = checker.join().unwrap();
    assert!(ok, "promtool check metrics: {complaints}\n{text}");
    let total = r.total() as f64;
    assert_eq!(total, 800.0);
    // Scraped (job="headroom") and pushed (no job label): both the total.
    for (what, q) in [
        (
            "scraped",
            r#"sum(last_over_time(headroom_requests_total{job="headroom"}[5m]))"#,
        ),
        (
            "pushed",
            r#"sum(last_over_time(headroom_requests_total{job=""}[5m]))"#,
        ),
        (
            "pushed histogram",
            r#"sum(last_over_time(headroom_request_duration_seconds_count{job=""}[5m]))"#,
        ),
    ] {
        let deadline = Instant::now() + Duration::from_secs(10);
        let got = loop {
            let got = query(prom_port, q);
            if got == Some(total) || Instant::now() > deadline {
                break got;
            }
            std::thread::sleep(Duration::from_millis(250));
        };
        assert_eq!(got, Some(total), "{what}: {q}");
    }

    // The exemplars Prometheus kept from the OpenMetrics scrapes: each a
    // request results.json lists, at its latency.
    let listed: std::collections::BTreeMap<String, f64> = r.results()["exemplars"]
        .as_array()
        .expect("a traced run lists exemplars")
        .iter()
        .map(|e| {
            let id = e["trace_id"].as_str().unwrap().to_string();
            (id, e["latency_ms"].as_f64().unwrap())
        })
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let body = http_get(&format!(
        "http://127.0.0.1:{prom_port}/api/v1/query_exemplars?query={}&start={}&end={}",
        encode(r#"headroom_request_duration_seconds_bucket{job="headroom"}"#),
        now - 300,
        now + 60
    ));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let stored: Vec<(String, f64)> = v["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .flat_map(|series| series["exemplars"].as_array().cloned().unwrap_or_default())
        .map(|e| {
            let id = e["labels"]["trace_id"].as_str().unwrap().to_string();
            let seconds: f64 = e["value"].as_str().unwrap().parse().unwrap();
            (id, seconds)
        })
        .collect();
    assert!(!stored.is_empty(), "Prometheus kept no exemplar: {body}");
    for (id, seconds) in &stored {
        let ms = listed
            .get(id)
            .unwrap_or_else(|| panic!("exemplar {id} is not in results.json"));
        assert!(
            (ms / 1000.0 - seconds).abs() < 1e-6,
            "{id}: {ms} ms vs {seconds} s"
        );
    }
}
