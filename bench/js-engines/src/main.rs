//! rquickjs (QuickJS) against boa on what a session's script does per
//! request: a trivial hook that sets a variable, and the shop's
//! `pickProduct` (parse a product list, filter the in-stock ones, pick one).
//! Prints µs per call and the memory one user's variables object costs.
use std::time::Instant;

const PRODUCTS: usize = 20;
const CALLS: u32 = 200_000;

const JS: &str = r#"
var users = [];
function newUser() { users.push({ product: "", total: "0" }); }
function trivial(i) { users[i].n = i; }
function pickProduct(i, body) {
  const inStock = JSON.parse(body).products.filter((p) => p.stock > 0);
  if (inStock.length === 0) return;
  users[i].product = inStock[Math.floor(Math.random() * inStock.length)].id;
}
"#;

fn body() -> String {
    let items: Vec<String> = (0..PRODUCTS)
        .map(|i| format!(r#"{{"id":"p{i}","name":"Product {i}","price":{},"stock":{}}}"#, 10 + i, i % 3))
        .collect();
    format!(r#"{{"products":[{}]}}"#, items.join(","))
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn report(engine: &str, what: &str, start: Instant, calls: u32) {
    let us = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
    println!("{engine:8} {what:28} {us:8.3} µs/call");
}

fn quickjs(body: &str, users: u32) {
    use rquickjs::{Context, Function, Runtime};
    let before = rss_kib();
    let rt = Runtime::new().unwrap();
    let ctx = Context::full(&rt).unwrap();
    ctx.with(|ctx| {
        ctx.eval::<(), _>(JS).unwrap();
        let new_user: Function = ctx.globals().get("newUser").unwrap();
        for _ in 0..users {
            new_user.call::<_, ()>(()).unwrap();
        }
        println!("quickjs  memory: {} KiB for the engine and {users} users' objects", rss_kib() - before);
        let trivial: Function = ctx.globals().get("trivial").unwrap();
        let t = Instant::now();
        for i in 0..CALLS {
            trivial.call::<_, ()>((i % users,)).unwrap();
        }
        report("quickjs", "trivial hook", t, CALLS);
        let pick: Function = ctx.globals().get("pickProduct").unwrap();
        let t = Instant::now();
        for i in 0..CALLS / 10 {
            pick.call::<_, ()>((i % users, body)).unwrap();
        }
        report("quickjs", "pickProduct (20 products)", t, CALLS / 10);
    });
}

fn boa(body: &str, users: u32) {
    use boa_engine::{js_string, Context, JsValue, Source};
    let before = rss_kib();
    let mut ctx = Context::default();
    ctx.eval(Source::from_bytes(JS)).unwrap();
    let global = ctx.global_object();
    let get = |ctx: &mut Context, name| global.get(js_string!(name), ctx).unwrap();
    let new_user = get(&mut ctx, "newUser");
    let new_user = new_user.as_callable().unwrap();
    for _ in 0..users {
        new_user.call(&JsValue::undefined(), &[], &mut ctx).unwrap();
    }
    println!("boa      memory: {} KiB for the engine and {users} users' objects", rss_kib() - before);
    let trivial = get(&mut ctx, "trivial");
    let trivial = trivial.as_callable().unwrap();
    let t = Instant::now();
    for i in 0..CALLS {
        trivial
            .call(&JsValue::undefined(), &[JsValue::from(i % users)], &mut ctx)
            .unwrap();
    }
    report("boa", "trivial hook", t, CALLS);
    let pick = get(&mut ctx, "pickProduct");
    let pick = pick.as_callable().unwrap();
    let body = JsValue::from(js_string!(body));
    let t = Instant::now();
    for i in 0..CALLS / 10 {
        pick.call(&JsValue::undefined(), &[JsValue::from(i % users), body.clone()], &mut ctx)
            .unwrap();
    }
    report("boa", "pickProduct (20 products)", t, CALLS / 10);
}

fn main() {
    let body = body();
    let users = 10_000;
    let which = std::env::args().nth(1).unwrap_or_default();
    if which != "boa" {
        quickjs(&body, users);
    }
    if which != "quickjs" {
        boa(&body, users);
    }
}
