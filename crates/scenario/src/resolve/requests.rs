//! `[[request]]`s → request specs (target, method, headers, body, checks,
//! encoded once when nothing in them is templated), and the data they
//! draw on: feeders and the template variables they must set.

use super::builder::{Builder, BUILTINS};
use crate::raw::*;
use headroom_engine::plan::check::{Check, Extract};
use headroom_engine::plan::feeder::{read_bounded, Feeder, MAX_BODY_FILE_BYTES};
use headroom_engine::plan::template::Template;
use headroom_engine::plan::{Expect, RequestSpec, RequestTemplate};
use headroom_http::routes::{split_absolute, ConnectTo, Resolve, Routes};
use headroom_http::{encode_request, Capture, Endpoint};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Where a scenario's requests go, for resolving their targets.
struct RequestOrigin<'e> {
    /// The base URL's path, prefixed to every `path`.
    base_path: String,
    /// "scheme://host:port" of the base URL.
    base_origin: Option<String>,
    endpoint: &'e Endpoint,
    routes: &'e Routes,
}

/// A request's target: where it goes, and the path sent.
struct Target {
    /// `scheme://authority` of a full URL on another origin.
    origin: Option<String>,
    /// Its `Host` header.
    host_header: Option<String>,
    path: String,
    /// Where in `path` the request's own text begins (after the base
    /// URL's path): a variable there supplies a whole path.
    own_from: usize,
}

/// What of the response the checks and extractions need kept.
fn capture_for(checks: &[Check], extracts: &[Extract]) -> Capture {
    let mut capture = Capture::default();
    for need in checks
        .iter()
        .map(Check::needs)
        .chain(extracts.iter().map(Extract::needs))
    {
        capture.body |= need.body;
        capture.headers |= need.headers;
        capture.set_cookies |= need.set_cookies;
    }
    capture
}

impl Builder<'_> {
    pub(super) fn feeders(&mut self, raw: &[RawFeeder]) -> Vec<Arc<Feeder>> {
        let mut out = Vec::new();
        let mut names = BTreeSet::new();
        for f in raw {
            if !names.insert(f.name.clone()) {
                self.problem(
                    Some(&f.name),
                    "name",
                    &f.name,
                    format!("feeder `{}` is defined twice", f.name),
                );
            }
            let path = self.path(&f.file);
            match Feeder::load(
                &f.name,
                &path,
                f.order.unwrap_or_default(),
                f.scope.unwrap_or_default(),
                self.max_feeder_bytes,
            ) {
                Ok(feeder) => out.push(Arc::new(feeder)),
                Err(e) => self.problem(
                    Some(&f.name),
                    "file",
                    &f.file,
                    format!("feeder `{}`: {e}", f.name),
                ),
            }
        }
        out
    }

    /// `connect_to` and `resolve`, each rule checked.
    pub(super) fn routes(&mut self, raw: &RawScenario) -> Routes {
        let mut routes = Routes::default();
        for rule in raw.connect_to.iter().flat_map(RawRoutes::rules) {
            match ConnectTo::parse(&rule) {
                Ok(r) => routes.connect_to.push(r),
                Err(e) => self.problem(None, "connect_to", &rule, format!("connect_to: {e}")),
            }
        }
        for rule in raw.resolve.iter().flat_map(RawRoutes::rules) {
            match Resolve::parse(&rule) {
                Ok(r) => routes.resolve.push(r),
                Err(e) => self.problem(None, "resolve", &rule, format!("resolve: {e}")),
            }
        }
        routes
    }

    /// The origin of `path` requests (and the server a study waits for):
    /// the base URL; else the first full URL; else, when every URL is a
    /// template (a feeder of full URLs), where `connect_to` sends them all.
    pub(super) fn endpoint(&mut self, raw: &RawScenario, routes: &Routes) -> Option<Endpoint> {
        if raw.requests.is_empty() {
            self.problems.add_unlocated(
                "the scenario has no requests: add at least one [[request]] with a name and a path"
                    .into(),
            );
            return None;
        }
        let base = raw
            .base_url
            .clone()
            .or_else(|| {
                raw.requests
                    .iter()
                    .find_map(|r| r.url.as_deref().and_then(origin))
            })
            .or_else(|| {
                let all_urls = raw.requests.iter().all(|r| r.url.is_some());
                let to = routes.connect_to.iter().find(|c| c.to_host.is_some())?;
                let host = to.to_host.as_deref()?;
                let host = if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host.to_string()
                };
                all_urls.then(|| format!("http://{host}:{}", to.to_port.unwrap_or(80)))
            });
        let Some(base) = base else {
            self.problem(
                None,
                "path",
                "path",
                "no base_url: set base_url (or --base-url), give requests a full url, or send templated urls somewhere with connect_to (--connect-to)".into(),
            );
            return None;
        };
        match Endpoint::from_url_via(&base, routes) {
            Ok((e, _)) => Some(e),
            Err(e) => {
                self.problem(None, "base_url", &base, format!("base_url: {e}"));
                None
            }
        }
    }

    /// Every `[[request]]`, each checked whole; a request with a problem
    /// is left out (the problem is reported, so no plan is built).
    pub(super) fn requests(
        &mut self,
        raw: &RawScenario,
        http: &RawHttp,
        (endpoint, routes): (&Endpoint, &Routes),
        keep_alive: bool,
        check_names: &mut Vec<String>,
    ) -> Vec<RequestSpec> {
        let origin = RequestOrigin {
            base_path: raw
                .base_url
                .as_deref()
                .and_then(|b| url::Url::parse(b).ok())
                .map(|u| u.path().trim_end_matches('/').to_string())
                .unwrap_or_default(),
            base_origin: raw.base_url.as_deref().and_then(origin),
            endpoint,
            routes,
        };
        // Credentials in the base URL (`http://user:pass@host`) are sent as
        // Basic auth, unless a header sets Authorization itself.
        let mut http = http.clone();
        if let Some(auth) = &endpoint.basic_auth {
            let headers = http.headers.get_or_insert_with(Default::default);
            if !headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"))
            {
                headers.insert("Authorization".into(), auth.clone());
            }
        }
        let http = &http;
        let mut names = BTreeSet::new();
        let mut out = Vec::new();
        for r in &raw.requests {
            if !names.insert(r.name.clone()) {
                self.problem(Some(&r.name), "name", &r.name, format!("request `{}` is defined twice (names must be unique: they label the results)", r.name));
            }
            if let Some(spec) = self.request(r, http, &origin, keep_alive, check_names) {
                out.push(spec);
            }
        }
        self.request_hooks(raw, &mut out, check_names);
        out
    }

    /// One request: target, method, headers, body, expectations, checks;
    /// encoded now when nothing in it is templated.
    fn request(
        &mut self,
        r: &RawRequest,
        http: &RawHttp,
        origin: &RequestOrigin,
        keep_alive: bool,
        check_names: &mut Vec<String>,
    ) -> Option<RequestSpec> {
        // A gRPC call: the HTTP/2 request it makes, and its method.
        let call = self.grpc_request(r, http.timeout.as_deref())?;
        let r = call.as_ref().map_or(r, |(request, _)| request);
        let a = Some(r.name.as_str());
        let Target {
            origin: other_origin,
            host_header,
            path: target,
            own_from,
        } = self.request_target(r, origin)?;
        let method = self.request_method(r);
        let mut headers = self.request_headers(r, http);
        let body = self.request_body(r, &mut headers);
        let timeout = r
            .timeout
            .as_deref()
            .and_then(|t| self.duration(a, "timeout", t));
        let expect = Expect {
            statuses: r
                .expect
                .as_ref()
                .and_then(|e| e.status.as_ref())
                .and_then(|s| self.status_set(a, s)),
        };
        let checks = self.checks(r, check_names);
        let extracts = self.extracts(r, check_names);

        let target_t = self
            .target_template(a, &target[own_from..])
            .map(|t| t.prefixed(&target[..own_from]));
        let header_ts: Vec<(String, Option<Template>)> = headers
            .iter()
            .map(|(k, v)| (k.clone(), self.template(a, k, v)))
            .collect();
        let body_t = self.template(a, "body", &body);
        let (Some(target_t), Some(body_t)) = (target_t, body_t) else {
            return None;
        };
        let header_ts: Vec<(String, Template)> = header_ts
            .into_iter()
            .filter_map(|(k, t)| t.map(|t| (k, t)))
            .collect();
        let is_static = target_t.is_static()
            && body_t.is_static()
            && header_ts.iter().all(|(_, t)| t.is_static());
        let header_pairs: Vec<(String, String)> = headers.into_iter().collect();
        let body = match (&call, is_static) {
            (Some((_, method)), true) => self.grpc_message(r, method, &body)?,
            _ => body.into_bytes(),
        };
        let encoded = if is_static {
            encode_request(
                &method,
                &target,
                host_header
                    .as_deref()
                    .unwrap_or(&origin.endpoint.host_header),
                &header_pairs,
                &body,
                keep_alive,
            )
            // Refused above (request_headers), with the header named.
            .ok()?
        } else {
            Vec::new()
        };
        let mut capture = capture_for(&checks, &extracts);
        capture.grpc = call.is_some();
        Some(RequestSpec {
            name: r.name.clone(),
            method,
            target,
            weight: r.weight.unwrap_or(1),
            expect,
            encoded,
            template: (!is_static).then_some(RequestTemplate {
                target: target_t,
                headers: header_ts,
                body: body_t,
            }),
            origin: other_origin,
            timeout,
            checks,
            extracts,
            capture,
            // Set by `request_hooks`.
            before: None,
            after: None,
            grpc: call.map(|(_, method)| method),
            grpc_stream: None, // set by `grpc_streams`
        })
    }

    /// The request target: `path` joined to the base URL's path, or a
    /// full `url` (on any origin; a template that renders a full URL goes
    /// to that URL's origin when sent).
    fn request_target(&mut self, r: &RawRequest, at: &RequestOrigin) -> Option<Target> {
        let a = Some(r.name.as_str());
        let on_base = |path: String, own_from: usize| Target {
            origin: None,
            host_header: None,
            path,
            own_from,
        };
        match (&r.url, &r.path) {
            (Some(_), Some(_)) => {
                self.problem(
                    a,
                    "url",
                    "url",
                    format!("request `{}`: give `url` or `path`, not both", r.name),
                );
                None
            }
            (None, None) => {
                self.problem(
                    a,
                    "name",
                    &r.name,
                    format!(
                        "request `{}`: needs a `path` (joined to base_url) or a full `url`",
                        r.name
                    ),
                );
                None
            }
            (None, Some(path)) => {
                if !path.starts_with('/') && !path.starts_with("{{") {
                    self.problem(a, "path", path, format!("request `{}`: path `{path}` must start with / (or be a template such as {{{{path}}}})", r.name));
                    return None;
                }
                Some(on_base(
                    format!("{}{path}", at.base_path),
                    at.base_path.len(),
                ))
            }
            (Some(url), None) if url.contains("{{") => {
                let literal = url.split("{{").next().unwrap_or("");
                if !literal.is_empty()
                    && split_absolute(literal).is_none()
                    && literal.contains("://")
                {
                    self.problem(
                        a,
                        "url",
                        url,
                        format!(
                            "request `{}`: url `{url}` is not http:// or https://",
                            r.name
                        ),
                    );
                    return None;
                }
                Some(on_base(url.clone(), 0))
            }
            (Some(url), None) => {
                let Some((key, path)) = split_absolute(url) else {
                    self.problem(a, "url", url, format!(
                        "request `{}`: url `{url}` is not a full http:// or https:// URL (give a path for base_url's server)",
                        r.name
                    ));
                    return None;
                };
                let same = Some(key) == at.base_origin.as_deref()
                    || at.base_origin.is_none() && Some(key) == origin_of(at.endpoint).as_deref();
                let path = if path.starts_with('?') {
                    format!("/{path}")
                } else {
                    path.to_string()
                };
                if same {
                    return Some(on_base(path, 0));
                }
                match Endpoint::from_url_via(key, at.routes) {
                    Ok((e, _)) => Some(Target {
                        origin: Some(key.to_string()),
                        host_header: Some(e.host_header),
                        path,
                        own_from: 0,
                    }),
                    Err(e) => {
                        self.problem(a, "url", url, format!("request `{}`: {e}", r.name));
                        None
                    }
                }
            }
        }
    }

    /// The method, upper-cased (GET by default).
    fn request_method(&mut self, r: &RawRequest) -> String {
        let method = r
            .method
            .clone()
            .unwrap_or_else(|| "GET".into())
            .to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            self.problem(
                Some(&r.name),
                "method",
                r.method.as_deref().unwrap_or(""),
                format!("request `{}`: `{method}` is not an HTTP method", r.name),
            );
        }
        method
    }

    /// Headers: the defaults from `[http]`, then the request's own (which
    /// replace a default of the same name, whatever its case).
    fn request_headers(&mut self, r: &RawRequest, http: &RawHttp) -> BTreeMap<String, String> {
        let a = Some(r.name.as_str());
        let mut headers: BTreeMap<String, String> = http.headers.clone().unwrap_or_default();
        for (k, v) in r.headers.clone().unwrap_or_default() {
            headers.retain(|old, _| !old.eq_ignore_ascii_case(&k));
            headers.insert(k, v);
        }
        for (k, v) in &headers {
            if k.is_empty() || !k.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                self.problem(
                    a,
                    k,
                    k,
                    format!("request `{}`: `{k}` is not a valid header name", r.name),
                );
            }
            if v.bytes().any(headroom_http::is_control) {
                self.problem(
                    a,
                    k,
                    k,
                    format!(
                        "request `{}`: header {k} contains a line break or another control character",
                        r.name
                    ),
                );
            }
        }
        headers
    }

    /// The body: `body`, `body_file` or `json` (which also sets
    /// `Content-Type: application/json` unless a header already does).
    fn request_body(&mut self, r: &RawRequest, headers: &mut BTreeMap<String, String>) -> String {
        let a = Some(r.name.as_str());
        let bodies = [r.body.is_some(), r.body_file.is_some(), r.json.is_some()];
        if bodies.iter().filter(|&&b| b).count() > 1 {
            self.problem(
                a,
                "body",
                "body",
                format!(
                    "request `{}`: give only one of body, body_file, json",
                    r.name
                ),
            );
        }
        if let Some(b) = &r.body {
            b.clone()
        } else if let Some(file) = &r.body_file {
            match read_bounded(&self.path(file), MAX_BODY_FILE_BYTES) {
                Ok(b) => b,
                Err(e) => {
                    self.problem(
                        a,
                        "body_file",
                        file,
                        format!(
                            "request `{}`: cannot read body_file {}: {e}",
                            r.name,
                            self.path(file).display()
                        ),
                    );
                    String::new()
                }
            }
        } else if let Some(json) = &r.json {
            if !headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("content-type"))
            {
                headers.insert("Content-Type".into(), "application/json".into());
            }
            json.to_string()
        } else {
            String::new()
        }
    }

    /// Every `{{var}}` must be something a feeder or an extraction sets.
    pub(super) fn variables(&mut self, raw: &RawScenario, feeders: &[Arc<Feeder>]) {
        let mut known: BTreeSet<String> = BUILTINS.iter().map(|s| s.to_string()).collect();
        for f in feeders {
            known.extend(f.columns.iter().cloned());
        }
        for r in &raw.requests {
            known.extend(r.extracts.iter().map(|x| x.name.clone()));
        }
        // Variables a script sets (`vars.name`, `vars["name"]`).
        known.extend(self.script_variables());
        let mut seen = BTreeSet::new();
        for r in &raw.requests {
            let mut texts: Vec<&str> = Vec::new();
            texts.extend(r.path.as_deref());
            texts.extend(r.url.as_deref());
            texts.extend(r.body.as_deref());
            texts.extend(
                r.headers
                    .iter()
                    .flat_map(|h| h.values().map(String::as_str)),
            );
            let json = r.json.as_ref().map(|j| j.to_string());
            texts.extend(json.as_deref());
            // Checks' expected values are templates too.
            for c in &r.checks {
                texts.extend(c.body_contains.as_deref());
                texts.extend(c.equals.as_ref().and_then(|v| v.as_str()));
            }
            for text in texts {
                let Ok(t) = Template::parse(text) else {
                    continue;
                };
                for var in t.vars() {
                    if known.contains(var) || !seen.insert((r.name.clone(), var.to_string())) {
                        continue;
                    }
                    let near = known
                        .iter()
                        .map(|k| (strsim::jaro_winkler(var, k), k))
                        .filter(|(s, _)| *s > 0.8)
                        .max_by(|a, b| a.0.total_cmp(&b.0))
                        .map(|(_, k)| format!(" — did you mean `{k}`?"))
                        .unwrap_or_default();
                    let provided = if known.len() > BUILTINS.len() {
                        format!(
                            "known: {}",
                            known.iter().cloned().collect::<Vec<_>>().join(", ")
                        )
                    } else {
                        "no feeder or extraction provides any".into()
                    };
                    self.problem(Some(&r.name), "", &format!("{{{{{var}"), format!(
                        "request `{}`: template variable `{var}` is not set by any feeder column or extraction ({provided}){near}",
                        r.name
                    ));
                }
            }
        }
    }
}

/// "scheme://host:port" of a URL (without templates in it).
fn origin(url: &str) -> Option<String> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let host_end = rest.find('/').unwrap_or(rest.len());
    Some(url[..scheme_end + host_end].to_string())
}

fn origin_of(e: &Endpoint) -> Option<String> {
    Some(format!(
        "{}://{}",
        if e.https { "https" } else { "http" },
        e.host_header
    ))
}
