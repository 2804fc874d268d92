//! The references in the guide are generated from headroom's own
//! definitions (clap, the JSON Schemas): they must be what `headroom docs`
//! writes today, so a flag or a field never drifts from its documentation.

use std::path::Path;
use std::process::Command;

#[test]
fn the_generated_references_are_current() {
    let fresh = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["docs", "--out"])
        .arg(fresh.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = String::from_utf8(out.stdout).unwrap();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let mut stale = Vec::new();
    for path in written.lines() {
        let relative = Path::new(path).strip_prefix(fresh.path()).unwrap();
        let committed = std::fs::read(docs.join(relative)).unwrap_or_default();
        if committed != std::fs::read(path).unwrap() {
            stale.push(relative.display().to_string());
        }
    }
    assert!(
        written.lines().count() > 3,
        "too few files generated: {written}"
    );
    assert!(
        stale.is_empty(),
        "stale or missing under docs/: {stale:?} — run `cargo run --profile ci -- docs --out docs` and commit them"
    );
    // And nothing generated before lingers once its command is gone.
    let man = std::fs::read_dir(docs.join("man")).unwrap();
    for page in man {
        let name = page.unwrap().file_name();
        assert!(
            fresh.path().join("man").join(&name).exists(),
            "docs/man/{} is no longer generated: remove it",
            name.to_string_lossy()
        );
    }
}
