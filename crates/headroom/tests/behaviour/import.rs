//! `headroom import` against real servers: the example JMeter plan,
//! imported, sends what real JMeter sends for it (counted in nginx's access
//! logs);
//! a curl command imported sends what curl itself sends; a Postman
//! collection imported sends its requests, bodies and auth as written; an
//! OpenAPI document's operations arrive with their parameters and bodies.

use crate::common::{headroom_bin, import_to_scenario, peer_home, run, Nginx};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// "METHOD /path" of every request in nginx's access log, counted.
fn requests(nginx: &Nginx) -> BTreeMap<String, usize> {
    let log = std::fs::read_to_string(nginx.dir.path().join("access.log")).unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in log.lines() {
        if let Some(req) = line.split('"').nth(1) {
            let mut words = req.split(' ');
            let key = format!(
                "{} {}",
                words.next().unwrap_or(""),
                words.next().unwrap_or("")
            );
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
}

/// nginx answering every path with 200 "hello from nginx".
fn ok_nginx() -> Nginx {
    Nginx::start()
}

/// Where `.ci/jmeter.sh` put JMeter 5 (Maven Central's jars laid out as
/// JMeter's distribution). Debian 12's `jmeter` 2.13 cannot load any plan —
/// its xstream refuses `ScriptWrapper` — so the package is not used.
fn jmeter_home() -> PathBuf {
    let home = peer_home("HEADROOM_JMETER_HOME", "jmeter-5.6.3");
    assert!(
        home.join("bin/ApacheJMeter.jar").is_file(),
        "JMeter 5 is not at {}: run .ci/jmeter.sh (or set HEADROOM_JMETER_HOME)",
        home.display()
    );
    home
}

/// The example JMeter plan run by real JMeter 5.6 and, imported, by
/// headroom, each against its own nginx: both send the same requests —
/// 4 users × 5 loops of its three samplers, the ids of its CSV in turn, the
/// header and the raw body — counted in the two access logs.
#[test]
fn an_imported_jmeter_plan_sends_what_jmeter_sends() {
    let examples =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/jmeter");
    let dir = tempfile::tempdir().unwrap();
    for f in ["plan.jmx", "ids.csv"] {
        std::fs::copy(examples.join(f), dir.path().join(f)).unwrap();
    }

    let by_jmeter = ok_nginx();
    let port = by_jmeter
        .url("")
        .split(':')
        .nth(2)
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let o = Command::new("java")
        .arg("-jar")
        .arg(jmeter_home().join("bin/ApacheJMeter.jar"))
        .args(["-n", "-t", "plan.jmx", "-l", "plan.jtl", "-j", "jmeter.log"])
        .arg(format!("-JPORT={port}"))
        // No shutdown listener on UDP 4445: parallel tests would race for it.
        .arg("-Jjmeterengine.nongui.port=0")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    let scenario = dir.path().join("plan.toml");
    let o = Command::new(headroom_bin())
        .args(["import", "jmx"])
        .arg(dir.path().join("plan.jmx"))
        .arg("--out")
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&scenario).unwrap();
    assert!(text.starts_with("# Imported by headroom from"), "{text}");
    let by_headroom = ok_nginx();
    let base = by_headroom.url("").trim_end_matches('/').to_string();
    let r = run(&[scenario.to_str().unwrap(), "--base-url", &base]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.total(), 60);
    assert_eq!(
        r.results()["requests"]["failed"],
        0,
        "{}",
        r.results()["errors"]
    );

    let mut expected = BTreeMap::new();
    expected.insert("GET /hello".to_string(), 20);
    expected.insert("POST /login".to_string(), 20);
    for id in 101..=105 {
        expected.insert(format!("GET /item?id={id}"), 4);
    }
    assert_eq!(requests(&by_jmeter), expected, "what JMeter sent");
    assert_eq!(requests(&by_headroom), expected, "what headroom sent");
}

#[test]
fn an_imported_curl_command_sends_what_curl_sends() {
    let nginx = ok_nginx();
    let url = nginx.url("/api/items?page=2");
    let command = format!("curl -s -X PUT '{url}' -H 'X-Trace: 7' -d name=lamp -o /dev/null");
    assert!(Command::new("sh")
        .args(["-c", &command])
        .status()
        .unwrap()
        .success());
    let by_curl = requests(&nginx);
    let o = Command::new(headroom_bin())
        .args(["import", "curl", &command])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("curl.toml");
    std::fs::write(&scenario, &o.stdout).unwrap();
    let again = ok_nginx();
    let base = again.url("").trim_end_matches('/').to_string();
    let r = run(&[
        scenario.to_str().unwrap(),
        "--base-url",
        &base,
        "-n",
        "1",
        "-c",
        "1",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(requests(&again), by_curl);
}

/// A shop page whose script fetches a list, then posts to a cart with a
/// JSON body and a header of its own.
const SHOP_PAGE: &str = r#"<!doctype html>
<html><head><title>shop</title><link rel="stylesheet" href="/static/shop.css"></head>
<body><img src="/static/logo.svg" alt="logo">
<script>
fetch('/api/items?page=2')
  .then(r => r.text())
  .then(() => fetch('/api/cart', {method: 'POST',
    headers: {'Content-Type': 'application/json', 'X-Trace': '7'},
    body: JSON.stringify({item: 42})}))
  .then(() => { document.title = 'done'; });
</script></body></html>
"#;

/// A HAR that headless Chromium saved while loading a page (through the
/// DevTools protocol, as the developer tools' "Save all as HAR" does),
/// imported and run once, sends what the browser sent: the page, its
/// stylesheet and image, and the two requests its script made, with the
/// script's body.
#[test]
fn an_imported_har_from_chromium_sends_what_chromium_sent() {
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("static")).unwrap();
    std::fs::write(site.path().join("shop.html"), SHOP_PAGE).unwrap();
    std::fs::write(site.path().join("static/shop.css"), "body { margin: 0 }\n").unwrap();
    std::fs::write(
        site.path().join("static/logo.svg"),
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"/>"#,
    )
    .unwrap();
    let locations = format!(
        "location = /shop {{ default_type text/html; alias {root}/shop.html; }}
    location /static/ {{ root {root}; }}
    location = /favicon.ico {{ return 204; }}
    location /api/ {{ return 200 \"{{\\\"ok\\\":true}}\"; }}",
        root = site.path().display()
    );
    let by_chromium = Nginx::start_with("", &locations);
    let har = site.path().join("shop.har");
    let capture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/common/har_capture.py");
    let o = Command::new("python3")
        .arg(&capture)
        .arg(by_chromium.url("/shop"))
        .arg(&har)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The page, what it links and what its script sent (and Chromium's
    // /favicon.ico, which the HAR records as well).
    let sent = requests(&by_chromium);
    for r in [
        "GET /shop",
        "GET /static/shop.css",
        "GET /static/logo.svg",
        "GET /api/items?page=2",
        "POST /api/cart",
    ] {
        assert_eq!(sent.get(r), Some(&1), "{r} in {sent:?}");
    }

    let o = Command::new(headroom_bin())
        .args(["import", "har"])
        .arg(&har)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let scenario = site.path().join("shop.toml");
    std::fs::write(&scenario, &o.stdout).unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("X-Trace"), "{text}");
    assert!(text.contains(r#"{"item":42}"#), "{text}");

    let by_headroom = Nginx::start_with("", &locations);
    let base = by_headroom.url("").trim_end_matches('/').to_string();
    let r = run(&[
        scenario.to_str().unwrap(),
        "--base-url",
        &base,
        "--vus",
        "1",
        "--iterations",
        "1",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.results()["requests"]["failed"],
        0,
        "{}",
        r.results()["errors"]
    );
    assert_eq!(
        requests(&by_headroom),
        sent,
        "what headroom sent, against Chromium"
    );
}

/// A server answering 200 to every request, and each request it received
/// as "request line | Authorization | Content-Type | body".
fn recording_server() -> (
    crate::common::RawServer,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let server = {
        let seen = seen.clone();
        crate::common::RawServer::start(move |mut s, count| {
            while let Some((head, body)) = crate::common::read_head_and_body(&mut s) {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let line = head.lines().next().unwrap_or("").to_string();
                let header = |name: &str| {
                    head.lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                        })
                        .unwrap_or_default()
                };
                seen.lock().unwrap().push(format!(
                    "{line} | {} | {} | {}",
                    header("authorization"),
                    header("content-type"),
                    String::from_utf8_lossy(&body)
                ));
                let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                if std::io::Write::write_all(&mut s, ok).is_err() {
                    return;
                }
            }
        })
    };
    (server, seen)
}

/// A Postman collection (v2.1, as Postman exports it): folders, collection
/// variables, a JSON body, a form, bearer auth inherited from the
/// collection and basic auth on one request. Imported and run once, the
/// server receives exactly those requests, in order.
#[test]
fn an_imported_postman_collection_sends_its_requests_as_written() {
    let (server, seen) = recording_server();
    let collection = format!(
        r#"{{
  "info": {{"name": "Shop", "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"}},
  "variable": [{{"key": "baseUrl", "value": "{}"}}, {{"key": "item", "value": "42"}}],
  "auth": {{"type": "bearer", "bearer": [{{"key": "token", "value": "t0k3n"}}]}},
  "item": [
    {{"name": "Items", "request": {{"method": "GET", "url": {{"raw": "{{{{baseUrl}}}}/api/items?page=2"}}}}}},
    {{"name": "Cart", "item": [
      {{"name": "Add", "request": {{"method": "POST", "url": "{{{{baseUrl}}}}/api/cart",
        "body": {{"mode": "raw", "raw": "{{\"item\": {{{{item}}}}}}", "options": {{"raw": {{"language": "json"}}}}}}}}}},
      {{"name": "Log in", "request": {{"method": "POST", "url": "{{{{baseUrl}}}}/login",
        "auth": {{"type": "basic", "basic": [{{"key": "username", "value": "ann"}}, {{"key": "password", "value": "pw"}}]}},
        "body": {{"mode": "urlencoded", "urlencoded": [{{"key": "remember", "value": "yes please"}}]}}}}}}
    ]}}
  ]
}}"#,
        server.url("")
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shop.postman_collection.json");
    std::fs::write(&file, collection).unwrap();
    let (scenario, o) = import_to_scenario("postman", &file);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("everything was carried over"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = run(&[
        scenario.to_str().unwrap(),
        "--iterations",
        "1",
        "--vus",
        "1",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "GET /api/items?page=2 HTTP/1.1 | Bearer t0k3n |  | ",
            r#"POST /api/cart HTTP/1.1 | Bearer t0k3n | application/json | {"item": 42}"#,
            "POST /login HTTP/1.1 | Basic YW5uOnB3 | application/x-www-form-urlencoded | remember=yes+please",
        ]
    );
    // A file that is not a collection: the error names the file and line.
    std::fs::write(&file, "{\n  \"item\": [\n    {\"name\": 3}\n  ]\n}").unwrap();
    let o = Command::new(headroom_bin())
        .args(["import", "postman"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("shop.postman_collection.json") && err.contains("line 3"),
        "{err}"
    );
}

/// The Petstore's operations (OpenAPI 3.0, YAML), imported and run as a
/// mix: every operation reaches the server with its path parameter, its
/// required query parameter and a JSON body made from its schema.
#[test]
fn an_imported_openapi_document_sends_every_operation() {
    let (server, seen) = recording_server();
    let spec = format!(
        r##"
openapi: 3.0.3
info: {{title: Petstore, version: 1.0.0}}
servers: [{{url: "{}/api/v3"}}]
paths:
  /pet:
    post:
      operationId: addPet
      requestBody:
        content:
          application/json:
            schema: {{$ref: "#/components/schemas/Pet"}}
      responses: {{"200": {{description: ok}}}}
  /pet/findByStatus:
    get:
      parameters:
        - {{name: status, in: query, required: true, schema: {{type: string, enum: [available, sold]}}}}
      responses: {{"200": {{description: ok}}}}
  /pet/{{petId}}:
    get:
      parameters:
        - {{name: petId, in: path, required: true, schema: {{type: integer}}, example: 10}}
      responses: {{"200": {{description: ok}}}}
components:
  schemas:
    Pet:
      type: object
      properties:
        name: {{type: string, example: doggie}}
        status: {{type: string, enum: [available, sold]}}
"##,
        server.url("").trim_end_matches('/')
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("petstore.yaml");
    std::fs::write(&file, spec).unwrap();
    let (scenario, _) = import_to_scenario("openapi", &file);
    let r = run(&[scenario.to_str().unwrap(), "--requests", "60", "--vus", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.results()["requests"]["ok"],
        60,
        "{}",
        r.results()["errors"]
    );
    let distinct: std::collections::BTreeSet<String> =
        seen.lock().unwrap().iter().cloned().collect();
    assert_eq!(
        distinct.into_iter().collect::<Vec<_>>(),
        [
            "GET /api/v3/pet/10 HTTP/1.1 |  |  | ",
            "GET /api/v3/pet/findByStatus?status=available HTTP/1.1 |  |  | ",
            r#"POST /api/v3/pet HTTP/1.1 |  | application/json | {"name":"doggie","status":"available"}"#,
        ]
    );
}

/// A k6 script as its users write them — a CSV of users read with
/// papaparse into a SharedArray, a row per iteration, a JSON login whose token
/// later requests send, a loop, a DELETE, checks, a threshold, 2 VUs
/// sharing 4 iterations — imported and run: the server receives what k6
/// would send (k6 itself is AGPL-licensed and not run here: the expected
/// requests are k6's documented semantics, written out).
#[test]
fn an_imported_k6_script_sends_the_requests_k6_would() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let server = {
        let seen = seen.clone();
        crate::common::RawServer::start(move |mut s, count| {
            while let Some((head, body)) = crate::common::read_head_and_body(&mut s) {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let line = head.lines().next().unwrap_or("").to_string();
                let auth = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("authorization")
                            .then(|| v.trim().to_string())
                    })
                    .unwrap_or_default();
                let body = String::from_utf8_lossy(&body).to_string();
                // The login answers a token made from the user's name.
                let answer = if line.starts_with("POST /login") {
                    let user: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                    format!(
                        "{{\"token\":\"tok-{}\"}}",
                        user["username"].as_str().unwrap_or("?")
                    )
                } else {
                    "{\"items\":[]}".to_string()
                };
                seen.lock()
                    .unwrap()
                    .push(format!("{line} | {auth} | {body}"));
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                    answer.len()
                );
                if std::io::Write::write_all(&mut s, response.as_bytes()).is_err() {
                    return;
                }
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("users.csv"),
        "username,password\nann,a1\nbob,b2\n",
    )
    .unwrap();
    let script = dir.path().join("shop.js");
    std::fs::write(
        &script,
        r#"import http from 'k6/http';
import { check, sleep } from 'k6';
import { SharedArray } from 'k6/data';
import papaparse from 'https://jslib.k6.io/papaparse/5.1.1/index.js';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const users = new SharedArray('users', function () {
  return papaparse.parse(open('./users.csv'), { header: true }).data;
});

export const options = {
  vus: 2,
  iterations: 4,
  thresholds: { http_req_failed: ['rate<0.01'] },
};

export default function () {
  const user = users[__ITER % users.length];
  const res = http.post(`${BASE}/login`, JSON.stringify({ username: user.username }), {
    headers: { 'Content-Type': 'application/json' },
  });
  check(res, { 'logged in': (r) => r.status === 200, 'token': (r) => r.json('token') !== undefined });
  const token = res.json('token');
  for (let i = 0; i < 2; i++) {
    http.get(`${BASE}/items`, { headers: { Authorization: `Bearer ${token}` } });
  }
  http.del(`${BASE}/session`, null, { headers: { Authorization: `Bearer ${token}` } });
  sleep(0.1);
}
"#,
    )
    .unwrap();
    let (scenario, o) = import_to_scenario("k6", &script);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("everything was carried over"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let base = server.url("");
    let r = Command::new(headroom_bin())
        .arg("run")
        .arg(&scenario)
        .env("BASE_URL", base.trim_end_matches('/'))
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    // 4 iterations, 2 per user: each user logs in as ann, then as bob
    // (`__ITER`), and sends that login's token on the requests after it.
    let mut want = Vec::new();
    for user in ["ann", "ann", "bob", "bob"] {
        want.push(format!(
            "POST /login HTTP/1.1 |  | {{\"username\":\"{user}\"}}"
        ));
        for _ in 0..2 {
            want.push(format!("GET /items HTTP/1.1 | Bearer tok-{user} | "));
        }
        want.push(format!("DELETE /session HTTP/1.1 | Bearer tok-{user} | "));
    }
    want.sort();
    assert_eq!(got, want);
}

/// The write-up's Gatling simulation (seed 004), verbatim in
/// examples/gatling/, with a CSV of app host names: imported and run with
/// every host sent to one server (as the write-up's DNS sent them to its
/// router), it does what it says — 1000 users arriving over 10 s, each
/// fetching 10 URLs drawn at random from the CSV, status 200 checked.
#[test]
fn the_write_ups_gatling_simulation_imports_and_runs_as_written() {
    let hosts = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<String, usize>::new()));
    let server = {
        let hosts = hosts.clone();
        crate::common::RawServer::start(move |mut s, count| {
            while let Some((head, _)) = crate::common::read_head_and_body(&mut s) {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let host = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("host").then(|| v.trim().to_string())
                    })
                    .unwrap_or_default();
                *hosts.lock().unwrap().entry(host).or_default() += 1;
                let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                if std::io::Write::write_all(&mut s, ok).is_err() {
                    return;
                }
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let simulation = dir.path().join("RandomUrlSimulation.scala");
    std::fs::copy(
        crate::common::study::examples().join("gatling/RandomUrlSimulation.scala"),
        &simulation,
    )
    .unwrap();
    let mut csv = String::from("url\n");
    for app in 1..=50 {
        csv.push_str(&format!("http://app-{app}.example.test/\n"));
    }
    std::fs::write(dir.path().join("urls.csv"), csv).unwrap();
    let (scenario, o) = import_to_scenario("gatling", &simulation);
    let listed = String::from_utf8_lossy(&o.stderr);
    assert!(
        listed.contains("not carried over (1)") && listed.contains("--connect-to"),
        "{listed}"
    );
    let port = server
        .url("")
        .split(':')
        .nth(2)
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let started = std::time::Instant::now();
    let r = run(&[
        scenario.to_str().unwrap(),
        "--connect-to",
        &format!("::127.0.0.1:{port}"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // 1000 users × 10 requests, every one answered 200 and checked.
    assert_eq!(r.total(), 10_000);
    assert_eq!(r.results()["requests"]["ok"].as_u64(), Some(10_000));
    assert_eq!(server.requests(), 10_000);
    // The users arrived over the 10 s, not at once.
    assert!(started.elapsed() >= std::time::Duration::from_secs(9));
    // Drawn at random from the CSV: (nearly) every app, none far above
    // its share of 200.
    let hosts = hosts.lock().unwrap();
    assert!(hosts.len() >= 45, "{} hosts", hosts.len());
    assert!(hosts
        .keys()
        .all(|h| h.starts_with("app-") && h.ends_with(".example.test")));
    assert!(hosts.values().all(|&n| n < 400), "{hosts:?}");
}

/// Where `.ci/gatling.sh` put Gatling 3's jars.
fn gatling_lib() -> PathBuf {
    let home = peer_home("HEADROOM_GATLING_HOME", "gatling-3.15.1");
    let lib = home.join("lib");
    assert!(
        lib.join("gatling-app-3.15.1.jar").is_file(),
        "Gatling 3 is not at {}: run .ci/gatling.sh (or set HEADROOM_GATLING_HOME)",
        home.display()
    );
    lib
}

/// examples/gatling/ShopSimulation.java run by real Gatling 3.15 (compiled
/// with javac against its jars) and, imported, by headroom, each against
/// its own nginx: the same requests in the same numbers — 4 users at once,
/// each a home page, two items whose ids a shared circular feeder hands
/// out in turn, a JSON login.
#[test]
fn an_imported_gatling_simulation_sends_what_gatling_sends() {
    let examples = crate::common::study::examples().join("gatling");
    let dir = tempfile::tempdir().unwrap();
    for f in ["ShopSimulation.java", "ids.csv"] {
        std::fs::copy(examples.join(f), dir.path().join(f)).unwrap();
    }
    let lib = gatling_lib();
    let classpath = format!("{}/*", lib.display());
    let o = Command::new("javac")
        .args(["-cp", &classpath, "-d", "classes", "ShopSimulation.java"])
        .current_dir(dir.path())
        .output()
        .expect("javac (a JDK) is installed: .ci/run installs it");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let by_gatling = ok_nginx();
    let port = by_gatling
        .url("")
        .split(':')
        .nth(2)
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let o = Command::new("java")
        .arg("--add-opens")
        .arg("java.base/java.lang=ALL-UNNAMED")
        .arg(format!("-Dport={port}"))
        .args(["-cp", &format!("{classpath}:classes")])
        .args([
            "io.gatling.app.Gatling",
            "-s",
            "ShopSimulation",
            "-rf",
            "results",
            "-nr",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    let (scenario, o) = import_to_scenario("gatling", &dir.path().join("ShopSimulation.java"));
    // The base URL is built from -Dport: the one thing listed.
    let listed = String::from_utf8_lossy(&o.stderr);
    assert!(
        listed.contains("not carried over (1)") && listed.contains("baseUrl"),
        "{listed}"
    );
    let by_headroom = ok_nginx();
    let base = by_headroom.url("").trim_end_matches('/').to_string();
    let r = run(&[scenario.to_str().unwrap(), "--base-url", &base]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.total(), 16);

    let mut expected = BTreeMap::new();
    expected.insert("GET /hello".to_string(), 4);
    expected.insert("POST /echo".to_string(), 4);
    // 8 rows handed out in turn: 101, 102, 103, 101, 102, 103, 101, 102.
    expected.insert("GET /sleep?ms=1&id=101".to_string(), 3);
    expected.insert("GET /sleep?ms=1&id=102".to_string(), 3);
    expected.insert("GET /sleep?ms=1&id=103".to_string(), 2);
    assert_eq!(requests(&by_gatling), expected, "what Gatling sent");
    assert_eq!(requests(&by_headroom), expected, "what headroom sent");
}
