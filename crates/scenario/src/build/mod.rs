//! Raw scenario → validated [`Scenario`]. Every problem is collected (not
//! just the first) and pointed at the line and column where its value
//! appears.
//!
//! The builder's steps, one file each: `load` (`[load]`), `requests`
//! (`[[request]]`, `[[feeder]]`, template variables), `checks` (checks and
//! extractions), `flow` (the mix or `[[session]]`s), `objectives`
//! (`[capacity]`, `[thresholds]`).

use super::errors::{Locator, Problem};
use super::raw::*;
use headroom_capacity::Settings;
use headroom_engine::plan::check::StatusSet;
use headroom_engine::plan::template::Template;
use headroom_engine::plan::{
    Plan, DEFAULT_CONNECT_TIMEOUT, DEFAULT_GRACEFUL_STOP, DEFAULT_REQUEST_TIMEOUT,
};
use headroom_http::tls::{TlsClient, TlsOptions};
use headroom_http::Endpoint;
use headroom_results::slo::Slo;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Built-in template names, always available.
const BUILTINS: &[&str] = &["user_id", "iteration"];
const DEFAULT_VUS: u32 = 10;
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

mod checks;
mod flow;
mod load;
mod objectives;
mod requests;

/// A validated scenario: the plan the engine runs, and the objectives its
/// runs are held to (which the engine never reads).
#[derive(Clone, Debug)]
pub struct Scenario {
    pub plan: Plan,
    /// `[thresholds]`: pass/fail bounds on a run's results.
    pub thresholds: Slo,
    /// `[capacity]`: the objective and search settings of
    /// `headroom capacity` (command-line flags overlay them).
    pub capacity: Settings,
}

pub struct Builder<'a> {
    /// Folder that relative file paths resolve against.
    pub dir: &'a Path,
    pub locator: Locator<'a>,
    problems: Vec<Problem>,
}

impl<'a> Builder<'a> {
    pub fn new(dir: &'a Path, text: &'a str) -> Self {
        Builder {
            dir,
            locator: Locator { text },
            problems: Vec::new(),
        }
    }

    /// Records a problem at the place `needle` appears (after `anchor`,
    /// on a line with `key` if possible).
    fn problem(&mut self, anchor: Option<&str>, key: &str, needle: &str, message: String) {
        let (line, column) = self.locator.find(anchor, key, needle);
        self.problems.push(Problem {
            line,
            column,
            message,
        });
    }

    fn duration(&mut self, anchor: Option<&str>, field: &str, text: &str) -> Option<Duration> {
        match humantime::parse_duration(text.trim()) {
            Ok(d) => Some(d),
            Err(e) => {
                self.problem(
                    anchor,
                    field,
                    text,
                    format!("{field}: `{text}` is not a duration ({e}); write e.g. 500ms, 30s, 2m"),
                );
                None
            }
        }
    }

    fn path(&self, file: &str) -> PathBuf {
        let p = Path::new(file);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }

    fn status_set(&mut self, anchor: Option<&str>, raw: &RawStatus) -> Option<StatusSet> {
        let ranges: Result<Vec<(u16, u16)>, String> = match raw {
            RawStatus::One(c) => StatusSet::parse_range(&c.to_string()).map(|r| vec![r]),
            RawStatus::List(list) => list
                .iter()
                .map(|c| StatusSet::parse_range(&c.to_string()))
                .collect(),
            RawStatus::Range(text) => text.split(',').map(StatusSet::parse_range).collect(),
        };
        match ranges {
            Ok(r) if !r.is_empty() => Some(StatusSet(r)),
            Ok(_) => {
                self.problem(
                    anchor,
                    "status",
                    "status",
                    "status: the list is empty".into(),
                );
                None
            }
            Err(e) => {
                let needle = match raw {
                    RawStatus::Range(t) => t.clone(),
                    _ => "status".into(),
                };
                self.problem(anchor, "status", &needle, format!("status: {e}"));
                None
            }
        }
    }

    fn template(&mut self, anchor: Option<&str>, field: &str, text: &str) -> Option<Template> {
        match Template::parse(text) {
            Ok(t) => Some(t),
            Err(e) => {
                self.problem(anchor, field, text, format!("{field}: {e}"));
                None
            }
        }
    }

    pub fn build(mut self, raw: &RawScenario, label: &str) -> Result<Scenario, Vec<Problem>> {
        let http = raw.http.clone().unwrap_or_default();
        let keep_alive = http.keep_alive.unwrap_or(true);
        let connect_timeout = http
            .connect_timeout
            .as_deref()
            .and_then(|t| self.duration(None, "connect_timeout", t))
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let request_timeout = http
            .timeout
            .as_deref()
            .and_then(|t| self.duration(None, "timeout", t))
            .unwrap_or(DEFAULT_REQUEST_TIMEOUT);
        if http.threads == Some(0) {
            self.problem(
                None,
                "threads",
                "threads",
                "http.threads: must be at least 1".into(),
            );
        }

        let (load, max_requests, graceful_stop) = self.load(raw.load.as_ref());
        let feeders = self.feeders(&raw.feeders);
        let endpoint = self.endpoint(raw);
        let mut check_names = Vec::new();
        let requests = match &endpoint {
            Some(endpoint) => self.requests(raw, &http, endpoint, keep_alive, &mut check_names),
            None => Vec::new(),
        };
        self.variables(raw, &feeders);
        let flow = self.flow(raw, &feeders);
        let tls = endpoint
            .as_ref()
            .filter(|e| e.https)
            .and_then(|e| self.tls(raw.tls.as_ref(), &e.host));
        if raw.tls.is_some() && endpoint.as_ref().is_some_and(|e| !e.https) {
            self.problem(
                None,
                "[tls]",
                "tls",
                "[tls] is set but the base URL is not https://".into(),
            );
        }

        let capacity = self.capacity(raw.capacity.as_ref());
        let thresholds = self.thresholds(raw.thresholds.as_ref(), &requests);

        if !self.problems.is_empty() {
            return Err(self.problems);
        }
        let (Some(endpoint), Some(load)) = (endpoint, load) else {
            unreachable!("no problems means the endpoint and load were built");
        };
        let plan = Plan {
            endpoint,
            label: label.to_string(),
            requests,
            flow,
            feeders,
            check_names,
            load,
            keep_alive,
            cookies: http.cookies.unwrap_or(true),
            tls,
            connect_timeout,
            request_timeout,
            graceful_stop: graceful_stop.unwrap_or(DEFAULT_GRACEFUL_STOP),
            threads: http
                .threads
                .unwrap_or_else(headroom_engine::plan::default_threads)
                .max(1),
            max_requests,
        };
        Ok(Scenario {
            plan,
            thresholds,
            capacity,
        })
    }

    fn tls(&mut self, raw: Option<&RawTls>, host: &str) -> Option<TlsClient> {
        let raw = raw.cloned().unwrap_or_default();
        let options = TlsOptions {
            ca_file: raw.ca_file.as_deref().map(|f| self.path(f)),
            server_name: raw.server_name.clone(),
            insecure: raw.insecure.unwrap_or(false),
        };
        match TlsClient::new(host, &options) {
            Ok(t) => Some(t),
            Err(e) => {
                let needle = raw.ca_file.clone().unwrap_or_else(|| "tls".into());
                self.problem(None, "", &needle, format!("tls: {e}"));
                None
            }
        }
    }
}

/// "scheme://host:port" of a URL (without templates in it).
fn origin(url: &str) -> Option<String> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let host_end = rest.find('/').unwrap_or(rest.len());
    Some(url[..scheme_end + host_end].to_string())
}

fn origin_of(e: &Endpoint) -> Option<String> {
    Some(format!(
        "{}://{}",
        if e.https { "https" } else { "http" },
        e.host_header
    ))
}
