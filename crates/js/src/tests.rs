//! The engine against real JavaScript: the shop's functions, variables
//! both ways, errors located, budgets enforced, the standard library.

use super::*;

const SHOP: &str = r#"// Logic for shop.toml.
const SECRET = "s3cr3t";

export function pickProduct(ctx) {
  const inStock = ctx.response.json().products.filter((p) => p.stock > 0);
  if (inStock.length === 0) {
    return ctx.endIteration();
  }
  ctx.vars.product = inStock[Math.floor(Math.random() * inStock.length)].id;
}

export function sign(ctx) {
  const ts = String(Date.now());
  ctx.request.headers["X-Timestamp"] = ts;
  ctx.request.headers["X-Signature"] = crypto.hmac("sha256", SECRET, ts + "\n" + ctx.request.body, "hex");
}

export function boom(ctx) {
  null.x = 1;
}

export function spin(ctx) { for (;;) {} }

export function hog(ctx) { const a = []; for (;;) a.push("x".repeat(1 << 20) + a.length); }

export function count(ctx) { ctx.vars.n = Number(ctx.vars.n || 0) + 1; ctx.vars.list = [1, 2]; }
"#;

fn shop(code: Vec<Code>) -> Program {
    Program {
        file: Some(ScriptFile {
            name: "shop.js".into(),
            source: SHOP.into(),
        }),
        code,
        limits: Limits {
            call_time: Duration::from_millis(200),
            call_memory: 16 << 20,
        },
        seed: None,
    }
}

fn export(name: &str) -> Code {
    Code::Export(name.into())
}

#[test]
fn exports_are_listed_and_a_syntax_error_is_located() {
    let file = ScriptFile {
        name: "shop.js".into(),
        source: SHOP.into(),
    };
    let names = exports(&file).unwrap();
    assert!(names.contains(&"pickProduct".to_string()), "{names:?}");
    let broken = ScriptFile {
        name: "bad.js".into(),
        source: "export function f(ctx) {\n  let x = ;\n}\n".into(),
    };
    let e = exports(&broken).unwrap_err();
    assert!(e.starts_with("bad.js:2:"), "{e}");
    assert!(e.contains("SyntaxError"), "{e}");
}

#[test]
fn pick_product_reads_the_response_and_sets_a_variable() {
    let w = Worker::new(&shop(vec![export("pickProduct")]), None, 7).unwrap();
    let mut user = w.user();
    let mut vars = Vars::default();
    let body = br#"{"products":[{"id":"a","stock":0},{"id":"b","stock":3}]}"#;
    let response = Response {
        status: 200,
        headers: &[],
        body,
    };
    let called = w
        .call(0, &mut user, &mut vars, Some(response), None)
        .unwrap();
    assert_eq!(called.flow, Flow::Continue);
    assert_eq!(vars.get("product").map(String::as_str), Some("b"));
    let none = br#"{"products":[{"id":"a","stock":0}]}"#;
    let response = Response {
        body: none,
        ..response
    };
    let called = w
        .call(0, &mut user, &mut vars, Some(response), None)
        .unwrap();
    assert_eq!(called.flow, Flow::EndIteration);
}

#[test]
fn sign_sets_headers_with_k6s_hmac() {
    let w = Worker::new(&shop(vec![export("sign")]), None, 7).unwrap();
    let mut user = w.user();
    let mut request = Request {
        method: "POST".into(),
        url: "http://127.0.0.1/cart".into(),
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: r#"{"product":"b"}"#.into(),
    };
    w.call(0, &mut user, &mut Vars::default(), None, Some(&mut request))
        .unwrap();
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let ts = header("X-Timestamp");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"s3cr3t");
    let want = ring::hmac::sign(&key, format!("{ts}\n{}", request.body).as_bytes());
    assert_eq!(header("X-Signature"), stdlib_hex(want.as_ref()));
    assert_eq!(header("Content-Type"), "application/json");
}

fn stdlib_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn variables_cross_both_ways_and_each_user_has_its_own() {
    let w = Worker::new(&shop(vec![export("count")]), None, 7).unwrap();
    let (mut a, mut b) = (w.user(), w.user());
    let (mut va, mut vb) = (Vars::default(), Vars::default());
    va.insert("n".into(), "41".into());
    w.call(0, &mut a, &mut va, None, None).unwrap();
    w.call(0, &mut b, &mut vb, None, None).unwrap();
    assert_eq!(va["n"], "42");
    assert_eq!(va["list"], "[1,2]");
    assert_eq!(vb["n"], "1");
    // An extraction changes the user's variable between calls.
    va.insert("n".into(), "100".into());
    w.call(0, &mut a, &mut va, None, None).unwrap();
    assert_eq!(va["n"], "101");
    // A user that goes gives its slot to the next, emptied.
    drop(a);
    let mut c = w.user();
    let mut vc = Vars::default();
    w.call(0, &mut c, &mut vc, None, None).unwrap();
    assert_eq!(vc["n"], "1");
}

#[test]
fn a_throw_is_located_at_its_line() {
    let w = Worker::new(&shop(vec![export("boom")]), None, 7).unwrap();
    let mut user = w.user();
    let e = w
        .call(0, &mut user, &mut Vars::default(), None, None)
        .unwrap_err();
    assert_eq!(e.at, "shop.js:19", "{e}");
    assert!(e.message.contains("TypeError"), "{e}");
}

#[test]
fn an_endless_loop_is_stopped_at_its_budget_and_the_engine_goes_on() {
    let w = Worker::new(&shop(vec![export("spin"), export("count")]), None, 7).unwrap();
    let mut user = w.user();
    let started = Instant::now();
    let e = w
        .call(0, &mut user, &mut Vars::default(), None, None)
        .unwrap_err();
    // The 200 ms budget, with room for a loaded machine.
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(e.message.contains("time budget"), "{e}");
    let mut vars = Vars::default();
    w.call(1, &mut user, &mut vars, None, None).unwrap();
    assert_eq!(vars["n"], "1");
}

#[test]
fn a_call_that_allocates_without_end_is_refused_and_the_engine_goes_on() {
    let w = Worker::new(&shop(vec![export("hog"), export("count")]), None, 7).unwrap();
    let mut user = w.user();
    let e = w
        .call(0, &mut user, &mut Vars::default(), None, None)
        .unwrap_err();
    assert!(e.message.contains("memory budget"), "{e}");
    let mut vars = Vars::default();
    w.call(1, &mut user, &mut vars, None, None).unwrap();
    assert_eq!(vars["n"], "1");
}

#[test]
fn inline_conditions_and_their_syntax_errors() {
    let cond = |code: &str| Code::Inline {
        code: code.into(),
        expression: true,
        origin: "shop.toml:31".into(),
    };
    let program = Program {
        code: vec![cond("Number(vars.total) > 100")],
        ..Program::default()
    };
    let w = Worker::new(&program, None, 1).unwrap();
    let mut user = w.user();
    let mut vars = Vars::default();
    vars.insert("total".into(), "120.5".into());
    assert!(w.call(0, &mut user, &mut vars, None, None).unwrap().truthy);
    vars.insert("total".into(), "99".into());
    assert!(!w.call(0, &mut user, &mut vars, None, None).unwrap().truthy);
    let bad = Program {
        code: vec![cond("vars.total >")],
        ..Program::default()
    };
    let problems = bad.check().unwrap_err();
    assert!(problems[0].starts_with("shop.toml:31"), "{problems:?}");
}

#[test]
fn setup_data_is_frozen_and_shared() {
    let program = Program {
        code: vec![Code::Inline {
            code: "vars.token = data.token; data.token = 'changed'; vars.after = data.token".into(),
            expression: false,
            origin: "t".into(),
        }],
        ..Program::default()
    };
    let w = Worker::new(&program, Some(r#"{"token":"abc"}"#), 1).unwrap();
    let mut user = w.user();
    let mut vars = Vars::default();
    w.call(0, &mut user, &mut vars, None, None).unwrap();
    assert_eq!(vars["token"], "abc");
    assert_eq!(vars["after"], "abc");
}

#[test]
fn the_standard_library_matches_known_digests() {
    let program = Program {
        code: vec![Code::Inline {
            code: r#"vars.md5 = crypto.md5("abc", "hex");
                vars.sha1 = crypto.sha1("abc");
                vars.sha256 = crypto.sha256("abc", "base64");
                vars.b64 = encoding.b64encode("hello");
                vars.back = encoding.b64decode(vars.b64);
                vars.uuid = crypto.uuidv4();
                vars.uri = encodeURIComponent("a b&c");
                vars.r = Math.random();"#
                .into(),
            expression: false,
            origin: "t".into(),
        }],
        ..Program::default()
    };
    let run = |seed| {
        let w = Worker::new(&program, None, seed).unwrap();
        let mut user = w.user();
        let mut vars = Vars::default();
        w.call(0, &mut user, &mut vars, None, None).unwrap();
        vars
    };
    let vars = run(3);
    assert_eq!(vars["md5"], "900150983cd24fb0d6963f7d28e17f72");
    assert_eq!(vars["sha1"], "a9993e364706816aba3e25717850c26c9cd0d89d");
    assert_eq!(
        vars["sha256"],
        "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
    );
    assert_eq!(vars["b64"], "aGVsbG8=");
    assert_eq!(vars["back"], "hello");
    assert_eq!(vars["uuid"].len(), 36);
    assert_eq!(&vars["uuid"][14..15], "4");
    assert_eq!(vars["uri"], "a%20b%26c");
    // The run's seed decides Math.random.
    assert_eq!(run(3)["r"], vars["r"]);
    assert_ne!(run(4)["r"], vars["r"]);
}

#[test]
fn scripts_cannot_reach_files_or_the_environment() {
    for code in [
        "vars.x = typeof require",
        "vars.x = typeof std",
        "vars.x = typeof os",
        "vars.x = typeof process",
        "vars.x = typeof fetch",
    ] {
        let program = Program {
            code: vec![Code::Inline {
                code: code.into(),
                expression: false,
                origin: "t".into(),
            }],
            ..Program::default()
        };
        let w = Worker::new(&program, None, 1).unwrap();
        let mut user = w.user();
        let mut vars = Vars::default();
        w.call(0, &mut user, &mut vars, None, None).unwrap();
        assert_eq!(vars["x"], "undefined", "{code}");
    }
}

#[test]
fn setup_and_teardown_are_called_with_json() {
    let program = Program {
        file: Some(ScriptFile {
            name: "t.js".into(),
            source: "export function setup() { return { token: 'abc', n: 2 }; }\nexport function teardown(data) { if (data.n !== 2) throw new Error('no data'); }\n".into(),
        }),
        ..Program::default()
    };
    let w = Worker::new(&program, None, 1).unwrap();
    let data = w.run_export("setup", None).unwrap().unwrap();
    assert_eq!(data, r#"{"token":"abc","n":2}"#);
    w.run_export("teardown", Some(&data)).unwrap();
    let e = w.run_export("teardown", Some("{}")).unwrap_err();
    assert_eq!(e.at, "t.js:2", "{e}");
    assert_eq!(w.run_export("absent", None).unwrap(), None);
}

#[test]
fn a_call_sees_its_users_number_and_iteration() {
    let program = Program {
        code: vec![Code::Inline {
            code: "vars.seen = ctx.user + '/' + ctx.iteration".into(),
            expression: false,
            origin: "t".into(),
        }],
        ..Program::default()
    };
    let w = Worker::new(&program, None, 1).unwrap();
    let (mut a, mut b) = (w.user(), w.user());
    (a.id, a.iteration) = (7, 3);
    (b.id, b.iteration) = (8, 0);
    let mut vars = Vars::default();
    w.call(0, &mut a, &mut vars, None, None).unwrap();
    assert_eq!(vars["seen"], "7/3");
    w.call(0, &mut b, &mut vars, None, None).unwrap();
    assert_eq!(vars["seen"], "8/0");
}
