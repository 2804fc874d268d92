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
        text: "base_url = \"BASE\"\n[load]\nvus = ${HEADROOM_TEST_UNSET_VAR}\n[[request]]\nname = \"a\"\npath = \"/\"\n",
        at: "3:7",
        says: &["HEADROOM_TEST_UNSET_VAR is not set"],
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
