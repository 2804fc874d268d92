//! A JSON path as checks and extractions ask it: the first node it finds
//! in a response's body.
//!
//! Parsing a body into a `serde_json::Value` allocates every string, array
//! and map in it — most of what a JSON check cost (a quarter of a scripted
//! request's own CPU, `perf`). A path of member names and indexes
//! (`$.token`, `$.data.items[0].id`, `$['a b']`), which is what checks
//! mostly ask, is answered by one pass over the body that builds only the
//! value found: serde's `IgnoredAny` skips the rest, still validating it,
//! so a body that is not JSON finds nothing, as a full parse would. Any
//! other path (wildcards, filters, slices, descendants, negative indexes)
//! is asked of `serde_json_path` on the document parsed once per response.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json_path::JsonPath;
use std::fmt;

#[derive(Clone, Debug)]
pub struct JsonQuery {
    pub path: JsonPath,
    /// The path as member names and indexes, when it is only those.
    steps: Option<Vec<PathStep>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PathStep {
    Member(String),
    Index(usize),
}

impl JsonQuery {
    pub fn parse(text: &str) -> Result<JsonQuery, serde_json_path::ParseError> {
        Ok(JsonQuery {
            path: JsonPath::parse(text)?,
            steps: plain_steps(text),
        })
    }

    /// Whether one pass over the body answers it (see the module).
    pub fn scans(&self) -> bool {
        self.steps.is_some()
    }

    /// The first node the path finds in `body`, by one pass over it. Only
    /// for a path that [`JsonQuery::scans`].
    pub fn scan(&self, body: &[u8]) -> Option<Value> {
        let steps = self.steps.as_deref()?;
        // A full parse reads every string as UTF-8, and outside strings
        // only ASCII is JSON: so the body must be UTF-8 as a whole, skipped
        // strings too (`IgnoredAny` alone would pass them unchecked). Read
        // as a `str`, the strings are not checked again one by one.
        let text = std::str::from_utf8(body).ok()?;
        let mut de = serde_json::Deserializer::from_str(text);
        let found = Find(steps).deserialize(&mut de).ok()?;
        de.end().ok()?;
        found
    }

    /// The first node the path finds in a parsed document.
    pub fn first<'v>(&self, document: &'v Value) -> Option<&'v Value> {
        self.path.query(document).first()
    }
}

/// `$` followed by `.name`, `['name']`, `["name"]` or `[N]` steps only;
/// `None` for anything else (left to `serde_json_path`).
fn plain_steps(text: &str) -> Option<Vec<PathStep>> {
    let mut rest = text.trim().strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            // RFC 9535's member-name-shorthand.
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()))
                .unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
            steps.push(PathStep::Member(name.to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let (inside, after) = after.split_once(']')?;
            let quoted = |q| inside.strip_prefix(q).and_then(|s: &str| s.strip_suffix(q));
            if let Some(name) = quoted('\'').or_else(|| quoted('"')) {
                // Escapes and quotes inside are left to the full parser.
                if name.contains(['\\', '\'', '"']) {
                    return None;
                }
                steps.push(PathStep::Member(name.to_string()));
            } else {
                let canonical = inside == "0" || !inside.starts_with('0');
                if !canonical || !inside.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                steps.push(PathStep::Index(inside.parse().ok()?));
            }
            rest = after;
        } else {
            return None;
        }
    }
    Some(steps)
}

/// Finds the node at `.0` in the value it is given; `None` when a step
/// finds nothing (a member missing, an index past the end, a value that is
/// not an object or array where one was needed).
struct Find<'s>(&'s [PathStep]);

impl<'de> DeserializeSeed<'de> for Find<'_> {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        match self.0.split_first() {
            None => serde::Deserialize::deserialize(d).map(Some),
            Some((step, rest)) => d.deserialize_any(Step { step, rest }),
        }
    }
}

/// One step of the path, taken in the value at hand.
struct Step<'s> {
    step: &'s PathStep,
    rest: &'s [PathStep],
}

/// A value that is not the object or array the step needs: nothing found.
macro_rules! finds_nothing {
    ($($method:ident($ty:ty)),*) => {
        $(fn $method<E>(self, _: $ty) -> Result<Option<Value>, E> {
            Ok(None)
        })*
    };
}

impl<'de> Visitor<'de> for Step<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    finds_nothing!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64),
        visit_str(&str)
    );

    fn visit_unit<E>(self) -> Result<Option<Value>, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Value>, A::Error> {
        let mut found = None;
        let want = match self.step {
            PathStep::Index(i) => Some(*i),
            PathStep::Member(_) => None,
        };
        let mut at = 0;
        loop {
            if want == Some(at) {
                match seq.next_element_seed(Find(self.rest))? {
                    Some(value) => found = value,
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            at += 1;
        }
        Ok(found)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        let mut found = None;
        let name = match self.step {
            PathStep::Member(name) => Some(name.as_str()),
            PathStep::Index(_) => None,
        };
        while let Some(hit) = map.next_key_seed(KeyIs(name))? {
            if hit {
                // A name given twice: the last one, as a parsed map keeps.
                found = map.next_value_seed(Find(self.rest))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Whether a map's key is the name sought (compared where it lies, not
/// copied).
struct KeyIs<'n>(Option<&'n str>);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(self.0 == Some(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path, on every body: the scan finds what `serde_json_path`
    /// finds in the parsed document.
    #[test]
    fn the_scan_finds_what_the_full_parse_finds() {
        let bodies = [
            r#"{"token":"t-1","n":3,"ok":true,"user":{"name":"ann","tags":["a","b"]}}"#,
            r#"{"data":{"items":[{"id":7},{"id":8}]},"a b":1,"x":null}"#,
            r#"[{"id":1},{"id":2},3]"#,
            r#"{"token":"first","token":"second"}"#,
            r#"{"s":"esc\"aped \u00e9","f":1.5e3,"neg":-4,"big":18446744073709551615}"#,
            r#"{"token":"t-1"} trailing"#,
            r#"{"token":"t-1","cut":"#,
            "not json",
            "",
            r#""a string""#,
        ];
        let paths = [
            "$",
            "$.token",
            "$.n",
            "$.ok",
            "$.user.name",
            "$.user.tags[1]",
            "$.user.tags[5]",
            "$.data.items[0].id",
            "$.data.items[1]",
            "$['a b']",
            "$[\"data\"].items",
            "$.x",
            "$[0].id",
            "$[2]",
            "$.missing.deeper",
            "$.token.length",
            "$.s",
            "$.f",
            "$.neg",
            "$.big",
            "$.user",
        ];
        for text in paths {
            let q = JsonQuery::parse(text).unwrap();
            assert!(q.scans(), "{text} is a plain path");
            for body in bodies {
                let parsed: Option<Value> = serde_json::from_str(body).ok();
                let full = parsed.as_ref().and_then(|v| q.first(v)).cloned();
                assert_eq!(q.scan(body.as_bytes()), full, "{text} in {body}");
            }
        }
    }

    /// Random documents, whole and broken (cut short, a byte changed, a
    /// byte added): for every path, the scan finds what a full parse of
    /// the document finds — nothing when it is not JSON.
    #[test]
    fn the_scan_agrees_with_the_full_parse_on_random_and_broken_documents() {
        fn value(rng: &mut fastrand::Rng, depth: u32, out: &mut String) {
            let pad = |rng: &mut fastrand::Rng, out: &mut String| {
                for _ in 0..rng.usize(..2) {
                    out.push([' ', '\n', '\t', '\r'][rng.usize(..4)]);
                }
            };
            pad(rng, out);
            match rng.usize(..if depth < 4 { 9 } else { 6 }) {
                0 => out.push_str(["true", "false", "null"][rng.usize(..3)]),
                1 => out.push_str(&rng.i32(-999..999).to_string()),
                2 => out.push_str(["1.5", "-0.25e2", "0", "7E-1", "3e+2"][rng.usize(..5)]),
                3..=5 => {
                    let texts = [
                        "a",
                        "b",
                        "c",
                        "tok-1",
                        "",
                        "é",
                        "\\\"q",
                        "x\\u0041",
                        "\\n",
                        "a string longer than thirty-two bytes, é, and \\\" more",
                    ];
                    out.push('"');
                    out.push_str(texts[rng.usize(..texts.len())]);
                    out.push('"');
                }
                6 | 7 => {
                    out.push('{');
                    for i in 0..rng.usize(..4) {
                        if i > 0 {
                            out.push(',');
                        }
                        let names = ["a", "b", "c", "a\\u0062", "d e"];
                        pad(rng, out);
                        out.push_str(&format!("\"{}\"", names[rng.usize(..names.len())]));
                        pad(rng, out);
                        out.push(':');
                        value(rng, depth + 1, out);
                    }
                    pad(rng, out);
                    out.push('}');
                }
                _ => {
                    out.push('[');
                    for i in 0..rng.usize(..4) {
                        if i > 0 {
                            out.push(',');
                        }
                        value(rng, depth + 1, out);
                    }
                    out.push(']');
                }
            }
            pad(rng, out);
        }
        let paths = [
            "$", "$.a", "$.b", "$.ab", "$['d e']", "$[0]", "$[2]", "$.a.b", "$.a[1]", "$.b[0].c",
            "$[1].a", "$.c.c.c",
        ];
        let queries: Vec<JsonQuery> = paths.iter().map(|p| JsonQuery::parse(p).unwrap()).collect();
        let noise = b"{}[]\",:0123456789-+.eEtnu\\ a\n\t";
        let mut rng = fastrand::Rng::with_seed(35);
        let (mut found, mut broken) = (0, 0);
        for _ in 0..20_000 {
            let mut doc = String::new();
            value(&mut rng, 0, &mut doc);
            let mut doc = doc.into_bytes();
            match rng.usize(..4) {
                0 => {}
                1 => doc.truncate(rng.usize(..=doc.len())),
                2 => {
                    let i = rng.usize(..doc.len());
                    doc[i] = noise[rng.usize(..noise.len())];
                }
                _ => doc.insert(rng.usize(..=doc.len()), noise[rng.usize(..noise.len())]),
            }
            let parsed: Option<Value> = serde_json::from_slice(&doc).ok();
            broken += parsed.is_none() as usize;
            for q in &queries {
                let full = parsed.as_ref().and_then(|v| q.first(v)).cloned();
                found += full.is_some() as usize;
                assert_eq!(
                    q.scan(&doc),
                    full,
                    "{} in {:?}",
                    q.path,
                    String::from_utf8_lossy(&doc)
                );
            }
        }
        // The documents exercised both sides.
        assert!(
            found > 10_000 && broken > 5_000,
            "found {found}, broken {broken}"
        );
    }

    #[test]
    fn other_paths_are_left_to_the_full_parser() {
        for text in [
            "$.*",
            "$..id",
            "$.items[-1]",
            "$.items[0:2]",
            "$.items[?@.id > 1]",
            "$['a\\'b']",
            "$.items[01]",
            "$.1abc",
        ] {
            if let Ok(q) = JsonQuery::parse(text) {
                assert!(!q.scans(), "{text}");
            }
        }
        assert_eq!(
            plain_steps("$.a['b c'][2]"),
            Some(vec![
                PathStep::Member("a".into()),
                PathStep::Member("b c".into()),
                PathStep::Index(2)
            ])
        );
    }
}
