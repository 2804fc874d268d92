//! Bad scenario files get errors that name the file, line and column (and
//! the nearest valid key or name), exit code 2, and no load is sent.

use crate::common::{headroom_bin, scenario_dir, RawServer};
use std::process::Command;

struct Case {
    name: &'static str,
    file: &'static str,
    text: &'static str,
    /// "line:column" the first error must point at (a quoted value's
    /// opening quote, as the TOML parser reports its own errors).
    at: &'static str,
    /// What the message must say.
    says: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "unknown key, misspelt",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[load]\nvuss = 5\n[[request]]\nname = \"a\"\npath = \"/\"\n",
        at: "3:1",
        says: &["unknown field `vuss`", "did you mean `vus`?"],
    },
    Case {
        name: "wrong type",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[load]\nvus = \"many\"\n[[request]]\nname = \"a\"\npath = \"/\"\n",
        at: "3:7",
        says: &["invalid type", "u32"],
    },
    Case {
        name: "bad duration",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[load]\nvus = 2\nduration = \"10x\"\n[[request]]\nname = \"a\"\npath = \"/\"\n",
        at: "4:12",
        says: &["duration", "`10x` is not a duration"],
    },
    Case {
        name: "missing feeder file",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[[feeder]]\nname = \"ids\"\nfile = \"nope.csv\"\n[[request]]\nname = \"a\"\npath = \"/\"\n",
        at: "4:8",
        says: &["feeder `ids`", "cannot read feeder file", "nope.csv"],
    },
    Case {
        name: "template variable nothing provides",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[[feeder]]\nname = \"ids\"\nfile = \"ids.csv\"\n[[request]]\nname = \"a\"\npath = \"/x/{{idd}}\"\n",
        at: "7:12",
        says: &["template variable `idd`", "did you mean `id`?"],
    },
    Case {
        name: "session names a request that does not exist",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[[request]]\nname = \"home\"\npath = \"/\"\n[[session]]\nname = \"s\"\nsteps = [\n  { request = \"home\" },\n  { request = \"hom\" },\n]\n",
        at: "9:15",
        says: &["step 2", "no request named `hom`", "did you mean `home`?"],
    },
    Case {
        name: "YAML unknown key",
        file: "s.yaml",
        text: "base_url: BASE\nload:\n  vus: 2\n  durration: 5s\nrequest:\n  - name: a\n    path: /\n",
        at: "4:3",
        says: &["unknown field `durration`", "did you mean `duration`?"],
    },
    Case {
        name: "YAML bad duration",
        file: "s.yaml",
        text: "base_url: BASE\nload:\n  vus: 2\n  ramp_up: soon\nrequest:\n  - name: a\n    path: /\n",
        at: "4:12",
        says: &["ramp_up", "`soon` is not a duration"],
    },
    Case {
        name: "unset environment variable",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[load]\nvus = \"${HEADROOM_TEST_UNSET_VAR}\"\n[[request]]\nname = \"a\"\npath = \"/\"\n",
        at: "3:8",
        says: &["HEADROOM_TEST_UNSET_VAR is not set"],
    },
    Case {
        name: "environment variable outside a string",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[load]\nvus = ${USERS:-10}\n[[request]]\nname = \"a\"\npath = \"/\"\n",
        at: "3:7",
        says: &["outside a string", "write \"${USERS:-10}\""],
    },
    Case {
        name: "bad status range in a check",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[[request]]\nname = \"a\"\npath = \"/\"\ncheck = [ { status = \"200-99x\" } ]\n",
        at: "5:22",
        says: &["status", "not an HTTP status"],
    },
    Case {
        name: "open and closed fields mixed",
        file: "s.toml",
        text: "base_url = \"BASE\"\n[load]\nmodel = \"open\"\nrate = 5\nvus = 3\n[[request]]\nname = \"a\"\npath = \"/\"\n",
        at: "5:1",
        says: &["load.vus is for the closed model"],
    },
];

#[test]
fn each_validation_error_names_file_line_and_column_and_sends_nothing() {
    let server = RawServer::start(|_, count| {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    let base = server.url("");
    for case in CASES {
        let text = case.text.replace("BASE", &base);
        let dir = scenario_dir(&[(case.file, &text), ("ids.csv", "id\n1\n")]);
        let path = dir.path().join(case.file);
        let out = Command::new(headroom_bin())
            .arg("run")
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", case.name);
        let first = stderr.lines().next().unwrap_or_default();
        let want = format!("{}:{}: ", path.display(), case.at);
        assert!(
            first.contains(&want),
            "{}: expected `{want}` in:\n{stderr}",
            case.name
        );
        for s in case.says {
            assert!(
                first.contains(s),
                "{}: expected `{s}` in:\n{stderr}",
                case.name
            );
        }
        assert!(!stderr.contains("panicked"), "{}", case.name);
    }
    assert_eq!(server.requests(), 0, "no load before validation passes");
}

#[test]
fn all_problems_are_reported_at_once() {
    let text = "base_url = \"http://127.0.0.1:9\"\n[load]\nvus = 0\nduration = \"forever\"\n[[request]]\nname = \"a\"\npath = \"/{{nope}}\"\n[[request]]\nname = \"a\"\npath = \"/\"\n";
    let dir = scenario_dir(&[("s.toml", text)]);
    let out = Command::new(headroom_bin())
        .arg("run")
        .arg(dir.path().join("s.toml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    for needle in [
        "s.toml:4:12: duration: `forever`",
        "s.toml:3:1: load.vus: must be at least 1",
        "request `a` is defined twice",
        "template variable `nope`",
    ] {
        assert!(stderr.contains(needle), "missing `{needle}` in:\n{stderr}");
    }
}

#[test]
fn not_a_scenario_file() {
    let dir = scenario_dir(&[("s.txt", "x")]);
    let out = Command::new(headroom_bin())
        .arg("run")
        .arg(dir.path().join("s.txt"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(".toml, .yaml or .yml"));
    let out = Command::new(headroom_bin())
        .args(["run", "/no/such/file.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the scenario"));
}

#[test]
fn schema_is_printed_and_describes_the_format() {
    let out = Command::new(headroom_bin()).arg("schema").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let props = schema["properties"].as_object().unwrap();
    for key in [
        "base_url", "load", "request", "session", "feeder", "tls", "http",
    ] {
        assert!(props.contains_key(key), "schema lacks {key}");
    }
    assert_eq!(schema["additionalProperties"], false);
}

fn schema(which: &str) -> serde_json::Value {
    let o = Command::new(headroom_bin())
        .args(["schema", which])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Every file in examples/ is valid before headroom reads it: a standard
/// TOML or YAML parser takes it as written (`${…}` only inside strings),
/// and it validates against `headroom schema scenario` or `study` — so
/// editors and CI validators accept it.
#[test]
fn every_example_parses_with_a_standard_parser_and_validates_against_the_schema() {
    let scenario = jsonschema::validator_for(&schema("scenario")).unwrap();
    let study = jsonschema::validator_for(&schema("study")).unwrap();
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files = Vec::new();
    let mut todo = vec![root];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("toml" | "yaml" | "yml")
            ) {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 15, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let value: serde_json::Value = if path.extension().unwrap() == "toml" {
            let v: toml::Value = toml::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not valid TOML: {e}", path.display()));
            serde_json::to_value(v).unwrap()
        } else {
            serde_yaml_ng::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
        };
        let validator = if value.get("server").is_some() {
            &study
        } else {
            &scenario
        };
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
    }
}

/// The schema flags what headroom would refuse: a duration it cannot read,
/// a model that does not exist, an unknown key.
#[test]
fn the_scenario_schema_refuses_what_headroom_refuses() {
    let v = jsonschema::validator_for(&schema("scenario")).unwrap();
    let ok = serde_json::json!({"load": {"vus": "${USERS:-10}", "duration": "${D:-30s}"}});
    assert!(v.is_valid(&ok));
    for bad in [
        serde_json::json!({"load": {"duration": "soon"}}),
        serde_json::json!({"load": {"model": "sometimes"}}),
        serde_json::json!({"lode": {}}),
        serde_json::json!({"load": {"vus": -1}}),
        serde_json::json!({"load": {"vus": 0}}),
        serde_json::json!({"http": {"threads": 0}}),
    ] {
        assert!(!v.is_valid(&bad), "{bad}");
    }
    // results.json's schema describes a real results file.
    let results = jsonschema::validator_for(&schema("results")).unwrap();
    let target = crate::common::Target::start(1, 1);
    let r = crate::common::run(&["--url", &target.url("/hello"), "-n", "20", "-c", "2"]);
    let errors: Vec<String> = results
        .iter_errors(r.results())
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// Runs `headroom run FILE EXTRA…` on a scenario whose request reads
/// `feeder` (a `[[feeder]]` file) or `body_file`; returns exit and stderr.
fn refused_input(feeder: Option<&str>, body_file: Option<&str>, extra: &[&str]) -> (i32, String) {
    let server = RawServer::start(|_, count| {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    let mut scenario = format!("base_url = \"{}\"\n", server.url(""));
    if let Some(f) = feeder {
        scenario += &format!("[[feeder]]\nname = \"rows\"\nfile = \"{f}\"\n");
    }
    scenario += "[[request]]\nname = \"a\"\npath = \"/\"\nmethod = \"POST\"\n";
    if let Some(b) = body_file {
        scenario += &format!("body_file = \"{b}\"\n");
    }
    let dir = scenario_dir(&[("s.toml", &scenario)]);
    std::fs::write(
        dir.path().join("small.csv"),
        "a\n".to_string() + &"x\n".repeat(600_000),
    )
    .unwrap();
    // 2 GiB, sparse: takes no disk, and no memory unless read.
    let sparse = std::fs::File::create(dir.path().join("sparse.csv")).unwrap();
    sparse.set_len(2 << 30).unwrap();
    let started = std::time::Instant::now();
    let out = Command::new(headroom_bin())
        .args(["run"])
        .arg(dir.path().join("s.toml"))
        .args(["--requests", "1"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "refused at once"
    );
    assert_eq!(server.requests(), 0, "nothing sent");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn inputs_that_never_end_or_outgrow_memory_are_refused_naming_the_file() {
    for (feeder, body, extra, says) in [
        (
            None,
            Some("/dev/zero"),
            &[][..],
            "/dev/zero: not a regular file",
        ),
        (
            Some("/dev/urandom"),
            None,
            &[][..],
            "/dev/urandom: not a regular file",
        ),
        (
            Some("sparse.csv"),
            None,
            &[][..],
            "2048 MiB is larger than the limit of 1024 MiB",
        ),
        (
            Some("small.csv"),
            None,
            &["--max-feeder-size", "1"][..],
            "larger than the limit of 1 MiB",
        ),
    ] {
        let (code, stderr) = refused_input(feeder, body, extra);
        assert_eq!(code, 2, "{feeder:?} {body:?}: {stderr}");
        assert!(stderr.contains(says), "{feeder:?} {body:?}: {stderr}");
        let file = feeder.or(body).unwrap();
        assert!(stderr.contains(file), "names the file: {stderr}");
    }
}
