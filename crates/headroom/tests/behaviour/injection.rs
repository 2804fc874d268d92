//! Values from feeders, extractions and templates never inject anything
//! into a request: in a target they are percent-encoded (a raw one, a
//! whole path or URL, keeps its structure but not its spaces or line
//! breaks); a header value with a line break or another control character
//! refuses the request as `invalid_header_value`, sending nothing.

use crate::common::{recording_heads, run, scenario_dir};

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// Runs one request, `path` and `headers` as given, once per feeder row
/// of `ROWS`, twice over; returns the run and the heads the server got.
fn run_rows(path: &str, headers: &str) -> (crate::common::Run, Vec<String>, u64) {
    // part: embedded in a target; hdr: a header value; whole: a whole path.
    const ROWS: &str = "part,hdr,whole\n\
        \"yes\r\nX-Injected: yes\",\"multi\nline\",\"/w x?a=1&b=\"\"2\"\"\r\nX-Injected: w\"\n\
        \"a b\"\"c\",plain,/ok?q=1\n\
        \"../../etc?x=1&y=2#f\",\"tab\there\",/\u{e9}\n\
        plain,\"nul\u{0}\",/plain\n";
    let (server, seen) = recording_heads(OK);
    let scenario = format!(
        r#"base_url = "{}"
[load]
vus = 1
iterations = 8

[[feeder]]
name = "rows"
file = "rows.csv"
order = "circular"

[[request]]
name = "r"
path = "{path}"
headers = {{ {headers} }}
"#,
        server.url("")
    );
    let dir = scenario_dir(&[("s.toml", &scenario), ("rows.csv", ROWS)]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    let heads = seen.lock().unwrap().clone();
    for head in &heads {
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap();
        let parts: Vec<&str> = request_line.split(' ').collect();
        assert_eq!(parts.len(), 3, "one target, no raw space: {request_line:?}");
        assert!(parts[1].starts_with('/'), "{request_line:?}");
        assert!(
            parts[1]
                .bytes()
                .all(|b| (0x21..0x7f).contains(&b) && !b"\"#<>\\^`{|}".contains(&b)),
            "{request_line:?}"
        );
        for line in lines.filter(|l| !l.is_empty()) {
            let name = line.split(':').next().unwrap();
            assert!(
                ["Host", "X-V", "User-Agent", "Accept"].contains(&name),
                "only the headers asked for: {line:?} in {head:?}"
            );
        }
    }
    let received = server.requests();
    (r, heads, received)
}

#[test]
fn feeder_values_in_a_target_are_data_and_in_a_header_never_a_line() {
    let (r, heads, received) = run_rows("/x/{{part}}?q={{part}}", "X-V = \"{{hdr}}\"");
    // Embedded values are data: encoded whole, '/', '?', '&' and '#' included.
    let starts = |line: &str| heads.iter().any(|h| h.starts_with(line));
    assert!(
        starts("GET /x/..%2F..%2Fetc%3Fx%3D1%26y%3D2%23f?q=..%2F..%2Fetc%3Fx%3D1%26y%3D2%23f HTTP/1.1\r\n"),
        "{heads:#?}"
    );
    assert!(
        starts("GET /x/a%20b%22c?q=a%20b%22c HTTP/1.1\r\n"),
        "{heads:#?}"
    );
    assert!(heads.iter().any(|h| h.contains("\r\nX-V: tab\there\r\n")));
    // Rows 1 and 4 hold a header value with a line break or a NUL: their
    // requests (2 each) are refused, sent to nobody.
    assert_eq!(
        r.error("invalid_header_value"),
        4,
        "{}",
        r.results()["errors"]
    );
    assert_eq!(r.total(), 8);
    assert_eq!(received, 4);
    assert_eq!(r.results()["requests"]["not_delivered"].as_u64(), Some(4));
}

#[test]
fn a_whole_path_from_a_feeder_keeps_its_structure_but_no_line_break() {
    let (r, heads, received) = run_rows("{{whole}}", "");
    let starts = |line: &str| heads.iter().any(|h| h.starts_with(line));
    assert!(
        starts("GET /w%20x?a=1&b=%222%22%0D%0AX-Injected:%20w HTTP/1.1\r\n"),
        "{heads:#?}"
    );
    assert!(starts("GET /ok?q=1 HTTP/1.1\r\n"), "{heads:#?}");
    assert!(starts("GET /%C3%A9 HTTP/1.1\r\n"), "{heads:#?}");
    assert_eq!((r.total(), received), (8, 8), "{}", r.results()["errors"]);
}

#[test]
fn a_header_value_with_a_line_break_in_the_scenario_is_refused_before_load() {
    let (server, _) = recording_heads(OK);
    let scenario = format!(
        "base_url = \"{}\"\n[[request]]\nname = \"a\"\npath = \"/\"\nheaders = {{ X-A = \"1\\r\\nX-Injected: 2\" }}\n",
        server.url("")
    );
    let dir = scenario_dir(&[("s.toml", &scenario)]);
    let r = run(&[
        dir.path().join("s.toml").to_str().unwrap(),
        "--requests",
        "3",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("X-A") && r.stderr.contains("line break"),
        "{}",
        r.stderr
    );
    assert_eq!(server.requests(), 0);
}
