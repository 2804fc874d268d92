//! Exact counts: every request the client counts is one the server
//! received, in both load models, with keep-alive on and off, against the
//! built-in target and nginx.

use crate::common::{run, Nginx, Target};

/// (label, extra flags)
const MODES: &[(&str, &[&str])] = &[
    ("closed keep-alive", &["--vus", "8", "--duration", "2s"]),
    (
        "closed new connection per request",
        &["--vus", "8", "--duration", "2s", "--no-keepalive"],
    ),
    ("open keep-alive", &["--rate", "400", "--duration", "2s"]),
    (
        "open new connection per request",
        &["--rate", "400", "--duration", "2s", "--no-keepalive"],
    ),
];

fn check(label: &str, flags: &[&str], url: &str, server_count: &dyn Fn() -> u64) {
    let before = server_count();
    let mut args = vec!["--url", url];
    args.extend_from_slice(flags);
    let r = run(&args);
    assert_eq!(r.code, 0, "{label}: {}", r.stderr);
    let res = r.results();
    let total = r.total();
    let ok = res["requests"]["ok"].as_u64().unwrap();
    let failed = res["requests"]["failed"].as_u64().unwrap();
    assert!(total > 100, "{label}: only {total} requests");
    assert_eq!(ok + failed, total, "{label}: ok + failed != total");
    assert_eq!(failed, 0, "{label}: {:?}", res["errors"]);
    assert_eq!(
        server_count() - before,
        total,
        "{label}: server count differs"
    );
    let timeline_total: u64 = res["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(timeline_total, total, "{label}: timeline does not add up");
    if flags.contains(&"--no-keepalive") {
        assert_eq!(
            res["connections_opened"].as_u64().unwrap(),
            total,
            "{label}"
        );
    }
    if flags.contains(&"--rate") {
        // 400/s for 2 s is exactly 800 scheduled requests.
        assert_eq!(total, 800, "{label}");
    }
}

#[test]
fn counts_match_the_builtin_target() {
    let target = Target::start(2, 8);
    let url = target.url("/hello");
    for (label, flags) in MODES {
        check(label, flags, &url, &|| target.requests());
    }
}

#[test]
fn counts_match_nginx() {
    let nginx = Nginx::start();
    let url = nginx.url("/");
    for (label, flags) in MODES {
        check(label, flags, &url, &|| nginx.requests());
    }
}

#[test]
fn requests_flag_stops_after_exactly_n() {
    let target = Target::start(1, 4);
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "--vus",
        "7",
        "--requests",
        "1234",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.total(), 1234);
    assert_eq!(target.requests(), 1234);
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "--vus",
        "3",
        "--iterations",
        "50",
    ]);
    assert_eq!(r.total(), 150);
}

/// Users that think long give their buffers back while they wait
/// (`User::before_pause`); the kept-alive connection stays, and every
/// response is still read whole.
#[test]
fn long_think_times_keep_connections_and_counts() {
    let nginx = Nginx::start();
    let r = run(&[
        "--url",
        &nginx.url("/"),
        "--vus",
        "4",
        "--iterations",
        "5",
        "--think-time",
        "150ms",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.total(), 20);
    assert_eq!(r.results()["requests"]["ok"], 20);
    assert_eq!(nginx.requests(), 20);
    assert_eq!(
        r.results()["connections"]["opened"],
        4,
        "one connection per user"
    );
}
