//! What `headroom k8s` (the YAML) and `headroom k8s run` (applied and
//! followed) share: the Job's plan from the pods' flags, and `kubectl`.

use super::args::K8sPodArgs;
use anyhow::{bail, Context};
use headroom_k8s::{JobPlan, ScenarioFile};
use std::path::{Component, Path};
use std::process::Command;
use std::time::SystemTime;

/// The files a scenario reads, relative to its folder.
fn files_read_by(raw: &headroom_scenario::raw::RawScenario) -> Vec<String> {
    let mut files: Vec<String> = raw.feeders.iter().map(|f| f.file.clone()).collect();
    files.extend(raw.requests.iter().filter_map(|r| r.body_file.clone()));
    files.extend(raw.tls.as_ref().and_then(|t| t.ca_file.clone()));
    files.sort();
    files.dedup();
    files
}

/// A DNS-label name from a file's name (the scenario's, the study's).
pub fn default_name(scenario: &Path) -> String {
    let stem = scenario
        .file_stem()
        .map_or("run".into(), |s| s.to_string_lossy().to_ascii_lowercase());
    let mut name: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    name.truncate(40);
    format!("headroom-{}", name.trim_matches('-'))
}

/// The Job's plan from the pods' flags: the scenario and the files it
/// reads, checked here first (a bad scenario is refused once, not in N
/// pods).
pub fn job_plan(args: &K8sPodArgs, start_at: SystemTime) -> anyhow::Result<JobPlan> {
    let (Some(scenario), Some(shards), Some(image)) = (&args.scenario, args.shards, &args.image)
    else {
        bail!("give SCENARIO, --shards and --image");
    };
    let file = headroom_scenario::read(scenario)?;
    let folder = scenario.parent().unwrap_or(Path::new("."));
    let mut files = vec![ScenarioFile {
        path: scenario
            .file_name()
            .map_or("scenario.toml".into(), |n| n.to_string_lossy().into()),
        // As expanded here, so every pod runs the plan that was checked.
        contents: file.text.clone(),
    }];
    for path in files_read_by(&file.raw) {
        let inside = Path::new(&path)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            bail!(
                "{}: `{path}` is outside the scenario's folder; copy it beside the scenario \
                 and name it by a relative path, so it can go into the ConfigMap",
                scenario.display()
            );
        }
        let contents = std::fs::read_to_string(folder.join(&path))
            .with_context(|| format!("cannot read {path} (named in {})", scenario.display()))?;
        files.push(ScenarioFile { path, contents });
    }
    // Refused here, not in N pods — except a host only the cluster can
    // resolve.
    if let Err(e) = file.build() {
        if !e.to_string().contains("cannot resolve host") {
            return Err(e.into());
        }
        eprintln!("headroom: note: {e} here; the pods will resolve it in the cluster");
    }
    let size: usize = files.iter().map(|f| f.contents.len()).sum();
    if size > 900 * 1024 {
        bail!(
            "the scenario and its files are {} KiB: a ConfigMap holds at most 1 MiB; \
             put large feeders in the image or a volume",
            size / 1024
        );
    }
    Ok(JobPlan {
        name: args.name.clone().unwrap_or_else(|| default_name(scenario)),
        namespace: args.namespace.clone(),
        image: image.clone(),
        shards,
        files,
        start_at: humantime::format_rfc3339_millis(start_at).to_string(),
        run_flags: args.run_flags.clone(),
        cpu: args.placement.cpu.clone(),
        memory: args.placement.memory.clone(),
        host_network: args.placement.host_network,
        node_selector: args.placement.node_selector.iter().cloned().collect(),
        tolerations: args.placement.toleration.clone(),
    })
}

/// Runs `kubectl ARGS`: its standard output, or an error with its own.
pub fn kubectl(kubectl: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(kubectl)
        .args(args)
        .output()
        .with_context(|| format!("cannot run `{kubectl}`"))?;
    if !out.status.success() {
        bail!(
            "`{kubectl} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
