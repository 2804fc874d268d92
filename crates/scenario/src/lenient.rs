//! Numbers and booleans that may be written as strings, so that a value
//! from the environment keeps the file valid (`vus = "${USERS:-10}"`):
//! `${…}` is expanded only inside strings, and a number field then takes
//! the string's value. A string that is not a number is refused, naming
//! the value.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use std::fmt::Display;
use std::str::FromStr;

/// What the schema says such a field takes: the value, or a string that
/// expands to it.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Lenient<T> {
    Value(T),
    /// A string holding the value, e.g. "${USERS:-10}".
    Text(String),
}

/// `#[serde(with = "lenient")]` on an `Option<T>` number or boolean field:
/// read by [`deserialize`], written as the value.
pub fn serialize<S, T>(value: &Option<T>, s: S) -> Result<S::Ok, S::Error>
where
    S: serde::Serializer,
    T: serde::Serialize,
{
    serde::Serialize::serialize(value, s)
}

/// With [`serialize`], `#[serde(with = "lenient")]`: the value, or a
/// string holding it. Errors name what was found and the type.
pub fn deserialize<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned + FromStr,
    T::Err: Display,
{
    opt(d)
}

/// `deserialize_with` for `Option<T>` number or boolean fields: the value,
/// or a string holding it. Errors name what was found and the type.
pub fn opt<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned + FromStr,
    T::Err: Display,
{
    let value = Option::<serde_json::Value>::deserialize(d)?;
    let expected = std::any::type_name::<T>();
    match value {
        None => Ok(None),
        Some(serde_json::Value::String(t)) => t.trim().parse().map(Some).map_err(|_| {
            serde::de::Error::custom(format!(
                "invalid type: string \"{t}\", expected {expected} (a value, or a string \
                 holding one, e.g. \"${{USERS:-10}}\")"
            ))
        }),
        Some(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| serde::de::Error::custom(e.to_string())),
    }
}

/// A duration as written ("500ms", "1m30s", "${DURATION:-5m}"), for the
/// schema: a pattern an editor can check.
pub struct DurationText;

/// humantime's units, or a `${…}` from the environment, one or more.
pub const DURATION_PATTERN: &str = concat!(
    r"^\s*(\$\{[^}]*\}|[0-9]+\s*(ns|nsec|us|usec|µs|ms|msec|s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hr|hrs|hour|hours|d|day|days|w|week|weeks)\s*)+",
    // A range, for think times: "1s..3s".
    r"(\.\.\s*(\$\{[^}]*\}|[0-9]+\s*(ns|nsec|us|usec|µs|ms|msec|s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hr|hrs|hour|hours|d|day|days|w|week|weeks)\s*)+)?$"
);

impl JsonSchema for DurationText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": DURATION_PATTERN,
            "description": "A duration: a number and a unit, e.g. \"500ms\", \"30s\", \"1m30s\", \"2h\"",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug, PartialEq)]
    struct S {
        #[serde(default, deserialize_with = "opt")]
        n: Option<u32>,
        #[serde(default, deserialize_with = "opt")]
        r: Option<f64>,
        #[serde(default, deserialize_with = "opt")]
        b: Option<bool>,
    }

    #[test]
    fn numbers_as_numbers_or_strings() {
        let s: S = toml::from_str("n = 3\nr = \"2.5\"\nb = \"true\"").unwrap();
        assert_eq!(
            s,
            S {
                n: Some(3),
                r: Some(2.5),
                b: Some(true)
            }
        );
        let s: S = toml::from_str("").unwrap();
        assert_eq!(
            s,
            S {
                n: None,
                r: None,
                b: None
            }
        );
        let e = toml::from_str::<S>("n = \"ten\"").unwrap_err().to_string();
        assert!(
            e.contains("invalid type: string \"ten\", expected u32"),
            "{e}"
        );
        let e = toml::from_str::<S>("n = 0.5").unwrap_err().to_string();
        assert!(e.contains("0.5") && e.contains("u32"), "{e}");
        assert!(toml::from_str::<S>("n = \"-1\"").is_err());
    }

    #[test]
    fn the_duration_pattern_takes_what_humantime_takes() {
        let re = regex::Regex::new(DURATION_PATTERN).unwrap();
        for ok in [
            "500ms",
            "30s",
            "1m30s",
            "2h",
            "1m 30s",
            "${DURATION:-5m}",
            "1m ${X}",
        ] {
            assert!(re.is_match(ok), "{ok}");
        }
        for bad in ["", "soon", "10", "5 parsecs", "-1s", "1.5s", "1s..", "..2s"] {
            assert!(!re.is_match(bad), "{bad}");
        }
    }
}
