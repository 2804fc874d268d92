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

/// JUnit XML (written by `quick-junit`): a suite named after the run, a
/// case per threshold with its measured value (a property, and the
/// failure's message on a breach). With no thresholds, one "run completed"
/// case: Jenkins' `junit` step fails on a report without tests.
pub fn junit_xml(suite: &str, checks: &[BoundCheck], duration_s: f64) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let time = std::time::Duration::from_secs_f64(duration_s.max(0.0));
    let mut test_suite = TestSuite::new(suite);
    test_suite.set_time(time);
    for c in checks {
        let measured = c
            .actual
            .map_or("no value".to_string(), |a| format!("{a:.3} {}", c.unit));
        let status = if c.passed {
            TestCaseStatus::success()
        } else {
            let mut failure = TestCaseStatus::non_success(NonSuccessKind::Failure);
            failure.set_message(c.describe()).set_type("threshold");
            failure
        };
        let mut case = TestCase::new(c.bound.clone(), status);
        case.set_classname("headroom.thresholds")
            .add_property(("measured", measured.as_str()))
            .add_property(("limit", format!("{} {}", c.limit, c.unit).as_str()))
            .set_system_out(format!("{}: measured {measured}", c.bound));
        test_suite.add_test_case(case);
    }
    if checks.is_empty() {
        let mut case = TestCase::new("run completed", TestCaseStatus::success());
        case.set_classname("headroom.run").set_time(time);
        test_suite.add_test_case(case);
    }
    let mut report = Report::new("headroom");
    report.set_time(time).add_test_suite(test_suite);
    report
        .to_string()
        .expect("a JUnit report serialises to a string")
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
        assert!(
            xml.contains("tests=\"2\"") && xml.contains("failures=\"1\""),
            "{xml}"
        );
        assert!(xml.contains("name=\"p95&lt;500ms\""), "{xml}");
        assert!(
            xml.contains("message=\"p95 612.5 ms (bound p95&lt;500ms)\""),
            "{xml}"
        );
        assert!(
            xml.contains("name=\"measured\" value=\"612.500 ms\""),
            "{xml}"
        );
        assert_eq!(xml.matches("<testcase").count(), 2);
        assert_eq!(xml.matches("<failure").count(), 1);
        // No thresholds: one passing case, never tests="0".
        let xml = junit_xml("GET /", &[], 3.0);
        assert!(
            xml.contains("tests=\"1\"") && xml.contains("name=\"run completed\""),
            "{xml}"
        );
    }
}
