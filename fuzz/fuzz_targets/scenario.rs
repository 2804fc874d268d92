//! Scenario parser: any text either parses or gives a located error; what
//! parses round-trips through TOML unchanged, and the validator never
//! panics on it.
#![no_main]

use headroom_scenario::{build_raw, parse, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for format in [Format::Toml, Format::Yaml] {
        let Ok(mut raw) = parse(text, format) else { continue };
        if let Ok(again) = toml::to_string(&raw) {
            let back = parse(&again, Format::Toml).expect("serialised scenario parses back");
            assert_eq!(back, raw, "round trip through TOML changed the scenario");
        }
        // Keep the validator off the network: loopback only, no name lookups.
        raw.base_url = Some("http://127.0.0.1:9".into());
        for r in &mut raw.requests {
            r.url = None;
        }
        let _ = build_raw(&raw, "fuzz", "fuzz");
    }
});
