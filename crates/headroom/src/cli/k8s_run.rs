//! `headroom k8s run SCENARIO --shards N --image IMAGE`: the whole run on
//! a cluster in one command, through `kubectl` (what every user of a
//! cluster already has, configured: contexts, credentials, exec plugins,
//! proxies — a client library would have to redo all of that).
//!
//! ```text
//!  check the nodes have room ─▶ kubectl apply (ConfigMap + Indexed Job)
//!  every second: kubectl get pods ─▶ progress line (scheduled / running /
//!    done, late pods named); each running pod followed (kubectl logs -f)
//!  its report lines ─▶ FleetView: live line, metrics, dashboard, aborts
//!  Ctrl-C or a fleet abort ─▶ the Job suspended: Kubernetes sends its
//!    pods SIGTERM, each writes what it measured to its log
//!  every pod ended ─▶ results out of the logs, merged, thresholds judged
//!    on the merge (the exit code), Job and ConfigMap deleted (--keep)
//! ```

use super::args::{K8sRunArgs, PodPlacement};
use super::exit::install_interrupt;
use super::fleet::view::FleetView;
use super::fleet::{self, finish_fleet, fleet_scenario, Coordinator, FleetEnd};
use super::k8s_job::{job_plan, kubectl};
use anyhow::{bail, Context};
use headroom_engine::StopSignal;
use headroom_k8s::{manifests, pod_security, results_in_log, room};
use headroom_records::merge::ShardFile;
use serde_json::Value;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

/// From apply to the shared start, when `--start-at` is not given: time
/// for the scheduler, the image and the kubelet.
const LEAD: Duration = Duration::from_secs(30);
/// How often the pods are listed.
const POLL: Duration = Duration::from_secs(1);

/// `headroom run` flags the Job sets itself (or `k8s run` takes).
const SET_BY_THE_JOB: &[&str] = &[
    "--shard",
    "--start-at",
    "--out",
    "-o",
    "--report-to",
    "--processes",
    "--html",
    "--csv",
    "--junit",
    "--hdr-log",
    "--dashboard",
    "--metrics-listen",
    "--metrics-push",
    "--otlp",
];

/// The Job and its ConfigMap, deleted when the run ends however it ends
/// (unless `--keep`).
struct Applied<'a> {
    kubectl: &'a str,
    namespace: &'a str,
    name: String,
    keep: bool,
}

impl Drop for Applied<'_> {
    fn drop(&mut self) {
        let config = format!("configmap/{}-scenario", self.name);
        let job = format!("job/{}", self.name);
        if self.keep {
            eprintln!(
                "headroom: kept {job} and {config} in namespace {} (--keep)",
                self.namespace
            );
            return;
        }
        let deleted = kubectl(
            self.kubectl,
            &[
                "delete",
                "-n",
                self.namespace,
                &job,
                &config,
                "--cascade=background",
                "--wait=false",
            ],
        );
        if let Err(e) = deleted {
            eprintln!(
                "headroom: warning: {e:#}; delete them with `kubectl delete -n {} {job} {config}`",
                self.namespace
            );
        }
    }
}

/// One shard's pod as the poll last saw it.
#[derive(Default)]
struct Pod {
    name: Option<String>,
    phase: String,
    /// Why it is not running yet (ContainerCreating, ImagePullBackOff…).
    waiting: Option<String>,
    node: Option<String>,
    followed: bool,
    /// Its log as followed so far.
    log: Vec<String>,
    /// The follower ended (the container did, or the pod went).
    log_done: bool,
    /// Told to the view: ended, with why when it left no results.
    ended: bool,
}

pub fn run(args: K8sRunArgs) -> anyhow::Result<i32> {
    let pods_args = &args.pods;
    let (Some(scenario_path), Some(shards)) = (&pods_args.scenario, pods_args.shards) else {
        bail!("give SCENARIO, --shards and --image");
    };
    check_run_flags(&pods_args.run_flags)?;
    // The plan the pods run, as they will build it: for the fleet's view,
    // thresholds and aborts.
    let (scenario, thresholds) = fleet_scenario(scenario_path, &pods_args.run_flags)?;
    let outputs = fleet::outputs(&args.fleet, thresholds);
    outputs.check_writable()?;
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let k = args.kubectl.as_str();
    let ns = pods_args.namespace.as_str();

    check_room(k, &pods_args.placement, shards, args.start_at.is_some())?;
    let start = args.start_at.unwrap_or_else(|| SystemTime::now() + LEAD);
    let job = job_plan(pods_args, start)?;
    let mut coordinator = Coordinator::start(
        &scenario,
        (shards as usize, headroom_measure::fleet::GRACE_LOGS),
        outputs.progress,
        args.fleet.quiet,
        &args.fleet.metrics,
        &args.fleet.dashboard,
        &stop,
        &format!("job/{} — {shards} pods", job.name),
    )?;
    let followed = JobRun {
        kubectl: k,
        namespace: ns,
        start,
        start_timeout: args.start_timeout,
        keep: args.keep,
        quiet: args.fleet.quiet,
    }
    .follow(
        &job,
        &mut coordinator.view,
        &stop,
        args.shards_dir.as_deref(),
    )?;
    finish_fleet(
        followed.files,
        FleetEnd {
            stop: &stop,
            coordinator,
            thresholds: &scenario.thresholds,
            monitor: None,
        },
        outputs,
    )
}

/// One Job on the cluster, from `kubectl apply` to its pods' results:
/// what `k8s run` does once and `capacity --k8s` and `study --k8s` do for
/// each step or run.
pub struct JobRun<'a> {
    pub kubectl: &'a str,
    pub namespace: &'a str,
    /// When every pod starts (the Job's `--start-at`).
    pub start: SystemTime,
    /// Pods not running by the start plus this are given up.
    pub start_timeout: Duration,
    /// Leave the Job and its ConfigMap in the cluster.
    pub keep: bool,
    pub quiet: bool,
}

/// What a followed Job left.
pub struct Followed {
    /// Each pod's results, read from its log.
    pub files: Vec<ShardFile>,
    /// From `kubectl apply` to the last of the pods running; `None` when
    /// one never ran.
    pub running_after: Option<Duration>,
}

impl JobRun<'_> {
    /// Applies `job`, follows its pods (their reports to `view`) until
    /// each has ended, stopping them all on Ctrl-C or the view's abort;
    /// the Job and its ConfigMap deleted on the way out (unless `keep`).
    pub fn follow(
        &self,
        job: &headroom_k8s::JobPlan,
        view: &mut FleetView,
        stop: &StopSignal,
        shards_dir: Option<&std::path::Path>,
    ) -> anyhow::Result<Followed> {
        let (k, ns) = (self.kubectl, self.namespace);
        let _applied = apply_job(job, (k, ns), self.keep)?;
        if !self.quiet {
            eprintln!(
                "headroom: job/{} applied in namespace {ns}: {} pods, starting at {}",
                job.name, job.shards, job.start_at
            );
        }
        let start_instant = super::run::instant_of(self.start);
        let mut pods: Vec<Pod> = (0..job.shards).map(|_| Pod::default()).collect();
        let (lines_to, lines) = mpsc::channel::<(usize, Option<String>)>();
        let mut suspended = false;
        let mut last_poll: Option<Instant> = None;
        let mut last_progress = String::new();
        let mut running_after = None;
        let mut job_pods = JobPods {
            kubectl: k,
            namespace: ns,
            job: &job.name,
            lines_to,
            list_failed: false,
            refused_since: None,
            applied_at: Instant::now(),
        };
        loop {
            let now = Instant::now();
            if stop.was_interrupted() && !suspended {
                suspended = true;
                suspend(k, ns, &job.name, "interrupted: stopping every pod");
            }
            take_lines(&lines, &mut pods, view);
            if last_poll.is_none_or(|t| now.duration_since(t) >= POLL) {
                last_poll = Some(now);
                // Pods that have not started by the start plus
                // --start-timeout are given up (a suspended Job's
                // unstarted pods at once).
                let give_up = suspended || now > start_instant + self.start_timeout;
                job_pods.poll(&mut pods, now, give_up, view)?;
                if running_after.is_none() && pods.iter().all(|p| p.followed) {
                    running_after = Some(now.duration_since(job_pods.applied_at));
                }
                let line = progress(&pods, now >= start_instant);
                if line != last_progress && !self.quiet {
                    eprintln!("headroom: pods {line}");
                    last_progress = line;
                }
            }
            logs_ended(&mut pods, view);
            if let Some(breach) = view.tick(None) {
                if !suspended {
                    suspended = true;
                    let why = FleetView::breach_line(&breach);
                    suspend(k, ns, &job.name, &format!("{why}: stopping every pod"));
                }
            }
            if pods.iter().all(|p| p.ended) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        view.finish(None);
        Ok(Followed {
            files: shard_files(&pods, shards_dir, job.shards)?,
            running_after,
        })
    }
}

/// The Job and its ConfigMap applied (after the Pod Security check):
/// deleted again when what is returned is dropped, unless `keep`.
fn apply_job<'a>(
    job: &headroom_k8s::JobPlan,
    (k, ns): (&'a str, &'a str),
    keep: bool,
) -> anyhow::Result<Applied<'a>> {
    let (config_map, job_manifest) = manifests(job)?;
    check_pod_security(k, ns, &job_manifest)?;
    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [config_map, job_manifest],
    });
    apply(k, &list.to_string())?;
    Ok(Applied {
        kubectl: k,
        namespace: ns,
        name: job.name.clone(),
        keep,
    })
}

/// The lines the pods' logs gave since: each to the view and its pod.
fn take_lines(
    lines: &mpsc::Receiver<(usize, Option<String>)>,
    pods: &mut [Pod],
    view: &mut FleetView,
) {
    while let Ok((shard, line)) = lines.try_recv() {
        let pod = &mut pods[shard];
        match line {
            Some(line) => {
                view.line(shard, &line);
                pod.log.push(line);
            }
            None => pod.log_done = true,
        }
    }
}

/// Refuses flags after `--` that the Job sets for every pod itself.
fn check_run_flags(run_flags: &[String]) -> anyhow::Result<()> {
    if let Some(flag) = run_flags.iter().find(|f| {
        SET_BY_THE_JOB
            .iter()
            .any(|s| *f == s || f.starts_with(&format!("{s}=")))
    }) {
        bail!(
            "{flag} after `--`: the Job sets it for every pod (outputs, dashboard and metrics are \
             `k8s run`'s own flags, for the merged run)"
        );
    }
    Ok(())
}

/// The Job's pods as the API server lists them: each one's log followed
/// once it runs.
struct JobPods<'a> {
    kubectl: &'a str,
    namespace: &'a str,
    job: &'a str,
    lines_to: mpsc::Sender<(usize, Option<String>)>,
    /// A listing failed (said once).
    list_failed: bool,
    /// Since when the Job's pods are refused (no pod at all).
    refused_since: Option<Instant>,
    applied_at: Instant,
}

impl JobPods<'_> {
    /// Lists the pods: each one's phase, its log followed once it runs;
    /// with `give_up`, those not started are left out of the merge. Fails
    /// when the Job's pods are refused for 10 s.
    fn poll(
        &mut self,
        pods: &mut [Pod],
        now: Instant,
        give_up: bool,
        view: &mut FleetView,
    ) -> anyhow::Result<()> {
        let pods_count = pods.len();
        // A failed listing (the API server busy, a token refreshed)
        // is said once and tried again: the pods run on regardless,
        // and those never seen running are given up in time.
        let listed = match list_pods(self.kubectl, self.namespace, self.job) {
            Ok(listed) => listed,
            Err(e) => {
                if !self.list_failed {
                    eprintln!("headroom: warning: {e:#}; trying again every second");
                }
                self.list_failed = true;
                Vec::new()
            }
        };
        if listed.is_empty() && now.duration_since(self.applied_at) > Duration::from_secs(5) {
            // No pod at all: the Job's pods may be refused.
            if let Some(why) = refused(self.kubectl, self.namespace, self.job) {
                self.refused_since.get_or_insert(now);
                if now.duration_since(self.refused_since.unwrap_or(now)) > Duration::from_secs(10) {
                    bail!("the Job's pods are refused: {why}");
                }
            }
        }
        for (shard, state) in listed {
            let Some(pod) = pods.get_mut(shard) else {
                continue;
            };
            let gone_to_new_pod = pod.name.as_ref().is_some_and(|n| *n != state.name);
            if gone_to_new_pod && pod.followed {
                continue; // a replacement: the shard already ran
            }
            pod.name = Some(state.name.clone());
            pod.phase = state.phase.clone();
            pod.waiting = state.waiting.clone();
            pod.node = state.node.clone();
            if !pod.followed && matches!(pod.phase.as_str(), "Running" | "Succeeded" | "Failed") {
                pod.followed = true;
                follow(
                    self.kubectl,
                    self.namespace,
                    &state.name,
                    shard,
                    self.lines_to.clone(),
                )?;
            }
        }
        for (shard, pod) in pods.iter_mut().enumerate() {
            if !pod.followed && !pod.ended && give_up {
                pod.ended = true;
                let why = pod.waiting.clone().unwrap_or_else(|| pod.phase.clone());
                let why = format!(
                    "never started ({})",
                    if why.is_empty() { "no pod" } else { &why }
                );
                eprintln!(
                    "headroom: shard {}/{pods_count} ({}) {why}: left out of the merge",
                    shard + 1,
                    pod.name.as_deref().unwrap_or("no pod")
                );
                view.ended(shard, Some(why));
            }
        }
        Ok(())
    }
}

/// Pods whose log ended: each told to the view (without results, why).
fn logs_ended(pods: &mut [Pod], view: &mut FleetView) {
    for (shard, pod) in pods.iter_mut().enumerate() {
        if pod.followed && pod.log_done && !pod.ended {
            pod.ended = true;
            let has_results = results_in_log(&pod.log.join("\n")).is_some();
            view.ended(
                shard,
                (!has_results).then(|| format!("no results in its log ({})", pod.phase)),
            );
        }
    }
}

/// The results each pod's log ends with, read back (and kept in
/// `--shards-dir` when given).
fn shard_files(
    pods: &[Pod],
    shards_dir: Option<&std::path::Path>,
    shards: u32,
) -> anyhow::Result<Vec<ShardFile>> {
    let mut files = Vec::new();
    for (shard, pod) in pods.iter().enumerate() {
        let name = pod
            .name
            .clone()
            .unwrap_or_else(|| format!("shard {}", shard + 1));
        let Some(json) = results_in_log(&pod.log.join("\n")) else {
            continue;
        };
        let results = serde_json::from_str(&json)
            .with_context(|| format!("{name}: the results in its log do not read back"))?;
        if let Some(dir) = shards_dir {
            std::fs::create_dir_all(dir)?;
            std::fs::write(
                dir.join(format!("shard-{}-of-{shards}.json", shard + 1)),
                &json,
            )?;
        }
        files.push(ShardFile {
            file: name,
            results,
        });
    }
    Ok(files)
}

/// Warns when the nodes cannot take every pod; refuses when the start
/// time is fixed (pods left Pending would miss it).
pub fn check_room(
    k: &str,
    placement: &PodPlacement,
    shards: u32,
    start_fixed: bool,
) -> anyhow::Result<()> {
    let each = room::cpu_millis(&placement.cpu).map_err(|e| anyhow::anyhow!("--cpu: {e}"))?;
    let nodes = kubectl(k, &["get", "nodes", "-o", "json"]);
    let running = kubectl(
        k,
        &[
            "get",
            "pods",
            "-A",
            "--field-selector=status.phase=Running",
            "-o",
            "json",
        ],
    );
    let (nodes, running) = match (nodes, running) {
        (Ok(n), Ok(p)) => (n, p),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("headroom: note: cannot see the nodes' room ({e:#}); not checked");
            return Ok(());
        }
    };
    let parse = |t: &str| serde_json::from_str::<Value>(t).context("kubectl's JSON");
    let selector = placement.node_selector.iter().cloned().collect();
    let (fit, free) = room::pods_that_fit(&parse(&nodes)?, &parse(&running)?, each, &selector)
        .map_err(|e| anyhow::anyhow!("the nodes' room: {e}"))?;
    if fit >= u64::from(shards) {
        return Ok(());
    }
    let free: Vec<String> = free
        .iter()
        .map(|(n, m)| format!("{n} {:.1}", *m as f64 / 1000.0))
        .collect();
    let message = format!(
        "{shards} pods × --cpu {} do not fit: the nodes have room for {fit} (free CPUs: {}); \
         the others would stay Pending past the start",
        placement.cpu,
        if free.is_empty() {
            "no schedulable node".to_string()
        } else {
            free.join(", ")
        }
    );
    if start_fixed {
        bail!("{message} — lower --cpu or --shards, or add nodes");
    }
    eprintln!("headroom: warning: {message}");
    Ok(())
}

/// A namespace that enforces the `restricted` profile refuses what it
/// does not allow: said here, before anything is applied.
fn check_pod_security(
    k: &str,
    ns: &str,
    job: &headroom_k8s::k8s_openapi::api::batch::v1::Job,
) -> anyhow::Result<()> {
    let Ok(text) = kubectl(k, &["get", "namespace", ns, "-o", "json"]) else {
        return Ok(());
    };
    let level = serde_json::from_str::<Value>(&text).ok().and_then(|v| {
        v["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
            .as_str()
            .map(String::from)
    });
    if level.as_deref() != Some("restricted") {
        return Ok(());
    }
    let pod = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .context("the Job has a pod template")?;
    let refused = pod_security::restricted(pod);
    if !refused.is_empty() {
        bail!(
            "namespace {ns} enforces the restricted Pod Security profile, which refuses: {}",
            refused.join("; ")
        );
    }
    Ok(())
}

fn apply(k: &str, json: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut child = Command::new(k)
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run `{k}`"))?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(json.as_bytes())?;
    let out = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("`{k} apply` failed: {}", stderr.trim());
    }
    // Admission warnings (a Pod Security `warn` level) are worth seeing.
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        eprintln!("headroom: kubectl: {line}");
    }
    Ok(())
}

/// Suspending the Job has Kubernetes stop its pods gracefully (SIGTERM:
/// each writes its results) and start no others.
fn suspend(k: &str, ns: &str, name: &str, why: &str) {
    eprintln!("headroom: {why}");
    let patched = kubectl(
        k,
        &[
            "patch",
            "-n",
            ns,
            &format!("job/{name}"),
            "--type=merge",
            "-p",
            r#"{"spec":{"suspend":true}}"#,
        ],
    );
    if let Err(e) = patched {
        eprintln!("headroom: warning: {e:#}");
    }
}

struct Listed {
    name: String,
    phase: String,
    waiting: Option<String>,
    node: Option<String>,
}

/// The Job's pods by shard (0-based completion index).
fn list_pods(k: &str, ns: &str, job: &str) -> anyhow::Result<Vec<(usize, Listed)>> {
    let text = kubectl(
        k,
        &[
            "get",
            "pods",
            "-n",
            ns,
            "-l",
            &format!("headroom/job={job}"),
            "-o",
            "json",
        ],
    )?;
    let v: Value = serde_json::from_str(&text).context("kubectl get pods: not JSON")?;
    let mut out = Vec::new();
    for item in v["items"].as_array().into_iter().flatten() {
        let meta = &item["metadata"];
        let index_key = "batch.kubernetes.io/job-completion-index";
        let index = meta["annotations"][index_key]
            .as_str()
            .or(meta["labels"][index_key].as_str())
            .and_then(|i| i.parse::<usize>().ok());
        let Some(index) = index else { continue };
        let waiting = item["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
            .as_str()
            .map(String::from)
            .or_else(|| {
                item["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
                    .and_then(|c| c["reason"].as_str().map(String::from))
            });
        out.push((
            index,
            Listed {
                name: meta["name"].as_str().unwrap_or_default().to_string(),
                phase: item["status"]["phase"]
                    .as_str()
                    .unwrap_or("Pending")
                    .to_string(),
                waiting,
                node: item["spec"]["nodeName"].as_str().map(String::from),
            },
        ));
    }
    Ok(out)
}

/// Why the Job creates no pods, from its events (Pod Security, quota).
fn refused(k: &str, ns: &str, job: &str) -> Option<String> {
    let text = kubectl(
        k,
        &[
            "get",
            "events",
            "-n",
            ns,
            "--field-selector",
            &format!("involvedObject.name={job},reason=FailedCreate"),
            "-o",
            "json",
        ],
    )
    .ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v["items"].as_array()?.last()?["message"]
        .as_str()
        .map(String::from)
}

/// Follows a pod's log (`kubectl logs -f`) on a thread of its own: each
/// line, then `None` when the log ends.
fn follow(
    k: &str,
    ns: &str,
    pod: &str,
    shard: usize,
    to: mpsc::Sender<(usize, Option<String>)>,
) -> anyhow::Result<()> {
    let mut child = Command::new(k)
        .args(["logs", "-f", "-n", ns, pod])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot run `{k} logs -f`"))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    std::thread::Builder::new()
        .name(format!("headroom-pod-{}", shard + 1))
        .spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if to.send((shard, Some(line))).is_err() {
                    break;
                }
            }
            let _ = child.wait();
            let _ = to.send((shard, None));
        })
        .context("cannot start a thread to follow a pod's log")?;
    Ok(())
}

/// `3/3 scheduled, 2 running, 1 done; late: x-2-abcde (ContainerCreating)`.
fn progress(pods: &[Pod], started: bool) -> String {
    let n = pods.len();
    let scheduled = pods.iter().filter(|p| p.node.is_some()).count();
    let running = pods.iter().filter(|p| p.phase == "Running").count();
    let done = pods
        .iter()
        .filter(|p| matches!(p.phase.as_str(), "Succeeded" | "Failed"))
        .count();
    let mut line = format!("{scheduled}/{n} scheduled, {running} running, {done} done");
    let waiting: Vec<String> = pods
        .iter()
        .filter(|p| !p.followed && !p.ended)
        .map(|p| {
            format!(
                "{} ({})",
                p.name.as_deref().unwrap_or("not created"),
                p.waiting.as_deref().unwrap_or(&p.phase)
            )
        })
        .collect();
    if started && !waiting.is_empty() {
        line.push_str(&format!("; late: {}", waiting.join(", ")));
    }
    line
}
