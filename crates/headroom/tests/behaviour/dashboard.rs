//! `--dashboard`: the live page in headless Chromium while a run goes and
//! after it ended (its figures against results.json); its buttons clicked
//! in Chromium during a live run and a live study (the DevTools protocol:
//! `common/cdp.rs`) as a person would; the stop button's request; the
//! token.

use crate::common::cdp::Browser;
use crate::common::chromium::{chromium_args, shots};
use crate::common::{free_port, headroom_bin, wait_for_port, ProcessGuard, Target};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `headroom run ARGS --out OUT` in the background.
fn start_run(args: &[&str], out: &Path) -> ProcessGuard {
    start("run", args, out)
}

/// `headroom SUBCOMMAND ARGS --out OUT` in the background.
fn start(sub: &str, args: &[&str], out: &Path) -> ProcessGuard {
    let child = Command::new(headroom_bin())
        .arg(sub)
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    ProcessGuard { child }
}

/// The page's DOM once Chromium has run it (headless Chromium holds its
/// virtual clock while the event stream is open: this is the page after
/// the run's final event); a screenshot as `shot` when given.
fn page_after(url: &str, ms: u32, shot: Option<&str>) -> String {
    let work = tempfile::tempdir().unwrap();
    let dom = Command::new("chromium")
        .args(chromium_args(&work.path().join("profile")))
        .arg(format!("--virtual-time-budget={ms}"))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium is installed (.ci/run installs it)");
    if let Some(shot) = shot {
        let png = shots().join(shot);
        let status = Command::new("chromium")
            .args(chromium_args(&work.path().join("profile2")))
            .args(["--window-size=1200,1500", "--hide-scrollbars"])
            .arg(format!("--virtual-time-budget={ms}"))
            .arg(format!("--screenshot={}", png.display()))
            .arg(url)
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
    }
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

/// The text of the element with this id.
fn text_of(dom: &str, id: &str) -> String {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the page"));
    let rest = &dom[at..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest[start..].find('<').unwrap() + start;
    rest[start..end].to_string()
}

fn number(text: &str) -> u64 {
    text.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {text}"))
}

/// One HTTP request to the dashboard, as curl sends it; the status code.
fn http(port: u16, method: &str, path: &str) -> u16 {
    forged(port, method, path, "Host: 127.0.0.1")
}

/// A GET's status code and body.
fn http_body(port: u16, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// POST `body` to `path`; the status code.
fn post(port: u16, path: &str, body: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

/// One request with `headers` (CRLF-separated, Host included) as a forged
/// client sends it; the status code.
fn forged(port: u16, method: &str, path: &str, headers: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\n{headers}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

/// Another site: a page at `http://127.0.0.1:PORT/` — another origin than
/// the dashboard's (another port; Chromium here resolves nothing else) —
/// whose script posts to the dashboard's /stop as a cross-site form would,
/// then says so in its title. Serves until the test ends.
fn another_site(dashboard: u16) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let page = format!(
        "<!doctype html><title>loading</title><script>\
         fetch('http://127.0.0.1:{dashboard}/stop', {{method: 'POST', mode: 'no-cors', body: 'x'}})\
         .then(() => document.title = 'sent', e => document.title = 'failed ' + e);</script>"
    );
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = crate::common::read_request_head(&mut stream);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    port
}

/// The dashboard as a security surface, without a token (loopback): a
/// forged client naming another host (DNS rebinding) is refused every
/// path; a POST whose Origin or Sec-Fetch-Site says another site
/// (request forgery) is refused; and a real browser on another origin,
/// whose script posts to /stop, does not stop the run. The page's own
/// POST (same origin) and a client without an Origin (curl) still stop it.
#[test]
fn requests_made_on_another_sites_behalf_are_refused() {
    let _light = crate::common::light();
    let target = Target::start(1, 4);
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let url = format!("{}/hello", target.base);
    let addr = format!("--dashboard=127.0.0.1:{port}");
    let mut run = start_run(&["--url", &url, "--rate", "20", "-d", "120s", &addr], &out);
    wait_for_port(port);
    let rebound = format!("Host: rebind.example:{port}");
    for (method, path) in [("GET", "/"), ("GET", "/events"), ("POST", "/stop")] {
        assert_eq!(forged(port, method, path, &rebound), 403, "{method} {path}");
    }
    let ours = format!("Host: 127.0.0.1:{port}");
    for forgery in [
        "Origin: http://evil.example",
        "Origin: null",
        "Sec-Fetch-Site: cross-site",
    ] {
        let headers = format!("{ours}\r\n{forgery}");
        assert_eq!(forged(port, "POST", "/stop", &headers), 403, "{forgery}");
    }
    assert_eq!(forged(port, "GET", "/", &ours), 200);

    let site = another_site(port);
    let mut browser = Browser::open(&format!("http://127.0.0.1:{site}/"));
    let answered = "document.title === 'sent' || document.title.startsWith('failed')";
    browser.wait_for(answered, Duration::from_secs(60));
    assert_eq!(browser.eval("document.title"), "sent");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        run.child.try_wait().unwrap().is_none(),
        "another site's page stopped the run"
    );

    // The dashboard's own page may stop it.
    let own = format!("{ours}\r\nOrigin: http://127.0.0.1:{port}\r\nSec-Fetch-Site: same-origin");
    assert_eq!(forged(port, "POST", "/stop", &own), 200);
    assert_eq!(wait_for_exit(&mut run, Duration::from_secs(30)), 130);
    let mut stderr = String::new();
    (run.child.stderr.take().unwrap())
        .read_to_string(&mut stderr)
        .unwrap();
    let from_browser =
        format!("refused POST /stop: a POST from the page of \"http://127.0.0.1:{site}\"");
    assert!(
        stderr.contains(&from_browser),
        "the browser's POST never came: {stderr}"
    );
    assert!(stderr.contains("rebound DNS name"), "{stderr}");
}

/// The event stream's `data:` lines read for `long`.
pub fn events_for(port: u16, long: Duration) -> Vec<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + long;
    let mut text = Vec::new();
    let mut buf = [0u8; 65536];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

/// The whole event stream once it has ended (the page lingers after the
/// run, so the stream is read again until its last event is `end`).
pub(crate) fn events_until_end(port: u16, within: Duration, what: &str) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + within;
    loop {
        let events: Vec<serde_json::Value> = events_for(port, Duration::from_millis(1000))
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect();
        if events.last().is_some_and(|e| e["kind"] == "end") {
            return events;
        }
        assert!(Instant::now() < deadline, "{what}");
    }
}

fn wait_for_exit(run: &mut ProcessGuard, within: Duration) -> i32 {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = run.child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_page_follows_the_run_and_ends_on_the_results_figures() {
    let target = Target::start(1, 4);
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let url = format!("{}/sleep?ms=2", target.base);
    let addr = format!("--dashboard=127.0.0.1:{port}");
    let mut run = start_run(
        &[
            "--url",
            &url,
            "--rate",
            "100",
            "-d",
            "6s",
            &addr,
            "--dashboard-linger",
            "60s",
        ],
        &out,
    );
    wait_for_port(port);
    let page = format!("http://127.0.0.1:{port}/");
    // While it runs: one event per second, in order, the totals growing.
    let seconds = events_for(port, Duration::from_millis(2500));
    assert!(seconds[0].contains("\"kind\":\"start\""), "{seconds:?}");
    assert!(seconds[1].contains("\"kind\":\"run_start\""), "{seconds:?}");
    let live: Vec<serde_json::Value> = seconds[2..]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(live.len() >= 2, "{seconds:?}");
    // Each second: its statuses by class, and the distribution so far
    // (percentiles rising to the max).
    for second in &live {
        assert_eq!(
            second["status_classes"]["2xx"], second["requests"],
            "{second}"
        );
        let d: Vec<f64> = second["distribution"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[1].as_f64().unwrap())
            .collect();
        assert_eq!(d.len(), 9, "{second}");
        assert!(d.windows(2).all(|w| w[0] <= w[1]), "{d:?}");
    }
    for (i, pair) in live.windows(2).enumerate() {
        assert_eq!(pair[0]["kind"], "second");
        assert_eq!(
            pair[1]["t_s"].as_u64(),
            pair[0]["t_s"].as_u64().map(|t| t + 1),
            "{i}"
        );
        assert!(pair[1]["total"]["requests"].as_u64() > pair[0]["total"]["requests"].as_u64());
    }
    let so_far = live.last().unwrap()["total"]["requests"].as_u64().unwrap();
    // After it: the results' totals exactly (the page stays up for the
    // linger, and the run's files are written before it).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !out.exists() {
        assert!(Instant::now() < deadline, "no results");
        std::thread::sleep(Duration::from_millis(100));
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let done = page_after(&page, 3000, Some("dashboard-run.png"));
    assert_eq!(text_of(&done, "state"), "done");
    // Every second of the 6 s run drawn (the last one ends with the run:
    // it is in the final figures).
    let body = &done[done.find("<body").unwrap()..];
    let body = &body[..body.find('>').unwrap()];
    assert!(
        ["5", "6"]
            .iter()
            .any(|n| body.contains(&format!("data-points=\"{n}\""))),
        "{body}"
    );
    assert!(done.contains("class=\"uplot"), "no chart drawn");
    for (id, field) in [
        ("total-requests", "total"),
        ("total-ok", "ok"),
        ("total-failed", "failed"),
    ] {
        assert_eq!(
            number(&text_of(&done, id)),
            results["requests"][field].as_u64().unwrap(),
            "{id}"
        );
    }
    assert!(results["requests"]["total"].as_u64().unwrap() > so_far);
    // The HTML report of the same results, linked at the end.
    assert!(done.contains("id=\"report-link\""), "no report link");
    let (status, report) = http_body(port, "/report");
    assert_eq!(status, 200);
    assert!(
        report.contains("<!DOCTYPE html>") && report.contains(&url),
        "{}",
        &report[..200.min(report.len())]
    );
    // A second browser, joining late, gets the whole history.
    let again = page_after(&page, 3000, None);
    assert_eq!(
        text_of(&again, "total-requests"),
        text_of(&done, "total-requests")
    );
    unsafe { libc::kill(run.pid(), libc::SIGTERM) };
    wait_for_exit(&mut run, Duration::from_secs(20));
}

#[test]
fn the_stop_button_ends_the_run_gracefully_and_keeps_the_results() {
    let target = Target::start(1, 4);
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let url = format!("{}/hello", target.base);
    let addr = format!("--dashboard=127.0.0.1:{port}");
    let mut run = start_run(&["--url", &url, "--rate", "50", "-d", "60s", &addr], &out);
    wait_for_port(port);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(http(port, "POST", "/stop"), 200);
    // As Ctrl-C: 130, and everything written.
    assert_eq!(wait_for_exit(&mut run, Duration::from_secs(30)), 130);
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(results["stop_reason"], "stopped from the dashboard");
    assert!(results["requests"]["ok"].as_u64().unwrap() > 0);
    assert!(results["duration_s"].as_f64().unwrap() < 30.0);
}

/// As a person would: the page open in Chromium while the run goes, its
/// figures and chart seen growing (and, the run traced, its slowest
/// requests listed with their trace IDs), the stop button clicked; the
/// run ends as Ctrl-C ends it, its results written, and the page shows
/// exactly the results' totals and slowest.
#[test]
fn a_person_watches_the_page_and_clicks_stop() {
    let _light = crate::common::light();
    let target = Target::start(1, 4);
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let url = format!("{}/hello", target.base);
    let addr = format!("--dashboard=127.0.0.1:{port}");
    let args = [
        "--url",
        &url,
        "--rate",
        "50",
        "-d",
        "120s",
        &addr,
        "--dashboard-linger",
        "60s",
        "--trace",
    ];
    let mut run = start_run(&args, &out);
    wait_for_port(port);
    let mut browser = Browser::open(&format!("http://127.0.0.1:{port}/"));
    let points = "Number(document.body.dataset.points || 0)";
    browser.wait_for(&format!("{points} >= 2"), Duration::from_secs(60));
    // A traced run: its slowest requests listed live, with their IDs.
    let listed = "[...document.querySelectorAll('#slowest tbody code')].map(c => c.textContent)";
    browser.wait_for(&format!("{listed}.length > 0"), Duration::from_secs(30));
    let (seen, drawn) = (
        number(&browser.text("total-requests")),
        browser.eval(points),
    );
    browser.wait_for(&format!("{points} > {drawn}"), Duration::from_secs(60));
    assert!(
        number(&browser.text("total-requests")) > seen,
        "the totals never grew"
    );
    assert!(!out.exists(), "the run ended by itself");

    browser.eval("document.getElementById('stop').click()");
    // The page says so, the run ends with everything written.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !out.exists() {
        assert!(Instant::now() < deadline, "no results after the click");
        std::thread::sleep(Duration::from_millis(100));
    }
    browser.wait_for(
        "document.getElementById('state').textContent.startsWith('stopped')",
        Duration::from_secs(30),
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(results["stop_reason"], "stopped from the dashboard");
    assert!(results["duration_s"].as_f64().unwrap() < 100.0);
    for (id, field) in [
        ("total-requests", "total"),
        ("total-ok", "ok"),
        ("total-failed", "failed"),
    ] {
        assert_eq!(
            number(&browser.text(id)),
            results["requests"][field].as_u64().unwrap(),
            "{id} on the page"
        );
    }
    assert!(browser.eval("document.getElementById('stop').disabled") == true);
    // The list now is results.json's ten slowest, in rank order.
    let mut ranked: Vec<&serde_json::Value> = results["exemplars"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["rank"].is_null())
        .collect();
    ranked.sort_by_key(|e| e["rank"].as_u64());
    let expected: Vec<serde_json::Value> = ranked
        .iter()
        .take(10)
        .map(|e| e["trace_id"].clone())
        .collect();
    assert_eq!(browser.eval(listed), serde_json::Value::Array(expected));
    // Stopped, not finished: 130, as Ctrl-C (the linger ends with SIGTERM).
    unsafe { libc::kill(run.pid(), libc::SIGTERM) };
    assert_eq!(wait_for_exit(&mut run, Duration::from_secs(30)), 130);
}

#[test]
fn with_a_token_every_request_needs_it_and_off_loopback_one_is_required() {
    let target = Target::start(1, 4);
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let url = format!("{}/hello", target.base);
    let addr = format!("--dashboard=127.0.0.1:{port}");
    let mut run = start_run(
        &[
            "--url",
            &url,
            "--rate",
            "50",
            "-d",
            "3s",
            &addr,
            "--dashboard-token",
            "s3cret",
        ],
        &out,
    );
    wait_for_port(port);
    assert_eq!(http(port, "GET", "/"), 401);
    assert_eq!(http(port, "GET", "/events"), 401);
    assert_eq!(http(port, "POST", "/stop"), 401);
    assert_eq!(http(port, "GET", "/?token=s3cret"), 200);
    // The refused stop did not stop it.
    assert_eq!(wait_for_exit(&mut run, Duration::from_secs(30)), 0);
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(
        results["stop_reason"].is_null(),
        "{}",
        results["stop_reason"]
    );
    let mut stderr = String::new();
    run.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        !stderr.contains("s3cret"),
        "the token was printed: {stderr}"
    );
    // Nor written: results.json keeps the command line, the report shows it.
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(!written.contains("s3cret"), "the token is in results.json");
    assert!(
        written.contains("--dashboard-token"),
        "no command line kept"
    );
    let html = dir.path().join("report.html");
    let report = Command::new(headroom_bin())
        .arg("report")
        .arg(&out)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    assert!(!std::fs::read_to_string(&html).unwrap().contains("s3cret"));

    // Off loopback without a token: refused before any load.
    let refused = Command::new(headroom_bin())
        .args(["run", "--url", &url, "-d", "2s", "--dashboard=0.0.0.0:1"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--dashboard-token"),
        "{refused:?}"
    );
}

#[test]
fn a_capacity_search_streams_its_steps_and_its_answer() {
    let target = Target::start(1, 4);
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap.json");
    let url = format!("{}/sleep?ms=5", target.base);
    let addr = format!("--dashboard=127.0.0.1:{port}");
    let mut search = start(
        "capacity",
        &[
            "--url",
            &url,
            "--slo",
            "p90<500ms",
            "--min",
            "20",
            "--max",
            "40",
            "--step-duration",
            "2s",
            "--warmup",
            "0s",
            "--pause",
            "0s",
            &addr,
            "--dashboard-linger",
            "60s",
        ],
        &out,
    );
    wait_for_port(port);
    // The whole stream, once the search is over (cap.json is written after
    // each step, and for the last time before the stream ends): each step
    // announced, then its verdict as cap.json has it, then the answer.
    let events = events_until_end(port, Duration::from_secs(90), "the search did not end");
    let cap: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let steps = cap["steps"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let verdicts: Vec<&serde_json::Value> = events.iter().filter(|e| e["kind"] == "step").collect();
    assert_eq!(verdicts.len(), steps.len(), "{kinds:?}");
    for (shown, step) in verdicts.iter().zip(steps) {
        assert_eq!(shown["index"], step["index"]);
        assert_eq!(shown["offered"], step["offered"]);
        assert_eq!(shown["passed"], step["passed"]);
    }
    assert_eq!(
        kinds.iter().filter(|k| **k == "step_start").count(),
        steps.len()
    );
    assert!(kinds.contains(&"second"), "{kinds:?}");
    let answer = events
        .iter()
        .find(|e| e["kind"] == "capacity")
        .expect("the answer");
    assert_eq!(answer["capacity"], cap["capacity"]);
    assert_eq!(kinds.last(), Some(&"end"));
    // ... and the page draws a row per step.
    let page = page_after(
        &format!("http://127.0.0.1:{port}/"),
        3000,
        Some("dashboard-capacity.png"),
    );
    let body = &page[page.find("<body").unwrap()..];
    let body = &body[..body.find('>').unwrap()];
    assert!(
        body.contains(&format!("data-steps=\"{}\"", steps.len())),
        "{body}"
    );
    assert!(
        text_of(&page, "capacity").contains("req/s"),
        "{}",
        text_of(&page, "capacity")
    );
    // The load curve is drawn beside the rows.
    assert!(page.contains("Response time by load"), "no load curve");
    unsafe { libc::kill(search.pid(), libc::SIGTERM) };
    wait_for_exit(&mut search, Duration::from_secs(20));
}

#[test]
fn a_study_streams_its_grid_and_ranking_and_a_configuration_can_be_skipped() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let study = dir.path().join("s.toml");
    std::fs::write(
        &study,
        format!(
            r#"
[scenario.load]
vus = 2
duration = "3s"
[[scenario.request]]
name = "sleep"
path = "/sleep?ms=5"

[[server]]
name = "target"
command = "'{}' target --listen 127.0.0.1:{{port}} --workers 1 --threads {{threads}}"
ready = "/health"
[server.grid]
threads = [1, 2, 4]

[measure]
warmup = "500ms"
"#,
            headroom_bin()
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let addr = format!("--dashboard=127.0.0.1:{port}");
    let mut run = ProcessGuard {
        child: Command::new(headroom_bin())
            .arg("study")
            .arg(&study)
            .arg("--out")
            .arg(&out)
            .args([addr.as_str(), "--dashboard-linger", "60s"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    };
    wait_for_port(port);
    let skipped = "target threads=2";
    // A person watching the page clicks the second configuration's skip
    // button while it is under load.
    let mut browser = Browser::open(&format!("http://127.0.0.1:{port}/"));
    let row = format!(
        "[...document.querySelectorAll('#grid tbody tr')]\
         .find(tr => tr.firstChild.textContent === {skipped:?})"
    );
    browser.wait_for(
        &format!("({row} || {{dataset: {{}}}}).dataset.state === 'loading'"),
        Duration::from_secs(60),
    );
    browser.eval(&format!("{row}.lastChild.querySelector('button').click()"));
    assert_eq!(post(port, "/skip", "target threads=9"), 404);
    let events = events_until_end(port, Duration::from_secs(90), "the study did not end");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("study.json")).unwrap()).unwrap();
    // The grid first, then each configuration in order: starting,
    // warming, loading, its seconds, its row, the ranking so far.
    assert_eq!(events[1]["kind"], "study_start");
    assert_eq!(
        events[1]["configs"],
        serde_json::json!(["target threads=1", "target threads=2", "target threads=4"])
    );
    let states: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["kind"] == "config_state")
        .map(|e| {
            (
                e["label"].as_str().unwrap().to_string(),
                e["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("target threads=1", "starting"),
        ("target threads=1", "warming"),
        ("target threads=1", "loading"),
        ("target threads=1", "done"),
        (skipped, "starting"),
        (skipped, "warming"),
        (skipped, "loading"),
        (skipped, "skipped"),
        ("target threads=4", "starting"),
        ("target threads=4", "warming"),
        ("target threads=4", "loading"),
        ("target threads=4", "done"),
    ]
    .iter()
    .map(|(l, s)| (l.to_string(), s.to_string()))
    .collect();
    assert_eq!(states, expected);
    let rankings: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["kind"] == "ranking").collect();
    assert!(rankings.len() >= 3, "a ranking after every run");
    let last = rankings.last().unwrap();
    let ranked: Vec<&str> = report["ranking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(ranked.len(), 2, "the skipped one is not ranked: {ranked:?}");
    for (row, label) in last["rows"].as_array().unwrap().iter().zip(&ranked) {
        assert_eq!(row[1], *label);
    }
    let skipped_config = report["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == skipped)
        .unwrap();
    assert_eq!(skipped_config["status"], "skipped from the dashboard");
    // Each configuration's row on the stream equals study.json's run.
    for done in events
        .iter()
        .filter(|e| e["kind"] == "config_state" && e["state"] == "done")
    {
        let config = report["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["label"] == done["label"])
            .unwrap();
        let run = &config["runs"][0]["results"];
        assert_eq!(
            done["throughput_rps"], run["throughput_rps"],
            "{}",
            done["label"]
        );
    }
    assert!(events.iter().any(|e| e["kind"] == "study_end"));
    // The page: a row per configuration with its state, the ranking.
    let page = page_after(
        &format!("http://127.0.0.1:{port}/"),
        3000,
        Some("dashboard-study.png"),
    );
    assert_eq!(text_of(&page, "state"), "done");
    for label in ["target threads=1", skipped, "target threads=4"] {
        assert!(
            page.contains(&format!("<td>{label}</td>")),
            "no row for {label}"
        );
    }
    assert!(
        page.contains("class=\"left state-skipped\">skipped<"),
        "the skip is not shown"
    );
    assert!(text_of(&page, "winner").contains(ranked[0]));
    crate::common::chromium::dark_screenshot_of_url(
        &format!("http://127.0.0.1:{port}/"),
        "dashboard-study-dark.png",
    );
    unsafe { libc::kill(run.pid(), libc::SIGTERM) };
    wait_for_exit(&mut run, Duration::from_secs(20));
}

#[test]
fn a_fleet_streams_its_merged_seconds_and_a_row_per_shard() {
    let target = Target::start(1, 4);
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.json");
    let url = format!("{}/sleep?ms=2", target.base);
    let addr = format!("--dashboard=127.0.0.1:{port}");
    let mut run = start_run(
        &[
            "--url",
            &url,
            "--rate",
            "200",
            "-d",
            "5s",
            "--processes",
            "2",
            &addr,
            "--dashboard-linger",
            "60s",
        ],
        &out,
    );
    wait_for_port(port);
    let events = events_until_end(port, Duration::from_secs(60), "the fleet did not end");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let total = results["requests"]["total"].as_u64().unwrap();
    let seconds: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["kind"] == "second").collect();
    assert!(seconds.len() >= 4, "{} seconds", seconds.len());
    // Whole seconds merged from both shards: the fleet's rate, offered
    // and achieved — each exactly the merged results' second.
    let timeline = results["timeline"].as_array().unwrap();
    for s in &seconds {
        let t = s["t_s"].as_u64().unwrap() as usize;
        assert_eq!(s["requests"], timeline[t - 1]["requests"], "second {t}");
        assert_eq!(s["failed"], timeline[t - 1]["failed"], "second {t}");
    }
    for s in &seconds[..3] {
        assert_eq!(s["offered_rps"].as_f64(), Some(200.0), "{s}");
        let n = s["requests"].as_u64().unwrap();
        assert!((150..=250).contains(&n), "{s}");
        assert!(s["p99_ms"].as_f64().unwrap() >= s["p50_ms"].as_f64().unwrap());
    }
    let merged: u64 = seconds
        .iter()
        .map(|s| s["requests"].as_u64().unwrap())
        .sum();
    assert!(merged <= total, "{merged} > {total}");
    // The rows: two shards, done, their requests adding up to the results'.
    let rows = events.iter().rev().find(|e| e["kind"] == "shards").unwrap()["rows"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r["state"], "done", "{r}");
    }
    let by_shard: u64 = rows.iter().map(|r| r["requests"].as_u64().unwrap()).sum();
    assert_eq!(by_shard, total);
    let end = events.iter().find(|e| e["kind"] == "run_end").unwrap();
    assert_eq!(end["total"]["requests"].as_u64(), Some(total));
    // The page shows the merged totals and a row per shard.
    let page = page_after(
        &format!("http://127.0.0.1:{port}/"),
        3000,
        Some("dashboard-fleet.png"),
    );
    assert_eq!(number(&text_of(&page, "total-requests")), total);
    assert!(
        page.contains("2 processes, figures merged"),
        "no shard rows"
    );
    unsafe { libc::kill(run.pid(), libc::SIGTERM) };
    wait_for_exit(&mut run, Duration::from_secs(20));
}
