//! Router workloads: thousands of host names through one address
//! (`--connect-to`), full URLs from a feeder, connections kept per origin
//! and capped per host — against nginx with 6,000 virtual hosts.

use crate::common::{example, run, run_with, scenario_dir, Nginx, Run};
use std::collections::{BTreeMap, BTreeSet};

/// The seed's 6,000 app host names (as in `examples/router-urls.csv`).
fn app_hosts() -> Vec<String> {
    (0..6000)
        .map(|i| format!("app{i:04}.example.test"))
        .collect()
}

/// Runs `s.toml` of `dir` with every host name sent to `router`.
fn run_routed(dir: &tempfile::TempDir, router: &Nginx) -> Run {
    let s = dir.path().join("s.toml");
    run(&[
        s.to_str().unwrap(),
        "--connect-to",
        &format!("::127.0.0.1:{}", router.port),
    ])
}

/// The host names the router's access log saw, with the status of each.
fn logged(nginx: &Nginx) -> Vec<(String, String)> {
    nginx
        .log_fields()
        .into_iter()
        .map(|f| (f[0].clone(), f[2].clone()))
        .collect()
}

#[test]
fn router_example_sends_each_url_to_its_own_host_through_one_address() {
    let nginx = Nginx::start_router(&app_hosts());
    let connect_to = format!("::127.0.0.1:{}", nginx.port);
    let r = run_with(
        &[
            &example("router-host-names.toml"),
            "--connect-to",
            &connect_to,
        ],
        |cmd| {
            cmd.env("USERS", "20").env("RAMP", "1s");
        },
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let res = r.results();
    // 20 users × 10 iterations, every one a 200 from its own app.
    assert_eq!(r.total(), 200, "{}", res["errors"]);
    assert_eq!(res["requests"]["failed"].as_u64(), Some(0));
    let seen = logged(&nginx);
    assert_eq!(seen.len(), 200);
    let known: BTreeSet<String> = app_hosts().into_iter().collect();
    for (host, status) in &seen {
        assert!(known.contains(host), "{host} is not an app");
        assert_eq!(status, "200", "{host}");
    }
    // Drawn at random from 6,000: far more than a handful of hosts.
    let distinct: BTreeSet<&String> = seen.iter().map(|(h, _)| h).collect();
    assert!(distinct.len() > 150, "{} distinct hosts", distinct.len());
}

#[test]
fn an_unknown_host_gets_the_routers_404_and_is_counted() {
    let nginx = Nginx::start_router(&app_hosts()[..10]);
    let dir = scenario_dir(&[
        (
            "urls.csv",
            "url\nhttp://app0001.example.test/a\nhttp://gone.example.test/b\n",
        ),
        (
            "s.toml",
            r#"
[load]
vus = 1
iterations = 10

[[feeder]]
name = "urls"
file = "urls.csv"

[[request]]
name = "app"
url = "{{url}}"
"#,
        ),
    ]);
    let r = run_routed(&dir, &nginx);
    let res = r.results();
    assert_eq!(r.total(), 10, "{}", r.stderr);
    assert_eq!(
        res["errors"]["http_4xx"].as_u64(),
        Some(5),
        "{}",
        res["errors"]
    );
    let seen = logged(&nginx);
    let gone = seen
        .iter()
        .filter(|(h, s)| h == "gone.example.test" && s == "404");
    assert_eq!(gone.count(), 5);
    // One user, two origins: one connection to each, kept alive.
    let conns = connections_by_host(&nginx);
    assert_eq!(conns.len(), 2, "{conns:?}");
    assert!(conns.values().all(|c| c.len() == 1), "{conns:?}");
    let all: BTreeSet<_> = conns.values().flatten().collect();
    assert_eq!(all.len(), 2, "two origins never share a connection");
}

/// nginx's connection numbers per host name.
fn connections_by_host(nginx: &Nginx) -> BTreeMap<String, BTreeSet<String>> {
    let mut conns: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in nginx.log_fields() {
        conns.entry(f[0].clone()).or_default().insert(f[1].clone());
    }
    conns
}

#[test]
fn a_host_that_does_not_resolve_is_its_own_error_class() {
    let nginx = Nginx::start();
    let dir = scenario_dir(&[
        (
            "s.toml",
            r#"
[load]
vus = 1
iterations = 4

[[feeder]]
name = "urls"
file = "urls.csv"

[[request]]
name = "app"
url = "{{url}}"
"#,
        ),
        (
            "urls.csv",
            &format!(
                "url\nhttp://127.0.0.1:{}/ok\nhttp://no-such-host.invalid/\n",
                nginx.port
            ),
        ),
    ]);
    let s = dir.path().join("s.toml");
    let r = run(&[s.to_str().unwrap(), "--base-url", &nginx.url("")]);
    let res = r.results();
    assert_eq!(r.total(), 4, "{}", r.stderr);
    assert_eq!(
        res["errors"]["resolve_failed"].as_u64(),
        Some(2),
        "{}",
        res["errors"]
    );
    assert_eq!(nginx.requests(), 2);
}

#[test]
fn connections_per_host_never_exceed_the_cap() {
    let nginx = Nginx::start_router(&app_hosts()[..3]);
    let dir = scenario_dir(&[(
        "s.toml",
        r#"
[load]
vus = 12
iterations = 30

[http]
max_connections_per_host = 2
threads = 2

[[request]]
name = "a"
url = "http://app0000.example.test/"
weight = 2

[[request]]
name = "b"
url = "http://app0001.example.test/"

[[request]]
name = "c"
url = "http://app0002.example.test/"
"#,
    )]);
    let r = run_routed(&dir, &nginx);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.total(), 360);
    assert!(nginx.log_fields().iter().all(|f| f[2] == "200"));
    let conns = connections_by_host(&nginx);
    assert_eq!(conns.len(), 3, "{conns:?}");
    for (host, c) in &conns {
        // nginx keeps every connection alive: a new connection number is a
        // new connection, so at most two per host in the whole run.
        assert!(!c.is_empty() && c.len() <= 2, "{host}: {c:?}");
    }
}

#[test]
fn open_model_users_each_arrive_on_their_own_connection() {
    let nginx = Nginx::start_router(&["app.test".to_string()]);
    let dir = scenario_dir(&[(
        "s.toml",
        r#"
base_url = "http://app.test"

[load]
users = 12
over = "600ms"
max_connections = 4

[[session]]
name = "visit"
steps = [{ request = "a" }, { request = "b" }, { request = "c" }]

[[request]]
name = "a"
path = "/a?u={{user_id}}"

[[request]]
name = "b"
path = "/b?u={{user_id}}"

[[request]]
name = "c"
path = "/c?u={{user_id}}"
"#,
    )]);
    let r = run_routed(&dir, &nginx);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.total(), 36);
    let res = r.results();
    assert_eq!(res["config"]["arrivals"], "users");
    // Users, not requests, are what arrive: each user's three requests on
    // one connection, and no two users on the same one (though at most
    // four ran at once, so a pool would have reused them).
    let mut by_user: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in nginx.log_fields() {
        let user = f[3].split("u=").nth(1).unwrap().to_string();
        by_user.entry(user).or_default().insert(f[1].clone());
    }
    assert_eq!(by_user.len(), 12, "{by_user:?}");
    assert!(by_user.values().all(|c| c.len() == 1), "{by_user:?}");
    let all: BTreeSet<_> = by_user.values().flatten().collect();
    assert_eq!(all.len(), 12, "users shared connections: {by_user:?}");
    // Opened by each user, and counted.
    assert_eq!(
        res["connections_opened"].as_u64(),
        Some(12),
        "{}",
        res["connections_opened"]
    );
    let peak = res["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["active_users"].as_u64().unwrap())
        .max();
    assert!(
        peak.is_some_and(|p| p >= 1),
        "active users counted: {peak:?}"
    );
}

#[test]
fn checks_expand_the_users_variables() {
    let nginx = Nginx::start_router(&app_hosts()[..4]);
    let dir = scenario_dir(&[
        (
            "apps.csv",
            "url,host\nhttp://app0001.example.test/,app0001.example.test\n\
             http://app0002.example.test/,app0003.example.test\n",
        ),
        (
            "s.toml",
            r#"
[load]
vus = 1
iterations = 4

[[feeder]]
name = "apps"
file = "apps.csv"

[[request]]
name = "app"
url = "{{url}}"
check = [{ name = "its own app", body_contains = "app {{host}}" }]
"#,
        ),
    ]);
    let r = run_routed(&dir, &nginx);
    let res = r.results();
    assert_eq!(r.total(), 4, "{}", r.stderr);
    // The second row names another app than its URL's: its check fails.
    assert_eq!(
        res["errors"]["check: app: its own app"].as_u64(),
        Some(2),
        "{}",
        res["errors"]
    );
    assert_eq!(res["requests"]["ok"].as_u64(), Some(2));
}
