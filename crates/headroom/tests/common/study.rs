//! Running `headroom study` as a user does (the binary on PATH) and
//! checking what it leaves: study.json, and no process of any
//! configuration still alive.

use super::headroom_bin;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// PATH with the headroom binary first, as a user has it installed.
pub fn path_with_headroom() -> String {
    let bin = Path::new(headroom_bin())
        .parent()
        .unwrap()
        .display()
        .to_string();
    format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())
}

pub fn study(file: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(headroom_bin())
        .arg("study")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(extra)
        .env("PATH", path_with_headroom())
        .output()
        .unwrap()
}

/// The stdout of a run that must have exited 0 (both streams shown if not).
pub fn stdout_of_success(o: &Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Live processes in a process group (zombies excluded).
pub fn group_alive(pgid: i64) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .is_some_and(|s| {
                    let f: Vec<&str> = s
                        .rsplit(')')
                        .next()
                        .unwrap_or("")
                        .split_whitespace()
                        .collect();
                    f.first() != Some(&"Z")
                        && f.get(2).and_then(|g| g.parse::<i64>().ok()) == Some(pgid)
                })
        })
        .collect()
}

pub fn assert_no_survivors(report: &Value) {
    for c in report["configs"].as_array().unwrap() {
        for r in c["runs"].as_array().unwrap() {
            assert_eq!(r["survivors"].as_u64(), Some(0), "{}", c["label"]);
            let pgid = r["pgid"].as_i64().unwrap();
            if pgid > 0 {
                assert!(
                    group_alive(pgid).is_empty(),
                    "{}: group {pgid} still has {:?}",
                    c["label"],
                    group_alive(pgid)
                );
            }
        }
    }
}

/// Live (not zombie) processes whose environment holds
/// `HEADROOM_TEST_MARK=mark` (a study's `env` gives it to a server and all
/// it starts).
pub fn marked_alive(mark: &str) -> usize {
    let needle = format!("HEADROOM_TEST_MARK={mark}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
            let zombie = std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            !zombie
                && String::from_utf8_lossy(&environ)
                    .split('\0')
                    .any(|v| v == needle)
        })
        .count()
}

/// The scenario files sharded runs wrote beside a study (`.headroom-shards-*`)
/// still in `dir`: each must be removed after its run.
pub fn shard_scenarios_left(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".headroom-shards-")
        })
        .count()
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

pub fn two_config_study(dir: &Path, objective: &str, duration: &str) -> PathBuf {
    marked_study(dir, objective, duration, "none")
}

/// `mark` goes into the servers' environment, so a test can find them.
pub fn marked_study(dir: &Path, objective: &str, duration: &str, mark: &str) -> PathBuf {
    write(
        dir,
        "s.toml",
        &format!(
            r#"
[scenario.load]
vus = 8
duration = "{duration}"
[[scenario.request]]
name = "sleep"
path = "/sleep?ms=10"

[[server]]
name = "target"
command = "headroom target --listen 127.0.0.1:{{port}} --workers 1 --threads {{threads}}"
ready = "/health"
env = {{ HEADROOM_TEST_MARK = "{mark}" }}
[server.grid]
threads = [1, 8]

[measure]
objective = "{objective}"
pause = "0s"
"#
        ),
    )
}
