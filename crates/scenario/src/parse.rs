//! Text → `Raw*` types, for every file of ours (scenarios, studies), with
//! every problem located and named:
//!
//! 1. nesting deeper than [`MAX_NESTING`] is refused before parsing (a YAML
//!    file nested 100,000 levels took the parser 30 s of CPU to reject);
//! 2. the first problem comes from the format's own deserializer, at its
//!    exact line and column, with the path of the field it is in
//!    (`request[1].weight: invalid type: …`);
//! 3. the rest: the text is read as a tree, the offending field is taken
//!    out, and the tree deserialized again — up to [`MAX_PROBLEMS`] —
//!    so one run of headroom lists every wrong field, not just the first.

use crate::errors::{line_col, suggest_key, Locator, Problem};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::{Path, Segment};

/// Deepest nesting of `[` / `{` accepted: far beyond any real file.
pub const MAX_NESTING: usize = 64;

/// Most problems listed at once.
pub const MAX_PROBLEMS: usize = 20;

/// Deserializes a TOML file of ours: unknown keys and wrong types are
/// located and named, and a misspelt key gets the nearest one.
pub fn parse_toml<T: DeserializeOwned>(text: &str) -> Result<T, Vec<Problem>> {
    check_nesting(text)?;
    let first = match toml::de::Deserializer::parse(text) {
        Ok(de) => match serde_path_to_error::deserialize::<_, T>(de) {
            Ok(value) => return Ok(value),
            Err(e) => {
                let (line, column) = e.inner().span().map_or((0, 0), |s| line_col(text, s.start));
                problem(Some(e.path()), e.inner().message().trim(), line, column)
            }
        },
        // A syntax error: nothing to read further.
        Err(e) => {
            let (line, column) = e.span().map_or((0, 0), |s| line_col(text, s.start));
            return Err(vec![problem(None, e.message().trim(), line, column).0]);
        }
    };
    let tree = toml::from_str::<toml::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_value(v).ok());
    Err(with_the_rest::<T>(text, first, tree))
}

/// As [`parse_toml`], for YAML.
pub fn parse_yaml<T: DeserializeOwned>(text: &str) -> Result<T, Vec<Problem>> {
    check_nesting(text)?;
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let first = match serde_path_to_error::deserialize::<_, T>(de) {
        Ok(value) => return Ok(value),
        Err(e) => {
            let inner = e.inner();
            let (line, column) = inner.location().map_or((0, 0), |l| (l.line(), l.column()));
            let message = inner.to_string();
            // serde_yaml_ng appends " at line L column C"; we print our own.
            let message = message.split(" at line ").next().unwrap_or(&message);
            problem(Some(e.path()), message, line, column)
        }
    };
    let tree = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_value(v).ok());
    Err(with_the_rest::<T>(text, first, tree))
}

/// The first problem, then those found by taking each offending field out
/// of `tree` and trying again.
fn with_the_rest<T: DeserializeOwned>(
    text: &str,
    first: (Problem, Vec<Segment>),
    tree: Option<Value>,
) -> Vec<Problem> {
    let (first, mut path) = first;
    let mut problems = vec![first];
    let Some(mut tree) = tree else {
        return problems;
    };
    let locator = Locator { text };
    while problems.len() < MAX_PROBLEMS && remove(&mut tree, &path) {
        match serde_path_to_error::deserialize::<_, T>(&tree) {
            Ok(_) => break,
            Err(e) => {
                let segments: Vec<Segment> = e.path().iter().cloned().collect();
                let (key, anchor) = key_and_anchor(&tree, &segments);
                let (line, column) = locator.find(anchor.as_deref(), &key, &key);
                let (next, _) = problem(Some(e.path()), &e.inner().to_string(), line, column);
                if problems.iter().any(|p| p.message == next.message) {
                    break;
                }
                problems.push(next);
                path = segments;
            }
        }
    }
    problems.sort_by_key(|p| (p.line == 0, p.line, p.column));
    problems
}

/// A deserializer's complaint as a problem: the field's path first, and
/// the nearest key suggested for an unknown one.
fn problem(
    path: Option<&Path>,
    message: &str,
    line: usize,
    column: usize,
) -> (Problem, Vec<Segment>) {
    let segments: Vec<Segment> = path.map_or(Vec::new(), |p| p.iter().cloned().collect());
    let mut message = match suggest_key(message) {
        Some(key) if message.contains("unknown field") => {
            format!("{message} — did you mean `{key}`?")
        }
        _ => message.to_string(),
    };
    let named = !segments.is_empty() && !matches!(segments.last(), Some(Segment::Unknown));
    if let Some(path) = path.filter(|_| named && !message.contains("unknown field")) {
        message = format!("{path}: {message}");
    }
    (
        Problem {
            line,
            column,
            message,
        },
        segments,
    )
}

/// Takes the field at `path` out of the tree (an unknown field, or one of
/// the wrong type); `false` when there is nothing to take.
fn remove(tree: &mut Value, path: &[Segment]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut node = tree;
    for segment in parents {
        node = match (segment, node) {
            (Segment::Seq { index }, Value::Array(items)) => match items.get_mut(*index) {
                Some(item) => item,
                None => return false,
            },
            (Segment::Map { key }, Value::Object(map)) => match map.get_mut(key) {
                Some(v) => v,
                None => return false,
            },
            _ => return false,
        };
    }
    match (last, node) {
        (Segment::Map { key }, Value::Object(map)) => map.remove(key).is_some(),
        (Segment::Seq { index }, Value::Array(items)) if *index < items.len() => {
            items.remove(*index);
            true
        }
        _ => false,
    }
}

/// The key to point at, and the `name` of the table it sits in (to find
/// the right `[[request]]` among several).
fn key_and_anchor(tree: &Value, path: &[Segment]) -> (String, Option<String>) {
    let mut node = Some(tree);
    let mut anchor = None;
    let mut key = String::new();
    for segment in path {
        node = match (segment, node) {
            (Segment::Seq { index }, Some(Value::Array(items))) => items.get(*index),
            (Segment::Map { key: k }, Some(Value::Object(map))) => {
                key = k.clone();
                map.get(k)
            }
            _ => None,
        };
        if let Some(name) = node.and_then(|n| n.get("name")).and_then(Value::as_str) {
            anchor = Some(name.to_string());
        }
    }
    (key, anchor)
}

/// Refuses nesting of `[` / `{` deeper than [`MAX_NESTING`] (outside
/// quotes and comments), at the bracket that goes too deep.
pub fn check_nesting(text: &str) -> Result<(), Vec<Problem>> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut escaped = false;
    for (offset, c) in text.char_indices() {
        if comment {
            comment = c != '\n';
            continue;
        }
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q || c == '\n' {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '#' => comment = true,
            '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    let (line, column) = line_col(text, offset);
                    return Err(vec![Problem {
                        line,
                        column,
                        message: format!(
                            "nested more than {MAX_NESTING} levels deep: no scenario or study needs that"
                        ),
                    }]);
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::RawScenario;

    #[test]
    fn deep_nesting_is_refused_at_once_in_both_formats() {
        let deep = format!("base_url: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let started = std::time::Instant::now();
        let problems = parse_yaml::<RawScenario>(&deep).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!((problems[0].line, problems[0].column), (1, 75));
        assert!(problems[0].message.contains("nested more than 64 levels"));
        let toml = format!("base_url = {}{}\n", "[".repeat(1000), "]".repeat(1000));
        assert!(parse_toml::<RawScenario>(&toml).unwrap_err()[0]
            .message
            .contains("nested more than 64"));
        // Brackets in strings and comments do not count.
        let fine = format!("base_url = \"{}\" # {}\n", "[".repeat(100), "{".repeat(100));
        assert!(check_nesting(&fine).is_ok());
    }

    #[test]
    fn every_wrong_type_is_named_with_its_field_and_line() {
        let text = r#"base_url = "http://127.0.0.1:1"
[load]
vus = "many"
duration = "10s"

[[request]]
name = "a"
path = "/a"

[[request]]
name = "b"
path = "/b"
weight = 0.3
"#;
        let problems = parse_toml::<RawScenario>(text).unwrap_err();
        let shown: Vec<(usize, &str)> = problems
            .iter()
            .map(|p| (p.line, p.message.as_str()))
            .collect();
        assert_eq!(problems.len(), 2, "{shown:?}");
        assert_eq!(problems[0].line, 3, "{shown:?}");
        assert!(problems[0].message.starts_with("load.vus: "), "{shown:?}");
        assert_eq!(problems[1].line, 13, "{shown:?}");
        assert!(
            problems[1].message.starts_with("request[1].weight: "),
            "{shown:?}"
        );
        assert!(problems[1].message.contains("0.3"), "{shown:?}");
        // The same in YAML.
        let yaml = "base_url: http://127.0.0.1:1\nload:\n  vus: many\nrequest:\n  - name: a\n    path: /a\n    weight: 0.3\n";
        let problems = parse_yaml::<RawScenario>(yaml).unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].message.starts_with("load.vus: "),
            "{problems:?}"
        );
        assert_eq!(problems[1].line, 7, "{problems:?}");
        assert!(
            problems[1].message.starts_with("request[0].weight: "),
            "{problems:?}"
        );
    }
}
