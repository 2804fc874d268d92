//! Request heads: whatever a feeder, an extraction or a template puts into
//! a request's target and header values, what headroom writes is exactly
//! one valid HTTP/1.1 request — no value adds a line, a header or a second
//! request — or, for a header value with a line break, a NUL or another
//! control character, nothing at all.
#![no_main]

use headroom_engine::plan::template::{Scope, Template, Vars};
use headroom_http::RequestWriter;
use libfuzzer_sys::fuzz_target;

/// Bytes a request target may hold (RFC 3986's, `%` included).
fn valid_in_target(b: u8) -> bool {
    (0x21..=0x7e).contains(&b) && !b"\"#<>\\^`{|}".contains(&b)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // target template \x1f header template \x1f the variable's value
    let mut parts = text.splitn(3, '\u{1f}');
    let (Some(target), Some(header), Some(value)) = (parts.next(), parts.next(), parts.next())
    else {
        return;
    };
    let target = if target.starts_with('/') || target.starts_with("{{") {
        target.to_string()
    } else {
        format!("/{target}")
    };
    let (Ok(target_t), Ok(header_t)) = (Template::parse_target(&target), Template::parse(header))
    else {
        return;
    };
    let vars = Vars::from_iter([("v".to_string(), value.to_string())]);
    let mut rng = fastrand::Rng::with_seed(1);
    let mut scope = Scope { vars: &vars, user_id: 1, iteration: 1, rng: &mut rng };
    let mut rendered = Vec::new();
    target_t.render_target(&mut scope, &mut rendered);
    let rendered = String::from_utf8_lossy(&rendered).into_owned();

    let mut out = Vec::new();
    let mut head = RequestWriter::start(&mut out, "GET", &rendered, Some("h.test"));
    head.header("X-V", |o| header_t.render(&mut scope, o));
    let mut value_out = Vec::new();
    header_t.render(&mut scope, &mut value_out);
    match head.finish(true, |_| {}) {
        Err(_) => {
            assert!(out.is_empty(), "a refused request leaves nothing to send");
            assert!(value_out.iter().any(|&b| headroom_http::is_control(b)));
        }
        Ok(()) => {
            let mut fields = [httparse::EMPTY_HEADER; 16];
            let mut request = httparse::Request::new(&mut fields);
            let parsed = request.parse(&out).expect("a valid request head");
            assert_eq!(parsed, httparse::Status::Complete(out.len()), "exactly one request");
            let path = request.path.unwrap();
            assert!(path.bytes().all(valid_in_target), "target {path:?}");
            let names: Vec<&str> = request.headers.iter().map(|h| h.name).collect();
            assert_eq!(names, ["Host", "X-V", "User-Agent", "Accept"]);
        }
    }
});
