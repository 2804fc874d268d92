//! A request's `check = [...]` and `extract = [...]`: what is verified and
//! what is taken from each response.

use super::builder::{Builder, BUILTINS};
use crate::raw::*;
use headroom_engine::plan::check::{
    Check, CheckKind, Extract, ExtractFrom, HeaderExpect, JsonExpect,
};
use headroom_engine::plan::template::Template;

impl Builder<'_> {
    pub(super) fn checks(&mut self, r: &RawRequest, names: &mut Vec<String>) -> Vec<Check> {
        let a = Some(r.name.as_str());
        let mut out = Vec::new();
        for c in &r.checks {
            let kinds = [
                c.status.is_some(),
                c.body_contains.is_some(),
                c.body_regex.is_some(),
                c.json_path.is_some(),
                c.header.is_some(),
                c.response_time_under.is_some(),
            ];
            if kinds.iter().filter(|&&k| k).count() != 1 {
                self.problem(a, "check", "check", format!(
                    "request `{}`: each check has exactly one of status, body_contains, body_regex, json_path, header, response_time_under",
                    r.name
                ));
                continue;
            }
            let (kind, describe) = if let Some(s) = &c.status {
                let Some(set) = self.status_set(a, s) else {
                    continue;
                };
                let d = format!("status {}", set.describe());
                (CheckKind::Status(set), d)
            } else if let Some(s) = &c.body_contains {
                let Some(t) = self.template(a, "body_contains", s) else {
                    continue;
                };
                (CheckKind::BodyContains(t), format!("body contains {s:?}"))
            } else if let Some(re) = &c.body_regex {
                match regex::Regex::new(re) {
                    Ok(compiled) => (
                        CheckKind::BodyRegex(compiled),
                        format!("body matches /{re}/"),
                    ),
                    Err(e) => {
                        self.problem(
                            a,
                            "body_regex",
                            re,
                            format!("request `{}`: body_regex: {e}", r.name),
                        );
                        continue;
                    }
                }
            } else if let Some(p) = &c.json_path {
                let Some(check) = self.json_check(r, c, p) else {
                    continue;
                };
                check
            } else if let Some(h) = &c.header {
                let Some(check) = self.header_check(r, c, h) else {
                    continue;
                };
                check
            } else {
                let t = c.response_time_under.as_deref().unwrap_or_default();
                let Some(bound) = self.duration(a, "response_time_under", t) else {
                    continue;
                };
                (
                    CheckKind::ResponseTimeUnder(bound),
                    format!("response time < {t}"),
                )
            };
            if c.equals.is_some() && c.json_path.is_none() && c.header.is_none() {
                self.problem(
                    a,
                    "equals",
                    "equals",
                    format!(
                        "request `{}`: `equals` goes with json_path or header",
                        r.name
                    ),
                );
            }
            let id = names.len() as u32;
            names.push(format!(
                "{}: {}",
                r.name,
                c.name.clone().unwrap_or(describe)
            ));
            out.push(Check { id, kind });
        }
        out
    }

    /// A `json_path` check: `equals` a value (or a template), or `exists`.
    fn json_check(&mut self, r: &RawRequest, c: &RawCheck, p: &str) -> Option<(CheckKind, String)> {
        let a = Some(r.name.as_str());
        let path = self.json_path(a, p, &r.name)?;
        let (expect, d) = match (&c.equals, c.exists) {
            (Some(serde_json::Value::String(v)), None) if v.contains("{{") => {
                let t = self.template(a, "equals", v)?;
                (JsonExpect::EqualsText(t), format!("json {p} == {v:?}"))
            }
            (Some(v), None) => (JsonExpect::Equals(v.clone()), format!("json {p} == {v}")),
            (None, Some(e)) => (
                JsonExpect::Exists(e),
                format!("json {p} {}", if e { "exists" } else { "absent" }),
            ),
            (None, None) => (JsonExpect::Exists(true), format!("json {p} exists")),
            (Some(_), Some(_)) => {
                self.problem(
                    a,
                    "json_path",
                    p,
                    format!(
                        "request `{}`: a json_path check takes `equals` or `exists`, not both",
                        r.name
                    ),
                );
                return None;
            }
        };
        Some((CheckKind::Json { path, expect }, d))
    }

    /// A `header` check: `equals` a value (or a template), or `present`.
    fn header_check(
        &mut self,
        r: &RawRequest,
        c: &RawCheck,
        h: &str,
    ) -> Option<(CheckKind, String)> {
        let a = Some(r.name.as_str());
        let text = match &c.equals {
            Some(serde_json::Value::String(v)) => Some(v.clone()),
            other => other.as_ref().map(|v| v.to_string()),
        };
        // An expected value may use the user's variables.
        let want = match text.as_deref().map(|v| self.template(a, "equals", v)) {
            Some(None) => return None,
            Some(t) => t,
            None => None,
        };
        let (expect, d) = match (want, c.present) {
            (Some(t), None) => (
                HeaderExpect::Equals(t),
                format!("header {h} == {:?}", text.unwrap_or_default()),
            ),
            (None, Some(p)) => (
                HeaderExpect::Present(p),
                format!("header {h} {}", if p { "present" } else { "absent" }),
            ),
            (None, None) => (HeaderExpect::Present(true), format!("header {h} present")),
            (Some(_), Some(_)) => {
                self.problem(
                    a,
                    "header",
                    h,
                    format!(
                        "request `{}`: a header check takes `equals` or `present`, not both",
                        r.name
                    ),
                );
                return None;
            }
        };
        Some((
            CheckKind::Header {
                name: h.to_string(),
                expect,
            },
            d,
        ))
    }

    fn json_path(
        &mut self,
        a: Option<&str>,
        p: &str,
        request: &str,
    ) -> Option<headroom_engine::plan::json_query::JsonQuery> {
        match headroom_engine::plan::json_query::JsonQuery::parse(p) {
            Ok(path) => Some(path),
            Err(e) => {
                self.problem(
                    a,
                    "json_path",
                    p,
                    format!("request `{request}`: json_path `{p}`: {e}"),
                );
                None
            }
        }
    }

    pub(super) fn extracts(&mut self, r: &RawRequest, names: &mut Vec<String>) -> Vec<Extract> {
        let a = Some(r.name.as_str());
        let mut out = Vec::new();
        for x in &r.extracts {
            let sources = [
                x.json_path.is_some(),
                x.regex.is_some(),
                x.header.is_some(),
                x.cookie.is_some(),
            ];
            if sources.iter().filter(|&&s| s).count() != 1 {
                self.problem(a, "extract", &x.name, format!(
                    "request `{}`: extract `{}` needs exactly one of json_path, regex, header, cookie",
                    r.name, x.name
                ));
                continue;
            }
            if Template::parse(&format!("{{{{{}}}}}", x.name)).is_err()
                || BUILTINS.contains(&x.name.as_str())
            {
                self.problem(
                    a,
                    "name",
                    &x.name,
                    format!(
                        "request `{}`: `{}` cannot be a variable name",
                        r.name, x.name
                    ),
                );
                continue;
            }
            let from = if let Some(p) = &x.json_path {
                let Some(path) = self.json_path(a, p, &r.name) else {
                    continue;
                };
                ExtractFrom::Json(path)
            } else if let Some(re) = &x.regex {
                match regex::Regex::new(re) {
                    Ok(compiled) => {
                        let group = x.group.unwrap_or(1);
                        if group > compiled.captures_len() - 1 && x.group.is_some() {
                            self.problem(
                                a,
                                "group",
                                re,
                                format!("request `{}`: regex has no group {group}", r.name),
                            );
                            continue;
                        }
                        ExtractFrom::Regex(compiled, group)
                    }
                    Err(e) => {
                        self.problem(a, "regex", re, format!("request `{}`: regex: {e}", r.name));
                        continue;
                    }
                }
            } else if let Some(h) = &x.header {
                ExtractFrom::Header(h.clone())
            } else {
                ExtractFrom::Cookie(x.cookie.clone().unwrap_or_default())
            };
            let id = names.len() as u32;
            names.push(format!("{}: extract {}", r.name, x.name));
            out.push(Extract {
                id,
                var: x.name.clone(),
                from,
            });
        }
        out
    }
}
