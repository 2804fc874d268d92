//! Scenario files: TOML or YAML (one schema, chosen by extension) →
//! `RawScenario` → validated [`Scenario`]: the [`Plan`](headroom_engine::plan::Plan) the engine runs,
//! and the thresholds and capacity settings its runs are held to.
//!
//! 1. read the file and expand `${NAME}` / `${NAME:-default}` inside its
//!    strings (`env`);
//! 2. deserialize into the `Raw*` types (`raw`), which reject unknown keys
//!    and wrong types with the file's line and column (and suggest the
//!    nearest key for a misspelt one);
//! 3. lay the caller's [`overrides::Overrides`] over it (command-line flags
//!    win over the file);
//! 4. validate and resolve into a `Plan` (`build`): durations, statuses,
//!    templates, feeders, checks, sessions — every problem at once, each
//!    located in the file.
//!
//! ```text
//! base_url = "http://127.0.0.1:8080"
//! [load]
//! vus = 20
//! duration = "10s"
//! [[request]]
//! name = "home"
//! path = "/hello"
//! ```

pub mod env;
pub mod errors;
pub mod lenient;
pub mod overrides;
mod parse;
#[cfg(test)]
mod proptests;
pub mod raw;
mod resolve;

use headroom_objectives::capacity::Settings;
pub use resolve::Scenario;

use errors::{Problem, ScenarioError};
pub use parse::{parse_toml, parse_yaml};
use raw::{RawCapacity, RawScenario};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Toml,
    Yaml,
}

impl Format {
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "toml" => Some(Format::Toml),
            "yaml" | "yml" => Some(Format::Yaml),
            _ => None,
        }
    }
}

/// A scenario read from a file, ready to be overridden and built.
pub struct ScenarioFile {
    pub path: PathBuf,
    /// After environment expansion (positions refer to this text, which
    /// keeps the file's lines).
    pub text: String,
    pub raw: RawScenario,
}

fn error(path: &Path, problems: Vec<Problem>) -> ScenarioError {
    ScenarioError {
        source: path.to_path_buf(),
        problems,
    }
}

/// A problem with a whole file (it cannot be read, say): no line to show.
fn whole_file(path: &Path, message: String) -> ScenarioError {
    error(
        path,
        vec![Problem {
            line: 0,
            column: 0,
            message,
        }],
    )
}

/// Reads a file of ours (a scenario, a study) and expands `${NAME}` from
/// the environment inside its strings; `what` names it in errors
/// ("scenario", "study").
pub fn read_expanded(path: &Path, what: &str) -> Result<String, ScenarioError> {
    let source = std::fs::read_to_string(path)
        .map_err(|e| whole_file(path, format!("cannot read the {what}: {e}")))?;
    let format = Format::of(path).unwrap_or(Format::Toml);
    env::expand_in(&source, format, |name| std::env::var(name).ok())
        .map_err(|problems| error(path, problems))
}

/// Reads, expands and parses a scenario file (no validation yet).
pub fn read(path: &Path) -> Result<ScenarioFile, ScenarioError> {
    let format = Format::of(path).ok_or_else(|| {
        whole_file(
            path,
            "a scenario file ends in .toml, .yaml or .yml".to_string(),
        )
    })?;
    let text = read_expanded(path, "scenario")?;
    let raw = parse(&text, format).map_err(|p| error(path, p))?;
    Ok(ScenarioFile {
        path: path.to_path_buf(),
        text,
        raw,
    })
}

/// Deserializes scenario text; errors carry line, column and the field.
pub fn parse(text: &str, format: Format) -> Result<RawScenario, Vec<Problem>> {
    match format {
        Format::Toml => parse_toml(text),
        Format::Yaml => parse_yaml(text),
    }
}

impl ScenarioFile {
    /// Validates and resolves into a plan and its objectives.
    pub fn build(&self) -> Result<Scenario, ScenarioError> {
        self.build_bounded(headroom_engine::plan::feeder::DEFAULT_MAX_FEEDER_BYTES)
    }

    /// [`ScenarioFile::build`], reading feeder files of at most
    /// `max_feeder_bytes` (`--max-feeder-size`).
    pub fn build_bounded(&self, max_feeder_bytes: u64) -> Result<Scenario, ScenarioError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let label = self.raw.base_url.clone().unwrap_or_default();
        let mut builder = resolve::Builder::new(dir, &self.text);
        builder.max_feeder_bytes = max_feeder_bytes;
        builder
            .build(&self.raw, &label)
            .map_err(|problems| error(&self.path, problems))
    }
}

/// Builds a plan from a scenario made in code (the command-line one-liner);
/// errors name `source` instead of a file.
pub fn build_raw(raw: &RawScenario, source: &str, label: &str) -> Result<Scenario, ScenarioError> {
    resolve::Builder::new(Path::new("."), "")
        .build(raw, label)
        .map_err(|problems| error(Path::new(source), problems))
}

/// A `[capacity]` table of another file (a study's), checked as a
/// scenario's is; problems are located in `text`, that file's text.
pub fn capacity_settings(raw: &RawCapacity, text: &str) -> Result<Settings, Vec<Problem>> {
    resolve::Builder::new(Path::new("."), text).capacity_only(raw)
}
