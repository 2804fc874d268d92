//! Bringing existing plans over: a curl command line, a HAR file (what a
//! browser's developer tools save), a JMeter .jmx plan, a Postman
//! collection, an OpenAPI document, a k6 script, a Gatling simulation → a scenario
//! (`RawScenario`), with every element that could not be carried over
//! listed — nothing is dropped silently.
//!
//! - [`curl`]: one request from `curl …` (method, headers, body, auth).
//! - [`har`]: every request of a HAR log, in order, as one session.
//! - [`jmx`]: thread groups (users, ramp-up, loops or duration), HTTP
//!   samplers (method, path, headers, body), CSV Data Set (a feeder),
//!   Constant Throughput Timer (an open-model rate), Response Assertions
//!   (checks).
//! - [`postman`]: a Postman collection's requests in order (folders,
//!   collection variables, bodies, bearer and basic auth).
//! - [`openapi`]: an OpenAPI 3 document's operations as a weighted mix,
//!   parameters and JSON bodies from its examples or schemas.
//! - [`k6`]: a k6 script (parsed as JavaScript): options, the default
//!   function's requests, checks and extracted values, data files.
//! - [`gatling`]: a Gatling simulation (Scala, Java or Kotlin, parsed with
//!   tree-sitter): protocol, scenario chain, feeders, injection, assertions.

pub mod curl;
pub mod gatling;
pub mod har;
pub mod jmx;
pub mod k6;
pub mod openapi;
pub mod postman;

use headroom_scenario::raw::{RawRequest, RawScenario};
use std::collections::BTreeMap;

/// A scenario made from another tool's plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Imported {
    pub scenario: RawScenario,
    /// Each element, option or setting that was not carried over, and why.
    pub left_out: Vec<String>,
    /// The logic carried over as a JavaScript module (the scenario's
    /// `[script] file`, written beside it), when there is any.
    pub script: Option<String>,
}

impl Imported {
    /// The scenario as a TOML file, with what was left out as comments at
    /// the top.
    pub fn to_toml(&self, source: &str) -> String {
        let mut text = format!("# Imported by headroom from {source}.\n");
        if self.left_out.is_empty() {
            text.push_str("# Everything was carried over.\n");
        } else {
            text.push_str("# Not carried over:\n");
            for item in &self.left_out {
                text.push_str(&format!("#   - {}\n", item.replace('\n', " ")));
            }
        }
        text.push('\n');
        text + &toml::to_string(&self.scenario).expect("a scenario serialises to TOML")
    }
}

/// `scheme://host[:port]` and the path with its query, from a URL.
pub(crate) fn split_url(url: &str) -> Result<(String, String), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "`{url}`: only http:// and https:// URLs can be loaded"
        ));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("`{url}` has no host"))?;
    let origin = match parsed.port() {
        Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
        None => format!("{}://{host}", parsed.scheme()),
    };
    let mut path = parsed.path().to_string();
    if let Some(q) = parsed.query() {
        path.push('?');
        path.push_str(q);
    }
    Ok((origin, path))
}

/// The most requested `scheme://host[:port]` among `urls` (a recording or
/// a collection may touch several; a scenario loads one).
pub(crate) fn main_origin<'a>(urls: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut origins: BTreeMap<String, usize> = BTreeMap::new();
    for url in urls {
        if let Ok((o, _)) = split_url(url) {
            *origins.entry(o).or_default() += 1;
        }
    }
    origins.into_iter().max_by_key(|(_, n)| *n).map(|(o, _)| o)
}

/// A request named "METHOD /path" (made unique with a number).
pub(crate) fn request(taken: &mut BTreeMap<String, u32>, method: &str, path: &str) -> RawRequest {
    let base = format!("{method} {}", path.split('?').next().unwrap_or(path));
    let n = taken.entry(base.clone()).or_insert(0);
    *n += 1;
    let name = if *n == 1 {
        base
    } else {
        format!("{base} #{n}")
    };
    RawRequest {
        name,
        method: (method != "GET").then(|| method.to_string()),
        path: Some(path.to_string()),
        ..RawRequest::default()
    }
}

/// A form field as `application/x-www-form-urlencoded` writes it (what
/// Postman, k6 and Gatling send); `{{templates}}` and `${ENV}` stay as
/// written: they are filled in before sending.
pub(crate) fn form_encode(s: &str) -> String {
    if s.contains("{{") || s.contains("${") {
        return s.to_string();
    }
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A number as a scenario writes it: `5`, not `5.0`.
pub(crate) fn number_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// What was not carried over, in the source's order ("line N: …" first
/// by N, the rest after).
pub(crate) fn sort_by_line(left_out: &mut [String]) {
    left_out.sort_by_key(|l| {
        l.strip_prefix("line ")
            .and_then(|r| r.split(':').next()?.parse::<usize>().ok())
            .unwrap_or(usize::MAX)
    });
}

/// Headers the generator sets itself (or that would be wrong replayed).
pub(crate) fn managed_header(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "host" | "content-length" | "connection" | "transfer-encoding" | "keep-alive"
    ) || name.starts_with(':')
}
