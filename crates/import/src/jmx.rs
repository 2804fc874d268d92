//! `headroom import jmx PLAN.jmx`: a JMeter test plan → a scenario. What
//! a plan's first enabled Thread Group does becomes one session run by
//! its users: HTTP samplers in order (HTTP Request Defaults as the base
//! URL, Header Managers, raw or form bodies), CSV Data Sets as feeders,
//! Response Assertions as checks, Constant Timers as think times, a
//! Constant Throughput Timer as an open-model rate. JMeter's `${var}`
//! becomes `{{var}}`; its functions (`${__Random(…)}`) are listed as left
//! out.

use super::{managed_header, request, split_url, Imported};
use headroom_scenario::raw::*;
use roxmltree::Node;
use std::collections::BTreeMap;

fn prop<'a>(node: Node<'a, 'a>, name: &str) -> Option<&'a str> {
    node.children()
        .filter(|c| c.is_element())
        .find(|c| c.attribute("name") == Some(name))
        .and_then(|c| c.text())
        .map(str::trim)
}

fn element_prop<'a>(node: Node<'a, 'a>, name: &str) -> Option<Node<'a, 'a>> {
    node.children()
        .filter(|c| c.is_element())
        .find(|c| c.has_tag_name("elementProp") && c.attribute("name") == Some(name))
}

fn enabled(node: Node) -> bool {
    node.attribute("enabled") != Some("false")
}

/// (element, the hashTree of its children) pairs of a hashTree.
fn children<'a>(tree: Node<'a, 'a>) -> Vec<(Node<'a, 'a>, Option<Node<'a, 'a>>)> {
    let elements: Vec<Node> = tree.children().filter(|c| c.is_element()).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < elements.len() {
        let e = elements[i];
        if e.has_tag_name("hashTree") {
            i += 1;
            continue;
        }
        let sub = elements
            .get(i + 1)
            .filter(|n| n.has_tag_name("hashTree"))
            .copied();
        out.push((e, sub));
        i += if sub.is_some() { 2 } else { 1 };
    }
    out
}

/// JMeter's `${name}` → `{{name}}`; functions are reported.
fn template(text: &str, left_out: &mut Vec<String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let Some(end) = rest[at..].find('}') else {
            out.push_str(&rest[at..]);
            return out;
        };
        let name = &rest[at + 2..at + end];
        if name.starts_with("__") {
            left_out.push(format!("JMeter function `${{{name}}}`: kept as written"));
            out.push_str(&rest[at..at + end + 1]);
        } else {
            out.push_str(&format!("{{{{{name}}}}}"));
        }
        rest = &rest[at + end + 1..];
    }
    out + rest
}

struct Defaults {
    protocol: String,
    domain: String,
    port: String,
}

/// `${__P(NAME,default)}` (a JMeter property, set with `-JNAME=…`) → its
/// default; other values as they are.
fn property_default(value: &str) -> String {
    value
        .strip_prefix("${__P(")
        .and_then(|v| v.strip_suffix(")}"))
        .and_then(|v| v.split_once(','))
        .map_or(value.to_string(), |(_, d)| d.trim().to_string())
}

impl Defaults {
    fn url(&self, node: Node, path: &str) -> String {
        let get = |key: &str, default: &str| {
            prop(node, key)
                .filter(|v| !v.is_empty())
                .map(property_default)
                .unwrap_or_else(|| default.to_string())
        };
        let protocol = get("HTTPSampler.protocol", &self.protocol);
        let protocol = if protocol.is_empty() {
            "http".to_string()
        } else {
            protocol
        };
        let domain = get("HTTPSampler.domain", &self.domain);
        let port = get("HTTPSampler.port", &self.port);
        let port = if port.is_empty() {
            String::new()
        } else {
            format!(":{port}")
        };
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        format!("{protocol}://{domain}{port}{path}")
    }
}

pub fn import(text: &str) -> Result<Imported, String> {
    let doc =
        roxmltree::Document::parse(text).map_err(|e| format!("not a JMeter plan (XML): {e}"))?;
    let root = doc.root_element();
    if !root.has_tag_name("jmeterTestPlan") {
        return Err("not a JMeter plan: the root element is not <jmeterTestPlan>".into());
    }
    let mut left_out = Vec::new();
    let top = root
        .children()
        .find(|c| c.has_tag_name("hashTree"))
        .ok_or("the plan has no hashTree")?;
    // TestPlan → its hashTree holds the thread groups and plan-wide config.
    let plan_tree = children(top)
        .into_iter()
        .find(|(e, _)| e.has_tag_name("TestPlan"))
        .and_then(|(_, t)| t)
        .ok_or("the plan has no TestPlan")?;
    let mut defaults = Defaults {
        protocol: "http".into(),
        domain: String::new(),
        port: String::new(),
    };
    let mut scenario = RawScenario::default();
    let mut groups = Vec::new();
    let mut scope = Scope::default();
    for (e, sub) in children(plan_tree) {
        if !enabled(e) {
            continue;
        }
        match e.tag_name().name() {
            "ThreadGroup" => groups.push((e, sub)),
            _ => scope.config(e, &mut defaults, &mut scenario, &mut left_out),
        }
    }
    let mut groups = groups.into_iter();
    let (group, tree) = groups
        .next()
        .ok_or("the plan has no enabled Thread Group")?;
    for (other, _) in groups {
        left_out.push(format!(
            "Thread Group `{}`: only the first one is imported",
            other.attribute("testname").unwrap_or("?")
        ));
    }
    let mut steps = Vec::new();
    let mut taken = BTreeMap::new();
    let mut origin: Option<String> = None;
    if let Some(tree) = tree {
        walk(
            tree,
            &mut defaults,
            &mut scope,
            &mut scenario,
            &mut steps,
            &mut taken,
            &mut origin,
            &mut left_out,
        );
    }
    if scenario.requests.is_empty() {
        return Err("the Thread Group has no HTTP sampler".into());
    }
    for f in &scenario.feeders {
        steps.insert(
            0,
            RawStep {
                feed: Some(f.name.clone()),
                ..RawStep::default()
            },
        );
    }
    scenario.base_url = origin;
    scenario.sessions = vec![RawSession {
        name: group
            .attribute("testname")
            .unwrap_or("thread group")
            .to_string(),
        weight: None,
        steps,
    }];
    scenario.load = Some(group_load(
        group,
        scope.throughput,
        scenario.requests.len(),
        &mut left_out,
    ));
    Ok(Imported {
        scenario,
        left_out,
        script: None,
    })
}

/// The Thread Group's load: its users, ramp-up and loops or scheduled
/// duration — or, under a Constant Throughput Timer (`throughput`: samples
/// a minute, for all threads or each), an open-model rate of sessions.
fn group_load(
    group: Node,
    throughput: Option<(f64, bool)>,
    requests: usize,
    left_out: &mut Vec<String>,
) -> RawLoad {
    let users: u32 = prop(group, "ThreadGroup.num_threads")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let ramp: u64 = prop(group, "ThreadGroup.ramp_time")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let loops: Option<i64> = element_prop(group, "ThreadGroup.main_controller")
        .and_then(|c| prop(c, "LoopController.loops"))
        .and_then(|v| v.parse().ok());
    let scheduler = prop(group, "ThreadGroup.scheduler") == Some("true");
    let duration: Option<u64> = prop(group, "ThreadGroup.duration")
        .and_then(|v| v.parse().ok())
        .filter(|_| scheduler);
    let mut load = RawLoad {
        vus: Some(users),
        ramp_up: (ramp > 0).then(|| format!("{ramp}s")),
        ..RawLoad::default()
    };
    match (loops, duration) {
        (_, Some(d)) => load.duration = Some(format!("{d}s")),
        (Some(n), None) if n > 0 => load.iterations = Some(n as u64),
        _ => {
            load.duration = Some("60s".into());
            left_out.push("loops forever without a scheduler duration: 60s chosen".into());
        }
    }
    if let Some((per_minute, all_threads)) = throughput {
        // JMeter paces samples; headroom's open model starts sessions.
        let samples_per_s = per_minute / 60.0 * if all_threads { 1.0 } else { users as f64 };
        let sessions = samples_per_s / requests as f64;
        left_out.push(format!(
            "Constant Throughput Timer ({per_minute} samples/min{}): became an open-model rate of \
             {sessions:.3} sessions/s — headroom sends arrivals on schedule rather than pacing \
             threads",
            if all_threads {
                " for all threads"
            } else {
                " per thread"
            }
        ));
        let seconds = load.duration.clone().unwrap_or_else(|| "60s".into());
        load = RawLoad {
            model: Some(Model::Open),
            rate: Some(sessions),
            duration: Some(seconds),
            max_connections: Some(users),
            ..RawLoad::default()
        };
    }
    load
}

/// What applies to the samplers of a scope: timers, throughput.
#[derive(Default, Clone)]
struct Scope {
    /// Constant Timer: a think time after each sampler, in ms.
    think_ms: Option<u64>,
    /// Constant Throughput Timer: (samples per minute, for all threads).
    throughput: Option<(f64, bool)>,
    headers: BTreeMap<String, String>,
}

impl Scope {
    /// A configuration element (of the plan, a thread group or a sampler).
    fn config(
        &mut self,
        e: Node,
        defaults: &mut Defaults,
        scenario: &mut RawScenario,
        left_out: &mut Vec<String>,
    ) {
        let name = e.attribute("testname").unwrap_or("").to_string();
        match e.tag_name().name() {
            "ConfigTestElement" if e.attribute("guiclass") == Some("HttpDefaultsGui") => {
                for (key, slot) in [
                    ("HTTPSampler.protocol", &mut defaults.protocol),
                    ("HTTPSampler.domain", &mut defaults.domain),
                    ("HTTPSampler.port", &mut defaults.port),
                ] {
                    if let Some(v) = prop(e, key).filter(|v| !v.is_empty()) {
                        *slot = property_default(v);
                    }
                }
            }
            "HeaderManager" => {
                for h in e.descendants().filter(|n| n.has_tag_name("elementProp")) {
                    if let (Some(k), Some(v)) = (prop(h, "Header.name"), prop(h, "Header.value")) {
                        if managed_header(k) {
                            left_out.push(format!("header `{k}`: headroom sets it itself"));
                        } else {
                            let mut ignore = Vec::new();
                            self.headers.insert(k.to_string(), template(v, &mut ignore));
                            left_out.extend(ignore);
                        }
                    }
                }
            }
            "CSVDataSet" => {
                let file = prop(e, "filename").unwrap_or("").to_string();
                let stem = std::path::Path::new(&file)
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("data")
                    .to_string();
                if prop(e, "variableNames").is_some_and(|v| !v.is_empty()) {
                    left_out.push(format!(
                        "CSV Data Set `{name}`: variableNames given — headroom takes the column \
                         names from the file's header row"
                    ));
                }
                let per_user = prop(e, "shareMode").is_some_and(|m| m.ends_with("thread"));
                let recycle = prop(e, "recycle") != Some("false");
                scenario.feeders.push(RawFeeder {
                    name: stem,
                    file,
                    order: Some(if recycle {
                        headroom_engine::plan::feeder::FeederOrder::Circular
                    } else {
                        headroom_engine::plan::feeder::FeederOrder::Sequential
                    }),
                    scope: per_user.then_some(headroom_engine::plan::feeder::FeederScope::PerUser),
                });
            }
            "ConstantTimer" => {
                self.think_ms = prop(e, "ConstantTimer.delay").and_then(|v| v.parse().ok());
            }
            "ConstantThroughputTimer" => {
                let per_minute = e
                    .descendants()
                    .find(|n| {
                        n.has_tag_name("doubleProp") || n.attribute("name") == Some("throughput")
                    })
                    .and_then(|n| {
                        n.children()
                            .find(|c| c.has_tag_name("value"))
                            .and_then(|v| v.text())
                            .or_else(|| n.text())
                    })
                    .and_then(|v| v.trim().parse::<f64>().ok());
                let all = prop(e, "calcMode").is_some_and(|m| m != "0");
                match per_minute {
                    Some(p) if p > 0.0 => self.throughput = Some((p, all)),
                    _ => {
                        left_out.push(format!("Constant Throughput Timer `{name}`: no throughput"))
                    }
                }
            }
            other => left_out.push(format!("{other} `{name}`: not carried over")),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn walk(
    tree: Node,
    defaults: &mut Defaults,
    scope: &mut Scope,
    scenario: &mut RawScenario,
    steps: &mut Vec<RawStep>,
    taken: &mut BTreeMap<String, u32>,
    origin: &mut Option<String>,
    left_out: &mut Vec<String>,
) {
    // Config and timers first: JMeter applies them to every sampler of the
    // scope, wherever they stand in it.
    let items = children(tree);
    for (e, _) in items.iter().filter(|(e, _)| enabled(*e)) {
        if !matches!(
            e.tag_name().name(),
            "HTTPSamplerProxy"
                | "HTTPSampler"
                | "GenericController"
                | "LoopController"
                | "TransactionController"
        ) {
            scope.config(*e, defaults, scenario, left_out);
        }
    }
    for (e, sub) in items.into_iter().filter(|(e, _)| enabled(*e)) {
        match e.tag_name().name() {
            "HTTPSamplerProxy" | "HTTPSampler" => sampler(
                e, sub, defaults, scope, scenario, steps, taken, origin, left_out,
            ),
            "GenericController" | "TransactionController" => {
                if let Some(sub) = sub {
                    let mut inner = scope.clone();
                    walk(
                        sub, defaults, &mut inner, scenario, steps, taken, origin, left_out,
                    );
                }
            }
            "LoopController" => {
                let n: u32 = prop(e, "LoopController.loops")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1);
                let mut inner_steps = Vec::new();
                if let Some(sub) = sub {
                    let mut inner = scope.clone();
                    walk(
                        sub,
                        defaults,
                        &mut inner,
                        scenario,
                        &mut inner_steps,
                        taken,
                        origin,
                        left_out,
                    );
                }
                steps.push(RawStep {
                    repeat: Some(n),
                    steps: Some(inner_steps),
                    ..RawStep::default()
                });
            }
            _ => {}
        }
    }
}

/// A sampler's path (with `${…}` as templates), on the plan's one
/// origin: `None`, with why left out, when its URL is not one or is on
/// another origin than the first sampler's.
fn sampler_path(
    e: Node,
    label: &str,
    defaults: &mut Defaults,
    origin: &mut Option<String>,
    left_out: &mut Vec<String>,
) -> Option<String> {
    let path = template(prop(e, "HTTPSampler.path").unwrap_or("/"), left_out);
    let url = defaults.url(e, &path);
    // Templates are not URL syntax: kept out of the parse.
    let (o, path) = match split_url(
        &url.replace("{{", "__TPL_OPEN__")
            .replace("}}", "__TPL_CLOSE__"),
    ) {
        Ok((o, p)) => (
            o,
            p.replace("__TPL_OPEN__", "{{")
                .replace("__TPL_CLOSE__", "}}"),
        ),
        Err(err) => {
            left_out.push(format!("sampler `{label}`: {err}"));
            return None;
        }
    };
    match origin {
        Some(first) if *first != o => {
            left_out.push(format!(
                "sampler `{label}`: {o} is another origin than {first}"
            ));
            return None;
        }
        None => *origin = Some(o),
        _ => {}
    }
    Some(path)
}

/// A sampler's arguments (name, value): its query, form or raw body.
fn sampler_arguments(e: Node) -> Vec<(String, String)> {
    element_prop(e, "HTTPsampler.Arguments")
        .into_iter()
        .flat_map(|a| {
            a.descendants()
                .filter(|n| n.has_tag_name("elementProp"))
                .collect::<Vec<_>>()
        })
        .filter_map(|a| {
            Some((
                prop(a, "Argument.name").unwrap_or("").to_string(),
                prop(a, "Argument.value")?.to_string(),
            ))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn sampler(
    e: Node,
    sub: Option<Node>,
    defaults: &mut Defaults,
    scope: &Scope,
    scenario: &mut RawScenario,
    steps: &mut Vec<RawStep>,
    taken: &mut BTreeMap<String, u32>,
    origin: &mut Option<String>,
    left_out: &mut Vec<String>,
) {
    let label = e.attribute("testname").unwrap_or("sampler").to_string();
    let Some(path) = sampler_path(e, &label, defaults, origin, left_out) else {
        return;
    };
    let method = prop(e, "HTTPSampler.method")
        .unwrap_or("GET")
        .to_ascii_uppercase();
    let mut r = request(taken, &method, &path);
    r.name = label.clone();
    if taken.values().sum::<u32>() > 0 && scenario.requests.iter().any(|q| q.name == label) {
        r.name = format!("{label} #{}", scenario.requests.len() + 1);
    }
    let args = sampler_arguments(e);
    let mut headers = scope.headers.clone();
    let mut inner = scope.clone();
    let mut checks = Vec::new();
    let mut expect = None;
    if let Some(sub) = sub {
        for (c, _) in children(sub).into_iter().filter(|(c, _)| enabled(*c)) {
            if c.has_tag_name("ResponseAssertion") {
                assertion(c, &mut checks, &mut expect, left_out);
            } else {
                inner.config(c, defaults, scenario, left_out);
            }
        }
        headers.extend(inner.headers.clone());
    }
    if prop(e, "HTTPSampler.postBodyRaw") == Some("true") {
        r.body = args.first().map(|(_, v)| template(v, left_out));
    } else if !args.is_empty() {
        let pairs: Vec<String> = args
            .iter()
            .map(|(k, v)| format!("{k}={}", template(v, left_out)))
            .collect();
        if method == "GET" || method == "HEAD" || method == "DELETE" {
            let sep = if path.contains('?') { '&' } else { '?' };
            r.path = Some(format!("{path}{sep}{}", pairs.join("&")));
        } else {
            r.body = Some(pairs.join("&"));
            headers
                .entry("Content-Type".into())
                .or_insert_with(|| "application/x-www-form-urlencoded".into());
        }
    }
    if !headers.is_empty() {
        r.headers = Some(headers);
    }
    r.checks = checks;
    r.expect = expect;
    steps.push(RawStep {
        request: Some(r.name.clone()),
        ..RawStep::default()
    });
    if let Some(ms) = inner.think_ms.or(scope.think_ms).filter(|ms| *ms > 0) {
        steps.push(RawStep {
            think: Some(format!("{ms}ms")),
            ..RawStep::default()
        });
    }
    scenario.requests.push(r);
}

/// A Response Assertion → checks (body contains / matches) or the expected
/// status.
fn assertion(
    e: Node,
    checks: &mut Vec<RawCheck>,
    expect: &mut Option<RawExpect>,
    left_out: &mut Vec<String>,
) {
    let name = e.attribute("testname").unwrap_or("assertion").to_string();
    let field = prop(e, "Assertion.test_field").unwrap_or("Assertion.response_data");
    let kind: u32 = prop(e, "Assertion.test_type")
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let strings: Vec<String> = e
        .descendants()
        .filter(|n| {
            n.has_tag_name("collectionProp") && n.attribute("name") == Some("Asserion.test_strings")
        })
        .flat_map(|c| {
            c.children()
                .filter(|s| s.is_element())
                .filter_map(|s| s.text().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    // Bit 4 negates: not carried over.
    if kind & 4 != 0 {
        left_out.push(format!("Response Assertion `{name}`: a negated assertion"));
        return;
    }
    match field {
        "Assertion.response_code" => {
            let codes: Vec<u16> = strings
                .iter()
                .filter_map(|s| s.trim().parse().ok())
                .collect();
            if codes.is_empty() {
                left_out.push(format!("Response Assertion `{name}`: no status code"));
            } else {
                *expect = Some(RawExpect {
                    status: Some(RawStatus::List(codes)),
                });
            }
        }
        "Assertion.response_data" => {
            for s in strings {
                checks.push(RawCheck {
                    name: Some(name.clone()),
                    body_contains: (kind & (2 | 16) != 0).then(|| s.clone()),
                    body_regex: (kind & (1 | 8) != 0).then(|| {
                        if kind & 8 != 0 {
                            format!("^(?:{s})$")
                        } else {
                            s.clone()
                        }
                    }),
                    ..RawCheck::default()
                });
            }
        }
        other => left_out.push(format!("Response Assertion `{name}`: on {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_plan_becomes_one_session_with_its_feeder_and_checks() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/jmeter/plan.jmx"
        ))
        .unwrap();
        let got = import(&text).unwrap();
        let s = &got.scenario;
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:8080"));
        let load = s.load.as_ref().unwrap();
        assert_eq!((load.vus, load.iterations), (Some(4), Some(5)));
        assert_eq!(load.ramp_up.as_deref(), Some("1s"));
        let names: Vec<&str> = s.requests.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["home", "item", "login"]);
        assert_eq!(s.requests[1].path.as_deref(), Some("/item?id={{id}}"));
        assert_eq!(s.requests[2].body.as_deref(), Some(r#"{"user":"u{{id}}"}"#));
        assert_eq!(s.requests[2].method.as_deref(), Some("POST"));
        assert_eq!(
            s.requests[0].headers.as_ref().unwrap()["X-Load-Test"],
            "jmeter-plan"
        );
        assert!(matches!(
            s.requests[0].expect,
            Some(RawExpect { status: Some(RawStatus::List(ref c)) }) if c == &[200]
        ));
        assert_eq!(
            s.requests[1].checks[0].body_contains.as_deref(),
            Some("hello")
        );
        assert_eq!(s.feeders[0].name, "ids");
        let steps = &s.sessions[0].steps;
        assert_eq!(steps[0].feed.as_deref(), Some("ids"));
        assert_eq!(steps.len(), 4);
        // The file parses back, and what was left out is listed.
        headroom_scenario::parse_toml::<RawScenario>(&got.to_toml("plan.jmx")).unwrap();
        assert!(
            got.left_out.iter().all(|l| !l.contains("HTTPSamplerProxy")),
            "{:?}",
            got.left_out
        );
    }

    #[test]
    fn what_cannot_be_carried_over_is_listed() {
        let plan = r#"<jmeterTestPlan><hashTree><TestPlan testname="p"/><hashTree>
          <ThreadGroup testname="a"><stringProp name="ThreadGroup.num_threads">2</stringProp>
            <elementProp name="ThreadGroup.main_controller"><stringProp name="LoopController.loops">-1</stringProp></elementProp>
          </ThreadGroup>
          <hashTree>
            <HTTPSamplerProxy testname="s"><stringProp name="HTTPSampler.domain">h.test</stringProp>
              <stringProp name="HTTPSampler.path">/x/${__Random(1,9)}</stringProp></HTTPSamplerProxy>
            <hashTree/>
            <BeanShellPreProcessor testname="script"/>
            <hashTree/>
          </hashTree>
          <ThreadGroup testname="b"/><hashTree/>
        </hashTree></hashTree></jmeterTestPlan>"#;
        let got = import(plan).unwrap();
        let all = got.left_out.join("\n");
        for expected in [
            "__Random",
            "BeanShellPreProcessor",
            "Thread Group `b`",
            "60s chosen",
        ] {
            assert!(all.contains(expected), "{expected} in {all}");
        }
        assert!(import("<x/>").unwrap_err().contains("jmeterTestPlan"));
    }
}
