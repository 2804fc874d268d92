//! The builder every section is built with: it collects problems (each
//! located in the file) and reads the values all sections share —
//! durations, statuses, templates, file paths.

use crate::errors::Problems;
use crate::raw::RawStatus;
use headroom_engine::plan::check::StatusSet;
use headroom_engine::plan::template::{Template, TemplateError};
use headroom_js::{Code, Limits, ScriptFile};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The scenario's scripts as its sections add code (`scripts.rs` builds
/// the program from it).
#[derive(Default)]
pub(super) struct Scripts {
    pub(super) file: Option<ScriptFile>,
    /// The functions the file exports.
    pub(super) exports: Vec<String>,
    pub(super) code: Vec<Code>,
    pub(super) limits: Limits,
    pub(super) seed: Option<u64>,
    /// The file was given but could not be used (a problem says why):
    /// names in it are not looked for.
    pub(super) broken: bool,
}

/// Built-in template names, always available.
pub(super) const BUILTINS: &[&str] = &["user_id", "iteration"];

pub struct Builder<'a> {
    /// Folder that relative file paths resolve against.
    pub dir: &'a Path,
    pub(super) problems: Problems<'a>,
    /// Largest feeder file read (`--max-feeder-size`).
    pub max_feeder_bytes: u64,
    /// The scenario's scripts as its sections add code.
    pub(super) scripts: Scripts,
    /// The message types of its gRPC calls (`[grpc]`, or reflection).
    pub(super) grpc: Option<headroom_grpc::Schema>,
    /// How its gRPC calls' messages are compressed (`[grpc] compression`).
    pub(super) grpc_compression: headroom_grpc::Compression,
    /// Its HTTP/2 connections' keepalive PINGs (`[grpc] keepalive`).
    pub(super) grpc_keepalive: Option<std::time::Duration>,
}

impl<'a> Builder<'a> {
    pub fn new(dir: &'a Path, text: &'a str) -> Self {
        Builder {
            dir,
            problems: Problems::new(text),
            max_feeder_bytes: headroom_engine::plan::feeder::DEFAULT_MAX_FEEDER_BYTES,
            scripts: Default::default(),
            grpc: None,
            grpc_compression: Default::default(),
            grpc_keepalive: None,
        }
    }

    /// Records a problem at the place `needle` appears (after `anchor`,
    /// on a line with `key` if possible).
    pub(super) fn problem(
        &mut self,
        anchor: Option<&str>,
        key: &str,
        needle: &str,
        message: String,
    ) {
        self.problems.add(anchor, key, needle, message);
    }

    pub(super) fn duration(
        &mut self,
        anchor: Option<&str>,
        field: &str,
        text: &str,
    ) -> Option<Duration> {
        self.problems.duration(anchor, field, text)
    }

    pub(super) fn path(&self, file: &str) -> PathBuf {
        let p = Path::new(file);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }

    pub(super) fn status_set(
        &mut self,
        anchor: Option<&str>,
        raw: &RawStatus,
    ) -> Option<StatusSet> {
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

    pub(super) fn template(
        &mut self,
        anchor: Option<&str>,
        field: &str,
        text: &str,
    ) -> Option<Template> {
        self.parsed(anchor, field, text, Template::parse(text))
    }

    /// A request target's template (see [`Template::parse_target`]).
    pub(super) fn target_template(&mut self, anchor: Option<&str>, text: &str) -> Option<Template> {
        self.parsed(anchor, "path", text, Template::parse_target(text))
    }

    fn parsed(
        &mut self,
        anchor: Option<&str>,
        field: &str,
        text: &str,
        parsed: Result<Template, TemplateError>,
    ) -> Option<Template> {
        match parsed {
            Ok(t) => Some(t),
            Err(e) => {
                self.problem(anchor, field, text, format!("{field}: {e}"));
                None
            }
        }
    }
}
