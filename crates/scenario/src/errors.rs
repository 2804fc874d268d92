//! Scenario errors that say where: file, line, column, and what to do.
//! Validation collects every problem before reporting (not just the first).

use headroom_engine::plan::limits;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file, or "command line" for flags.
    pub source: PathBuf,
    pub problems: Vec<Problem>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            if p.line == 0 {
                write!(f, "{}: {}", self.source.display(), p.message)?;
            } else {
                write!(
                    f,
                    "{}:{}:{}: {}",
                    self.source.display(),
                    p.line,
                    p.column,
                    p.message
                )?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// The problems of one file, each located in its text: what the scenario
/// builder and the study checker both collect, with the same rules and
/// messages for the values they share (durations and their limits).
pub struct Problems<'a> {
    pub locator: Locator<'a>,
    list: Vec<Problem>,
}

impl<'a> Problems<'a> {
    pub fn new(text: &'a str) -> Problems<'a> {
        Problems {
            locator: Locator { text },
            list: Vec::new(),
        }
    }

    /// Records a problem where `needle` appears (after `anchor`, on a line
    /// with `key` if possible).
    pub fn add(&mut self, anchor: Option<&str>, key: &str, needle: &str, message: String) {
        let (line, column) = self.locator.find(anchor, key, needle);
        self.list.push(Problem {
            line,
            column,
            message,
        });
    }

    /// A problem of the whole file (no place to point at).
    pub fn add_unlocated(&mut self, message: String) {
        self.list.push(Problem {
            line: 0,
            column: 0,
            message,
        });
    }

    pub fn extend(&mut self, problems: Vec<Problem>) {
        self.list.extend(problems);
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// `value` when no problem was found, else every problem.
    pub fn into_result<T>(self, value: T) -> Result<T, Vec<Problem>> {
        if self.list.is_empty() {
            Ok(value)
        } else {
            Err(self.list)
        }
    }

    /// The duration `text` of `field`, within headroom's limits (at most a
    /// year; above zero where zero means nothing), or a problem.
    pub fn duration(&mut self, anchor: Option<&str>, field: &str, text: &str) -> Option<Duration> {
        match humantime::parse_duration(text.trim()) {
            Ok(d) => match limits::check_duration(field, d, limits::must_be_positive(field)) {
                Ok(d) => Some(d),
                Err(e) => {
                    self.add(anchor, field, text, e);
                    None
                }
            },
            Err(e) => {
                self.add(
                    anchor,
                    field,
                    text,
                    format!("{field}: `{text}` is not a duration ({e}); write e.g. 500ms, 30s, 2m"),
                );
                None
            }
        }
    }
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
    (line, column)
}

/// Finds where a value appears in the source, to point an error at it.
/// Searches from `anchor` (e.g. the enclosing request's name) when given,
/// preferring a line that also holds `key`.
pub struct Locator<'a> {
    pub text: &'a str,
}

impl<'a> Locator<'a> {
    pub fn find(&self, anchor: Option<&str>, key: &str, needle: &str) -> (usize, usize) {
        let start = anchor
            .and_then(|a| self.text.find(&quoted(a)).or_else(|| self.text.find(a)))
            .map_or(0, |p| self.text[..p].rfind('\n').map_or(0, |n| n + 1));
        let hay = &self.text[start..];
        let candidates = |n: &str| {
            hay.match_indices(n)
                .map(|(i, _)| start + i)
                .collect::<Vec<_>>()
        };
        // An exact value first ("hom" must not match inside "home"): quoted,
        // then bare on a word boundary, then anywhere.
        let bounded = |n: &str| {
            candidates(n)
                .into_iter()
                .filter(|&i| {
                    let after = self.text[i + n.len()..].chars().next();
                    !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
                .collect::<Vec<_>>()
        };
        let mut hits = Vec::new();
        if !needle.is_empty() {
            for attempt in [
                candidates(&format!("\"{needle}\"")),
                candidates(&format!("'{needle}'")),
                bounded(needle),
                candidates(needle),
            ] {
                if !attempt.is_empty() {
                    hits = attempt;
                    break;
                }
            }
        }
        if hits.is_empty() && !key.is_empty() {
            hits = candidates(key);
        }
        let on_key_line = hits.iter().copied().find(|&i| {
            let line_start = self.text[..i].rfind('\n').map_or(0, |n| n + 1);
            let line_end = self.text[i..].find('\n').map_or(self.text.len(), |n| i + n);
            key.is_empty() || self.text[line_start..line_end].contains(key)
        });
        match on_key_line.or_else(|| hits.first().copied()) {
            Some(i) => line_col(self.text, i),
            None => (0, 0),
        }
    }
}

fn quoted(s: &str) -> String {
    format!("\"{s}\"")
}

/// "did you mean `x`?" for a misspelt key, from serde's list of expected
/// keys in an "unknown field" message.
pub fn suggest_key(message: &str) -> Option<String> {
    let unknown = message.split('`').nth(1)?;
    let expected = message.split("expected").nth(1)?;
    let best = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|k| (strsim::jaro_winkler(unknown, k), k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    Some(best.1.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions() {
        let text = "a = 1\n[load]\nvus = 5\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, text.find("vus").unwrap()), (3, 1));
        assert_eq!(line_col(text, text.find("5").unwrap()), (3, 7));
        let loc = Locator { text };
        assert_eq!(loc.find(None, "vus", "5"), (3, 7));
    }

    #[test]
    fn suggestions() {
        let m = "unknown field `vuss`, expected one of `model`, `vus`, `ramp_up`";
        assert_eq!(suggest_key(m).as_deref(), Some("vus"));
        let m = "unknown field `zzz`, expected one of `model`, `vus`";
        assert_eq!(suggest_key(m), None);
    }
}
