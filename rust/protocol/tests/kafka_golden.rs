//! Golden frames written by kafka-python (`tests/fixtures/kafka/make_fixtures.py` says
//! which class made each): every one decodes to the values it was built from and encodes
//! back to the same bytes; truncated and corrupted copies fail cleanly, never panic.

use rillet_protocol::kafka::{
    decode_request, decode_response, encode_request, encode_response, Error, RequestHeader, Value,
};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/kafka/{name}.hex",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let text: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(text.len() & 1 == 0, "{path}: odd number of hex digits");
    let frame: Vec<u8> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect();
    let size = i32::from_be_bytes(frame[..4].try_into().unwrap());
    assert_eq!(size as usize, frame.len() - 4, "{path}: size prefix");
    frame
}

fn st(fields: Vec<(&'static str, Value)>) -> Value {
    Value::Struct(fields)
}

fn ints(values: &[i64]) -> Value {
    Value::Array(values.iter().map(|v| Value::Int(*v)).collect())
}

fn header(api_key: i16, api_version: i16, correlation_id: i32) -> RequestHeader {
    RequestHeader {
        api_key,
        api_version,
        correlation_id,
        client_id: Some("rillet-test".into()),
    }
}

/// The frame decodes to `expected_header` and `expected_body`, and encodes back to itself.
fn check_request(name: &str, expected_header: RequestHeader, expected_body: Value) {
    let frame = fixture(name);
    let (header, body) = decode_request(&frame[4..]).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(header, expected_header, "{name}");
    assert_eq!(body, expected_body, "{name}");
    assert_eq!(encode_request(&header, &body).unwrap(), frame, "{name}");
}

fn check_response(
    name: &str,
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    expected_body: Value,
) {
    let frame = fixture(name);
    let (decoded_id, body) = decode_response(api_key, api_version, &frame[4..])
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(decoded_id, correlation_id, "{name}");
    assert_eq!(body, expected_body, "{name}");
    assert_eq!(
        encode_response(api_key, api_version, correlation_id, &body).unwrap(),
        frame,
        "{name}"
    );
}

#[test]
fn api_versions_request_v0() {
    check_request("api_versions_request_v0", header(18, 0, 1), st(vec![]));
}

#[test]
fn api_versions_request_v3_flexible() {
    check_request(
        "api_versions_request_v3",
        header(18, 3, 2),
        st(vec![
            ("client_software_name", "rillet".into()),
            ("client_software_version", "0.1.0".into()),
        ]),
    );
}

fn api_version(api_key: i64, min_version: i64, max_version: i64) -> Value {
    st(vec![
        ("api_key", Value::Int(api_key)),
        ("min_version", Value::Int(min_version)),
        ("max_version", Value::Int(max_version)),
    ])
}

#[test]
fn api_versions_response_v0() {
    check_response(
        "api_versions_response_v0",
        18,
        0,
        1,
        st(vec![
            ("error_code", Value::Int(0)),
            (
                "api_keys",
                Value::Array(vec![
                    api_version(0, 0, 11),
                    api_version(1, 0, 17),
                    api_version(3, 0, 12),
                    api_version(18, 0, 4),
                ]),
            ),
        ]),
    );
}

#[test]
fn api_versions_response_v3_keeps_header_v0() {
    check_response(
        "api_versions_response_v3",
        18,
        3,
        2,
        st(vec![
            ("error_code", Value::Int(0)),
            (
                "api_keys",
                Value::Array(vec![api_version(0, 3, 11), api_version(18, 0, 4)]),
            ),
            ("throttle_time_ms", Value::Int(0)),
            ("supported_features", Value::Array(vec![])),
            ("finalized_features_epoch", Value::Int(-1)),
            ("finalized_features", Value::Array(vec![])),
            ("zk_migration_ready", Value::Bool(false)),
        ]),
    );
}

#[test]
fn api_versions_response_v3_with_every_tagged_field() {
    check_response(
        "api_versions_response_v3_tagged",
        18,
        3,
        3,
        st(vec![
            ("error_code", Value::Int(35)),
            ("api_keys", Value::Array(vec![api_version(18, 0, 4)])),
            ("throttle_time_ms", Value::Int(100)),
            (
                "supported_features",
                Value::Array(vec![st(vec![
                    ("name", "metadata.version".into()),
                    ("min_version", Value::Int(1)),
                    ("max_version", Value::Int(21)),
                ])]),
            ),
            ("finalized_features_epoch", Value::Int(7)),
            (
                "finalized_features",
                Value::Array(vec![st(vec![
                    ("name", "metadata.version".into()),
                    ("max_version_level", Value::Int(21)),
                    ("min_version_level", Value::Int(21)),
                ])]),
            ),
            ("zk_migration_ready", Value::Bool(true)),
        ]),
    );
}

#[test]
fn metadata_request_v1() {
    check_request(
        "metadata_request_v1",
        header(3, 1, 4),
        st(vec![(
            "topics",
            Value::Array(vec![
                st(vec![("name", "orders".into())]),
                st(vec![("name", "payments".into())]),
            ]),
        )]),
    );
    check_request(
        "metadata_request_v1_all_topics",
        header(3, 1, 5),
        st(vec![("topics", Value::Null)]),
    );
}

#[test]
fn metadata_request_v12_flexible() {
    check_request(
        "metadata_request_v12_all_topics",
        header(3, 12, 6),
        st(vec![
            ("topics", Value::Null),
            ("allow_auto_topic_creation", Value::Bool(false)),
            ("include_topic_authorized_operations", Value::Bool(true)),
        ]),
    );
    let topic_id = [
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd,
        0xef,
    ];
    check_request(
        "metadata_request_v12",
        header(3, 12, 7),
        st(vec![
            (
                "topics",
                Value::Array(vec![
                    st(vec![
                        ("topic_id", Value::Uuid(topic_id)),
                        ("name", Value::Null),
                    ]),
                    st(vec![
                        ("topic_id", Value::Uuid([0; 16])),
                        ("name", "orders".into()),
                    ]),
                ]),
            ),
            ("allow_auto_topic_creation", Value::Bool(true)),
            ("include_topic_authorized_operations", Value::Bool(false)),
        ]),
    );
}

#[test]
fn metadata_response_v5() {
    let partition = |error_code, index, leader, replicas: &[i64], isr: &[i64], offline: &[i64]| {
        st(vec![
            ("error_code", Value::Int(error_code)),
            ("partition_index", Value::Int(index)),
            ("leader_id", Value::Int(leader)),
            ("replica_nodes", ints(replicas)),
            ("isr_nodes", ints(isr)),
            ("offline_replicas", ints(offline)),
        ])
    };
    check_response(
        "metadata_response_v5",
        3,
        5,
        8,
        st(vec![
            ("throttle_time_ms", Value::Int(0)),
            (
                "brokers",
                Value::Array(vec![
                    st(vec![
                        ("node_id", Value::Int(1)),
                        ("host", "localhost".into()),
                        ("port", Value::Int(9092)),
                        ("rack", Value::Null),
                    ]),
                    st(vec![
                        ("node_id", Value::Int(2)),
                        ("host", "broker-2".into()),
                        ("port", Value::Int(9093)),
                        ("rack", "rack-b".into()),
                    ]),
                ]),
            ),
            ("cluster_id", "cluster-A".into()),
            ("controller_id", Value::Int(1)),
            (
                "topics",
                Value::Array(vec![st(vec![
                    ("error_code", Value::Int(0)),
                    ("name", "orders".into()),
                    ("is_internal", Value::Bool(false)),
                    (
                        "partitions",
                        Value::Array(vec![
                            partition(0, 0, 1, &[1, 2], &[1, 2], &[]),
                            partition(9, 1, 2, &[2, 1], &[2], &[1]),
                        ]),
                    ),
                ])]),
            ),
        ]),
    );
}

#[test]
fn produce_request_v3_carries_records_as_bytes() {
    let frame = fixture("produce_request_v3");
    let (_, body) = decode_request(&frame[4..]).unwrap();
    let records = body.get("topic_data").and_then(Value::as_array).unwrap()[0]
        .get("partition_data")
        .and_then(Value::as_array)
        .unwrap()[0]
        .get("records")
        .and_then(Value::as_bytes)
        .unwrap()
        .to_vec();
    // A RecordBatch v2 of two records: batch length at 8..12, magic 2 at byte 16.
    assert_eq!(records.len(), 91);
    assert_eq!(
        i32::from_be_bytes(records[8..12].try_into().unwrap()),
        91 - 12
    );
    assert_eq!(records[16], 2);
    assert!(frame.ends_with(&records));
    check_request(
        "produce_request_v3",
        header(0, 3, 9),
        st(vec![
            ("transactional_id", Value::Null),
            ("acks", Value::Int(-1)),
            ("timeout_ms", Value::Int(30000)),
            (
                "topic_data",
                Value::Array(vec![st(vec![
                    ("name", "orders".into()),
                    (
                        "partition_data",
                        Value::Array(vec![st(vec![
                            ("index", Value::Int(0)),
                            ("records", Value::Bytes(records)),
                        ])]),
                    ),
                ])]),
            ),
        ]),
    );
}

#[test]
fn fetch_request_v4() {
    let partition = |partition, fetch_offset| {
        st(vec![
            ("partition", Value::Int(partition)),
            ("fetch_offset", Value::Int(fetch_offset)),
            ("partition_max_bytes", Value::Int(1_048_576)),
        ])
    };
    check_request(
        "fetch_request_v4",
        header(1, 4, 10),
        st(vec![
            ("replica_id", Value::Int(-1)),
            ("max_wait_ms", Value::Int(500)),
            ("min_bytes", Value::Int(1)),
            ("max_bytes", Value::Int(52_428_800)),
            ("isolation_level", Value::Int(1)),
            (
                "topics",
                Value::Array(vec![st(vec![
                    ("topic", "orders".into()),
                    (
                        "partitions",
                        Value::Array(vec![partition(0, 42), partition(1, 7)]),
                    ),
                ])]),
            ),
        ]),
    );
}

fn fetch_v12(cluster_id: Value) -> Value {
    st(vec![
        ("cluster_id", cluster_id),
        ("replica_id", Value::Int(-1)),
        ("max_wait_ms", Value::Int(500)),
        ("min_bytes", Value::Int(1)),
        ("max_bytes", Value::Int(52_428_800)),
        ("isolation_level", Value::Int(0)),
        ("session_id", Value::Int(0)),
        ("session_epoch", Value::Int(-1)),
        (
            "topics",
            Value::Array(vec![st(vec![
                ("topic", "orders".into()),
                (
                    "partitions",
                    Value::Array(vec![st(vec![
                        ("partition", Value::Int(0)),
                        ("current_leader_epoch", Value::Int(3)),
                        ("fetch_offset", Value::Int(42)),
                        ("last_fetched_epoch", Value::Int(2)),
                        ("log_start_offset", Value::Int(-1)),
                        ("partition_max_bytes", Value::Int(1_048_576)),
                    ])]),
                ),
            ])]),
        ),
        (
            "forgotten_topics_data",
            Value::Array(vec![st(vec![
                ("topic", "old".into()),
                ("partitions", ints(&[1, 2])),
            ])]),
        ),
        ("rack_id", "rack-a".into()),
    ])
}

#[test]
fn fetch_request_v12_flexible() {
    check_request(
        "fetch_request_v12",
        header(1, 12, 11),
        fetch_v12(Value::Null),
    );
}

#[test]
fn fetch_request_v12_with_a_tagged_cluster_id() {
    check_request(
        "fetch_request_v12_cluster_id",
        header(1, 12, 12),
        fetch_v12("cluster-A".into()),
    );
}

#[test]
fn an_unsupported_version_keeps_the_correlation_id() {
    let mut frame = fixture("api_versions_request_v3")[4..].to_vec();
    frame[2..4].copy_from_slice(&99i16.to_be_bytes());
    match decode_request(&frame) {
        Err(Error::UnsupportedVersion {
            api_key: 18,
            api_version: 99,
            correlation_id: Some(2),
            valid_versions,
            ..
        }) => assert_eq!(valid_versions.to_string(), "0-4"),
        other => panic!("{other:?}"),
    }
    frame[0..2].copy_from_slice(&999i16.to_be_bytes());
    assert!(matches!(
        decode_request(&frame),
        Err(Error::UnknownApiKey {
            api_key: 999,
            correlation_id: Some(2),
            ..
        })
    ));
    assert!(matches!(
        decode_request(&frame[..7]),
        Err(Error::Malformed { .. })
    ));
}

const REQUESTS: &[&str] = &[
    "api_versions_request_v0",
    "api_versions_request_v3",
    "metadata_request_v1",
    "metadata_request_v1_all_topics",
    "metadata_request_v12_all_topics",
    "metadata_request_v12",
    "produce_request_v3",
    "fetch_request_v4",
    "fetch_request_v12",
    "fetch_request_v12_cluster_id",
];

const RESPONSES: &[(&str, i16, i16)] = &[
    ("api_versions_response_v0", 18, 0),
    ("api_versions_response_v3", 18, 3),
    ("api_versions_response_v3_tagged", 18, 3),
    ("metadata_response_v5", 3, 5),
];

/// Decodes `frame` as the fixture's kind; what decodes must encode, and that encoding
/// must decode and encode to itself.
fn decode_reencode(frame: &[u8], response: Option<(i16, i16)>) -> bool {
    match response {
        None => {
            let Ok((header, body)) = decode_request(frame) else {
                return false;
            };
            let encoded = encode_request(&header, &body)
                .unwrap_or_else(|e| panic!("re-encoding {body:?}: {e}"));
            let (header2, body2) = decode_request(&encoded[4..]).unwrap();
            assert_eq!(encode_request(&header2, &body2).unwrap(), encoded);
        }
        Some((api_key, api_version)) => {
            let Ok((correlation_id, body)) = decode_response(api_key, api_version, frame) else {
                return false;
            };
            let encoded = encode_response(api_key, api_version, correlation_id, &body)
                .unwrap_or_else(|e| panic!("re-encoding {body:?}: {e}"));
            let (id2, body2) = decode_response(api_key, api_version, &encoded[4..]).unwrap();
            assert_eq!(
                encode_response(api_key, api_version, id2, &body2).unwrap(),
                encoded
            );
        }
    }
    true
}

fn fixtures() -> Vec<(&'static str, Option<(i16, i16)>)> {
    REQUESTS
        .iter()
        .map(|name| (*name, None))
        .chain(
            RESPONSES
                .iter()
                .map(|(name, key, version)| (*name, Some((*key, *version)))),
        )
        .collect()
}

#[test]
fn every_truncation_is_an_error() {
    for (name, response) in fixtures() {
        let frame = fixture(name);
        let frame = &frame[4..];
        assert!(decode_reencode(frame, response), "{name} does not decode");
        for len in 0..frame.len() {
            assert!(
                !decode_reencode(&frame[..len], response),
                "{name} truncated to {len} bytes decodes"
            );
        }
    }
}

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_byte_flips_never_panic() {
    let mut rng = Rng(0x5eed_cafe_f00d_beef);
    let mut decoded = 0;
    let mut runs = 0;
    for (name, response) in fixtures() {
        let original = fixture(name)[4..].to_vec();
        for _ in 0..500 {
            let mut frame = original.clone();
            for _ in 0..=rng.below(3) {
                let at = rng.below(frame.len());
                frame[at] = match rng.below(4) {
                    0 => 0xff,
                    1 => 0x00,
                    2 => frame[at] ^ (1 << rng.below(8)),
                    _ => rng.next() as u8,
                };
            }
            runs += 1;
            if decode_reencode(&frame, response) {
                decoded += 1;
            }
        }
    }
    // Flips in values (not lengths) leave a frame that still decodes: both paths ran.
    assert!(decoded > 0 && decoded < runs, "{decoded} of {runs} decoded");
}

#[test]
fn bytes_after_a_request_body_are_ignored_as_kafka_ignores_them() {
    // librdkafka 2.16's Metadata v12 request for every topic, as it sends it: a null topic
    // array, two false flags and no tagged fields, then three bytes the schema does not have.
    let frame = [
        0, 3, 0, 12, 0, 0, 0, 3, 0, 7, b'r', b'd', b'k', b'a', b'f', b'k', b'a', 0, 0, 0, 0, 0, 1,
        0, 0,
    ];
    let (header, body) = decode_request(&frame).unwrap();
    assert_eq!(
        (header.api_key, header.api_version, header.correlation_id),
        (3, 12, 3)
    );
    assert_eq!(body.get("topics"), Some(&Value::Null));
}
