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
        code: vec![
            code("Number(vars.total) > 100", true),
            code("1", true),
            code("vars.last = response.status", false),
            code("vars.last = 200", false),
            code("response.status", false),
            code("1", false),
        ],
        ..Program::default()
    };
    let w = Worker::new(&program, None, 1).unwrap();
    let mut user = w.user();
    let mut vars = Vars::default();
    vars.insert("total".into(), "50".into());
    vars.insert("product".into(), "p3".into());
    for k in ["user", "item1", "item2", "item3", "token"] {
        vars.insert(k.into(), format!("{k}-value-123"));
    }
    let status = Response {
        status: 200,
        headers: &[],
        body: b"",
    };
    for (i, name) in [
        (0, "condition on vars"),
        (1, "constant"),
        (2, "a hook setting a variable"),
        (3, "set a constant"),
        (4, "read the status"),
        (5, "statement 1"),
    ] {
        let n = 100_000;
        let t = Instant::now();
        let mut cpu = 0;
        for _ in 0..n {
            cpu += w
                .call(i, &mut user, &mut vars, Some(status), None)
                .unwrap()
                .cpu_ns;
        }
        let wall = t.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "{name}: {wall:.0} ns wall, {:.0} ns counted CPU per call",
            cpu as f64 / n as f64
        );
    }
}
