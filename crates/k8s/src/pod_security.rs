//! The `restricted` Pod Security Standard
//! (<https://kubernetes.io/docs/concepts/security/pod-security-standards/>),
//! as the admission controller of a namespace labelled
//! `pod-security.kubernetes.io/enforce=restricted` applies it to a pod —
//! the baseline's host and privilege rules and the restricted ones — so a
//! Job that would be refused there is caught before it is applied.
//! (Windows, AppArmor, SELinux and sysctl rules are not checked: headroom's
//! pods set none of them.)

use k8s_openapi::api::core::v1::{Container, PodSpec, SecurityContext};

/// Volume types the profile allows.
const ALLOWED_VOLUMES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// What in `pod` the profile refuses, one line each (none: admitted).
pub fn restricted(pod: &PodSpec) -> Vec<String> {
    let mut refused = Vec::new();
    for (set, field) in [
        (pod.host_network, "hostNetwork"),
        (pod.host_pid, "hostPID"),
        (pod.host_ipc, "hostIPC"),
    ] {
        if set == Some(true) {
            refused.push(format!("{field}: true (host namespaces are not allowed)"));
        }
    }
    for v in pod.volumes.iter().flatten() {
        let value = serde_json::to_value(v).unwrap_or_default();
        for (kind, _) in value.as_object().into_iter().flatten() {
            if kind != "name" && !ALLOWED_VOLUMES.contains(&kind.as_str()) {
                refused.push(format!("volume {}: type {kind} is not allowed", v.name));
            }
        }
    }
    let pod_sc = pod.security_context.as_ref();
    let pod_non_root = pod_sc.and_then(|s| s.run_as_non_root);
    let pod_seccomp = pod_sc
        .and_then(|s| s.seccomp_profile.as_ref())
        .map(|p| p.type_.as_str());
    if pod_sc.and_then(|s| s.run_as_user) == Some(0) {
        refused.push("securityContext.runAsUser: 0 (root)".into());
    }
    if pod_seccomp == Some("Unconfined") {
        refused.push("securityContext.seccompProfile: Unconfined".into());
    }
    let containers = pod.init_containers.iter().flatten().chain(&pod.containers);
    for c in containers {
        refused.extend(container(c, pod_non_root, pod_seccomp));
    }
    refused
}

fn container(c: &Container, pod_non_root: Option<bool>, pod_seccomp: Option<&str>) -> Vec<String> {
    let mut refused = Vec::new();
    let name = &c.name;
    let default = SecurityContext::default();
    let sc = c.security_context.as_ref().unwrap_or(&default);
    if sc.privileged == Some(true) {
        refused.push(format!("container {name}: privileged"));
    }
    if sc.allow_privilege_escalation != Some(false) {
        refused.push(format!(
            "container {name}: allowPrivilegeEscalation must be false"
        ));
    }
    if sc.run_as_non_root.or(pod_non_root) != Some(true) {
        refused.push(format!("container {name}: runAsNonRoot must be true"));
    }
    if sc.run_as_user == Some(0) {
        refused.push(format!("container {name}: runAsUser 0 (root)"));
    }
    let seccomp = sc
        .seccomp_profile
        .as_ref()
        .map(|p| p.type_.as_str())
        .or(pod_seccomp);
    if !matches!(seccomp, Some("RuntimeDefault" | "Localhost")) {
        refused.push(format!(
            "container {name}: seccompProfile.type must be RuntimeDefault or Localhost"
        ));
    }
    let caps = sc.capabilities.as_ref();
    let drops_all = caps
        .and_then(|c| c.drop.as_ref())
        .is_some_and(|d| d.iter().any(|x| x == "ALL"));
    if !drops_all {
        refused.push(format!(
            "container {name}: capabilities.drop must include ALL"
        ));
    }
    for add in caps.and_then(|c| c.add.as_ref()).into_iter().flatten() {
        if add != "NET_BIND_SERVICE" {
            refused.push(format!("container {name}: capability {add} added"));
        }
    }
    if sc.proc_mount.as_deref().is_some_and(|m| m != "Default") {
        refused.push(format!("container {name}: procMount must be Default"));
    }
    for p in c.ports.iter().flatten() {
        if p.host_port.is_some_and(|h| h != 0) {
            refused.push(format!(
                "container {name}: hostPort {}",
                p.host_port.unwrap_or(0)
            ));
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod as `headroom k8s` wrote it before the profile was checked:
    /// non-root, read-only, no escalation — and still refused.
    #[test]
    fn yesterdays_pods_are_refused_for_what_the_cluster_refused_them() {
        let pod: PodSpec = serde_json::from_value(serde_json::json!({
            "restartPolicy": "Never",
            "containers": [{
                "name": "headroom",
                "image": "headroom:dev",
                "securityContext": {
                    "runAsNonRoot": true, "runAsUser": 65534,
                    "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false
                }
            }],
            "volumes": [{"name": "scenario", "configMap": {"name": "x"}}]
        }))
        .unwrap();
        assert_eq!(
            restricted(&pod),
            vec![
                "container headroom: seccompProfile.type must be RuntimeDefault or Localhost",
                "container headroom: capabilities.drop must include ALL",
            ]
        );
    }

    #[test]
    fn host_paths_root_and_added_capabilities_are_refused() {
        let pod: PodSpec = serde_json::from_value(serde_json::json!({
            "hostPID": true,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "c",
                "securityContext": {
                    "runAsNonRoot": true, "runAsUser": 0, "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}
                },
                "ports": [{"containerPort": 80, "hostPort": 80}]
            }],
            "volumes": [{"name": "h", "hostPath": {"path": "/"}}]
        }))
        .unwrap();
        let refused = restricted(&pod);
        for expected in [
            "hostPID: true",
            "volume h: type hostPath",
            "runAsUser 0",
            "capability NET_ADMIN",
            "hostPort 80",
        ] {
            assert!(
                refused.iter().any(|r| r.contains(expected)),
                "{expected} in {refused:?}"
            );
        }
        assert_eq!(refused.len(), 5, "{refused:?}");
    }
}
