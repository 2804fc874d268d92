//! The workspace's floors point only down: each crate depends (for its
//! build, not its tests) only on crates listed before it here, so the
//! engine never depends on scenario files, monitors, reports, studies or
//! the command line. Cargo refuses cycles; this keeps the order too. And
//! readers of records — `report`, the results fuzzer — link nothing that
//! runs load or starts servers.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Bottom floor first (ARCHITECTURE.md's table).
const FLOORS: [&str; 14] = [
    "headroom-metrics",
    "headroom-http",
    "headroom-engine",
    "headroom-objectives",
    "headroom-records",
    "headroom-monitor",
    "headroom-measure",
    "headroom-capacity",
    "headroom-scenario",
    "headroom-study",
    "headroom-report",
    "headroom-k8s",
    "headroom-sample-server",
    "headroom",
];

/// The crates that open sockets to load a server, start processes or
/// parse plans to run: no reader of records may link one.
const MACHINERY: [&str; 9] = [
    "headroom-http",
    "headroom-engine",
    "headroom-monitor",
    "headroom-measure",
    "headroom-capacity",
    "headroom-scenario",
    "headroom-study",
    "headroom-k8s",
    "headroom-sample-server",
];

/// Each package of the manifest's workspace with its headroom build
/// dependencies (not dev-dependencies).
fn build_dependencies(manifest: &Path) -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|n| n.starts_with("headroom"))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

fn workspace() -> BTreeMap<String, Vec<String>> {
    build_dependencies(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml"))
}

/// Every workspace crate `name` links, directly or not.
fn linked(name: &str, graph: &BTreeMap<String, Vec<String>>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = graph[name].iter().map(String::as_str).collect();
    while let Some(n) = todo.pop() {
        if seen.insert(n.to_string()) {
            todo.extend(graph.get(n).into_iter().flatten().map(String::as_str));
        }
    }
    seen
}

#[test]
fn every_crate_depends_only_on_lower_floors() {
    let graph = workspace();
    let names: BTreeSet<&str> = graph.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        FLOORS.into_iter().collect(),
        "a crate was added or renamed: give it a floor"
    );
    for (name, deps) in &graph {
        let floor = FLOORS.iter().position(|f| f == name).unwrap();
        for dep in deps {
            let dep_floor = FLOORS.iter().position(|f| f == dep).unwrap();
            assert!(
                dep_floor < floor,
                "{name} depends on {dep}, which is not on a lower floor"
            );
        }
    }
    assert_eq!(
        graph["headroom-engine"],
        ["headroom-http", "headroom-metrics"]
    );
}

#[test]
fn readers_of_records_link_no_machinery() {
    let graph = workspace();
    for reader in ["headroom-metrics", "headroom-records", "headroom-report"] {
        let machinery: Vec<String> = linked(reader, &graph)
            .into_iter()
            .filter(|c| MACHINERY.contains(&c.as_str()))
            .collect();
        assert!(
            machinery.is_empty(),
            "{reader} links {machinery:?}: records and their readers must build without them"
        );
    }
    // The results fuzzer is a package of its own: it reads results.json
    // as report and compare do, and links what they link.
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/records/Cargo.toml");
    let fuzz = build_dependencies(&fuzz);
    let mut reads = fuzz["headroom-fuzz-records"].clone();
    reads.sort();
    assert_eq!(reads, ["headroom-records", "headroom-report"]);
}
