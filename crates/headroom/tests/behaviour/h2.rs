//! HTTP/2 against Debian's nginx, haproxy and h2o (over TLS with ALPN and
//! cleartext with prior knowledge) and against a hostile server on
//! Python's `h2` library (`common/h2_hostile.py`): every request counted
//! once and equal to the server's own count, connections as asked, each
//! misbehaviour its own class, no hang.

use crate::common::{
    capacity, free_port, run, scenario_dir, self_signed, wait_for_port, Nginx, Pki, ProcessGuard,
    Run,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// nginx with HTTP/2 over TLS (`tls_port`) and h2c (`clear_port`), logging
/// `$server_protocol $connection $status` per request; `extra` goes into
/// the server block.
struct NginxH2 {
    nginx: Nginx,
    tls_port: u16,
    clear_port: u16,
}

impl NginxH2 {
    fn start(pki: &Pki, extra: &str) -> NginxH2 {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cert.pem"), &pki.cert_pem).unwrap();
        std::fs::write(dir.path().join("key.pem"), &pki.key_pem).unwrap();
        let clear_port = free_port();
        let nginx = Nginx::start_http(dir, |d, port| {
            let d = d.display();
            format!(
                "log_format h2 '$server_protocol $connection $status';
  access_log {d}/access.log h2;
  http2_max_requests 1000000;
  server {{
    listen 127.0.0.1:{port} ssl http2 backlog=4096;
    listen 127.0.0.1:{clear_port} http2 backlog=4096;
    ssl_certificate {d}/cert.pem;
    ssl_certificate_key {d}/key.pem;
    {extra}
    location / {{ return 200 \"hello from nginx\\n\"; }}
  }}"
            )
        });
        wait_for_port(clear_port);
        let tls_port = nginx.port;
        NginxH2 {
            nginx,
            tls_port,
            clear_port,
        }
    }

    fn log(&self) -> Log {
        Log {
            lines: self.nginx.log_fields(),
            counted: None,
        }
    }
}

/// An access log's lines as `protocol connection …` fields, and the
/// server's own counter of requests where it keeps one: haproxy writes its
/// log to stdout without blocking and may drop a line, never a count.
struct Log {
    lines: Vec<Vec<String>>,
    counted: Option<u64>,
}

impl Log {
    /// Requests counted (else logged) with this protocol (`HTTP/2.0`,
    /// `HTTP/2`).
    fn requests(&self, protocol: &str) -> u64 {
        self.counted
            .unwrap_or_else(|| self.lines.iter().filter(|f| f[0] == protocol).count() as u64)
    }

    /// Distinct connections HTTP/2 requests came on (haproxy also logs a
    /// connection that sent none: the command line's check before load).
    fn connections(&self) -> usize {
        self.lines
            .iter()
            .filter(|f| f[0].starts_with("HTTP/2"))
            .map(|f| &f[1])
            .collect::<BTreeSet<_>>()
            .len()
    }
}

/// The server's count of `protocol` requests once its log has caught up
/// with `expected` (haproxy writes a line after the stream has closed), or
/// after 15 s (a machine saturated by the rest of the suite has made it
/// lag past 5 s).
fn logged(log: &impl Fn() -> Log, protocol: &str, expected: u64) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let n = log().requests(protocol);
        if n >= expected || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn by_protocol(r: &Run) -> BTreeMap<String, u64> {
    serde_json::from_value(r.results()["connections"]["by_protocol"].clone()).unwrap_or_default()
}

fn ok(r: &Run) -> u64 {
    r.results()["requests"]["ok"].as_u64().unwrap()
}

/// Closed and open model against one server's TLS and cleartext ports:
/// total = the server's count of HTTP/2 requests; connections as asked.
fn closed_and_open_models_count_exactly(
    name: &str,
    urls: [String; 2],
    ca: &Path,
    log: impl Fn() -> Log,
    protocol: &str,
) {
    let mut expected = 0;
    for url in &urls {
        // The CA to trust over TLS (none over cleartext).
        let ca_args: Vec<&str> = if url.starts_with("https") {
            vec!["--ca-file", ca.to_str().unwrap()]
        } else {
            Vec::new()
        };
        let run = |args: &[&str]| run(&[args, &ca_args[..]].concat());
        // 20 users, 5 streams each: 4 connections.
        let seen = log().connections();
        let r = run(&[
            "--url",
            url,
            "--http2",
            "--vus",
            "20",
            "--streams",
            "5",
            "--requests",
            "400",
        ]);
        assert_eq!(r.code, 0, "{name} {url}: {}", r.stderr);
        assert_eq!(ok(&r), 400, "{name} {url}: {}", r.results()["errors"]);
        assert_eq!(
            by_protocol(&r),
            BTreeMap::from([("h2".into(), 4)]),
            "{name} {url}"
        );
        assert_eq!(r.results()["meta"]["http_version"], "2");
        expected += 400;
        assert_eq!(logged(&log, protocol, expected), expected, "{name} {url}");
        assert_eq!(
            log().connections() - seen,
            4,
            "{name} {url}: connections used"
        );

        // h2load's -c 3 -m 4: 12 users on 3 connections. Enough requests
        // that a connection whose handshake a busy machine delayed still
        // carries some before the run ends (300 were done in ~80 ms, and on
        // CI one connection once opened after the last).
        let r = run(&[
            "--url",
            url,
            "--http2",
            "--connections",
            "3",
            "--streams",
            "4",
            "--requests",
            "3000",
        ]);
        assert_eq!(ok(&r), 3000, "{name} {url}: {}", r.results()["errors"]);
        assert_eq!(r.results()["config"]["vus"].as_u64(), Some(12));
        assert_eq!(by_protocol(&r)["h2"], 3, "{name} {url}");
        expected += 3000;
        assert_eq!(logged(&log, protocol, expected), expected, "{name} {url}");
        assert_eq!(
            log().connections() - seen - 4,
            3,
            "{name} {url}: connections used"
        );

        // Open model: arrivals share at most 2 connections.
        let r = run(&[
            "--url",
            url,
            "--http2",
            "--rate",
            "200",
            "--duration",
            "2s",
            "--connections",
            "2",
        ]);
        let total = r.total();
        assert!(
            total >= 300,
            "{name} {url}: {total} requests in 2 s at 200/s"
        );
        assert_eq!(ok(&r), total, "{name} {url}: {}", r.results()["errors"]);
        assert!(
            by_protocol(&r)["h2"] <= 2,
            "{name} {url}: {:?}",
            by_protocol(&r)
        );
        expected += total;
        assert_eq!(logged(&log, protocol, expected), expected, "{name} {url}");
    }
}

#[test]
fn nginx_over_tls_and_h2c_counts_every_stream() {
    let pki = self_signed();
    let server = NginxH2::start(&pki, "");
    let dir = scenario_dir(&[("ca.pem", &pki.cert_pem)]);
    closed_and_open_models_count_exactly(
        "nginx",
        [
            format!("https://127.0.0.1:{}/", server.tls_port),
            format!("http://127.0.0.1:{}/", server.clear_port),
        ],
        &dir.path().join("ca.pem"),
        || server.log(),
        "HTTP/2.0",
    );
}

/// A session over HTTP/2: a cookie set by one response and a value
/// extracted from its body go back on the next request, per user.
#[test]
fn a_session_keeps_its_cookies_and_extracted_values_over_http2() {
    let pki = self_signed();
    let server = NginxH2::start(
        &pki,
        r#"location /login { add_header Set-Cookie "sid=s$connection_requests; Path=/"; return 200 "token=t$connection_requests\n"; }
    location /me {
      set $ok "";
      if ($cookie_sid ~ "^s([0-9]+)$") { set $ok "c$1"; }
      if ($http_x_token ~ "^t([0-9]+)$") { set $ok "${ok}t$1"; }
      if ($ok !~ "^c([0-9]+)t\1$") { return 403 "cookie and token do not match: $ok\n"; }
      return 200 "me\n";
    }"#,
    );
    let dir = scenario_dir(&[("ca.pem", &pki.cert_pem)]);
    let scenario = format!(
        r#"
base_url = "https://127.0.0.1:{}"
[tls]
ca_file = "ca.pem"
[http]
version = "2"
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
extract = [ {{ name = "token", regex = "token=(t[0-9]+)" }} ]
[[request]]
name = "me"
path = "/me"
headers = {{ X-Token = "{{{{token}}}}" }}
check = [ {{ status = 200 }} ]
"#,
        server.tls_port
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
    assert_eq!(server.log().requests("HTTP/2.0"), 160);
    assert_eq!(by_protocol(&r), BTreeMap::from([("h2".into(), 2)]));
    // The summary and the report say what was spoken.
    assert!(
        r.stdout
            .contains("connections by protocol: h2 2 (at most 4 streams each)"),
        "{}",
        r.stdout
    );
    let report = std::fs::read_to_string(&html).unwrap();
    assert!(
        report.contains("HTTP 2 asked: h2 × 2 connections (4 streams each)"),
        "the HTML report names the protocol"
    );
}

/// The server's SETTINGS_MAX_CONCURRENT_STREAMS = 1 caps the streams on a
/// connection below `--streams`: the users wait their turn, nothing fails.
#[test]
fn a_server_stream_limit_of_one_is_kept() {
    let pki = self_signed();
    let server = NginxH2::start(&pki, "http2_max_concurrent_streams 1;");
    let url = format!("http://127.0.0.1:{}/", server.clear_port);
    let r = run(&["--url", &url, "--http2", "--vus", "10", "--requests", "500"]);
    assert_eq!(ok(&r), 500, "{}", r.results()["errors"]);
    assert_eq!(server.log().requests("HTTP/2.0"), 500);
    assert_eq!(by_protocol(&r)["h2"], 1);

    let hostile = Hostile::start("maxstreams1");
    let r = run(&[
        "--url",
        &hostile.url(),
        "--http2",
        "--vus",
        "10",
        "--requests",
        "300",
    ]);
    assert_eq!(ok(&r), 300, "{}", r.results()["errors"]);
    let counts = hostile.counts();
    assert_eq!(counts["answered"], 300);
    assert_eq!(
        counts["most_concurrent"], 1,
        "never two streams open at once"
    );
}

/// `--processes` splits users and connections over processes, and a
/// capacity search's steps each speak HTTP/2; every request is counted
/// once, as nginx counts them.
#[test]
fn processes_and_a_capacity_search_speak_http2() {
    let pki = self_signed();
    let server = NginxH2::start(&pki, "");
    let url = format!("http://127.0.0.1:{}/", server.clear_port);
    let r = run(&[
        "--url",
        &url,
        "--http2",
        "--vus",
        "20",
        "--streams",
        "5",
        "--requests",
        "400",
        "--processes",
        "2",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(ok(&r), 400, "{}", r.results()["errors"]);
    assert_eq!(by_protocol(&r), BTreeMap::from([("h2".into(), 4)]));
    assert_eq!(server.log().requests("HTTP/2.0"), 400);

    let r = capacity(&[
        "--url",
        &url,
        "--http2",
        "--slo",
        "p99<500ms",
        "--min",
        "100",
        "--max",
        "400",
        "--step-duration",
        "1s",
        "--warmup",
        "0s",
        "--pause",
        "0s",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let steps = r.results()["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    let mut sent = 0;
    for step in steps {
        let results = &step["results"];
        assert_eq!(results["meta"]["http_version"], "2");
        assert!(results["connections"]["by_protocol"]["h2"].as_u64() > Some(0));
        sent += results["requests"]["total"].as_u64().unwrap();
    }
    assert_eq!(server.log().requests("HTTP/2.0"), 400 + sent);
    assert_eq!(server.log().requests("HTTP/1.1"), 0);

    // The check before load holds for a capacity search too.
    let plain = Nginx::start();
    let r = capacity(&["--url", &plain.url("/"), "--http2", "--slo", "p99<500ms"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("prior knowledge"), "{}", r.stderr);
}

#[test]
fn http2_against_an_http1_only_server_is_refused_before_any_load_and_auto_falls_back() {
    let pki = self_signed();
    let nginx = Nginx::start_tls(&pki.cert_pem, &pki.key_pem);
    let dir = scenario_dir(&[("ca.pem", &pki.cert_pem)]);
    let ca = dir.path().join("ca.pem");
    let url = format!("https://127.0.0.1:{}/", nginx.port);
    let r = run(&[
        "--url",
        &url,
        "--http2",
        "--requests",
        "50",
        "--ca-file",
        ca.to_str().unwrap(),
    ]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("did not agree to HTTP/2") && r.stderr.contains(&url),
        "{}",
        r.stderr
    );
    assert_eq!(nginx.requests(), 0, "no load before the error");

    let r = run(&[
        "--url",
        &url,
        "--http-version",
        "auto",
        "--requests",
        "50",
        "--ca-file",
        ca.to_str().unwrap(),
    ]);
    assert_eq!(ok(&r), 50, "{}", r.stderr);
    assert!(
        by_protocol(&r).contains_key("http/1.1"),
        "{:?}",
        by_protocol(&r)
    );
    assert_eq!(r.results()["meta"]["http_version"], "auto");
    assert_eq!(nginx.requests(), 50);

    // Cleartext: an HTTP/1.1 server does not answer the HTTP/2 preface.
    let plain = Nginx::start();
    let r = run(&["--url", &plain.url("/"), "--http2", "--requests", "50"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("prior knowledge"), "{}", r.stderr);
    // Its log holds the HTTP/2 preface read as a request (`PRI *`), no more.
    assert!(
        plain.paths().iter().all(|p| p == "*"),
        "{:?}",
        plain.paths()
    );
}

fn require(tool: &str) -> String {
    ["/usr/sbin/", "/usr/bin/", "/usr/local/bin/"]
        .iter()
        .map(|d| format!("{d}{tool}"))
        .find(|p| Path::new(p).exists())
        .unwrap_or_else(|| panic!("{tool} is required for these tests (.ci/run installs it)"))
}

/// A server started from a config file in its own folder, its output to
/// `out.log` there.
struct Server {
    _guard: ProcessGuard,
    dir: tempfile::TempDir,
}

impl Server {
    fn start(dir: tempfile::TempDir, program: &str, args: &[&str], ports: &[u16]) -> Server {
        let out = std::fs::File::create(dir.path().join("out.log")).unwrap();
        let child = Command::new(program)
            .args(args)
            .current_dir(dir.path())
            .stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {program}: {e}"));
        let server = Server {
            _guard: ProcessGuard { child },
            dir,
        };
        for port in ports {
            wait_for_port(*port);
        }
        server
    }

    fn log(&self, file: &str) -> Log {
        let text = std::fs::read_to_string(self.dir.path().join(file)).unwrap_or_default();
        Log {
            lines: text
                .lines()
                .map(|l| l.split(' ').map(str::to_string).collect())
                .collect(),
            counted: None,
        }
    }

    /// haproxy's log, and the requests its frontends counted (`req_tot`
    /// of `show stat` on the stats socket `stats.sock`).
    fn haproxy_log(&self) -> Log {
        use std::io::{Read, Write};
        // haproxy may open its TCP listeners (what `start` waits for)
        // before its stats socket: wait for that too, bounded (10 s, for
        // a machine under CI's load), and fail if it never comes.
        let path = self.dir.path().join("stats.sock");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !path.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut socket =
            std::os::unix::net::UnixStream::connect(&path).expect("haproxy's stats socket");
        socket.write_all(b"show stat\n").unwrap();
        let mut stat = String::new();
        socket.read_to_string(&mut stat).unwrap();
        let mut rows = stat.lines();
        let header: Vec<&str> = rows
            .next()
            .unwrap_or("")
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let (svname, req_tot) = (column("svname"), column("req_tot"));
        let counted = rows
            .map(|r| r.split(',').collect::<Vec<_>>())
            .filter(|f| f.get(svname) == Some(&"FRONTEND"))
            .map(|f| f[req_tot].parse::<u64>().unwrap_or(0))
            .sum();
        Log {
            counted: Some(counted),
            ..self.log("out.log")
        }
    }
}

#[test]
fn haproxy_alpn_h2_and_proto_h2_count_every_stream() {
    let haproxy = require("haproxy");
    let pki = self_signed();
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("combined.pem");
    std::fs::write(&pem, format!("{}{}", pki.cert_pem, pki.key_pem)).unwrap();
    std::fs::write(dir.path().join("ca.pem"), &pki.cert_pem).unwrap();
    let (tls_port, clear_port) = (free_port(), free_port());
    let config = format!(
        "global
  stats socket {}/stats.sock
  log stdout format raw local0
  maxconn 4096
defaults
  mode http
  log global
  log-format \"%HV %cp %ST\"
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend tls
  bind 127.0.0.1:{tls_port} ssl crt {} alpn h2
  http-request return status 200 content-type text/plain string \"hello from haproxy\"
frontend clear
  bind 127.0.0.1:{clear_port} proto h2
  http-request return status 200 content-type text/plain string \"hello from haproxy\"
",
        dir.path().display(),
        pem.display()
    );
    std::fs::write(dir.path().join("haproxy.cfg"), config).unwrap();
    let ca = dir.path().join("ca.pem");
    let server = Server::start(
        dir,
        &haproxy,
        &["-db", "-f", "haproxy.cfg"],
        &[tls_port, clear_port],
    );
    closed_and_open_models_count_exactly(
        "haproxy",
        [
            format!("https://127.0.0.1:{tls_port}/"),
            format!("http://127.0.0.1:{clear_port}/"),
        ],
        &ca,
        || server.haproxy_log(),
        "HTTP/2.0",
    );
}

#[test]
fn h2o_over_tls_and_h2c_counts_every_stream() {
    let h2o = require("h2o");
    let pki = self_signed();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    std::fs::write(dir.path().join("cert.pem"), &pki.cert_pem).unwrap();
    std::fs::write(dir.path().join("ca.pem"), &pki.cert_pem).unwrap();
    std::fs::write(dir.path().join("key.pem"), &pki.key_pem).unwrap();
    std::fs::create_dir(dir.path().join("www")).unwrap();
    std::fs::write(dir.path().join("www/index.html"), "hello from h2o\n").unwrap();
    let (tls_port, clear_port) = (free_port(), free_port());
    let user = if unsafe { libc::geteuid() } == 0 {
        "user: root\n"
    } else {
        ""
    };
    let config = format!(
        "{user}pid-file: {d}/h2o.pid
error-log: {d}/error.log
access-log:
  path: {d}/access.log
  format: \"%H %{{connection-id}}x %s\"
hosts:
  \"127.0.0.1:{tls_port}\":
    listen:
      host: 127.0.0.1
      port: {tls_port}
      ssl:
        certificate-file: {d}/cert.pem
        key-file: {d}/key.pem
    paths:
      /:
        file.dir: {d}/www
  \"127.0.0.1:{clear_port}\":
    listen:
      host: 127.0.0.1
      port: {clear_port}
    paths:
      /:
        file.dir: {d}/www
"
    );
    std::fs::write(dir.path().join("h2o.conf"), config).unwrap();
    let ca = dir.path().join("ca.pem");
    let server = Server::start(dir, &h2o, &["-c", "h2o.conf"], &[tls_port, clear_port]);
    closed_and_open_models_count_exactly(
        "h2o",
        [
            format!("https://127.0.0.1:{tls_port}/"),
            format!("http://127.0.0.1:{clear_port}/"),
        ],
        &ca,
        || server.log("access.log"),
        "HTTP/2",
    );
}

/// `common/h2_hostile.py` in one of its modes, on a free port.
struct Hostile {
    _guard: ProcessGuard,
    dir: tempfile::TempDir,
    port: u16,
}

impl Hostile {
    fn start(mode: &str) -> Hostile {
        let dir = tempfile::tempdir().unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/h2_hostile.py");
        let port_file = dir.path().join("port");
        // Debian's python3, where python3-h2 is installed.
        let child = Command::new("/usr/bin/python3")
            .arg(script)
            .arg(mode)
            .arg(&port_file)
            .arg(dir.path().join("counts.json"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start the hostile HTTP/2 server (python3-h2)");
        let guard = ProcessGuard { child };
        let port = crate::common::port_from_file(&port_file, &format!("the {mode} server"));
        Hostile {
            _guard: guard,
            dir,
            port,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn counts(&self) -> BTreeMap<String, u64> {
        let text = std::fs::read_to_string(self.dir.path().join("counts.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

/// 20 users, 400 requests against the hostile server in `mode`, bounded
/// by a 3 s request timeout and a minute in all.
fn against(mode: &str, extra: &[&str]) -> (Run, BTreeMap<String, u64>, Value) {
    let server = Hostile::start(mode);
    let url = server.url();
    let mut args = vec![
        "--url",
        &url,
        "--http2",
        "--vus",
        "20",
        "--requests",
        "400",
        "--timeout",
        "3s",
        "--duration",
        "60s",
    ];
    args.extend_from_slice(extra);
    let r = run(&args);
    assert!(
        r.elapsed < Duration::from_secs(50),
        "{mode}: took {:?}",
        r.elapsed
    );
    let counts = server.counts();
    let errors = r.results()["errors"].clone();
    (r, counts, errors)
}

fn error(errors: &Value, class: &str) -> u64 {
    errors[class].as_u64().unwrap_or(0)
}

#[test]
fn a_goaway_mid_run_sends_the_unprocessed_streams_again() {
    let (r, counts, errors) = against("goaway", &[]);
    assert_eq!(ok(&r), 400, "{errors}");
    assert_eq!(counts["answered"], 400);
    let retried = r.results()["connections"]["h2_goaway_unprocessed"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        counts["unprocessed"] > 0,
        "the server left streams unprocessed"
    );
    assert_eq!(retried, counts["unprocessed"], "each sent again once");
}

#[test]
fn refused_streams_are_sent_again_once_and_counted() {
    let (r, counts, errors) = against("refuse", &[]);
    let retried = r.results()["connections"]["h2_refused"].as_u64().unwrap();
    let unretried = error(&errors, "h2_refused");
    assert_eq!(ok(&r), counts["answered"], "{errors}");
    assert_eq!(ok(&r) + unretried, 400, "{errors}");
    assert_eq!(retried + unretried, counts["refused"]);

    // A POST is not sent again: each refusal is its request's failure.
    let (r, counts, errors) = against("refuse", &["--method", "POST", "--body", "x"]);
    assert_eq!(r.results()["connections"]["h2_refused"].as_u64(), None);
    assert_eq!(error(&errors, "h2_refused"), counts["refused"]);
    assert_eq!(ok(&r), counts["answered"]);
}

/// A gRPC service the hostile server answers (an empty message, OK).
const GREETER_PROTO: &str = "syntax = \"proto3\";\npackage demo.v1;\n\
    message Hi { string name = 1; }\nservice Greeter { rpc SayHello (Hi) returns (Hi); }\n";

/// gRPC's transparent retry: a call the server never processed (refused)
/// goes once more whatever its method — a gRPC call is a POST, which an
/// HTTP request would not send again.
#[test]
fn refused_grpc_calls_are_sent_again_once_as_grpc_retries_them() {
    let server = Hostile::start("refuse");
    let dir = scenario_dir(&[("greeter.proto", GREETER_PROTO)]);
    let url = format!("grpc://127.0.0.1:{}", server.port);
    let proto = dir.path().join("greeter.proto");
    let r = run(&[
        "--grpc",
        &url,
        "--call",
        "demo.v1.Greeter/SayHello",
        "--proto",
        proto.to_str().unwrap(),
        "--vus",
        "20",
        "--requests",
        "400",
        "--timeout",
        "3s",
        "--duration",
        "60s",
    ]);
    let counts = server.counts();
    let errors = r.results()["errors"].clone();
    let retried = r.results()["connections"]["h2_refused"]
        .as_u64()
        .unwrap_or(0);
    let unretried = error(&errors, "h2_refused");
    assert_eq!(ok(&r), counts["answered"], "{errors}");
    assert_eq!(ok(&r) + unretried, 400, "{errors}");
    assert_eq!(retried + unretried, counts["refused"]);
    assert!(retried > 0, "every 4th stream is refused: {counts:?}");
}

/// gRPC's keepalive: with `--grpc-keepalive 100ms` each connection PINGs
/// the server every 100 ms while it is open (the server counts them);
/// without it, the one PING of the handshake only.
#[test]
fn grpc_keepalive_pings_each_connection() {
    let pings = |keepalive: &[&str]| {
        let server = Hostile::start("plain");
        let dir = scenario_dir(&[("greeter.proto", GREETER_PROTO)]);
        let url = format!("grpc://127.0.0.1:{}", server.port);
        let proto = dir.path().join("greeter.proto");
        let mut args = vec![
            "--grpc",
            &url,
            "--call",
            "demo.v1.Greeter/SayHello",
            "--proto",
            proto.to_str().unwrap(),
            "--rate",
            "10",
            "--duration",
            "1500ms",
        ];
        args.extend_from_slice(keepalive);
        let r = run(&args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let counts = server.counts();
        assert_eq!(ok(&r), counts["answered"]);
        (counts["pings"], counts["connections"])
    };
    let (without, connections) = pings(&[]);
    assert_eq!(without, connections, "the handshake's PING only");
    let (with, connections) = pings(&["--grpc-keepalive", "100ms"]);
    // 1.5 s open: about 15 a connection; 5 leaves room for a loaded machine.
    assert!(
        with >= connections * 5,
        "{with} PINGs on {connections} connections"
    );
}

#[test]
fn reset_streams_fail_once_each_and_the_connection_carries_on() {
    let (r, counts, errors) = against("reset", &[]);
    assert_eq!(error(&errors, "h2_stream_reset"), counts["reset"]);
    assert_eq!(ok(&r), counts["answered"]);
    assert_eq!(r.total(), 400);
    assert_eq!(by_protocol(&r)["h2"], 2, "resets do not close connections");
}

#[test]
fn a_window_held_at_zero_is_a_timeout_never_a_hang() {
    let server = Hostile::start("window0");
    let url = server.url();
    let r = run(&[
        "--url",
        &url,
        "--http2",
        "--method",
        "POST",
        "--body",
        "hello",
        "--vus",
        "5",
        "--requests",
        "10",
        "--timeout",
        "1s",
    ]);
    assert_eq!(r.error("request_timeout"), 10, "{}", r.results()["errors"]);
    assert!(r.elapsed < Duration::from_secs(20), "took {:?}", r.elapsed);
    assert_eq!(server.counts()["answered"], 0);
}

#[test]
fn ping_and_settings_floods_do_not_disturb_the_counts() {
    let (r, counts, errors) = against("floods", &[]);
    assert_eq!(ok(&r), 400, "{errors}");
    assert_eq!(counts["answered"], 400);
}

#[test]
fn a_megabyte_header_block_fails_its_stream_as_a_protocol_error() {
    // Python takes a while to encode a megabyte of headers: fewer users,
    // and time enough that none times out.
    let server = Hostile::start("bigheaders");
    let url = server.url();
    let r = run(&[
        "--url",
        &url,
        "--http2",
        "--vus",
        "5",
        "--requests",
        "100",
        "--timeout",
        "20s",
    ]);
    let errors = &r.results()["errors"];
    // Every 10th answer of a connection carries the block: the client
    // refuses it (a connection error), failing the streams open on it.
    let failed = error(errors, "h2_protocol_error");
    assert!(failed > 0, "{errors}");
    assert_eq!(ok(&r) + failed, 100, "{errors}");
    assert!(r.elapsed < Duration::from_secs(60), "took {:?}", r.elapsed);
}

#[test]
fn a_connection_closed_with_streams_open_fails_those_streams_once() {
    let (r, counts, errors) = against("close", &[]);
    let closed = error(&errors, "closed_before_response")
        + error(&errors, "closed_mid_response")
        + error(&errors, "connection_reset");
    assert!(closed > 0, "{errors}");
    assert_eq!(ok(&r) + closed, 400, "{errors}");
    // An answer written just before the close may be lost with it (the
    // server's RST discards it): the client never counts more than sent.
    assert!(ok(&r) <= counts["answered"]);
}
