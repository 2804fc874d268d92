//! The workspace's floors point only down: each crate depends (for its
//! build, not its tests) only on crates listed before it here, so the
//! engine never depends on scenario files, monitors, reports, studies or
//! the command line. Cargo refuses cycles; this keeps the order too.

use serde_json::Value;
use std::process::Command;

/// Bottom floor first (the README's Layout table).
const FLOORS: [&str; 12] = [
    "headroom-http",
    "headroom-engine",
    "headroom-objectives",
    "headroom-monitor",
    "headroom-results",
    "headroom-capacity",
    "headroom-scenario",
    "headroom-study",
    "headroom-report",
    "headroom-k8s",
    "headroom-sample-server",
    "headroom",
];

#[test]
fn every_crate_depends_only_on_lower_floors() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let mut names: Vec<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    names.sort();
    let mut floors = FLOORS.to_vec();
    floors.sort();
    assert_eq!(
        names, floors,
        "a crate was added or renamed: give it a floor"
    );
    for p in packages {
        let name = p["name"].as_str().unwrap();
        let floor = FLOORS.iter().position(|f| *f == name).unwrap();
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            let Some(dep_floor) = FLOORS.iter().position(|f| *f == dep) else {
                continue;
            };
            if d["kind"].is_null() {
                assert!(
                    dep_floor < floor,
                    "{name} depends on {dep}, which is not on a lower floor"
                );
            }
        }
    }
    let engine = packages
        .iter()
        .find(|p| p["name"] == "headroom-engine")
        .unwrap();
    let internal: Vec<&str> = engine["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"].is_null())
        .map(|d| d["name"].as_str().unwrap())
        .filter(|n| n.starts_with("headroom"))
        .collect();
    assert_eq!(internal, ["headroom-http"]);
}
