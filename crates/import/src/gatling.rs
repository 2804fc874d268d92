//! `headroom import gatling Simulation.scala|.java|.kt`: a Gatling
//! simulation, parsed with tree-sitter's Scala, Java or Kotlin grammar (never patterns over
//! the text), → a scenario. The syntax tree is first read into [`Node`]s —
//! calls chained on calls, strings, numbers, blocks — the same whichever
//! language, then the DSL is read from those:
//!
//! - the protocol: `http.baseUrl/baseURL(…)`, its common headers;
//! - the scenario's chain: `exec(http(name).get|post|put|patch|delete|
//!   head(url)` with `.header(s)`, `.body(StringBody|ElFileBody|RawFileBody)`,
//!   `.asJson`, `.formParam`, `.queryParam`, `.check(status.is/in,
//!   jsonPath|regex(…).saveAs(…), bodyString.is, substring(…).exists)`),
//!   `pause`, `repeat(n) {…}` / `repeat(n).on(…)`, `feed(…)`, `group`;
//!   `${x}` and `#{x}` → `{{x}}`;
//! - feeders: `csv/tsv/jsonFile(…).random|circular|queue|shuffle`;
//! - injection: `ramp(n users) over (d)` (Gatling 1.x–2.x), `atOnceUsers`,
//!   `rampUsers(n).during(d)`, `constantUsersPerSec(r).during(d)`,
//!   (`atOnceUsers(n)`: n users at once, one pass each),
//!   `rampUsersPerSec(a).to(b).during(d)`, `constantConcurrentUsers(n).
//!   during(d)`, `rampConcurrentUsers(a).to(b).during(d)`, `nothingFor(d)`;
//! - `maxDuration`, and `assertions` on the response time and failures
//!   → thresholds.
//!
//! Everything else is listed with its line.
//!
//! Over 1,000 lines: one importer reads one DSL, whose three grammars meet
//! in one private model ([`Node`]); split, the walkers would reach into
//! each other's. A sixth of it is tests.

use super::{form_encode, managed_header, number_text, request, sort_by_line, split_url, Imported};
use headroom_engine::plan::feeder::FeederOrder;
use headroom_scenario::raw::{
    Model, RawCheck, RawExtract, RawFeeder, RawHttp, RawLoad, RawRequest, RawScenario, RawSession,
    RawStage, RawStatus, RawStep, RawThreshold,
};
use std::collections::{BTreeMap, HashMap};

/// The language a simulation is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Scala,
    Java,
    Kotlin,
}

impl Language {
    /// From the file's extension.
    pub fn of(path: &std::path::Path) -> Result<Language, String> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("scala") => Ok(Language::Scala),
            Some("java") => Ok(Language::Java),
            Some("kt") => Ok(Language::Kotlin),
            other => Err(format!(
                "`.{}`: a Gatling simulation is a .scala or .java file",
                other.unwrap_or("")
            )),
        }
    }
}

/// A piece of a simulation, whichever language it was written in.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    /// `target.name(args…)`; a bare name or field is a call that was
    /// not `called`.
    Call {
        target: Option<Box<Node>>,
        name: String,
        args: Vec<Node>,
        called: bool,
        line: usize,
    },
    Str(String),
    Num(f64),
    /// A block or a function's body: its expressions, in order.
    Block(Vec<Node>),
    /// Something this importer does not read.
    Other {
        what: String,
        line: usize,
    },
}

impl Node {
    fn line(&self) -> usize {
        match self {
            Node::Call { line, .. } | Node::Other { line, .. } => *line,
            _ => 0,
        }
    }

    /// The chain `a.b(x).c(y)` as [(a), (b, [x]), (c, [y])], innermost first.
    fn chain(&self) -> Vec<&Node> {
        let mut out = Vec::new();
        let mut at = self;
        loop {
            out.push(at);
            match at {
                Node::Call {
                    target: Some(t), ..
                } => at = t,
                _ => break,
            }
        }
        out.reverse();
        out
    }

    fn name(&self) -> &str {
        match self {
            Node::Call { name, .. } => name,
            _ => "",
        }
    }

    fn args(&self) -> &[Node] {
        match self {
            Node::Call { args, .. } => args,
            _ => &[],
        }
    }
}

pub fn import(text: &str, language: Language) -> Result<Imported, String> {
    let mut parser = tree_sitter::Parser::new();
    let grammar: tree_sitter::Language = match language {
        Language::Scala => tree_sitter_scala::LANGUAGE.into(),
        Language::Java => tree_sitter_java::LANGUAGE.into(),
        Language::Kotlin => tree_sitter_kotlin_ng::LANGUAGE.into(),
    };
    parser
        .set_language(&grammar)
        .map_err(|e| format!("the {language:?} grammar: {e}"))?;
    let tree = parser
        .parse(text, None)
        .ok_or("the simulation could not be parsed")?;
    if let Some(bad) = first_error(tree.root_node()) {
        return Err(format!(
            "line {}: a syntax error (`{}`)",
            bad.start_position().row + 1,
            snippet(text, bad)
        ));
    }
    let reader = Reader { text, language };
    let mut definitions = HashMap::new();
    let mut statements = Vec::new();
    reader.walk(tree.root_node(), &mut definitions, &mut statements);

    Simulation {
        definitions,
        left_out: Vec::new(),
        requests: Vec::new(),
        feeders: Vec::new(),
        taken: BTreeMap::new(),
        saved: Vec::new(),
    }
    .read(&statements)
}

fn first_error(node: tree_sitter::Node) -> Option<tree_sitter::Node> {
    if node.is_error() || node.is_missing() {
        return Some(node);
    }
    if !node.has_error() {
        return None;
    }
    let mut cursor = node.walk();
    let children: Vec<_> = node.children(&mut cursor).collect();
    children.into_iter().find_map(first_error)
}

fn snippet(text: &str, node: tree_sitter::Node) -> String {
    text[node.byte_range()]
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(60)
        .collect()
}

/// Reads the syntax tree into definitions (`val x = …`, `Type x = …`)
/// and the class body's other statements (`setUp(…)`).
struct Reader<'t> {
    text: &'t str,
    language: Language,
}

impl Reader<'_> {
    fn text(&self, n: tree_sitter::Node) -> &str {
        &self.text[n.byte_range()]
    }

    fn walk(
        &self,
        node: tree_sitter::Node,
        definitions: &mut HashMap<String, Node>,
        statements: &mut Vec<Node>,
    ) {
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            match child.kind() {
                // Scala `val x = …`, Java `Type x = …;` (a field or a local).
                "val_definition" | "var_definition" => {
                    if let (Some(p), Some(v)) = (
                        child.child_by_field_name("pattern"),
                        child.child_by_field_name("value"),
                    ) {
                        definitions.insert(self.text(p).to_string(), self.node(v));
                    }
                }
                "field_declaration" | "local_variable_declaration" => {
                    let mut c = child.walk();
                    for d in child.children_by_field_name("declarator", &mut c) {
                        if let (Some(n), Some(v)) = (
                            d.child_by_field_name("name"),
                            d.child_by_field_name("value"),
                        ) {
                            definitions.insert(self.text(n).to_string(), self.node(v));
                        }
                    }
                }
                // Kotlin `val x = …`.
                "property_declaration" => {
                    let mut c = child.walk();
                    let parts: Vec<_> = child.named_children(&mut c).collect();
                    let name = parts
                        .iter()
                        .find(|p| p.kind() == "variable_declaration")
                        .and_then(|v| v.named_child(0));
                    let value = parts.iter().rev().find(|p| {
                        !matches!(p.kind(), "variable_declaration" | "modifiers" | "type")
                    });
                    if let (Some(n), Some(v)) = (name, value) {
                        definitions.insert(self.text(n).to_string(), self.node(*v));
                    }
                }
                "call_expression" | "infix_expression" | "method_invocation" => {
                    statements.push(self.node(child))
                }
                "expression_statement" => {
                    if let Some(e) = child.named_child(0) {
                        statements.push(self.node(e));
                    }
                }
                // Into classes, their bodies and Java's instance initialiser.
                "class_definition"
                | "object_definition"
                | "template_body"
                | "class_declaration"
                | "class_body"
                | "block"
                | "program"
                | "compilation_unit"
                | "package_clause"
                | "source_file"
                | "anonymous_initializer"
                | "statements" => self.walk(child, definitions, statements),
                _ => {}
            }
        }
    }

    /// One expression as a [`Node`]: what reads alike in the three
    /// languages here, the rest by each language's own grammar.
    fn node(&self, n: tree_sitter::Node) -> Node {
        let line = n.start_position().row + 1;
        let named: Vec<tree_sitter::Node> = {
            let mut c = n.walk();
            n.named_children(&mut c).collect()
        };
        let node = match (self.language, n.kind()) {
            (_, "parenthesized_expression") => Some(named.first().map_or(
                Node::Other {
                    what: "()".into(),
                    line,
                },
                |e| self.node(*e),
            )),
            (_, "identifier") | (Language::Scala, "operator_identifier") => Some(Node::Call {
                target: None,
                name: self.text(n).to_string(),
                args: Vec::new(),
                called: false,
                line,
            }),
            (Language::Scala, "integer_literal" | "floating_point_literal")
            | (Language::Java, "decimal_integer_literal" | "decimal_floating_point_literal")
            | (Language::Kotlin, "number_literal" | "float_literal")
            // `-1`
            | (Language::Java | Language::Kotlin, "unary_expression") => {
                Some(number_node(self.text(n), line))
            }
            (Language::Scala, "string") | (Language::Java, "string_literal") => {
                Some(Node::Str(unquote(self.text(n))))
            }
            (Language::Scala, _) => self.scala_node(n, &named, line),
            (Language::Java, _) => self.java_node(n, line),
            (Language::Kotlin, _) => self.kotlin_node(n, &named, line),
        };
        node.unwrap_or_else(|| Node::Other {
            what: format!("{} `{}`", n.kind(), snippet(self.text, n)),
            line,
        })
    }

    /// A call `f(args)` (or `f(args) { block }`): the callee's node with
    /// the arguments added and marked called.
    fn called(&self, callee: Option<tree_sitter::Node>, args: Vec<Node>, line: usize) -> Node {
        let mut call = callee.map_or(
            Node::Other {
                what: "call".into(),
                line,
            },
            |f| self.node(f),
        );
        if let Node::Call {
            args: a, called, ..
        } = &mut call
        {
            a.extend(args);
            *called = true;
        }
        call
    }

    /// Scala's own expressions: `f(args)`, `f(args) { block }`, `a.f`,
    /// `ramp(1000 users) over (10 seconds)`, `10 seconds`, blocks, lambdas.
    fn scala_node(
        &self,
        n: tree_sitter::Node,
        named: &[tree_sitter::Node],
        line: usize,
    ) -> Option<Node> {
        let field = |name: &str| n.child_by_field_name(name);
        Some(match n.kind() {
            "call_expression" => {
                let args = field("arguments")
                    .map(|a| self.arguments(a))
                    .unwrap_or_default();
                self.called(field("function"), args, line)
            }
            // The line of a link is its name's (chains run over lines).
            "field_expression" => Node::Call {
                target: field("value").map(|v| Box::new(self.node(v))),
                name: field("field").map_or(String::new(), |f| self.text(f).to_string()),
                args: Vec::new(),
                called: false,
                line: field("field").map_or(line, |f| f.start_position().row + 1),
            },
            "infix_expression" => Node::Call {
                target: field("left").map(|v| Box::new(self.node(v))),
                name: field("operator").map_or(String::new(), |f| self.text(f).to_string()),
                args: field("right")
                    .map(|r| vec![self.node(r)])
                    .unwrap_or_default(),
                called: true,
                line: field("operator").map_or(line, |f| f.start_position().row + 1),
            },
            "postfix_expression" if named.len() == 2 => Node::Call {
                target: Some(Box::new(self.node(named[0]))),
                name: self.text(named[1]).to_string(),
                args: Vec::new(),
                called: true,
                line,
            },
            "generic_function" => field("function").map_or(
                Node::Other {
                    what: "generic".into(),
                    line,
                },
                |f| self.node(f),
            ),
            "block" | "indented_block" => {
                Node::Block(named.iter().map(|c| self.node(*c)).collect())
            }
            "lambda_expression" => match named.last() {
                Some(body) => match self.node(*body) {
                    Node::Block(b) => Node::Block(b),
                    other => Node::Block(vec![other]),
                },
                None => Node::Block(Vec::new()),
            },
            _ => return None,
        })
    }

    /// Java's own expressions: `object.name(args)`, `object.field`,
    /// `x -> body`.
    fn java_node(&self, n: tree_sitter::Node, line: usize) -> Option<Node> {
        let field = |name: &str| n.child_by_field_name(name);
        Some(match n.kind() {
            "method_invocation" => Node::Call {
                target: field("object").map(|o| Box::new(self.node(o))),
                name: field("name").map_or(String::new(), |f| self.text(f).to_string()),
                args: field("arguments")
                    .map(|a| self.arguments(a))
                    .unwrap_or_default(),
                called: true,
                line: field("name").map_or(line, |f| f.start_position().row + 1),
            },
            "field_access" => Node::Call {
                target: field("object").map(|o| Box::new(self.node(o))),
                name: field("field").map_or(String::new(), |f| self.text(f).to_string()),
                args: Vec::new(),
                called: false,
                line,
            },
            "lambda_expression" => match field("body") {
                Some(b) if b.kind() == "block" => {
                    let mut stmts = Vec::new();
                    let mut defs = HashMap::new();
                    self.walk(b, &mut defs, &mut stmts);
                    Node::Block(stmts)
                }
                Some(e) => Node::Block(vec![self.node(e)]),
                None => Node::Block(Vec::new()),
            },
            _ => return None,
        })
    }

    /// Kotlin's own expressions: `callee(args) { lambda }`, `a.b`,
    /// `a op b`, `{ … }`, strings (templates are not carried over).
    fn kotlin_node(
        &self,
        n: tree_sitter::Node,
        named: &[tree_sitter::Node],
        line: usize,
    ) -> Option<Node> {
        Some(match n.kind() {
            "call_expression" => {
                let args = named
                    .iter()
                    .skip(1)
                    .flat_map(|part| self.kotlin_arguments(*part))
                    .collect();
                self.called(named.first().copied(), args, line)
            }
            "navigation_expression" if named.len() == 2 => Node::Call {
                target: Some(Box::new(self.node(named[0]))),
                // `is` is a keyword in Kotlin: written `` `is` `` (or `shouldBe`).
                name: self.text(named[1]).trim_matches('`').to_string(),
                args: Vec::new(),
                called: false,
                line: named[1].start_position().row + 1,
            },
            "infix_expression" if named.len() == 3 => Node::Call {
                target: Some(Box::new(self.node(named[0]))),
                name: self.text(named[1]).to_string(),
                args: vec![self.node(named[2])],
                called: true,
                line: named[1].start_position().row + 1,
            },
            "string_literal" if named.iter().any(|c| c.kind() == "interpolation") => Node::Other {
                what: format!(
                    "string template `{}` (Kotlin's `$…`; Gatling's `#{{…}}` is read)",
                    snippet(self.text, n)
                ),
                line,
            },
            "string_literal" => Node::Str(unquote(self.text(n))),
            "lambda_literal" | "statements" => {
                let mut items = Vec::new();
                for c in named {
                    match self.node(*c) {
                        Node::Block(inner) => items.extend(inner),
                        other => items.push(other),
                    }
                }
                Node::Block(items)
            }
            _ => return None,
        })
    }

    /// The arguments in one part of a Kotlin call: its value arguments
    /// (`name = value`: the value), or its trailing lambda.
    fn kotlin_arguments(&self, part: tree_sitter::Node) -> Vec<Node> {
        let mut c = part.walk();
        match part.kind() {
            "value_arguments" => part
                .named_children(&mut c)
                .filter_map(|a| {
                    let mut ac = a.walk();
                    let value = a.named_children(&mut ac).last();
                    value.map(|e| self.node(e))
                })
                .collect(),
            "annotated_lambda" => part
                .named_children(&mut c)
                .find(|x| x.kind() == "lambda_literal")
                .map(|l| self.node(l))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    fn arguments(&self, a: tree_sitter::Node) -> Vec<Node> {
        match a.kind() {
            "block" | "indented_block" => vec![self.node(a)],
            _ => {
                let mut c = a.walk();
                a.named_children(&mut c).map(|x| self.node(x)).collect()
            }
        }
    }
}

/// A number literal (`10`, `1.5`, `10L`, `1_000`, `-1`), or what it is.
fn number_node(text: &str, line: usize) -> Node {
    let t = text
        .trim_end_matches(['L', 'l', 'd', 'D', 'f', 'F'])
        .replace(['_', ' '], "");
    t.parse().map_or(
        Node::Other {
            what: format!("number `{t}`"),
            line,
        },
        Node::Num,
    )
}

/// A string literal's text: `"…"` or `"""…"""`, escapes read.
fn unquote(t: &str) -> String {
    let inner = t
        .strip_prefix("\"\"\"")
        .and_then(|s| s.strip_suffix("\"\"\""))
        .or_else(|| t.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
        .unwrap_or(t);
    unescape(inner)
}

fn unescape(s: &str) -> String {
    s.replace("\\\"", "\"")
        .replace("\\n", "\n")
        .replace("\\\\", "\\")
}

/// `${x}` (Gatling 1–3.6) and `#{x}` (3.7+) → `{{x}}`.
fn expression_language(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find(['$', '#']) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        if from[1..].starts_with('{') {
            if let Some(end) = from.find('}') {
                out.push_str("{{");
                out.push_str(&from[2..end]);
                out.push_str("}}");
                rest = &from[end + 1..];
                continue;
            }
        }
        out.push_str(&from[..1]);
        rest = &from[1..];
    }
    out.push_str(rest);
    out
}

/// The DSL read from the nodes.
struct Simulation {
    definitions: HashMap<String, Node>,
    left_out: Vec<String>,
    requests: Vec<RawRequest>,
    feeders: Vec<RawFeeder>,
    taken: BTreeMap<String, u32>,
    /// Names values were saved as (`saveAs`).
    saved: Vec<String>,
}

impl Simulation {
    fn leave(&mut self, line: usize, what: &str) {
        self.left_out.push(format!("line {line}: {what}"));
    }

    /// A name defined in the simulation, followed to what it stands for.
    fn resolve<'n>(&'n self, n: &'n Node) -> &'n Node {
        match n {
            Node::Call {
                target: None,
                name,
                called: false,
                ..
            } => self.definitions.get(name).map_or(n, |d| self.resolve(d)),
            // `val x =` and its value on the lines below (an indented block).
            Node::Block(items) if items.len() == 1 => self.resolve(&items[0]),
            _ => n,
        }
    }

    fn text(&self, n: &Node) -> Option<String> {
        match self.resolve(n) {
            Node::Str(s) => Some(expression_language(s)),
            Node::Num(v) => Some(number_text(*v)),
            _ => None,
        }
    }

    fn num(&self, n: &Node) -> Option<f64> {
        match self.resolve(n) {
            Node::Num(v) => Some(*v),
            _ => None,
        }
    }

    /// `10 seconds`, `10.seconds`, `10` (seconds), `Duration.ofSeconds(10)`,
    /// `(500 milliseconds)`: a duration text.
    /// An injection step's `during(…)` or `over(…)`.
    fn during(&self, chain: &[&Node]) -> Option<String> {
        chain
            .iter()
            .find(|c| matches!(c.name(), "during" | "over"))
            .and_then(|c| c.args().first())
            .and_then(|d| self.duration(d))
    }

    fn duration(&self, n: &Node) -> Option<String> {
        let n = self.resolve(n);
        if let Some(v) = self.num(n) {
            return Some(format!("{}s", number_text(v)));
        }
        let chain = n.chain();
        let (first, last) = (chain.first()?, chain.last()?);
        let unit = |u: &str| -> Option<&'static str> {
            Some(
                match u.trim_start_matches("of").to_ascii_lowercase().as_str() {
                    "second" | "seconds" => "s",
                    "millisecond" | "milliseconds" | "millis" => "ms",
                    "minute" | "minutes" => "m",
                    "hour" | "hours" => "h",
                    _ => return None,
                },
            )
        };
        // `10 seconds` / `10.seconds`
        if let (Some(v), Some(u)) = (self.num(first), unit(last.name())) {
            if chain.len() == 2 {
                return Some(format!("{}{u}", number_text(v)));
            }
        }
        // `Duration.ofSeconds(10)`
        if let (Some(u), Some(v)) = (
            unit(last.name()),
            last.args().first().and_then(|a| self.num(a)),
        ) {
            return Some(format!("{}{u}", number_text(v)));
        }
        None
    }

    fn read(mut self, statements: &[Node]) -> Result<Imported, String> {
        let Some(setup) = statements
            .iter()
            .find(|s| s.chain().iter().any(|c| c.name() == "setUp"))
        else {
            return Err("no `setUp(…)` in the simulation: nothing to run".into());
        };
        let chain = setup.chain();
        let mut scenario = RawScenario::default();
        let mut load = None;
        let mut steps = Vec::new();
        let mut thresholds = BTreeMap::new();
        for link in &chain {
            match link.name() {
                "setUp" => {
                    let args: Vec<Node> = link.args().to_vec();
                    for (i, population) in args.iter().enumerate() {
                        if i > 0 {
                            self.leave(population.line(), "another scenario in setUp (only the first is carried over; import it into a file of its own)");
                            continue;
                        }
                        let (s, l) = self.population(population);
                        steps = s;
                        load = l;
                    }
                }
                "protocols" => {
                    for p in link.args() {
                        self.protocol(p, &mut scenario);
                    }
                }
                "maxDuration" => match link.args().first().and_then(|d| self.duration(d)) {
                    Some(d) => {
                        if let Some(l) = load.as_mut() {
                            let l: &mut RawLoad = l;
                            l.duration.get_or_insert(d);
                        }
                    }
                    None => self.leave(link.line(), "maxDuration"),
                },
                "assertions" => {
                    for a in link.args() {
                        self.assertion(a, &mut thresholds);
                    }
                }
                other => self.leave(link.line(), &format!("`{other}` on setUp")),
            }
        }
        scenario.load = load;
        scenario.requests = std::mem::take(&mut self.requests);
        scenario.feeders = std::mem::take(&mut self.feeders);
        scenario.sessions = vec![RawSession {
            name: "simulation".into(),
            weight: None,
            steps,
        }];
        scenario.thresholds = (!thresholds.is_empty()).then_some(thresholds);
        sort_by_line(&mut self.left_out);
        Ok(Imported {
            scenario,
            left_out: self.left_out,
            script: None,
        })
    }

    /// `scn.inject(…)` / `scn.injectOpen(…)` / `scn.injectClosed(…)`: the
    /// scenario's steps and the load.
    fn population(&mut self, p: &Node) -> (Vec<RawStep>, Option<RawLoad>) {
        let chain = p.chain();
        let mut steps = Vec::new();
        let mut load = None;
        for link in &chain {
            match link.name() {
                "inject" | "injectOpen" | "injectClosed" => {
                    load = self.injection(link.args(), link.line());
                }
                _ if link.args().is_empty() && !matches!(link, Node::Call { called: true, .. }) => {
                    // The scenario, by name.
                    let scn = self.resolve(link).clone();
                    steps = self.scenario_chain(&scn);
                }
                "throttle" => self.leave(
                    link.line(),
                    "throttle (give the scenario a [load] rate instead)",
                ),
                "protocols" => {}
                other => self.leave(link.line(), &format!("`{other}` on the population")),
            }
        }
        (steps, load)
    }

    /// The injection steps as one load.
    fn injection(&mut self, steps: &[Node], line: usize) -> Option<RawLoad> {
        let mut stages: Vec<RawStage> = Vec::new();
        let mut load: Option<RawLoad> = None;
        let mut closed_stages: Vec<RawStage> = Vec::new();
        for step in steps {
            let chain = step.chain();
            let names: Vec<&str> = chain.iter().map(|c| c.name()).collect();
            let arg = |i: usize| chain.get(i).and_then(|c| c.args().first());
            let during = self.during(&chain);
            let first_num = |s: &Self| arg(0).and_then(|a| s.users(a));
            // `… to(n)`: where a ramp ends.
            let to = |s: &Self| {
                let to = chain.iter().find(|c| c.name() == "to");
                to.and_then(|c| c.args().first()).and_then(|a| s.num(a))
            };
            match names.first().copied() {
                // Gatling 1.x–2.x: `ramp(1000 users) over (10 seconds)`.
                Some("ramp" | "rampUsers") => {
                    let (Some(n), Some(d)) = (first_num(self), during) else {
                        self.leave(step.line(), "rampUsers without a count and a duration");
                        continue;
                    };
                    load = Some(RawLoad {
                        model: Some(Model::Open),
                        users: Some(n as u64),
                        over: Some(d),
                        ..RawLoad::default()
                    });
                }
                Some("atOnceUsers" | "atOnce") => {
                    let Some(n) = first_num(self) else { continue };
                    // n users at once, each running the scenario once.
                    load = Some(RawLoad {
                        model: Some(Model::Closed),
                        vus: Some(n as u32),
                        iterations: Some(1),
                        ..RawLoad::default()
                    });
                }
                Some("constantUsersPerSec") => {
                    let (Some(r), Some(d)) = (arg(0).and_then(|a| self.num(a)), during) else {
                        continue;
                    };
                    stages.push(RawStage {
                        duration: d,
                        rate: Some(r),
                        ..RawStage::default()
                    });
                }
                Some("rampUsersPerSec") => {
                    let (from, to) = (arg(0).and_then(|a| self.num(a)), to(self));
                    let (Some(from), Some(to), Some(d)) = (from, to, during) else {
                        continue;
                    };
                    stages.push(RawStage {
                        duration: d,
                        from: Some(from),
                        to: Some(to),
                        ..RawStage::default()
                    });
                }
                Some("nothingFor") => {
                    let Some(d) = arg(0).and_then(|a| self.duration(a)) else {
                        continue;
                    };
                    stages.push(RawStage {
                        duration: d,
                        rate: Some(0.0),
                        ..RawStage::default()
                    });
                }
                Some("constantConcurrentUsers") => {
                    let (Some(n), Some(d)) = (first_num(self), during) else {
                        continue;
                    };
                    closed_stages.push(RawStage {
                        duration: d,
                        target: Some(n as u32),
                        ..RawStage::default()
                    });
                }
                Some("rampConcurrentUsers") => {
                    let to = to(self);
                    let (Some(to), Some(d)) = (to, during) else {
                        continue;
                    };
                    closed_stages.push(RawStage {
                        duration: d,
                        target: Some(to as u32),
                        ..RawStage::default()
                    });
                }
                other => self.leave(
                    step.line(),
                    &format!("injection `{}`", other.unwrap_or("?")),
                ),
            }
        }
        self.injected(line, load, stages, closed_stages)
    }

    /// The load the injection steps made: one kind only (open users, open
    /// stages, or closed stages), the first given.
    fn injected(
        &mut self,
        line: usize,
        load: Option<RawLoad>,
        stages: Vec<RawStage>,
        closed_stages: Vec<RawStage>,
    ) -> Option<RawLoad> {
        let kinds = [
            load.is_some(),
            !stages.is_empty(),
            !closed_stages.is_empty(),
        ]
        .iter()
        .filter(|k| **k)
        .count();
        if kinds > 1 {
            self.leave(
                line,
                "injection steps of different kinds (only the first kind is carried over)",
            );
        }
        if let Some(l) = load {
            return Some(l);
        }
        if !stages.is_empty() {
            // Arrivals are users (sessions): stages of users per second.
            return Some(RawLoad {
                model: Some(Model::Open),
                stages: Some(stages),
                ..RawLoad::default()
            });
        }
        if !closed_stages.is_empty() {
            if closed_stages.len() == 1 {
                let s = &closed_stages[0];
                return Some(RawLoad {
                    model: Some(Model::Closed),
                    vus: s.target,
                    duration: Some(s.duration.clone()),
                    ..RawLoad::default()
                });
            }
            return Some(RawLoad {
                model: Some(Model::Closed),
                stages: Some(closed_stages),
                ..RawLoad::default()
            });
        }
        None
    }

    /// `1000 users`, `1000`.
    fn users(&self, n: &Node) -> Option<f64> {
        let n = self.resolve(n);
        if let Some(v) = self.num(n) {
            return Some(v);
        }
        let chain = n.chain();
        match (chain.first(), chain.get(1)) {
            (Some(v), Some(u)) if u.name() == "users" => self.num(v),
            _ => None,
        }
    }

    /// `http.baseUrl("…").header(…)…`
    fn protocol(&mut self, p: &Node, scenario: &mut RawScenario) {
        let p = self.resolve(p).clone();
        for link in p.chain() {
            let args = link.args();
            let text = |i: usize| args.get(i).and_then(|a| self.text(a));
            match link.name() {
                "http" if args.is_empty() => {}
                "baseUrl" | "baseURL" => match text(0) {
                    Some(u) if u.is_empty() => self.leave(
                        link.line(),
                        "`baseURL(\"\")`: the requests' URLs are whole (from a feeder); say where they go when running: `--connect-to ::HOST:PORT` (or a base_url)",
                    ),
                    Some(u) => match split_url(&u) {
                        Ok((origin, path)) => {
                            scenario.base_url = Some(origin + path.trim_end_matches('/'));
                        }
                        Err(e) => self.leave(link.line(), &e),
                    },
                    None => self.leave(link.line(), "baseUrl that is not a constant"),
                },
                "header" => match (text(0), text(1)) {
                    (Some(k), Some(v)) if !managed_header(&k) => {
                        header(scenario, k, v);
                    }
                    _ => self.leave(link.line(), "header"),
                },
                h if h.ends_with("Header") => match text(0) {
                    Some(v) => {
                        let name = match h {
                            "acceptHeader" => "Accept",
                            "acceptEncodingHeader" => "Accept-Encoding",
                            "acceptLanguageHeader" => "Accept-Language",
                            "authorizationHeader" => "Authorization",
                            "contentTypeHeader" => "Content-Type",
                            "userAgentHeader" => "User-Agent",
                            "doNotTrackHeader" => "DNT",
                            _ => {
                                self.leave(link.line(), &format!("`{h}`"));
                                continue;
                            }
                        };
                        header(scenario, name.into(), v);
                    }
                    None => self.leave(link.line(), &format!("`{h}` that is not a constant")),
                },
                "inferHtmlResources" | "silentResources" | "disableCaching" | "shareConnections"
                | "disableWarmUp" | "warmUp" | "maxConnectionsPerHost" | "proxy" | "disableFollowRedirect" => {
                    self.leave(link.line(), &format!("protocol `{}`", link.name()))
                }
                "" => {}
                other => self.leave(link.line(), &format!("protocol `{other}`")),
            }
        }
    }

    /// `scenario("name").exec(…).pause(…)…`: its steps.
    fn scenario_chain(&mut self, scn: &Node) -> Vec<RawStep> {
        let mut steps = Vec::new();
        for link in scn.chain() {
            self.link(link, &mut steps, 0);
        }
        steps
    }

    /// One link of a chain (`exec`, `pause`, `repeat`, `feed`, …), its
    /// steps added to `steps`; `depth`: how many loops it is in.
    fn link(&mut self, link: &Node, steps: &mut Vec<RawStep>, depth: usize) {
        let args = link.args();
        match link.name() {
            "scenario" | "" => {}
            "exec" => {
                for a in args {
                    let a = self.resolve(a).clone();
                    self.exec(&a, steps, depth);
                }
            }
            "pause" => {
                let lo = args.first().and_then(|a| self.duration(a));
                let hi = args.get(1).and_then(|a| self.duration(a));
                match (lo, hi) {
                    (Some(lo), Some(hi)) => steps.push(RawStep {
                        think: Some(format!("{lo}..{hi}")),
                        ..RawStep::default()
                    }),
                    (Some(lo), None) => steps.push(RawStep {
                        think: Some(lo),
                        ..RawStep::default()
                    }),
                    _ => self.leave(link.line(), "pause of a duration that is not a constant"),
                }
            }
            "repeat" => {
                let Some(n) = args.first().and_then(|a| self.num(a)) else {
                    self.leave(link.line(), "repeat of a count that is not a constant");
                    return;
                };
                // Scala `repeat(n) { chain }`, Java `repeat(n).on(chain)`
                // (the `on` link follows: its chain is read there).
                let mut inner = Vec::new();
                for body in args.iter().skip(1) {
                    let body = self.resolve(body).clone();
                    self.exec(&body, &mut inner, depth + 1);
                }
                steps.push(RawStep {
                    repeat: Some(n as u32),
                    steps: Some(inner),
                    ..RawStep::default()
                });
            }
            "on" => {
                // Java: the body of the `repeat` just before.
                let mut inner = Vec::new();
                for body in args {
                    let body = self.resolve(body).clone();
                    self.exec(&body, &mut inner, depth + 1);
                }
                match steps.last_mut() {
                    Some(RawStep {
                        repeat: Some(_),
                        steps: Some(s),
                        ..
                    }) => s.extend(inner),
                    _ => steps.extend(inner),
                }
            }
            "feed" => {
                let Some(f) = args.first() else { return };
                match self.feeder(f) {
                    // Each iteration takes a row of every feeder; inside a
                    // loop, each pass takes another.
                    Some(name) if depth > 0 => steps.push(RawStep {
                        feed: Some(name),
                        ..RawStep::default()
                    }),
                    Some(_) => {}
                    None => self.leave(
                        link.line(),
                        "feed of something other than a csv/tsv/json file",
                    ),
                }
            }
            "group" => {
                for a in args.iter().skip(1) {
                    let a = self.resolve(a).clone();
                    self.exec(&a, steps, depth);
                }
            }
            other => self.leave(
                link.line(),
                &format!("`{other}` (not carried over; its steps are not run)"),
            ),
        }
    }

    /// What `exec(…)` runs: a request, a chain, a block of chains.
    fn exec(&mut self, x: &Node, steps: &mut Vec<RawStep>, depth: usize) {
        match x {
            Node::Block(items) => {
                for i in items {
                    let i = self.resolve(i).clone();
                    self.exec(&i, steps, depth);
                }
            }
            Node::Call { .. } => {
                let chain = x.chain();
                if chain.first().is_some_and(|c| c.name() == "http") {
                    if let Some(name) = self.request(x) {
                        steps.push(RawStep {
                            request: Some(name),
                            ..RawStep::default()
                        });
                    }
                } else {
                    for link in chain {
                        let resolved = self.resolve(link).clone();
                        if resolved != *link {
                            self.exec(&resolved, steps, depth);
                        } else {
                            self.link(link, steps, depth);
                        }
                    }
                }
            }
            other => self.leave(
                other.line(),
                "exec of something other than a request or a chain",
            ),
        }
    }

    /// `http("name").get(url)…`: the request's name.
    /// `.body(StringBody(…) | ElFileBody(…) | RawFileBody(…))` of a
    /// constant, on the request the chain made.
    fn request_body(&mut self, link: &Node, req: Option<&mut RawRequest>) {
        let body = link.args().first().map(|b| self.resolve(b).clone());
        let kind = body.as_ref().map(|b| {
            b.chain()
                .first()
                .map(|c| c.name().to_string())
                .unwrap_or_default()
        });
        let inner = body.as_ref().and_then(|b| {
            b.chain()
                .first()
                .and_then(|c| c.args().first())
                .and_then(|a| self.text(a))
        });
        match (kind.as_deref(), inner, req) {
            (Some("StringBody"), Some(t), Some(req)) => req.body = Some(t),
            (Some("ElFileBody" | "RawFileBody"), Some(f), Some(req)) => {
                if kind.as_deref() == Some("ElFileBody") {
                    self.leave(link.line(), "ElFileBody: the file is sent as it is (its #{…} expressions are not filled in)");
                }
                req.body_file = Some(f);
            }
            _ => self.leave(
                link.line(),
                "body other than StringBody, ElFileBody or RawFileBody of a constant",
            ),
        }
    }

    fn request(&mut self, x: &Node) -> Option<String> {
        let chain = x.chain();
        let title = chain
            .first()
            .and_then(|h| h.args().first())
            .and_then(|a| self.text(a));
        let mut r: Option<RawRequest> = None;
        let mut query: Vec<(String, String)> = Vec::new();
        let mut form: Vec<(String, String)> = Vec::new();
        for link in chain.iter().skip(1) {
            let args = link.args();
            let text = |i: usize| args.get(i).and_then(|a| self.text(a));
            let name = link.name();
            match name {
                "get" | "post" | "put" | "patch" | "delete" | "head" | "options" => {
                    let Some(url) = text(0) else {
                        self.leave(link.line(), "request whose URL is not a constant");
                        return None;
                    };
                    let method = name.to_ascii_uppercase();
                    let mut req = request(&mut self.taken, &method, &url);
                    // A whole URL from a feeder (`${url}`) is the request's URL.
                    if url.starts_with("{{") || url.starts_with("http") {
                        req.path = None;
                        req.url = Some(url);
                    }
                    if let Some(t) = &title {
                        let n = self.taken.entry(t.clone()).or_insert(0);
                        *n += 1;
                        req.name = if *n == 1 {
                            t.clone()
                        } else {
                            format!("{t} #{n}")
                        };
                    }
                    r = Some(req);
                }
                "header" => match (text(0), text(1), r.as_mut()) {
                    (Some(k), Some(v), Some(req)) if !managed_header(&k) => {
                        req.headers.get_or_insert_with(BTreeMap::new).insert(k, v);
                    }
                    _ => self.leave(link.line(), "header"),
                },
                "asJson" => {
                    if let Some(req) = r.as_mut() {
                        let h = req.headers.get_or_insert_with(BTreeMap::new);
                        h.insert("Content-Type".into(), "application/json".into());
                        h.insert("Accept".into(), "application/json".into());
                    }
                }
                "body" => self.request_body(link, r.as_mut()),
                "formParam" => match (text(0), text(1)) {
                    (Some(k), Some(v)) => form.push((k, v)),
                    _ => self.leave(link.line(), "formParam"),
                },
                "queryParam" => match (text(0), text(1)) {
                    (Some(k), Some(v)) => query.push((k, v)),
                    _ => self.leave(link.line(), "queryParam"),
                },
                "check" => {
                    for c in args {
                        let c = self.resolve(c).clone();
                        if let Some(req) = r.as_mut() {
                            let mut req_taken = std::mem::take(req);
                            self.check(&c, &mut req_taken);
                            *req = req_taken;
                        }
                    }
                }
                other => self.leave(link.line(), &format!("`{other}` on a request")),
            }
        }
        let mut req = r?;
        if !query.is_empty() {
            let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let target = req.path.as_mut().or(req.url.as_mut())?;
            target.push(if target.contains('?') { '&' } else { '?' });
            target.push_str(&q.join("&"));
        }
        if !form.is_empty() {
            let body: Vec<String> = form
                .iter()
                .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
                .collect();
            req.body = Some(body.join("&"));
            req.headers.get_or_insert_with(BTreeMap::new).insert(
                "Content-Type".into(),
                "application/x-www-form-urlencoded".into(),
            );
        }
        let name = req.name.clone();
        self.requests.push(req);
        Some(name)
    }

    /// `status.is(200)`, `status.in(200, 201)`, `jsonPath("$.a").saveAs("a")`,
    /// `regex("…").saveAs("x")`, `bodyString.is("…")`, `substring("…").exists`.
    fn check(&mut self, c: &Node, req: &mut RawRequest) {
        let chain = c.chain();
        // Kotlin's DSL says `shouldBe` for `is`.
        let names: Vec<&str> = chain
            .iter()
            .map(|l| {
                if l.name() == "shouldBe" {
                    "is"
                } else {
                    l.name()
                }
            })
            .collect();
        let arg0 = |i: usize| chain.get(i).and_then(|l| l.args().first());
        let save = chain
            .iter()
            .find(|l| l.name() == "saveAs")
            .and_then(|l| l.args().first())
            .and_then(|a| self.text(a));
        match names.as_slice() {
            ["status", "is"] => {
                if let Some(code) = arg0(1).and_then(|a| self.num(a)) {
                    req.checks.push(RawCheck {
                        status: Some(RawStatus::One(code as u16)),
                        ..RawCheck::default()
                    });
                    return;
                }
            }
            ["status", "in"] => {
                let codes: Option<Vec<u16>> = chain[1]
                    .args()
                    .iter()
                    .map(|a| self.num(a).map(|v| v as u16))
                    .collect();
                if let Some(codes) = codes {
                    req.checks.push(RawCheck {
                        status: Some(RawStatus::List(codes)),
                        ..RawCheck::default()
                    });
                    return;
                }
            }
            ["jsonPath", ..] | ["regex", ..] | ["header", ..] => {
                let what = arg0(0).and_then(|a| self.text(a));
                if let (Some(what), Some(to)) = (what.clone(), save) {
                    let mut e = RawExtract {
                        name: to.clone(),
                        ..RawExtract::default()
                    };
                    match names[0] {
                        "jsonPath" => e.json_path = Some(what),
                        "regex" => e.regex = Some(what),
                        _ => e.header = Some(what),
                    }
                    req.extracts.push(e);
                    self.saved.push(to);
                    return;
                }
                if let (Some(what), ["jsonPath", "exists"]) = (what, names.as_slice()) {
                    req.checks.push(RawCheck {
                        json_path: Some(what),
                        exists: Some(true),
                        ..RawCheck::default()
                    });
                    return;
                }
            }
            ["bodyString", "is"] => {
                if let Some(t) = arg0(1).and_then(|a| self.text(a)) {
                    req.checks.push(RawCheck {
                        body_regex: Some(format!("^{}$", regex::escape(&t))),
                        ..RawCheck::default()
                    });
                    return;
                }
            }
            ["substring", "exists"] | ["substring"] => {
                if let Some(t) = arg0(0).and_then(|a| self.text(a)) {
                    req.checks.push(RawCheck {
                        body_contains: Some(t),
                        ..RawCheck::default()
                    });
                    return;
                }
            }
            _ => {}
        }
        self.leave(c.line(), &format!("check `{}`", names.join(".")));
    }

    /// `csv("f").random`: the feeder's name (added once).
    fn feeder(&mut self, f: &Node) -> Option<String> {
        let (key, f) = match f {
            Node::Call {
                target: None,
                name,
                called: false,
                ..
            } => (Some(name.clone()), self.resolve(f).clone()),
            other => (None, other.clone()),
        };
        let chain = f.chain();
        let first = chain.first()?;
        if !matches!(first.name(), "csv" | "tsv" | "jsonFile" | "ssv") {
            return None;
        }
        let file = first.args().first().and_then(|a| self.text(a))?;
        let name = key.unwrap_or_else(|| {
            std::path::Path::new(&file)
                .file_stem()
                .map_or("data".into(), |s| s.to_string_lossy().to_string())
        });
        if first.name() != "csv" && first.name() != "jsonFile" {
            self.leave(
                first.line(),
                &format!("`{}` feeder (headroom reads .csv and .json)", first.name()),
            );
        }
        let order = chain.iter().skip(1).find_map(|l| match l.name() {
            "random" => Some(FeederOrder::Random),
            "circular" => Some(FeederOrder::Circular),
            "queue" => Some(FeederOrder::Sequential),
            "shuffle" => Some(FeederOrder::Unique),
            _ => None,
        });
        if !self.feeders.iter().any(|x| x.name == name) {
            self.feeders.push(RawFeeder {
                name: name.clone(),
                file,
                // Gatling's default is a queue: each row once.
                order: Some(order.unwrap_or(FeederOrder::Sequential)),
                scope: None,
            });
        }
        Some(name)
    }

    /// `global.responseTime.percentile3.lt(800)`,
    /// `global.failedRequests.percent.lt(1)`, … → thresholds.
    fn assertion(&mut self, a: &Node, out: &mut BTreeMap<String, RawThreshold>) {
        let chain = a.chain();
        let names: Vec<&str> = chain.iter().map(|l| l.name()).collect();
        let bound = chain
            .last()
            .and_then(|l| Some((l.name(), self.num(l.args().first()?)?)));
        let op = |o: &str| match o {
            "lt" => Some("<"),
            "lte" => Some("<="),
            "gt" => Some(">"),
            "gte" => Some(">="),
            _ => None,
        };
        let got = match (names.as_slice(), bound) {
            (["global", "responseTime", stat, o], Some((_, v))) => {
                let key = match *stat {
                    "max" => Some("max".to_string()),
                    "mean" => Some("mean".to_string()),
                    "percentile1" => Some("p50".into()),
                    "percentile2" => Some("p75".into()),
                    "percentile3" => Some("p95".into()),
                    "percentile4" => Some("p99".into()),
                    _ => None,
                };
                key.zip(op(o))
                    .map(|(k, o)| (k, format!("{o}{}ms", number_text(v))))
            }
            (["global", "failedRequests", "percent", o], Some((_, v))) => {
                op(o).map(|o| ("errors".to_string(), format!("{o}{}%", number_text(v))))
            }
            (["global", "successfulRequests", "percent", o], Some((_, v))) => {
                // OK % > v  ⇔  errors % < 100 − v
                let flipped = match *o {
                    "gt" => Some("<"),
                    "gte" => Some("<="),
                    _ => None,
                };
                flipped.map(|o| {
                    (
                        "errors".to_string(),
                        format!("{o}{}%", number_text(100.0 - v)),
                    )
                })
            }
            _ => None,
        };
        match got {
            Some((k, b)) => {
                out.insert(k, RawThreshold::Bound(b));
            }
            None => self.leave(a.line(), &format!("assertion `{}`", names.join("."))),
        }
    }
}

fn header(scenario: &mut RawScenario, k: String, v: String) {
    scenario
        .http
        .get_or_insert_with(RawHttp::default)
        .headers
        .get_or_insert_with(BTreeMap::new)
        .insert(k, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The write-up's simulation, as printed (Gatling 1.x syntax).
    pub const RANDOM_URL_SIMULATION: &str =
        include_str!("../../../examples/gatling/RandomUrlSimulation.scala");

    #[test]
    fn the_write_ups_simulation_ramps_1000_users_over_10_s_each_sending_10_random_urls() {
        let i = import(RANDOM_URL_SIMULATION, Language::Scala).unwrap();
        // Only the advice on where the whole URLs go.
        assert_eq!(i.left_out.len(), 1, "{:?}", i.left_out);
        assert!(
            i.left_out[0].starts_with("line 14:") && i.left_out[0].contains("--connect-to"),
            "{:?}",
            i.left_out
        );
        let s = &i.scenario;
        let l = s.load.as_ref().unwrap();
        assert_eq!(
            (l.model, l.users, l.over.as_deref()),
            (Some(Model::Open), Some(1000), Some("10s"))
        );
        assert_eq!(s.feeders[0].file, "urls.csv");
        assert_eq!(s.feeders[0].order, Some(FeederOrder::Random));
        let r = &s.requests[0];
        assert_eq!(
            (r.name.as_str(), r.url.as_deref()),
            ("test", Some("{{url}}"))
        );
        assert_eq!(r.checks[0].status, Some(RawStatus::One(200)));
        let steps = &s.sessions[0].steps;
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].repeat, Some(10));
        let inner = steps[0].steps.as_ref().unwrap();
        // A row each pass, then the request.
        assert_eq!(inner[0].feed.as_deref(), Some("urls"));
        assert_eq!(inner[1].request.as_deref(), Some("test"));
    }

    #[test]
    fn a_modern_java_simulation() {
        let java = r##"
import static io.gatling.javaapi.core.CoreDsl.*;
import static io.gatling.javaapi.http.HttpDsl.*;
import io.gatling.javaapi.core.*;
import io.gatling.javaapi.http.*;
import java.time.Duration;

public class ShopSimulation extends Simulation {
  HttpProtocolBuilder httpProtocol = http.baseUrl("http://127.0.0.1:8080").acceptHeader("application/json");
  FeederBuilder<String> users = csv("users.csv").circular();
  ScenarioBuilder scn = scenario("Shop")
    .feed(users)
    .exec(http("login").post("/login").body(StringBody("{\"user\":\"#{name}\"}")).asJson()
      .check(status().is(200), jsonPath("$.token").saveAs("token")))
    .pause(1, 2)
    .repeat(3).on(exec(http("items").get("/items").header("Authorization", "Bearer #{token}").queryParam("page", "1")))
    .exec(http("logout").delete("/session").check(status().in(200, 204)));
  {
    setUp(scn.injectOpen(constantUsersPerSec(5).during(Duration.ofSeconds(30))))
      .protocols(httpProtocol)
      .assertions(global().responseTime().percentile3().lt(800), global().failedRequests().percent().lt(1.0));
  }
}
"##;
        let i = import(java, Language::Java).unwrap();
        assert!(i.left_out.is_empty(), "{:?}", i.left_out);
        let s = &i.scenario;
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(
            s.http.as_ref().unwrap().headers.as_ref().unwrap()["Accept"],
            "application/json"
        );
        let stage = &s.load.as_ref().unwrap().stages.as_ref().unwrap()[0];
        assert_eq!((stage.rate, stage.duration.as_str()), (Some(5.0), "30s"));
        let login = &s.requests[0];
        assert_eq!(login.body.as_deref(), Some("{\"user\":\"{{name}}\"}"));
        assert_eq!(login.extracts[0].json_path.as_deref(), Some("$.token"));
        let items = &s.requests[1];
        assert_eq!(items.path.as_deref(), Some("/items?page=1"));
        assert_eq!(
            items.headers.as_ref().unwrap()["Authorization"],
            "Bearer {{token}}"
        );
        assert_eq!(
            s.requests[2].checks[0].status,
            Some(RawStatus::List(vec![200, 204]))
        );
        let steps: Vec<String> = s.sessions[0]
            .steps
            .iter()
            .map(|x| format!("{:?}/{:?}/{:?}", x.request, x.think, x.repeat))
            .collect();
        assert_eq!(
            steps,
            [
                "Some(\"login\")/None/None",
                "None/Some(\"1s..2s\")/None",
                "None/None/Some(3)",
                "Some(\"logout\")/None/None"
            ]
        );
        let t = s.thresholds.as_ref().unwrap();
        assert_eq!((t["p95"].bound(), t["errors"].bound()), ("<800ms", "<1%"));
    }

    #[test]
    fn a_kotlin_simulation() {
        let kotlin = r##"
import io.gatling.javaapi.core.CoreDsl.*
import io.gatling.javaapi.http.HttpDsl.*
import io.gatling.javaapi.core.Simulation
import java.time.Duration

class ShopSimulation : Simulation() {
  val httpProtocol = http.baseUrl("http://127.0.0.1:8080").acceptHeader("application/json")
  val ids = csv("ids.csv").random()
  val scn = scenario("Shop")
    .exec(http("home").get("/hello").check(status().shouldBe(200)))
    .repeat(2).on(
      feed(ids),
      exec(http("item").get("/items/#{id}").check(status().`is`(200), jsonPath("$.name").saveAs("name")))
    )
    .pause(Duration.ofMillis(500))

  init {
    setUp(scn.injectOpen(rampUsers(20).during(Duration.ofSeconds(10)))).protocols(httpProtocol)
  }
}
"##;
        let i = import(kotlin, Language::Kotlin).unwrap();
        let s = &i.scenario;
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:8080"));
        let l = s.load.as_ref().unwrap();
        assert_eq!((l.users, l.over.as_deref()), (Some(20), Some("10s")));
        assert_eq!(s.feeders[0].order, Some(FeederOrder::Random));
        assert_eq!(s.requests[1].path.as_deref(), Some("/items/{{id}}"));
        assert_eq!(s.requests[1].checks[0].status, Some(RawStatus::One(200)));
        assert_eq!(
            s.requests[1].extracts[0].json_path.as_deref(),
            Some("$.name")
        );
        let steps = &s.sessions[0].steps;
        assert_eq!(steps[1].repeat, Some(2));
        assert_eq!(steps[2].think.as_deref(), Some("500ms"));
        assert_eq!(
            s.requests[0].checks[0].status,
            Some(RawStatus::One(200)),
            "shouldBe"
        );
        assert!(i.left_out.is_empty(), "{:?}", i.left_out);
    }

    #[test]
    fn what_is_not_read_is_listed_with_its_line_and_bad_source_is_refused() {
        let scala = "import io.gatling.core.Predef._\nclass S extends Simulation {\n  val scn = scenario(\"s\")\n    .exec(http(\"a\").get(\"/a\"))\n    .doIf(\"${x}\") { exec(http(\"b\").get(\"/b\")) }\n  setUp(scn.inject(atOnceUsers(1))).throttle(reachRps(10) in (5 seconds))\n}\n";
        let i = import(scala, Language::Scala).unwrap();
        let lines: Vec<&str> = i
            .left_out
            .iter()
            .map(|l| l.split(':').next().unwrap())
            .collect();
        assert_eq!(lines, ["line 5", "line 6"], "{:?}", i.left_out);
        let e = import(
            "class S extends Simulation {\n  val x = (\n}\n",
            Language::Scala,
        )
        .unwrap_err();
        assert!(e.starts_with("line "), "{e}");
        assert!(import("class S {}\n", Language::Java)
            .unwrap_err()
            .contains("setUp"));
    }
}
