//! The closed model's fast path (one event loop per worker, `event_loop.rs`)
//! against real servers over real sockets: the same counts as the task
//! per user path, bodies read over many reads, cookies kept. The hostile
//! servers (closes, resets, garbage, timeouts, refused connects) are the
//! CLI's tests (`tests/behaviour/hostile.rs`, `errors.rs`), whose one-liner
//! plans run on this path. Counts only, no timing asserted.

mod common;

use headroom_engine::metrics::ConnectionEvent::{Opened, UnrequestedBytes};
use headroom_engine::metrics::ErrorClass;
use headroom_engine::plan::{ClosedLoad, Engine, Load, Plan, RequestSpec};
use headroom_engine::{run, runs_on_event_loop, StopSignal};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A GET of `target` like the plan's first request.
fn get(plan: &Plan, target: &str) -> RequestSpec {
    let mut spec = plan.requests[0].clone();
    spec.name = target.into();
    spec.target = target.into();
    spec.encoded =
        headroom_http::encode_request("GET", target, &plan.endpoint.host_header, &[], b"", true)
            .unwrap();
    spec
}

#[test]
fn both_engines_count_a_mix_exactly_and_alike() {
    let base = common::sample_server(4);
    let mut plan = Plan::get(&format!("{base}/hello")).unwrap();
    // A body of many reads, and a status that fails.
    plan.requests.push(get(&plan, "/bytes?n=200000"));
    plan.requests.push(get(&plan, "/status?code=503"));
    plan.load = Load::Closed(ClosedLoad::users(20, Duration::from_secs(30)));
    plan.max_requests = Some(3_000);
    plan.threads = 2;
    assert!(runs_on_event_loop(&plan));
    let fast = run(&plan, &StopSignal::new(), |_| {});
    plan.engine = Engine::Tasks;
    assert!(!runs_on_event_loop(&plan));
    let tasks = run(&plan, &StopSignal::new(), |_| {});
    for (name, outcome) in [("event loop", &fast), ("tasks", &tasks)] {
        let t = &outcome.total;
        assert_eq!(t.requests, 3_000, "{name}");
        let [hello, bytes, status] = &outcome.per_request[..] else {
            panic!("three requests");
        };
        assert_eq!(hello.ok + bytes.ok, t.ok, "{name}");
        assert_eq!(hello.failed + bytes.failed, 0, "{name}");
        assert_eq!(status.failed, status.requests, "{name}");
        assert_eq!(status.status[503], status.requests, "{name}");
        assert!(bytes.requests > 0 && status.requests > 0, "{name}");
        // Each 200,000-byte body counted whole, its head on top.
        assert!(bytes.bytes >= bytes.requests * 200_000, "{name}");
        assert!(bytes.bytes < bytes.requests * 201_000, "{name}");
        // One connection per user, kept alive throughout.
        assert_eq!(t.connection_count(Opened), 20, "{name}");
        assert_eq!(t.errors.iter().sum::<u64>(), status.requests, "{name}");
        assert_eq!(t.errors[ErrorClass::Http5xx as usize], status.requests);
    }
}

/// Reads one request's lines up to the blank one, each to `line`; false
/// when the client closed the connection first.
fn read_request(reader: &mut impl BufRead, mut line: impl FnMut(&str)) -> bool {
    let mut text = String::new();
    loop {
        text.clear();
        if reader.read_line(&mut text).unwrap_or(0) == 0 {
            return false;
        }
        if text == "\r\n" {
            return true;
        }
        line(&text);
    }
}

/// A server whose first answer on each connection sets a cookie; it notes
/// the `Cookie` header of every request.
fn cookie_server() -> (String, Arc<Mutex<Vec<Option<String>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                let mut first = true;
                loop {
                    let mut cookie = None;
                    let request = read_request(&mut reader, |line| {
                        if let Some(v) = line.strip_prefix("Cookie: ") {
                            cookie = Some(v.trim().to_string());
                        }
                    });
                    if !request {
                        return;
                    }
                    log.lock().unwrap().push(cookie);
                    let set = if first {
                        "Set-Cookie: session=abc\r\n"
                    } else {
                        ""
                    };
                    first = false;
                    let answer = format!("HTTP/1.1 200 OK\r\n{set}Content-Length: 2\r\n\r\nok");
                    if writer.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

#[test]
fn a_cookie_the_server_sets_is_sent_back_on_the_fast_path() {
    let (url, seen) = cookie_server();
    let mut plan = Plan::get(&url).unwrap();
    plan.cookies = true;
    plan.load = Load::Closed(ClosedLoad {
        iterations: Some(4),
        ..ClosedLoad::users(2, Duration::from_secs(30))
    });
    plan.threads = 1;
    assert!(runs_on_event_loop(&plan));
    let outcome = run(&plan, &StopSignal::new(), |_| {});
    assert_eq!((outcome.total.requests, outcome.total.ok), (8, 8));
    let seen = seen.lock().unwrap();
    let with_cookie = seen
        .iter()
        .filter(|c| c.as_deref() == Some("session=abc"))
        .count();
    // Each user's first request has none; its other three send it.
    assert_eq!(seen.len(), 8);
    assert_eq!(with_cookie, 6, "{seen:?}");
}

/// A server that answers each request, then, 100 ms later, sends bytes
/// nobody asked for on the same connection.
fn chatty_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                while read_request(&mut reader, |_| {}) {
                    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                    if writer.write_all(answer).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    if writer.write_all(b"unasked").is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

#[test]
fn bytes_sent_while_a_user_thinks_replace_its_connection_on_both_paths() {
    let url = chatty_server();
    let mut plan = Plan::get(&url).unwrap();
    // The bytes come 100 ms after each answer, well within the pause.
    plan.load = Load::Closed(ClosedLoad {
        iterations: Some(3),
        think_time: Duration::from_millis(600),
        ..ClosedLoad::users(1, Duration::from_secs(30))
    });
    plan.threads = 1;
    for engine in [Engine::Auto, Engine::Tasks] {
        plan.engine = engine;
        assert_eq!(runs_on_event_loop(&plan), engine == Engine::Auto);
        let t = run(&plan, &StopSignal::new(), |_| {}).total;
        assert_eq!((t.requests, t.ok), (3, 3), "{engine:?}");
        // Found before the second and the third request: each goes out on
        // a new connection.
        assert_eq!(
            t.connection_count(UnrequestedBytes),
            2,
            "{engine:?}: {:?}",
            t.connection_events
        );
        assert_eq!(t.connection_count(Opened), 3, "{engine:?}");
    }
}

/// The open model: every scheduled arrival is sent once and counted, on
/// both paths, whether arrivals share kept-alive connections or each is a
/// user that brings its own; with too few connections, arrivals wait
/// (counted) and their latency carries the wait.
#[test]
fn both_engines_send_every_open_arrival_once() {
    use headroom_engine::plan::schedule::Schedule;
    use headroom_engine::plan::OpenLoad;
    let base = common::sample_server(8);
    for users in [false, true] {
        for engine in [Engine::Auto, Engine::Tasks] {
            let mut plan = Plan::get(&format!("{base}/hello")).unwrap();
            plan.requests.push(get(&plan, "/status?code=503"));
            plan.load = Load::Open(OpenLoad {
                users,
                schedule: Schedule::constant(1_000.0, Duration::from_millis(1_500)).unwrap(),
                max_connections: 50,
            });
            plan.threads = 2;
            plan.engine = engine;
            assert_eq!(runs_on_event_loop(&plan), engine == Engine::Auto);
            let outcome = run(&plan, &StopSignal::new(), |_| {});
            let what = format!("{engine:?}, users {users}");
            let t = &outcome.total;
            assert_eq!(t.requests, 1_500, "{what}");
            let [hello, status] = &outcome.per_request[..] else {
                panic!("two requests");
            };
            assert_eq!(hello.ok, hello.requests, "{what}");
            assert_eq!(status.status[503], status.requests, "{what}");
            assert_eq!(t.errors.iter().sum::<u64>(), status.requests, "{what}");
            let opened = t.connection_count(Opened);
            if users {
                // Each arriving user opens its connection and closes it.
                assert_eq!(opened, 1_500, "{what}");
            } else {
                assert!(opened <= 50, "{what}: {opened} connections");
            }
        }
    }
    // One connection, each answer 20 ms: 50 arrivals a second go out, the
    // rest wait their turn — and are timed from when they were due.
    for engine in [Engine::Auto, Engine::Tasks] {
        let mut plan = Plan::get(&format!("{base}/sleep?ms=20")).unwrap();
        plan.load = Load::Open(OpenLoad {
            users: false,
            schedule: Schedule::constant(100.0, Duration::from_millis(500)).unwrap(),
            max_connections: 1,
        });
        plan.threads = 1;
        plan.engine = engine;
        let outcome = run(&plan, &StopSignal::new(), |_| {});
        let t = &outcome.total;
        assert_eq!(t.requests, 50, "{engine:?}");
        assert_eq!(t.ok, 50, "{engine:?}");
        assert!(outcome.waited_for_connection > 0, "{engine:?}");
        // The last of 50 arrivals 10 ms apart, served 20 ms each one after
        // the other, went out ~0.5 s after it was due.
        assert!(
            t.latency.max() >= 400_000,
            "{engine:?}: max latency {} us",
            t.latency.max()
        );
    }
}
