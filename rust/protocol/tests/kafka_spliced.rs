//! Spliced record sets: a response encoded with `Value::Spliced` placeholders, its record
//! sets then put at the offsets the encoder gave, is byte for byte the response encoded
//! with the record sets in place, at classic and flexible versions.

use rillet_protocol::kafka::{encode_response, encode_response_spliced, registry, Value};

const FETCH: i16 = 1;

fn partition(index: i32, records: Value) -> Value {
    Value::Struct(vec![
        ("partition_index", index.into()),
        ("high_watermark", 42i64.into()),
        ("records", records),
    ])
}

fn fetch_response(topic_key: &'static str, topic: Value, records: [Value; 3]) -> Value {
    let [a, b, c] = records;
    Value::Struct(vec![(
        "responses",
        Value::Array(vec![Value::Struct(vec![
            (topic_key, topic),
            (
                "partitions",
                Value::Array(vec![partition(0, a), partition(1, b), partition(2, c)]),
            ),
        ])]),
    )])
}

#[test]
fn spliced_record_sets_put_back_give_the_whole_response() {
    let sets: [Vec<u8>; 3] = [vec![7; 300], vec![], vec![9; 5]];
    for version in [4i16, 11, 12, 13, 16] {
        let (key, topic) = if version >= 13 {
            ("topic_id", Value::Uuid([3; 16]))
        } else {
            ("topic", Value::Str("orders".into()))
        };
        let whole = fetch_response(key, topic.clone(), sets.clone().map(Value::Bytes));
        let expected = encode_response(FETCH, version, 5, &whole).unwrap();
        // The middle partition's empty set stays in place; the others are spliced.
        let spliced = fetch_response(
            key,
            topic,
            [
                Value::Spliced(sets[0].len()),
                Value::Bytes(Vec::new()),
                Value::Spliced(sets[2].len()),
            ],
        );
        let (frame, splices) = encode_response_spliced(FETCH, version, 5, &spliced).unwrap();
        assert_eq!(splices.len(), 2, "v{version}");
        let mut rebuilt = Vec::new();
        let mut at = 0;
        for ((offset, len), set) in splices.iter().zip([&sets[0], &sets[2]]) {
            assert_eq!(*len, set.len());
            rebuilt.extend_from_slice(&frame[at..*offset]);
            rebuilt.extend_from_slice(set);
            at = *offset;
        }
        rebuilt.extend_from_slice(&frame[at..]);
        assert_eq!(rebuilt, expected, "v{version}");
    }
}

#[test]
fn spliced_records_are_refused_where_no_sender_expects_them() {
    let body = fetch_response(
        "topic",
        Value::Str("t".into()),
        [
            Value::Spliced(3),
            Value::Bytes(vec![]),
            Value::Bytes(vec![]),
        ],
    );
    // The plain encoder would write a frame missing bytes its size promises.
    let err = encode_response(FETCH, 12, 1, &body).unwrap_err();
    assert!(err.to_string().contains("spliced records"), "{err}");
    // Only records fields take them.
    let spec = registry().response(3).unwrap(); // MetadataResponse
    let bad = Value::Struct(vec![("cluster_id", Value::Spliced(1))]);
    assert!(spec.encode(12, &bad).is_err());
}

/// A produce request read in place: each record set is where the frame has it, and the
/// rest of the request reads as a copy would.
#[test]
fn produce_record_sets_are_read_in_place() {
    use rillet_protocol::kafka::RequestHeader;
    use rillet_protocol::kafka::{decode_request, decode_request_in_place, encode_request};
    const PRODUCE: i16 = 0;
    for version in [3i16, 8, 9, 11] {
        let partition = |index: i32, records: &[u8]| {
            Value::Struct(vec![
                ("index", index.into()),
                ("records", Value::Bytes(records.to_vec())),
            ])
        };
        let body = Value::Struct(vec![
            ("acks", (-1i16).into()),
            ("timeout_ms", 1000i32.into()),
            (
                "topic_data",
                Value::Array(vec![Value::Struct(vec![
                    ("name", Value::Str("t".into())),
                    (
                        "partition_data",
                        Value::Array(vec![partition(0, b"first batch"), partition(1, b"2nd")]),
                    ),
                ])]),
            ),
        ]);
        let header = RequestHeader {
            api_key: PRODUCE,
            api_version: version,
            correlation_id: 9,
            client_id: Some("c".into()),
        };
        let framed = encode_request(&header, &body).unwrap();
        let frame = &framed[4..];
        let (_, copied) = decode_request(frame).unwrap();
        let (_, in_place) = decode_request_in_place(frame).unwrap();
        let records = |v: &Value, i: usize| {
            v.get("topic_data").and_then(|t| match t {
                Value::Array(ts) => ts[0].get("partition_data").and_then(|p| match p {
                    Value::Array(ps) => ps[i].get("records").cloned(),
                    _ => None,
                }),
                _ => None,
            })
        };
        for (i, expected) in [&b"first batch"[..], &b"2nd"[..]].into_iter().enumerate() {
            assert_eq!(records(&copied, i), Some(Value::Bytes(expected.to_vec())));
            match records(&in_place, i) {
                Some(Value::InPlace { offset, len }) => {
                    assert_eq!(&frame[offset..offset + len], expected, "v{version}")
                }
                other => panic!("v{version}: {other:?}"),
            }
        }
    }
}
