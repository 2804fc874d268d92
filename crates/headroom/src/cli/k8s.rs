//! `headroom k8s SCENARIO --shards N --image IMAGE --out DIR`: the YAML
//! of a ConfigMap (the scenario and its files) and an Indexed Job (one pod
//! per shard, one shared start). `headroom k8s collect JOB`: each pod's
//! results from `kubectl logs`, merged. See `headroom-k8s` and the README's
//! "Running on Kubernetes".

use super::args::{K8sArgs, K8sCollectArgs, K8sCommand, K8sJobArgs, K8sPodArgs};
use super::exit::EXIT_OK;
use super::merge::merge_and_report;
use super::outputs::Outputs;
use anyhow::{bail, Context};
use headroom_k8s::{manifests, results_in_log, to_yaml, JobPlan, ScenarioFile};
use headroom_records::merge::ShardFile;
use headroom_records::Results;
use std::path::{Component, Path};
use std::process::Command;
use std::time::SystemTime;

pub fn k8s(args: K8sArgs) -> anyhow::Result<i32> {
    match args.collect {
        Some(K8sCommand::Collect(collect_args)) => collect(collect_args),
        Some(K8sCommand::Run(run_args)) => super::k8s_run::run(*run_args),
        None => write_job(args.job),
    }
}

/// The files a scenario reads, relative to its folder.
fn files_read_by(raw: &headroom_scenario::raw::RawScenario) -> Vec<String> {
    let mut files: Vec<String> = raw.feeders.iter().map(|f| f.file.clone()).collect();
    files.extend(raw.requests.iter().filter_map(|r| r.body_file.clone()));
    files.extend(raw.tls.as_ref().and_then(|t| t.ca_file.clone()));
    files.sort();
    files.dedup();
    files
}

/// A DNS-label name from the scenario's file name.
fn default_name(scenario: &Path) -> String {
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
        cpu: args.cpu.clone(),
        memory: args.memory.clone(),
        host_network: args.host_network,
        node_selector: args.node_selector.iter().cloned().collect(),
        tolerations: args.toleration.clone(),
    })
}

fn write_job(args: K8sJobArgs) -> anyhow::Result<i32> {
    let Some(dir) = &args.out else {
        bail!("give SCENARIO, --shards, --image and --out");
    };
    let plan = job_plan(&args.pods, args.start_at)?;
    let (shards, scenario) = (plan.shards, args.pods.scenario.clone().unwrap_or_default());
    let (config_map, job) = manifests(&plan)?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot make the folder {}", dir.display()))?;
    for (name, yaml) in [
        ("configmap.yaml", to_yaml(&config_map)?),
        ("job.yaml", to_yaml(&job)?),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, yaml).with_context(|| format!("cannot write {}", path.display()))?;
    }
    println!(
        "wrote {dir}/configmap.yaml and {dir}/job.yaml: {shards} shards of {scenario}, starting at {start}\n\
         next:  kubectl apply -f {dir}      (before {start})\n\
         then:  kubectl wait --for=condition=complete job/{name} -n {ns} --timeout=1h\n\
         and:   headroom k8s collect {name} -n {ns} --out merged.json --allow-partial\n\
         (or all in one: headroom k8s run … instead of these three)",
        dir = dir.display(),
        scenario = scenario.display(),
        start = plan.start_at,
        name = plan.name,
        ns = plan.namespace,
    );
    Ok(EXIT_OK)
}

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

fn collect(args: K8sCollectArgs) -> anyhow::Result<i32> {
    let outputs = Outputs {
        out: args.out.as_deref(),
        html: args.reports.html.as_deref(),
        markdown: args.reports.markdown,
        ..Outputs::default()
    };
    outputs.check_writable()?;
    let selector = format!("headroom/job={}", args.job);
    let ns = args.namespace.as_str();
    let pods = kubectl(
        &args.kubectl,
        &["get", "pods", "-n", ns, "-l", &selector, "-o", "name"],
    )?;
    let pods: Vec<&str> = pods
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if pods.is_empty() {
        bail!("no pods of job {} in namespace {ns}", args.job);
    }
    if let Some(dir) = &args.shards_dir {
        std::fs::create_dir_all(dir)?;
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for pod in pods {
        let log = match kubectl(&args.kubectl, &["logs", "-n", ns, pod]) {
            Ok(log) => log,
            // A pod that never started has no log ("waiting to start").
            Err(e) if args.allow_partial => {
                eprintln!("headroom: skipped {pod}: no log ({e:#})");
                skipped.push(pod);
                continue;
            }
            Err(e) => {
                return Err(e.context(format!(
                    "{pod} has no log (never started?): give --allow-partial to merge the others"
                )))
            }
        };
        let Some(json) = results_in_log(&log) else {
            eprintln!("headroom: {pod}: no results in its log (did it finish?)");
            continue;
        };
        let results: Results = serde_json::from_str(&json)
            .with_context(|| format!("{pod}: the results in its log do not read back"))?;
        if let (Some(dir), Some(shard)) = (&args.shards_dir, &results.shard) {
            let path = dir.join(format!("shard-{}-of-{}.json", shard.index, shard.count));
            std::fs::write(&path, &json)?;
        }
        files.push(ShardFile {
            file: pod.to_string(),
            results,
        });
    }
    if !skipped.is_empty() {
        eprintln!(
            "headroom: merged without {} (never started): {}",
            skipped.len(),
            skipped.join(", ")
        );
    }
    merge_and_report(files, args.allow_partial, &outputs)
}
