//! Scripts in sessions against real servers: the shop (examples/shop, as
//! written) against a server that verifies every signature, stock and
//! checkout (`common/shop_server.py`), on HTTP/1.1 and HTTP/2, closed and
//! open; control flow without functions; setup and teardown; faults
//! contained, counted and located.

use crate::common::{import_to_scenario, run, scenario_dir, ProcessGuard, Run};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `common/shop_server.py` on a free port; its counts read back.
struct Shop {
    _guard: ProcessGuard,
    dir: tempfile::TempDir,
    port: u16,
}

impl Shop {
    fn start() -> Shop {
        let dir = tempfile::tempdir().unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/shop_server.py");
        let port_file = dir.path().join("port");
        // Debian's python3, where python3-h2 is installed.
        let child = Command::new("/usr/bin/python3")
            .arg(script)
            .arg(&port_file)
            .arg(dir.path().join("counts.json"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start the shop server (python3-h2)");
        let guard = ProcessGuard { child };
        let port = crate::common::port_from_file(&port_file, "the shop server");
        Shop {
            _guard: guard,
            dir,
            port,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn counts(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.path().join("counts.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

fn shop_toml() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/shop/shop.toml")
}

/// What every shop run must show: each request the server got was signed
/// right, only in-stock products added, checkout exactly when the cart
/// passed 100; headroom's counts equal the server's.
fn assert_shop_exact(r: &Run, shop: &Shop, users: u64) {
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = shop.counts();
    let results = r.results();
    for key in [
        "bad_signature",
        "not_in_stock",
        "added_over_100",
        "early_checkout",
    ] {
        assert_eq!(c[key], 0, "{key}: {c}");
    }
    for (name, path) in [
        ("products", "products"),
        ("add", "cart"),
        ("checkout", "checkout"),
    ] {
        let sent = &results["per_request"][name]["requests"];
        assert_eq!(sent["total"], c[path], "{name}: {sent} vs the server's {c}");
        assert_eq!(sent["ok"], c[path], "{name}: {sent}");
    }
    let (passed, checkouts) = (
        c["passed_100"].as_u64().unwrap(),
        c["checkouts"].as_u64().unwrap(),
    );
    assert!(checkouts > 0, "{c}");
    // A cart that passed 100 is checked out in the same iteration, unless
    // the run's end came between the two (at most once per user).
    assert!(passed >= checkouts && passed - checkouts <= users, "{c}");
    let scripts = &results["scripts"];
    for f in ["pickProduct", "sign", "Number(vars.total) > 100"] {
        assert_eq!(scripts[f]["errors"], 0, "{f}: {scripts}");
        assert!(scripts[f]["calls"].as_u64().unwrap() > 0, "{f}: {scripts}");
    }
    // One signature per request that changes the cart.
    assert_eq!(
        scripts["sign"]["calls"].as_u64().unwrap(),
        c["cart"].as_u64().unwrap() + c["checkout"].as_u64().unwrap()
    );
}

#[test]
fn the_shop_works_as_written_closed_on_http1_and_http2() {
    for version in ["1.1", "2"] {
        let shop = Shop::start();
        let r = run(&[
            shop_toml().to_str().unwrap(),
            "--base-url",
            &shop.url(),
            "--vus",
            "6",
            "-d",
            "3s",
            "--http-version",
            version,
        ]);
        assert_shop_exact(&r, &shop, 6);
    }
}

#[test]
fn the_shop_works_as_written_open_on_http1_and_http2() {
    for version in ["1.1", "2"] {
        let shop = Shop::start();
        let r = run(&[
            shop_toml().to_str().unwrap(),
            "--base-url",
            &shop.url(),
            "--rate",
            "100",
            "-d",
            "3s",
            "--http-version",
            version,
        ]);
        // Each arrival is a new user (a new cart): a single add over 100
        // checks out; the stop may cut any arrival in flight.
        assert_shop_exact(&r, &shop, 100);
    }
}

/// `s.toml` (`{BASE}` standing for the sample server's URL) and, when
/// given, `s.js` beside it, run against a sample server of its own.
fn run_scripted(toml: &str, js: Option<&str>) -> Run {
    let target = crate::common::Target::start(1, 4);
    let toml = toml.replace("{BASE}", &target.url(""));
    let mut files = vec![("s.toml", toml.as_str())];
    files.extend(js.map(|js| ("s.js", js)));
    let dir = scenario_dir(&files);
    run(&[dir.path().join("s.toml").to_str().unwrap()])
}

/// `if`, `else` and `while` need no function: a counter in the user's
/// variables drives a loop of requests, bounded by `max`.
#[test]
fn if_and_while_run_without_a_script_file() {
    let r = run_scripted(
        r#"base_url = "{BASE}"
[load]
vus = 2
iterations = 3
[[request]]
name = "loop"
path = "/hello"
[[request]]
name = "big"
path = "/hello?big"
[[request]]
name = "small"
path = "/hello?small"
[[request]]
name = "capped"
path = "/hello?capped"
[[session]]
name = "s"
steps = [
  { js = "vars.n = 0" },
  { while = "Number(vars.n) < 4", steps = [ { request = "loop" }, { js = "vars.n = Number(vars.n) + 1" } ] },
  { if = "vars.n == 4", steps = [ { request = "big" } ], else = [ { request = "small" } ] },
  { while = "true", max = 2, steps = [ { request = "capped" } ] },
]
"#,
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    let total = |name: &str| results["per_request"][name]["requests"]["total"].as_u64();
    // 2 users × 3 iterations: 4 loops, the `if` branch, 2 capped rounds each.
    assert_eq!(total("loop"), Some(24));
    assert_eq!(total("big"), Some(6));
    assert_eq!(total("small"), Some(0), "{}", results["per_request"]);
    assert_eq!(total("capped"), Some(12));
}

/// `setup()` runs once before the load and every user reads what it
/// returned; `teardown(data)` runs once after.
#[test]
fn setup_data_reaches_every_user_and_teardown_runs_once() {
    let r = run_scripted(
        r#"base_url = "{BASE}"
[script]
file = "s.js"
[load]
vus = 3
iterations = 2
[[request]]
name = "with_token"
path = "/echo"
headers = { "X-Token" = "{{token}}" }
after = "sawToken"
[[session]]
name = "s"
steps = [ { js = "useData" }, { request = "with_token" } ]
"#,
        Some(
            r#"export function setup() { return { token: "t-" + 42 }; }
export function useData(ctx) { ctx.vars.token = ctx.data.token; }
export function sawToken(ctx) {
  if (!ctx.response.body.toLowerCase().includes("x-token: t-42")) ctx.fail("no token echoed");
}
export function teardown(data) { if (data.token !== "t-42") throw new Error("teardown saw " + JSON.stringify(data)); }
"#,
        ),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    let s = &results["scripts"];
    assert_eq!(s["setup"]["calls"], 1, "{s}");
    assert_eq!(s["teardown"]["calls"], 1, "{s}");
    assert_eq!(s["teardown"]["errors"], 0, "{s}");
    assert_eq!(s["useData"]["calls"], 6, "{s}");
    assert_eq!(s["sawToken"]["calls"], 6, "{s}");
    // `failures` is left out at 0.
    assert_eq!(s["sawToken"]["failures"], Value::Null, "{s}");
    assert_eq!(results["requests"]["ok"], 6);
}

/// A step that throws on every 10th call: exactly that many script
/// errors, located at the throw; the other iterations run on.
#[test]
fn a_throw_every_tenth_call_is_counted_exactly_with_its_line() {
    let r = run_scripted(
        r#"base_url = "{BASE}"
[script]
file = "s.js"
[load]
vus = 1
iterations = 50
[[request]]
name = "hello"
path = "/hello"
[[session]]
name = "s"
steps = [ { js = "flaky" }, { request = "hello" } ]
"#,
        Some("export function flaky(ctx) {\n  ctx.vars.n = Number(ctx.vars.n || 0) + 1;\n  if (ctx.vars.n % 10 === 0) throw new Error(\"tenth\");\n}\n"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    let f = &results["scripts"]["flaky"];
    assert_eq!(f["calls"], 50, "{f}");
    assert_eq!(f["errors"], 5, "{f}");
    assert_eq!(f["error_messages"]["s.js:3: Error: tenth"], 5, "{f}");
    // A failed step ends its iteration: 45 requests, none failed.
    assert_eq!(results["requests"]["total"], 45);
    assert_eq!(results["requests"]["failed"], 0);
    assert!(r.stdout.contains("s.js:3: Error: tenth"), "{}", r.stdout);
}

/// An endless loop and a 1 GB allocation are stopped at their budgets;
/// the run finishes; a `before` hook that fails sends nothing and counts
/// `script_error`.
#[test]
fn endless_loops_and_huge_allocations_are_stopped_and_located() {
    let started = Instant::now();
    let r = run_scripted(
        r#"base_url = "{BASE}"
[script]
file = "s.js"
timeout = "50ms"
memory_mib = 32
[load]
vus = 2
iterations = 3
[[request]]
name = "hello"
path = "/hello"
before = "hog"
[[session]]
name = "s"
steps = [ { js = "spin" }, { request = "hello" } ]
"#,
        Some("export function spin(ctx) {\n  if (ctx.vars.spun) return;\n  ctx.vars.spun = 1;\n  for (;;) {}\n}\nexport function hog(ctx) {\n  const parts = [];\n  for (let i = 0; i < 1024; i++) parts.push(new Array(1 << 17).fill(i));\n}\n"),
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    let s = &results["scripts"];
    // spin: the first call of each user loops and is stopped; its
    // iteration ends; the later ones return.
    assert_eq!(s["spin"]["calls"], 6, "{s}");
    assert_eq!(s["spin"]["errors"], 2, "{s}");
    let spin_messages = s["spin"]["error_messages"].to_string();
    // Located in the file (QuickJS places an interrupted loop at or just
    // before its line).
    assert!(
        spin_messages.contains("s.js:") && spin_messages.contains("time budget"),
        "{s}"
    );
    assert_eq!(s["hog"]["errors"], 4, "{s}");
    assert!(
        s["hog"]["error_messages"]
            .to_string()
            .contains("memory budget"),
        "{s}"
    );
    assert_eq!(results["requests"]["total"], 4);
    assert_eq!(
        results["errors"]["script_error"], 4,
        "{}",
        results["errors"]
    );
}

/// A syntax error fails before any request, at file:line:column, exit 2.
#[test]
fn a_syntax_error_fails_before_any_load_with_its_place() {
    let dir = scenario_dir(&[
        (
            "s.toml",
            r#"base_url = "http://127.0.0.1:9"
[script]
file = "s.js"
[[request]]
name = "hello"
path = "/hello"
[[session]]
name = "s"
steps = [ { js = "f" }, { request = "hello" }, { if = "vars.x >", steps = [] } ]
"#,
        ),
        ("s.js", "export function f(ctx) {\n  let x = ;\n}\n"),
    ]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("s.js:2:"), "{}", r.stderr);
    assert!(r.stderr.contains("SyntaxError"), "{}", r.stderr);
    assert!(r.results.is_none(), "no run, no results");
}

/// A Postman collection whose pre-request script signs each cart call
/// (CryptoJS) and whose test scripts check with `pm.test` / `pm.expect`
/// imports with its scripts and runs against the verifying shop.
#[test]
fn a_postman_collection_with_signing_and_tests_imports_and_runs() {
    let shop = Shop::start();
    let collection = serde_json::json!({
        "info": {"name": "Shop", "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"},
        "variable": [{"key": "baseUrl", "value": shop.url()}, {"key": "secret", "value": "s3cr3t"}],
        "event": [{"listen": "prerequest", "script": {"exec": [
            "if (pm.request.method === 'POST') {",
            "  const ts = String(Date.now());",
            "  const body = pm.variables.replaceIn(pm.request.body.raw);",
            "  const sig = CryptoJS.HmacSHA256(ts + '\\n' + body, pm.collectionVariables.get('secret')).toString(CryptoJS.enc.Hex);",
            "  pm.request.headers.upsert({key: 'X-Timestamp', value: ts});",
            "  pm.request.headers.upsert({key: 'X-Signature', value: sig});",
            "}"]}}],
        "item": [
            {"name": "products", "request": {"method": "GET", "url": "{{baseUrl}}/products"},
             "event": [{"listen": "test", "script": {"exec": [
                "pm.test('status is 200', () => pm.response.to.have.status(200));",
                "const inStock = pm.response.json().products.filter((p) => p.stock > 0);",
                "pm.collectionVariables.set('product', inStock.length ? inStock[0].id : 'none');"]}}]},
            {"name": "add", "request": {"method": "POST", "url": "{{baseUrl}}/cart",
              "header": [{"key": "Content-Type", "value": "application/json"}],
              "body": {"mode": "raw", "raw": "{\"product\":\"{{product}}\"}"}},
             "event": [{"listen": "test", "script": {"exec": [
                "pm.test('added', () => {",
                "  pm.expect(pm.response.code).to.equal(200);",
                "  pm.expect(pm.response.json().total).to.be.above(0);",
                "});"]}}]}
        ]
    });
    let dir = scenario_dir(&[("shop.postman.json", &collection.to_string())]);
    let (out, imported) = import_to_scenario("postman", &dir.path().join("shop.postman.json"));
    let stderr = String::from_utf8_lossy(&imported.stderr);
    assert!(dir.path().join("shop.postman.js").exists(), "{stderr}");
    let r = run(&[out.to_str().unwrap(), "--vus", "3", "-d", "2s"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = shop.counts();
    assert_eq!(c["bad_signature"], 0, "{c}");
    assert_eq!(c["not_in_stock"], 0, "{c}");
    let results = r.results();
    assert!(c["cart"].as_u64().unwrap() > 0, "{c}");
    // The importer names requests by method and path.
    let sent = |name: &str| results["per_request"][name]["requests"]["total"].clone();
    assert_eq!(sent("POST /cart"), c["cart"], "{}", results["per_request"]);
    assert_eq!(sent("GET /products"), c["products"]);
    // The collection never checks out: once a cart passes 100 the shop
    // refuses further adds (409). Exactly those fail, and exactly those
    // fail the `added` pm.test; every script call ran clean.
    let refused = c["added_over_100"].as_u64().unwrap();
    assert!(refused > 0, "{c}");
    assert_eq!(
        results["requests"]["failed"], refused,
        "{}",
        results["errors"]
    );
    let scripts = results["scripts"].as_object().unwrap();
    for (name, f) in scripts {
        assert_eq!(f["errors"], 0, "{name}: {f}");
        assert!(f["calls"].as_u64().unwrap() > 0, "{name}: {f}");
    }
    let added: u64 = scripts
        .values()
        .filter_map(|f| f["failure_messages"].as_object())
        .flat_map(|m| m.iter())
        .filter(|(message, _)| message.starts_with("added: "))
        .map(|(_, n)| n.as_u64().unwrap())
        .sum();
    assert_eq!(added, refused, "{}", results["scripts"]);
}

/// The shop flow as a k6 user writes it — a `while` loop until the cart
/// passes 100, a branch, helpers (one signs, one adds to the cart and
/// returns its total), locals, a check only code can say, `setup()` with a
/// request, `return` — imported and run against the verifying shop: the
/// requests are those k6's semantics give (k6 itself is AGPL-licensed and
/// not run here; its semantics are written out below).
#[test]
fn an_imported_k6_script_with_logic_runs_as_k6_would() {
    let shop = Shop::start();
    let script = r#"import http from 'k6/http';
import { check } from 'k6';
import crypto from 'k6/crypto';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const SECRET = 's3cr3t';

export const options = { vus: 3, iterations: 12 };

function signed(body) {
  const ts = String(Date.now());
  const signature = crypto.hmac('sha256', SECRET, ts + '\n' + body, 'hex');
  return { headers: { 'Content-Type': 'application/json', 'X-Timestamp': ts, 'X-Signature': signature } };
}

function add(id) {
  const body = JSON.stringify({ product: id });
  const res = http.post(`${BASE}/cart`, body, signed(body));
  check(res, { 'added': (r) => r.status === 200 });
  return res.json().total;
}

export function setup() {
  const res = http.get(`${BASE}/products`);
  return { shown: res.json().products.length };
}

export default function (data) {
  if (data.shown !== 12) {
    return;
  }
  let total = 0;
  while (total <= 100) {
    const res = http.get(`${BASE}/products`);
    check(res, {
      'listed': (r) => r.status === 200,
      'some in stock': (r) => r.json().products.some((p) => p.stock > 0),
    });
    const inStock = res.json().products.filter((p) => p.stock > 0);
    if (inStock.length === 0) {
      return;
    }
    total = add(inStock[Math.floor(Math.random() * inStock.length)].id);
  }
  if (total > 100) {
    const body = '{}';
    http.post(`${BASE}/checkout`, body, signed(body));
  }
}
"#;
    let dir = scenario_dir(&[("shop.js", script)]);
    let (out, imported) = import_to_scenario("k6", &dir.path().join("shop.js"));
    let stderr = String::from_utf8_lossy(&imported.stderr);
    // The k6 script is not overwritten: the module goes beside it.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("shop.js")).unwrap(),
        script
    );
    assert!(dir.path().join("shop.headroom.js").exists(), "{stderr}");
    // Only setup's once-per-run is approximated, and said.
    assert!(stderr.contains("not carried over (1)"), "{stderr}");
    assert!(stderr.contains("once per user"), "{stderr}");
    let r = run(&[out.to_str().unwrap(), "--base-url", &shop.url()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = shop.counts();
    for bad in [
        "bad_signature",
        "not_in_stock",
        "added_over_100",
        "early_checkout",
    ] {
        assert_eq!(c[bad], 0, "{bad}: {c}");
    }
    // 3 users × 4 iterations; each ends at a checkout once its cart passed
    // 100, or returns on a list with nothing in stock (0.4^12 a list: about
    // once in 2,000 runs of this test; twice, once in millions).
    let results = r.results();
    assert_eq!(c["checkouts"], c["passed_100"], "{c}");
    assert!(c["checkouts"].as_u64().unwrap() >= 11, "{c}");
    // setup() once per user: three sessions, each listed once before its loop.
    assert_eq!(c["sessions"], 3, "{c}");
    let sent = |name: &str| {
        results["per_request"][name]["requests"]["total"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(sent("GET /products"), 3, "{}", results["per_request"]);
    assert_eq!(
        sent("GET /products") + sent("GET /products #2"),
        c["products"].as_u64().unwrap()
    );
    assert_eq!(sent("POST /cart"), c["cart"].as_u64().unwrap());
    assert_eq!(sent("POST /checkout"), c["checkouts"].as_u64().unwrap());
    assert_eq!(results["requests"]["failed"], 0, "{}", results["errors"]);
    let scripts = results["scripts"].as_object().unwrap();
    for (name, f) in scripts {
        assert_eq!(f["errors"], 0, "{name}: {f}");
    }
}

/// A scenario with scripts in a capacity search and in a study: every
/// step of the search and every configuration of the study runs them,
/// each request's `before` and `after` once and each iteration's `js`
/// once, none failing — counted with the step's or run's own requests.
#[test]
fn scripts_run_in_capacity_searches_and_studies() {
    let target = crate::common::Target::start(1, 4);
    let scenario = r#"
base_url = "BASE"
[script]
file = "s.js"
[[request]]
name = "hello"
path = "/hello"
before = "stamp"
after = "return response.status === 200"
[[session]]
name = "s"
steps = [ { js = "vars.n = Number(vars.n || 0) + 1" }, { request = "hello" } ]
"#;
    let js = "export function stamp(ctx) { ctx.request.headers['X-N'] = String(ctx.vars.n); }\n";
    let dir = scenario_dir(&[
        ("s.toml", &scenario.replace("BASE", &target.url(""))),
        ("s.js", js),
    ]);
    let file = dir.path().join("s.toml");
    let r = crate::common::capacity(&[
        file.to_str().unwrap(),
        "--slo",
        "p99<1s",
        "--min",
        "20",
        "--max",
        "40",
        "--step-duration",
        "1s",
        "--warmup",
        "0s",
        "--pause",
        "0s",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let steps = r.results()["steps"].as_array().unwrap().clone();
    assert!(!steps.is_empty());
    for step in &steps {
        assert_scripts_ran_with_requests(&step["results"]);
    }

    // The same scenario in a study of two configurations it starts.
    let study = r#"scenario = "s.toml"
[[server]]
name = "target"
command = "headroom target --listen 127.0.0.1:{port} --workers {workers} --threads 2"
ready = "/health"
[server.grid]
workers = [1, 2]
[measure]
warmup = "0s"
duration = "2s"
pause = "0s"
"#;
    std::fs::write(dir.path().join("study.toml"), study).unwrap();
    let out = dir.path().join("out");
    let o = crate::common::study::study(&dir.path().join("study.toml"), &out, &[]);
    crate::common::study::stdout_of_success(&o);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("study.json")).unwrap()).unwrap();
    let configs = report["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 2, "{report}");
    for config in configs {
        assert_eq!(config["status"], "ok", "{config}");
        assert_scripts_ran_with_requests(&config["runs"][0]["results"]);
    }
}

/// In `results`, each script function ran as often as the session says
/// (`stamp` and the `after` check once a request, the `js` step once an
/// iteration — as many as requests) and none threw or failed.
fn assert_scripts_ran_with_requests(results: &Value) {
    let requests = results["requests"]["total"].as_u64().unwrap();
    assert!(requests > 0, "{results}");
    let scripts = results["scripts"].as_object().unwrap();
    assert_eq!(scripts.len(), 3, "{}", results["scripts"]);
    for (name, f) in scripts {
        assert_eq!(f["errors"], 0, "{name}: {f}");
        assert_eq!(f["failures"].as_u64().unwrap_or(0), 0, "{name}: {f}");
    }
    assert_eq!(
        scripts["stamp"]["calls"], requests,
        "{}",
        results["scripts"]
    );
    assert_eq!(scripts["return response.status === 200"]["calls"], requests);
}
