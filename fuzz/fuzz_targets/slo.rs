//! The objective language of thresholds and capacity searches
//! (`p90<500ms, errors<5%`): any text parses or is refused with a message;
//! what parses prints back to text that parses to the same objective.
#![no_main]

use headroom_objectives::slo::Slo;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Slo::parse(text) {
        Ok(slo) => {
            let printed = slo.to_string();
            let again = Slo::parse(&printed).expect("a printed objective parses");
            assert_eq!(again, slo, "`{text}` → `{printed}` changed");
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
