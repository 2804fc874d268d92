//! Kubernetes as the engine that runs a plan's shards on many machines:
//! headroom does not bring its own cluster protocol. `headroom k8s` writes
//!
//! - a **ConfigMap** holding the scenario and the files it reads (feeders,
//!   bodies), mounted read-only at [`SCENARIO_DIR`] in the layout the
//!   scenario expects;
//! - an **Indexed Job** (`completionMode: Indexed`, completions =
//!   parallelism = N) whose pod `i` runs
//!   `headroom run SCENARIO --shard $(JOB_COMPLETION_INDEX)+1/N --start-at T --out -`:
//!   shard i+1 of N, all on one shared start, the results JSON on stdout.
//!
//! Each pod also reports every finished second on stdout (`--report-to -`,
//! one JSON line), which `headroom k8s run` follows through `kubectl logs
//! -f` to show and judge the fleet while it runs; a shard's exit code never
//! carries thresholds (the verdict is the merge's), so one shard's breach
//! neither fails the Job nor gets its siblings deleted.
//!
//! `headroom k8s collect JOB` reads each pod's log (`kubectl logs`), takes
//! the results JSON out of it ([`results_in_log`]) and merges the shards.
//! The manifests are built from the Kubernetes API types (`k8s-openapi`),
//! so they are valid by construction, read back into them in tests, and
//! meet the `restricted` Pod Security profile ([`pod_security`]).

pub mod pod_security;
pub mod room;

pub use k8s_openapi;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, EnvVar, EnvVarSource, KeyToPath,
    ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, ResourceRequirements,
    SeccompProfile, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// Where the pods see the scenario and its files.
pub const SCENARIO_DIR: &str = "/scenario";

/// The label every object and pod carries, for `kubectl … -l`.
pub const LABEL: &str = "app.kubernetes.io/name";

/// A file the scenario reads, as the pods must see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioFile {
    /// Path relative to the scenario's folder, as the scenario names it.
    pub path: String,
    pub contents: String,
}

/// What the Job runs.
#[derive(Clone, Debug)]
pub struct JobPlan {
    /// The Job's name (a DNS label); the ConfigMap is `NAME-scenario`.
    pub name: String,
    pub namespace: String,
    pub image: String,
    pub shards: u32,
    /// The scenario file (first) and the files it reads.
    pub files: Vec<ScenarioFile>,
    /// RFC 3339: when every shard starts.
    pub start_at: String,
    /// More `headroom run` flags, e.g. `--threads 2`.
    pub run_flags: Vec<String>,
    /// Per pod: CPU and memory requested (and the memory limit).
    pub cpu: String,
    pub memory: String,
    /// The node's network instead of a pod network (no NAT or overlay in
    /// the way of a large run; not allowed by the `restricted` profile).
    pub host_network: bool,
    /// Only nodes with these labels.
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

/// A toleration as `--toleration` takes it: `KEY[=VALUE][:EFFECT]`
/// (`Equal` with a value, `Exists` without; any effect when none).
pub fn parse_toleration(text: &str) -> Result<Toleration, String> {
    let (rest, effect) = match text.rsplit_once(':') {
        Some((rest, effect)) => (rest, Some(effect)),
        None => (text, None),
    };
    if let Some(e) = effect {
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&e) {
            return Err(format!(
                "`{text}`: the effect is NoSchedule, PreferNoSchedule or NoExecute, not `{e}`"
            ));
        }
    }
    let (key, value) = match rest.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (rest, None),
    };
    if key.is_empty() {
        return Err(format!("`{text}`: write KEY[=VALUE][:EFFECT]"));
    }
    Ok(Toleration {
        key: Some(key.to_string()),
        operator: Some(if value.is_some() { "Equal" } else { "Exists" }.into()),
        value,
        effect: effect.map(String::from),
        toleration_seconds: None,
    })
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum K8sError {
    #[error("`{0}` is not a valid Kubernetes name: lower-case letters, digits and '-', starting with a letter, at most 52 characters")]
    BadName(String),
    #[error("--shards must be between 1 and 10000")]
    BadShards,
    #[error("{0}")]
    Yaml(String),
}

/// A Kubernetes name headroom accepts: an RFC 1123 label, short enough for
/// the pods' `NAME-INDEX-xxxxx` names.
fn check_name(name: &str) -> Result<(), K8sError> {
    let ok = !name.is_empty()
        && name.len() <= 52
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(K8sError::BadName(name.to_string()))
    }
}

/// ConfigMap keys may not hold '/': each file gets a flat key, and the
/// volume puts it back at its path.
fn key_of(index: usize, path: &str) -> String {
    let flat: String = path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("f{index}-{flat}")
}

fn meta(plan: &JobPlan, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(plan.namespace.clone()),
        labels: Some(labels(plan)),
        ..ObjectMeta::default()
    }
}

fn labels(plan: &JobPlan) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL.to_string(), "headroom".to_string()),
        ("headroom/job".to_string(), plan.name.clone()),
    ])
}

/// The ConfigMap and the Indexed Job.
pub fn manifests(plan: &JobPlan) -> Result<(ConfigMap, Job), K8sError> {
    check_name(&plan.name)?;
    check_name(&plan.namespace)?;
    if plan.shards == 0 || plan.shards > 10_000 {
        return Err(K8sError::BadShards);
    }
    let config_name = format!("{}-scenario", plan.name);
    let data: BTreeMap<String, String> = plan
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (key_of(i, &f.path), f.contents.clone()))
        .collect();
    let config_map = ConfigMap {
        metadata: meta(plan, config_name.clone()),
        data: Some(data),
        ..ConfigMap::default()
    };
    let items = plan
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| KeyToPath {
            key: key_of(i, &f.path),
            path: f.path.clone(),
            mode: None,
        })
        .collect();
    let container = container(plan);
    let job = Job {
        metadata: meta(plan, plan.name.clone()),
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".into()),
            completions: Some(plan.shards as i32),
            parallelism: Some(plan.shards as i32),
            // A shard that failed is not run again (it would miss the
            // shared start; the merge says which shard is missing), and
            // does not fail the Job early: with a Job-wide backoffLimit
            // of 0, Kubernetes deletes the other shards' running pods.
            backoff_limit_per_index: Some(0),
            max_failed_indexes: Some(plan.shards as i32),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(plan)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    // headroom never calls the API server from a pod: no
                    // credential a compromised target could lead it to use.
                    automount_service_account_token: Some(false),
                    containers: vec![container],
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(runtime_default()),
                        ..PodSecurityContext::default()
                    }),
                    host_network: plan.host_network.then_some(true),
                    // With the host's network, the cluster's DNS still.
                    dns_policy: plan.host_network.then(|| "ClusterFirstWithHostNet".into()),
                    node_selector: (!plan.node_selector.is_empty())
                        .then(|| plan.node_selector.clone()),
                    tolerations: (!plan.tolerations.is_empty()).then(|| plan.tolerations.clone()),
                    volumes: Some(vec![Volume {
                        name: "scenario".into(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: config_name,
                            items: Some(items),
                            ..ConfigMapVolumeSource::default()
                        }),
                        ..Volume::default()
                    }]),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    };
    Ok((config_map, job))
}

/// The pod's one container: headroom running its shard of the plan
/// (`JOB_COMPLETION_INDEX` + 1 of N), at the shared start, reporting on
/// its log, as the `restricted` Pod Security profile asks.
fn container(plan: &JobPlan) -> Container {
    let scenario = plan.files.first().map_or("scenario.toml", |f| &f.path);
    let mut args = vec![
        "run".to_string(),
        format!("{SCENARIO_DIR}/{scenario}"),
        "--shard".into(),
        // The Job sets JOB_COMPLETION_INDEX (0…N−1); Kubernetes expands
        // $(…) in args, and headroom reads `J+1/N` as shard J+1.
        format!("$(JOB_COMPLETION_INDEX)+1/{}", plan.shards),
        "--start-at".into(),
        plan.start_at.clone(),
        "--out".into(),
        "-".into(),
        "--report-to".into(),
        "-".into(),
        "-q".into(),
    ];
    args.extend(plan.run_flags.iter().cloned());
    let resources: BTreeMap<String, Quantity> = BTreeMap::from([
        ("cpu".to_string(), Quantity(plan.cpu.clone())),
        ("memory".to_string(), Quantity(plan.memory.clone())),
    ]);
    Container {
        name: "headroom".into(),
        image: Some(plan.image.clone()),
        args: Some(args),
        env: Some(vec![EnvVar {
            name: "JOB_COMPLETION_INDEX".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                        .into(),
                    api_version: None,
                }),
                ..EnvVarSource::default()
            }),
            value: None,
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(resources.clone()),
            limits: Some(BTreeMap::from([(
                "memory".to_string(),
                Quantity(plan.memory.clone()),
            )])),
            ..ResourceRequirements::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "scenario".into(),
            mount_path: SCENARIO_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        }]),
        // What the `restricted` Pod Security profile asks of a container.
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65534),
            run_as_group: Some(65534),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            seccomp_profile: Some(runtime_default()),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        localhost_profile: None,
    }
}

/// A manifest as YAML, with its `apiVersion` and `kind`.
pub fn to_yaml<T: serde::Serialize>(object: &T) -> Result<String, K8sError> {
    serde_yaml_ng::to_string(object).map_err(|e| K8sError::Yaml(e.to_string()))
}

/// The results JSON in a pod's log: `headroom run --out -` prints it as one
/// pretty JSON object starting on a line of its own (`{`); anything else in
/// the log (warnings on stderr, kubelet lines) is skipped.
pub fn results_in_log(log: &str) -> Option<String> {
    let mut offset = 0;
    for line in log.split_inclusive('\n') {
        if line.trim_end() == "{" {
            let rest = &log[offset..];
            let mut stream =
                serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
            if let Some(Ok(value)) = stream.next() {
                if value.get("requests").is_some() && value.get("meta").is_some() {
                    return Some(rest[..stream.byte_offset()].to_string());
                }
            }
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> JobPlan {
        JobPlan {
            name: "login-test".into(),
            namespace: "load".into(),
            image: "registry.example/headroom:0.1".into(),
            shards: 4,
            files: vec![
                ScenarioFile {
                    path: "login.toml".into(),
                    contents: "base_url = \"http://app\"\n".into(),
                },
                ScenarioFile {
                    path: "data/users.csv".into(),
                    contents: "user\na\n".into(),
                },
            ],
            start_at: "2026-11-23T10:00:00.000Z".into(),
            run_flags: vec!["--threads".into(), "2".into()],
            cpu: "2".into(),
            memory: "1Gi".into(),
            host_network: false,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
        }
    }

    #[test]
    fn an_indexed_job_that_parses_back_into_the_api_types() {
        let (config_map, job) = manifests(&plan()).unwrap();
        let job_yaml = to_yaml(&job).unwrap();
        let cm_yaml = to_yaml(&config_map).unwrap();
        assert!(
            job_yaml.starts_with("apiVersion: batch/v1\nkind: Job\n"),
            "{job_yaml}"
        );
        assert!(cm_yaml.contains("kind: ConfigMap"));
        let back: Job = serde_yaml_ng::from_str(&job_yaml).unwrap();
        assert_eq!(back, job);
        let back_cm: ConfigMap = serde_yaml_ng::from_str(&cm_yaml).unwrap();
        assert_eq!(back_cm, config_map);

        let spec = back.spec.unwrap();
        assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!(spec.completions, Some(4));
        assert_eq!(spec.parallelism, Some(4));
        let pod = spec.template.spec.unwrap();
        let args = pod.containers[0].args.clone().unwrap();
        let at = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(args[1], "/scenario/login.toml");
        assert_eq!(at("--shard"), "$(JOB_COMPLETION_INDEX)+1/4");
        assert_eq!(at("--start-at"), "2026-11-23T10:00:00.000Z");
        assert_eq!(at("--out"), "-");
        assert_eq!(at("--threads"), "2");
        // The files come back at the paths the scenario names.
        let volume = &pod.volumes.unwrap()[0];
        let items = volume.config_map.as_ref().unwrap().items.clone().unwrap();
        assert_eq!(items[1].path, "data/users.csv");
        assert_eq!(
            back_cm.data.unwrap()[&items[1].key],
            "user\na\n",
            "the feeder's rows are in the ConfigMap"
        );
    }

    #[test]
    fn the_pods_meet_the_restricted_profile_unless_they_take_the_hosts_network() {
        let (_, job) = manifests(&plan()).unwrap();
        let spec = job.spec.unwrap();
        assert_eq!(spec.backoff_limit, None);
        assert_eq!(spec.backoff_limit_per_index, Some(0));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod_security::restricted(&pod), Vec::<String>::new());
        // Beyond the profile: no API credential in the pod, a read-only root.
        assert_eq!(pod.automount_service_account_token, Some(false));
        let container = pod.containers[0].security_context.as_ref().unwrap();
        assert_eq!(container.read_only_root_filesystem, Some(true));
        let mut p = plan();
        p.host_network = true;
        p.node_selector = BTreeMap::from([("pool".into(), "load".into())]);
        p.tolerations = vec![parse_toleration("dedicated=load:NoSchedule").unwrap()];
        let pod = manifests(&p)
            .unwrap()
            .1
            .spec
            .unwrap()
            .template
            .spec
            .unwrap();
        assert_eq!(pod.node_selector.as_ref().unwrap()["pool"], "load");
        let t = &pod.tolerations.as_ref().unwrap()[0];
        assert_eq!(
            (
                t.operator.as_deref(),
                t.value.as_deref(),
                t.effect.as_deref()
            ),
            (Some("Equal"), Some("load"), Some("NoSchedule"))
        );
        assert_eq!(
            pod_security::restricted(&pod),
            vec!["hostNetwork: true (host namespaces are not allowed)".to_string()]
        );
        assert_eq!(
            parse_toleration("gpu").unwrap().operator.as_deref(),
            Some("Exists")
        );
        assert!(parse_toleration("gpu:Sometimes").is_err());
        assert!(parse_toleration("=x").is_err());
    }

    #[test]
    fn bad_names_and_counts_are_refused() {
        let mut p = plan();
        p.name = "Login_Test".into();
        assert!(matches!(manifests(&p), Err(K8sError::BadName(_))));
        let mut p = plan();
        p.shards = 0;
        assert_eq!(manifests(&p).unwrap_err(), K8sError::BadShards);
    }

    #[test]
    fn results_are_found_in_a_log_between_other_lines() {
        let log = "headroom: warning: something\n{\n  \"meta\": {},\n  \"requests\": {\"total\": 3}\n}\nheadroom: done\n";
        let json = results_in_log(log).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["requests"]["total"], 3);
        assert_eq!(results_in_log("no results here\n{\n"), None);
    }
}
