//! `headroom import postman collection.json`: a Postman collection (v2.1
//! or v2.0 format, as Postman exports it) → one session sending its
//! requests in the collection's order, folders flattened depth-first.
//! Collection variables (`{{baseUrl}}`) are filled in; variables the
//! collection does not define (an environment's) stay as `{{name}}`
//! templates and are listed, as are disabled items and bodies headroom
//! cannot send. Pre-request and test scripts (the collection's, a
//! folder's, a request's, run in Postman's order) are carried over as
//! `before` and `after` hooks in a JavaScript module beside the scenario,
//! over a `pm` (and CryptoJS) made of headroom's `ctx` (`postman_pm.js`);
//! what `pm` cannot do there is listed with its line.

use super::{form_encode, main_origin, managed_header, request, split_url, Imported};
use base64::Engine;
use headroom_scenario::raw::{RawRequest, RawScenario, RawScript, RawSession, RawStep};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct Collection {
    #[serde(default)]
    info: Option<Info>,
    #[serde(default)]
    item: Vec<Item>,
    #[serde(default)]
    variable: Vec<Variable>,
    #[serde(default)]
    auth: Option<Value>,
    #[serde(default)]
    event: Vec<Value>,
}

#[derive(Deserialize)]
struct Info {
    #[serde(default)]
    name: String,
    #[serde(default)]
    schema: String,
}

/// A request, or a folder of items.
#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    name: String,
    #[serde(default)]
    request: Option<Request>,
    #[serde(default)]
    item: Option<Vec<Item>>,
    #[serde(default)]
    event: Vec<Value>,
    #[serde(default)]
    auth: Option<Value>,
}

#[derive(Deserialize)]
struct Variable {
    key: String,
    #[serde(default)]
    value: Value,
    #[serde(default)]
    disabled: bool,
}

/// A request: a URL string alone, or the full object.
#[derive(Deserialize)]
#[serde(untagged)]
enum Request {
    Url(String),
    Full(Box<FullRequest>),
}

#[derive(Deserialize)]
struct FullRequest {
    #[serde(default)]
    method: Option<String>,
    url: Url,
    #[serde(default)]
    header: Headers,
    #[serde(default)]
    body: Option<Body>,
    #[serde(default)]
    auth: Option<Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Url {
    Raw(String),
    Parts {
        #[serde(default)]
        raw: Option<String>,
    },
}

#[derive(Deserialize, Default)]
#[serde(untagged)]
enum Headers {
    #[default]
    None,
    List(Vec<Header>),
    /// v2.0 allowed the headers as one "Name: value\n…" string.
    Text(String),
}

#[derive(Deserialize)]
struct Header {
    key: String,
    #[serde(default)]
    value: String,
    #[serde(default)]
    disabled: bool,
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    raw: Option<String>,
    #[serde(default)]
    urlencoded: Vec<Header>,
    #[serde(default)]
    options: Option<Value>,
    #[serde(default)]
    disabled: bool,
}

/// A request flattened out of its folders, with the auth it inherits.
struct Flat<'a> {
    path: String,
    request: &'a Request,
    auth: Option<&'a Value>,
    /// Its scripts and those of the folders and collection around it,
    /// outermost first (Postman's order).
    events: Vec<&'a Value>,
}

/// A request's method (GET for a bare URL), and its full form if it has
/// one.
fn method_of(request: &Request) -> (String, Option<&FullRequest>) {
    match request {
        Request::Url(_) => ("GET".to_string(), None),
        Request::Full(r) => (
            r.method.as_deref().unwrap_or("GET").to_ascii_uppercase(),
            Some(&**r),
        ),
    }
}

/// The session is named after the collection.
fn session_name(collection: &Collection) -> String {
    collection
        .info
        .as_ref()
        .map(|i| i.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "collection".into())
}

/// The collection's own variables (an environment's are not in the file).
fn collection_variables(collection: &Collection) -> BTreeMap<String, String> {
    collection
        .variable
        .iter()
        .filter(|v| !v.disabled)
        .map(|v| {
            let value = match &v.value {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (v.key.clone(), value)
        })
        .collect()
}

/// A request's enabled headers and its body (with the body's type, unless
/// a header gives one), variables filled; `Err` says why a body was left
/// out.
fn headers_and_body(
    full: &FullRequest,
    r: &mut RawRequest,
    headers: &mut BTreeMap<String, String>,
    fill: &mut dyn FnMut(&str) -> String,
) -> Result<(), String> {
    for h in header_list(&full.header) {
        if !h.disabled && !managed_header(&h.key) {
            headers.insert(h.key.clone(), fill(&h.value));
        }
    }
    let Some(body) = full.body.as_ref().filter(|b| !b.disabled) else {
        return Ok(());
    };
    if let Some((text, content_type)) = body_of(body)? {
        r.body = Some(fill(&text));
        if let Some(ty) = content_type {
            let has = headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("content-type"));
            if !has {
                headers.insert("Content-Type".into(), ty.into());
            }
        }
    }
    Ok(())
}

pub fn import(text: &str) -> Result<Imported, String> {
    let collection: Collection = serde_json::from_str(text).map_err(|e| {
        format!(
            "not a Postman collection (line {}, column {}): {e}",
            e.line(),
            e.column()
        )
    })?;
    if let Some(info) = &collection.info {
        if !info.schema.is_empty() && !info.schema.contains("/v2.") {
            return Err(format!(
                "collection format {} is not supported: export it from Postman as Collection v2.1",
                info.schema
            ));
        }
    }
    let mut left_out = Vec::new();
    let vars = collection_variables(&collection);
    let flat = requests_of(&collection, &mut left_out);
    let mut scripts = Scripts::default();
    if flat.is_empty() {
        return Err("the collection has no requests".into());
    }
    let mut unknown_vars = std::collections::BTreeSet::new();
    let mut fill = |text: &str| fill_vars(text, &vars, &mut unknown_vars);
    let urls: Vec<String> = flat
        .iter()
        .map(|f| with_scheme(&fill(&url_of(f.request))))
        .collect();
    let origin = main_origin(urls.iter().map(String::as_str))
        .ok_or("no request with an http(s) URL (are its variables defined in an environment?)")?;
    let mut taken = BTreeMap::new();
    let mut requests = Vec::new();
    let mut steps = Vec::new();
    for (f, url) in flat.iter().zip(&urls) {
        let Ok((o, path)) = split_url(url) else {
            left_out.push(format!("{}: `{url}` is not an http(s) URL", f.path));
            continue;
        };
        if o != origin {
            left_out.push(format!(
                "{}: {o} is not {origin} (a scenario loads one origin)",
                f.path
            ));
            continue;
        }
        let (method, full) = method_of(f.request);
        let mut r = request(&mut taken, &method, &path);
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        if let Some(full) = full {
            if let Err(why) = headers_and_body(full, &mut r, &mut headers, &mut fill) {
                left_out.push(format!("{}: {why}", f.path));
            }
        }
        let auth = full.and_then(|r| r.auth.as_ref()).or(f.auth);
        match auth.map(|a| auth_header(a, &mut fill)) {
            Some(Ok(Some(value))) => {
                headers.insert("Authorization".into(), value);
            }
            Some(Err(why)) => left_out.push(format!("{}: {why}", f.path)),
            _ => {}
        }
        if !headers.is_empty() {
            r.headers = Some(headers);
        }
        scripts.hooks(f, &mut r, &mut left_out);
        steps.push(RawStep {
            request: Some(r.name.clone()),
            ..RawStep::default()
        });
        requests.push(r);
    }
    for name in &unknown_vars {
        left_out.push(format!(
            "variable {{{{{name}}}}} is not defined in the collection (an environment's?): kept as a template — give it a value with a feeder column or an `extract`, or write `${{{name}}}` to read it from the environment"
        ));
    }
    let script = scripts.module(&vars);
    Ok(Imported {
        scenario: RawScenario {
            base_url: Some(origin),
            requests,
            sessions: vec![RawSession {
                name: session_name(&collection),
                weight: None,
                steps,
            }],
            // The file's name is the output's (the command sets it).
            script: script.as_ref().map(|_| RawScript::default()),
            ..RawScenario::default()
        },
        left_out,
        script,
    })
}

/// `pm` over headroom's `ctx`: what carried scripts run on.
const PM: &str = include_str!("postman_pm.js");

/// What `pm` does not do in headroom, by the call that shows it.
const NOT_CARRIED: [(&str, &str); 6] = [
    ("pm.sendRequest", "sends a request from a script (a script reaches the server only through the session's requests: make it a request step)"),
    ("setNextRequest", "changes the order of requests (write the session's steps with `if`/`while`)"),
    ("pm.cookies", "reads cookies (headroom keeps each user's cookies itself)"),
    ("pm.iterationData", "reads a data file's row (make it a feeder)"),
    ("pm.vault", "reads Postman's vault"),
    ("require(", "loads a module"),
];

/// The hooks carried over, as one module's functions.
#[derive(Default)]
struct Scripts {
    functions: Vec<String>,
}

impl Scripts {
    /// `before` and `after` of request `r` from the scripts around it.
    fn hooks(&mut self, f: &Flat, r: &mut RawRequest, left_out: &mut Vec<String>) {
        for (listen, hook) in [("prerequest", &mut r.before), ("test", &mut r.after)] {
            let mut body = String::new();
            for event in f.events.iter().filter(|e| e["listen"] == listen) {
                let lines: Vec<&str> = match &event["script"]["exec"] {
                    Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
                    Value::String(text) => text.lines().collect(),
                    _ => Vec::new(),
                };
                for (n, line) in lines.iter().enumerate() {
                    for (call, why) in NOT_CARRIED {
                        if line.contains(call) {
                            left_out.push(format!(
                                "{}: {listen} script line {}: `{call}` {why}",
                                f.path,
                                n + 1
                            ));
                        }
                    }
                }
                body.push_str(&lines.join("\n"));
                body.push('\n');
            }
            if body.trim().is_empty() {
                continue;
            }
            let kind = if listen == "test" { "test" } else { "pre" };
            let name = format!("{kind}_{}", self.functions.len() + 1);
            self.functions.push(format!(
                "// {}: its {listen} script.\nexport function {name}(ctx) {{\n  const pm = pmFor(ctx);\n{}}}\n",
                f.path.replace('\n', " "),
                body.lines().map(|l| format!("  {l}\n")).collect::<String>()
            ));
            *hook = Some(name);
        }
    }

    /// The module: the collection's variables, `pm`, then the hooks.
    fn module(self, defaults: &BTreeMap<String, String>) -> Option<String> {
        let defaults = serde_json::to_string(defaults).expect("text serialises");
        (!self.functions.is_empty()).then(|| {
            format!(
                "const collectionDefaults = {defaults};\n\n{PM}\n{}",
                self.functions.join("\n")
            )
        })
    }
}

/// The collection's requests, depth-first, each with the auth and the
/// scripts around it.
fn requests_of<'a>(collection: &'a Collection, left_out: &mut Vec<String>) -> Vec<Flat<'a>> {
    let mut flat = Vec::new();
    let outermost: Vec<&Value> = collection.event.iter().collect();
    let auth = collection.auth.as_ref();
    flatten(
        &collection.item,
        ("", &outermost),
        auth,
        &mut flat,
        left_out,
    );
    flat
}

/// Items depth-first; unsupported items listed as left out.
fn flatten<'a>(
    items: &'a [Item],
    (folder, events): (&str, &[&'a Value]),
    auth: Option<&'a Value>,
    out: &mut Vec<Flat<'a>>,
    left_out: &mut Vec<String>,
) {
    for item in items {
        let path = if folder.is_empty() {
            item.name.clone()
        } else {
            format!("{folder} / {}", item.name)
        };
        let events: Vec<&Value> = events.iter().copied().chain(&item.event).collect();
        let auth = item.auth.as_ref().or(auth);
        match (&item.request, &item.item) {
            (Some(request), _) => out.push(Flat {
                path,
                request,
                auth,
                events,
            }),
            (None, Some(children)) => flatten(children, (&path, &events), auth, out, left_out),
            (None, None) => left_out.push(format!("{path}: neither a request nor a folder")),
        }
    }
}

fn url_of(r: &Request) -> String {
    match r {
        Request::Url(u) => u.clone(),
        Request::Full(full) => match &full.url {
            Url::Raw(u) => u.clone(),
            Url::Parts { raw } => raw.clone().unwrap_or_default(),
        },
    }
}

/// Postman sends `localhost:8080/x` as `http://localhost:8080/x`.
fn with_scheme(url: &str) -> String {
    if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    }
}

fn header_list(h: &Headers) -> Vec<Header> {
    match h {
        Headers::None => Vec::new(),
        Headers::List(list) => list
            .iter()
            .map(|h| Header {
                key: h.key.clone(),
                value: h.value.clone(),
                disabled: h.disabled,
            })
            .collect(),
        Headers::Text(text) => text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| Header {
                key: k.trim().to_string(),
                value: v.trim().to_string(),
                disabled: false,
            })
            .collect(),
    }
}

/// The body to send and its content type, or why it cannot be sent.
fn body_of(body: &Body) -> Result<Option<(String, Option<&'static str>)>, String> {
    match body.mode.as_deref() {
        None => Ok(None),
        Some("raw") => {
            let language = body
                .options
                .as_ref()
                .and_then(|o| o["raw"]["language"].as_str());
            let content_type = match language {
                Some("json") => Some("application/json"),
                Some("xml") => Some("application/xml"),
                Some("text") => Some("text/plain"),
                _ => None,
            };
            Ok(body.raw.clone().map(|b| (b, content_type)))
        }
        Some("urlencoded") => {
            let pairs: Vec<String> = body
                .urlencoded
                .iter()
                .filter(|p| !p.disabled)
                .map(|p| format!("{}={}", form_encode(&p.key), form_encode(&p.value)))
                .collect();
            Ok(Some((
                pairs.join("&"),
                Some("application/x-www-form-urlencoded"),
            )))
        }
        Some(other) => Err(format!(
            "its `{other}` body (multipart forms, files and GraphQL are not carried over)"
        )),
    }
}

/// The Authorization header an auth block sends, if it sends one.
fn auth_header(
    auth: &Value,
    fill: &mut impl FnMut(&str) -> String,
) -> Result<Option<String>, String> {
    // v2.1: `"bearer": [{"key": "token", "value": "…"}]`; v2.0: an object.
    let field = |kind: &str, key: &str| -> Option<String> {
        match &auth[kind] {
            Value::Array(list) => list
                .iter()
                .find(|f| f["key"] == key)
                .and_then(|f| f["value"].as_str())
                .map(String::from),
            Value::Object(map) => map.get(key).and_then(|v| v.as_str()).map(String::from),
            _ => None,
        }
    };
    match auth["type"].as_str().unwrap_or("noauth") {
        "noauth" => Ok(None),
        "bearer" => Ok(Some(format!(
            "Bearer {}",
            fill(&field("bearer", "token").unwrap_or_default())
        ))),
        "basic" => {
            let user = fill(&field("basic", "username").unwrap_or_default());
            let password = fill(&field("basic", "password").unwrap_or_default());
            Ok(Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )))
        }
        other => Err(format!(
            "its `{other}` auth (only bearer and basic are carried over)"
        )),
    }
}

/// `{{name}}` filled from the collection's variables; the others kept and
/// noted. Postman's dynamic variables (`{{$guid}}`) are kept too.
fn fill_vars(
    text: &str,
    vars: &BTreeMap<String, String>,
    unknown: &mut std::collections::BTreeSet<String>,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        match vars.get(name.trim()) {
            Some(value) => out.push_str(value),
            None => {
                unknown.insert(name.trim().to_string());
                out.push_str(&rest[start..start + 4 + len]);
            }
        }
        rest = &rest[start + 4 + len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLLECTION: &str = r#"{
      "info": {"name": "Users API", "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"},
      "variable": [{"key": "baseUrl", "value": "http://127.0.0.1:8080"}, {"key": "id", "value": "42"}],
      "auth": {"type": "bearer", "bearer": [{"key": "token", "value": "t0k3n"}]},
      "item": [
        {"name": "List users", "request": {"method": "GET", "url": {"raw": "{{baseUrl}}/users?page=2", "host": ["{{baseUrl}}"], "path": ["users"]},
          "header": [{"key": "Accept", "value": "application/json"}, {"key": "X-Off", "value": "1", "disabled": true}]},
          "event": [{"listen": "test", "script": {"exec": ["pm.response.to.have.status(200);"]}}]},
        {"name": "Writes", "item": [
          {"name": "Create user", "request": {"method": "POST", "url": "{{baseUrl}}/users",
            "body": {"mode": "raw", "raw": "{\"id\": {{id}}, \"name\": \"ann\"}", "options": {"raw": {"language": "json"}}}}},
          {"name": "Log in", "request": {"method": "POST", "url": "{{baseUrl}}/login",
            "auth": {"type": "basic", "basic": [{"key": "username", "value": "ann"}, {"key": "password", "value": "s3cret"}]},
            "body": {"mode": "urlencoded", "urlencoded": [{"key": "remember", "value": "yes please"}]}}},
          {"name": "Upload", "request": {"method": "POST", "url": "{{baseUrl}}/files", "body": {"mode": "formdata", "formdata": []}}}
        ]},
        {"name": "Profile", "request": {"method": "GET", "url": "{{baseUrl}}/users/{{id}}?session={{sessionId}}"}}
      ]
    }"#;

    #[test]
    fn folders_variables_bodies_and_auth() {
        let got = import(COLLECTION).unwrap();
        let s = &got.scenario;
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:8080"));
        let names: Vec<&str> = s.requests.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "GET /users",
                "POST /users",
                "POST /login",
                "POST /files",
                "GET /users/42"
            ]
        );
        let list = &s.requests[0];
        assert_eq!(list.path.as_deref(), Some("/users?page=2"));
        let h = list.headers.as_ref().unwrap();
        assert_eq!(h["Accept"], "application/json");
        assert_eq!(
            h["Authorization"], "Bearer t0k3n",
            "inherited from the collection"
        );
        assert!(!h.contains_key("X-Off"));
        let create = &s.requests[1];
        assert_eq!(create.body.as_deref(), Some(r#"{"id": 42, "name": "ann"}"#));
        assert_eq!(
            create.headers.as_ref().unwrap()["Content-Type"],
            "application/json"
        );
        let login = &s.requests[2];
        assert_eq!(login.body.as_deref(), Some("remember=yes+please"));
        assert_eq!(
            login.headers.as_ref().unwrap()["Authorization"],
            "Basic YW5uOnMzY3JldA=="
        );
        assert_eq!(
            s.requests[4].path.as_deref(),
            Some("/users/42?session={{sessionId}}")
        );
        assert_eq!(s.sessions[0].name, "Users API");
        assert_eq!(s.sessions[0].steps.len(), 5);
        let left = got.left_out.join("\n");
        // Its test script is carried over as an `after` hook.
        assert_eq!(s.requests[0].after.as_deref(), Some("test_1"));
        let module = got.script.as_deref().unwrap();
        assert!(
            module.contains("pm.response.to.have.status(200);"),
            "{module}"
        );
        assert!(
            left.contains("Writes / Upload: its `formdata` body"),
            "{left}"
        );
        assert!(left.contains("{{sessionId}}"), "{left}");
        headroom_scenario::parse_toml::<RawScenario>(&got.to_toml("users.postman_collection.json"))
            .unwrap();
    }

    #[test]
    fn bad_input_says_where_and_what() {
        let e = import("{\n  \"item\": [\n    {\"name\": 3}\n  ]\n}")
            .err()
            .unwrap();
        assert!(e.contains("line 3"), "{e}");
        let e = import(r#"{"info": {"schema": "https://schema.getpostman.com/json/collection/v1.0.0/collection.json"}}"#)
            .err()
            .unwrap();
        assert!(e.contains("v2.1"), "{e}");
        assert!(import(r#"{"item": []}"#)
            .err()
            .unwrap()
            .contains("no requests"));
    }
}
