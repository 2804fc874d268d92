//! Checks and extractions run on each response of a scenario request.
//! A failed check (or an extraction that finds nothing) fails the request;
//! the check's name says which in the results' error classes.

use super::json_query::JsonQuery;
use super::template::{Scope, Template};
use headroom_http::{Capture, Captured};
use regex::Regex;
use std::borrow::Cow;
use std::cell::OnceCell;
use std::time::Duration;

/// Statuses as inclusive ranges (`200`, `[200, 404]`, `"200-299"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusSet(pub Vec<(u16, u16)>);

impl StatusSet {
    pub fn contains(&self, status: u16) -> bool {
        self.0.iter().any(|&(lo, hi)| (lo..=hi).contains(&status))
    }

    /// `200`, `200-299` or `2xx`.
    pub fn parse_range(text: &str) -> Result<(u16, u16), String> {
        let t = text.trim();
        let status = |s: &str| -> Result<u16, String> {
            match s.trim().parse::<u16>() {
                Ok(c) if (100..=599).contains(&c) => Ok(c),
                _ => Err(format!("`{s}` is not an HTTP status (100..599)")),
            }
        };
        if let Some(class) = t.strip_suffix("xx").or_else(|| t.strip_suffix("XX")) {
            let d: u16 = class
                .parse()
                .ok()
                .filter(|d| (1..=5).contains(d))
                .ok_or_else(|| format!("`{t}` is not a status class (1xx..5xx)"))?;
            return Ok((d * 100, d * 100 + 99));
        }
        match t.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (status(a)?, status(b)?);
                if a > b {
                    return Err(format!("`{t}`: range runs backwards"));
                }
                Ok((a, b))
            }
            None => status(t).map(|c| (c, c)),
        }
    }

    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|&(a, b)| {
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                }
            })
            .collect();
        parts.join(",")
    }
}

#[derive(Clone, Debug)]
pub enum JsonExpect {
    Exists(bool),
    Equals(serde_json::Value),
    /// A string with `{{…}}`: rendered for the user, then compared.
    EqualsText(Template),
}

#[derive(Clone, Debug)]
pub enum HeaderExpect {
    Present(bool),
    Equals(Template),
}

#[derive(Clone, Debug)]
pub enum CheckKind {
    Status(StatusSet),
    /// Expected values may use `{{…}}` (the user's variables).
    BodyContains(Template),
    BodyRegex(Regex),
    Json {
        path: JsonQuery,
        expect: JsonExpect,
    },
    Header {
        name: String,
        expect: HeaderExpect,
    },
    ResponseTimeUnder(Duration),
}

#[derive(Clone, Debug)]
pub struct Check {
    /// Index in the plan's list of check names (shared with extractions).
    pub id: u32,
    pub kind: CheckKind,
}

#[derive(Clone, Debug)]
pub enum ExtractFrom {
    Json(JsonQuery),
    /// Capture group `1` by default (or the whole match if there is none).
    Regex(Regex, usize),
    Header(String),
    Cookie(String),
}

#[derive(Clone, Debug)]
pub struct Extract {
    pub id: u32,
    /// The variable it sets.
    pub var: String,
    pub from: ExtractFrom,
}

/// A response as checks see it: the body is decoded as text or parsed as
/// JSON at most once, and only if a check asks (a plain JSON path scans
/// the body instead: see `json_query`).
pub struct ResponseView<'a> {
    pub status: u16,
    pub captured: &'a Captured,
    pub latency: Duration,
    text: OnceCell<std::borrow::Cow<'a, str>>,
    json: OnceCell<Option<serde_json::Value>>,
}

impl<'a> ResponseView<'a> {
    pub fn new(status: u16, captured: &'a Captured, latency: Duration) -> Self {
        ResponseView {
            status,
            captured,
            latency,
            text: OnceCell::new(),
            json: OnceCell::new(),
        }
    }

    fn text(&self) -> &str {
        // Borrowed from the captured body when it is UTF-8, as it mostly is.
        self.text
            .get_or_init(|| String::from_utf8_lossy(&self.captured.body))
    }

    fn json(&self) -> Option<&serde_json::Value> {
        self.json
            .get_or_init(|| serde_json::from_slice(&self.captured.body).ok())
            .as_ref()
    }

    fn json_first(&self, query: &JsonQuery) -> Option<Cow<'_, serde_json::Value>> {
        if query.scans() {
            return query.scan(&self.captured.body).map(Cow::Owned);
        }
        self.json().and_then(|v| query.first(v)).map(Cow::Borrowed)
    }

    /// The body holds `text` (its bytes, searched where they lie).
    fn body_contains(&self, text: &str) -> bool {
        let body = &self.captured.body;
        match std::str::from_utf8(body) {
            Ok(_) => memchr::memmem::find(body, text.as_bytes()).is_some(),
            // Not UTF-8: searched as the text checks read (lossily).
            Err(_) => self.text().contains(text),
        }
    }
}

impl Check {
    /// Whether the response passes, with expected values rendered in
    /// `scope` (the user's variables).
    pub fn passes<'t>(&'t self, r: &ResponseView, scope: &mut Scope<'t>) -> bool {
        match &self.kind {
            CheckKind::Status(set) => set.contains(r.status),
            CheckKind::BodyContains(t) => r.body_contains(t.text(scope).as_ref()),
            CheckKind::BodyRegex(re) => re.is_match(r.text()),
            CheckKind::Json { path, expect } => {
                let found = r.json_first(path);
                match expect {
                    JsonExpect::Exists(want) => found.is_some() == *want,
                    JsonExpect::Equals(want) => found.as_deref() == Some(want),
                    JsonExpect::EqualsText(t) => {
                        found.as_deref().and_then(|v| v.as_str()) == Some(t.text(scope).as_ref())
                    }
                }
            }
            CheckKind::Header { name, expect } => {
                let found = r.captured.header(name);
                match expect {
                    HeaderExpect::Present(want) => found.is_some() == *want,
                    HeaderExpect::Equals(want) => found == Some(want.text(scope).as_ref()),
                }
            }
            CheckKind::ResponseTimeUnder(bound) => r.latency < *bound,
        }
    }

    pub fn needs(&self) -> Capture {
        match &self.kind {
            CheckKind::BodyContains(_) | CheckKind::BodyRegex(_) | CheckKind::Json { .. } => {
                Capture {
                    body: true,
                    ..Capture::default()
                }
            }
            CheckKind::Header { .. } => Capture {
                headers: true,
                ..Capture::default()
            },
            CheckKind::Status(_) | CheckKind::ResponseTimeUnder(_) => Capture::default(),
        }
    }
}

impl Extract {
    /// The extracted value, or `None` when nothing matched.
    pub fn apply(&self, r: &ResponseView) -> Option<String> {
        match &self.from {
            ExtractFrom::Json(path) => r.json_first(path).map(|v| match v.into_owned() {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            }),
            ExtractFrom::Regex(re, group) => re.captures(r.text()).and_then(|c| {
                c.get(*group)
                    .or_else(|| c.get(0))
                    .map(|m| m.as_str().to_string())
            }),
            ExtractFrom::Header(name) => r.captured.header(name).map(str::to_string),
            ExtractFrom::Cookie(name) => r.captured.set_cookies.iter().find_map(|sc| {
                let c = cookie_store::RawCookie::parse(sc.as_str()).ok()?;
                (c.name() == name).then(|| c.value().to_string())
            }),
        }
    }

    pub fn needs(&self) -> Capture {
        match &self.from {
            ExtractFrom::Json(_) | ExtractFrom::Regex(..) => Capture {
                body: true,
                ..Capture::default()
            },
            ExtractFrom::Header(_) => Capture {
                headers: true,
                ..Capture::default()
            },
            ExtractFrom::Cookie(_) => Capture {
                set_cookies: true,
                ..Capture::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(body: &str, headers: &[(&str, &str)]) -> Captured {
        Captured {
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            set_cookies: vec!["sid=abc; Path=/; HttpOnly".into()],
            body: body.as_bytes().to_vec(),
            ..Captured::default()
        }
    }

    #[test]
    fn status_sets() {
        assert_eq!(StatusSet::parse_range("2xx"), Ok((200, 299)));
        assert_eq!(StatusSet::parse_range("200-204"), Ok((200, 204)));
        assert_eq!(StatusSet::parse_range("404"), Ok((404, 404)));
        assert!(StatusSet::parse_range("299-200").is_err());
        assert!(StatusSet::parse_range("9xx").is_err());
        assert!(StatusSet::parse_range("abc").is_err());
        let s = StatusSet(vec![(200, 299), (404, 404)]);
        assert!(s.contains(204) && s.contains(404) && !s.contains(500));
    }

    #[test]
    fn checks_and_extractions() {
        let c = captured(r#"{"token":"t-1","n":3}"#, &[("X-Id", "9")]);
        let r = ResponseView::new(200, &c, Duration::from_millis(5));
        let vars = [("want".to_string(), "t-1".to_string())]
            .into_iter()
            .collect();
        let mut rng = fastrand::Rng::new();
        let mut check = |kind| {
            let check = Check { id: 0, kind };
            let mut scope = Scope {
                vars: &vars,
                user_id: 1,
                iteration: 0,
                rng: &mut rng,
            };
            check.passes(&r, &mut scope)
        };
        let t = |s: &str| Template::parse(s).unwrap();
        assert!(check(CheckKind::BodyContains(t("t-1"))));
        assert!(!check(CheckKind::BodyContains(t("nope"))));
        // Expected values are rendered for the user.
        assert!(check(CheckKind::BodyContains(t("{{want}}"))));
        assert!(check(CheckKind::Json {
            path: JsonQuery::parse("$.token").unwrap(),
            expect: JsonExpect::EqualsText(t("{{want}}"))
        }));
        assert!(check(CheckKind::BodyRegex(
            Regex::new(r#""n":\d"#).unwrap()
        )));
        let path = |p| JsonQuery::parse(p).unwrap();
        assert!(check(CheckKind::Json {
            path: path("$.n"),
            expect: JsonExpect::Equals(3.into())
        }));
        assert!(check(CheckKind::Json {
            path: path("$.missing"),
            expect: JsonExpect::Exists(false)
        }));
        assert!(check(CheckKind::Header {
            name: "x-id".into(),
            expect: HeaderExpect::Equals(t("9"))
        }));
        assert!(!check(CheckKind::Header {
            name: "x-other".into(),
            expect: HeaderExpect::Present(true)
        }));
        assert!(check(CheckKind::ResponseTimeUnder(Duration::from_millis(
            10
        ))));
        assert!(!check(CheckKind::ResponseTimeUnder(Duration::from_millis(
            5
        ))));
        let ex = |from| {
            Extract {
                id: 0,
                var: "v".into(),
                from,
            }
            .apply(&r)
        };
        assert_eq!(
            ex(ExtractFrom::Json(path("$.token"))).as_deref(),
            Some("t-1")
        );
        assert_eq!(ex(ExtractFrom::Json(path("$.n"))).as_deref(), Some("3"));
        assert_eq!(
            ex(ExtractFrom::Regex(
                Regex::new(r#"token":"([^"]+)"#).unwrap(),
                1
            ))
            .as_deref(),
            Some("t-1")
        );
        assert_eq!(ex(ExtractFrom::Header("X-ID".into())).as_deref(), Some("9"));
        assert_eq!(
            ex(ExtractFrom::Cookie("sid".into())).as_deref(),
            Some("abc")
        );
        assert_eq!(ex(ExtractFrom::Cookie("other".into())), None);
    }
}
