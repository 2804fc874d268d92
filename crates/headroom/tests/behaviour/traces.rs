//! W3C trace context (`--trace`, `[trace]`) against real servers: nginx
//! logs the `traceparent` and `tracestate` of every request it got (over
//! HTTP/1.1 and h2c, proxying a slow path to the built-in target), and
//! those logs are checked against what headroom says it sent — every
//! request carried a well-formed, fresh traceparent; each exemplar in
//! results.json names a request the server really got; the slowest
//! exemplar is the run's slowest request; a session iteration is one
//! trace. The report shows the slowest with their IDs or links. And a
//! real tracing backend (Jaeger) holds the trace of every ranked exemplar.

use crate::common::{
    free_port, headroom_bin, http_get, peer_home, run, scenario_dir, wait_for_port, Nginx,
    ProcessGuard, Target,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};

/// nginx on HTTP/1.1 (`port`) and h2c (`h2c_port`) logging
/// `$http_traceparent $http_tracestate $request_uri $server_protocol`;
/// `/sleep` proxied to the built-in target, the rest answered at once.
struct TracingNginx {
    nginx: Nginx,
    h2c_port: u16,
    _target: Target,
}

impl TracingNginx {
    fn start() -> TracingNginx {
        let target = Target::start(1, 8);
        let upstream = target.url("");
        let h2c_port = free_port();
        let nginx = Nginx::start_http(tempfile::tempdir().unwrap(), |d, port| {
            let d = d.display();
            format!(
                "log_format traced '$http_traceparent $http_tracestate $request_uri $server_protocol';
  access_log {d}/access.log traced;
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    listen 127.0.0.1:{h2c_port} http2 backlog=4096;
    location /sleep {{ proxy_pass {upstream}; }}
    location / {{ return 200 \"hello\\n\"; }}
  }}"
            )
        });
        wait_for_port(h2c_port);
        TracingNginx {
            nginx,
            h2c_port,
            _target: target,
        }
    }

    /// The log's lines: (traceparent, tracestate, target, protocol).
    fn lines(&self) -> Vec<[String; 4]> {
        self.nginx
            .log_fields()
            .into_iter()
            .map(|f| {
                assert_eq!(f.len(), 4, "{f:?}");
                [f[0].clone(), f[1].clone(), f[2].clone(), f[3].clone()]
            })
            .collect()
    }
}

/// (trace ID, span ID, flags) of a well-formed version-00 traceparent.
fn parse_traceparent(value: &str) -> (String, String, String) {
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    assert!(
        parts.len() == 4
            && parts[0] == "00"
            && hex(parts[1], 32)
            && hex(parts[2], 16)
            && hex(parts[3], 2),
        "not a W3C traceparent: {value:?}"
    );
    assert_ne!(parts[1], "0".repeat(32), "an all-zero trace ID is invalid");
    assert_ne!(parts[2], "0".repeat(16), "an all-zero span ID is invalid");
    (parts[1].into(), parts[2].into(), parts[3].into())
}

/// The exemplars of a results file.
fn exemplars(results: &Value) -> Vec<Value> {
    results["exemplars"]
        .as_array()
        .expect("a traced run has exemplars")
        .clone()
}

/// Checks that hold for any traced run: each exemplar was sent (its IDs in
/// `sent`), ranks run 1..=min(100, requests) slowest first, rank 1 is the
/// run's slowest request (its max, to HDR's precision), and every name
/// keeps at most 5 unranked ones per second.
fn check_exemplars(results: &Value, sent: &BTreeSet<(String, String)>) {
    let list = exemplars(results);
    let total = results["requests"]["total"].as_u64().unwrap();
    for e in &list {
        let ids = (
            e["trace_id"].as_str().unwrap().to_string(),
            e["span_id"].as_str().unwrap().to_string(),
        );
        assert!(sent.contains(&ids), "exemplar {e} was never received");
        assert!(e["latency_ms"].as_f64().unwrap() >= 0.0);
        assert!(e["second"].as_u64().unwrap() >= 1);
    }
    let mut ranked: Vec<&Value> = list.iter().filter(|e| !e["rank"].is_null()).collect();
    ranked.sort_by_key(|e| e["rank"].as_u64());
    let ranks: Vec<u64> = ranked.iter().map(|e| e["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks, (1..=total.min(100)).collect::<Vec<u64>>());
    let latency = |e: &Value| e["latency_ms"].as_f64().unwrap();
    assert!(ranked.windows(2).all(|w| latency(w[0]) >= latency(w[1])));
    let max = results["latency_ms"]["max"].as_f64().unwrap();
    let slowest = latency(ranked[0]);
    assert!(
        (slowest - max).abs() <= max * 0.002 + 0.01,
        "the slowest exemplar ({slowest} ms) is not the run's slowest request ({max} ms)"
    );
    let mut unranked: BTreeMap<(u64, String), usize> = BTreeMap::new();
    for e in list.iter().filter(|e| e["rank"].is_null()) {
        let key = (e["second"].as_u64().unwrap(), e["name"].to_string());
        *unranked.entry(key).or_default() += 1;
    }
    assert!(unranked.values().all(|&n| n <= 5), "{unranked:?}");
}

#[test]
fn every_request_carries_a_fresh_traceparent_and_the_slowest_are_the_exemplars() {
    let nginx = TracingNginx::start();
    let dir = scenario_dir(&[(
        "mix.toml",
        &format!(
            r#"base_url = "{}"
[load]
vus = 4
duration = "3s"
[[request]]
name = "fast"
path = "/"
[[request]]
name = "slow"
path = "/sleep?ms=20"
"#,
            nginx.nginx.url("")
        ),
    )]);
    let scenario = dir.path().join("mix.toml");
    let r = run(&[
        scenario.to_str().unwrap(),
        "--trace",
        "--trace-state",
        "headroom=test",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let lines = nginx.lines();
    assert_eq!(lines.len() as u64, r.total(), "nginx logged every request");
    let mut sent = BTreeSet::new();
    let mut traces = BTreeSet::new();
    for [traceparent, tracestate, _, _] in &lines {
        let (trace, span, flags) = parse_traceparent(traceparent);
        assert_eq!(flags, "01", "sampled by default");
        assert_eq!(tracestate, "headroom=test");
        assert!(traces.insert(trace.clone()), "a trace ID sent twice");
        sent.insert((trace, span));
    }
    let results = r.results();
    assert_eq!(results["config"]["trace"]["per"], "request");
    check_exemplars(results, &sent);
    // The slow path's requests are the slowest: they fill the ranking.
    let list = exemplars(results);
    let ranked_fast = list
        .iter()
        .filter(|e| !e["rank"].is_null() && e["name"] == "fast")
        .count();
    let slow = results["per_request"]["slow"]["requests"]["total"]
        .as_u64()
        .unwrap();
    assert!(slow >= 100, "{slow} slow requests");
    assert!(
        ranked_fast <= 5,
        "{ranked_fast} fast requests among the 100 slowest"
    );
    assert!(r.stdout.contains("Slowest traced requests"), "{}", r.stdout);

    // The report: the slowest listed with their IDs, linked to the
    // tracing backend when the run names one.
    let html = dir.path().join("run.html");
    let out = Command::new(headroom_bin())
        .args(["report", r.results_path().to_str().unwrap(), "--html"])
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let first = list.iter().find(|e| e["rank"] == 1).unwrap()["trace_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(page.contains("Slowest requests and their traces"));
    assert!(
        page.contains(&first),
        "the slowest trace ID is in the report"
    );
}

#[test]
fn an_iteration_is_one_trace_over_http2_and_unsampled_flags_are_sent() {
    let nginx = TracingNginx::start();
    let dir = scenario_dir(&[(
        "session.toml",
        &format!(
            r#"base_url = "http://127.0.0.1:{}"
[load]
vus = 3
iterations = 20
[http]
version = "2"
[trace]
per = "iteration"
sampled = false
url = "http://127.0.0.1:16686/trace/{{id}}"
[[request]]
name = "first"
path = "/first"
[[request]]
name = "second"
path = "/second"
[[session]]
name = "two steps"
steps = [{{ request = "first" }}, {{ request = "second" }}]
"#,
            nginx.h2c_port
        ),
    )]);
    let scenario = dir.path().join("session.toml");
    let r = run(&[scenario.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.total(), 120);
    let lines = nginx.lines();
    assert_eq!(lines.len(), 120);
    let mut by_trace: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut sent = BTreeSet::new();
    for [traceparent, tracestate, target, protocol] in &lines {
        assert_eq!(protocol, "HTTP/2.0");
        assert_eq!(tracestate, "-", "no tracestate unless asked");
        let (trace, span, flags) = parse_traceparent(traceparent);
        assert_eq!(flags, "00", "sampled = false");
        sent.insert((trace.clone(), span.clone()));
        by_trace
            .entry(trace)
            .or_default()
            .push((target.clone(), span));
    }
    // 60 iterations, each one trace of two spans: /first then /second.
    assert_eq!(by_trace.len(), 60);
    for (trace, spans) in &by_trace {
        let targets: Vec<&str> = spans.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(targets, ["/first", "/second"], "trace {trace}");
        assert_ne!(spans[0].1, spans[1].1, "each request is its own span");
    }
    let results = r.results();
    assert_eq!(results["config"]["trace"]["per"], "iteration");
    check_exemplars(results, &sent);
    // The terminal summary links the slowest to the tracing backend.
    assert!(
        r.stdout.contains("http://127.0.0.1:16686/trace/"),
        "{}",
        r.stdout
    );
}

#[test]
fn shards_merge_their_exemplars_exactly() {
    let nginx = TracingNginx::start();
    let r = run(&[
        "--url",
        &nginx.nginx.url("/sleep?ms=2"),
        "--rate",
        "150",
        "-d",
        "2s",
        "--processes",
        "2",
        "--trace",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let lines = nginx.lines();
    assert_eq!(lines.len() as u64, r.total());
    let sent: BTreeSet<(String, String)> = lines
        .iter()
        .map(|[tp, ..]| {
            let (t, s, _) = parse_traceparent(tp);
            (t, s)
        })
        .collect();
    assert_eq!(sent.len() as u64, r.total(), "every trace ID fresh");
    check_exemplars(r.results(), &sent);
}

#[test]
fn trace_settings_that_cannot_be_sent_are_refused_with_their_line() {
    let dir = scenario_dir(&[(
        "bad.toml",
        "base_url = \"http://127.0.0.1:9\"\n[[request]]\nname = \"r\"\npath = \"/\"\n[trace]\n\
         tracestate = \"a=1\\nInjected: yes\"\nurl = \"javascript:alert(1)//{id}\"\n",
    )]);
    let scenario = dir.path().join("bad.toml");
    let r = run(&[scenario.to_str().unwrap(), "-d", "1s"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("bad.toml:6"), "{}", r.stderr);
    assert!(r.stderr.contains("tracestate"), "{}", r.stderr);
    assert!(r.stderr.contains("bad.toml:7"), "{}", r.stderr);
    assert!(r.stderr.contains("http:// or https://"), "{}", r.stderr);
    let r = run(&["--url", "http://127.0.0.1:9/", "--trace-per", "session"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("request, iteration"), "{}", r.stderr);
}

/// Jaeger v2 all-in-one (memory storage, built by `.ci/trace-peers.sh`;
/// an OpenTelemetry Collector inside) and a server instrumented with the
/// OpenTelemetry SDK that continues each request's trace
/// (`bench/traces/instrumented_server.py`), both on free loopback ports.
struct TracingBackend {
    otlp: u16,
    query: u16,
    /// The collector's Prometheus exporter (what OTLP metrics became).
    metrics: u16,
    port: u16,
    server: ProcessGuard,
    _jaeger: ProcessGuard,
    _dir: tempfile::TempDir,
}

impl TracingBackend {
    fn start() -> TracingBackend {
        let jaeger = peer_home("JAEGER", "jaeger-1.76.0").join("jaeger");
        let python = peer_home("OTEL_PYTHON", "otel-1.45.2").join("bin/python");
        for (peer, path) in [("Jaeger", &jaeger), ("the OpenTelemetry SDK", &python)] {
            assert!(path.exists(), "{peer}: run .ci/trace-peers.sh ({path:?})");
        }
        let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/traces");
        let dir = tempfile::tempdir().unwrap();
        let (otlp, query, query_grpc) = (free_port(), free_port(), free_port());
        let (metrics, port) = (free_port(), free_port());
        let config = std::fs::read_to_string(bench.join("jaeger.yaml"))
            .unwrap()
            .replace("{otlp}", &otlp.to_string())
            .replace("{query_grpc}", &query_grpc.to_string())
            .replace("{query}", &query.to_string())
            .replace("{metrics}", &metrics.to_string());
        std::fs::write(dir.path().join("jaeger.yaml"), config).unwrap();
        let jaeger = ProcessGuard {
            child: Command::new(&jaeger)
                .arg("--config")
                .arg(dir.path().join("jaeger.yaml"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start Jaeger"),
        };
        wait_for_port(otlp);
        wait_for_port(query);
        let server = ProcessGuard {
            child: Command::new(&python)
                .arg(bench.join("instrumented_server.py"))
                .arg(port.to_string())
                .arg(format!("http://127.0.0.1:{otlp}/v1/traces"))
                .stdout(Stdio::null())
                .spawn()
                .expect("start the instrumented server"),
        };
        wait_for_port(port);
        TracingBackend {
            otlp,
            query,
            metrics,
            port,
            server,
            _jaeger: jaeger,
            _dir: dir,
        }
    }

    /// SIGTERM: the server exports the spans it still holds, then exits.
    fn flush_server(&mut self) {
        unsafe { libc::kill(self.server.pid(), libc::SIGTERM) };
        let exited = self.server.child.wait().unwrap();
        assert!(exited.success(), "the instrumented server: {exited:?}");
    }

    /// The trace's spans once Jaeger holds at least `spans` of them.
    fn trace(&self, id: &str, spans: usize, give_up: std::time::Instant) -> Value {
        loop {
            let body = http_get(&format!("http://127.0.0.1:{}/api/traces/{id}", self.query));
            let found: Value = serde_json::from_str(&body).unwrap_or_default();
            let held = found["data"][0]["spans"].as_array().map_or(0, Vec::len);
            if held >= spans {
                return found["data"][0].clone();
            }
            assert!(
                std::time::Instant::now() < give_up,
                "trace {id} never reached Jaeger with {spans} spans: {body}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

/// The span IDs a trace's spans name as their parents.
fn parents(trace: &Value) -> BTreeSet<String> {
    (trace["spans"].as_array().unwrap().iter())
        .flat_map(|s| s["references"].as_array().into_iter().flatten())
        .filter(|r| r["refType"] == "CHILD_OF")
        .filter_map(|r| r["spanID"].as_str().map(String::from))
        .collect()
}

fn ranked(results: &Value) -> Vec<&Value> {
    (results["exemplars"].as_array().unwrap().iter())
        .filter(|e| !e["rank"].is_null())
        .collect()
}

/// A real tracing backend: Jaeger v2 receives over OTLP the spans of the
/// instrumented server. Every one of the run's ranked exemplars is a
/// trace Jaeger holds, the server's span a child of the exemplar's span.
#[test]
fn a_real_tracing_backend_holds_the_trace_of_every_ranked_exemplar() {
    let mut backend = TracingBackend::start();
    let url = format!("http://127.0.0.1:{}/sleep?ms=5", backend.port);
    let r = run(&["--url", &url, "--vus", "4", "-d", "2s", "--trace"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    backend.flush_server();
    let ranked = ranked(r.results());
    assert_eq!(ranked.len() as u64, r.total().min(100));
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for e in ranked {
        let trace = backend.trace(e["trace_id"].as_str().unwrap(), 1, give_up);
        let parents = parents(&trace);
        assert!(
            parents.contains(e["span_id"].as_str().unwrap()),
            "trace {}: the server's span is not a child of {} ({parents:?})",
            e["trace_id"],
            e["span_id"]
        );
    }
}

/// `--otlp`: headroom's own figures and spans reach a real OpenTelemetry
/// Collector (Jaeger v2's) over OTLP/HTTP. The metrics, as the
/// collector's Prometheus exporter shows them, are results.json's exact
/// counts; every exemplar is a CLIENT span of service `headroom` in
/// Jaeger with the span ID its traceparent sent, its duration the
/// exemplar's latency, the instrumented server's span its child.
#[test]
fn otlp_export_reaches_a_real_collector_with_exact_counts_and_the_exemplars_as_spans() {
    let mut backend = TracingBackend::start();
    let url = format!("http://127.0.0.1:{}/sleep?ms=5", backend.port);
    let collector = format!("http://127.0.0.1:{}", backend.otlp);
    let r = run(&[
        "--url", &url, "--vus", "4", "-d", "2s", "--trace", "--otlp", &collector,
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    backend.flush_server();
    let results = r.results();

    // Metrics: the collector's exposition holds the run's exact totals.
    let exposition = http_get(&format!("http://127.0.0.1:{}/metrics", backend.metrics));
    let sum_of = |prefix: &str, filter: &str| -> f64 {
        (exposition.lines())
            .filter(|l| l.starts_with(prefix) && l.contains(filter))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    let ok = results["requests"]["ok"].as_u64().unwrap() as f64;
    assert!(ok > 0.0);
    assert_eq!(
        sum_of("headroom_requests_total{", "outcome=\"ok\""),
        ok,
        "{exposition}"
    );
    assert_eq!(
        sum_of("headroom_request_duration_seconds_count", ""),
        r.total() as f64,
        "{exposition}"
    );
    assert_eq!(
        sum_of("headroom_responses_total{", "status=\"200\""),
        ok,
        "{exposition}"
    );

    // Spans: every exemplar, as headroom's span, parent of the server's.
    let exemplars = results["exemplars"].as_array().unwrap();
    assert!(exemplars.len() as u64 >= r.total().min(100));
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for e in exemplars {
        let (trace_id, span_id) = (
            e["trace_id"].as_str().unwrap(),
            e["span_id"].as_str().unwrap(),
        );
        let trace = backend.trace(trace_id, 2, give_up);
        let spans = trace["spans"].as_array().unwrap();
        let ours = spans
            .iter()
            .find(|s| s["spanID"] == span_id)
            .unwrap_or_else(|| {
                panic!("trace {trace_id}: no span {span_id} of headroom's: {trace}")
            });
        let process = &trace["processes"][ours["processID"].as_str().unwrap()];
        assert_eq!(process["serviceName"], "headroom", "{trace}");
        assert_eq!(ours["operationName"], e["name"]);
        let kind = ours["tags"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["key"] == "span.kind");
        assert_eq!(
            kind.map(|t| &t["value"]),
            Some(&Value::from("client")),
            "{ours}"
        );
        let duration_ms = ours["duration"].as_f64().unwrap() / 1000.0;
        let latency_ms = e["latency_ms"].as_f64().unwrap();
        assert!(
            (duration_ms - latency_ms).abs() <= 0.01,
            "{duration_ms} vs {latency_ms} ms"
        );
        assert!(parents(&trace).contains(span_id), "{trace}");
    }
}

/// A collector that is not there costs a warning, not the results.
#[test]
fn an_unreachable_collector_is_a_warning_and_the_results_are_written() {
    let target = Target::start(1, 2);
    let url = target.url("/hello");
    let collector = format!("http://127.0.0.1:{}", free_port());
    let r = run(&["--url", &url, "-n", "50", "--trace", "--otlp", &collector]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.total(), 50);
    assert!(
        r.stderr.contains("warning")
            && r.stderr.contains("--otlp")
            && r.stderr.contains(&collector),
        "{}",
        r.stderr
    );
}
