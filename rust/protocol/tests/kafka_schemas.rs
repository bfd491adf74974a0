//! Every message of the registry at every valid version: values built from the schema
//! round-trip, field keys are unique, mutated encodings never panic. Plus Kafka's rules
//! for tagged fields, defaults and versions, and the errors for values and bytes that
//! break them.

use rillet_protocol::kafka::schema::snake_case;
use rillet_protocol::kafka::{
    decode_request, decode_response, encode_request, encode_response, registry, Error, FieldSpec,
    FieldType, MessageKind, MessageSpec, RequestHeader, StructSpec, Value,
};

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

/// Every (message, version) of the registry's requests and responses.
fn every_message_version() -> impl Iterator<Item = (&'static MessageSpec, i16)> {
    registry()
        .messages()
        .iter()
        .filter(|spec| spec.kind != MessageKind::Header)
        .flat_map(|spec| {
            (spec.valid_versions.lowest()..=spec.valid_versions.highest()).map(move |v| (spec, v))
        })
}

/// A value of `spec` at `version` in which every field differs from its default where it
/// can, nullable fields are null about one time in four, arrays hold two elements.
fn rich_struct(spec: &StructSpec, version: i16, rng: &mut Rng) -> Value {
    Value::Struct(
        spec.fields
            .iter()
            .filter(|field| field.versions.contains(version))
            .map(|field| (field.key, rich_field(field, version, rng)))
            .collect(),
    )
}

fn rich_field(field: &FieldSpec, version: i16, rng: &mut Rng) -> Value {
    if field.nullable_versions.contains(version) && rng.below(4) == 0 {
        return Value::Null;
    }
    let value = rich_value(&field.field_type, version, rng);
    if field.is_default(&value) {
        // Only a bool or an int can land on its default here: nudge it off.
        return match value {
            Value::Bool(b) => Value::Bool(!b),
            Value::Int(i) if i <= 0 => Value::Int(i + 1),
            Value::Int(i) => Value::Int(i - 1),
            other => other,
        };
    }
    value
}

fn rich_value(field_type: &FieldType, version: i16, rng: &mut Rng) -> Value {
    let n = rng.next();
    match field_type {
        FieldType::Bool => Value::Bool(n & 1 == 0),
        FieldType::Float64 => Value::Float((n % 1000) as f64 / 8.0 - 60.0),
        FieldType::Uuid => {
            Value::Uuid(core::array::from_fn(|i| (n >> (i % 8 * 8)) as u8 ^ i as u8))
        }
        FieldType::String => Value::Str(format!("s{}-é", n % 1000)),
        FieldType::Bytes | FieldType::Records => {
            Value::Bytes((0..n % 9 + 1).map(|i| (n >> i) as u8).collect())
        }
        FieldType::Array(element) => {
            Value::Array((0..2).map(|_| rich_value(element, version, rng)).collect())
        }
        FieldType::Struct(spec) => rich_struct(spec, version, rng),
        int_type => {
            let (min, max) = int_type_range(int_type);
            // Spread over the type's range, extremes included.
            Value::Int(match n % 4 {
                0 => min,
                1 => max,
                _ => min
                    .wrapping_add((n >> 2) as i64 & max.wrapping_sub(min))
                    .clamp(min, max),
            })
        }
    }
}

fn int_type_range(field_type: &FieldType) -> (i64, i64) {
    match field_type {
        FieldType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        FieldType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        FieldType::Uint16 => (0, u16::MAX.into()),
        FieldType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        FieldType::Uint32 => (0, u32::MAX.into()),
        FieldType::Int64 => (i64::MIN, i64::MAX),
        other => panic!("{other} is not an integer type"),
    }
}

fn round_trip(spec: &MessageSpec, version: i16, value: &Value) -> Vec<u8> {
    let context = format!("{} v{version}", spec.name);
    let bytes = spec
        .encode(version, value)
        .unwrap_or_else(|e| panic!("{context}: {e}"));
    let decoded = spec
        .decode(version, &bytes)
        .unwrap_or_else(|e| panic!("{context}: {e}"));
    assert_eq!(&decoded, value, "{context}");
    bytes
}

#[test]
fn every_message_at_every_version_round_trips_its_defaults() {
    let mut count = 0;
    for (spec, version) in every_message_version() {
        let defaults = spec.default_value(version);
        let bytes = round_trip(spec, version, &defaults);
        // Leaving every field out means the same: each takes its default.
        assert_eq!(
            spec.encode(version, &Value::Struct(vec![])).unwrap(),
            bytes,
            "{} v{version}",
            spec.name
        );
        count += 1;
    }
    assert!(count > 600, "{count} message versions");
}

#[test]
fn every_message_at_every_version_round_trips_rich_values() {
    let mut rng = Rng(0x0dd_ba11_5eed);
    for (spec, version) in every_message_version() {
        for _ in 0..4 {
            let value = rich_struct(&spec.body, version, &mut rng);
            round_trip(spec, version, &value);
        }
    }
}

#[test]
fn every_message_round_trips_through_frames() {
    let mut rng = Rng(0xf4a3e);
    for (spec, version) in every_message_version() {
        let api_key = spec.api_key.unwrap();
        let body = rich_struct(&spec.body, version, &mut rng);
        if spec.kind == MessageKind::Request {
            let header = RequestHeader {
                api_key,
                api_version: version,
                correlation_id: 77,
                client_id: Some("client".into()),
            };
            let frame = encode_request(&header, &body).unwrap();
            let (decoded_header, decoded_body) = decode_request(&frame[4..]).unwrap();
            let expected_client_id = if api_key == 7 && version == 0 {
                None
            } else {
                Some("client".into())
            };
            assert_eq!(
                decoded_header.client_id, expected_client_id,
                "{} v{version}",
                spec.name
            );
            assert_eq!(
                (decoded_header.correlation_id, &decoded_body),
                (77, &body),
                "{} v{version}",
                spec.name
            );
        } else {
            let frame = encode_response(api_key, version, -5, &body).unwrap();
            assert_eq!(
                decode_response(api_key, version, &frame[4..]).unwrap(),
                (-5, body)
            );
        }
    }
}

#[test]
fn mutated_encodings_of_every_message_never_panic() {
    let mut rng = Rng(0xbad_5eed);
    for (spec, version) in every_message_version() {
        let value = rich_struct(&spec.body, version, &mut rng);
        let bytes = spec.encode(version, &value).unwrap();
        for _ in 0..12 {
            let mut mutated = bytes.clone();
            if mutated.is_empty() || rng.below(3) == 0 {
                mutated.truncate(rng.below(mutated.len() + 1));
            } else {
                let at = rng.below(mutated.len());
                mutated[at] = rng.next() as u8;
            }
            if let Ok(decoded) = spec.decode(version, &mutated) {
                let again = spec.encode(version, &decoded).unwrap();
                assert_eq!(
                    spec.encode(version, &spec.decode(version, &again).unwrap())
                        .unwrap(),
                    again
                );
            }
        }
    }
}

fn visit_structs(spec: &StructSpec, f: &mut dyn FnMut(&StructSpec)) {
    f(spec);
    for field in &spec.fields {
        let mut field_type = &field.field_type;
        if let FieldType::Array(element) = field_type {
            field_type = element;
        }
        if let FieldType::Struct(inner) = field_type {
            visit_structs(inner, f);
        }
    }
}

#[test]
fn field_keys_are_unique_snake_case_in_every_struct() {
    let mut fields = 0;
    for spec in registry().messages() {
        visit_structs(&spec.body, &mut |structure| {
            for (i, field) in structure.fields.iter().enumerate() {
                fields += 1;
                assert_eq!(field.key, snake_case(&field.name));
                assert!(
                    field
                        .key
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                    "{}.{}: {}",
                    structure.name,
                    field.name,
                    field.key
                );
                assert!(
                    structure.fields[..i]
                        .iter()
                        .all(|other| other.key != field.key),
                    "{} in {}: two fields are {}",
                    spec.name,
                    structure.name,
                    field.key
                );
            }
        });
    }
    assert!(fields > 1400, "{fields} fields");
}

fn api_versions_response() -> &'static MessageSpec {
    registry().response(18).unwrap()
}

#[test]
fn an_unknown_tag_is_skipped() {
    let spec = api_versions_response();
    let value = Value::Struct(vec![("finalized_features_epoch", Value::Int(7))]);
    let bytes = spec.encode(3, &value).unwrap();
    // error_code, api_keys (empty), throttle_time_ms, then the tagged fields: one field,
    // tag 1, 8 bytes.
    assert_eq!(
        bytes,
        [0, 0, 1, 0, 0, 0, 0, 1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 7]
    );
    let mut with_unknown = bytes[..7].to_vec();
    with_unknown.extend_from_slice(&[3, 1, 8, 0, 0, 0, 0, 0, 0, 0, 7]);
    with_unknown.extend_from_slice(&[50, 3, 0xde, 0xad, 0xff]); // unknown tag 50
    with_unknown.extend_from_slice(&[0xe8, 0x07, 0]); // unknown tag 1000, empty
    assert_eq!(
        spec.decode(3, &with_unknown).unwrap(),
        spec.decode(3, &bytes).unwrap()
    );
    assert_eq!(
        spec.decode(3, &bytes)
            .unwrap()
            .get("finalized_features_epoch"),
        Some(&Value::Int(7))
    );
}

#[test]
fn a_tagged_field_at_its_default_is_not_written() {
    let spec = api_versions_response();
    let bare = spec.encode(3, &Value::Struct(vec![])).unwrap();
    assert_eq!(bare, [0, 0, 1, 0, 0, 0, 0, 0]);
    let explicit_defaults = Value::Struct(vec![
        ("supported_features", Value::Array(vec![])),
        ("finalized_features_epoch", Value::Int(-1)),
        ("zk_migration_ready", Value::Bool(false)),
    ]);
    assert_eq!(spec.encode(3, &explicit_defaults).unwrap(), bare);

    // A tagged struct (FetchResponse's diverging_epoch) at its default is left out too.
    let fetch = registry().response(1).unwrap();
    let partition = |diverging_epoch: Value| {
        Value::Struct(vec![(
            "responses",
            Value::Array(vec![Value::Struct(vec![(
                "partitions",
                Value::Array(vec![Value::Struct(vec![(
                    "diverging_epoch",
                    diverging_epoch,
                )])]),
            )])]),
        )])
    };
    let default_epoch = Value::Struct(vec![
        ("epoch", Value::Int(-1)),
        ("end_offset", Value::Int(-1)),
    ]);
    let without = fetch.encode(12, &partition(Value::Struct(vec![]))).unwrap();
    assert_eq!(
        fetch.encode(12, &partition(default_epoch)).unwrap(),
        without
    );
    let moved = fetch
        .encode(
            12,
            &partition(Value::Struct(vec![("epoch", Value::Int(4))])),
        )
        .unwrap();
    // Tag 0, size 13, then int32 epoch, int64 end_offset, an empty tagged section.
    assert_eq!(moved.len(), without.len() + 15);
    let decoded = fetch.decode(12, &moved).unwrap();
    let epoch = decoded.get("responses").and_then(Value::as_array).unwrap()[0]
        .get("partitions")
        .and_then(Value::as_array)
        .unwrap()[0]
        .get("diverging_epoch")
        .cloned();
    assert_eq!(
        epoch,
        Some(Value::Struct(vec![
            ("epoch", Value::Int(4)),
            ("end_offset", Value::Int(-1))
        ]))
    );
}

#[test]
fn a_field_the_version_lacks_is_dropped_only_when_default_or_ignorable() {
    let fetch = registry().request(1).unwrap();
    // cluster_id (12+) is ignorable: dropped at v4.
    let with_cluster = Value::Struct(vec![("cluster_id", "c".into())]);
    assert_eq!(
        fetch.encode(4, &with_cluster).unwrap(),
        fetch.encode(4, &Value::Struct(vec![])).unwrap()
    );
    // forgotten_topics_data (7+) is not: an empty one is the default, a real one is lost data.
    let empty = Value::Struct(vec![("forgotten_topics_data", Value::Array(vec![]))]);
    assert!(fetch.encode(4, &empty).is_ok());
    let forgotten = Value::Struct(vec![(
        "forgotten_topics_data",
        Value::Array(vec![Value::Struct(vec![("topic", "t".into())])]),
    )]);
    let err = fetch.encode(4, &forgotten).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidValue { context, reason }
            if context == "FetchRequest v4 forgotten_topics_data" && reason.contains("versions 7+")),
        "{err}"
    );
}

#[test]
fn values_that_do_not_fit_the_schema_are_refused_with_their_path() {
    let metadata = registry().request(3).unwrap();
    let topics = |name: Value| {
        Value::Struct(vec![(
            "topics",
            Value::Array(vec![
                Value::Struct(vec![("name", "a".into())]),
                Value::Struct(vec![("name", name)]),
            ]),
        )])
    };
    let cases = [
        (
            1,
            topics(Value::Int(3)),
            "MetadataRequest v1 topics[1].name: expected string, got an integer",
        ),
        (
            1,
            topics(Value::Null),
            "MetadataRequest v1 topics[1].name: null, but the field is not nullable in version 1",
        ),
        (
            1,
            topics("x".repeat(40_000).into()),
            "MetadataRequest v1 topics[1].name: string of 40000 bytes is over 32767",
        ),
        (
            0,
            Value::Struct(vec![("topics", Value::Null)]),
            "MetadataRequest v0 topics: null, but the field is not nullable in version 0",
        ),
        (
            4,
            Value::Struct(vec![("topicz", Value::Null)]),
            "MetadataRequest v4: MetadataRequest has no field topicz",
        ),
        (
            4,
            Value::Struct(vec![
                ("allow_auto_topic_creation", true.into()),
                ("allow_auto_topic_creation", true.into()),
            ]),
            "MetadataRequest v4: field allow_auto_topic_creation is given twice",
        ),
        (
            4,
            Value::Int(1),
            "MetadataRequest v4: expected a MetadataRequest struct, got an integer",
        ),
    ];
    for (version, value, expected) in cases {
        let err = metadata.encode(version, &value).unwrap_err();
        assert_eq!(err.to_string(), expected);
    }
    let produce = registry().request(0).unwrap();
    let err = produce
        .encode(3, &Value::Struct(vec![("acks", Value::Int(40_000))]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ProduceRequest v3 acks: 40000 is out of range for int16"
    );
    assert!(matches!(
        metadata.encode(13, &Value::Struct(vec![])),
        Err(Error::UnsupportedVersion { .. })
    ));
}

/// Decodes `bytes` as MetadataRequest at `version` and returns the error's text.
fn metadata_error(version: i16, bytes: &[u8]) -> String {
    registry()
        .request(3)
        .unwrap()
        .decode(version, bytes)
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_bytes_are_refused_with_offset_and_path() {
    // v1: topics int32 count, then each name int16 length + bytes.
    assert_eq!(
        metadata_error(1, &[0, 0, 0, 1, 0xff, 0xfe]),
        "MetadataRequest v1 topics[0].name at byte 4: negative length -2"
    );
    assert_eq!(
        metadata_error(1, &[0, 0, 0, 1, 0, 2, 0xc3, 0x28]),
        "MetadataRequest v1 topics[0].name at byte 4: string is not UTF-8: invalid utf-8 sequence of 1 bytes from index 0"
    );
    assert_eq!(
        metadata_error(1, &[0x7f, 0xff, 0xff, 0xff, 0, 0]),
        "MetadataRequest v1 topics at byte 0: array of 2147483647 elements, but only 2 bytes left"
    );
    assert_eq!(
        metadata_error(1, &[0, 0, 0, 1, 0, 9, b'a']),
        "MetadataRequest v1 topics[0].name at byte 6: a string needs 9 bytes, 1 left"
    );
    assert_eq!(
        metadata_error(1, &[0xff, 0xff, 0xff, 0xff, 7]),
        "MetadataRequest v1 at byte 4: 1 bytes left after the message"
    );
    assert_eq!(
        metadata_error(0, &[0xff, 0xff, 0xff, 0xff]),
        "MetadataRequest v0 topics at byte 0: null, but the field is not nullable in version 0"
    );
    // v9+: compact lengths.
    assert_eq!(
        metadata_error(9, &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),
        "MetadataRequest v9 topics at byte 0: varint longer than 5 bytes or 32 bits"
    );
    assert_eq!(
        metadata_error(9, &[0xff, 0xff, 0xff, 0xff, 0x1f]),
        "MetadataRequest v9 topics at byte 0: varint longer than 5 bytes or 32 bits"
    );
    assert_eq!(
        metadata_error(9, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        "MetadataRequest v9 topics at byte 0: array of 4294967294 elements, but only 0 bytes left"
    );
    // A tagged field whose size claims more than its value.
    let spec = api_versions_response();
    let err = spec
        .decode(
            3,
            &[0, 0, 1, 0, 0, 0, 0, 1, 1, 9, 0, 0, 0, 0, 0, 0, 0, 7, 0],
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ApiVersionsResponse v3 finalized_features_epoch at byte 18: tagged field 1 has 1 bytes beyond its value"
    );
}

#[test]
fn header_versions_follow_kafka() {
    // A flexible response has header v1 (an empty tagged section after the correlation
    // id), a classic one header v0...
    let metadata = registry().response(3).unwrap();
    for (version, header) in [(12, &[0, 0, 0, 5, 0][..]), (8, &[0, 0, 0, 5][..])] {
        let body = metadata.encode(version, &Value::Struct(vec![])).unwrap();
        let frame = encode_response(3, version, 5, &Value::Struct(vec![])).unwrap();
        assert_eq!(frame[4..], [header, &body[..]].concat(), "v{version}");
    }
    // ...except ApiVersionsResponse, always v0.
    let frame = encode_response(18, 4, 5, &Value::Struct(vec![])).unwrap();
    assert_eq!(frame, [0, 0, 0, 12, 0, 0, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0]);

    // ControlledShutdown v0 has request header v0: no client id.
    let header = RequestHeader {
        api_key: 7,
        api_version: 0,
        correlation_id: 9,
        client_id: None,
    };
    let frame =
        encode_request(&header, &Value::Struct(vec![("broker_id", Value::Int(3))])).unwrap();
    assert_eq!(frame, [0, 0, 0, 12, 0, 7, 0, 0, 0, 0, 0, 9, 0, 0, 0, 3]);
    assert_eq!(decode_request(&frame[4..]).unwrap().0, header);

    // A flexible request keeps the client id an int16-length string, null as -1.
    let header = RequestHeader {
        api_key: 18,
        api_version: 3,
        correlation_id: 1,
        client_id: None,
    };
    let frame = encode_request(&header, &Value::Struct(vec![])).unwrap();
    assert_eq!(
        frame,
        [0, 0, 0, 14, 0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0, 1, 1, 0]
    );
    assert_eq!(decode_request(&frame[4..]).unwrap().0, header);
}

#[test]
fn api_versions_lists_every_request() {
    let ranges = registry().api_versions();
    // A request whose only version is unstable is not advertised at all.
    let advertised = registry()
        .messages()
        .iter()
        .filter(|m| m.kind == MessageKind::Request)
        .filter(|m| {
            !(m.latest_version_unstable && m.valid_versions.lowest() == m.valid_versions.highest())
        })
        .count();
    assert_eq!(ranges.len(), advertised);
    for range in ranges {
        let spec = registry().request(range.api_key).unwrap();
        assert_eq!(range.min_version, spec.valid_versions.lowest());
        let unstable = i16::from(spec.latest_version_unstable);
        assert_eq!(
            range.max_version,
            spec.valid_versions.highest() - unstable,
            "{}",
            spec.name
        );
    }
}

/// Frames kafka-python 3 (its own reading of Kafka's JSON schemas) decodes and encodes
/// back to the same bytes: one default and one rich value for each message version both
/// know. `tests/fixtures/kafka/README.md` says how the file is made.
const CORPUS: &str = "tests/fixtures/kafka/kafka_python_corpus.txt";

#[test]
#[ignore = "writes candidate frames for the kafka-python corpus, to $KAFKA_CORPUS_CANDIDATES"]
fn write_corpus_candidates() {
    let path = std::env::var("KAFKA_CORPUS_CANDIDATES")
        .expect("set KAFKA_CORPUS_CANDIDATES to a file to write");
    let mut rng = Rng(0xc0_ffee);
    let mut out = String::new();
    for (spec, version) in every_message_version() {
        for value in [
            spec.default_value(version),
            rich_struct(&spec.body, version, &mut rng),
        ] {
            let bytes = spec.encode(version, &value).unwrap();
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            out.push_str(&format!("{} {version} {hex}\n", spec.name));
        }
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn the_kafka_python_corpus_reencodes_byte_for_byte() {
    let path = format!("{}/{CORPUS}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut frames = 0;
    let mut messages = std::collections::HashSet::new();
    for line in text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
    {
        let mut parts = line.split(' ');
        let (name, version, hex) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap_or(""),
        );
        let version: i16 = version.parse().unwrap();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let spec = registry()
            .messages()
            .iter()
            .find(|spec| spec.name == name)
            .unwrap_or_else(|| panic!("{name}"));
        let value = spec
            .decode(version, &bytes)
            .unwrap_or_else(|e| panic!("{name} v{version}: {e}"));
        assert_eq!(
            spec.encode(version, &value).unwrap(),
            bytes,
            "{name} v{version}"
        );
        frames += 1;
        messages.insert(name);
    }
    assert!(
        frames > 900 && messages.len() > 90,
        "{frames} frames of {} messages",
        messages.len()
    );
}
