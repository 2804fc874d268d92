use super::*;

fn load_of(i: &Imported) -> &RawLoad {
    i.scenario.load.as_ref().unwrap()
}

#[test]
fn the_write_ups_five_users_and_twenty_five_iterations() {
    // `k6 run --vus 5 --iterations 25`, as options: 25 iterations shared.
    let i = import(
        "import http from 'k6/http';\n\
         export const options = { vus: 5, iterations: 25 };\n\
         export default function () {\n  http.get('http://127.0.0.1:3000/');\n}\n",
    )
    .unwrap();
    assert!(i.left_out.is_empty(), "{:?}", i.left_out);
    let l = load_of(&i);
    assert_eq!(
        (l.model, l.vus, l.iterations),
        (Some(Model::Closed), Some(5), Some(5))
    );
    assert_eq!(
        i.scenario.base_url.as_deref(),
        Some("http://127.0.0.1:3000")
    );
    assert_eq!(i.scenario.requests[0].path.as_deref(), Some("/"));
    assert_eq!(i.scenario.sessions[0].steps.len(), 1);
}

#[test]
fn executors_become_loads_and_a_second_scenario_is_listed() {
    let i = import(
        "import http from 'k6/http';\n\
         export const options = { scenarios: {\n\
           shop: { executor: 'constant-arrival-rate', rate: 300, timeUnit: '1m', duration: '2m', preAllocatedVUs: 10, maxVUs: 50 },\n\
           other: { executor: 'constant-vus', vus: 3, duration: '1m' },\n\
         } };\n\
         export default function () { http.get('http://127.0.0.1:1/x'); }\n",
    )
    .unwrap();
    let l = load_of(&i);
    assert_eq!(l.model, Some(Model::Open));
    assert_eq!(l.rate, Some(5.0), "300 a minute");
    assert_eq!(l.duration.as_deref(), Some("2m"));
    assert_eq!(l.max_connections, Some(50));
    assert!(
        i.left_out
            .iter()
            .any(|x| x.starts_with("line 4:") && x.contains("`other`")),
        "{:?}",
        i.left_out
    );

    let i = import(
        "import http from 'k6/http';\n\
         export const options = { scenarios: { s: { executor: 'ramping-arrival-rate', startRate: 10, timeUnit: '1s',\n\
           preAllocatedVUs: 5, stages: [{ target: 50, duration: '30s' }, { target: 50, duration: '1m' }] } } };\n\
         export default function () { http.get('http://127.0.0.1:1/x'); }\n",
    )
    .unwrap();
    let stages = load_of(&i).stages.clone().unwrap();
    assert_eq!((stages[0].from, stages[0].to), (Some(10.0), Some(50.0)));
    assert_eq!(
        (stages[1].from, stages[1].to, stages[1].duration.as_str()),
        (Some(50.0), Some(50.0), "1m")
    );

    let i = import(
        "import http from 'k6/http';\n\
         export const options = { scenarios: { s: { executor: 'per-vu-iterations', vus: 4, iterations: 7 } } };\n\
         export default function () { http.get('http://127.0.0.1:1/x'); }\n",
    )
    .unwrap();
    let l = load_of(&i);
    assert_eq!((l.vus, l.iterations), (Some(4), Some(7)));
}

#[test]
fn thresholds_checks_values_and_rows() {
    let i = import(
        r#"import http from 'k6/http';
import { check, sleep } from 'k6';
const data = JSON.parse(open('./ids.json'));
export const options = {
  vus: 2, duration: '30s',
  thresholds: {
http_req_duration: ['p(95)<500', 'p(99.9) < 2000'],
'http_req_duration{name:buy}': ['max<3000'],
http_req_failed: [{ threshold: 'rate<=0.05', abortOnFail: true }],
  },
};
export default function () {
  const row = data[Math.floor(Math.random() * data.length)];
  const res = http.get(`http://127.0.0.1:1/items/${row.id}`);
  check(res, {
'ok': (r) => r.status === 200,
'has id': (r) => r.body.indexOf('"id"') !== -1,
'right name': (r) => r.json('item.name') === 'pen',
  });
  const first = res.json().items[0].id;
  http.post('http://127.0.0.1:1/buy', { item: first, qty: '2' }, { tags: { name: 'buy' }, timeout: '10s' });
  sleep(1.5);
}
"#,
    )
    .unwrap();
    assert!(i.left_out.is_empty(), "{:?}", i.left_out);
    let t = i.scenario.thresholds.as_ref().unwrap();
    assert_eq!(t["p95"].bound(), "<500ms");
    assert_eq!(t["p999"].bound(), "<2000ms");
    assert_eq!(t["max{buy}"].bound(), "<3000ms");
    assert!(
        matches!(&t["errors"], RawThreshold::Table(x) if x.bound == "<=5%" && x.abort == Some(true))
    );
    let f = &i.scenario.feeders[0];
    assert_eq!(
        (f.file.as_str(), f.order),
        ("./ids.json", Some(FeederOrder::Random))
    );
    let get = &i.scenario.requests[0];
    assert_eq!(get.path.as_deref(), Some("/items/{{id}}"));
    assert_eq!(get.checks.len(), 3);
    assert_eq!(get.checks[1].body_contains.as_deref(), Some("\"id\""));
    assert_eq!(get.checks[2].json_path.as_deref(), Some("$.item.name"));
    assert_eq!(get.extracts[0].json_path.as_deref(), Some("$.items[0].id"));
    let buy = &i.scenario.requests[1];
    assert_eq!(buy.name, "buy");
    assert_eq!(buy.body.as_deref(), Some("item={{first}}&qty=2"));
    assert_eq!(buy.timeout.as_deref(), Some("10s"));
    let steps: Vec<String> = i.scenario.sessions[0]
        .steps
        .iter()
        .map(|s| format!("{:?}{:?}{:?}", s.feed, s.request, s.think))
        .collect();
    assert_eq!(
        steps,
        [
            "NoneSome(\"GET /items/{{id}}\")None",
            "NoneSome(\"buy\")None",
            "NoneNoneSome(\"1500ms\")"
        ]
    );
}

#[test]
fn a_row_per_iteration_per_user_or_per_loop_pass() {
    let script = |index: &str, in_loop: bool| {
        let pick = format!("const row = data[{index}];");
        let body = if in_loop {
            format!("for (let i = 0; i < 2; i++) {{ {pick} http.get(`http://127.0.0.1:1/${{row.id}}`); }}")
        } else {
            format!("{pick} http.get(`http://127.0.0.1:1/${{row.id}}`);")
        };
        import(&format!(
            "import http from 'k6/http';\nconst data = JSON.parse(open('d.json'));\n\
             export default function () {{\n{body}\n}}\n"
        ))
        .unwrap()
    };
    // `__ITER`: each user walks the rows (k6's meaning exactly).
    let i = script("__ITER % data.length", false);
    let f = &i.scenario.feeders[0];
    assert_eq!(
        (f.order, f.scope),
        (Some(FeederOrder::Circular), Some(FeederScope::PerUser))
    );
    assert!(i.left_out.is_empty(), "{:?}", i.left_out);
    // No `feed` step: every iteration takes a row of every feeder.
    assert!(i.scenario.sessions[0]
        .steps
        .iter()
        .all(|s| s.feed.is_none()));
    // `__VU`: a row per user, kept.
    let i = script("__VU % data.length", false);
    let f = &i.scenario.feeders[0];
    assert_eq!(
        (f.order, f.scope),
        (Some(FeederOrder::Circular), Some(FeederScope::PerUserFixed))
    );
    assert!(i.left_out.is_empty(), "{:?}", i.left_out);
    // Picked inside a loop: a row each pass.
    let i = script("Math.floor(Math.random() * data.length)", true);
    let inner = i.scenario.sessions[0].steps[0].steps.as_ref().unwrap();
    assert_eq!(inner[0].feed.as_deref(), Some("data"));
}

#[test]
fn what_cannot_be_carried_over_is_listed_with_its_line_and_bad_javascript_is_refused() {
    let i = import(
        "import http from 'k6/http';\nimport { Counter } from 'k6/metrics';\n\
         export default function () {\n  if (__VU > 1) { http.get('http://127.0.0.1:1/a'); }\n\
           for (let i = 0; i < 3; i++) { if (i === 1) break; http.get('http://127.0.0.1:1/b'); }\n\
           http.get('http://127.0.0.1:1/c');\n}\n",
    )
    .unwrap();
    let lines: Vec<&str> = i
        .left_out
        .iter()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(lines, ["line 2", "line 5"], "{:?}", i.left_out);
    assert!(
        i.left_out[1].contains("out of a loop that sends requests"),
        "{:?}",
        i.left_out
    );
    assert_eq!(i.scenario.requests.len(), 3);
    // k6 numbers its users from 1, headroom from 0.
    let first = &i.scenario.sessions[0].steps[0];
    assert_eq!(first.if_.as_deref(), Some("(ctx.user + 1) > 1"));
    let e = import("import http from 'k6/http';\nexport default function () {\n  http.get(;\n}\n")
        .unwrap_err();
    assert!(e.starts_with("line 3:"), "{e}");
    let e = import("import http from 'k6/http';\n").unwrap_err();
    assert!(e.contains("export default function"), "{e}");
}

/// The steps of a session as one line each: `request NAME`, `js CODE`,
/// `if COND [...] else [...]`, `while COND [...]`, `repeat N [...]`.
fn outline(steps: &[RawStep]) -> Vec<String> {
    let inner = |s: &Option<Vec<RawStep>>| outline(s.as_deref().unwrap_or_default()).join("; ");
    steps
        .iter()
        .map(|s| {
            if let Some(r) = &s.request {
                format!("request {r}")
            } else if let Some(c) = &s.if_ {
                match &s.else_ {
                    Some(e) => format!(
                        "if {c} [{}] else [{}]",
                        inner(&s.steps),
                        outline(e).join("; ")
                    ),
                    None => format!("if {c} [{}]", inner(&s.steps)),
                }
            } else if let Some(c) = &s.while_ {
                format!("while {c} [{}]", inner(&s.steps))
            } else if let Some(n) = s.repeat {
                format!("repeat {n} [{}]", inner(&s.steps))
            } else if let Some(code) = &s.js {
                format!("js {}", code.replace('\n', " "))
            } else {
                format!("{s:?}")
            }
        })
        .collect()
}

#[test]
fn branches_loops_locals_and_helpers_become_script_steps_around_the_requests() {
    let i = import(
        r#"import http from 'k6/http';
import { check } from 'k6';
import { randomItem } from 'https://jslib.k6.io/k6-utils/1.2.0/index.js';
const BASE = __ENV.BASE_URL || 'http://127.0.0.1:1';
const params = { headers: { 'Content-Type': 'application/json' } };
function price(items) { return items.reduce((sum, p) => sum + p.price, 0); }
function add(id) {
  const res = http.post(`${BASE}/cart`, JSON.stringify({ product: id }), params);
  check(res, { 'ok': (r) => r.status === 200, 'total': (r) => r.json().total > 0 });
  return res.json('total');
}
export default function () {
  const res = http.get(`${BASE}/products`);
  if (res.status !== 200) {
    return;
  }
  const items = res.json().items;
  let spent = 0;
  for (let i = 0; i < items.length; i++) {
    spent = add(items[i].id);
  }
  for (const item of items) {
    http.get(`${BASE}/items/${item.id}`);
  }
  if (spent > price(items) / 2 && __ITER > 0) {
    http.post(`${BASE}/checkout`, '{}', params);
  } else {
    http.get(`${BASE}/more?after=${randomItem(items).id}`);
  }
}
"#,
    )
    .unwrap();
    assert!(i.left_out.is_empty(), "{:?}", i.left_out);
    let steps = outline(&i.scenario.sessions[0].steps);
    assert_eq!(
        steps,
        [
            "request GET /products",
            "js if (vars.res.status !== 200) {     return ctx.endIteration();   } vars.spent = 0; vars.i = 0;",
            "while vars.i < vars.items.length [js vars.id = vars.items[vars.i].id;; request POST /cart; js vars.spent = vars.res.json('total'); vars.i++;]",
            "js vars.__item_list = Array.from(vars.items); vars.__item_at = 0;",
            "while vars.__item_at < vars.__item_list.length [js vars.item = vars.__item_list[vars.__item_at++];; request GET {BASE}/items/{item.id}]",
            "if vars.spent > price(vars.items) / 2 && ctx.iteration > 0 [request POST /checkout] else [request GET {BASE}/more]",
        ],
    );
    let r = &i.scenario.requests;
    // `items` is read by code: taken by script (a list), not as text.
    assert!(r[0].extracts.is_empty(), "{:?}", r[0].extracts);
    assert_eq!(
        r[0].after.as_deref(),
        Some("const __r = k6response(response);\nvars.items = __r.json().items;\nvars.res = __r;")
    );
    // A JSON body of a local: written by code (k6 sends its number as a number).
    assert_eq!(
        r[1].before.as_deref(),
        Some("request.body = k6body(JSON.stringify({ product: vars.id }), request);")
    );
    assert_eq!(
        r[1].headers.as_ref().unwrap()["Content-Type"],
        "application/json"
    );
    assert_eq!(r[1].checks.len(), 1, "the status check is headroom's own");
    assert!(
        r[1].after
            .as_deref()
            .unwrap()
            .ends_with("if (!((r) => r.json().total > 0)(__r)) ctx.fail(\"total\");"),
        "{:?}",
        r[1].after
    );
    // A computed URL: the path by code, `${` kept from the scenario's expansion.
    assert_eq!(
        r[2].before.as_deref(),
        Some("request.url = k6path(`$${\"${BASE_URL:-http://127.0.0.1:1}\"}/items/$${vars.item.id}`);")
    );
    assert_eq!(
        i.scenario.base_url.as_deref(),
        Some("${BASE_URL:-http://127.0.0.1:1}")
    );
    let module = i.script.as_deref().unwrap();
    assert!(module.contains("function price(items)"), "{module}");
    assert!(
        !module.contains("function add("),
        "a helper with requests is put in place: {module}"
    );
    assert!(
        module.contains("const randomItem = k6utils.randomItem;"),
        "{module}"
    );
    assert!(
        module.contains("const BASE = \"http://127.0.0.1:1\";"),
        "{module}"
    );
}

#[test]
fn setup_with_requests_runs_once_per_user_and_without_them_is_the_modules() {
    let i = import(
        r#"import http from 'k6/http';
export function setup() {
  const res = http.post('http://127.0.0.1:1/login', 'u=a');
  return { token: res.json('token') };
}
export default function (data) {
  http.get('http://127.0.0.1:1/me', { headers: { Authorization: `Bearer ${data.token}` } });
}
export function teardown(data) { http.del('http://127.0.0.1:1/session'); }
"#,
    )
    .unwrap();
    let lines: Vec<&str> = i
        .left_out
        .iter()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(lines, ["line 2", "line 9"], "{:?}", i.left_out);
    assert!(i.left_out[0].contains("once per user"), "{:?}", i.left_out);
    let steps = outline(&i.scenario.sessions[0].steps);
    assert_eq!(
        steps,
        [
            "if vars.__setup_done === undefined [js vars.__setup_done = true;; request POST /login; js vars.data = { token: vars.res.json('token') };]",
            "request GET /me",
        ]
    );
    assert_eq!(
        i.scenario.requests[1].before.as_deref(),
        Some("Object.assign(request.headers, { Authorization: `Bearer $${vars.data.token}` });")
    );

    let i = import(
        "import http from 'k6/http';\n\
         export function setup() { return { n: 3 }; }\n\
         export default function (data) { for (let i = 0; i < data.n; i++) { http.get('http://127.0.0.1:1/x'); } }\n\
         export function teardown(data) { console.log(data.n); }\n",
    )
    .unwrap();
    assert!(i.left_out.is_empty(), "{:?}", i.left_out);
    let module = i.script.as_deref().unwrap();
    assert!(
        module.contains("export function setup() { return { n: 3 }; }"),
        "{module}"
    );
    assert!(
        module.contains("export function teardown(data)"),
        "{module}"
    );
    assert_eq!(
        outline(&i.scenario.sessions[0].steps),
        [
            "js vars.i = 0;",
            "while vars.i < data.n [request GET /x; js vars.i++;]"
        ]
    );
}

#[test]
fn k6_grpc_calls_become_grpc_requests() {
    let i = import(
        "import grpc from 'k6/net/grpc';\n\
         import { check, sleep } from 'k6';\n\
         const client = new grpc.Client();\n\
         client.load(['protos'], 'greeter.proto');\n\
         export default () => {\n\
           client.connect('127.0.0.1:50051', { plaintext: true });\n\
           const res = client.invoke('demo.v1.Greeter/SayHello', { name: 'ann' }, { metadata: { 'x-tenant': 't1' }, timeout: '2s' });\n\
           check(res, {\n\
             'status is OK': (r) => r && r.status === grpc.StatusOK,\n\
             'says hello': (r) => r.message.message === 'hello ann',\n\
           });\n\
           client.close();\n\
           sleep(1);\n\
         };\n",
    )
    .unwrap();
    assert!(i.left_out.is_empty(), "{:?}", i.left_out);
    assert_eq!(
        i.scenario.base_url.as_deref(),
        Some("http://127.0.0.1:50051")
    );
    let g = i.scenario.grpc.as_ref().unwrap();
    assert_eq!(
        (&g.proto[..], &g.import_path[..]),
        (
            &["greeter.proto".to_string()][..],
            &["protos".to_string()][..]
        )
    );
    let r = &i.scenario.requests[0];
    assert_eq!(r.grpc.as_deref(), Some("demo.v1.Greeter/SayHello"));
    assert_eq!(r.name, "demo.v1.Greeter/SayHello");
    assert_eq!(r.json, Some(json!({ "name": "ann" })));
    assert_eq!(r.headers.as_ref().unwrap()["x-tenant"], "t1");
    assert_eq!(r.timeout.as_deref(), Some("2s"));
    // The status check is every call's own; the message's is a JSON path.
    assert_eq!(r.checks.len(), 1, "{:?}", r.checks);
    assert_eq!(r.checks[0].json_path.as_deref(), Some("$.message"));
    assert_eq!(r.checks[0].equals, Some(json!("hello ann")));
    assert!(i.script.is_none());
    let steps = &i.scenario.sessions[0].steps;
    assert_eq!(steps.len(), 2, "{steps:?}");
}
