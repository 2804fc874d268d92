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
//!   (→ `${NAME:-default}`);
//! - `k6/net/grpc` clients' `load`, `connect` and `invoke` → `[grpc]`
//!   and `grpc` requests (`grpc.rs`);
//! - logic, as script code in a module beside the scenario (`logic.rs`):
//!   branches, computed loops (`for`, `for … of`, `while`, `forEach`),
//!   locals, helper functions, `return`, checks only code can say, URLs,
//!   bodies and headers computed at run time, `setup()` and `teardown()`.
//!
//! Anything else — other modules, custom metrics, `break` out of a loop
//! that sends requests — is listed with its line, never dropped silently.
//!
//! One importer reads one language's DSL, and its walkers share one
//! private model of the script (`K6`: what is bound to what, which calls
//! were read). The walk of statements is here; requests and checks in
//! `requests.rs`, options in `options.rs`, logic in `logic.rs`, what a
//! piece of code refers to in `scan.rs`.

mod grpc;
mod logic;
mod options;
mod requests;

use options::duration_of_k6;
use requests::json_path_of;
mod scan;

use super::{
    form_encode, main_origin, managed_header, number_text, request, sort_by_line, split_url,
    Imported,
};
use headroom_engine::plan::feeder::{FeederOrder, FeederScope};
use headroom_scenario::raw::{
    Model, RawCheck, RawExtract, RawFeeder, RawLoad, RawRequest, RawScenario, RawScript,
    RawSession, RawStage, RawStatus, RawStep, RawThreshold, RawThresholdTable,
};
use logic::{js_step, Place};
use oxc_allocator::Allocator;
use oxc_ast::ast::*;
use oxc_parser::Parser;
use oxc_span::{GetSpan, SourceType, Span};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

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
                Declaration::FunctionDeclaration(f) => {
                    let name = f.id.as_ref().map_or("?", |i| i.name.as_str());
                    if name != "setup" && name != "teardown" {
                        k6.leave(
                            f.span,
                            &format!("function `{name}` (only the default function is run)"),
                        );
                    }
                    k6.function(f);
                }
                _ => k6.leave(e.span, "export"),
            },
            Statement::ExportDefaultDeclaration(d) => match &d.declaration {
                ExportDefaultDeclarationKind::FunctionDeclaration(f) => {
                    default_fn = f.body.as_deref().map(|body| (&*f.params, body));
                }
                // `export default () => { … }`, as k6's gRPC examples write it.
                ExportDefaultDeclarationKind::ArrowFunctionExpression(f) => {
                    default_fn = f.get_function_body().map(|body| (&*f.params, body));
                }
                _ => k6.leave(d.span, "default export that is not a function"),
            },
            Statement::FunctionDeclaration(f) => k6.function(f),
            Statement::EmptyStatement(_) => {}
            Statement::ExpressionStatement(e) if k6.grpc_load(&e.expression) => {}
            other => k6.leave(other.span(), "top-level statement"),
        }
    }
    let Some((params, body)) = default_fn else {
        return Err("no `export default function` in the script: nothing to run".into());
    };
    k6.find_effectful();
    k6.data_param = params.items.first().and_then(|p| match &p.pattern {
        BindingPattern::BindingIdentifier(id) => Some(id.name.to_string()),
        _ => None,
    });
    let mut steps = k6.setup_and_teardown();
    steps.extend(k6.block(&body.statements));
    k6.finish(steps)
}

/// A template's `${VAR:-default}`s as their defaults (`${VAR}`: empty).
fn env_defaults(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let Some(end) = rest[at..].find('}') else {
            break;
        };
        let inside = &rest[at + 2..at + end];
        out.push_str(inside.split_once(":-").map_or("", |(_, d)| d));
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    out
}

/// A template literal's text between `${…}`s, escapes applied.
fn cooked<'q>(q: &'q TemplateElement) -> &'q str {
    q.value
        .cooked
        .as_ref()
        .map_or(q.value.raw.as_str(), |c| c.as_str())
}

/// 1-based line of a byte offset.
fn line_of(text: &str, at: u32) -> usize {
    text[..(at as usize).min(text.len())].matches('\n').count() + 1
}

/// A request's URL: a template, or code that computes it.
enum Url<'a> {
    Text(String),
    Computed(&'a Expression<'a>),
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
    /// Any other value: a constant of the module beside the scenario.
    Js,
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
    /// `setup` and `teardown`, when the script has them.
    setup: Option<&'a Function<'a>>,
    teardown: Option<&'a Function<'a>>,
    /// Helpers that make steps (a request, check, sleep): put in place
    /// where called; the others are copied into the module.
    effectful: HashSet<String>,
    /// Locals of the code read so far: the user's variables.
    locals: HashSet<String>,
    /// The default function's parameter (what `setup()` returned).
    data_param: Option<String>,
    place: Place,
    /// How deep helpers are being put in place.
    inlined: u32,
    /// Values taken declaratively, by name: the request and the code that
    /// takes them by script instead, should code read them.
    value_code: HashMap<String, (usize, String)>,
    /// Values code reads (taken by script, as JavaScript values).
    code_values: BTreeSet<String>,
    /// Responses code reads: (request, name), kept by its `after` hook.
    kept: BTreeSet<(usize, String)>,
    /// Lines of requests' `after` hooks (checks only code can say).
    after: BTreeMap<usize, Vec<String>>,
    /// The module's lines after the prelude, each with the name it makes
    /// global (constants, helpers, imported names).
    module_lines: Vec<(Option<String>, String)>,
    /// Top-level constants that are object literals (request params).
    top_objects: HashMap<String, &'a Expression<'a>>,
    /// Some code was written: the module goes beside the scenario.
    scripted: bool,
    /// `new grpc.Client()`s, by name.
    grpc_clients: HashSet<String>,
    /// What their `load` / `loadProtoset` name.
    grpc: Option<headroom_scenario::raw::RawGrpc>,
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
                ("k6/net/grpc", "default") => Some("grpc"),
                ("k6", "check") => Some("check"),
                ("k6", "sleep") => Some("sleep"),
                ("k6", "group") => Some("group"),
                ("k6/data", "SharedArray") => Some("SharedArray"),
                (m, "default") if m.contains("papaparse") => Some("papaparse"),
                _ => None,
            };
            // k6's crypto and encoding are the scripts' own; k6-utils is
            // in the module's prelude.
            let global = match module {
                "k6/crypto" => Some("crypto"),
                "k6/encoding" => Some("encoding"),
                m if m.contains("jslib.k6.io/k6-utils") => Some("k6utils"),
                _ => None,
            };
            match (known, global) {
                (Some(k), _) => {
                    self.modules.insert(local.to_string(), k);
                }
                (None, Some(object)) => {
                    let value = match imported {
                        "default" => object.to_string(),
                        name => format!("{object}.{name}"),
                    };
                    if value != local {
                        let line = format!("const {local} = {value};");
                        self.module_lines.push((Some(local.to_string()), line));
                    }
                }
                (None, None) => {
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
            if self.grpc_client(&name, init) {
                continue;
            }
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
                // In the module, a `${VAR}` is its default: modules are
                // not expanded (the scenario's code gets the value itself).
                let value = serde_json::to_string(&env_defaults(&text)).expect("a string is JSON");
                let line = format!("const {name} = {value};");
                self.module_lines.push((Some(name.clone()), line));
                self.bindings.insert(name, Binding::Text(text));
            } else if self.scan_expression(init).effects {
                self.leave(d.span, &format!("`{name}` (a request at the top level)"));
            } else {
                let kind = v.kind.as_str();
                let value = &self.text[init.span().start as usize..init.span().end as usize];
                let line = format!("{kind} {name} = {value};");
                self.module_lines.push((Some(name.clone()), line));
                if matches!(init.get_inner_expression(), Expression::ObjectExpression(_)) {
                    self.top_objects.insert(name.clone(), init);
                }
                self.bindings.insert(name, Binding::Js);
            }
        }
    }

    /// A top-level function: a helper, or `setup` / `teardown`.
    fn function(&mut self, f: &'a Function<'a>) {
        match f.id.as_ref().map_or("?", |i| i.name.as_str()) {
            "setup" => self.setup = Some(f),
            "teardown" => self.teardown = Some(f),
            name => {
                self.functions.insert(name.to_string(), f);
            }
        }
    }

    /// `setup()`'s steps, when it sends requests (once per user, ahead of
    /// its first iteration; k6 runs it once per run); otherwise `setup` and
    /// `teardown` go into the module as they are, and helpers without
    /// requests with them.
    fn setup_and_teardown(&mut self) -> Vec<RawStep> {
        let mut steps = Vec::new();
        let source =
            |f: &Function| self.text[f.span.start as usize..f.span.end as usize].to_string();
        let mut helpers: Vec<(&String, &&Function)> = self
            .functions
            .iter()
            .filter(|(name, _)| !self.effectful.contains(name.as_str()))
            .collect();
        helpers.sort_by_key(|(_, f)| f.span.start);
        let lines: Vec<(Option<String>, String)> = helpers
            .into_iter()
            .map(|(name, f)| (Some(name.clone()), source(f)))
            .collect();
        self.module_lines.extend(lines);
        if let Some(teardown) = self.teardown {
            if self.sends_requests(teardown) {
                self.leave(
                    teardown.span,
                    "`teardown()` sends requests (headroom sends none after the load)",
                );
            } else {
                self.module_lines
                    .push((None, format!("export {}", source(teardown))));
                self.scripted = true;
            }
        }
        let Some(setup) = self.setup else {
            return steps;
        };
        if !self.sends_requests(setup) {
            self.module_lines
                .push((None, format!("export {}", source(setup))));
            self.scripted = true;
            return steps;
        }
        self.leave(
            setup.span,
            "`setup()` sends requests: they run once per user, before its first iteration (k6: once per run)",
        );
        let data = self.data_param.take();
        let mut inner = vec![js_step("vars.__setup_done = true;".into())];
        if let Some(body) = &setup.body {
            self.in_place(&body.statements, data.as_deref(), &mut inner);
        }
        if let Some(name) = data {
            self.locals.insert(name);
        }
        steps.push(RawStep {
            if_: Some("vars.__setup_done === undefined".into()),
            steps: Some(inner),
            ..RawStep::default()
        });
        steps
    }

    fn sends_requests(&self, f: &Function<'a>) -> bool {
        f.body
            .as_ref()
            .is_some_and(|b| b.statements.iter().any(|s| self.scan_statement(s).effects))
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
                    out.push_str(cooked(q));
                    if let Some(e) = t.expressions.get(i) {
                        out.push_str(&self.template(e)?);
                    }
                }
                Some(out)
            }
            Expression::Identifier(i) => match self.bindings.get(i.name.as_str()) {
                Some(Binding::Text(t)) => Some(t.clone()),
                _ if self.values.iter().any(|v| v == i.name.as_str())
                    || self.locals.contains(i.name.as_str()) =>
                {
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
            // A local code set may be a number or an object: JSON of it
            // is for code to write (`{{name}}` would be a string).
            Expression::Identifier(i)
                if self.locals.contains(i.name.as_str())
                    && !self.values.iter().any(|v| v == i.name.as_str()) =>
            {
                None
            }
            other => self.template(other).map(Value::String),
        }
    }

    /// One statement as steps: requests and their checks, sleeps and
    /// groups as the session's own; logic without them as a `js` step;
    /// `if` and loops around them as `if` and `while` steps.
    fn statement(&mut self, s: &'a Statement<'a>, steps: &mut Vec<RawStep>) {
        match s {
            Statement::VariableDeclaration(v) => {
                for d in &v.declarations {
                    self.declarator(d, steps);
                }
            }
            Statement::EmptyStatement(_) => {}
            Statement::ReturnStatement(r) if self.place == Place::Default => {
                if self.scan_statement(s).effects {
                    self.leave(r.span, "`return` of a request");
                }
                steps.push(js_step("return ctx.endIteration();".into()));
                self.scripted = true;
            }
            Statement::ReturnStatement(r) => {
                self.leave(r.span, "`return` before the end of a function")
            }
            _ if !self.scan_statement(s).effects => self.logic(s, steps),
            Statement::ExpressionStatement(e) => self.expression(&e.expression, None, steps),
            Statement::BlockStatement(b) => steps.extend(self.block(&b.body)),
            Statement::IfStatement(i) => self.if_step(i, steps),
            Statement::ForStatement(f) => match constant_count(f) {
                Some(n) if !self.counter_read(f) => {
                    self.loops += 1;
                    let inner = self.body(&f.body);
                    self.loops -= 1;
                    steps.push(RawStep {
                        repeat: Some(n),
                        steps: Some(inner),
                        ..RawStep::default()
                    });
                }
                _ => self.for_step(f, steps),
            },
            Statement::ForOfStatement(f) => self.for_of_step(f, steps),
            Statement::WhileStatement(w) => self.while_step(w, steps),
            other => self.leave(
                other.span(),
                "statement around requests (carried: `if`, `for`, `for … of`, `while`, `forEach`, blocks)",
            ),
        }
    }

    /// Whether a `for` loop's body reads its counter.
    fn counter_read(&self, f: &'a ForStatement<'a>) -> bool {
        let Some(ForStatementInit::VariableDeclaration(v)) = &f.init else {
            return true;
        };
        let names: Vec<String> = v
            .declarations
            .iter()
            .flat_map(|d| scan::names_bound(&d.id))
            .collect();
        self.scan_statement(&f.body)
            .references
            .iter()
            .any(|r| names.contains(&r.name))
    }

    /// `const name = init`: a feeder's row, a value taken from a response,
    /// a request's response, what a helper returns, or a variable code
    /// sets.
    fn declarator(&mut self, d: &'a VariableDeclarator<'a>, steps: &mut Vec<RawStep>) {
        let BindingPattern::BindingIdentifier(id) = &d.id else {
            return self.destructure(d, steps);
        };
        let name = id.name.as_str();
        let Some(init) = &d.init else {
            return self.assign(name, None, d.span, steps);
        };
        if self.feeder_row(init.get_inner_expression(), name, steps) || self.take_value(init, name)
        {
            return;
        }
        if self.scan_expression(init).effects {
            self.expression(init, Some(name), steps);
        } else {
            self.assign(name, Some(init), d.span, steps);
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
            // `res = http.get(…)`
            if let Expression::AssignmentExpression(a) = inner {
                if let AssignmentTarget::AssignmentTargetIdentifier(id) = &a.left {
                    if a.operator == AssignmentOperator::Assign {
                        return self.expression(&a.right, Some(id.name.as_str()), steps);
                    }
                }
            }
            match bound {
                Some(name) if self.take_value(e, name) => {}
                _ => self.leave(e.span(), "expression around a request"),
            }
            return;
        };
        match &call.callee {
            Expression::StaticMemberExpression(m) if matches!(&m.object, Expression::Identifier(c) if self.grpc_clients.contains(c.name.as_str())) => {
                if let Some(Some(index)) = self.grpc_call(inner) {
                    steps.push(RawStep {
                        request: Some(self.requests[index].name.clone()),
                        ..RawStep::default()
                    });
                    if let Some(name) = bound {
                        self.responses.insert(name.to_string(), index);
                    }
                }
            }
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
            Expression::Identifier(f) if self.effectful.contains(f.name.as_str()) => {
                let function = self.functions[f.name.as_str()];
                self.inline(function, call, bound, steps);
            }
            _ if self.for_each(call, steps) => {}
            _ => {
                if let Some(name) = bound {
                    if self.take_value(e, name) {
                        return;
                    }
                }
                self.leave(call.span, "call around a request");
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
        // Should code read it: the same value taken by script, as the
        // JavaScript value it is (a list, a number), not as text.
        let source = &self.text[e.span().start as usize..e.span().end as usize];
        if let Some(rest) = source.strip_prefix(response.as_str()) {
            let code = format!("__r{}", logic::literal(rest));
            self.value_code.insert(name.to_string(), (index, code));
        }
        true
    }

    /// The scenario: the options' load and thresholds, one session.
    fn finish(mut self, steps: Vec<RawStep>) -> Result<Imported, String> {
        self.after_hooks();
        let script = self.scripted.then(|| self.module());
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
            script: script.as_ref().map(|_| RawScript::default()),
            grpc: self.grpc.take(),
            ..RawScenario::default()
        };
        sort_by_line(&mut self.left_out);
        Ok(Imported {
            scenario,
            left_out: self.left_out,
            script,
        })
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

#[cfg(test)]
mod tests;
