//! `headroom import har FILE.har`: a browser's recorded page loads (HAR
//! 1.2, as Chromium's and Firefox's developer tools save them) → one
//! session replaying the requests of the main origin in order, with the
//! recorded pauses between them as think times, the recorded statuses
//! expected, and the recorded protocol (`HTTP/2.0`, `h2`) as `[http]
//! version`.

use super::{main_origin, managed_header, request, split_url, Imported};
use headroom_engine::plan::HttpVersion;
use headroom_scenario::raw::{
    RawExpect, RawHttp, RawHttpVersion, RawRequest, RawScenario, RawSession, RawStatus, RawStep,
};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct Har {
    log: Log,
}

#[derive(Deserialize)]
struct Log {
    entries: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(default)]
    started_date_time: Option<String>,
    request: Request,
    #[serde(default)]
    response: Option<Response>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<Header>,
    #[serde(default)]
    post_data: Option<PostData>,
    /// `HTTP/1.1`, `HTTP/2.0` (Firefox), `h2` or `http/2.0` (Chromium).
    #[serde(default)]
    http_version: Option<String>,
}

#[derive(Deserialize)]
struct Header {
    name: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PostData {
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct Response {
    status: i64,
}

/// Pauses shorter than this between recorded requests are the browser's
/// own pace (parallel loads), not a user thinking.
const THINK_FROM_MS: i64 = 500;

/// One recorded request: its method, headers (cookies left to the
/// session's jar), body and, where it succeeded, its status expected.
fn entry_request(taken: &mut BTreeMap<String, u32>, e: &Entry, path: &str) -> RawRequest {
    let method = e.request.method.to_ascii_uppercase();
    let mut r = request(taken, &method, path);
    let headers: BTreeMap<String, String> = e
        .request
        .headers
        .iter()
        // Cookies come from the session's own jar, as the browser's did.
        .filter(|h| !managed_header(&h.name) && !h.name.eq_ignore_ascii_case("cookie"))
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect();
    if !headers.is_empty() {
        r.headers = Some(headers);
    }
    if let Some(p) = &e.request.post_data {
        r.body = p.text.clone();
        if let Some(ty) = &p.mime_type {
            r.headers
                .get_or_insert_with(Default::default)
                .entry("Content-Type".into())
                .or_insert_with(|| ty.clone());
        }
    }
    if let Some(status) = e.response.as_ref().map(|r| r.status) {
        if (100..400).contains(&status) {
            r.expect = Some(RawExpect {
                status: Some(RawStatus::One(status as u16)),
            });
        }
    }
    r
}

pub fn import(text: &str) -> Result<Imported, String> {
    let har: Har = serde_json::from_str(text).map_err(|e| format!("not a HAR file: {e}"))?;
    if har.log.entries.is_empty() {
        return Err("the HAR file has no entries".into());
    }
    let mut left_out = Vec::new();
    let origin = main_origin(har.log.entries.iter().map(|e| e.request.url.as_str()))
        .ok_or("no http(s) request in the HAR file")?;
    let mut taken = BTreeMap::new();
    let mut requests = Vec::new();
    let mut steps = Vec::new();
    let mut last_start: Option<i64> = None;
    let mut other = 0;
    let mut protocols = BTreeMap::new();
    for e in &har.log.entries {
        let Ok((o, path)) = split_url(&e.request.url) else {
            left_out.push(format!("{}: not an http(s) URL", e.request.url));
            continue;
        };
        if o != origin {
            other += 1;
            continue;
        }
        let started = e.started_date_time.as_deref().and_then(millis);
        if let (Some(a), Some(b)) = (last_start, started) {
            if b - a >= THINK_FROM_MS {
                steps.push(RawStep {
                    think: Some(format!("{}ms", b - a)),
                    ..RawStep::default()
                });
            }
        }
        last_start = started.or(last_start);
        if let Some(version) = e.request.http_version.as_deref().and_then(version_of) {
            *protocols.entry(version.as_str()).or_insert(0) += 1;
        }
        let r = entry_request(&mut taken, e, &path);
        steps.push(RawStep {
            request: Some(r.name.clone()),
            ..RawStep::default()
        });
        requests.push(r);
    }
    if other > 0 {
        left_out.push(format!(
            "{other} requests to other origins than {origin} (a scenario loads one origin)"
        ));
    }
    // The protocol the browser spoke to the origin, when it spoke one.
    let version = match protocols.keys().collect::<Vec<_>>()[..] {
        [only] => HttpVersion::parse(only).filter(|v| *v != HttpVersion::Http1),
        [] => None,
        _ => {
            left_out.push(format!(
                "requests in more than one HTTP version to {origin}: version \"auto\" speaks what the server chooses"
            ));
            Some(HttpVersion::Auto)
        }
    };
    Ok(Imported {
        scenario: RawScenario {
            http: version.map(|v| RawHttp {
                version: Some(RawHttpVersion(v)),
                ..RawHttp::default()
            }),
            base_url: Some(origin),
            requests,
            sessions: vec![RawSession {
                name: "recorded".into(),
                weight: None,
                steps,
            }],
            ..RawScenario::default()
        },
        left_out,
        script: None,
    })
}

/// The version a HAR entry names, as headroom speaks it.
fn version_of(recorded: &str) -> Option<HttpVersion> {
    match recorded.to_ascii_lowercase().as_str() {
        "http/1.1" | "http/1.0" => Some(HttpVersion::Http1),
        "http/2.0" | "http/2" | "h2" => Some(HttpVersion::Http2),
        "http/3" | "http/3.0" | "h3" => Some(HttpVersion::Http3),
        _ => None,
    }
}

/// Milliseconds since the epoch of an RFC 3339 time.
fn millis(t: &str) -> Option<i64> {
    humantime::parse_rfc3339_weak(t.trim_end_matches('Z').split('+').next()?)
        .ok()
        .and_then(|s| s.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_origin_in_order_with_pauses_and_statuses() {
        let har = r#"{"log":{"version":"1.2","entries":[
          {"startedDateTime":"2026-01-01T10:00:00.000Z","request":{"method":"GET","url":"http://127.0.0.1:8080/","headers":[{"name":"Host","value":"x"},{"name":"Accept","value":"text/html"},{"name":"Cookie","value":"a=b"}]},"response":{"status":200}},
          {"startedDateTime":"2026-01-01T10:00:00.100Z","request":{"method":"GET","url":"https://cdn.example/x.js","headers":[]},"response":{"status":200}},
          {"startedDateTime":"2026-01-01T10:00:02.100Z","request":{"method":"POST","url":"http://127.0.0.1:8080/login","headers":[],"postData":{"mimeType":"application/x-www-form-urlencoded","text":"u=a"}},"response":{"status":302}},
          {"startedDateTime":"2026-01-01T10:00:02.300Z","request":{"method":"GET","url":"http://127.0.0.1:8080/","headers":[]},"response":{"status":200}}
        ]}}"#;
        let got = import(har).unwrap();
        let s = &got.scenario;
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:8080"));
        let names: Vec<&str> = s.requests.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["GET /", "POST /login", "GET / #2"]);
        assert_eq!(s.requests[0].headers.as_ref().unwrap().len(), 1);
        assert_eq!(s.requests[1].body.as_deref(), Some("u=a"));
        let steps = &s.sessions[0].steps;
        assert_eq!(steps.len(), 4);
        assert_eq!(steps[1].think.as_deref(), Some("2100ms"));
        assert!(got.left_out[0].contains("1 requests to other origins"));
        headroom_scenario::parse_toml::<RawScenario>(&got.to_toml("a.har")).unwrap();
    }

    #[test]
    fn the_recorded_protocol_becomes_the_version() {
        let entry = |version: &str| {
            format!(
                r#"{{"request":{{"method":"GET","url":"https://app.test/","httpVersion":"{version}","headers":[]}},"response":{{"status":200}}}}"#
            )
        };
        let har = |versions: &[&str]| {
            let entries: Vec<String> = versions.iter().map(|v| entry(v)).collect();
            format!(r#"{{"log":{{"entries":[{}]}}}}"#, entries.join(","))
        };
        let version = |versions: &[&str]| {
            import(&har(versions))
                .unwrap()
                .scenario
                .http
                .and_then(|h| h.version)
                .map(|v| v.0)
        };
        assert_eq!(version(&["h2", "h2"]), Some(HttpVersion::Http2));
        assert_eq!(version(&["HTTP/2.0"]), Some(HttpVersion::Http2));
        assert_eq!(version(&["HTTP/1.1"]), None, "1.1 is the default");
        assert_eq!(version(&["HTTP/1.1", "h2"]), Some(HttpVersion::Auto));
        assert_eq!(version(&[""]), None);
    }
}
