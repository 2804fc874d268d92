//! k6's `options`: the load (`vus`, `duration`, `iterations`, `stages`,
//! the first of `scenarios` by its executor) and `thresholds`.

use super::*;

impl K6<'_, '_> {
    pub(super) fn options_of(
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
pub(super) fn duration_of_k6(text: &str) -> String {
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
