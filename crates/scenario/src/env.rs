//! `${NAME}` and `${NAME:-default}` in a scenario file, expanded from the
//! environment before parsing (`$${` writes a literal `${`).

use super::errors::{line_col, Problem};

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
}
