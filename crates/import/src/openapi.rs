//! `headroom import openapi spec.yaml|json`: an OpenAPI 3.0/3.1 document →
//! a weighted mix of one request per operation, each with values for its
//! path and required query parameters and its JSON body — the document's
//! examples where it has them, else values made from the schemas — and its
//! lowest 2xx status expected. Weights are all 1: edit them to the traffic
//! you expect.

use super::{request, Imported};
use headroom_scenario::raw::{RawExpect, RawScenario, RawStatus};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// How deep `$ref`s and nested schemas are followed (a schema may refer to
/// itself).
const MAX_DEPTH: usize = 8;

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

pub fn import(text: &str) -> Result<Imported, String> {
    let doc: Value =
        serde_yaml_ng::from_str(text).map_err(|e| format!("not an OpenAPI document: {e}"))?;
    if doc.get("swagger").is_some() {
        return Err(
            "a Swagger 2.0 document: convert it to OpenAPI 3 first (e.g. with swagger2openapi)"
                .into(),
        );
    }
    let version = doc["openapi"].as_str().unwrap_or("");
    if !version.starts_with("3.") {
        return Err(format!(
            "not an OpenAPI 3 document (its `openapi` field is `{version}`)"
        ));
    }
    let mut left_out = Vec::new();
    let (base_url, prefix) = base_url(&doc, &mut left_out);
    let paths = doc["paths"]
        .as_object()
        .filter(|p| !p.is_empty())
        .ok_or("the document has no paths")?;
    let mut taken = BTreeMap::new();
    let mut requests = Vec::new();
    let mut secured = Vec::new();
    for (template, item) in paths {
        let item = resolve(&doc, item, 0);
        let shared = item["parameters"].as_array().cloned().unwrap_or_default();
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let where_ = format!("{} {template}", method.to_ascii_uppercase());
            let mut params = shared.clone();
            params.extend(op["parameters"].as_array().cloned().unwrap_or_default());
            let (path, headers) =
                match fill_parameters(&doc, template, &params, &where_, &mut left_out) {
                    Ok(filled) => filled,
                    Err(why) => {
                        left_out.push(format!("{where_}: {why}"));
                        continue;
                    }
                };
            let mut r = request(
                &mut taken,
                &method.to_ascii_uppercase(),
                &format!("{prefix}{path}"),
            );
            if let Some(id) = op["operationId"].as_str() {
                r.name = id.to_string();
            }
            r.weight = Some(1);
            if !headers.is_empty() {
                r.headers = Some(headers);
            }
            if let Some(body) = op.get("requestBody") {
                match json_body(&doc, body) {
                    Some(Ok(value)) => r.json = Some(value),
                    Some(Err(why)) => left_out.push(format!("{where_}: {why}")),
                    None => {}
                }
            }
            if let Some(status) = lowest_success(&op["responses"]) {
                r.expect = Some(RawExpect {
                    status: Some(RawStatus::One(status)),
                });
            }
            let needs_credentials = |s: &Value| {
                s.as_array().is_some_and(|a| {
                    a.iter()
                        .any(|x| x.as_object().is_some_and(|o| !o.is_empty()))
                })
            };
            if op
                .get("security")
                .or(doc.get("security"))
                .is_some_and(needs_credentials)
            {
                secured.push(where_);
            }
            requests.push(r);
        }
    }
    if requests.is_empty() {
        return Err("the document has no operations headroom can send".into());
    }
    if !secured.is_empty() {
        left_out.push(format!(
            "the security requirements of {}: add the credentials as headers",
            secured.join(", ")
        ));
    }
    Ok(Imported {
        scenario: RawScenario {
            base_url: Some(base_url),
            requests,
            ..RawScenario::default()
        },
        left_out,
        script: None,
    })
}

/// The first server's URL (variables at their defaults) as the base URL,
/// and a path prefix when the server URL has one.
fn base_url(doc: &Value, left_out: &mut Vec<String>) -> (String, String) {
    let server = &doc["servers"][0];
    let mut url = server["url"].as_str().unwrap_or("").to_string();
    if let Some(vars) = server["variables"].as_object() {
        for (name, v) in vars {
            let value = v["default"].as_str().unwrap_or("");
            url = url.replace(&format!("{{{name}}}"), value);
        }
    }
    let fallback = "http://127.0.0.1:8080";
    if url.is_empty() || url.starts_with('/') {
        left_out.push(format!(
            "no absolute server URL in the document: base_url is {fallback} (change it, or pass --base-url)"
        ));
        return (fallback.into(), url.trim_end_matches('/').to_string());
    }
    match super::split_url(&url) {
        Ok((origin, path)) => (origin, path.trim_end_matches('/').to_string()),
        Err(why) => {
            left_out.push(format!("server URL: {why}; base_url is {fallback}"));
            (fallback.into(), String::new())
        }
    }
}

/// `$ref` to the document's own components, followed.
fn resolve<'a>(doc: &'a Value, v: &'a Value, depth: usize) -> &'a Value {
    match v["$ref"].as_str() {
        Some(r) if depth < MAX_DEPTH => {
            let target = r.strip_prefix("#/").map(|p| {
                p.split('/').fold(doc, |node, key| {
                    &node[key.replace("~1", "/").replace("~0", "~")]
                })
            });
            match target {
                Some(t) if !t.is_null() => resolve(doc, t, depth + 1),
                _ => v,
            }
        }
        _ => v,
    }
}

/// The path with its parameters filled, and header parameters; required
/// query parameters added to the query.
fn fill_parameters(
    doc: &Value,
    template: &str,
    params: &[Value],
    where_: &str,
    left_out: &mut Vec<String>,
) -> Result<(String, BTreeMap<String, String>), String> {
    let mut path = template.to_string();
    let mut query = Vec::new();
    let mut headers = BTreeMap::new();
    for p in params {
        let p = resolve(doc, p, 0);
        let name = p["name"].as_str().unwrap_or("");
        let required = p["required"].as_bool().unwrap_or(false);
        let value = || text_of(&example(doc, p).unwrap_or_else(|| made(doc, &p["schema"], 0)));
        match p["in"].as_str().unwrap_or("") {
            "path" => path = path.replace(&format!("{{{name}}}"), &encode(&value())),
            "query" if required => query.push(format!("{}={}", encode(name), encode(&value()))),
            "header" if required => {
                headers.insert(name.to_string(), value());
            }
            "cookie" if required => left_out.push(format!(
                "{where_}: its cookie parameter `{name}` (a session's cookie jar sends cookies the server set)"
            )),
            _ => {}
        }
    }
    if path.contains('{') {
        return Err(format!("a path parameter of `{template}` is not described"));
    }
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    Ok((path, headers))
}

/// A JSON request body: the example, else one made from the schema.
/// `None` without a body; `Err` for a body that is not JSON.
fn json_body(doc: &Value, body: &Value) -> Option<Result<Value, String>> {
    let body = resolve(doc, body, 0);
    let content = body["content"].as_object()?;
    let json = content
        .iter()
        .find(|(ty, _)| ty.starts_with("application/json") || ty.ends_with("+json"));
    match json {
        Some((_, media)) => Some(Ok(
            example(doc, media).unwrap_or_else(|| made(doc, &media["schema"], 0))
        )),
        None => Some(Err(format!(
            "its `{}` body (only JSON bodies are made from a document)",
            content.keys().next().map_or("", String::as_str)
        ))),
    }
}

/// An example given for a parameter or media type (`example`, the first of
/// `examples`, the schema's `example`).
fn example(doc: &Value, v: &Value) -> Option<Value> {
    if let Some(e) = v.get("example") {
        return Some(e.clone());
    }
    if let Some(first) = v["examples"].as_object().and_then(|m| m.values().next()) {
        return resolve(doc, first, 0).get("value").cloned();
    }
    let schema = resolve(doc, &v["schema"], 0);
    schema.get("example").cloned()
}

/// A value a schema accepts: its example, default or first enum value,
/// else one of its type (objects with every property, arrays of one).
fn made(doc: &Value, schema: &Value, depth: usize) -> Value {
    let schema = resolve(doc, schema, depth);
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    for key in ["example", "default", "const"] {
        if let Some(v) = schema.get(key) {
            return v.clone();
        }
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    if let Some(one) = schema["allOf"].as_array() {
        let mut merged = Map::new();
        for part in one {
            if let Value::Object(m) = made(doc, part, depth + 1) {
                merged.extend(m);
            }
        }
        return Value::Object(merged);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(first) = schema[key].as_array().and_then(|a| a.first()) {
            return made(doc, first, depth + 1);
        }
    }
    // 3.1 allows a list of types: the first that is not null.
    let ty = match &schema["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or(""),
        _ if schema.get("properties").is_some() => "object",
        _ => "",
    };
    match ty {
        "integer" => json!(schema["minimum"].as_i64().unwrap_or(1).max(1)),
        "number" => json!(schema["minimum"].as_f64().unwrap_or(1.0).max(1.0)),
        "boolean" => json!(true),
        "array" => json!([made(doc, &schema["items"], depth + 1)]),
        "object" => Value::Object(
            schema["properties"]
                .as_object()
                .map(|props| {
                    props
                        .iter()
                        .map(|(k, v)| (k.clone(), made(doc, v, depth + 1)))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        _ => match schema["format"].as_str() {
            Some("date-time") => json!("2026-01-01T00:00:00Z"),
            Some("date") => json!("2026-01-01"),
            Some("email") => json!("user@example.test"),
            Some("uuid") => json!("00000000-0000-4000-8000-000000000001"),
            _ => json!("example"),
        },
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The lowest 2xx status the operation documents.
fn lowest_success(responses: &Value) -> Option<u16> {
    responses
        .as_object()?
        .keys()
        .filter_map(|k| k.parse::<u16>().ok())
        .filter(|s| (200..300).contains(s))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A piece of the Swagger Petstore (OpenAPI 3.0), with a `$ref`'d
    /// schema, path, query and header parameters, and a security scheme.
    pub const PETSTORE: &str = r##"
openapi: 3.0.3
info: {title: Petstore, version: 1.0.0}
servers:
  - url: "http://127.0.0.1:{port}/api/v3"
    variables: {port: {default: "8080"}}
paths:
  /pet:
    post:
      operationId: addPet
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Pet"}
      responses: {"200": {description: ok}, "405": {description: invalid}}
  /pet/findByStatus:
    get:
      operationId: findPetsByStatus
      parameters:
        - {name: status, in: query, required: true, schema: {type: string, enum: [available, pending, sold]}}
        - {name: limit, in: query, schema: {type: integer}}
      responses: {"200": {description: ok}}
  /pet/{petId}:
    parameters:
      - {name: petId, in: path, required: true, schema: {type: integer, format: int64}, example: 10}
    get:
      operationId: getPetById
      parameters:
        - {name: X-Request-Id, in: header, required: true, schema: {type: string, format: uuid}}
      responses: {"200": {description: ok}, "404": {description: missing}}
      security: [{api_key: []}]
    delete:
      responses: {"204": {description: deleted}}
  /upload:
    post:
      requestBody:
        content:
          multipart/form-data: {schema: {type: object}}
      responses: {"201": {description: created}}
components:
  schemas:
    Pet:
      type: object
      required: [name]
      properties:
        id: {type: integer, example: 10}
        name: {type: string, example: doggie}
        status: {type: string, enum: [available, pending, sold]}
        tags: {type: array, items: {$ref: "#/components/schemas/Tag"}}
    Tag:
      type: object
      properties: {id: {type: integer}, name: {type: string}}
"##;

    #[test]
    fn one_request_per_operation_with_values_filled() {
        let got = import(PETSTORE).unwrap();
        let s = &got.scenario;
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:8080"));
        let by_name: BTreeMap<&str, &headroom_scenario::raw::RawRequest> =
            s.requests.iter().map(|r| (r.name.as_str(), r)).collect();
        let add = by_name["addPet"];
        assert_eq!(add.path.as_deref(), Some("/api/v3/pet"));
        assert_eq!(
            add.json,
            Some(
                json!({"id": 10, "name": "doggie", "status": "available", "tags": [{"id": 1, "name": "example"}]})
            )
        );
        let find = by_name["findPetsByStatus"];
        assert_eq!(
            find.path.as_deref(),
            Some("/api/v3/pet/findByStatus?status=available")
        );
        let get = by_name["getPetById"];
        assert_eq!(get.path.as_deref(), Some("/api/v3/pet/10"));
        assert!(get.headers.as_ref().unwrap().contains_key("X-Request-Id"));
        assert!(matches!(
            get.expect.as_ref().unwrap().status,
            Some(RawStatus::One(200))
        ));
        let delete = by_name["DELETE /api/v3/pet/10"];
        assert!(matches!(
            delete.expect.as_ref().unwrap().status,
            Some(RawStatus::One(204))
        ));
        assert!(s.requests.iter().all(|r| r.weight == Some(1)));
        let left = got.left_out.join("\n");
        assert!(
            left.contains("POST /upload: its `multipart/form-data` body"),
            "{left}"
        );
        assert!(
            left.contains("security requirements of GET /pet/{petId}:"),
            "{left}"
        );
        headroom_scenario::parse_toml::<RawScenario>(&got.to_toml("petstore.yaml")).unwrap();
    }

    #[test]
    fn bad_input_says_what() {
        assert!(import("swagger: '2.0'\npaths: {}\n")
            .unwrap_err()
            .contains("Swagger 2.0"));
        assert!(import("openapi: 3.0.0\npaths: {}\n")
            .unwrap_err()
            .contains("no paths"));
        let e = import("openapi: 3.0.0\npaths:\n  /x: [\n").unwrap_err();
        assert!(e.contains("line"), "{e}");
    }
}
