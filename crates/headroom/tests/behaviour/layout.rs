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
const FLOORS: [&str; 18] = [
    "headroom-metrics",
    "headroom-js",
    "headroom-http",
    "headroom-grpc",
    "headroom-engine",
    "headroom-objectives",
    "headroom-records",
    "headroom-monitor",
    "headroom-measure",
    "headroom-capacity",
    "headroom-scenario",
    "headroom-import",
    "headroom-study-file",
    "headroom-study",
    "headroom-report",
    "headroom-k8s",
    "headroom-sample-server",
    "headroom",
];

/// The crates that open sockets to load a server, start processes or
/// parse plans to run: no reader of records may link one.
const MACHINERY: [&str; 13] = [
    "headroom-js",
    "headroom-http",
    "headroom-grpc",
    "headroom-engine",
    "headroom-monitor",
    "headroom-measure",
    "headroom-capacity",
    "headroom-scenario",
    "headroom-import",
    "headroom-study-file",
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
    // The engine knows the wire, gRPC's message types, the counts and the
    // scripts' engine only.
    assert_eq!(
        graph["headroom-engine"],
        [
            "headroom-grpc",
            "headroom-http",
            "headroom-js",
            "headroom-metrics"
        ]
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

/// The importers' parsers (JavaScript, Scala/Java/Kotlin, XML) are built
/// for `headroom import` alone: no crate that loads, measures or studies
/// links them.
#[test]
fn only_the_binary_links_the_importers() {
    let graph = workspace();
    let linking: Vec<&String> = graph
        .keys()
        .filter(|name| linked(name, &graph).contains("headroom-import"))
        .collect();
    assert_eq!(linking, ["headroom"]);
}

/// The study-file fuzzer reads study files as `headroom study` does, and
/// links the parser, not the runner that starts servers and loads them.
#[test]
fn the_study_fuzzer_links_the_parser_not_the_runner() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/Cargo.toml");
    let fuzz = build_dependencies(&fuzz);
    let links = &fuzz["headroom-fuzz"];
    assert!(
        links.contains(&"headroom-study-file".to_string()),
        "{links:?}"
    );
    for runner in ["headroom-study", "headroom-measure", "headroom-capacity"] {
        assert!(
            !links.contains(&runner.to_string()),
            "the fuzzers link {runner}: {links:?}"
        );
    }
}

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file and folder under `dir`, as paths relative to it (folders
/// with a trailing `/`).
fn tree(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(dir).unwrap().display().to_string();
            if path.is_dir() {
                found.push(format!("{relative}/"));
                todo.push(path);
            } else {
                found.push(relative);
            }
        }
    }
    found
}

/// The words between backticks in `text` that name a file (`x.rs`) or a
/// folder (`x/`).
fn named_paths(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.contains(' ') && (w.ends_with(".rs") || w.ends_with('/')))
        .collect()
}

/// ARCHITECTURE.md is the map a newcomer reads first: each crate's
/// paragraph names files of that crate, and each must exist (a file moved
/// or removed is a map that lies). A crate named in bold must exist too.
#[test]
fn the_architecture_names_only_files_that_exist() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    let mut crates_seen = 0;
    for paragraph in text.split("\n\n") {
        let Some(rest) = paragraph.strip_prefix("**`") else {
            continue;
        };
        let name = rest.split('`').next().unwrap();
        let dir = root().join("crates").join(name);
        if !dir.is_dir() {
            missing.push(format!("the crate crates/{name}"));
            continue;
        }
        crates_seen += 1;
        let files = tree(&dir);
        for path in named_paths(paragraph) {
            // `http/src/h2.rs`: another crate's file, from crates/.
            if path.contains("/src/") {
                if !root().join("crates").join(path).exists() {
                    missing.push(format!("`{path}` in crates/{name}'s paragraph"));
                }
                continue;
            }
            let exists = files
                .iter()
                .any(|f| f == path || f.ends_with(&format!("/{path}")));
            if !exists {
                missing.push(format!("`{path}` in crates/{name}'s paragraph"));
            }
        }
    }
    // Paths written from the repository's root, wherever they appear.
    for word in text.split(|c: char| c.is_whitespace() || "`(),;:".contains(c)) {
        let from_root = [
            "crates/",
            "fuzz/",
            "docs/",
            "examples/",
            "bench/",
            "scripts/",
            ".ci/",
        ];
        if from_root.iter().any(|p| word.starts_with(p)) && !root().join(word).exists() {
            missing.push(word.to_string());
        }
    }
    assert_eq!(
        crates_seen,
        FLOORS.len(),
        "ARCHITECTURE.md should have a paragraph for each crate"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what does not exist: {missing:?}"
    );
}

/// The root manifest's comments point at the code their settings are
/// for (`engine/src/…`): each must exist.
#[test]
fn the_root_manifest_names_only_files_that_exist() {
    let text = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let mut named = 0;
    let mut missing = Vec::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with('#')) {
        for word in line.split(|c: char| c.is_whitespace() || "(),;:".contains(c)) {
            if word.contains("/src/") || word.starts_with("crates/") {
                named += 1;
                // From the root (`docs/src/…`), or a crate's (`engine/src/…`).
                if !root().join(word).exists() && !root().join("crates").join(word).exists() {
                    missing.push(word.to_string());
                }
            }
        }
    }
    assert!(named >= 3, "the manifest's map names only {named} paths");
    assert!(
        missing.is_empty(),
        "Cargo.toml names what does not exist: {missing:?}"
    );
}

/// A test that cannot run its case fails; none prints that it skipped
/// and returns as passed (`cargo test` would count it a pass).
#[test]
fn no_test_passes_without_running() {
    // Spelt in pieces so this file does not find itself.
    let idioms = [
        ["eprintln!(\"", "SKIP"].concat(),
        ["println!(\"", "SKIP"].concat(),
    ];
    let mut found = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        let tests = krate.unwrap().path().join("tests");
        if !tests.is_dir() {
            continue;
        }
        for file in tree(&tests).iter().filter(|f| f.ends_with(".rs")) {
            let text = std::fs::read_to_string(tests.join(file)).unwrap();
            for (n, line) in text.lines().enumerate() {
                let upper = line.to_uppercase();
                if idioms.iter().any(|i| upper.contains(&i.to_uppercase())) {
                    found.push(format!("{}:{}", tests.join(file).display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "tests that skip and pass: {found:?}");
}

/// `bench/runs/` holds the rounds the docs cite, and only those: each run
/// is named (or matched by a `prefix-*` the docs give) in the README, the
/// guide or bench/README.md, and each run they name is there.
#[test]
fn bench_runs_are_the_ones_the_docs_cite() {
    let mut docs = String::new();
    for file in ["README.md", "bench/README.md"] {
        docs += &std::fs::read_to_string(root().join(file)).unwrap();
    }
    for page in tree(&root().join("docs/src")) {
        if page.ends_with(".md") {
            docs += &std::fs::read_to_string(root().join("docs/src").join(page)).unwrap();
        }
    }
    let cited: Vec<&str> = docs
        .split("runs/")
        .skip(1)
        .map(|rest| {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '*'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|name| name.starts_with("20"))
        .collect();
    let runs: Vec<String> = std::fs::read_dir(root().join("bench/runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let is_cited = |run: &str| {
        cited.iter().any(|c| match c.strip_suffix('*') {
            Some(prefix) => run.starts_with(prefix),
            None => *c == run,
        })
    };
    let uncited: Vec<&String> = runs.iter().filter(|r| !is_cited(r)).collect();
    assert!(
        uncited.is_empty(),
        "bench/runs/ keeps runs no doc cites: {uncited:?}"
    );
    let missing: Vec<&&str> = cited
        .iter()
        .filter(|c| !c.ends_with('*') && !runs.iter().any(|r| r == *c))
        .collect();
    assert!(
        missing.is_empty(),
        "the docs cite runs bench/runs/ lacks: {missing:?}"
    );
}

/// A source file over 1,000 lines says why in its module doc
/// ("Over 1,000 lines: …"): size is a cost a reader pays, so it must be
/// one chosen, not one grown into.
#[test]
fn a_file_over_a_thousand_lines_says_why() {
    let mut unexplained = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        for file in tree(&src).iter().filter(|f| f.ends_with(".rs")) {
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            let says_why = text
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .any(|l| l.contains("Over 1,000 lines:"));
            if text.lines().count() > 1000 && !says_why {
                unexplained.push(src.join(file).display().to_string());
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "long files that do not say why: {unexplained:?}"
    );
}

/// `line` with string and character literals emptied and any `//`
/// comment cut, so the braces left are the code's.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            // A character literal ('{', '\''), not a lifetime ('a).
            '\'' => {
                let rest: String = chars.clone().take(3).collect();
                let literal = rest.starts_with('\\') || rest.chars().nth(1) == Some('\'');
                if literal {
                    if chars.next() == Some('\\') {
                        chars.next();
                    }
                    chars.next();
                }
                out.push('\'');
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// Each function of a source file (its tests left out) with its length in
/// lines, from its `fn` line to its closing brace.
fn function_lengths(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let mut words = line.split_whitespace().peekable();
        while words.peek().is_some_and(|w| {
            w.starts_with("pub") || ["async", "const", "unsafe", "extern"].contains(w)
        }) {
            words.next();
        }
        let name = match (words.next(), words.next()) {
            (Some("fn"), Some(rest)) => rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default()
                .to_string(),
            _ => {
                i += 1;
                continue;
            }
        };
        let (mut depth, mut opened, mut j) = (0i32, false, i);
        while j < lines.len() {
            let code = code_of(lines[j]);
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            // A declaration without a body (a trait's).
            if !opened && code.contains(';') {
                break;
            }
            if opened && depth <= 0 {
                break;
            }
            j += 1;
        }
        if opened {
            found.push((name, j - i + 1));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    found
}

/// No function over 100 lines: a long function is cut along its steps
/// (each a function named for what it does).
#[test]
fn functions_stay_under_a_hundred_lines() {
    let mut long = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        let src = krate.join("src");
        let name = krate.file_name().unwrap().to_string_lossy().into_owned();
        // A module's tests in their own file (`mod tests;`) are left out
        // as those under `#[cfg(test)]` are.
        let sources = tree(&src);
        let code = sources
            .iter()
            .filter(|f| f.ends_with(".rs") && !f.ends_with("tests.rs"));
        for file in code {
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            for (function, lines) in function_lengths(&text) {
                if lines > 100 {
                    long.push(format!("{name}/src/{file}: {function} is {lines} lines"));
                }
            }
        }
    }
    assert!(long.is_empty(), "{long:#?}");
}

/// The scanner counts what it should: a function's lines from `fn` to its
/// closing brace, braces in strings and characters ignored, tests left out.
#[test]
fn function_lengths_are_counted_from_fn_to_its_brace() {
    let text = "fn a() {\n    let s = \"{{\";\n    let c = '{';\n}\n\npub(crate) async fn b(x: &'static str) -> u8 {\n    // }\n    1\n}\ntrait T {\n    fn c(&self);\n}\n#[cfg(test)]\nfn d() {}\n";
    assert_eq!(
        function_lengths(text),
        [("a".to_string(), 4), ("b".to_string(), 4)]
    );
}
