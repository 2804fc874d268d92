//! `{{name}}` templates in URLs, headers and bodies, compiled once into
//! literal and variable parts and rendered per request into a reused buffer.
//!
//! Variables come from feeders and extractions; built-ins are `user_id`,
//! `iteration`, `uuid()`, `timestamp()` (Unix milliseconds), `timestamp_s()`
//! and `random_int(LOW, HIGH)` (inclusive).
//!
//! In a request's target a variable's value is data: it is percent-encoded
//! (as JavaScript's `encodeURIComponent`), so no value can add a path
//! segment, a query parameter or a line to the request. `{{raw(name)}}`
//! writes a value that is itself a path or URL as it is — and a variable
//! that begins the target (`path = "{{path}}"`, `url = "{{url}}"`) is one.
//! Either way the request writer encodes what no request line may hold
//! ([`headroom_http::RequestWriter`]).

use std::collections::HashMap;

/// A user's variables by name. Looked up a few times per request, so
/// hashed with FxHash, not SipHash (the names are the plan's own, not an
/// attacker's).
pub type Vars = HashMap<String, String, rustc_hash::FxBuildHasher>;

/// What `encodeURIComponent` leaves alone: letters, digits and
/// `-_.!~*'()`; everything else in a value is percent-encoded.
const COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Literal(String),
    Var(String),
    /// `{{raw(name)}}`: a value written into a target unencoded.
    RawVar(String),
    UserId,
    Iteration,
    Uuid,
    TimestampMs,
    TimestampS,
    RandomInt(i64, i64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

/// The values a template can read, for one user at one moment.
pub struct Scope<'a> {
    pub vars: &'a Vars,
    pub user_id: u64,
    pub iteration: u64,
    pub rng: &'a mut fastrand::Rng,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("`{{{{` without a closing `}}}}`")]
    Unclosed,
    #[error("empty `{{{{}}}}`")]
    Empty,
    #[error("`{0}` is not a variable name or a built-in (user_id, iteration, uuid(), timestamp(), timestamp_s(), random_int(LOW, HIGH), raw(NAME))")]
    BadExpression(String),
    #[error("random_int({0}): expected two integers LOW ≤ HIGH, e.g. random_int(1, 100)")]
    BadRandom(String),
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

impl Template {
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_string()));
            }
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or(TemplateError::Unclosed)?;
            let expr = after[..close].trim();
            parts.push(Self::expression(expr)?);
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        Ok(Template { parts })
    }

    fn expression(expr: &str) -> Result<Part, TemplateError> {
        if expr.is_empty() {
            return Err(TemplateError::Empty);
        }
        Ok(match expr {
            "user_id" => Part::UserId,
            "iteration" => Part::Iteration,
            "uuid()" | "uuid" => Part::Uuid,
            "timestamp()" | "timestamp" => Part::TimestampMs,
            "timestamp_s()" => Part::TimestampS,
            _ => {
                if let Some(name) = expr
                    .strip_prefix("raw(")
                    .and_then(|a| a.strip_suffix(')'))
                    .map(str::trim)
                    .filter(|name| is_name(name))
                {
                    Part::RawVar(name.to_string())
                } else if let Some(args) = expr
                    .strip_prefix("random_int(")
                    .and_then(|a| a.strip_suffix(')'))
                {
                    let nums: Vec<Option<i64>> =
                        args.split(',').map(|a| a.trim().parse().ok()).collect();
                    match nums[..] {
                        [Some(lo), Some(hi)] if lo <= hi => Part::RandomInt(lo, hi),
                        _ => return Err(TemplateError::BadRandom(args.to_string())),
                    }
                } else if is_name(expr) {
                    Part::Var(expr.to_string())
                } else {
                    return Err(TemplateError::BadExpression(expr.to_string()));
                }
            }
        })
    }

    /// A template without any `{{…}}`.
    pub fn is_static(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Literal(_)))
    }

    /// Renders to a path: it begins with a literal `/`, so no value can
    /// make it a full URL on another origin.
    pub fn is_path(&self) -> bool {
        matches!(self.parts.first(), Some(Part::Literal(l)) if l.starts_with('/'))
    }

    /// Names of the variables (not built-ins) it reads.
    pub fn vars(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(v) | Part::RawVar(v) => Some(v.as_str()),
            _ => None,
        })
    }

    /// The template of a request target written as `text`: a variable
    /// that begins it supplies a whole path or URL, so it is raw.
    pub fn parse_target(text: &str) -> Result<Template, TemplateError> {
        let mut t = Template::parse(text)?;
        if let Some(Part::Var(name)) = t.parts.first_mut() {
            let name = std::mem::take(name);
            t.parts[0] = Part::RawVar(name);
        }
        Ok(t)
    }

    /// The template with `prefix` (a base URL's path) before it.
    pub fn prefixed(mut self, prefix: &str) -> Template {
        if !prefix.is_empty() {
            self.parts.insert(0, Part::Literal(prefix.to_string()));
        }
        self
    }

    /// Appends the rendered text to `out`. A variable not set yet renders
    /// as empty (validation makes sure something can set it).
    pub fn render(&self, scope: &mut Scope, out: &mut Vec<u8>) {
        self.render_into(scope, out, false);
    }

    /// Appends the rendered request target to `out`: variables
    /// percent-encoded, raw ones as they are (see the module's comment).
    pub fn render_target(&self, scope: &mut Scope, out: &mut Vec<u8>) {
        self.render_into(scope, out, true);
    }

    fn render_into(&self, scope: &mut Scope, out: &mut Vec<u8>, encode_vars: bool) {
        use std::io::Write;
        for p in &self.parts {
            match p {
                Part::Literal(l) => out.extend_from_slice(l.as_bytes()),
                Part::Var(v) => {
                    if let Some(value) = scope.vars.get(v) {
                        if encode_vars {
                            for piece in percent_encoding::utf8_percent_encode(value, COMPONENT) {
                                out.extend_from_slice(piece.as_bytes());
                            }
                        } else {
                            out.extend_from_slice(value.as_bytes());
                        }
                    }
                }
                Part::RawVar(v) => {
                    if let Some(value) = scope.vars.get(v) {
                        out.extend_from_slice(value.as_bytes());
                    }
                }
                Part::UserId => {
                    let _ = write!(out, "{}", scope.user_id);
                }
                Part::Iteration => {
                    let _ = write!(out, "{}", scope.iteration);
                }
                Part::Uuid => {
                    let _ = write!(out, "{}", uuid::Uuid::new_v4());
                }
                Part::TimestampMs | Part::TimestampS => {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default();
                    let value = if *p == Part::TimestampMs {
                        now.as_millis()
                    } else {
                        now.as_secs() as u128
                    };
                    let _ = write!(out, "{value}");
                }
                Part::RandomInt(lo, hi) => {
                    let _ = write!(out, "{}", scope.rng.i64(*lo..=*hi));
                }
            }
        }
    }

    /// The rendered text, borrowed when the template is one literal or
    /// one variable (a check's expected value, compared on every response).
    pub fn text<'t>(&'t self, scope: &mut Scope<'t>) -> std::borrow::Cow<'t, str> {
        match &self.parts[..] {
            [] => std::borrow::Cow::Borrowed(""),
            [Part::Literal(l)] => std::borrow::Cow::Borrowed(l),
            [Part::Var(v) | Part::RawVar(v)] => {
                std::borrow::Cow::Borrowed(scope.vars.get(v).map_or("", String::as_str))
            }
            _ => std::borrow::Cow::Owned(self.render_string(scope)),
        }
    }

    pub fn render_string(&self, scope: &mut Scope) -> String {
        let mut out = Vec::new();
        self.render(scope, &mut out);
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f` given a scope of user 42, iteration 3 and `vars`.
    fn in_scope<T>(vars: &[(&str, &str)], f: impl FnOnce(&mut Scope) -> T) -> T {
        let vars: Vars = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut scope = Scope {
            vars: &vars,
            user_id: 42,
            iteration: 3,
            rng: &mut rng,
        };
        f(&mut scope)
    }

    fn render(t: &str, vars: &[(&str, &str)]) -> String {
        in_scope(vars, |scope| {
            Template::parse(t).unwrap().render_string(scope)
        })
    }

    #[test]
    fn renders_variables_and_builtins() {
        assert_eq!(
            render(
                "/item/{{id}}?u={{ user_id }}&i={{iteration}}",
                &[("id", "7")]
            ),
            "/item/7?u=42&i=3"
        );
        assert_eq!(render("plain", &[]), "plain");
        let r: i64 = render("{{random_int(5, 9)}}", &[]).parse().unwrap();
        assert!((5..=9).contains(&r));
        assert_eq!(render("{{uuid()}}", &[]).len(), 36);
        assert!(render("{{timestamp()}}", &[]).parse::<u64>().unwrap() > 1_600_000_000_000);
    }

    fn render_target(t: &str, vars: &[(&str, &str)]) -> String {
        let mut out = Vec::new();
        in_scope(vars, |scope| {
            Template::parse_target(t)
                .unwrap()
                .prefixed("/base")
                .render_target(scope, &mut out)
        });
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_value_in_a_target_is_encoded_unless_it_is_the_whole_path_or_raw() {
        let value = [("v", "a b/c?d=1&e#\r\nX: y")];
        assert_eq!(
            render_target("/x/{{v}}?q={{v}}", &value),
            "/base/x/a%20b%2Fc%3Fd%3D1%26e%23%0D%0AX%3A%20y?q=a%20b%2Fc%3Fd%3D1%26e%23%0D%0AX%3A%20y"
        );
        // The request writer encodes what no target may hold in these.
        assert_eq!(render_target("{{v}}", &value), "/basea b/c?d=1&e#\r\nX: y");
        assert_eq!(
            render_target("/x/{{raw(v)}}", &value),
            "/base/x/a b/c?d=1&e#\r\nX: y"
        );
        // Outside a target (headers, bodies) a value is written as it is.
        assert_eq!(render("{{v}}", &value), "a b/c?d=1&e#\r\nX: y");
        assert_eq!(
            render_target("/u/{{user_id}}/{{ok}}", &[("ok", "A-z_0.9~")]),
            "/base/u/42/A-z_0.9~"
        );
    }

    #[test]
    fn parse_errors() {
        assert_eq!(Template::parse("/a/{{id"), Err(TemplateError::Unclosed));
        assert_eq!(Template::parse("{{ }}"), Err(TemplateError::Empty));
        assert!(matches!(
            Template::parse("{{a b}}"),
            Err(TemplateError::BadExpression(_))
        ));
        assert!(matches!(
            Template::parse("{{random_int(9, 1)}}"),
            Err(TemplateError::BadRandom(_))
        ));
        let t = Template::parse("{{a}}-{{b}}-{{user_id}}").unwrap();
        assert_eq!(t.vars().collect::<Vec<_>>(), vec!["a", "b"]);
        assert!(!t.is_static());
        assert!(Template::parse("/x").unwrap().is_static());
    }
}
