//! Pass/fail thresholds for CI: `--threshold 'p95<500ms'` and the
//! scenario's `[thresholds]`, checked against the results; a breach makes
//! `headroom run` exit with code 1. `--junit` writes one test case per
//! threshold, so CI systems show which one failed.

use crate::table::Table;
use headroom_objectives::slo::BoundCheck;

/// The thresholds as a table: bound, measured figure, pass/FAIL.
pub fn table(checks: &[BoundCheck]) -> Table {
    let mut t = Table::new(&["Threshold", "Measured", "Result"], &[0, 2]);
    for c in checks {
        t.push(vec![
            c.bound.clone(),
            c.actual
                .map_or("-".into(), |a| format!("{a:.2} {}", c.unit)),
            if c.passed { "pass" } else { "FAIL" }.into(),
        ]);
    }
    t
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JUnit XML: a suite named after the run, a case per threshold, a
/// `<failure>` for each breach with the measured figure.
pub fn junit_xml(suite: &str, checks: &[BoundCheck], duration_s: f64) -> String {
    let failures = checks.iter().filter(|c| !c.passed).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"headroom\" tests=\"{}\" failures=\"{failures}\" time=\"{duration_s:.3}\">\n",
        checks.len()
    ));
    out.push_str(&format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{duration_s:.3}\">\n",
        xml_escape(suite),
        checks.len()
    ));
    for c in checks {
        let name = xml_escape(&c.bound);
        out.push_str(&format!(
            "    <testcase classname=\"headroom.thresholds\" name=\"{name}\" time=\"0\">"
        ));
        if c.passed {
            out.push_str("</testcase>\n");
        } else {
            let text = xml_escape(&c.describe());
            out.push_str(&format!(
                "\n      <failure message=\"{text}\" type=\"threshold\">{text}</failure>\n    </testcase>\n"
            ));
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_objectives::slo::Metric;

    #[test]
    fn junit_has_a_case_per_threshold_and_a_failure_per_breach() {
        let checks = vec![
            BoundCheck {
                bound: "p95<500ms".into(),
                metric: Metric::P95,
                request: None,
                actual: Some(612.5),
                limit: 500.0,
                unit: "ms".into(),
                passed: false,
            },
            BoundCheck {
                bound: "errors<1%".into(),
                metric: Metric::Errors,
                request: None,
                actual: Some(0.0),
                limit: 1.0,
                unit: "%".into(),
                passed: true,
            },
        ];
        let xml = junit_xml("GET /", &checks, 10.0);
        assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
        assert!(xml.contains("name=\"p95&lt;500ms\""), "{xml}");
        assert!(
            xml.contains("<failure message=\"p95 612.5 ms (bound p95&lt;500ms)\""),
            "{xml}"
        );
        assert_eq!(xml.matches("<testcase").count(), 2);
        assert_eq!(xml.matches("<failure").count(), 1);
    }
}
