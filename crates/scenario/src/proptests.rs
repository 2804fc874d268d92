//! Property tests: any scenario the types accept serialises to TOML and
//! YAML and parses back equal, and the validator never panics on it
//! (whatever mix of valid and invalid values it holds).

use super::raw::*;
use super::{parse, Format};
use headroom_engine::plan::feeder::{FeederOrder, FeederScope};
use proptest::option;
use proptest::prelude::*;

fn duration() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("1s".to_string()),
        Just("250ms".to_string()),
        Just("2m".to_string()),
        Just("0s".to_string()),
        Just("soon".to_string()),
        "[0-9]{1,3}(ms|s|m)",
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![Just("a".to_string()), Just("b".to_string()), "[a-z]{1,6}"]
}

fn status() -> impl Strategy<Value = RawStatus> {
    prop_oneof![
        (100u16..700).prop_map(RawStatus::One),
        proptest::collection::vec(100u16..600, 0..3).prop_map(RawStatus::List),
        prop_oneof![Just("2xx"), Just("200-299"), Just("x")]
            .prop_map(|s| RawStatus::Range(s.into())),
    ]
}

fn load() -> impl Strategy<Value = RawLoad> {
    (
        option::of(prop_oneof![Just(Model::Closed), Just(Model::Open)]),
        option::of(0u32..50),
        option::of(duration()),
        option::of(duration()),
        option::of(0u64..5),
        option::of(0.0f64..500.0),
        option::of(proptest::collection::vec(
            (
                duration(),
                option::of(0.0f64..100.0),
                option::of(0.0f64..100.0),
                option::of(0.0f64..100.0),
            ),
            0..3,
        )),
        option::of(0u64..100),
        option::of(duration()),
        option::of(0u32..10),
    )
        .prop_map(
            |(
                model,
                vus,
                ramp_up,
                duration,
                iterations,
                rate,
                stages,
                users,
                over,
                max_connections,
            )| RawLoad {
                model,
                vus,
                ramp_up,
                duration,
                iterations,
                rate,
                stages: stages.map(|s| {
                    s.into_iter()
                        .map(|(duration, rate, from, to)| RawStage {
                            target: None,
                            duration,
                            rate,
                            from,
                            to,
                        })
                        .collect()
                }),
                users,
                over,
                max_connections,
                ..RawLoad::default()
            },
        )
}

fn check() -> impl Strategy<Value = RawCheck> {
    (
        option::of(status()),
        option::of("[a-z ]{0,8}"),
        option::of(prop_oneof![Just("ok".to_string()), Just("(".to_string())]),
        option::of(prop_oneof![Just("$.a".to_string()), Just("$[".to_string())]),
        option::of(any::<bool>()),
        option::of(duration()),
    )
        .prop_map(
            |(status, body_contains, body_regex, json_path, exists, response_time_under)| {
                RawCheck {
                    status,
                    body_contains,
                    body_regex,
                    json_path,
                    exists,
                    response_time_under,
                    ..RawCheck::default()
                }
            },
        )
}

fn request() -> impl Strategy<Value = RawRequest> {
    (
        name(),
        option::of(prop_oneof![
            Just("GET".to_string()),
            Just("post".to_string()),
            Just("B@D".to_string())
        ]),
        option::of(prop_oneof![
            Just("/".to_string()),
            Just("/x?id={{id}}".to_string()),
            Just("/{{token}}".to_string()),
            Just("nopath".to_string()),
            Just("/{{".to_string()),
        ]),
        option::of(0u32..5),
        option::of(duration()),
        proptest::collection::vec(check(), 0..2),
        proptest::collection::vec(
            (
                name(),
                option::of(prop_oneof![Just("$.t".to_string()), Just("$[".to_string())]),
            ),
            0..2,
        ),
        option::of(status()),
    )
        .prop_map(
            |(name, method, path, weight, timeout, checks, extracts, expect)| RawRequest {
                name,
                method,
                path,
                weight,
                timeout,
                checks,
                extracts: extracts
                    .into_iter()
                    .map(|(name, json_path)| RawExtract {
                        name,
                        json_path,
                        ..RawExtract::default()
                    })
                    .collect(),
                expect: expect.map(|s| RawExpect { status: Some(s) }),
                ..RawRequest::default()
            },
        )
}

fn step() -> impl Strategy<Value = RawStep> {
    let leaf = prop_oneof![
        name().prop_map(|r| RawStep {
            request: Some(r),
            ..RawStep::default()
        }),
        duration().prop_map(|t| RawStep {
            think: Some(t),
            ..RawStep::default()
        }),
        Just(RawStep {
            feed: Some("ids".into()),
            ..RawStep::default()
        }),
        Just(RawStep::default()),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            (0u32..3, proptest::collection::vec(inner.clone(), 0..3)).prop_map(|(n, steps)| {
                RawStep {
                    repeat: Some(n),
                    steps: Some(steps),
                    ..RawStep::default()
                }
            }),
            proptest::collection::vec(
                (option::of(0u32..3), proptest::collection::vec(inner, 0..2)),
                0..3
            )
            .prop_map(|b| RawStep {
                choice: Some(
                    b.into_iter()
                        .map(|(weight, steps)| RawBranch { weight, steps })
                        .collect()
                ),
                ..RawStep::default()
            }),
        ]
    })
}

fn scenario() -> impl Strategy<Value = RawScenario> {
    (
        option::of(prop_oneof![
            Just("http://127.0.0.1:9".to_string()),
            Just("https://localhost:1".to_string()),
            Just("ftp://x".to_string()),
            Just("not a url".to_string()),
        ]),
        option::of(load()),
        proptest::collection::vec(
            (
                name(),
                prop_oneof![Just(FeederOrder::Circular), Just(FeederOrder::Unique)],
                prop_oneof![
                    Just(FeederScope::Shared),
                    Just(FeederScope::PerUser),
                    Just(FeederScope::PerUserFixed)
                ],
            ),
            0..2,
        ),
        proptest::collection::vec(request(), 0..4),
        proptest::collection::vec(
            (
                name(),
                option::of(0u32..3),
                proptest::collection::vec(step(), 0..4),
            ),
            0..3,
        ),
    )
        .prop_map(
            |(base_url, load, feeders, requests, sessions)| RawScenario {
                base_url,
                load,
                feeders: feeders
                    .into_iter()
                    .map(|(name, order, scope)| RawFeeder {
                        name,
                        file: "does-not-exist.csv".into(),
                        order: Some(order),
                        scope: Some(scope),
                    })
                    .collect(),
                requests,
                sessions: sessions
                    .into_iter()
                    .map(|(name, weight, steps)| RawSession {
                        name,
                        weight,
                        steps,
                    })
                    .collect(),
                ..RawScenario::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_scenario_round_trips_and_never_panics_the_validator(raw in scenario()) {
        let toml_text = toml::to_string(&raw).expect("TOML serialises");
        prop_assert_eq!(&parse(&toml_text, Format::Toml).expect("TOML parses back"), &raw);
        let yaml_text = serde_yaml_ng::to_string(&raw).expect("YAML serialises");
        prop_assert_eq!(&parse(&yaml_text, Format::Yaml).expect("YAML parses back"), &raw);
        // Valid or not, validation returns; errors are located when it fails.
        let _ = super::resolve::Builder::new(std::path::Path::new("."), &toml_text).build(&raw, "test");
    }

    #[test]
    fn arbitrary_text_never_panics_the_parser(text in "\\PC{0,200}") {
        let _ = parse(&text, Format::Toml);
        let _ = parse(&text, Format::Yaml);
    }
}
