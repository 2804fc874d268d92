//! What a user installs: the release archive (`scripts/release.sh`) and
//! the container image (`scripts/image.py`), both made from the binary
//! under test and used as a user would — unpacked, put on a path, run.

use crate::common::{headroom_bin, Target};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ok(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(out.status.success(), "{command:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into()
}

fn release(out: &Path) -> PathBuf {
    ok(Command::new(repo_root().join("scripts/release.sh"))
        .args(["--binary", headroom_bin(), "--out"])
        .arg(out));
    let archives: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .collect();
    assert_eq!(archives.len(), 1, "{archives:?}");
    archives[0].clone()
}

#[test]
fn the_release_archive_installs_a_working_headroom_with_its_pages_completions_and_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let archive = release(&dir.path().join("a"));
    ok(Command::new("sha256sum")
        .arg("-c")
        .arg(archive.with_extension("gz.sha256"))
        .current_dir(archive.parent().unwrap()));
    // The same binary packaged again gives the same bytes.
    let again = release(&dir.path().join("b"));
    assert_eq!(
        std::fs::read(&archive).unwrap(),
        std::fs::read(&again).unwrap(),
        "the archive is not reproducible"
    );

    let unpacked = dir.path().join("opt");
    std::fs::create_dir(&unpacked).unwrap();
    ok(Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked));
    let name = archive.file_name().unwrap().to_string_lossy();
    let home = unpacked.join(name.trim_end_matches(".tar.gz"));
    let version = ok(Command::new(headroom_bin()).arg("--version"));
    assert_eq!(
        ok(Command::new(home.join("bin/headroom")).arg("--version")),
        version
    );

    // A man page for every command the binary documents, readable by man.
    let pages: Vec<String> = std::fs::read_dir(home.join("share/man/man1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let documented = std::fs::read_dir(repo_root().join("docs/man"))
        .unwrap()
        .count();
    assert_eq!(pages.len(), documented, "{pages:?}");
    let run_page = std::fs::read_to_string(home.join("share/man/man1/headroom-run.1")).unwrap();
    assert!(run_page.starts_with(".ie") || run_page.contains(".TH headroom-run"));

    // Completions that load in their shells (bash here; zsh's and fish's headers).
    let bash = home.join("share/completions/headroom.bash");
    let loaded = ok(Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p headroom", bash.display())));
    assert!(loaded.contains("-F _headroom headroom"), "{loaded}");
    let zsh = std::fs::read_to_string(home.join("share/completions/_headroom")).unwrap();
    assert!(zsh.starts_with("#compdef headroom"));
    let fish = std::fs::read_to_string(home.join("share/completions/headroom.fish")).unwrap();
    assert!(fish.contains("complete -c headroom"));

    // The schemas are the binary's own, and a shipped example validates.
    for which in ["scenario", "study", "results"] {
        let shipped =
            std::fs::read_to_string(home.join(format!("share/schemas/{which}.schema.json")))
                .unwrap();
        let printed = ok(Command::new(headroom_bin()).args(["schema", which]));
        let shipped: Value = serde_json::from_str(&shipped).unwrap();
        assert_eq!(shipped, serde_json::from_str::<Value>(&printed).unwrap());
        assert!(shipped.get("$schema").is_some(), "{which}: no $schema");
    }

    // Licences: headroom's own, and every crate compiled in with its text.
    for file in ["LICENSE-MIT", "LICENSE-APACHE", "README.md"] {
        assert!(home.join(file).is_file(), "no {file}");
    }
    let third = std::fs::read_to_string(home.join("THIRD-PARTY-LICENSES.md")).unwrap();
    for krate in ["tokio", "rustls", "hdrhistogram", "rquickjs"] {
        assert!(
            third.contains(&format!("\n## {krate} ")),
            "{krate} missing from THIRD-PARTY-LICENSES.md"
        );
    }
    assert!(third.contains("Permission is hereby granted"));
}

/// `sha256:HEX` of a file, as OCI names blobs (by coreutils' sha256sum).
fn sha256(path: &Path) -> String {
    let out = ok(Command::new("sha256sum").arg(path));
    format!("sha256:{}", out.split_whitespace().next().unwrap())
}

/// An OCI layout's blob by digest, its bytes checked against the digest.
fn blob(layout: &Path, descriptor: &Value) -> Vec<u8> {
    let digest = descriptor["digest"].as_str().unwrap();
    let path = layout.join("blobs/sha256").join(&digest[7..]);
    assert_eq!(
        sha256(&path),
        digest,
        "blob content does not match its digest"
    );
    let data = std::fs::read(&path).unwrap();
    assert_eq!(data.len() as u64, descriptor["size"].as_u64().unwrap());
    data
}

/// The image is checked as a runtime reads it (index → manifest → config
/// and layer, every digest), its layer unpacked as the root of a chroot,
/// and the entrypoint run there as its user: a load against the sample
/// server, counted on both sides. Nothing of the host's files is visible
/// to it, so a missing library or certificate file fails here.
#[test]
fn the_container_image_runs_a_load_from_nothing_but_its_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("headroom.tar");
    ok(Command::new("python3")
        .arg(repo_root().join("scripts/image.py"))
        .arg(headroom_bin())
        .arg(&image)
        .args(["--tag", "headroom:test"]));
    let layout = dir.path().join("layout");
    std::fs::create_dir(&layout).unwrap();
    ok(Command::new("tar")
        .arg("-xf")
        .arg(&image)
        .arg("-C")
        .arg(&layout));

    let read = |name: &str| -> Value {
        serde_json::from_slice(&std::fs::read(layout.join(name)).unwrap()).unwrap()
    };
    assert_eq!(read("oci-layout")["imageLayoutVersion"], "1.0.0");
    let index = read("index.json");
    let manifest: Value = serde_json::from_slice(&blob(&layout, &index["manifests"][0])).unwrap();
    let config: Value = serde_json::from_slice(&blob(&layout, &manifest["config"])).unwrap();
    assert_eq!(config["config"]["User"], "65534:65534");
    assert_eq!(config["config"]["Entrypoint"][0], "/usr/local/bin/headroom");
    let layer = blob(&layout, &manifest["layers"][0]);
    let layer_tar = dir.path().join("layer.tar.gz");
    std::fs::write(&layer_tar, &layer).unwrap();
    let diff = ok(Command::new("sh")
        .arg("-c")
        .arg(format!("gzip -dc {} | sha256sum", layer_tar.display())));
    assert_eq!(
        format!("sha256:{}", diff.split_whitespace().next().unwrap()),
        config["rootfs"]["diff_ids"][0].as_str().unwrap(),
        "the layer's diff_id is not its uncompressed digest"
    );
    let docker: Value = read("manifest.json");
    assert_eq!(docker[0]["RepoTags"][0], "headroom:test");

    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    ok(Command::new("tar")
        .arg("-xzf")
        .arg(&layer_tar)
        .arg("-C")
        .arg(&rootfs));

    let target = Target::start(1, 2);
    let url = target.url("/hello");
    let out = ok(Command::new("chroot")
        .arg("--userspec=65534:65534")
        .arg(&rootfs)
        .args([
            "/usr/local/bin/headroom",
            "run",
            "--url",
            &url,
            "-n",
            "300",
            "-c",
            "4",
        ])
        .args(["--out", "/tmp/results.json", "--quiet"]));
    let results: Value =
        serde_json::from_slice(&std::fs::read(rootfs.join("tmp/results.json")).unwrap())
            .unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(results["requests"]["total"], 300, "{out}");
    assert_eq!(results["requests"]["ok"], 300);
    assert_eq!(target.requests(), 300);
}
