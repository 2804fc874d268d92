//! `headroom import k6 script.js`: a k6 script, parsed as JavaScript
//! (oxc), → a scenario. Carried over:
//!
//! - `options`: `vus` + `duration` | `iterations` (k6 shares them among the
//!   users; here each user does its share), `stages` (users ramped),
//!   `thresholds` on `http_req_duration` / `http_req_failed` (with
//!   `{name:…}` tags and `abortOnFail`), and the first of `scenarios` by
//!   its executor (constant-vus, ramping-vus, per-vu-iterations,
//!   shared-iterations, constant-arrival-rate, ramping-arrival-rate);
//! - the default function, in order: `http.get/post/put/patch/del/
//!   request/batch` with their bodies (`JSON.stringify({...})` → a JSON
//!   body, an object → a form) and params (`headers`, `tags.name`,
//!   `timeout`); `check(res, {...})` on `r.status` and
//!   `r.body.includes(…)`; values taken from a response with
//!   `res.json('a.b')` / `res.json().a.b` for later requests; `sleep`;
//!   `group` (its steps in place); `for` loops of a constant count;
//! - data: `SharedArray` / `JSON.parse(open(…))` / `papaparse.parse(open(…))`
//!   → a feeder, and a row of it picked by `__VU` (kept per user),
//!   `__ITER` (each user walks the rows) or `Math.random()`, its fields
//!   `{{field}}`;
//! - constants, template literals and `__ENV.NAME || 'default'`
//!   (→ `${NAME:-default}`).
//!
//! Anything else — branches, computed loops, other modules, custom
//! metrics — is listed with its line, never dropped silently.
//!
//! Over 1,000 lines: one importer reads one language's DSL, and its
//! walkers share one private model of the script (what is bound to what,
//! which calls were read); split, each file would reach into the others'
//! state. A third of it is tests.

use super::{
    form_encode, main_origin, managed_header, number_text, request, sort_by_line, split_url,
    Imported,
};
use headroom_engine::plan::feeder::{FeederOrder, FeederScope};
use headroom_scenario::raw::{
    Model, RawCheck, RawExtract, RawFeeder, RawLoad, RawRequest, RawScenario, RawSession, RawStage,
    RawStatus, RawStep, RawThreshold, RawThresholdTable,
};
use oxc_allocator::Allocator;
use oxc_ast::ast::*;
use oxc_parser::Parser;
use oxc_span::{GetSpan, SourceType, Span};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

pub fn import(text: &str) -> Result<Imported, String> {
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, text, SourceType::mjs()).parse();
    if let Some(e) = parsed.diagnostics.errors().next() {
        let at = e.labels.first().map_or(0, |l| l.offset());
        return Err(format!("line {}: {}", line_of(text, at), e.message));
    }
    let mut k6 = K6 {
        text,
        ..K6::default()
    };
    let mut default_fn = None;
    for statement in &parsed.program.body {
        match statement {
            Statement::ImportDeclaration(i) => k6.import_of(i),
            Statement::VariableDeclaration(v) => k6.top_level(v),
            Statement::ExportDeclaration(e) => match &e.declaration {
                Declaration::VariableDeclaration(v) => k6.top_level(v),
                Declaration::FunctionDeclaration(f) => k6.leave(
                    f.span,
                    &format!(
                        "function `{}` (only the default function is run)",
                        f.id.as_ref().map_or("?", |i| i.name.as_str())
                    ),
                ),
                _ => k6.leave(e.span, "export"),
            },
            Statement::ExportDefaultDeclaration(d) => match &d.declaration {
                ExportDefaultDeclarationKind::FunctionDeclaration(f) => default_fn = Some(&**f),
                _ => k6.leave(d.span, "default export that is not a function"),
            },
            Statement::FunctionDeclaration(f) => {
                let name = f.id.as_ref().map_or("?", |i| i.name.as_str());
                if name != "setup" && name != "teardown" {
                    k6.functions.insert(name.to_string(), &**f);
                } else {
                    k6.leave(f.span, &format!("`{name}()` (runs once in k6; not here)"));
                }
            }
            Statement::EmptyStatement(_) => {}
            other => k6.leave(other.span(), "top-level statement"),
        }
    }
    let Some(f) = default_fn else {
        return Err("no `export default function` in the script: nothing to run".into());
    };
    let steps = match &f.body {
        Some(body) => k6.block(&body.statements),
        None => Vec::new(),
    };
    k6.finish(steps)
}

/// 1-based line of a byte offset.
fn line_of(text: &str, at: u32) -> usize {
    text[..(at as usize).min(text.len())].matches('\n').count() + 1
}

/// What a name at the top of the script stands for.
#[derive(Clone, Debug)]
enum Binding {
    /// A constant text (a string, a number, a template of constants).
    Text(String),
    /// A data file: a feeder's name.
    Data(String),
    /// The `options` object, read at the end.
    Options,
}

#[derive(Default)]
struct K6<'s, 'a> {
    text: &'s str,
    left_out: Vec<String>,
    /// Local names of k6's modules' exports: "http", "check", "sleep", …
    modules: HashMap<String, &'static str>,
    bindings: HashMap<String, Binding>,
    functions: HashMap<String, &'a Function<'a>>,
    options: Option<&'a ObjectExpression<'a>>,
    feeders: Vec<RawFeeder>,
    /// A row of a feeder bound to a name in the default function.
    rows: HashMap<String, String>,
    /// A response bound to a name: the request's index.
    responses: HashMap<String, usize>,
    /// Values taken from responses: `{{name}}` from then on.
    values: Vec<String>,
    requests: Vec<RawRequest>,
    urls: Vec<String>,
    taken_names: BTreeMap<String, u32>,
    /// How many `for` loops the statement being read is in.
    loops: usize,
}

impl<'s, 'a> K6<'s, 'a> {
    fn leave(&mut self, span: Span, what: &str) {
        let line = line_of(self.text, span.start);
        let source: String = self.text[span.start as usize..span.end as usize]
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect();
        self.left_out
            .push(format!("line {line}: {what}: `{}`", source.trim()));
    }

    fn import_of(&mut self, i: &ImportDeclaration) {
        let module = i.source.value.as_str();
        for s in i.specifiers.iter().flatten() {
            let (local, imported) = match s {
                ImportDeclarationSpecifier::ImportDefaultSpecifier(d) => {
                    (d.local.name.as_str(), "default")
                }
                ImportDeclarationSpecifier::ImportNamespaceSpecifier(n) => {
                    (n.local.name.as_str(), "default")
                }
                ImportDeclarationSpecifier::ImportSpecifier(s) => {
                    (s.local.name.as_str(), s.imported.name().as_str())
                }
            };
            let known: Option<&'static str> = match (module, imported) {
                ("k6/http", "default") => Some("http"),
                ("k6", "check") => Some("check"),
                ("k6", "sleep") => Some("sleep"),
                ("k6", "group") => Some("group"),
                ("k6/data", "SharedArray") => Some("SharedArray"),
                (m, "default") if m.contains("papaparse") => Some("papaparse"),
                _ => None,
            };
            match known {
                Some(k) => {
                    self.modules.insert(local.to_string(), k);
                }
                None => {
                    let what = format!("import of `{imported}` from `{module}`");
                    self.leave(i.span, &what);
                }
            }
        }
    }

    fn is(&self, name: &str, module: &str) -> bool {
        self.modules.get(name).is_some_and(|m| *m == module)
    }

    /// `const X = …` at the top: a constant, a data file, the options.
    fn top_level(&mut self, v: &'a VariableDeclaration<'a>) {
        for d in &v.declarations {
            let BindingPattern::BindingIdentifier(id) = &d.id else {
                self.leave(d.span, "destructuring");
                continue;
            };
            let name = id.name.to_string();
            let Some(init) = &d.init else { continue };
            if name == "options" {
                if let Expression::ObjectExpression(o) = init.get_inner_expression() {
                    self.options = Some(o);
                    self.bindings.insert(name, Binding::Options);
                    continue;
                }
            }
            if let Some(file) = self.data_file(init) {
                let feeder = name.clone();
                self.feeders.push(RawFeeder {
                    name: feeder.clone(),
                    file,
                    order: None,
                    scope: None,
                });
                self.bindings.insert(name, Binding::Data(feeder));
            } else if let Some(text) = self.template(init) {
                self.bindings.insert(name, Binding::Text(text));
            } else {
                self.leave(
                    d.span,
                    &format!("`{name}` (not a constant headroom can use)"),
                );
            }
        }
    }

    /// The file of `new SharedArray(n, () => JSON.parse(open(f)))`,
    /// `papaparse.parse(open(f), {header: true}).data` or
    /// `JSON.parse(open(f))`.
    fn data_file(&self, e: &Expression) -> Option<String> {
        match e.get_inner_expression() {
            Expression::NewExpression(n) => {
                let Expression::Identifier(callee) = &n.callee else {
                    return None;
                };
                if !self.is(&callee.name, "SharedArray") {
                    return None;
                }
                let f = n.arguments.get(1)?.as_expression()?;
                self.data_file(returned(f)?)
            }
            Expression::StaticMemberExpression(m) if m.property.name == "data" => {
                self.data_file(&m.object)
            }
            Expression::CallExpression(c) => {
                let callee = &c.callee;
                let parse = callee.is_specific_member_access("JSON", "parse")
                    || matches!(callee, Expression::StaticMemberExpression(m)
                        if m.property.name == "parse"
                        && matches!(&m.object, Expression::Identifier(p) if self.is(&p.name, "papaparse")));
                if !parse {
                    return None;
                }
                let Expression::CallExpression(open) =
                    c.arguments.first()?.as_expression()?.get_inner_expression()
                else {
                    return None;
                };
                let Expression::Identifier(o) = &open.callee else {
                    return None;
                };
                if o.name != "open" {
                    return None;
                }
                match open.arguments.first()?.as_expression()? {
                    Expression::StringLiteral(s) => Some(s.value.to_string()),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// An expression as a scenario template, when it is one: constants
    /// filled in, `{{value}}` for a row's field or a value taken from a
    /// response, `${NAME}` for an environment variable.
    fn template(&self, e: &Expression) -> Option<String> {
        match e.get_inner_expression() {
            Expression::StringLiteral(s) => Some(s.value.to_string()),
            Expression::NumericLiteral(n) => Some(number_text(n.value)),
            Expression::BooleanLiteral(b) => Some(b.value.to_string()),
            Expression::TemplateLiteral(t) => {
                let mut out = String::new();
                for (i, q) in t.quasis.iter().enumerate() {
                    out.push_str(
                        q.value
                            .cooked
                            .as_ref()
                            .map_or(q.value.raw.as_str(), |c| c.as_str()),
                    );
                    if let Some(e) = t.expressions.get(i) {
                        out.push_str(&self.template(e)?);
                    }
                }
                Some(out)
            }
            Expression::Identifier(i) => match self.bindings.get(i.name.as_str()) {
                Some(Binding::Text(t)) => Some(t.clone()),
                _ if self.values.iter().any(|v| v == i.name.as_str()) => {
                    Some(format!("{{{{{}}}}}", i.name))
                }
                _ => None,
            },
            Expression::StaticMemberExpression(m) => match &m.object {
                Expression::Identifier(o) if o.name == "__ENV" => {
                    Some(format!("${{{}}}", m.property.name))
                }
                Expression::Identifier(o) if self.rows.contains_key(o.name.as_str()) => {
                    Some(format!("{{{{{}}}}}", m.property.name))
                }
                _ => None,
            },
            Expression::BinaryExpression(b) if b.operator == BinaryOperator::Addition => {
                Some(self.template(&b.left)? + &self.template(&b.right)?)
            }
            // `__ENV.X || 'default'`
            Expression::LogicalExpression(l) if l.operator == LogicalOperator::Or => {
                let Expression::StaticMemberExpression(m) = l.left.get_inner_expression() else {
                    return None;
                };
                let Expression::Identifier(o) = &m.object else {
                    return None;
                };
                if o.name != "__ENV" {
                    return None;
                }
                let default = self.template(&l.right)?;
                Some(format!("${{{}:-{default}}}", m.property.name))
            }
            _ => None,
        }
    }

    /// A JSON value from an object or array literal of templates.
    fn json(&self, e: &Expression) -> Option<Value> {
        match e.get_inner_expression() {
            Expression::ObjectExpression(o) => {
                let mut map = serde_json::Map::new();
                for p in &o.properties {
                    let ObjectPropertyKind::ObjectProperty(p) = p else {
                        return None;
                    };
                    let key = p.key.static_name()?.to_string();
                    map.insert(key, self.json(&p.value)?);
                }
                Some(Value::Object(map))
            }
            Expression::ArrayExpression(a) => a
                .elements
                .iter()
                .map(|el| self.json(el.as_expression()?))
                .collect::<Option<Vec<_>>>()
                .map(Value::Array),
            Expression::NumericLiteral(n) => Some(json!(n.value)),
            Expression::BooleanLiteral(b) => Some(json!(b.value)),
            Expression::NullLiteral(_) => Some(Value::Null),
            other => self.template(other).map(Value::String),
        }
    }

    /// The statements of a function body or block, as steps.
    fn block(&mut self, statements: &'a [Statement<'a>]) -> Vec<RawStep> {
        let mut steps = Vec::new();
        for s in statements {
            self.statement(s, &mut steps);
        }
        steps
    }

    fn statement(&mut self, s: &'a Statement<'a>, steps: &mut Vec<RawStep>) {
        match s {
            Statement::ExpressionStatement(e) => self.expression(&e.expression, None, steps),
            Statement::VariableDeclaration(v) => {
                for d in &v.declarations {
                    let BindingPattern::BindingIdentifier(id) = &d.id else {
                        self.leave(d.span, "destructuring");
                        continue;
                    };
                    if let Some(init) = &d.init {
                        self.expression(init, Some(id.name.as_str()), steps);
                    }
                }
            }
            Statement::BlockStatement(b) => steps.extend(self.block(&b.body)),
            Statement::ForStatement(f) => match constant_count(f) {
                Some(n) => {
                    self.loops += 1;
                    let inner = match &f.body {
                        Statement::BlockStatement(b) => self.block(&b.body),
                        other => {
                            let mut v = Vec::new();
                            self.statement(other, &mut v);
                            v
                        }
                    };
                    self.loops -= 1;
                    steps.push(RawStep {
                        repeat: Some(n),
                        steps: Some(inner),
                        ..RawStep::default()
                    });
                }
                None => self.leave(
                    f.span,
                    "`for` loop whose count is not a constant (its body is not carried over)",
                ),
            },
            Statement::EmptyStatement(_) => {}
            Statement::ReturnStatement(r) => self.leave(r.span, "`return`"),
            Statement::IfStatement(i) => self.leave(
                i.span,
                "`if` (headroom runs every step; a weighted `choice` may stand in for it)",
            ),
            other => self.leave(other.span(), "statement"),
        }
    }

    /// An expression of the default function; `bound` is the name it is
    /// assigned to (`const res = http.get(…)`).
    /// A row of a feeder bound to `name`: `data[__VU % data.length]`,
    /// `data[Math.floor(Math.random() * data.length)]` (its order read from
    /// the index). Whether `inner` was one.
    fn feeder_row(&mut self, inner: &Expression<'a>, name: &str, steps: &mut Vec<RawStep>) -> bool {
        let Expression::ComputedMemberExpression(m) = inner else {
            return false;
        };
        let Expression::Identifier(data) = &m.object else {
            return false;
        };
        let Some(Binding::Data(feeder)) = self.bindings.get(data.name.as_str()).cloned() else {
            return false;
        };
        let (order, scope) = row_order(&m.expression);
        if let Some(f) = self.feeders.iter_mut().find(|f| f.name == feeder) {
            f.order = Some(order);
            f.scope = Some(scope);
        }
        self.rows.insert(name.to_string(), feeder.clone());
        // Every iteration takes a row of every feeder; inside a loop, each
        // pass takes another.
        if self.loops > 0 {
            steps.push(RawStep {
                feed: Some(feeder),
                ..RawStep::default()
            });
        }
        true
    }

    fn expression(&mut self, e: &'a Expression<'a>, bound: Option<&str>, steps: &mut Vec<RawStep>) {
        let inner = e.get_inner_expression();
        if let Some(name) = bound {
            if self.feeder_row(inner, name, steps) {
                return;
            }
        }
        let Expression::CallExpression(call) = inner else {
            if let Some(name) = bound {
                if !self.take_value(e, name) {
                    self.leave(
                        e.span(),
                        &format!("`{name}` (not a value headroom can take)"),
                    );
                }
            } else {
                self.leave(e.span(), "expression");
            }
            return;
        };
        match &call.callee {
            Expression::StaticMemberExpression(m) if matches!(&m.object, Expression::Identifier(h) if self.is(&h.name, "http")) =>
            {
                let method = m.property.name.as_str();
                if method == "batch" {
                    self.batch(call, steps);
                    return;
                }
                if let Some(index) = self.http_call(method, call) {
                    steps.push(RawStep {
                        request: Some(self.requests[index].name.clone()),
                        ..RawStep::default()
                    });
                    if let Some(name) = bound {
                        self.responses.insert(name.to_string(), index);
                    }
                }
            }
            Expression::Identifier(f) if self.is(&f.name, "check") => self.check(call),
            Expression::Identifier(f) if self.is(&f.name, "sleep") => {
                match call
                    .arguments
                    .first()
                    .and_then(|a| a.as_expression())
                    .map(sleep_of)
                {
                    Some(Some(think)) => steps.push(RawStep {
                        think: Some(think),
                        ..RawStep::default()
                    }),
                    _ => self.leave(call.span, "`sleep` of a time that is not a constant"),
                }
            }
            Expression::Identifier(f) if self.is(&f.name, "group") => {
                let body = call
                    .arguments
                    .get(1)
                    .and_then(|a| a.as_expression())
                    .and_then(function_body);
                match body {
                    Some(statements) => steps.extend(self.block(statements)),
                    None => self.leave(call.span, "`group` without a function"),
                }
            }
            Expression::Identifier(f) if self.functions.contains_key(f.name.as_str()) => {
                let function = self.functions[f.name.as_str()];
                if call.arguments.is_empty() {
                    if let Some(body) = &function.body {
                        steps.extend(self.block(&body.statements));
                    }
                } else {
                    self.leave(call.span, "call of a function with arguments");
                }
            }
            _ => {
                if let Some(name) = bound {
                    if self.take_value(e, name) {
                        return;
                    }
                }
                self.leave(call.span, "call");
            }
        }
    }

    /// `const token = res.json('a.b')`, `res.json().a.b`: the request of
    /// `res` takes the value out of its response.
    fn take_value(&mut self, e: &Expression, name: &str) -> bool {
        let Some((response, path)) = json_path_of(e) else {
            return false;
        };
        let Some(&index) = self.responses.get(response.as_str()) else {
            return false;
        };
        self.requests[index].extracts.push(RawExtract {
            name: name.to_string(),
            json_path: Some(path),
            ..RawExtract::default()
        });
        self.values.push(name.to_string());
        true
    }

    /// `http.get(url, params)`, `http.post(url, body, params)`,
    /// `http.request(method, url, body, params)`: the request's index.
    fn http_call(&mut self, method: &str, call: &'a CallExpression<'a>) -> Option<usize> {
        let args: Vec<&Expression> = call
            .arguments
            .iter()
            .filter_map(|a| a.as_expression())
            .collect();
        let (method, rest) = match method {
            "get" | "head" | "options" => (method.to_ascii_uppercase(), &args[..]),
            "post" | "put" | "patch" | "del" => (
                if method == "del" {
                    "DELETE".into()
                } else {
                    method.to_ascii_uppercase()
                },
                &args[..],
            ),
            "request" => {
                let m = args.first().and_then(|m| self.template(m));
                match m {
                    Some(m) => (m.to_ascii_uppercase(), &args[1..]),
                    None => {
                        self.leave(call.span, "`http.request` whose method is not a constant");
                        return None;
                    }
                }
            }
            other => {
                self.leave(call.span, &format!("`http.{other}`"));
                return None;
            }
        };
        let with_body = !matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS");
        let body = if with_body {
            rest.get(1).copied()
        } else {
            None
        };
        let params = if with_body { rest.get(2) } else { rest.get(1) }.copied();
        let Some(url) = rest.first().and_then(|u| self.template(u)) else {
            self.leave(call.span, "request whose URL is not a constant or template");
            return None;
        };
        self.request(call.span, &method, &url, body, params)
    }

    fn request(
        &mut self,
        span: Span,
        method: &str,
        url: &str,
        body: Option<&Expression>,
        params: Option<&Expression>,
    ) -> Option<usize> {
        // A full URL, or one that starts with an environment variable
        // (`${BASE_URL}/login`): its base is the scenario's.
        let path = if url.starts_with("http://") || url.starts_with("https://") {
            // The origin is checked as a URL; the path is kept as written
            // (a URL parser would escape its `{{templates}}`).
            let after_scheme = url.find("://").map_or(0, |i| i + 3);
            let cut = url[after_scheme..]
                .find('/')
                .map_or(url.len(), |i| after_scheme + i);
            if let Err(e) = split_url(&url[..cut]) {
                self.leave(span, &e);
                return None;
            }
            self.urls.push(url.to_string());
            match &url[cut..] {
                "" => "/".to_string(),
                path => path.to_string(),
            }
        } else if url.starts_with("${") {
            let end = url.find('}').map_or(url.len(), |e| e + 1);
            self.urls.push(url[..end].to_string());
            let path = &url[end..];
            if path.is_empty() {
                "/".to_string()
            } else {
                path.to_string()
            }
        } else {
            url.to_string()
        };
        let mut r = request(&mut self.taken_names, method, &path);
        if let Some(body) = body {
            match body.get_inner_expression() {
                Expression::NullLiteral(_) => {}
                Expression::CallExpression(c)
                    if c.callee.is_specific_member_access("JSON", "stringify") =>
                {
                    match c
                        .arguments
                        .first()
                        .and_then(|a| a.as_expression())
                        .and_then(|o| self.json(o))
                    {
                        Some(v) => r.json = Some(v),
                        None => self.leave(c.span, "JSON body with values headroom cannot fill in"),
                    }
                }
                Expression::ObjectExpression(_) => match self.json(body) {
                    // k6 sends an object as a form.
                    Some(Value::Object(form)) => {
                        let pairs: Vec<String> = form
                            .iter()
                            .map(|(k, v)| {
                                let v = v.as_str().map_or(v.to_string(), str::to_string);
                                format!("{}={}", form_encode(k), form_encode(&v))
                            })
                            .collect();
                        r.body = Some(pairs.join("&"));
                        r.headers.get_or_insert_with(BTreeMap::new).insert(
                            "Content-Type".into(),
                            "application/x-www-form-urlencoded".into(),
                        );
                    }
                    _ => self.leave(body.span(), "form body with values headroom cannot fill in"),
                },
                other => match self.template(other) {
                    Some(text) => r.body = Some(text),
                    None => self.leave(
                        other.span(),
                        "body that is not a constant, template or JSON.stringify",
                    ),
                },
            }
        }
        if let Some(params) = params {
            self.params(params, &mut r);
        }
        self.requests.push(r);
        Some(self.requests.len() - 1)
    }

    /// `{ headers: {...}, tags: { name }, timeout }`.
    fn params(&mut self, params: &Expression, r: &mut RawRequest) {
        let Expression::ObjectExpression(o) = params.get_inner_expression() else {
            self.leave(
                params.span(),
                "request params that are not an object literal",
            );
            return;
        };
        for p in &o.properties {
            let ObjectPropertyKind::ObjectProperty(p) = p else {
                self.leave(o.span, "`...` in request params");
                continue;
            };
            let key = p
                .key
                .static_name()
                .map(|k| k.to_string())
                .unwrap_or_default();
            match key.as_str() {
                "headers" => match self.json(&p.value) {
                    Some(Value::Object(h)) => {
                        for (k, v) in h {
                            if managed_header(&k) {
                                continue;
                            }
                            let v = v.as_str().map_or(v.to_string(), str::to_string);
                            r.headers.get_or_insert_with(BTreeMap::new).insert(k, v);
                        }
                    }
                    _ => self.leave(p.span, "headers headroom cannot fill in"),
                },
                "tags" => {
                    let name = match self.json(&p.value) {
                        Some(Value::Object(t)) => {
                            t.get("name").and_then(|n| n.as_str()).map(str::to_string)
                        }
                        _ => None,
                    };
                    match name {
                        Some(n) => {
                            let unique = self.taken_names.entry(n.clone()).or_insert(0);
                            *unique += 1;
                            r.name = if *unique == 1 {
                                n
                            } else {
                                format!("{n} #{unique}")
                            };
                        }
                        None => self.leave(p.span, "tags other than `name`"),
                    }
                }
                "timeout" => match self.template(&p.value) {
                    Some(t) => r.timeout = Some(duration_of_k6(&t)),
                    None => self.leave(p.span, "timeout that is not a constant"),
                },
                other => self.leave(p.span, &format!("request param `{other}`")),
            }
        }
    }

    /// `http.batch([...])`: the requests in order (k6 sends them at once).
    fn batch(&mut self, call: &'a CallExpression<'a>, steps: &mut Vec<RawStep>) {
        let Some(Expression::ArrayExpression(list)) = call
            .arguments
            .first()
            .and_then(|a| a.as_expression())
            .map(|e| e.get_inner_expression())
        else {
            self.leave(call.span, "`http.batch` of something other than a list");
            return;
        };
        self.leave(
            call.span,
            "`http.batch` (its requests are sent one after the other, not at once)",
        );
        for el in &list.elements {
            let Some(e) = el.as_expression() else {
                continue;
            };
            let index = match e.get_inner_expression() {
                Expression::ArrayExpression(a) => {
                    let parts: Vec<&Expression> = a
                        .elements
                        .iter()
                        .filter_map(|x| x.as_expression())
                        .collect();
                    let method = parts.first().and_then(|m| self.template(m));
                    let url = parts.get(1).and_then(|u| self.template(u));
                    match (method, url) {
                        (Some(m), Some(u)) => self.request(
                            a.span,
                            &m.to_ascii_uppercase(),
                            &u,
                            parts.get(2).copied(),
                            parts.get(3).copied(),
                        ),
                        _ => {
                            self.leave(a.span, "batch entry headroom cannot read");
                            None
                        }
                    }
                }
                other => match self.template(other) {
                    Some(u) => self.request(other.span(), "GET", &u, None, None),
                    None => {
                        self.leave(other.span(), "batch entry headroom cannot read");
                        None
                    }
                },
            };
            if let Some(i) = index {
                steps.push(RawStep {
                    request: Some(self.requests[i].name.clone()),
                    ..RawStep::default()
                });
            }
        }
    }

    /// `check(res, { 'name': (r) => r.status === 200, … })`.
    fn check(&mut self, call: &CallExpression) {
        let args: Vec<&Expression> = call
            .arguments
            .iter()
            .filter_map(|a| a.as_expression())
            .collect();
        let (Some(Expression::Identifier(res)), Some(Expression::ObjectExpression(checks))) = (
            args.first().map(|e| e.get_inner_expression()),
            args.get(1).map(|e| e.get_inner_expression()),
        ) else {
            self.leave(
                call.span,
                "`check` of something other than a response and an object",
            );
            return;
        };
        let Some(&index) = self.responses.get(res.name.as_str()) else {
            self.leave(call.span, "`check` of a value that is not a response");
            return;
        };
        for p in &checks.properties {
            let ObjectPropertyKind::ObjectProperty(p) = p else {
                continue;
            };
            let name = p.key.static_name().map(|k| k.to_string());
            let predicate = match &p.value {
                Expression::ArrowFunctionExpression(f) => f.get_expression().or_else(|| {
                    // `(r) => { return … }`
                    match f.get_function_body()?.statements.first() {
                        Some(Statement::ReturnStatement(r)) => r.argument.as_ref(),
                        _ => None,
                    }
                }),
                _ => None,
            };
            match predicate.and_then(check_of) {
                Some(mut c) => {
                    c.name = name;
                    self.requests[index].checks.push(c);
                }
                None => self.leave(p.span, "check headroom cannot express (it has status, body_contains, body_regex, json_path checks)"),
            }
        }
    }

    /// The scenario: the options' load and thresholds, one session.
    fn finish(mut self, steps: Vec<RawStep>) -> Result<Imported, String> {
        let base_url = main_origin(
            self.urls
                .iter()
                .map(String::as_str)
                .filter(|u| u.starts_with("http")),
        )
        .or_else(|| self.urls.iter().find(|u| u.starts_with("${")).cloned());
        let mut load = RawLoad {
            model: Some(Model::Closed),
            vus: Some(1),
            iterations: Some(1),
            ..RawLoad::default()
        };
        let mut thresholds = BTreeMap::new();
        if let Some(options) = self.options {
            self.options_of(options, &mut load, &mut thresholds);
        }
        let scenario = RawScenario {
            base_url,
            load: Some(load),
            feeders: std::mem::take(&mut self.feeders),
            requests: std::mem::take(&mut self.requests),
            sessions: vec![RawSession {
                name: "default".into(),
                weight: None,
                steps,
            }],
            thresholds: (!thresholds.is_empty()).then_some(thresholds),
            ..RawScenario::default()
        };
        sort_by_line(&mut self.left_out);
        Ok(Imported {
            scenario,
            left_out: self.left_out,
            script: None,
        })
    }

    fn options_of(
        &mut self,
        options: &ObjectExpression,
        load: &mut RawLoad,
        thresholds: &mut BTreeMap<String, RawThreshold>,
    ) {
        let mut vus = None;
        let mut fields: Vec<(String, &Expression, Span)> = Vec::new();
        for p in &options.properties {
            let ObjectPropertyKind::ObjectProperty(p) = p else {
                continue;
            };
            let key = p
                .key
                .static_name()
                .map(|k| k.to_string())
                .unwrap_or_default();
            fields.push((key, &p.value, p.span));
        }
        let mut shape = Load::default();
        for (key, value, span) in &fields {
            match key.as_str() {
                "vus" => vus = self.number(value),
                "duration" => shape.duration = self.template(value).map(|d| duration_of_k6(&d)),
                "iterations" => shape.shared_iterations = self.number(value),
                "stages" => shape.stages = self.stages(value),
                "thresholds" => self.thresholds(value, thresholds),
                "scenarios" => self.scenarios(value, load),
                other => self.leave(*span, &format!("option `{other}`")),
            }
        }
        // With `scenarios`, k6 takes the load from them alone.
        if fields.iter().any(|(k, _, _)| k == "scenarios") {
            return;
        }
        shape.vus = vus;
        shape.apply(load, |what| self.left_out.push(what));
    }

    fn number(&self, e: &Expression) -> Option<f64> {
        match e.get_inner_expression() {
            Expression::NumericLiteral(n) => Some(n.value),
            other => self.template(other)?.parse().ok(),
        }
    }

    /// `[{ duration: '30s', target: 20 }, …]`.
    fn stages(&mut self, e: &Expression) -> Option<Vec<(String, f64)>> {
        let Expression::ArrayExpression(a) = e.get_inner_expression() else {
            return None;
        };
        let mut out = Vec::new();
        for el in &a.elements {
            let v = self.json(el.as_expression()?)?;
            let d = v.get("duration")?.as_str()?;
            let target = v.get("target")?.as_f64()?;
            out.push((duration_of_k6(d), target));
        }
        Some(out)
    }

    fn thresholds(&mut self, e: &Expression, out: &mut BTreeMap<String, RawThreshold>) {
        let Expression::ObjectExpression(o) = e.get_inner_expression() else {
            return;
        };
        for p in &o.properties {
            let ObjectPropertyKind::ObjectProperty(p) = p else {
                continue;
            };
            let metric = p
                .key
                .static_name()
                .map(|k| k.to_string())
                .unwrap_or_default();
            let Some(Value::Array(rules)) = self.json(&p.value) else {
                self.leave(p.span, "threshold headroom cannot read");
                continue;
            };
            for rule in rules {
                let (text, abort) = match &rule {
                    Value::String(s) => (s.clone(), false),
                    Value::Object(o) => (
                        o.get("threshold")
                            .and_then(|t| t.as_str())
                            .unwrap_or("")
                            .to_string(),
                        o.get("abortOnFail")
                            .and_then(|a| a.as_bool())
                            .unwrap_or(false),
                    ),
                    _ => continue,
                };
                match threshold_of(&metric, &text) {
                    Some((key, bound)) => {
                        let t = if abort {
                            RawThreshold::Table(RawThresholdTable {
                                bound,
                                abort: Some(true),
                                ..RawThresholdTable::default()
                            })
                        } else {
                            RawThreshold::Bound(bound)
                        };
                        out.insert(key, t);
                    }
                    None => self.leave(p.span, &format!("threshold `{metric}: {text}`")),
                }
            }
        }
    }

    /// The first of `scenarios`, by its executor.
    /// `options.scenarios`: the first, by its executor, as the load.
    fn scenarios(&mut self, e: &Expression, load: &mut RawLoad) {
        let Expression::ObjectExpression(o) = e.get_inner_expression() else {
            return;
        };
        for (n, p) in o.properties.iter().enumerate() {
            let ObjectPropertyKind::ObjectProperty(p) = p else {
                continue;
            };
            let name = p
                .key
                .static_name()
                .map(|k| k.to_string())
                .unwrap_or_default();
            if n > 0 {
                self.leave(p.span, &format!("scenario `{name}` (only the first is carried over; import it into a file of its own)"));
                continue;
            }
            let Some(Value::Object(s)) = self.json(&p.value) else {
                self.leave(p.span, "scenario headroom cannot read");
                continue;
            };
            let text = |k: &str| s.get(k).and_then(|v| v.as_str()).map(str::to_string);
            let num = |k: &str| s.get(k).and_then(|v| v.as_f64());
            let per_second = |rate: f64| {
                let unit = text("timeUnit")
                    .map_or(1.0, |u| seconds_of(&duration_of_k6(&u)).unwrap_or(1.0));
                rate / unit
            };
            let mut shape = Load {
                vus: num("vus"),
                duration: text("duration").map(|d| duration_of_k6(&d)),
                ..Load::default()
            };
            for k in s.keys().filter(|k| !SCENARIO_OPTIONS.contains(&k.as_str())) {
                self.leave(p.span, &format!("scenario option `{k}`"));
            }
            if let Some(exec) = text("exec").filter(|e| e != "default") {
                self.leave(
                    p.span,
                    &format!("`exec: '{exec}'` (the default function is imported)"),
                );
            }
            let stages = || scenario_stages(&s);
            match text("executor").as_deref() {
                Some("constant-vus") => {}
                Some("ramping-vus") => {
                    shape.stages = Some(stages());
                    if num("startVUs").is_some_and(|v| v > 0.0) {
                        self.left_out.push(format!(
                            "scenario `{name}`: startVUs (the ramp starts from 0 users here)"
                        ));
                    }
                }
                Some("per-vu-iterations") => {
                    shape.per_user_iterations = num("iterations").or(Some(1.0))
                }
                Some("shared-iterations") => {
                    shape.shared_iterations = num("iterations").or(Some(1.0))
                }
                Some("constant-arrival-rate") => {
                    load.model = Some(Model::Open);
                    load.vus = None;
                    load.iterations = None;
                    load.rate = num("rate").map(per_second);
                    load.duration = shape.duration.clone();
                    self.max_users(&s, &name, load);
                    continue;
                }
                Some("ramping-arrival-rate") => {
                    load.model = Some(Model::Open);
                    load.vus = None;
                    load.iterations = None;
                    let mut from = num("startRate").map_or(0.0, per_second);
                    load.stages = Some(
                        stages()
                            .into_iter()
                            .map(|(d, target)| {
                                let to = per_second(target);
                                let stage = RawStage {
                                    duration: d,
                                    from: Some(from),
                                    to: Some(to),
                                    ..RawStage::default()
                                };
                                from = to;
                                stage
                            })
                            .collect(),
                    );
                    self.max_users(&s, &name, load);
                    continue;
                }
                other => {
                    self.leave(p.span, &format!("executor `{}`", other.unwrap_or("?")));
                    continue;
                }
            }
            shape.apply(load, |what| self.left_out.push(what));
        }
    }

    /// Open model: k6's `maxVUs` bounds the requests in flight.
    fn max_users(&mut self, s: &serde_json::Map<String, Value>, name: &str, load: &mut RawLoad) {
        if let Some(max) = s
            .get("maxVUs")
            .or(s.get("preAllocatedVUs"))
            .and_then(|v| v.as_f64())
        {
            load.max_connections = Some(max as u32);
        } else {
            self.left_out.push(format!(
                "scenario `{name}`: no maxVUs (connections are not capped here)"
            ));
        }
    }
}

/// A closed load as k6's options describe it.
#[derive(Default)]
struct Load {
    vus: Option<f64>,
    duration: Option<String>,
    /// Iterations shared by all users (k6's `iterations`).
    shared_iterations: Option<f64>,
    per_user_iterations: Option<f64>,
    /// (duration, target users)
    stages: Option<Vec<(String, f64)>>,
}

impl Load {
    fn apply(self, load: &mut RawLoad, mut leave: impl FnMut(String)) {
        load.model = Some(Model::Closed);
        let vus = self.vus.unwrap_or(1.0).max(1.0) as u32;
        load.vus = Some(vus);
        load.iterations = None;
        if let Some(stages) = self.stages.filter(|s| !s.is_empty()) {
            load.vus = None;
            load.stages = Some(
                stages
                    .into_iter()
                    .map(|(d, target)| RawStage {
                        duration: d,
                        target: Some(target as u32),
                        ..RawStage::default()
                    })
                    .collect(),
            );
            return;
        }
        if let Some(total) = self.shared_iterations {
            let each = (total / f64::from(vus)).ceil() as u64;
            if each * u64::from(vus) != total as u64 {
                leave(format!(
                    "iterations: {total} shared by {vus} users — each user runs {each} here ({} in all)",
                    each * u64::from(vus)
                ));
            }
            load.iterations = Some(each.max(1));
            if let Some(d) = self.duration {
                leave(format!(
                    "duration `{d}` beside iterations (the iterations bound the run here)"
                ));
            }
        } else if let Some(each) = self.per_user_iterations {
            load.iterations = Some(each as u64);
        } else {
            // k6's default when nothing is given: 1 iteration.
            match self.duration {
                Some(d) => load.duration = Some(d),
                None => load.iterations = Some(1),
            }
        }
    }
}

/// The function's body statements of `() => {...}` / `function () {...}`.
fn function_body<'a>(e: &'a Expression<'a>) -> Option<&'a [Statement<'a>]> {
    match e.get_inner_expression() {
        Expression::ArrowFunctionExpression(f) => Some(&f.get_function_body()?.statements),
        Expression::FunctionExpression(f) => Some(&f.body.as_ref()?.statements),
        _ => None,
    }
}

/// What a function passed as `e` returns (`() => x`, `function () { return x }`).
fn returned<'a>(e: &'a Expression<'a>) -> Option<&'a Expression<'a>> {
    if let Expression::ArrowFunctionExpression(f) = e.get_inner_expression() {
        if let Some(x) = f.get_expression() {
            return Some(x);
        }
    }
    function_body(e)?.iter().find_map(|s| match s {
        Statement::ReturnStatement(r) => r.argument.as_ref(),
        _ => None,
    })
}

/// `for (let i = 0; i < N; i++)`: N.
fn constant_count(f: &ForStatement) -> Option<u32> {
    let Some(Expression::BinaryExpression(test)) =
        f.test.as_ref().map(|t| t.get_inner_expression())
    else {
        return None;
    };
    let Expression::NumericLiteral(n) = test.right.get_inner_expression() else {
        return None;
    };
    let start = match &f.init {
        Some(ForStatementInit::VariableDeclaration(v)) => match v
            .declarations
            .first()?
            .init
            .as_ref()?
            .get_inner_expression()
        {
            Expression::NumericLiteral(s) => s.value,
            _ => return None,
        },
        _ => return None,
    };
    let n = match test.operator {
        BinaryOperator::LessThan => n.value - start,
        BinaryOperator::LessEqualThan => n.value - start + 1.0,
        _ => return None,
    };
    (n >= 0.0 && n.fract() == 0.0).then_some(n as u32)
}

/// How a row is picked: `Math.random()` (a random row), `__ITER % n`
/// (each user walks the rows: its own cursor), `__VU % n` (a row per user,
/// kept), anything else the next row each iteration.
fn row_order(index: &Expression) -> (FeederOrder, FeederScope) {
    let mut text = String::new();
    collect_names(index, &mut text);
    let has = |name: &str| text.split(' ').any(|w| w == name);
    if has("random") {
        (FeederOrder::Random, FeederScope::Shared)
    } else if has("__ITER") {
        (FeederOrder::Circular, FeederScope::PerUser)
    } else if has("__VU") {
        (FeederOrder::Circular, FeederScope::PerUserFixed)
    } else {
        (FeederOrder::Circular, FeederScope::Shared)
    }
}

/// The identifiers and properties in an expression, space-separated.
fn collect_names(e: &Expression, out: &mut String) {
    match e.get_inner_expression() {
        Expression::Identifier(i) => {
            out.push_str(&i.name);
            out.push(' ');
        }
        Expression::StaticMemberExpression(m) => {
            collect_names(&m.object, out);
            out.push_str(&m.property.name);
            out.push(' ');
        }
        Expression::BinaryExpression(b) => {
            collect_names(&b.left, out);
            collect_names(&b.right, out);
        }
        Expression::CallExpression(c) => {
            collect_names(&c.callee, out);
            for a in c.arguments.iter().filter_map(|a| a.as_expression()) {
                collect_names(a, out);
            }
        }
        _ => {}
    }
}

/// `res.json('a.b.0')` or `res.json().a.b[0]`: (the response's name, `$.a.b[0]`).
fn json_path_of(e: &Expression) -> Option<(String, String)> {
    match e.get_inner_expression() {
        Expression::CallExpression(c) => {
            let Expression::StaticMemberExpression(m) = &c.callee else {
                return None;
            };
            let Expression::Identifier(res) = &m.object else {
                return None;
            };
            if m.property.name != "json" {
                return None;
            }
            let mut path = "$".to_string();
            if let Some(Expression::StringLiteral(s)) =
                c.arguments.first().and_then(|a| a.as_expression())
            {
                // k6's gjson paths: `a.b.0`.
                for part in s.value.split('.') {
                    if part.chars().all(|c| c.is_ascii_digit()) && !part.is_empty() {
                        path.push_str(&format!("[{part}]"));
                    } else {
                        path.push('.');
                        path.push_str(part);
                    }
                }
            } else if !c.arguments.is_empty() {
                return None;
            }
            Some((res.name.to_string(), path))
        }
        Expression::StaticMemberExpression(m) => {
            let (res, path) = json_path_of(&m.object)?;
            Some((res, format!("{path}.{}", m.property.name)))
        }
        Expression::ComputedMemberExpression(m) => {
            let (res, path) = json_path_of(&m.object)?;
            match m.expression.get_inner_expression() {
                Expression::NumericLiteral(n) => Some((res, format!("{path}[{}]", n.value))),
                Expression::StringLiteral(s) => Some((res, format!("{path}.{}", s.value))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A check's predicate: `r.status === 200`, `r.status == 200`,
/// `r.body.includes('x')`, `r.body.indexOf('x') !== -1`,
/// `r.json('a') === v`, `r.json().a !== undefined`.
fn check_of(e: &Expression) -> Option<RawCheck> {
    match e.get_inner_expression() {
        Expression::BinaryExpression(b) => {
            let equal = matches!(
                b.operator,
                BinaryOperator::StrictEquality | BinaryOperator::Equality
            );
            let unequal = matches!(
                b.operator,
                BinaryOperator::StrictInequality | BinaryOperator::Inequality
            );
            // `r.status === 200`
            if let Expression::StaticMemberExpression(m) = b.left.get_inner_expression() {
                if m.property.name == "status" && equal {
                    if let Expression::NumericLiteral(n) = b.right.get_inner_expression() {
                        return Some(RawCheck {
                            status: Some(RawStatus::One(n.value as u16)),
                            ..RawCheck::default()
                        });
                    }
                }
            }
            // `r.body.indexOf('x') !== -1`
            if let Expression::CallExpression(c) = b.left.get_inner_expression() {
                if let Some(s) = body_method(c, "indexOf") {
                    let minus_one = matches!(b.right.get_inner_expression(), Expression::UnaryExpression(u)
                        if u.operator == UnaryOperator::UnaryNegation
                        && matches!(&u.argument, Expression::NumericLiteral(n) if n.value == 1.0));
                    if unequal && minus_one {
                        return Some(RawCheck {
                            body_contains: Some(s),
                            ..RawCheck::default()
                        });
                    }
                }
            }
            // `r.json('a') === v`, `r.json().a !== undefined`
            let (_, path) = json_path_of(&b.left)?;
            let undefined = matches!(b.right.get_inner_expression(), Expression::Identifier(i) if i.name == "undefined");
            if undefined && unequal {
                return Some(RawCheck {
                    json_path: Some(path),
                    exists: Some(true),
                    ..RawCheck::default()
                });
            }
            let value = match b.right.get_inner_expression() {
                Expression::StringLiteral(s) => json!(s.value.as_str()),
                Expression::NumericLiteral(n) => json!(n.value),
                Expression::BooleanLiteral(v) => json!(v.value),
                _ => return None,
            };
            equal.then(|| RawCheck {
                json_path: Some(path),
                equals: Some(value),
                ..RawCheck::default()
            })
        }
        // `r.body.includes('x')`
        Expression::CallExpression(c) => body_method(c, "includes").map(|s| RawCheck {
            body_contains: Some(s),
            ..RawCheck::default()
        }),
        _ => None,
    }
}

/// `r.body.METHOD('text')`: the text.
fn body_method(c: &CallExpression, method: &str) -> Option<String> {
    let Expression::StaticMemberExpression(m) = &c.callee else {
        return None;
    };
    if m.property.name != method {
        return None;
    }
    let Expression::StaticMemberExpression(body) = &m.object else {
        return None;
    };
    if body.property.name != "body" {
        return None;
    }
    match c.arguments.first()?.as_expression()? {
        Expression::StringLiteral(s) => Some(s.value.to_string()),
        _ => None,
    }
}

/// `sleep(1)`, `sleep(0.5)`: a think time.
fn sleep_of(e: &Expression) -> Option<String> {
    match e.get_inner_expression() {
        Expression::NumericLiteral(n) => {
            let ms = (n.value * 1000.0).round() as u64;
            Some(if ms.is_multiple_of(1000) {
                format!("{}s", ms / 1000)
            } else {
                format!("{ms}ms")
            })
        }
        _ => None,
    }
}

/// `http_req_duration: ['p(95)<500']` → (`p95`, `<500ms`);
/// `http_req_failed: ['rate<0.01']` → (`errors`, `<1%`); a `{name:x}`
/// tag → `p95{x}`.
fn threshold_of(metric: &str, rule: &str) -> Option<(String, String)> {
    let (metric, tag) = match metric.split_once('{') {
        Some((m, t)) => {
            let t = t.trim_end_matches('}');
            let name = t.strip_prefix("name:")?;
            (m, Some(name.trim().to_string()))
        }
        None => (metric, None),
    };
    let rule = rule.replace(' ', "");
    let at = rule.find(['<', '>'])?;
    let (stat, bound) = rule.split_at(at);
    let op_len = if bound[1..].starts_with('=') { 2 } else { 1 };
    let (op, value) = bound.split_at(op_len);
    let value: f64 = value.parse().ok()?;
    let (key, bound) = match (metric, stat) {
        ("http_req_duration", s) => {
            let key = match s {
                "avg" => "mean".to_string(),
                "med" => "p50".to_string(),
                "max" => "max".to_string(),
                s => {
                    let p = s.strip_prefix("p(")?.strip_suffix(')')?;
                    format!("p{}", p.replace('.', ""))
                }
            };
            (key, format!("{op}{}ms", number_text(value)))
        }
        ("http_req_failed", "rate") => (
            "errors".to_string(),
            format!("{op}{}%", number_text(value * 100.0)),
        ),
        _ => return None,
    };
    let key = match tag {
        Some(t) => format!("{key}{{{t}}}"),
        None => key,
    };
    Some((key, bound))
}

/// k6's durations (`30s`, `1m30s`, `500ms`, `2h`) are humantime's.
fn duration_of_k6(text: &str) -> String {
    text.trim().to_string()
}

fn seconds_of(text: &str) -> Option<f64> {
    humantime::parse_duration(text)
        .ok()
        .map(|d| d.as_secs_f64())
}

/// The options of a k6 scenario that are read (any other is left out).
const SCENARIO_OPTIONS: [&str; 13] = [
    "executor",
    "vus",
    "duration",
    "iterations",
    "stages",
    "startVUs",
    "rate",
    "timeUnit",
    "preAllocatedVUs",
    "maxVUs",
    "startRate",
    "gracefulStop",
    "exec",
];

/// A scenario's `stages`: (duration, target) each.
fn scenario_stages(s: &serde_json::Map<String, Value>) -> Vec<(String, f64)> {
    s.get("stages")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|st| {
                    Some((
                        duration_of_k6(st.get("duration")?.as_str()?),
                        st.get("target")?.as_f64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_of(i: &Imported) -> &RawLoad {
        i.scenario.load.as_ref().unwrap()
    }

    #[test]
    fn the_write_ups_five_users_and_twenty_five_iterations() {
        // `k6 run --vus 5 --iterations 25`, as options: 25 iterations shared.
        let i = import(
            "import http from 'k6/http';\n\
             export const options = { vus: 5, iterations: 25 };\n\
             export default function () {\n  http.get('http://127.0.0.1:3000/');\n}\n",
        )
        .unwrap();
        assert!(i.left_out.is_empty(), "{:?}", i.left_out);
        let l = load_of(&i);
        assert_eq!(
            (l.model, l.vus, l.iterations),
            (Some(Model::Closed), Some(5), Some(5))
        );
        assert_eq!(
            i.scenario.base_url.as_deref(),
            Some("http://127.0.0.1:3000")
        );
        assert_eq!(i.scenario.requests[0].path.as_deref(), Some("/"));
        assert_eq!(i.scenario.sessions[0].steps.len(), 1);
    }

    #[test]
    fn executors_become_loads_and_a_second_scenario_is_listed() {
        let i = import(
            "import http from 'k6/http';\n\
             export const options = { scenarios: {\n\
               shop: { executor: 'constant-arrival-rate', rate: 300, timeUnit: '1m', duration: '2m', preAllocatedVUs: 10, maxVUs: 50 },\n\
               other: { executor: 'constant-vus', vus: 3, duration: '1m' },\n\
             } };\n\
             export default function () { http.get('http://127.0.0.1:1/x'); }\n",
        )
        .unwrap();
        let l = load_of(&i);
        assert_eq!(l.model, Some(Model::Open));
        assert_eq!(l.rate, Some(5.0), "300 a minute");
        assert_eq!(l.duration.as_deref(), Some("2m"));
        assert_eq!(l.max_connections, Some(50));
        assert!(
            i.left_out
                .iter()
                .any(|x| x.starts_with("line 4:") && x.contains("`other`")),
            "{:?}",
            i.left_out
        );

        let i = import(
            "import http from 'k6/http';\n\
             export const options = { scenarios: { s: { executor: 'ramping-arrival-rate', startRate: 10, timeUnit: '1s',\n\
               preAllocatedVUs: 5, stages: [{ target: 50, duration: '30s' }, { target: 50, duration: '1m' }] } } };\n\
             export default function () { http.get('http://127.0.0.1:1/x'); }\n",
        )
        .unwrap();
        let stages = load_of(&i).stages.clone().unwrap();
        assert_eq!((stages[0].from, stages[0].to), (Some(10.0), Some(50.0)));
        assert_eq!(
            (stages[1].from, stages[1].to, stages[1].duration.as_str()),
            (Some(50.0), Some(50.0), "1m")
        );

        let i = import(
            "import http from 'k6/http';\n\
             export const options = { scenarios: { s: { executor: 'per-vu-iterations', vus: 4, iterations: 7 } } };\n\
             export default function () { http.get('http://127.0.0.1:1/x'); }\n",
        )
        .unwrap();
        let l = load_of(&i);
        assert_eq!((l.vus, l.iterations), (Some(4), Some(7)));
    }

    #[test]
    fn thresholds_checks_values_and_rows() {
        let i = import(
            r#"import http from 'k6/http';
import { check, sleep } from 'k6';
const data = JSON.parse(open('./ids.json'));
export const options = {
  vus: 2, duration: '30s',
  thresholds: {
    http_req_duration: ['p(95)<500', 'p(99.9) < 2000'],
    'http_req_duration{name:buy}': ['max<3000'],
    http_req_failed: [{ threshold: 'rate<=0.05', abortOnFail: true }],
  },
};
export default function () {
  const row = data[Math.floor(Math.random() * data.length)];
  const res = http.get(`http://127.0.0.1:1/items/${row.id}`);
  check(res, {
    'ok': (r) => r.status === 200,
    'has id': (r) => r.body.indexOf('"id"') !== -1,
    'right name': (r) => r.json('item.name') === 'pen',
  });
  const first = res.json().items[0].id;
  http.post('http://127.0.0.1:1/buy', { item: first, qty: '2' }, { tags: { name: 'buy' }, timeout: '10s' });
  sleep(1.5);
}
"#,
        )
        .unwrap();
        assert!(i.left_out.is_empty(), "{:?}", i.left_out);
        let t = i.scenario.thresholds.as_ref().unwrap();
        assert_eq!(t["p95"].bound(), "<500ms");
        assert_eq!(t["p999"].bound(), "<2000ms");
        assert_eq!(t["max{buy}"].bound(), "<3000ms");
        assert!(
            matches!(&t["errors"], RawThreshold::Table(x) if x.bound == "<=5%" && x.abort == Some(true))
        );
        let f = &i.scenario.feeders[0];
        assert_eq!(
            (f.file.as_str(), f.order),
            ("./ids.json", Some(FeederOrder::Random))
        );
        let get = &i.scenario.requests[0];
        assert_eq!(get.path.as_deref(), Some("/items/{{id}}"));
        assert_eq!(get.checks.len(), 3);
        assert_eq!(get.checks[1].body_contains.as_deref(), Some("\"id\""));
        assert_eq!(get.checks[2].json_path.as_deref(), Some("$.item.name"));
        assert_eq!(get.extracts[0].json_path.as_deref(), Some("$.items[0].id"));
        let buy = &i.scenario.requests[1];
        assert_eq!(buy.name, "buy");
        assert_eq!(buy.body.as_deref(), Some("item={{first}}&qty=2"));
        assert_eq!(buy.timeout.as_deref(), Some("10s"));
        let steps: Vec<String> = i.scenario.sessions[0]
            .steps
            .iter()
            .map(|s| format!("{:?}{:?}{:?}", s.feed, s.request, s.think))
            .collect();
        assert_eq!(
            steps,
            [
                "NoneSome(\"GET /items/{{id}}\")None",
                "NoneSome(\"buy\")None",
                "NoneNoneSome(\"1500ms\")"
            ]
        );
    }

    #[test]
    fn a_row_per_iteration_per_user_or_per_loop_pass() {
        let script = |index: &str, in_loop: bool| {
            let pick = format!("const row = data[{index}];");
            let body = if in_loop {
                format!("for (let i = 0; i < 2; i++) {{ {pick} http.get(`http://127.0.0.1:1/${{row.id}}`); }}")
            } else {
                format!("{pick} http.get(`http://127.0.0.1:1/${{row.id}}`);")
            };
            import(&format!(
                "import http from 'k6/http';\nconst data = JSON.parse(open('d.json'));\n\
                 export default function () {{\n{body}\n}}\n"
            ))
            .unwrap()
        };
        // `__ITER`: each user walks the rows (k6's meaning exactly).
        let i = script("__ITER % data.length", false);
        let f = &i.scenario.feeders[0];
        assert_eq!(
            (f.order, f.scope),
            (Some(FeederOrder::Circular), Some(FeederScope::PerUser))
        );
        assert!(i.left_out.is_empty(), "{:?}", i.left_out);
        // No `feed` step: every iteration takes a row of every feeder.
        assert!(i.scenario.sessions[0]
            .steps
            .iter()
            .all(|s| s.feed.is_none()));
        // `__VU`: a row per user, kept.
        let i = script("__VU % data.length", false);
        let f = &i.scenario.feeders[0];
        assert_eq!(
            (f.order, f.scope),
            (Some(FeederOrder::Circular), Some(FeederScope::PerUserFixed))
        );
        assert!(i.left_out.is_empty(), "{:?}", i.left_out);
        // Picked inside a loop: a row each pass.
        let i = script("Math.floor(Math.random() * data.length)", true);
        let inner = i.scenario.sessions[0].steps[0].steps.as_ref().unwrap();
        assert_eq!(inner[0].feed.as_deref(), Some("data"));
    }

    #[test]
    fn what_cannot_be_carried_over_is_listed_with_its_line_and_bad_javascript_is_refused() {
        let i = import(
            "import http from 'k6/http';\nimport { Counter } from 'k6/metrics';\n\
             export default function () {\n  if (__VU > 1) { http.get('http://127.0.0.1:1/a'); }\n\
               for (let i = 0; i < __ENV.N; i++) { http.get('http://127.0.0.1:1/b'); }\n\
               http.get('http://127.0.0.1:1/c');\n}\n",
        )
        .unwrap();
        let lines: Vec<&str> = i
            .left_out
            .iter()
            .map(|l| l.split(':').next().unwrap())
            .collect();
        assert_eq!(lines, ["line 2", "line 4", "line 5"], "{:?}", i.left_out);
        assert_eq!(i.scenario.requests.len(), 1);
        let e =
            import("import http from 'k6/http';\nexport default function () {\n  http.get(;\n}\n")
                .unwrap_err();
        assert!(e.starts_with("line 3:"), "{e}");
        let e = import("import http from 'k6/http';\n").unwrap_err();
        assert!(e.contains("export default function"), "{e}");
    }
}
