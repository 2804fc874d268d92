//! Servers that behave badly in the ways real ones do — close idle
//! keep-alive connections, send more than they were asked, stall, accept
//! and never answer — each a small raw-socket server on loopback. Every
//! test holds the invariant `requests.total = what the server received +
//! requests.not_delivered` and the figure the bug used to get wrong.

use crate::common::{
    answering, headroom_bin, never_answering, read_request, read_request_head, run, run_with,
    RawServer,
};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// Answers keep-alive requests, and closes a connection that stays idle
/// longer than `idle` (gunicorn's, Node's or nginx's keep-alive timeout).
fn closes_idle_connections(idle: Duration) -> RawServer {
    RawServer::start(move |mut s, count| {
        s.set_read_timeout(Some(idle)).unwrap();
        while read_request(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            if s.write_all(OK).is_err() {
                return;
            }
        }
        // Read timed out (idle) or EOF: close.
    })
}

fn counted_exactly(r: &crate::common::Run, server: &RawServer) {
    let results = r.results();
    assert_eq!(
        r.total(),
        server.requests() + results["requests"]["not_delivered"].as_u64().unwrap(),
        "total = server received + not delivered: {}",
        results["errors"]
    );
}

#[test]
fn keep_alive_closed_while_idle_is_replaced_not_failed() {
    let server = closes_idle_connections(Duration::from_millis(200));
    let r = run(&[
        "--url",
        &server.url("/"),
        "--vus",
        "5",
        "--think-time",
        "500ms",
        "--duration",
        "2s",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    assert_eq!(
        results["requests"]["failed"].as_u64(),
        Some(0),
        "a request the server never received is not a failure: {}",
        results["errors"]
    );
    counted_exactly(&r, &server);
    let c = &results["connections"];
    let replaced =
        c["reconnects_idle_closed"].as_u64().unwrap() + c["retried_stale"].as_u64().unwrap();
    assert!(replaced > 0, "{c}");
    assert_eq!(
        c["opened"].as_u64().unwrap(),
        5 + replaced,
        "one connection per user, plus one per replaced connection: {c}"
    );
    assert!(r.stdout.contains("reconnected"), "{}", r.stdout);
}

#[test]
fn server_closing_after_every_response_without_saying_so_fails_nothing() {
    let server = answering(OK, true);
    let r = run(&["--url", &server.url("/"), "--vus", "4", "--requests", "400"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.results()["requests"]["ok"].as_u64(),
        Some(400),
        "{}",
        r.results()["errors"]
    );
    assert_eq!(server.requests(), 400);
}

#[test]
fn a_post_is_not_sent_twice_unless_allowed() {
    // The server reads the request, then closes without a byte: on a
    // reused connection that looks like a stale one. A POST is not sent
    // again by default (the server may have acted on it).
    let server = RawServer::start(|mut s, count| {
        if read_request_head(&mut s).is_some() {
            count.fetch_add(1, Ordering::SeqCst);
            let _ = s.write_all(OK);
        }
        if read_request_head(&mut s).is_some() {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    let url = server.url("/");
    let once = |extra: &[&str]| {
        let mut args = vec!["--url", &url, "-m", "POST", "--body", "x", "--vus", "1"];
        args.extend_from_slice(&["--requests", "2"]);
        args.extend_from_slice(extra);
        run(&args)
    };
    let before = server.requests();
    let r = once(&[]);
    assert_eq!(r.total(), 2);
    assert_eq!(
        r.error("closed_before_response"),
        1,
        "{}",
        r.results()["errors"]
    );
    assert_eq!(server.requests() - before, 2);

    let before = server.requests();
    let r = once(&["--stale-connection-retry", "all"]);
    assert_eq!(
        r.results()["requests"]["ok"].as_u64(),
        Some(2),
        "{}",
        r.results()["errors"]
    );
    assert_eq!(
        r.results()["connections"]["retried_stale"].as_u64(),
        Some(1)
    );
    // Three requests reached the server: the one sent again was received
    // twice — which is why it is not the default for POST.
    assert_eq!(server.requests() - before, 3);
}

#[test]
fn bytes_beyond_the_response_are_a_protocol_error_not_a_phantom_answer() {
    // Two responses in one write: the second was never asked for.
    let server = RawServer::start(|mut s, count| {
        while read_request(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            let two = [OK, OK].concat();
            if s.write_all(&two).is_err() {
                return;
            }
        }
    });
    let r = run(&["--url", &server.url("/"), "--vus", "2", "--requests", "100"]);
    assert_eq!(r.total(), 100);
    assert_eq!(
        server.requests(),
        100,
        "no request answered without being sent"
    );
    let malformed = r.error("malformed_response");
    let unrequested = r.results()["connections"]["closed_unrequested_bytes"]
        .as_u64()
        .unwrap();
    assert!(malformed > 0, "{}", r.results()["errors"]);
    assert_eq!(
        malformed + unrequested,
        100,
        "every response was followed by bytes nobody asked for"
    );
}

#[test]
fn a_second_without_completions_has_no_latency_not_zero() {
    // The third request stalls for 2.5 s: at least one whole second in
    // which nothing completes.
    let seen = Arc::new(AtomicU64::new(0));
    let server = {
        let seen = seen.clone();
        RawServer::start(move |mut s, count| {
            while read_request(&mut s) {
                count.fetch_add(1, Ordering::SeqCst);
                if seen.fetch_add(1, Ordering::SeqCst) == 2 {
                    std::thread::sleep(Duration::from_millis(2500));
                }
                if s.write_all(OK).is_err() {
                    return;
                }
            }
        })
    };
    let r = run(&["--url", &server.url("/"), "--vus", "1", "--requests", "6"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let timeline = r.results()["timeline"].as_array().unwrap().clone();
    let empty: Vec<_> = timeline.iter().filter(|p| p["requests"] == 0).collect();
    assert!(!empty.is_empty(), "a stalled second: {timeline:?}");
    for p in &empty {
        for key in ["p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms"] {
            assert!(p[key].is_null(), "{key} of an empty second: {p}");
        }
    }
    for p in timeline.iter().filter(|p| p["requests"] != 0) {
        assert!(p["p50_ms"].as_f64().is_some(), "{p}");
    }
}

#[test]
fn a_run_whose_requests_were_all_cut_off_did_connect() {
    // Accepts, reads, never answers; the graceful stop cuts every request.
    let server = never_answering(Duration::from_secs(8));
    let r = run(&[
        "--url",
        &server.url("/"),
        "--vus",
        "2",
        "--duration",
        "500ms",
        "--graceful-stop",
        "500ms",
    ]);
    assert_eq!(
        r.code, 0,
        "connected, answered nothing: not exit 2: {}",
        r.stderr
    );
    assert!(!r.stderr.contains("could not connect"), "{}", r.stderr);
    assert_eq!(r.error("aborted"), 2);
    assert_eq!(r.results()["connections_opened"].as_u64(), Some(2));
    assert_eq!(r.results()["connections"]["opened"].as_u64(), Some(2));
    counted_exactly(&r, &server);
}

#[test]
fn users_whose_connect_fails_back_off_instead_of_spinning() {
    // Nothing listens: without a pause two users would make tens of
    // thousands of attempts a second on a full core.
    let port = crate::common::free_port();
    let r = run(&[
        "--url",
        &format!("http://127.0.0.1:{port}/"),
        "--vus",
        "2",
        "--duration",
        "2s",
    ]);
    assert_eq!(r.code, 2);
    let attempts = r.error("connect_refused");
    assert_eq!(attempts, r.total());
    // 10, 20, 40, … 1000 ms: at most ~9 attempts per user in 2 s.
    assert!(attempts <= 2 * 10, "{attempts} attempts in 2 s");
    assert!(attempts >= 2, "each user tried");
}

#[test]
fn out_of_file_descriptors_fails_some_users_and_the_others_go_on() {
    let server = answering(OK, false);
    let r = run_with(
        &[
            "--url",
            &server.url("/"),
            "--vus",
            "200",
            "--duration",
            "2s",
        ],
        |cmd| unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 64,
                    rlim_max: 64,
                };
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                Ok(())
            });
        },
    );
    let results = r.results();
    assert!(r.error("too_many_open_files") > 0, "{}", results["errors"]);
    counted_exactly(&r, &server);
    // The users that have a connection were not starved: they answered
    // far more than the 48 requests they managed before the backoff.
    assert!(
        results["requests"]["ok"].as_u64().unwrap() > 500,
        "{}",
        results["requests"]
    );
    assert!(results["warnings"].to_string().contains("open-files limit"));
}

#[test]
fn an_unwritable_output_is_refused_before_any_load() {
    let server = answering(OK, false);
    // Below a plain file: no folder can be made there, even by root.
    let file = tempfile::NamedTempFile::new().unwrap();
    let unwritable = file.path().join("deeper").join("out");
    for flag in ["--out", "--html", "--junit", "--hdr-log", "--csv"] {
        let out = Command::new(headroom_bin())
            .args(["run", "--url", &server.url("/"), "--requests", "5", flag])
            .arg(&unwritable)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(flag), "{flag}: {stderr}");
    }
    assert_eq!(server.requests(), 0, "nothing was sent");
}

/// The Authorization header of each head seen ("" when absent).
fn authorizations(heads: &Mutex<Vec<String>>) -> Vec<String> {
    heads
        .lock()
        .unwrap()
        .iter()
        .map(|head| {
            head.lines()
                .find_map(|l| l.strip_prefix("Authorization: "))
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[test]
fn credentials_are_sent_but_never_written() {
    let (server, seen) = crate::common::recording_heads(OK);
    let url = format!("http://alice:s3cret-pw@{}/private", server.addr);
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let r = run(&[
        "--url",
        &url,
        "--requests",
        "3",
        "--vus",
        "1",
        "-H",
        "Cookie: session=c00kie-value",
        "-H",
        "X-Api-Key: k3y-value",
        "--secret-header",
        "x-api-key",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // userinfo is sent as Basic auth: base64("alice:s3cret-pw")
    assert_eq!(
        authorizations(&seen),
        vec!["Basic YWxpY2U6czNjcmV0LXB3"; 3],
        "URL credentials sent as Basic auth"
    );
    let written = [
        std::fs::read_to_string(r.results_path()).unwrap(),
        std::fs::read_to_string(&html).unwrap(),
        r.stdout.clone(),
        r.stderr.clone(),
    ];
    for text in &written {
        for secret in [
            "s3cret-pw",
            "c00kie-value",
            "k3y-value",
            "YWxpY2U6czNjcmV0LXB3",
        ] {
            assert!(!text.contains(secret), "{secret} written: {text}");
        }
    }
    assert!(
        written[0].contains("Cookie: ***"),
        "{}",
        r.results()["meta"]
    );
    assert!(
        written[0].contains("http://***@"),
        "{}",
        r.results()["meta"]
    );
}

#[test]
fn an_explicit_authorization_header_wins_over_url_credentials() {
    let (server, seen) = crate::common::recording_heads(OK);
    let url = format!("http://bob:pw@{}/", server.addr);
    let r = run(&[
        "--url",
        &url,
        "--requests",
        "1",
        "-H",
        "Authorization: Bearer t0k",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(authorizations(&seen), vec!["Bearer t0k"]);
}

#[test]
fn a_hostile_remote_monitor_never_holds_the_run() {
    // Answers the monitor's first check, then streams a body without end.
    let first = Arc::new(AtomicU64::new(0));
    let monitor = {
        let first = first.clone();
        RawServer::start(move |mut s, _| {
            if !read_request(&mut s) {
                return;
            }
            if first.fetch_add(1, Ordering::SeqCst) == 0 {
                let body = b"[]";
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(body);
                return;
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n[");
            let chunk = vec![b' '; 64 * 1024];
            while s.write_all(&chunk).is_ok() {}
        })
    };
    let server = closes_idle_connections(Duration::from_secs(5));
    let r = run(&[
        "--url",
        &server.url("/"),
        "--vus",
        "2",
        "--duration",
        "2s",
        "--monitor-url",
        &monitor.url(""),
        "--monitor-token",
        "t",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.elapsed < Duration::from_secs(30), "the run ended");
    counted_exactly(&r, &server);
}

#[test]
fn headroom_monitor_limits_its_connections() {
    use std::io::Read;
    use std::process::Stdio;
    let port = crate::common::free_port();
    let child = Command::new(headroom_bin())
        .args([
            "monitor",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--pid",
            &std::process::id().to_string(),
            "--token",
            "t",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = crate::common::ProcessGuard { child };
    crate::common::wait_for_port(port);
    // Forty slow clients, each trickling a request head that never ends (a
    // header line every 300 ms keeps the monitor's 5 s read timeout from
    // freeing its slot). At most sixteen may be held; the rest are closed
    // unanswered as they come, instead of getting a thread each.
    let clients: Vec<std::net::TcpStream> = (0..40)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let trickling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let trickle = {
        let writers: Vec<_> = clients.iter().map(|s| s.try_clone().unwrap()).collect();
        let trickling = trickling.clone();
        std::thread::spawn(move || {
            let mut writers = writers;
            for w in &mut writers {
                let _ = w.write_all(b"GET /samples HTTP/1.1\r\n");
            }
            while trickling.load(Ordering::SeqCst) {
                for w in &mut writers {
                    let _ = w.write_all(b"X-Wait: 1\r\n");
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    let closed_by_server = |s: &std::net::TcpStream| {
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        let mut peer = s;
        !matches!(peer.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let held = loop {
        std::thread::sleep(Duration::from_millis(200));
        let held = clients.iter().filter(|s| !closed_by_server(s)).count();
        if held <= 16 || std::time::Instant::now() > deadline {
            break held;
        }
    };
    trickling.store(false, Ordering::SeqCst);
    trickle.join().unwrap();
    assert!(held <= 16, "{held} of 40 idle clients held a thread each");
    assert!(held >= 1, "the monitor serves some clients");
}

#[test]
fn a_huge_body_under_a_check_is_kept_only_up_to_the_limit_and_said() {
    // 3 MiB bodies, ending in a marker a body check looks for.
    let server = RawServer::start(|mut s, count| {
        let mut body = vec![b'x'; 3 << 20];
        body.extend_from_slice(b"END");
        while read_request(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            if s.write_all(head.as_bytes()).is_err() || s.write_all(&body).is_err() {
                return;
            }
        }
    });
    let dir = crate::common::scenario_dir(&[(
        "s.toml",
        &format!(
            r#"
base_url = "{}"
[load]
vus = 2
max_requests = 6
[[request]]
name = "big"
path = "/"
check = [ {{ body_contains = "xxxx" }} ]
"#,
            server.url("")
        ),
    )]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    assert_eq!(results["requests"]["ok"].as_u64(), Some(6));
    assert!(results["bytes_received"].as_u64().unwrap() > 6 * (3 << 20));
    assert_eq!(results["limits_reached"]["body_capture"].as_u64(), Some(6));
    assert!(results["warnings"]
        .to_string()
        .contains("1 MiB kept for checks"));
}

#[test]
fn a_server_flooding_cookies_fills_the_jar_only_up_to_its_cap() {
    // Every response sets 90 cookies of new names.
    let most_sent = Arc::new(AtomicU64::new(0));
    let server = {
        let most_sent = most_sent.clone();
        RawServer::start(move |mut s, count| {
            while let Some(head) = read_request_head(&mut s) {
                let n = count.fetch_add(1, Ordering::SeqCst);
                let sent = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Cookie: "))
                    .map_or(0, |c| c.split("; ").count() as u64);
                most_sent.fetch_max(sent, Ordering::SeqCst);
                let mut response = String::from("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
                for i in 0..90 {
                    response.push_str(&format!("Set-Cookie: c{n}x{i}=v; Path=/\r\n"));
                }
                response.push_str("\r\nok");
                if s.write_all(response.as_bytes()).is_err() {
                    return;
                }
            }
        })
    };
    let r = run(&["--url", &server.url("/"), "--vus", "1", "--requests", "20"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(most_sent.load(Ordering::SeqCst), 64, "the jar holds 64");
    // 20 responses × 90 cookies, 64 kept.
    assert_eq!(
        r.results()["limits_reached"]["cookie_jar"].as_u64(),
        Some(20 * 90 - 64)
    );
    assert!(r.results()["warnings"]
        .to_string()
        .contains("jar holds at most 64"));
}

#[test]
fn a_rate_beyond_the_generator_still_connects_and_counts_every_due_arrival() {
    // Far more than one generator sends: the scheduler falls behind its
    // own schedule. It must still let connections run (before, none ever
    // did: "could not connect") and count every arrival that was due.
    let server = answering(OK, false);
    let r = run(&[
        "--url",
        &server.url("/"),
        "--rate",
        "300000",
        "--duration",
        "1s",
        "--connections",
        "4",
        "--graceful-stop",
        "500ms",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.total(), 300_000, "every due arrival counted once");
    assert!(r.results()["connections"]["opened"].as_u64().unwrap() > 0);
    assert!(r.results()["requests"]["ok"].as_u64().unwrap() > 0);
    counted_exactly(&r, &server);
    assert_eq!(r.results()["generator_bound"], true);
}

#[test]
fn uploads_a_server_never_reads_do_not_hold_up_the_arrivals_after_them() {
    // Reads a request's head, then neither reads nor answers: each 5 MB
    // upload blocks once the socket buffers are full, until its timeout.
    let server = RawServer::start(|mut s, count| {
        if crate::common::read_request_head(&mut s).is_some() {
            count.fetch_add(1, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_secs(3));
        drop(s);
    });
    let dir = upload_scenario(&server, 5 << 20, "timeout = \"500ms\"\n");
    let r = run(&[
        dir.path().join("s.toml").to_str().unwrap(),
        "--rate",
        "25",
        "--duration",
        "2s",
    ]);
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    // Every arrival was sent, none held back behind a blocked upload.
    assert_eq!(r.total(), 50, "{}", r.results()["errors"]);
    assert_eq!(r.error("not_sent"), 0, "{}", r.results()["errors"]);
    assert_eq!(r.error("request_timeout"), 50, "{}", r.results()["errors"]);
    assert_eq!(server.requests(), 50);
    assert_eq!(r.results()["requests"]["attempts"].as_u64(), Some(50));
}

/// An upload larger than the socket buffers, to a server that reads its
/// head and never its body, with the default timeouts: every one is still
/// being written when the run stops. Each is the attempt it is — the
/// server got its head — cut off by the stop (`aborted`), not `not_sent`
/// ("no request was sent"), on both engines.
#[test]
fn uploads_cut_off_by_the_stop_are_attempts_the_server_saw() {
    // Reads a head, then holds the connection 10 s, reading nothing more:
    // past the run's 1 s and its 500 ms graceful stop with room for a
    // loaded machine (the client must stop before the server closes).
    let server = RawServer::start(|mut s, count| {
        if crate::common::read_head_only(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_secs(10));
        drop(s);
    });
    // 64 MB: more than loopback's socket buffers take on both sides.
    let dir = upload_scenario(&server, 64 << 20, "");
    for engine in ["auto", "tasks"] {
        let before = server.requests();
        let r = run(&[
            dir.path().join("s.toml").to_str().unwrap(),
            "--rate",
            "4",
            "--duration",
            "1s",
            "--graceful-stop",
            "500ms",
            "--engine",
            engine,
        ]);
        assert!(
            !r.stderr.contains("no request was sent"),
            "{engine}: {}",
            r.stderr
        );
        assert_ne!(r.code, 2, "{engine}: {}", r.stderr);
        assert_eq!(r.total(), 4, "{engine}: {}", r.results()["errors"]);
        assert_eq!(
            r.error("not_sent"),
            0,
            "{engine}: {}",
            r.results()["errors"]
        );
        assert_eq!(r.error("aborted"), 4, "{engine}: {}", r.results()["errors"]);
        assert_eq!(server.requests() - before, 4, "{engine}");
        assert_eq!(
            r.results()["requests"]["attempts"].as_u64(),
            Some(4),
            "{engine}"
        );
    }
}

/// `s.toml` in a new folder: a POST to `server` of `bytes` bytes from
/// `big.bin` beside it, with `extra` lines for the request.
fn upload_scenario(server: &RawServer, bytes: usize, extra: &str) -> tempfile::TempDir {
    let dir = crate::common::scenario_dir(&[]);
    std::fs::write(dir.path().join("big.bin"), vec![b'x'; bytes]).unwrap();
    let scenario = format!(
        "base_url = \"{}\"\n[[request]]\nname = \"upload\"\nmethod = \"POST\"\npath = \"/upload\"\nbody_file = \"big.bin\"\n{extra}",
        server.url("")
    );
    std::fs::write(dir.path().join("s.toml"), scenario).unwrap();
    dir
}

/// Answers `413` as soon as a request's head has come, without reading
/// its body, and closes: the client's write of a large body then fails.
fn early_413() -> RawServer {
    RawServer::start(|mut s, count| {
        if !crate::common::read_head_only(&mut s) {
            return;
        }
        count.fetch_add(1, Ordering::SeqCst);
        let _ = s.write_all(
            b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large",
        );
        // Closed with the body unread: the kernel resets the connection.
    })
}

#[test]
fn an_early_413_before_the_body_was_read_is_counted_as_the_413_it_is() {
    let server = early_413();
    let dir = upload_scenario(&server, 5 << 20, "");
    let file = dir.path().join("s.toml");
    // The event loop (a plain request) and tasks both read the answer.
    for engine in ["auto", "tasks"] {
        let before = server.requests();
        let r = run(&[
            file.to_str().unwrap(),
            "--requests",
            "6",
            "--vus",
            "2",
            "--engine",
            engine,
        ]);
        assert!(r.code == 0 || r.code == 1, "{engine}: {}", r.stderr);
        assert_eq!(
            r.results()["status_codes"]["413"].as_u64(),
            Some(6),
            "{engine}: {}",
            r.results()["errors"]
        );
        assert_eq!(r.error("http_4xx"), 6, "{engine}");
        assert_eq!(r.error("connection_reset"), 0, "{engine}");
        assert_eq!(server.requests() - before, 6, "{engine}");
        assert_eq!(
            r.results()["requests"]["attempts"].as_u64(),
            Some(6),
            "{engine}"
        );
    }
}

#[test]
fn folded_headers_and_150_headers_are_read_not_refused() {
    let mut many = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..150 {
        many.push_str(&format!("X-H{i}: {i}\r\n"));
    }
    many.push_str("Content-Length: 2\r\n\r\nok");
    let many: &'static [u8] = Box::leak(many.into_bytes().into_boxed_slice());
    let folded: &'static [u8] =
        b"HTTP/1.1 200 OK\r\nX-Folded: first\r\n  second\r\nContent-Length: 2\r\n\r\nok";
    for (what, response) in [("150 headers", many), ("obs-fold", folded)] {
        let server = answering(response, false);
        for engine in ["auto", "tasks"] {
            let r = run(&[
                "--url",
                &server.url("/"),
                "--requests",
                "5",
                "--engine",
                engine,
            ]);
            assert_eq!(r.code, 0, "{what} {engine}: {}", r.stderr);
            assert_eq!(
                (r.total(), r.results()["requests"]["ok"].as_u64()),
                (5, Some(5)),
                "{what} {engine}: {}",
                r.results()["errors"]
            );
        }
    }
    // A check reads the folded value with a space for the fold.
    let server = answering(folded, false);
    let dir = crate::common::scenario_dir(&[(
        "s.toml",
        &format!(
            "base_url = \"{}\"\n[[request]]\nname = \"a\"\npath = \"/\"\ncheck = [ {{ header = \"X-Folded\", equals = \"first second\" }} ]\n",
            server.url("")
        ),
    )]);
    let r = run(&[
        dir.path().join("s.toml").to_str().unwrap(),
        "--requests",
        "3",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    assert_eq!(r.results()["requests"]["ok"].as_u64(), Some(3));
}

/// Answers one request per connection; when the next request arrives on
/// it, half-closes (shuts its write side) without answering and reads on,
/// counting every request head that arrives: a reused connection's next
/// request reaches it, but no answer comes. (Half-closing only once that
/// request is in makes the stale connection certain: half-closed right
/// after the answer, the generator may see the close first, and then no
/// request is ever retried.)
fn half_closing() -> RawServer {
    RawServer::start(|mut s, count| {
        if read_request(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            if s.write_all(OK).is_err() {
                return;
            }
            while read_request(&mut s) {
                count.fetch_add(1, Ordering::SeqCst);
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
        }
    })
}

#[test]
fn attempts_are_what_a_half_closing_server_counts() {
    for engine in ["auto", "tasks"] {
        let server = half_closing();
        let r = run(&[
            "--url",
            &server.url("/"),
            "--vus",
            "4",
            "--requests",
            "300",
            "--engine",
            engine,
        ]);
        assert_eq!(r.code, 0, "{engine}: {}", r.stderr);
        let requests = &r.results()["requests"];
        // Every request was answered on its retry; the first send of a
        // retried one reached the server too.
        assert_eq!(requests["ok"].as_u64(), Some(300), "{engine}: {requests}");
        let retried = requests["retried"]["stale"].as_u64().unwrap();
        assert!(retried > 0, "{engine}: {requests}");
        assert_eq!(
            requests["attempts"].as_u64(),
            Some(server.requests()),
            "{engine}: {requests}"
        );
        assert_eq!(
            requests["attempts"].as_u64(),
            Some(300 + retried),
            "{engine}"
        );
    }
}

/// Answers one request per connection; when the next request has
/// arrived on it, closes it with that request unread: the kernel answers
/// with a reset (RFC 2525 §2.17), and the request never reached the
/// server's program — it counts only the heads it read.
fn resetting_with_the_request_unread() -> RawServer {
    RawServer::start(|mut s, count| {
        if read_request(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            if s.write_all(OK).is_err() {
                return;
            }
            // Wait for the next request without taking it in.
            let _ = s.peek(&mut [0u8; 1]);
        }
    })
}

#[test]
fn a_request_reset_unread_is_retried_and_not_an_attempt() {
    for engine in ["auto", "tasks"] {
        let server = resetting_with_the_request_unread();
        let r = run(&[
            "--url",
            &server.url("/"),
            "--vus",
            "4",
            "--requests",
            "200",
            "--engine",
            engine,
        ]);
        assert_eq!(r.code, 0, "{engine}: {}", r.stderr);
        let requests = &r.results()["requests"];
        assert_eq!(requests["ok"].as_u64(), Some(200), "{engine}: {requests}");
        let retried = requests["retried"]["stale"].as_u64().unwrap();
        assert!(retried > 0, "{engine}: {requests}");
        // The reset sends were never read: the attempts are the answered.
        assert_eq!(
            requests["attempts"].as_u64(),
            Some(200),
            "{engine}: {requests}"
        );
        assert_eq!(server.requests(), 200, "{engine}: {requests}");
    }
}

#[test]
fn attempts_are_what_the_server_counts_when_one_of_its_workers_is_killed() {
    let _alone = crate::common::serial();
    for engine in ["auto", "tasks"] {
        // A worker killed between a request's write and its read takes
        // the request with it unread; the kernel's reset says so. Three
        // tries for the kill to land mid-run.
        crate::common::in_three_tries("attempts after a killed worker", || {
            let target = crate::common::Target::start(2, 8);
            // The master forks its workers after it says where it listens.
            let mut workers = crate::common::children(target.guard.pid());
            for _ in 0..100 {
                if workers.len() == 2 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
                workers = crate::common::children(target.guard.pid());
            }
            if workers.len() != 2 {
                return Err(format!("workers: {workers:?}"));
            }
            let killer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(700));
                unsafe { libc::kill(workers[0], libc::SIGKILL) };
            });
            let r = run(&[
                "--url",
                &target.url("/sleep?ms=20"),
                "--vus",
                "6",
                "--duration",
                "2s",
                "--engine",
                engine,
            ]);
            killer.join().unwrap();
            let requests = &r.results()["requests"];
            let served = target.requests();
            let felt = requests["retried"]["stale"].as_u64().unwrap()
                + requests["failed"].as_u64().unwrap();
            if felt == 0 {
                return Err(format!("{engine}: the kill was not felt: {requests}"));
            }
            // The attempts are what the server counted, but for a request
            // the killed worker had read and not yet counted (its program
            // died between the two; the kernel closed that connection
            // without a reset): at most one per request the kill cut off.
            // A request it never read is not an attempt (the reset says
            // so; `a_request_reset_unread_is_retried_and_not_an_attempt`).
            let attempts = requests["attempts"].as_u64().unwrap();
            assert!(
                (served..=served + felt).contains(&attempts),
                "{engine}: the server counted {served}; {requests}; {}",
                r.results()["errors"]
            );
            eprintln!("{engine}: {requests} {}", r.results()["errors"]);
            // The killed worker's requests in flight died with it.
            assert_eq!(target.stats()["in_flight"], 0, "{}", target.stats());
            Ok(())
        });
    }
}

/// A tmpfs of `kib` KiB mounted on a fresh folder, unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(kib: u32) -> Result<SmallDisk, String> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_disk_loses_nothing_measured() {
    // It needs root to mount a tmpfs (CI runs as root): a machine that
    // cannot mount one fails this test rather than passing it unrun.
    let disk = SmallDisk::mount(48).unwrap_or_else(|why| {
        panic!("cannot mount a small tmpfs here ({why}): this test needs root (CAP_SYS_ADMIN)")
    });
    // Full but for one page: the outputs' checks (empty files) pass
    // before the load, the outputs themselves cannot be written after it.
    let mut filler = std::fs::File::create(disk.dir.path().join("filler")).unwrap();
    let page = [0u8; 4096];
    while filler.write_all(&page).is_ok() {}
    drop(filler);
    std::fs::write(disk.dir.path().join("filler"), vec![0u8; 44 * 1024]).unwrap();
    let server = answering(OK, false);
    let elsewhere = tempfile::tempdir().unwrap();
    let fallback = elsewhere.path().join("kept.json");
    let out = disk.dir.path().join("r.json");
    let html = disk.dir.path().join("r.html");
    let o = Command::new(headroom_bin())
        .args([
            "run",
            "--url",
            &server.url("/"),
            "--requests",
            "500",
            "--vus",
            "2",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--html")
        .arg(&html)
        .arg("--out-fallback")
        .arg(&fallback)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stdout.contains("500 requests"), "the summary: {stdout}");
    assert!(
        stderr.contains(&fallback.display().to_string()),
        "the fallback named: {stderr}"
    );
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fallback).unwrap()).unwrap();
    assert_eq!(kept["requests"]["total"].as_u64(), Some(500));
    let left: Vec<String> = std::fs::read_dir(disk.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

/// The sample server on `port`, one process, appending a line to `log`
/// for every request as it reaches the app.
fn logging_target(port: u16, log: &std::path::Path) -> crate::common::ProcessGuard {
    let child = Command::new(headroom_bin())
        .args([
            "target",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--workers",
            "0",
        ])
        .args(["--threads", "8", "--request-log"])
        .arg(log)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    crate::common::wait_for_port(port);
    crate::common::ProcessGuard { child }
}

#[test]
fn attempts_are_what_the_server_counted_when_it_was_killed_and_restarted() {
    let _alone = crate::common::serial();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.log");
    let port = crate::common::free_port();
    let mut server = logging_target(port, &log);
    for engine in ["auto", "tasks"] {
        let url = format!("http://127.0.0.1:{port}/sleep?ms=20");
        let before = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
        let load = std::thread::spawn(move || {
            run(&[
                "--url",
                &url,
                "--vus",
                "6",
                "--duration",
                "3s",
                "--engine",
                engine,
            ])
        });
        std::thread::sleep(Duration::from_millis(1000));
        // kill -9, and the same server again on the same port 1 s later.
        unsafe { libc::kill(server.pid(), libc::SIGKILL) };
        let _ = server.child.wait();
        std::thread::sleep(Duration::from_millis(1000));
        server = logging_target(port, &log);
        let r = load.join().unwrap();
        let counted = std::fs::read_to_string(&log).unwrap().lines().count() as u64 - before;
        let requests = &r.results()["requests"];
        eprintln!(
            "{engine}: counted {counted}; {requests}; {}",
            r.results()["errors"]
        );
        assert!(
            r.error("connect_refused") > 0,
            "{engine}: the outage was felt: {}",
            r.results()["errors"]
        );
        // Every head the server read, it counted. A head written into the
        // killed server's socket just before the kill, unread, is an
        // attempt nobody can count on the server's side: its connection
        // then ended reset, or it was sent again (a stale retry). So the
        // server's count is exact up to those whose fate is unknowable.
        let attempts = requests["attempts"].as_u64().unwrap();
        let unknowable =
            r.error("connection_reset") + requests["retried"]["stale"].as_u64().unwrap_or(0);
        assert!(
            counted <= attempts && attempts <= counted + unknowable,
            "{engine}: the server counted {counted}, headroom {attempts} attempts \
             ({unknowable} cut off by the kill); {requests}; {}",
            r.results()["errors"]
        );
    }
}
