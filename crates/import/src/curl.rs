//! `headroom import curl 'curl -X POST https://… -H … -d …'`: one request.

use super::{managed_header, request, split_url, Imported};
use headroom_scenario::raw::{RawHttp, RawScenario, RawTls};
use std::collections::BTreeMap;

/// curl options that take a value and change nothing headroom sends.
const HARMLESS_WITH_VALUE: &[&str] = &[
    "-o",
    "--output",
    "-w",
    "--write-out",
    "--connect-timeout",
    "-m",
    "--max-time",
];
/// curl options that take a value and are not carried over (the value is
/// listed with them).
const NOT_CARRIED_WITH_VALUE: &[&str] = &[
    "-x",
    "--proxy",
    "-U",
    "--proxy-user",
    "--cacert",
    "--capath",
    "-E",
    "--cert",
    "--key",
    "--resolve",
    "--connect-to",
    "-T",
    "--upload-file",
    "-F",
    "--form",
    "-r",
    "--range",
    "--limit-rate",
    "--max-redirs",
    "--retry",
    "--interface",
    "--dns-servers",
    "-K",
    "--config",
    "-D",
    "--dump-header",
    "-c",
    "--cookie-jar",
    "-z",
    "--time-cond",
    "-Y",
    "-y",
    "-C",
    "--continue-at",
    "--local-port",
    "--unix-socket",
];
/// curl options without a value that change nothing headroom sends.
const HARMLESS: &[&str] = &[
    "-s",
    "--silent",
    "-S",
    "--show-error",
    "-v",
    "--verbose",
    "-i",
    "--include",
    "-f",
    "--fail",
    "--fail-with-body",
    "-#",
    "--progress-bar",
    "--http1.1",
    "--no-progress-meter",
];

pub fn import(command: &str) -> Result<Imported, String> {
    let words =
        shell_words::split(command).map_err(|e| format!("cannot split the command: {e}"))?;
    let mut words = words.into_iter().peekable();
    if words
        .peek()
        .is_some_and(|w| w == "curl" || w.ends_with("/curl"))
    {
        words.next();
    }
    let mut curl = Curl::default();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (word.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| words.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        curl.take(&flag, &word, &mut value)?;
    }
    curl.into_imported()
}

/// What the command's words said, as they are read.
#[derive(Default)]
struct Curl {
    url: Option<String>,
    method: Option<String>,
    headers: Vec<(String, String)>,
    data: Vec<String>,
    /// `-G`: the data goes into the query.
    get: bool,
    insecure: bool,
    /// `--json`: the data is JSON.
    json: bool,
    left_out: Vec<String>,
}

type Value<'v> = dyn FnMut(&str) -> Result<String, String> + 'v;

impl Curl {
    /// One flag (`value` reads its value), or the URL.
    fn take(&mut self, flag: &str, word: &str, value: &mut Value) -> Result<(), String> {
        let headers = &mut self.headers;
        match flag {
            "-X" | "--request" => self.method = Some(value(flag)?.to_ascii_uppercase()),
            "-H" | "--header" => self.header(value(flag)?),
            "-d" | "--data" | "--data-raw" | "--data-binary" | "--data-ascii"
            | "--data-urlencode" | "--json" => self.data(flag, value(flag)?),
            "-u" | "--user" => {
                use base64::Engine as _;
                let creds = value(flag)?;
                let token = base64::engine::general_purpose::STANDARD.encode(creds.as_bytes());
                headers.push(("Authorization".into(), format!("Basic {token}")));
            }
            "-A" | "--user-agent" => headers.push(("User-Agent".into(), value(flag)?)),
            "-e" | "--referer" => headers.push(("Referer".into(), value(flag)?)),
            "-b" | "--cookie" => {
                let c = value(flag)?;
                if c.contains('=') {
                    headers.push(("Cookie".into(), c));
                } else {
                    self.left_out
                        .push(format!("--cookie {c}: cookies from a file"));
                }
            }
            "--compressed" => headers.push(("Accept-Encoding".into(), "gzip, deflate, br".into())),
            "-k" | "--insecure" => self.insecure = true,
            "-G" | "--get" => self.get = true,
            "-I" | "--head" => self.method = Some("HEAD".into()),
            "-L" | "--location" => self
                .left_out
                .push("-L: redirects are not followed; the redirect itself is the response".into()),
            "--url" => self.url = Some(value(flag)?),
            "--oauth2-bearer" => {
                headers.push(("Authorization".into(), format!("Bearer {}", value(flag)?)))
            }
            f if NOT_CARRIED_WITH_VALUE.contains(&f) => {
                let v = value(f)?;
                self.left_out
                    .push(format!("curl option {f} {v}: not carried over"));
            }
            f if HARMLESS.contains(&f) => {}
            f if HARMLESS_WITH_VALUE.contains(&f) => {
                value(f)?;
            }
            f if f.starts_with('-') => self
                .left_out
                .push(format!("curl option {f}: not carried over")),
            _ => self.url = Some(word.to_string()),
        }
        Ok(())
    }

    /// `-H 'Name: value'`; headers headroom sets itself are left out.
    fn header(&mut self, h: String) {
        match h.split_once(':') {
            Some((k, v)) if !managed_header(k.trim()) => self
                .headers
                .push((k.trim().to_string(), v.trim().to_string())),
            Some((k, _)) => self
                .left_out
                .push(format!("header `{}`: headroom sets it itself", k.trim())),
            None => self
                .left_out
                .push(format!("header `{h}`: not `Name: value`")),
        }
    }

    /// `-d` and its kin: a part of the body (or, with `-G`, the query).
    fn data(&mut self, flag: &str, d: String) {
        match flag {
            "--data-urlencode" => {
                let encode = |v: &str| {
                    percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
                        .to_string()
                };
                self.data.push(match d.split_once('=') {
                    Some((k, v)) => format!("{k}={}", encode(v)),
                    None => encode(&d),
                });
            }
            "--json" => {
                self.data.push(d);
                self.json = true;
            }
            _ => match d.strip_prefix('@') {
                Some(file) => self.left_out.push(format!(
                    "{flag} @{file}: a body from a file — use body_file = \"{file}\""
                )),
                None => self.data.push(d),
            },
        }
    }

    /// The one request the command sends, as a scenario.
    fn into_imported(mut self) -> Result<Imported, String> {
        let url = self.url.take().ok_or("no URL in the curl command")?;
        let (origin, mut path) = split_url(&url)?;
        let mut body = None;
        if !self.data.is_empty() {
            let joined = self.data.join("&");
            if self.get {
                path.push(if path.contains('?') { '&' } else { '?' });
                path.push_str(&joined);
            } else {
                body = Some(joined);
                self.body_headers();
            }
        }
        let method = self.method.unwrap_or_else(|| {
            if body.is_some() {
                "POST".into()
            } else {
                "GET".into()
            }
        });
        let mut req = request(&mut BTreeMap::new(), &method, &path);
        if !self.headers.is_empty() {
            req.headers = Some(self.headers.into_iter().collect());
        }
        req.body = body;
        Ok(Imported {
            scenario: RawScenario {
                base_url: Some(origin),
                tls: self.insecure.then(|| RawTls {
                    insecure: Some(true),
                    ..RawTls::default()
                }),
                http: None::<RawHttp>,
                requests: vec![req],
                ..RawScenario::default()
            },
            left_out: self.left_out,
            script: None,
        })
    }

    /// A body's `Content-Type` (form, or JSON with `--json`) unless given,
    /// and `Accept: application/json` with `--json`, as curl sends them.
    fn body_headers(&mut self) {
        let has = |headers: &[(String, String)], name: &str| {
            headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
        };
        if !has(&self.headers, "content-type") {
            let ty = if self.json {
                "application/json"
            } else {
                "application/x-www-form-urlencoded"
            };
            self.headers.push(("Content-Type".into(), ty.into()));
        }
        if self.json && !has(&self.headers, "accept") {
            self.headers
                .push(("Accept".into(), "application/json".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_with_headers_body_and_auth() {
        let got = import(
            "curl -X POST 'http://127.0.0.1:8080/login?next=%2F' -H 'X-Trace: 1' -H 'Host: x' \
             -d user=ann -d pass=s3cret -u ann:pw --compressed -s -L -o /dev/null --proxy http://p",
        )
        .unwrap();
        let s = &got.scenario;
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:8080"));
        let r = &s.requests[0];
        assert_eq!(r.name, "POST /login");
        assert_eq!(r.method.as_deref(), Some("POST"));
        assert_eq!(r.path.as_deref(), Some("/login?next=%2F"));
        assert_eq!(r.body.as_deref(), Some("user=ann&pass=s3cret"));
        let h = r.headers.as_ref().unwrap();
        assert_eq!(h["X-Trace"], "1");
        assert_eq!(h["Authorization"], "Basic YW5uOnB3");
        assert_eq!(h["Content-Type"], "application/x-www-form-urlencoded");
        assert!(!h.contains_key("Host"));
        let out = got.left_out.join("\n");
        assert!(
            out.contains("Host") && out.contains("-L") && out.contains("--proxy"),
            "{out}"
        );
        // The file parses back as a scenario.
        let text = got.to_toml("curl");
        headroom_scenario::parse_toml::<RawScenario>(&text).unwrap();
    }

    #[test]
    fn get_with_data_goes_to_the_query_and_json_sets_its_type() {
        let g = import("curl -G https://h.test/s -d q=1 -k").unwrap();
        assert_eq!(g.scenario.requests[0].path.as_deref(), Some("/s?q=1"));
        assert_eq!(g.scenario.requests[0].method, None);
        assert_eq!(g.scenario.tls.as_ref().unwrap().insecure, Some(true));
        let j = import(r#"curl --json '{"a":1}' http://h.test:81/api"#).unwrap();
        let r = &j.scenario.requests[0];
        assert_eq!(r.method.as_deref(), Some("POST"));
        assert_eq!(
            r.headers.as_ref().unwrap()["Content-Type"],
            "application/json"
        );
        assert!(import("curl -X GET").unwrap_err().contains("no URL"));
    }
}
