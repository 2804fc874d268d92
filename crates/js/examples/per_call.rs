//! What one call costs, by kind: `cargo run --release -p headroom-js --example per_call`.
use headroom_js::*;
use std::time::Instant;

fn main() {
    let code = |c: &str, e: bool| Code::Inline {
        code: c.into(),
        expression: e,
        origin: "x".into(),
    };
    let program = Program {
        code: vec![code("Number(vars.total) > 100", true), code("1", true)],
        ..Program::default()
    };
    let w = Worker::new(&program, None, 1).unwrap();
    let mut user = w.user();
    let mut vars = Vars::default();
    vars.insert("total".into(), "50".into());
    vars.insert("product".into(), "p3".into());
    for (i, name) in [(0, "condition on vars"), (1, "constant")] {
        let n = 100_000;
        let t = Instant::now();
        let mut cpu = 0;
        for _ in 0..n {
            cpu += w.call(i, &mut user, &mut vars, None, None).unwrap().cpu_ns;
        }
        let wall = t.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "{name}: {wall:.0} ns wall, {:.0} ns counted CPU per call",
            cpu as f64 / n as f64
        );
    }
    let t = Instant::now();
    for _ in 0..100_000 {
        let mut ts = libc_time();
        ts += 1;
        std::hint::black_box(ts);
    }
    println!(
        "thread CPU clock read: {:.0} ns",
        t.elapsed().as_nanos() as f64 / 100_000.0
    );
}

fn libc_time() -> u64 {
    let t = Instant::now();
    t.elapsed().as_nanos() as u64
}
