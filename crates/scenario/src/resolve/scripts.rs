//! `[script]` and the code steps and hooks run: the file read and compiled
//! once here (a syntax error is a problem before any load, at its
//! file:line:column), each `js`, `if`, `while`, `before` and `after` turned
//! into a piece of the program the engine runs — a function the file
//! exports, or code written inline.

use super::builder::{Builder, Scripts};
use crate::raw::{RawScenario, RawScript};
use headroom_engine::plan::RequestSpec;
use headroom_js::{Code, Program, ScriptFile};
use std::sync::Arc;

/// Most rounds of a `while` without a `max`.
pub(super) const DEFAULT_WHILE_MAX: u32 = 100;

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

impl Builder<'_> {
    /// `[script]`: the file read and compiled, the budgets.
    pub(super) fn script_section(&mut self, raw: &RawScenario) {
        let Some(section) = &raw.script else {
            return;
        };
        let RawScript {
            file,
            timeout,
            memory_mib,
            seed,
        } = section;
        let mut scripts = Scripts {
            seed: *seed,
            ..Scripts::default()
        };
        if let Some(t) = timeout {
            if let Some(d) = self.duration(Some("script"), "timeout", t) {
                scripts.limits.call_time = d;
            }
        }
        if let Some(mib) = memory_mib {
            scripts.limits.call_memory = (*mib as usize) << 20;
        }
        if let Some(name) = file {
            let path = self.path(name);
            match std::fs::read_to_string(&path) {
                Ok(source) => {
                    let file = ScriptFile {
                        name: name.clone(),
                        source,
                    };
                    match headroom_js::exports(&file) {
                        Ok(exports) => scripts.exports = exports,
                        Err(e) => {
                            scripts.broken = true;
                            self.problem(Some("script"), "file", name, format!("script: {e}"));
                        }
                    }
                    scripts.file = Some(file);
                }
                Err(e) => {
                    scripts.broken = true;
                    self.problem(
                        Some("script"),
                        "file",
                        name,
                        format!("script: cannot read {}: {e}", path.display()),
                    );
                }
            }
        }
        self.scripts = scripts;
    }

    /// The piece of code `text` runs (a condition when `expression`),
    /// written at `origin`: its index in the program.
    pub(super) fn script_code(
        &mut self,
        (anchor, key): (Option<&str>, &str),
        text: &str,
        expression: bool,
        origin: String,
    ) -> usize {
        let code = if !expression && is_identifier(text.trim()) {
            let name = text.trim();
            let scripts = &self.scripts;
            if !scripts.exports.iter().any(|e| e == name) && !scripts.broken {
                let message = match &scripts.file {
                    Some(f) => format!(
                        "{origin}: {} exports no function `{name}` (it exports: {})",
                        f.name,
                        if scripts.exports.is_empty() {
                            "none".to_string()
                        } else {
                            scripts.exports.join(", ")
                        }
                    ),
                    None => format!(
                        "{origin}: `{name}` names a function, but there is no [script] file"
                    ),
                };
                self.problem(anchor, key, name, message);
            }
            Code::Export(name.to_string())
        } else {
            Code::Inline {
                code: text.to_string(),
                expression,
                origin,
            }
        };
        let code_list = &mut self.scripts.code;
        match code_list.iter().position(|c| *c == code) {
            Some(i) => i,
            None => {
                code_list.push(code);
                code_list.len() - 1
            }
        }
    }

    /// The variables the scripts name (`vars.name`, `vars["name"]`): what
    /// templates may use beside feeders and extractions.
    pub(super) fn script_variables(&self) -> Vec<String> {
        // `vars.name`, `vars["name"]`, and a store's `set("name", …)`
        // (Postman's `pm.environment.set`, carried over by the importer).
        let pattern = regex::Regex::new(
            r#"vars\s*(?:\.\s*([A-Za-z_$][\w$]*)|\[\s*["']([^"']+)["']\s*\])|\.set\(\s*["']([^"']+)["']"#,
        )
        .expect("a valid pattern");
        let scripts = &self.scripts;
        let texts =
            scripts
                .file
                .iter()
                .map(|f| f.source.as_str())
                .chain(scripts.code.iter().filter_map(|c| match c {
                    Code::Inline { code, .. } => Some(code.as_str()),
                    Code::Export(_) => None,
                }));
        texts
            .flat_map(|t| pattern.captures_iter(t).collect::<Vec<_>>())
            .filter_map(|c| c.get(1).or_else(|| c.get(2)).or_else(|| c.get(3)))
            .map(|m| m.as_str().to_string())
            .collect()
    }

    /// `before` and `after` of each request of the file: hooks, and the
    /// check an `after` failure counts under.
    pub(super) fn request_hooks(
        &mut self,
        raw: &RawScenario,
        requests: &mut [RequestSpec],
        check_names: &mut Vec<String>,
    ) {
        for (r, spec) in raw.requests.iter().zip(requests.iter_mut()) {
            let anchor = Some(r.name.as_str());
            if let Some(before) = &r.before {
                let origin = format!("request `{}` before", r.name);
                spec.before = Some(self.script_code((anchor, "before"), before, false, origin));
            }
            if let Some(after) = &r.after {
                let origin = format!("request `{}` after", r.name);
                let code = self.script_code((anchor, "after"), after, false, origin);
                // As the engine counts it (told apart from a like one).
                let label = headroom_js::unique_labels(&self.scripts.code[..=code]).remove(code);
                check_names.push(format!("after: {label}"));
                spec.after = Some((code, (check_names.len() - 1) as u32));
            }
        }
    }

    /// The program, once every section added its code: each inline piece
    /// compiled (its problems located by its text). Requests then keep
    /// their response's headers and body for scripts to read.
    pub(super) fn script_program(&mut self, requests: &mut [RequestSpec]) -> Option<Arc<Program>> {
        let scripts = std::mem::take(&mut self.scripts);
        if scripts.file.is_none() && scripts.code.is_empty() {
            return None;
        }
        let program = Program {
            file: scripts.file,
            code: scripts.code,
            limits: scripts.limits,
            seed: scripts.seed,
        };
        if !scripts.broken {
            if let Err(problems) = program.check() {
                for p in problems {
                    let needle = program
                        .code
                        .iter()
                        .find_map(|c| match c {
                            Code::Inline { code, origin, .. } if p.starts_with(origin.as_str()) => {
                                Some(code.clone())
                            }
                            _ => None,
                        })
                        .unwrap_or_default();
                    self.problem(None, "", &needle, format!("script: {p}"));
                }
            }
        }
        let texts =
            program
                .file
                .iter()
                .map(|f| f.source.as_str())
                .chain(program.code.iter().filter_map(|c| match c {
                    Code::Inline { code, .. } => Some(code.as_str()),
                    Code::Export(_) => None,
                }));
        let (headers, body) = texts
            .map(response_reads)
            .fold((false, false), |(h, b), (h2, b2)| (h || h2, b || b2));
        for spec in requests.iter_mut() {
            spec.capture.headers |= headers;
            spec.capture.body |= body;
        }
        Some(Arc::new(program))
    }
}

/// Whether scripts read the response's headers and its body: a response
/// is kept for them only then (keeping both costs every request a copy).
/// `response.status` needs neither; `response` used any other way (passed
/// on, destructured) needs both.
fn response_reads(text: &str) -> (bool, bool) {
    let (mut headers, mut body) = (false, false);
    for (at, _) in text.match_indices("response") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = text[at + "response".len()..].trim_start();
        let Some(member) = rest.strip_prefix('.') else {
            if rest.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
                continue; // a longer name: `responseTime`
            }
            return (true, true);
        };
        let member = member.trim_start();
        let name: String = member
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        match name.as_str() {
            "status" => {}
            "headers" => headers = true,
            "body" | "json" => body = true,
            _ => return (true, true),
        }
    }
    (headers, body)
}

#[cfg(test)]
mod tests {
    use super::response_reads;

    #[test]
    fn a_response_is_kept_only_for_what_scripts_read() {
        assert_eq!(
            response_reads("ctx.vars.last = ctx.response.status"),
            (false, false)
        );
        assert_eq!(
            response_reads("ctx.response.json().products"),
            (false, true)
        );
        assert_eq!(response_reads("ctx.response.headers['x']"), (true, false));
        assert_eq!(response_reads("check(ctx.response)"), (true, true));
        assert_eq!(
            response_reads("const { body } = ctx.response;"),
            (true, true)
        );
        assert_eq!(
            response_reads("ctx.request.headers['a'] = responseTime"),
            (false, false)
        );
    }
}
