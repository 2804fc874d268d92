//! Will the pods fit? Before a Job is applied: how many pods requesting
//! `cpu` each the schedulable nodes (matching the node selector) can still
//! take, from the nodes' allocatable CPU less what their running pods
//! request — what the scheduler weighs. A Job whose pods do not all fit
//! has some wait Pending past the shared start.

use serde_json::Value;
use std::collections::BTreeMap;

/// A CPU quantity (`2`, `1.5`, `500m`) in millicores.
pub fn cpu_millis(quantity: &str) -> Result<u64, String> {
    let q = quantity.trim();
    let bad = || format!("`{quantity}` is not a CPU quantity (e.g. 2, 1.5, 500m)");
    if let Some(m) = q.strip_suffix('m') {
        return m.parse::<u64>().map_err(|_| bad());
    }
    let cores: f64 = q.parse().map_err(|_| bad())?;
    if !(cores.is_finite() && cores >= 0.0) {
        return Err(bad());
    }
    Ok((cores * 1000.0).round() as u64)
}

/// Free CPU per schedulable node, in millicores, and how many pods of
/// `cpu_millis` fit in all. `nodes` and `pods`: `kubectl get nodes -o
/// json` and `kubectl get pods -A -o json`.
pub fn pods_that_fit(
    nodes: &Value,
    pods: &Value,
    cpu_millis_each: u64,
    selector: &BTreeMap<String, String>,
) -> Result<(u64, BTreeMap<String, u64>), String> {
    let mut free: BTreeMap<String, u64> = BTreeMap::new();
    for node in nodes["items"].as_array().ok_or("no nodes in the answer")? {
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        let labels = &node["metadata"]["labels"];
        let selected = selector
            .iter()
            .all(|(k, v)| labels[k].as_str() == Some(v.as_str()));
        let ready = node["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        if !selected || !ready || node["spec"]["unschedulable"] == true {
            continue;
        }
        let allocatable = node["status"]["allocatable"]["cpu"]
            .as_str()
            .map(cpu_millis)
            .transpose()?
            .unwrap_or(0);
        free.insert(name.to_string(), allocatable);
    }
    for pod in pods["items"].as_array().into_iter().flatten() {
        let phase = pod["status"]["phase"].as_str().unwrap_or_default();
        let Some(node) = pod["spec"]["nodeName"].as_str() else {
            continue;
        };
        if matches!(phase, "Succeeded" | "Failed") {
            continue;
        }
        let Some(left) = free.get_mut(node) else {
            continue;
        };
        for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
            if let Some(q) = c["resources"]["requests"]["cpu"].as_str() {
                *left = left.saturating_sub(cpu_millis(q)?);
            }
        }
    }
    let fit = free.values().map(|f| f / cpu_millis_each.max(1)).sum();
    Ok((fit, free))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_in_millicores() {
        assert_eq!(cpu_millis("2"), Ok(2000));
        assert_eq!(cpu_millis("1.5"), Ok(1500));
        assert_eq!(cpu_millis("250m"), Ok(250));
        assert!(cpu_millis("two").is_err());
        assert!(cpu_millis("-1").is_err());
    }

    #[test]
    fn what_running_pods_request_is_taken_and_cordoned_or_unselected_nodes_are_not_counted() {
        let node = |name: &str, cpu: &str, pool: &str, unschedulable: bool| {
            json!({
                "metadata": {"name": name, "labels": {"pool": pool}},
                "spec": {"unschedulable": unschedulable},
                "status": {"allocatable": {"cpu": cpu},
                           "conditions": [{"type": "Ready", "status": "True"}]}
            })
        };
        let nodes = json!({"items": [
            node("a", "4", "load", false),
            node("b", "3500m", "load", false),
            node("c", "16", "load", true),
            node("d", "16", "web", false),
        ]});
        let pods = json!({"items": [
            {"spec": {"nodeName": "a", "containers": [{"resources": {"requests": {"cpu": "1500m"}}}]},
             "status": {"phase": "Running"}},
            {"spec": {"nodeName": "b", "containers": [{"resources": {"requests": {"cpu": "3"}}}]},
             "status": {"phase": "Succeeded"}},
        ]});
        let selector = BTreeMap::from([("pool".to_string(), "load".to_string())]);
        let (fit, free) = pods_that_fit(&nodes, &pods, 1000, &selector).unwrap();
        assert_eq!(
            free,
            BTreeMap::from([("a".into(), 2500), ("b".into(), 3500)])
        );
        assert_eq!(fit, 2 + 3);
        let (fit, _) = pods_that_fit(&nodes, &pods, 1000, &BTreeMap::new()).unwrap();
        assert_eq!(fit, 5 + 16);
    }
}
