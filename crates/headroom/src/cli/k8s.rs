//! `headroom k8s SCENARIO --shards N --image IMAGE --out DIR`: the YAML
//! of a ConfigMap (the scenario and its files) and an Indexed Job (one pod
//! per shard, one shared start). `headroom k8s collect JOB`: each pod's
//! results from `kubectl logs`, merged. See `headroom-k8s` and the README's
//! "Running on Kubernetes".

use super::args::{K8sArgs, K8sCollectArgs, K8sCommand, K8sJobArgs};
use super::exit::EXIT_OK;
use super::k8s_job::{job_plan, kubectl};
use super::merge::merge_and_report;
use super::outputs::Outputs;
use anyhow::{bail, Context};
use headroom_k8s::{manifests, results_in_log, to_yaml};
use headroom_records::merge::ShardFile;
use headroom_records::Results;

pub fn k8s(args: K8sArgs) -> anyhow::Result<i32> {
    match args.collect {
        Some(K8sCommand::Collect(collect_args)) => collect(collect_args),
        Some(K8sCommand::Run(run_args)) => super::k8s_run::run(*run_args),
        None => write_job(args.job),
    }
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
