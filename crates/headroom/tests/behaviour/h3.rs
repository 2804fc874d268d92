//! HTTP/3 over QUIC against Caddy (built by `.ci/quic-peers.sh` from the Go
//! module proxy) and a second implementation on Python's aioquic
//! (`common/h3_server.py`, also the hostile server): every request counted
//! once and equal to the server's own count, the closed and open models and
//! a session, and each misbehaviour — rejected and reset streams, a closed
//! connection, a server that stops answering, a server without HTTP/3 — its
//! own class, bounded, never a hang.

use crate::common::{
    free_port, peer_home, run, scenario_dir, self_signed, wait_for_port, Nginx, Pki, ProcessGuard,
    Run,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Caddy serving HTTP/1.1, 2 and 3 on one port (TCP and UDP), with a
/// certificate made in the test and a JSON access log (its count).
struct Caddy {
    _guard: ProcessGuard,
    dir: tempfile::TempDir,
    port: u16,
}

impl Caddy {
    fn start(pki: &Pki) -> Caddy {
        let bin = peer_home("HEADROOM_CADDY", "caddy-2.11.9").join("caddy");
        assert!(
            bin.exists(),
            "{} is missing: run .ci/quic-peers.sh",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        std::fs::write(dir.path().join("cert.pem"), &pki.cert_pem).unwrap();
        std::fs::write(dir.path().join("key.pem"), &pki.key_pem).unwrap();
        let port = free_port();
        let config = format!(
            r#"{{
	admin off
	auto_https off
	storage file_system {d}/storage
	servers {{
		protocols h1 h2 h3
	}}
}}
https://127.0.0.1:{port} {{
	tls {d}/cert.pem {d}/key.pem
	log {{
		output file {d}/access.log
		format json
	}}
	handle /login {{
		header Set-Cookie "sid={{http.request.uuid}}; Path=/"
		respond "token={{http.request.uuid}}" 200
	}}
	handle /me {{
		respond "cookie={{http.request.header.Cookie}};token={{http.request.header.X-Token}}" 200
	}}
	handle {{
		respond "hello from caddy" 200
	}}
}}
"#
        );
        std::fs::write(dir.path().join("Caddyfile"), config).unwrap();
        let child = Command::new(&bin)
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(dir.path().join("Caddyfile"))
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path())
            .env("XDG_CONFIG_HOME", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start caddy");
        let guard = ProcessGuard { child };
        wait_for_port(port);
        Caddy {
            _guard: guard,
            dir,
            port,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    fn ca(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    /// Requests Caddy logged over `proto` (`HTTP/3.0`), once its log has
    /// caught up with `expected` or after 15 s.
    fn requests(&self, proto: &str, expected: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let text =
                std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
            let n = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| v["request"]["proto"] == proto)
                .count() as u64;
            if n >= expected || Instant::now() > deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn by_protocol(r: &Run) -> BTreeMap<String, u64> {
    serde_json::from_value(r.results()["connections"]["by_protocol"].clone()).unwrap_or_default()
}

fn ok(r: &Run) -> u64 {
    r.results()["requests"]["ok"].as_u64().unwrap()
}

/// Closed model (h2load's -c/-m shape), open model, both counted exactly
/// against Caddy's access log; the QUIC figures in results and summary.
#[test]
fn closed_and_open_loads_over_http3_count_exactly_against_caddy() {
    let pki = self_signed();
    let caddy = Caddy::start(&pki);
    let url = caddy.url("/");
    let ca = caddy.ca();
    let ca = ca.to_str().unwrap();

    // 20 users, 5 streams each: 4 QUIC connections.
    let r = run(&[
        "--url",
        &url,
        "--http3",
        "--ca-file",
        ca,
        "--vus",
        "20",
        "--streams",
        "5",
        "--requests",
        "1000",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(ok(&r), 1000, "{}", r.results()["errors"]);
    assert_eq!(by_protocol(&r), BTreeMap::from([("h3".into(), 4)]));
    assert_eq!(r.results()["meta"]["http_version"], "3");
    let quic = &r.results()["connections"]["quic"];
    assert_eq!(quic["handshakes"], 4, "{quic}");
    assert!(quic["packets_sent"].as_u64().unwrap() > 0, "{quic}");
    assert!(quic["handshake_ms_mean"].as_f64().unwrap() > 0.0, "{quic}");
    // A time to first byte for every response.
    assert_eq!(quic["ttfb_ms"]["count"], 1000, "{quic}");
    assert!(
        r.stdout.contains("HTTP/3 time to first byte: p50"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("connections by protocol: h3 4 (at most 5 streams each)")
            && r.stdout.contains("QUIC: 4 handshakes (1-RTT)"),
        "{}",
        r.stdout
    );
    assert_eq!(caddy.requests("HTTP/3.0", 1000), 1000);

    // Open model: 300 req/s for 2 s over at most 2 connections.
    let r = run(&[
        "--url",
        &url,
        "--http3",
        "--ca-file",
        ca,
        "--rate",
        "300",
        "--duration",
        "2s",
        "--connections",
        "2",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let total = r.total();
    assert!(total >= 500, "{total} of ~600 arrivals sent");
    assert_eq!(ok(&r), total, "{}", r.results()["errors"]);
    assert!(by_protocol(&r)["h3"] <= 2, "{:?}", by_protocol(&r));
    assert_eq!(caddy.requests("HTTP/3.0", 1000 + total), 1000 + total);
}

/// A session over HTTP/3: a cookie from one response and a value taken
/// from its body go with the user's next request, whichever stream or
/// connection carries it (Caddy echoes what it received).
#[test]
fn a_session_keeps_its_cookies_and_extracted_values_over_http3() {
    let pki = self_signed();
    let caddy = Caddy::start(&pki);
    let dir = scenario_dir(&[("ca.pem", &pki.cert_pem)]);
    let scenario = format!(
        r#"
base_url = "https://127.0.0.1:{}"
[tls]
ca_file = "ca.pem"
[http]
version = "3"
max_streams = 4
[load]
vus = 8
iterations = 10
[[session]]
name = "login then me"
steps = [
  {{ request = "login" }},
  {{ request = "me" }},
]
[[request]]
name = "login"
path = "/login"
extract = [ {{ name = "token", regex = "token=([0-9a-f-]+)" }} ]
[[request]]
name = "me"
path = "/me"
headers = {{ X-Token = "{{{{token}}}}" }}
check = [ {{ body_contains = "cookie=sid={{{{token}}}};token={{{{token}}}}" }} ]
"#,
        caddy.port
    );
    std::fs::write(dir.path().join("s.toml"), scenario).unwrap();
    let html = dir.path().join("report.html");
    let r = run(&[
        dir.path().join("s.toml").to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(ok(&r), 160, "{}", r.results()["errors"]);
    assert_eq!(by_protocol(&r), BTreeMap::from([("h3".into(), 2)]));
    assert_eq!(caddy.requests("HTTP/3.0", 160), 160);
    let report = std::fs::read_to_string(&html).unwrap();
    assert!(
        report.contains("HTTP 3 asked: h3 × 2 connections (4 streams each)"),
        "the HTML report names the protocol"
    );
}

/// Scripts over HTTP/3: a `js` step, an `if`, a `before` hook that sets a
/// header from a variable and an `after` hook that judges the answer run
/// on QUIC streams as they do on TCP; every count is Caddy's.
#[test]
fn scripts_run_over_http3() {
    let pki = self_signed();
    let caddy = Caddy::start(&pki);
    let dir = scenario_dir(&[("ca.pem", &pki.cert_pem)]);
    let scenario = format!(
        r#"
base_url = "https://127.0.0.1:{}"
[tls]
ca_file = "ca.pem"
[http]
version = "3"
max_streams = 4
[script]
file = "s.js"
[load]
vus = 8
iterations = 10
[[session]]
name = "login, then me every other time"
steps = [
  {{ request = "login" }},
  {{ js = "vars.n = Number(vars.n || 0) + 1" }},
  {{ if = "vars.n % 2 === 0", steps = [ {{ request = "me" }} ] }},
]
[[request]]
name = "login"
path = "/login"
extract = [ {{ name = "token", regex = "token=([0-9a-f-]+)" }} ]
[[request]]
name = "me"
path = "/me"
before = "carry"
after = "return response.body.includes('token=' + vars.token)"
"#,
        caddy.port
    );
    std::fs::write(dir.path().join("s.toml"), scenario).unwrap();
    std::fs::write(
        dir.path().join("s.js"),
        "export function carry(ctx) { ctx.request.headers['X-Token'] = ctx.vars.token; }\n",
    )
    .unwrap();
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // 8 users × 10 iterations: 80 logins, 40 `me`s (every other iteration).
    assert_eq!(ok(&r), 120, "{}", r.results()["errors"]);
    assert_eq!(by_protocol(&r), BTreeMap::from([("h3".into(), 2)]));
    assert_eq!(caddy.requests("HTTP/3.0", 120), 120);
    let results = r.results();
    let scripts = results["scripts"].as_object().unwrap();
    assert_eq!(scripts["carry"]["calls"], 40, "{}", results["scripts"]);
    assert_eq!(scripts["vars.n % 2 === 0"]["calls"], 80);
    for (name, f) in scripts {
        assert_eq!(f["errors"], 0, "{name}: {f}");
        assert_eq!(f["failures"].as_u64().unwrap_or(0), 0, "{name}: {f}");
    }
}

/// `common/h3_server.py` (aioquic) in one of its modes, on a free UDP port.
struct AioQuic {
    _guard: ProcessGuard,
    dir: tempfile::TempDir,
    port: u16,
}

impl AioQuic {
    fn start(mode: &str) -> AioQuic {
        let python = peer_home("HEADROOM_AIOQUIC", "aioquic-1.2.0").join("bin/python");
        assert!(
            python.exists(),
            "{} is missing: run .ci/quic-peers.sh",
            python.display()
        );
        let pki = self_signed();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cert.pem"), &pki.cert_pem).unwrap();
        std::fs::write(dir.path().join("key.pem"), &pki.key_pem).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/h3_server.py");
        let port_file = dir.path().join("port");
        let child = Command::new(python)
            .arg(script)
            .arg(mode)
            .arg(&port_file)
            .arg(dir.path().join("counts.json"))
            .arg(dir.path().join("cert.pem"))
            .arg(dir.path().join("key.pem"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start the aioquic server");
        let guard = ProcessGuard { child };
        let port = crate::common::port_from_file(&port_file, &format!("the {mode} server"));
        AioQuic {
            _guard: guard,
            dir,
            port,
        }
    }

    fn counts(&self) -> BTreeMap<String, u64> {
        let text = std::fs::read_to_string(self.dir.path().join("counts.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

/// 10 users, `requests` requests against the aioquic server in `mode`,
/// bounded by a 2 s request timeout and a minute in all.
fn against(mode: &str, requests: u64) -> (Run, BTreeMap<String, u64>) {
    let server = AioQuic::start(mode);
    let url = format!("https://127.0.0.1:{}/", server.port);
    let requests = requests.to_string();
    let r = run(&[
        "--url",
        &url,
        "--http3",
        "--insecure",
        "--vus",
        "10",
        "--streams",
        "5",
        "--requests",
        &requests,
        "--timeout",
        "2s",
        "--connect-timeout",
        "1s",
        "--duration",
        "60s",
    ]);
    assert!(
        r.elapsed < Duration::from_secs(60),
        "{mode}: bounded, took {:?}",
        r.elapsed
    );
    let counts = server.counts();
    (r, counts)
}

#[test]
fn a_second_implementation_counts_the_same() {
    let (r, counts) = against("ok", 500);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(ok(&r), 500, "{}", r.results()["errors"]);
    assert_eq!(counts["answered"], 500);
    assert_eq!(by_protocol(&r), BTreeMap::from([("h3".into(), 2)]));
}

/// H3_REQUEST_REJECTED never reached the application: each rejected GET
/// goes once more on another connection; one rejected again fails as
/// `h3_refused`. Every rejection is counted once, on one side or the other.
#[test]
fn rejected_streams_are_sent_again_and_counted() {
    let (r, counts) = against("reject", 400);
    assert_eq!(r.total(), 400);
    assert_eq!(
        ok(&r) + r.error("h3_refused"),
        400,
        "{}",
        r.results()["errors"]
    );
    assert_eq!(
        counts["answered"],
        ok(&r),
        "the server answered each OK once"
    );
    let retried = r.results()["connections"]["h3_refused"].as_u64().unwrap();
    assert!(retried > 0, "{counts:?}");
    // The same retries, by reason, in `requests.retried`.
    assert_eq!(
        r.results()["requests"]["retried"]["h3_refused"].as_u64(),
        Some(retried)
    );
    assert_eq!(
        retried + r.error("h3_refused"),
        counts["rejected"],
        "{counts:?}"
    );
    assert_eq!(
        r.results()["connections"]["quic"]["stream_resets"]["H3_REQUEST_REJECTED"].as_u64(),
        Some(counts["rejected"])
    );
}

/// Other resets fail their stream once, under their class and code; the
/// connection's other streams go on.
#[test]
fn reset_streams_fail_once_each_by_code() {
    let (r, counts) = against("reset", 400);
    assert_eq!(r.total(), 400);
    assert_eq!(r.error("h3_stream_reset"), counts["reset"], "{counts:?}");
    assert_eq!(ok(&r), 400 - counts["reset"], "{}", r.results()["errors"]);
    assert_eq!(
        r.results()["connections"]["quic"]["stream_resets"]["H3_INTERNAL_ERROR"].as_u64(),
        Some(counts["reset"])
    );
}

/// A connection the server closes with an application error: its open
/// streams fail as `h3_connection_error`, new ones go on a new connection;
/// the client's total is what it sent, the server's answers all OK.
#[test]
fn a_connection_closed_under_load_fails_only_its_open_streams() {
    let (r, counts) = against("close", 400);
    assert_eq!(r.total(), 400);
    assert!(counts["closed"] >= 1, "{counts:?}");
    let failed = r.error("h3_connection_error");
    assert_eq!(ok(&r) + failed, 400, "{}", r.results()["errors"]);
    assert!(
        ok(&r) >= counts["answered"] - 10 * counts["closed"],
        "{counts:?}"
    );
    assert!(
        r.results()["connections"]["quic"]["closed"]["by_server:H3_INTERNAL_ERROR"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{}",
        r.results()["connections"]["quic"]
    );
}

/// A server that stops answering (every datagram dropped after 30
/// answers): the requests in flight and after time out, bounded by the
/// request timeout, and the run ends.
#[test]
fn a_server_that_stops_answering_times_out_without_hanging() {
    let (r, counts) = against("silent", 100);
    assert_eq!(counts["answered"], 30, "{counts:?}");
    assert_eq!(ok(&r), 30, "{}", r.results()["errors"]);
    let timed_out = r.error("request_timeout") + r.error("quic_idle_timeout");
    assert_eq!(ok(&r) + timed_out + r.error("connect_timeout"), r.total());
    assert!(timed_out > 0, "{}", r.results()["errors"]);
}

/// `--0rtt`: connections the server closes (after 50 answers each) are
/// resumed with a session ticket and their first request goes as early
/// data, which the server accepts; with `resume-reject` no ticket is ever
/// found again and the early data is refused — the request, which never
/// reached the application, goes once more on another connection, and
/// later connections wait for their handshake (no 0-RTT after a refusal).
#[test]
fn zero_rtt_resumes_connections_and_refused_early_data_is_sent_again() {
    for mode in ["resume", "resume-reject"] {
        let server = AioQuic::start(mode);
        let url = format!("https://127.0.0.1:{}/", server.port);
        let r = run(&[
            "--url",
            &url,
            "--http3",
            "--0rtt",
            "--insecure",
            "--vus",
            "1",
            "--streams",
            "1",
            "--requests",
            "200",
            "--timeout",
            "2s",
            "--duration",
            "60s",
        ]);
        let counts = server.counts();
        let results = r.results();
        let quic = &results["connections"]["quic"];
        // The server closes right after its 50th answer: that answer may
        // be lost with the connection (quinn drops what was not yet read),
        // a failure as it would be without 0-RTT. Every request reached
        // the server once.
        let closed_under = r.error("h3_connection_error");
        assert_eq!(ok(&r) + closed_under, 200, "{mode}: {}", results["errors"]);
        assert!(closed_under <= counts["closed"], "{mode}: {counts:?}");
        assert_eq!(counts["answered"], r.total(), "{mode}: {counts:?}");
        let resumed = quic["handshakes_0rtt"].as_u64().unwrap_or(0);
        assert!(resumed >= 1, "{mode}: {quic}");
        if mode == "resume" {
            assert_eq!(
                quic["zero_rtt_accepted"].as_u64(),
                Some(counts["early_data_accepted"])
            );
            assert_eq!(counts["early_data_accepted"], resumed, "{mode}: {counts:?}");
        } else {
            assert_eq!(counts["early_data_accepted"], 0, "{counts:?}");
            assert_eq!(quic["zero_rtt_rejected"].as_u64(), Some(resumed), "{quic}");
            assert_eq!(resumed, 1, "no 0-RTT after the refusal: {quic}");
            assert_eq!(
                results["connections"]["quic_0rtt_rejected"].as_u64(),
                Some(1),
                "{}",
                results["connections"]
            );
            assert_eq!(
                results["requests"]["retried"]["quic_0rtt_rejected"].as_u64(),
                Some(1),
                "{}",
                results["requests"]
            );
        }
    }
}

/// HTTP/3 asked of a server without it: a clear error before any load;
/// of an http:// URL: refused as a mistake in the command.
#[test]
fn http3_asked_of_a_server_without_it_is_a_clear_error() {
    let pki = self_signed();
    let nginx = Nginx::start_tls(&pki.cert_pem, &pki.key_pem);
    let url = format!("https://127.0.0.1:{}/", nginx.port);
    let r = run(&[
        "--url",
        &url,
        "--http3",
        "--insecure",
        "--requests",
        "10",
        "--connect-timeout",
        "1s",
    ]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("did not answer a QUIC handshake on UDP port")
            && r.stderr.contains("--http2"),
        "{}",
        r.stderr
    );
    assert!(r.results.is_none(), "no load, no results");

    let r = run(&["--url", "http://127.0.0.1:9/", "--http3", "--requests", "1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("must be https://"), "{}", r.stderr);
}
