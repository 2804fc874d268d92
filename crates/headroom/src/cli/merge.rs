//! `headroom merge SHARD.json… --out merged.json`: the shards of one plan
//! as one results file, which `report`, `compare` and thresholds read like
//! any other.

use super::args::MergeArgs;
use super::outputs::{finish, Outputs};
use anyhow::Context;
use headroom_objectives::slo::Slo;
use headroom_records::merge::{merge as merge_shards, ShardFile};
use headroom_records::Results;

pub fn merge(args: MergeArgs) -> anyhow::Result<i32> {
    let outputs = Outputs {
        out: args.out.as_deref(),
        html: args.reports.html.as_deref(),
        markdown: args.reports.markdown,
        quiet: args.quiet,
        ..Outputs::default()
    };
    outputs.check_writable()?;
    let mut files = Vec::new();
    for path in &args.files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not JSON (line {}, column {}: {e})",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        let results: Results = headroom_records::results_from_json(&value).map_err(|e| {
            anyhow::anyhow!("{} is not a headroom results file: {e}", path.display())
        })?;
        files.push(ShardFile {
            file: path.display().to_string(),
            results,
        });
    }
    merge_and_report(files, args.allow_partial, &outputs)
}

/// Merges shards' results and writes and prints what `outputs` asks for;
/// the thresholds the shards were checked against are checked again
/// against the whole.
pub fn merge_and_report(
    files: Vec<ShardFile>,
    allow_partial: bool,
    outputs: &Outputs,
) -> anyhow::Result<i32> {
    let mut thresholds = Slo::default();
    if let Some(first) = files.first() {
        for check in &first.results.thresholds {
            let bound = Slo::parse(&check.bound)
                .with_context(|| format!("threshold `{}` of {}", check.bound, first.file))?;
            thresholds.bounds.extend(bound.bounds);
        }
    }
    let command = super::common::recording(&[], &[]).command;
    let results = merge_shards(files, allow_partial, command)?;
    let intervals = results.histograms.per_second.clone();
    finish(results, &thresholds, outputs, &intervals)
}
