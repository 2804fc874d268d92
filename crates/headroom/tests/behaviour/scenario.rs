//! Scenario files against real servers: the shipped examples work as
//! written; mixes follow their weights; feeders, extraction, cookies and
//! checks do what they say — counted on the server's side.

use crate::common::study::examples;
use crate::common::{example, read_request_head, run, scenario_dir, Nginx, RawServer, Target};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

#[test]
fn mix_toml_works_as_written() {
    let target = Target::start(2, 8);
    let r = run(&[
        &example("mix.toml"),
        "--base-url",
        &target.base,
        "--duration",
        "3s",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let res = r.results();
    assert_eq!(
        res["requests"]["failed"].as_u64(),
        Some(0),
        "{}",
        res["errors"]
    );
    assert_eq!(target.requests(), r.total());
    let per = res["per_request"].as_object().unwrap();
    let names: Vec<&str> = per.keys().map(String::as_str).collect();
    assert_eq!(names, ["home", "item", "missing"]);
    // "missing" answers 404, which it expects: OK, not failed.
    assert!(per["missing"]["requests"]["ok"].as_u64().unwrap() > 0);
    assert_eq!(
        per["missing"]["status_codes"]["404"],
        per["missing"]["requests"]["total"]
    );
    let sum: u64 = per
        .values()
        .map(|s| s["requests"]["total"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, r.total());
}

#[test]
fn yaml_is_the_same_scenario_as_toml() {
    use headroom_scenario::{parse, Format};
    let toml = std::fs::read_to_string(examples().join("mix.toml")).unwrap();
    let yaml = std::fs::read_to_string(examples().join("mix.yaml")).unwrap();
    assert_eq!(
        parse(&toml, Format::Toml).unwrap(),
        parse(&yaml, Format::Yaml).unwrap()
    );
    let target = Target::start(1, 8);
    let r = run(&[
        &example("mix.yaml"),
        "--base-url",
        &target.base,
        "--duration",
        "1s",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(target.requests(), r.total());
    assert_eq!(r.results()["per_request"].as_object().unwrap().len(), 3);
}

/// Every shipped example runs against the built-in target (shortened by
/// its environment variables) without a failed request.
#[test]
fn every_example_runs() {
    let target = Target::start(2, 16);
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("closed-users.toml", &[("DURATION", "2s")]),
        ("constant-rate.toml", &[("DURATION", "2s")]),
        ("stepped-rates.toml", &[("STEP", "500ms")]),
        (
            "arriving-sessions.toml",
            &[("USERS", "20"), ("OVER", "2s"), ("THINK", "10ms")],
        ),
        ("random-urls.toml", &[("USERS", "50"), ("RAMP", "1s")]),
        ("login-flow.toml", &[("USERS", "4"), ("DURATION", "2s")]),
    ];
    for (file, env) in cases {
        let before = target.requests();
        let r = crate::common::run_with(&[&example(file)], |cmd| {
            cmd.env("BASE_URL", &target.base);
            for (k, v) in *env {
                cmd.env(k, v);
            }
        });
        assert_eq!(r.code, 0, "{file}: {}", r.stderr);
        let res = r.results();
        assert_eq!(
            res["requests"]["failed"].as_u64(),
            Some(0),
            "{file}: {}",
            res["errors"]
        );
        assert_eq!(
            target.requests() - before,
            r.total(),
            "{file}: server count"
        );
        match *file {
            // 8 stages × 0.5 s at 10..50/s: (10+15+20+25+30+35+40+50) / 2
            // = 112.5 arrivals, so arrivals 0..=112 are due.
            "stepped-rates.toml" => assert_eq!(r.total(), 113),
            // 20 users × 8 requests
            "arriving-sessions.toml" => assert_eq!(r.total(), 160),
            // 50 users × 10 iterations
            "random-urls.toml" => assert_eq!(r.total(), 500),
            _ => {}
        }
    }
}

fn write_scenario(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("s.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn weighted_mix_follows_its_weights_on_the_server() {
    let nginx = Nginx::start();
    let dir = scenario_dir(&[]);
    let file = write_scenario(
        &dir,
        &format!(
            r#"
base_url = "{}"
[load]
vus = 4
max_requests = 3000
[[request]]
name = "a"
path = "/a"
weight = 6
[[request]]
name = "b"
path = "/b"
weight = 3
[[request]]
name = "c"
path = "/c"
weight = 1
"#,
            nginx.url("")
        ),
    );
    let r = run(&[&file]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.total(), 3000);
    let mut seen: BTreeMap<String, f64> = BTreeMap::new();
    for p in nginx.paths() {
        *seen.entry(p).or_default() += 1.0;
    }
    assert_eq!(seen.values().sum::<f64>(), 3000.0);
    // Pearson's chi-square against 6:3:1, 2 degrees of freedom; 13.82 is
    // the 0.1 % critical value, so a correct mix fails 1 run in 1000.
    let chi2: f64 = [("/a", 0.6), ("/b", 0.3), ("/c", 0.1)]
        .iter()
        .map(|(path, share)| {
            let expected = 3000.0 * share;
            let got = seen.get(*path).copied().unwrap_or(0.0);
            (got - expected).powi(2) / expected
        })
        .sum();
    assert!(chi2 < 13.82, "chi-square {chi2:.2}: {seen:?}");
}

/// Runs users through a feeder of ids r1..r5 and returns the ids the
/// server saw, in order. `bound` is the load's limit, e.g. "max_requests = 12".
fn feeder_run(
    order: &str,
    scope: &str,
    vus: u32,
    bound: &str,
) -> (Vec<String>, crate::common::Run) {
    let nginx = Nginx::start();
    let rows = "id\nr1\nr2\nr3\nr4\nr5\n";
    let dir = scenario_dir(&[("ids.csv", rows)]);
    let file = write_scenario(
        &dir,
        &format!(
            r#"
base_url = "{}"
[load]
vus = {vus}
{bound}
[[feeder]]
name = "ids"
file = "ids.csv"
order = "{order}"
scope = "{scope}"
[[request]]
name = "get"
path = "/f?id={{{{id}}}}"
"#,
            nginx.url("")
        ),
    );
    let r = run(&[&file]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // nginx writes a line once the response has gone: on a busy machine
    // the client can read it, finish, and be here first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while nginx.requests() < r.total() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let ids = nginx
        .paths()
        .iter()
        .map(|p| p.trim_start_matches("/f?id=").to_string())
        .collect();
    (ids, r)
}

#[test]
fn circular_feeder_visits_every_row_in_order() {
    let (ids, _) = feeder_run("circular", "shared", 1, "max_requests = 12");
    assert_eq!(
        ids,
        ["r1", "r2", "r3", "r4", "r5", "r1", "r2", "r3", "r4", "r5", "r1", "r2"]
    );
}

#[test]
fn sequential_feeder_goes_once_through_then_stops_the_run() {
    let (ids, r) = feeder_run("sequential", "shared", 1, "max_requests = 50");
    assert_eq!(ids, ["r1", "r2", "r3", "r4", "r5"]);
    let reason = r.results()["stop_reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("feeder `ids`") && reason.contains("ran out of rows"),
        "{reason}"
    );
    assert!(r.stdout.contains("stopped early: feeder `ids`"));
}

#[test]
fn unique_feeder_never_repeats_and_stops_when_dry() {
    let (ids, r) = feeder_run("unique", "shared", 3, "max_requests = 50");
    let mut sorted = ids.clone();
    sorted.sort();
    let seen = format!("{} {}", r.results()["errors"], r.results()["requests"]);
    assert_eq!(r.total(), 5, "{seen}");
    assert_eq!(
        sorted,
        ["r1", "r2", "r3", "r4", "r5"],
        "got {ids:?}; {seen}"
    );
    assert!(r.results()["stop_reason"]
        .as_str()
        .unwrap()
        .contains("Unique"));
}

#[test]
fn random_feeder_covers_the_rows() {
    let (ids, _) = feeder_run("random", "shared", 2, "max_requests = 200");
    let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), 5, "{distinct:?}");
    assert_eq!(ids.len(), 200);
}

#[test]
fn per_user_feeder_gives_each_user_its_own_walk() {
    let (ids, r) = feeder_run("circular", "per_user", 3, "iterations = 3");
    assert_eq!(r.total(), 9);
    let count = |id: &str| ids.iter().filter(|i| *i == id).count();
    // 3 users × 3 requests: each walks r1, r2, r3 on its own.
    assert_eq!(
        (count("r1"), count("r2"), count("r3"), count("r4")),
        (3, 3, 3, 0),
        "{ids:?}"
    );
}

/// A server for flows: /login answers a token (JSON), a header and a
/// cookie; every request head is kept for the test to read.
fn flow_server() -> (RawServer, Arc<Mutex<Vec<String>>>) {
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    let server = RawServer::start(move |mut s, count| {
        while let Some(head) = read_request_head(&mut s) {
            count.fetch_add(1, Ordering::SeqCst);
            let response = if head.starts_with("POST /login") {
                let body = r#"{"token":"abc123","n":"n-9Q"}"#;
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Request-Id: 77\r\n\
                     Set-Cookie: sid=xyz; Path=/\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_string()
            };
            seen.lock().unwrap().push(head);
            if s.write_all(response.as_bytes()).is_err() {
                return;
            }
        }
    });
    (server, heads)
}

#[test]
fn extraction_feeds_the_next_request() {
    let (server, heads) = flow_server();
    let dir = scenario_dir(&[]);
    let file = write_scenario(
        &dir,
        &format!(
            r#"
base_url = "{}"
[load]
vus = 1
iterations = 2
[[request]]
name = "login"
method = "POST"
path = "/login"
extract = [
  {{ name = "token", json_path = "$.token" }},
  {{ name = "rid", header = "X-Request-Id" }},
  {{ name = "code", regex = "\"n\":\"(n-[0-9A-Z]+)\"" }},
  {{ name = "sid", cookie = "sid" }},
]
[[request]]
name = "data"
path = "/data?t={{{{token}}}}&r={{{{rid}}}}&c={{{{code}}}}&s={{{{sid}}}}"
headers = {{ Authorization = "Bearer {{{{token}}}}" }}
[[session]]
name = "flow"
steps = [ {{ request = "login" }}, {{ request = "data" }} ]
"#,
            server.url("")
        ),
    );
    let r = run(&[&file]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.results()["requests"]["failed"].as_u64(),
        Some(0),
        "{}",
        r.results()["errors"]
    );
    assert_eq!(r.total(), 4);
    let heads = heads.lock().unwrap();
    let data: Vec<&String> = heads
        .iter()
        .filter(|h| h.starts_with("GET /data"))
        .collect();
    assert_eq!(data.len(), 2);
    for h in data {
        assert!(
            h.starts_with("GET /data?t=abc123&r=77&c=n-9Q&s=xyz "),
            "{h}"
        );
        assert!(h.contains("Authorization: Bearer abc123\r\n"), "{h}");
        // The cookie jar sends back what /login set.
        assert!(h.contains("Cookie: sid=xyz\r\n"), "{h}");
    }
}

#[test]
fn cookies_can_be_turned_off() {
    let (server, heads) = flow_server();
    let dir = scenario_dir(&[]);
    let file = write_scenario(
        &dir,
        &format!(
            r#"
base_url = "{}"
http = {{ cookies = false }}
[load]
vus = 1
iterations = 1
[[request]]
name = "login"
method = "POST"
path = "/login"
[[request]]
name = "data"
path = "/data"
[[session]]
name = "flow"
steps = [ {{ request = "login" }}, {{ request = "data" }} ]
"#,
            server.url("")
        ),
    );
    let r = run(&[&file]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(heads.lock().unwrap().iter().all(|h| !h.contains("Cookie:")));
}

#[test]
fn checks_fail_exactly_the_responses_that_should_fail() {
    // Every third response says {"ok":false} and lacks a header.
    let bad = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let bad_count = bad.clone();
    let server = RawServer::start(move |mut s, count| {
        while read_request_head(&mut s).is_some() {
            let n = count.fetch_add(1, Ordering::SeqCst) + 1;
            let response: &[u8] = if n % 3 == 0 {
                bad_count.fetch_add(1, Ordering::SeqCst);
                b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{\"ok\":false}"
            } else {
                b"HTTP/1.1 200 OK\r\nX-Good: yes\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"
            };
            if s.write_all(response).is_err() {
                return;
            }
        }
    });
    let dir = scenario_dir(&[]);
    let file = write_scenario(
        &dir,
        &format!(
            r#"
base_url = "{}"
[load]
vus = 2
max_requests = 300
[[request]]
name = "r"
path = "/"
check = [
  {{ status = "2xx" }},
  {{ response_time_under = "1h" }},
  {{ json_path = "$.ok", equals = true }},
  {{ header = "X-Good", equals = "yes", name = "good header" }},
  {{ body_regex = "ok" }},
]
"#,
            server.url("")
        ),
    );
    let r = run(&[&file]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let res = r.results();
    let bad = bad.load(Ordering::SeqCst);
    assert_eq!(r.total(), 300);
    assert_eq!(bad, 100);
    assert_eq!(res["requests"]["failed"].as_u64(), Some(bad));
    // The first failing check is the one named in the error classes.
    assert_eq!(
        res["errors"]["check: r: json $.ok == true"].as_u64(),
        Some(bad),
        "{}",
        res["errors"]
    );
    assert_eq!(res["errors"].as_object().unwrap().len(), 1);
    assert_eq!(
        res["per_request"]["r"]["requests"]["failed"].as_u64(),
        Some(bad)
    );
}

#[test]
fn body_and_json_are_sent_as_written() {
    let (server, heads) = flow_server();
    let dir = scenario_dir(&[("body.txt", "from a file {{user_id}}")]);
    let file = write_scenario(
        &dir,
        &format!(
            r#"
base_url = "{}"
[load]
vus = 1
iterations = 1
[[request]]
name = "json"
method = "PUT"
path = "/j"
json = {{ user = "{{{{user_id}}}}", n = 3 }}
[[request]]
name = "file"
method = "POST"
path = "/f"
body_file = "body.txt"
[[session]]
name = "s"
steps = [ {{ request = "json" }}, {{ request = "file" }} ]
"#,
            server.url("")
        ),
    );
    let r = run(&[&file]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let heads = heads.lock().unwrap();
    assert!(heads[0].starts_with("PUT /j"));
    assert!(
        heads[0].contains("Content-Type: application/json\r\n"),
        "{}",
        heads[0]
    );
    // {"n":3,"user":"0"} is 18 bytes
    assert!(heads[0].contains("Content-Length: 18\r\n"), "{}", heads[0]);
    assert!(heads[1].contains("Content-Length: 13\r\n"), "{}", heads[1]);
}

/// A session with every kind of step and check runs on the event loop by
/// default and on tasks when asked, and both count it alike: the same
/// requests, the same checks failed, the server's count the same, the
/// token extracted from JSON accepted by the server every time.
#[test]
fn a_session_runs_alike_on_both_engines() {
    let target = Target::start(2, 8);
    let dir = scenario_dir(&[("users.csv", "user\nann\nbob\ncat\n")]);
    let file = write_scenario(
        &dir,
        &format!(
            r#"
base_url = "{}"
[load]
vus = 4
iterations = 25
[http]
cookies = true
[[feeder]]
name = "users"
file = "users.csv"
order = "circular"
[[request]]
name = "login"
method = "POST"
path = "/login?user={{{{user}}}}"
check = [
  {{ body_contains = "tok-{{{{user}}}}" }},
  {{ json_path = "$.user", equals = "{{{{user}}}}" }},
  {{ header = "Content-Type", equals = "application/json" }},
]
extract = [
  {{ name = "token", json_path = "$.token" }},
  {{ name = "sid", cookie = "session" }},
]
[[request]]
name = "private"
path = "/private?sid={{{{sid}}}}"
headers = {{ Authorization = "Bearer {{{{token}}}}" }}
check = [{{ json_path = "$.user", equals = "{{{{user}}}}" }}]
[[request]]
name = "missing"
path = "/status?code=404"
expect = {{ status = 404 }}
check = [{{ status = 404 }}]
[[request]]
name = "big"
path = "/bytes?n=200000"
check = [{{ body_regex = "^x{{200000}}$" }}]
[[request]]
name = "wrong"
path = "/hello"
check = [{{ body_contains = "nope" }}]
[[session]]
name = "flow"
steps = [
  {{ request = "login" }},
  {{ repeat = 2, steps = [
    {{ choice = [
      {{ weight = 1, steps = [{{ request = "private" }}] }},
      {{ weight = 1, steps = [{{ request = "missing" }}, {{ think = "1ms" }}] }},
    ] }},
  ] }},
  {{ request = "big" }},
  {{ request = "wrong" }},
]
"#,
            target.base
        ),
    );
    for engine in ["auto", "tasks"] {
        let before = target.requests();
        let r = run(&[&file, "--engine", engine]);
        assert!(r.code == 0, "{engine}: {}", r.stderr);
        let res = r.results();
        let expected = if engine == "auto" {
            "event_loop"
        } else {
            "tasks"
        };
        assert_eq!(res["meta"]["generator_engine"], expected);
        assert_eq!(r.total(), 500, "{engine}: 4 users × 25 iterations × 5");
        assert_eq!(
            target.requests() - before,
            500,
            "{engine}: the server's count"
        );
        let per = &res["per_request"];
        let count = |name: &str, what: &str| per[name]["requests"][what].as_u64().unwrap_or(0);
        assert_eq!(count("login", "ok"), 100, "{engine}: {}", res["errors"]);
        assert_eq!(count("big", "ok"), 100, "{engine}: {}", res["errors"]);
        assert_eq!(count("wrong", "failed"), 100, "{engine}");
        assert_eq!(
            count("private", "ok"),
            count("private", "total"),
            "{engine}: {}",
            res["errors"]
        );
        assert_eq!(
            count("missing", "ok"),
            count("missing", "total"),
            "{engine}: {}",
            res["errors"]
        );
        assert_eq!(count("private", "total") + count("missing", "total"), 200);
        assert!(count("private", "total") > 0 && count("missing", "total") > 0);
        // Only the check meant to fail failed.
        assert_eq!(
            res["requests"]["failed"].as_u64(),
            Some(100),
            "{}",
            res["errors"]
        );
        assert_eq!(
            res["errors"]["check: wrong: body contains \"nope\""].as_u64(),
            Some(100),
            "{engine}: {}",
            res["errors"]
        );
    }
}
