//! `${NAME}` and `${NAME:-default}` in a scenario or study file, expanded
//! from the environment before parsing (`$${` writes a literal `${`) —
//! only inside string values, so every file stays valid TOML or YAML for
//! editors and validators (`vus = "${USERS:-10}"`; numeric fields accept
//! such a string). In YAML, whose plain scalars are strings, everywhere
//! but comments; in TOML, inside strings only, and a `${` outside one is
//! an error that says how to write it. Comments are left alone.

use super::errors::{line_col, Problem};
use super::Format;

/// Expands `${…}` where `format` allows it (see the module's doc).
pub fn expand_in(
    text: &str,
    format: Format,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, Vec<Problem>> {
    let (spans, comments) = match format {
        Format::Toml => toml_strings_and_comments(text),
        Format::Yaml => (yaml_outside_comments(text), Vec::new()),
    };
    let mut problems = Vec::new();
    if format == Format::Toml {
        for at in bare_expressions(text, &spans, &comments) {
            let (line, column) = line_col(text, at);
            let end = text[at..].find('}').map_or(text.len(), |e| at + e + 1);
            let expr = &text[at..end];
            problems.push(Problem {
                line,
                column,
                message: format!(
                    "`{expr}` outside a string: write \"{expr}\" — headroom expands ${{…}} only \
                     inside strings, so the file stays valid TOML (a number field takes the string)"
                ),
            });
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for (a, b) in spans {
        out.push_str(&text[done..a]);
        match expand(&text[a..b], &lookup) {
            Ok(expanded) => out.push_str(&expanded),
            Err(found) => problems.extend(found.into_iter().map(|mut p| {
                // Positions are the span's: make them the file's.
                let (line, column) = line_col(text, a);
                if p.line == 1 {
                    p.column += column - 1;
                }
                p.line += line - 1;
                p
            })),
        }
        done = b;
    }
    out.push_str(&text[done..]);
    if problems.is_empty() {
        Ok(out)
    } else {
        problems.sort_by_key(|p| (p.line, p.column));
        Err(problems)
    }
}

type Spans = Vec<(usize, usize)>;

/// Byte ranges of the contents of TOML's strings (basic, literal and their
/// multi-line forms, keys included), and of its comments.
fn toml_strings_and_comments(text: &str) -> (Spans, Spans) {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut comments = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'#' => {
                let start = i;
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                comments.push((start, i));
            }
            q @ (b'"' | b'\'') => {
                let multi = b[i..].starts_with(if q == b'"' { b"\"\"\"" } else { b"'''" });
                let open = if multi { 3 } else { 1 };
                let start = i + open;
                let mut j = start;
                let end = loop {
                    if j >= b.len() || (!multi && b[j] == b'\n') {
                        break j;
                    }
                    if q == b'"' && b[j] == b'\\' {
                        j += 2;
                        continue;
                    }
                    if b[j] == q && (!multi || b[j..].starts_with(&[q, q, q])) {
                        break j;
                    }
                    j += 1;
                };
                let end = end.min(b.len());
                spans.push((start, end));
                i = (end + open).min(b.len());
            }
            _ => i += 1,
        }
    }
    (spans, comments)
}

/// Byte ranges of a YAML file outside its comments (`#` at a line's start
/// or after a space, outside quotes).
fn yaml_outside_comments(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let mut quote: Option<char> = None;
        let mut cut = line.len();
        let mut prev = ' ';
        for (k, c) in line.char_indices() {
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, '#') if prev.is_whitespace() => {
                    cut = k;
                    break;
                }
                _ => {}
            }
            prev = c;
        }
        spans.push((line_start, line_start + cut));
        line_start += line.len();
    }
    spans
}

/// Where `${` appears outside strings and comments (TOML).
fn bare_expressions(
    text: &str,
    strings: &[(usize, usize)],
    comments: &[(usize, usize)],
) -> Vec<usize> {
    let inside =
        |spans: &[(usize, usize)], at: usize| spans.iter().any(|&(a, b)| a <= at && at < b);
    text.match_indices("${")
        .map(|(at, _)| at)
        .filter(|&at| !(at > 0 && text.as_bytes()[at - 1] == b'$'))
        .filter(|&at| !inside(strings, at) && !inside(comments, at))
        .collect()
}

/// Expands every `${…}` in `text`.
pub fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, Vec<Problem>> {
    let mut out = String::with_capacity(text.len());
    let mut problems = Vec::new();
    let mut i = 0;
    while let Some(found) = text[i..].find("${") {
        let at = i + found;
        if at > 0 && text.as_bytes()[at - 1] == b'$' {
            out.push_str(&text[i..at - 1]);
            out.push_str("${");
            i = at + 2;
            continue;
        }
        out.push_str(&text[i..at]);
        let Some(len) = text[at + 2..].find('}') else {
            let (line, column) = line_col(text, at);
            problems.push(Problem {
                line,
                column,
                message: "`${` without a closing `}`".into(),
            });
            break;
        };
        let expr = &text[at + 2..at + 2 + len];
        let (name, default) = match expr.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (expr, None),
        };
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        let (line, column) = line_col(text, at);
        if !valid {
            problems.push(Problem {
                line,
                column,
                message: format!("`${{{expr}}}`: not an environment variable name"),
            });
        } else {
            match (lookup(name), default) {
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => problems.push(Problem {
                    line,
                    column,
                    message: format!(
                        "environment variable {name} is not set (set it, or write ${{{name}:-default}})"
                    ),
                }),
            }
        }
        i = at + 2 + len + 1;
    }
    out.push_str(&text[i.min(text.len())..]);
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "PORT").then(|| "9090".to_string())
    }

    #[test]
    fn expansion() {
        assert_eq!(expand("a ${PORT} b", env).unwrap(), "a 9090 b");
        assert_eq!(expand("${MISSING:-5s}", env).unwrap(), "5s");
        assert_eq!(expand("${PORT:-1}", env).unwrap(), "9090");
        assert_eq!(expand("$${PORT}", env).unwrap(), "${PORT}");
        assert_eq!(expand("no vars", env).unwrap(), "no vars");
        let e = expand("x\n  y = \"${NOPE}\"", env).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (2, 8));
        assert!(e[0].message.contains("NOPE is not set"));
        assert!(expand("${unclosed", env).is_err());
        assert!(expand("${1BAD}", env).is_err());
    }

    #[test]
    fn toml_expands_inside_strings_only_and_leaves_comments_alone() {
        let text = "# ${NOPE} in a comment\nport = \"${PORT}\" # ${NOPE}\nx = '${PORT}'\ny = \"\"\"\n${PORT}\"\"\"\n";
        let got = expand_in(text, Format::Toml, env).unwrap();
        assert_eq!(
            got,
            "# ${NOPE} in a comment\nport = \"9090\" # ${NOPE}\nx = '9090'\ny = \"\"\"\n9090\"\"\"\n"
        );
        let e = expand_in("a = 1\nvus = ${USERS:-10}\n", Format::Toml, env).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (2, 7));
        assert!(
            e[0].message.contains("write \"${USERS:-10}\""),
            "{}",
            e[0].message
        );
        // A problem inside a string is located in the file.
        let e = expand_in("a = 1\nb = \"x ${NOPE}\"\n", Format::Toml, env).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (2, 8));
    }

    #[test]
    fn yaml_expands_plain_scalars_but_not_comments() {
        let text = "vus: ${PORT} # ${NOPE}\nurl: \"a#${PORT}\"\n# ${NOPE}\n";
        let got = expand_in(text, Format::Yaml, env).unwrap();
        assert_eq!(got, "vus: 9090 # ${NOPE}\nurl: \"a#9090\"\n# ${NOPE}\n");
    }
}
