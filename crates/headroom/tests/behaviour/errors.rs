//! Every failure is classified and counted, and the run still ends on
//! time: servers that refuse, never answer, close early, send garbage or
//! reset; the generator running out of file descriptors. And every legal
//! response framing is read as a success.

use crate::common::{answering, never_answering, read_request, run, run_with, RawServer, Target};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn closed_port() -> u16 {
    crate::common::free_port()
}

#[test]
fn refused_port_is_counted_and_exits_2() {
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let r = run(&["--url", &url, "--vus", "2", "--duration", "1s"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("could not connect"), "{}", r.stderr);
    assert_eq!(
        r.stderr.trim().lines().count(),
        1,
        "one-line error: {}",
        r.stderr
    );
    let refused = r.error("connect_refused");
    assert!(refused > 0);
    assert_eq!(refused, r.total());
    assert_eq!(
        r.results()["requests"]["not_delivered"].as_u64(),
        Some(refused)
    );
}

#[test]
fn never_answering_server_times_out_on_time() {
    let server = never_answering(Duration::from_secs(30));
    let r = run(&[
        "--url",
        &server.url("/"),
        "--vus",
        "2",
        "--duration",
        "1s",
        "--timeout",
        "400ms",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let timeouts = r.error("request_timeout");
    assert!(timeouts >= 2, "{:?}", r.results()["errors"]);
    assert_eq!(timeouts, r.total());
    assert_eq!(server.requests(), r.total());
}

/// A user's request timer is one timer moved for every request: after
/// fast requests moved it later, a slow one still times out at its own
/// timeout, and the fast ones after it do not.
#[test]
fn a_slow_request_among_fast_ones_times_out_at_its_own_deadline() {
    let _light = crate::common::light();
    let target = Target::start(1, 2);
    let dir = crate::common::scenario_dir(&[(
        "mixed.toml",
        &format!(
            "base_url = \"{}\"\n\
             [[request]]\nname = \"fast\"\npath = \"/hello\"\n\
             [[request]]\nname = \"slow\"\npath = \"/sleep?ms=1500\"\ntimeout = \"300ms\"\n\
             [[session]]\nname = \"s\"\n\
             steps = [{{ request = \"fast\" }}, {{ request = \"fast\" }}, {{ request = \"slow\" }}, {{ request = \"fast\" }}]\n",
            target.base
        ),
    )]);
    let scenario = dir.path().join("mixed.toml");
    let r = run(&[
        scenario.to_str().unwrap(),
        "--vus",
        "1",
        "--iterations",
        "3",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let per = &r.results()["per_request"];
    assert_eq!(per["slow"]["requests"]["total"], 3);
    assert_eq!(per["slow"]["errors"]["request_timeout"], 3, "{per}");
    assert_eq!(per["fast"]["requests"]["total"], 9);
    assert_eq!(per["fast"]["requests"]["failed"], 0, "{per}");
    // Timed out at its 300 ms, not when the server answered at 1.5 s.
    let max = per["slow"]["latency_ms"]["max"].as_f64().unwrap();
    assert!(max < 1_400.0, "slow request max {max} ms");
}

#[test]
fn graceful_stop_cuts_off_slow_requests_as_aborted() {
    let target = Target::start(1, 8);
    let r = run(&[
        "--url",
        &target.url("/sleep?ms=5000"),
        "--vus",
        "3",
        "--duration",
        "1s",
        "--graceful-stop",
        "500ms",
    ]);
    assert_eq!(r.error("aborted"), 3);
    assert_eq!(r.total(), 3);
    // Counted `aborted`, not answered: the 5 s requests were cut off.
    assert_eq!(target.requests(), 3);
    assert_eq!(r.results()["requests"]["attempts"].as_u64(), Some(3));
    assert_eq!(r.results()["requests"]["not_delivered"].as_u64(), Some(0));
}

#[test]
fn a_tls_handshake_cut_off_by_the_stop_never_reached_the_server() {
    // Accepts and reads the ClientHello, never answers it.
    let silent = RawServer::start(|mut s, _| {
        let mut buf = [0u8; 4096];
        while matches!(std::io::Read::read(&mut s, &mut buf), Ok(n) if n > 0) {}
    });
    let r = run(&[
        "--url",
        &format!("https://{}/", silent.addr),
        "--insecure",
        "--vus",
        "4",
        "--duration",
        "1s",
        "--graceful-stop",
        "1s",
        "--connect-timeout",
        "30s",
    ]);
    assert_eq!(r.total(), 4, "{}", r.results()["errors"]);
    assert_eq!(r.error("aborted"), 0, "{}", r.results()["errors"]);
    assert_eq!(r.error("not_sent"), 4, "{}", r.results()["errors"]);
    let requests = &r.results()["requests"];
    assert_eq!(requests["not_delivered"].as_u64(), Some(4), "{requests}");
    assert_eq!(requests["attempts"].as_u64(), Some(0), "{requests}");
}

fn classified(server: &RawServer, class: &str) {
    let r = run(&["--url", &server.url("/"), "--vus", "2", "--duration", "1s"]);
    assert_eq!(r.code, 0, "{class}: {}", r.stderr);
    let n = r.error(class);
    assert!(n > 0, "{class}: {:?}", r.results()["errors"]);
    assert_eq!(n, r.total(), "{class}: every request fails so");
    assert_eq!(server.requests(), r.total(), "{class}: server count");
}

#[test]
fn close_mid_response_is_classified() {
    let server = answering(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part",
        true,
    );
    classified(&server, "closed_mid_response");
}

#[test]
fn close_before_response_is_classified() {
    let server = answering(b"", true);
    classified(&server, "closed_before_response");
}

#[test]
fn garbage_response_is_classified() {
    let server = answering(b"this is not http\r\n\r\n", false);
    classified(&server, "malformed_response");
}

#[test]
fn reset_is_classified() {
    let server = RawServer::start(|s, count| {
        let mut s = s;
        if read_request(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            // SO_LINGER 0: close sends RST instead of FIN.
            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
        }
    });
    classified(&server, "connection_reset");
}

#[test]
fn statuses_are_failures_unless_expected() {
    let target = Target::start(1, 4);
    let r = run(&["--url", &target.url("/status?code=503"), "--requests", "50"]);
    assert_eq!(r.error("http_5xx"), 50);
    assert_eq!(r.results()["status_codes"]["503"].as_u64(), Some(50));
    let r = run(&[
        "--url",
        &target.url("/status?code=404"),
        "--requests",
        "50",
        "--expect-status",
        "404",
    ]);
    assert_eq!(r.results()["requests"]["ok"].as_u64(), Some(50));
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "--requests",
        "20",
        "--expect-status",
        "404",
    ]);
    assert_eq!(r.error("unexpected_status"), 20);
}

#[test]
fn too_many_open_files_is_classified_with_advice() {
    let target = Target::start(1, 8);
    let r = run_with(
        &[
            "--url",
            &target.url("/hello"),
            "--vus",
            "100",
            "--duration",
            "1s",
        ],
        |cmd| unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 40,
                    rlim_max: 40,
                };
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                Ok(())
            });
        },
    );
    assert!(r.error("too_many_open_files") > 0, "{}", r.stderr);
    let res = r.results();
    assert!(res["requests"]["ok"].as_u64().unwrap() > 0);
    let warnings = res["warnings"].to_string();
    assert!(warnings.contains("ulimit -n"), "{warnings}");
    assert!(r.stdout.contains("ulimit -n"));
}

#[test]
fn connect_timeout_is_classified() {
    // Backlog 1 and never accepting: the kernel drops further SYNs.
    let (listener, addr) = crate::common::unaccepted_listener(0);
    let r = run(&[
        "--url",
        &format!("http://{addr}/"),
        "--vus",
        "8",
        "--duration",
        "1s",
        "--connect-timeout",
        "300ms",
        "--timeout",
        "300ms",
    ]);
    assert!(
        r.error("connect_timeout") > 0,
        "{:?}",
        r.results()["errors"]
    );
    drop(listener);
}

/// Legal framings are successes, and a close-delimited body is followed by
/// a reconnect rather than an error (wrk miscounts these).
#[test]
fn every_legal_framing_is_a_success() {
    let cases: &[(&str, &[u8], bool)] = &[
        ("content-length", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false),
        (
            "chunked",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            false,
        ),
        ("until close", b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nbody until close", true),
        ("HTTP/1.0", b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", true),
        (
            "connection: close",
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
            true,
        ),
        ("interim 100", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", false),
    ];
    for &(label, response, closes) in cases {
        let server = answering(response, closes);
        let r = run(&["--url", &server.url("/"), "--vus", "3", "--duration", "1s"]);
        assert_eq!(r.code, 0, "{label}: {}", r.stderr);
        let res = r.results();
        assert_eq!(
            res["requests"]["failed"].as_u64(),
            Some(0),
            "{label}: {}",
            res["errors"]
        );
        assert!(r.total() > 20, "{label}");
        assert_eq!(server.requests(), r.total(), "{label}");
        let conns = res["connections_opened"].as_u64().unwrap();
        if closes {
            assert_eq!(conns, r.total(), "{label}: one connection per response");
        } else {
            assert_eq!(conns, 3, "{label}: keep-alive");
        }
    }
}

#[test]
fn dripping_server_is_read_correctly() {
    let server = RawServer::start(|mut s, count| {
        while read_request(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            for b in b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" {
                if s.write_all(&[*b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    });
    let r = run(&["--url", &server.url("/"), "--vus", "2", "--duration", "1s"]);
    assert_eq!(r.results()["requests"]["failed"].as_u64(), Some(0));
    assert!(r.total() >= 10);
    assert_eq!(server.requests(), r.total());
}

/// A study or capacity search runs many plans on one stop signal (the one
/// Ctrl-C sets). A run cut off by its own hard stop must not stop the next.
#[test]
fn a_run_cut_off_by_its_hard_stop_does_not_stop_the_next_run() {
    use headroom_scenario::{build_raw, parse, Format};
    let target = Target::start(1, 8);
    let plan = |path: &str| {
        let text = format!(
            "[load]\nmodel = \"closed\"\nvus = 2\nduration = \"1s\"\ngraceful_stop = \"200ms\"\n\n\
             [[request]]\nname = \"r\"\nurl = \"{}\"\n",
            target.url(path)
        );
        build_raw(&parse(&text, Format::Toml).unwrap(), "test", path)
            .unwrap()
            .plan
    };
    let stop = headroom_engine::StopSignal::new();
    let cut_off = headroom_engine::run(&plan("/sleep?ms=5000"), &stop, |_| {});
    assert_eq!(
        cut_off.total.errors[headroom_metrics::ErrorClass::Aborted.index()],
        2
    );
    assert!(!stop.is_stopping(), "the caller's signal was left alone");
    let next = headroom_engine::run(&plan("/hello"), &stop, |_| {});
    assert!(
        next.total.ok > 10,
        "the next run sent: {} ok",
        next.total.ok
    );
    assert!(!next.interrupted);
}
