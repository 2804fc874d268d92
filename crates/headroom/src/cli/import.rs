//! `headroom import curl|har|jmx|postman|openapi|k6|gatling …`: another tool's plan → a scenario
//! file, and the list of what could not be carried over (also written at
//! the top of the file, as comments).

use super::args::{ImportArgs, ImportFrom};
use super::exit::EXIT_OK;
use anyhow::Context;
use headroom_import::{curl, gatling, har, jmx, k6, openapi, postman, Imported};

pub fn import(args: ImportArgs) -> anyhow::Result<i32> {
    let (mut imported, source) = match &args.from {
        ImportFrom::Curl { command } => {
            let command = command.join(" ");
            (
                curl::import(&command).map_err(anyhow::Error::msg)?,
                "a curl command".to_string(),
            )
        }
        ImportFrom::Har { file } => from_file(file, har::import)?,
        ImportFrom::Jmx { file } => from_file(file, jmx::import)?,
        ImportFrom::Postman { file } => from_file(file, postman::import)?,
        ImportFrom::Openapi { file } => from_file(file, openapi::import)?,
        ImportFrom::K6 { file } => from_file(file, k6::import)?,
        ImportFrom::Gatling { file } => {
            let language = gatling::Language::of(file)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let got = gatling::import(&text, language)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            (got, file.display().to_string())
        }
    };
    // Logic carried over goes into a module beside the scenario.
    let script_path = match (&imported.script, &args.out) {
        (None, _) => None,
        (Some(_), None) => anyhow::bail!(
            "{source}: its scripts are carried over into a JavaScript file beside the scenario: give --out FILE.toml"
        ),
        (Some(_), Some(out)) => Some(script_beside(out, args.from.file())),
    };
    if let (Some(section), Some(path)) = (&mut imported.scenario.script, &script_path) {
        section.file = path.file_name().map(|n| n.to_string_lossy().into_owned());
    }
    let toml = imported.to_toml(&source);
    // What was written must be a scenario headroom reads as it is.
    headroom_scenario::parse_toml::<headroom_scenario::raw::RawScenario>(&toml)
        .map_err(|p| anyhow::anyhow!("the imported scenario does not parse back: {p:?}"))?;
    match &args.out {
        Some(path) => {
            headroom_records::write_replacing(path, toml.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("scenario written to {}", path.display());
            if let (Some(js), Some(js_path)) = (&imported.script, &script_path) {
                headroom_records::write_replacing(js_path, js.as_bytes())
                    .with_context(|| format!("cannot write {}", js_path.display()))?;
                eprintln!("its scripts written to {}", js_path.display());
            }
        }
        None => print!("{toml}"),
    }
    if imported.left_out.is_empty() {
        eprintln!("everything was carried over");
    } else {
        eprintln!("not carried over ({}):", imported.left_out.len());
        for item in &imported.left_out {
            eprintln!("  - {item}");
        }
    }
    Ok(EXIT_OK)
}

/// Reads `file` and imports it; errors name the file.
fn from_file(
    file: &std::path::Path,
    import: fn(&str) -> Result<Imported, String>,
) -> anyhow::Result<(Imported, String)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let got = import(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    Ok((got, file.display().to_string()))
}

/// The module beside scenario `out`: `NAME.js`, or `NAME.headroom.js`
/// where that is the file imported (a k6 script imported as `NAME.toml`
/// beside it must not be overwritten).
fn script_beside(out: &std::path::Path, imported: Option<&std::path::Path>) -> std::path::PathBuf {
    let plain = out.with_extension("js");
    let same = |a: &std::path::Path, b: &std::path::Path| match (a.canonicalize(), b.canonicalize())
    {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    match imported {
        Some(file) if same(&plain, file) => out.with_extension("headroom.js"),
        _ => plain,
    }
}
