//! `headroom k8s`: the manifests of an Indexed Job, read back into the
//! Kubernetes API types, and `k8s collect` — with the pods played by local
//! processes running exactly the Job's arguments against the built-in
//! target, the ConfigMap's files laid out as its volume would lay them,
//! and `kubectl` a script that serves those processes' logs. (No cluster
//! is reachable here: everything up to `kubectl apply` is real.)

use crate::common::{headroom_bin, invoke, scenario_dir, Target};
use headroom_k8s::k8s_openapi::api::batch::v1::Job;
use headroom_k8s::k8s_openapi::api::core::v1::ConfigMap;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

#[test]
fn an_indexed_job_runs_the_shards_and_collect_merges_them() {
    let target = Target::start(1, 4);
    let before = target.requests();
    let rows = "name\na\nb\nc\nd\ne\nf\n";
    let dir = scenario_dir(&[]);
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/names.csv"), rows).unwrap();
    let scenario = dir.path().join("hello.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"
base_url = "{}"
[load]
vus = 3
[[feeder]]
name = "names"
file = "data/names.csv"
order = "unique"
[[request]]
name = "hello"
path = "/hello?n={{{{name}}}}"
"#,
            target.url("")
        ),
    )
    .unwrap();
    let manifests = tempfile::tempdir().unwrap();
    let out = Command::new(headroom_bin())
        .args(["k8s", scenario.to_str().unwrap(), "--shards", "3"])
        .args([
            "--image",
            "registry.example/headroom:test",
            "--namespace",
            "load",
        ])
        .args([
            "--start-at",
            "+3s",
            "--out",
            manifests.path().to_str().unwrap(),
        ])
        .args(["--", "--threads", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("kubectl apply -f"));

    let job: Job = serde_yaml_ng::from_str(
        &std::fs::read_to_string(manifests.path().join("job.yaml")).unwrap(),
    )
    .unwrap();
    let config: ConfigMap = serde_yaml_ng::from_str(
        &std::fs::read_to_string(manifests.path().join("configmap.yaml")).unwrap(),
    )
    .unwrap();
    let spec = job.spec.clone().unwrap();
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!((spec.completions, spec.parallelism), (Some(3), Some(3)));
    assert_eq!(job.metadata.name.as_deref(), Some("headroom-hello"));
    assert_eq!(job.metadata.namespace.as_deref(), Some("load"));
    let pod = spec.template.spec.unwrap();
    let args = pod.containers[0].args.clone().unwrap();

    // The ConfigMap's volume, as the kubelet would lay it out.
    let volume = tempfile::tempdir().unwrap();
    let data = config.data.unwrap();
    for item in pod.volumes.unwrap()[0]
        .config_map
        .as_ref()
        .unwrap()
        .items
        .clone()
        .unwrap()
    {
        let path = volume.path().join(&item.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &data[&item.key]).unwrap();
    }

    // The pods: the Job's arguments, JOB_COMPLETION_INDEX expanded as
    // Kubernetes expands it, stdout and stderr in one log as `kubectl logs`
    // shows them.
    let logs = tempfile::tempdir().unwrap();
    let pods: Vec<_> = (0..3)
        .map(|i| {
            let args: Vec<String> = args
                .iter()
                .map(|a| {
                    a.replace("$(JOB_COMPLETION_INDEX)", &i.to_string())
                        .replace("/scenario", volume.path().to_str().unwrap())
                })
                .collect();
            let log =
                std::fs::File::create(logs.path().join(format!("headroom-hello-{i}"))).unwrap();
            Command::new(headroom_bin())
                .args(&args)
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut p in pods {
        assert!(p.wait().unwrap().success());
    }
    // Each pod's shard took its own third of the unique rows.
    assert_eq!(target.requests() - before, 6);

    let kubectl = logs.path().join("kubectl");
    std::fs::write(
        &kubectl,
        format!(
            "#!/bin/sh\n\
             case \"$1\" in\n\
               get) for i in 0 1 2; do echo pod/headroom-hello-$i; done ;;\n\
               logs) cat \"{}/${{4#pod/}}\" ;;\n\
               *) exit 1 ;;\n\
             esac\n",
            logs.path().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let merged = invoke(
        "k8s",
        &[
            "collect",
            "headroom-hello",
            "-n",
            "load",
            "--kubectl",
            kubectl.to_str().unwrap(),
        ],
        |_| {},
    );
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let m = merged.results();
    assert_eq!(m["requests"]["total"], 6);
    assert_eq!(m["requests"]["ok"], 6);
    assert_eq!(m["meta"]["shards"].as_array().unwrap().len(), 3);
}

#[test]
fn files_outside_the_scenario_folder_are_refused() {
    let dir = scenario_dir(&[]);
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        "base_url = \"http://127.0.0.1:9\"\n[[feeder]]\nname = \"x\"\nfile = \"../x.csv\"\n[[request]]\nname = \"r\"\npath = \"/\"\n",
    )
    .unwrap();
    let out = Command::new(headroom_bin())
        .args([
            "k8s",
            scenario.to_str().unwrap(),
            "--shards",
            "2",
            "--image",
            "i",
        ])
        .args(["--out", dir.path().join("m").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("outside the scenario's folder"), "{stderr}");
}
