//! Kafka's binary wire protocol, driven by Kafka's own JSON message schemas
//! (`schemas/kafka/*.json`, see its README): one interpreter reads and writes every
//! request and response at every version, no code per message.
//!
//! A frame on the socket:
//!
//! ```text
//! size      int32   bytes that follow
//! header    RequestHeader (v1, or v2 for a flexible request version; v0 only for
//!           ControlledShutdown v0) or ResponseHeader (v0, or v1 for a flexible
//!           version; always v0 for ApiVersionsResponse, so that a client which sent a
//!           version the broker does not know can still read the error)
//! body      the message at its version
//! ```
//!
//! Encodings, as Kafka's generated code writes them:
//!
//! | type                 | classic versions              | flexible versions                  |
//! |----------------------|-------------------------------|------------------------------------|
//! | bool, int8           | 1 byte                        | same                               |
//! | int16/32/64, uint16/32, float64 | big-endian         | same                               |
//! | uuid                 | 16 bytes                      | same                               |
//! | string               | int16 length, -1 null, UTF-8  | varint length + 1, 0 null          |
//! | bytes, records       | int32 length, -1 null         | varint length + 1, 0 null          |
//! | array                | int32 count, -1 null          | varint count + 1, 0 null           |
//! | nullable struct      | int8 -1 null / 1, then struct | same (in place); varint 0/1 tagged |
//! | struct               | its fields                    | its fields, then tagged fields     |
//!
//! Tagged fields: a varint count, then for each in ascending tag order its tag, its size
//! and its value, all varints but the value. `RequestHeader.ClientId` keeps the classic
//! int16 string in every header version (its schema overrides `flexibleVersions`).
//!
//! Values are dynamic ([`Value`]); fields are named by the snake_case of their schema name
//! ([`schema::snake_case`]). Records travel as opaque bytes (`Value::Bytes`): the record
//! batch codec is `rillet-core`'s. Errors are [`Error`], which converts into
//! `rillet_core::Error::InvalidRequest`; no input makes the codec panic.

mod decode;
mod encode;
mod error;
mod json;
mod registry;
pub mod schema;
mod value;
mod versions;
mod wire;

pub use error::{Error, Result};
pub use registry::{registry, ApiVersionRange, Registry};
pub use schema::{FieldSpec, FieldType, MessageKind, MessageSpec, StructSpec};
pub use value::Value;
pub use versions::Versions;

use wire::Reader;

/// The api key of ApiVersions, whose response header stays v0 in every version.
const API_VERSIONS_KEY: i16 = 18;
/// The api key of ControlledShutdown, whose v0 uses request header v0 (no client id).
const CONTROLLED_SHUTDOWN_KEY: i16 = 7;

/// What a broker needs of a request's header (RequestHeader.json).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    /// `None` when the client sent null (or header v0, which has no client id).
    pub client_id: Option<String>,
}

/// The RequestHeader version of `request` at `api_version`.
pub fn request_header_version(request: &MessageSpec, api_version: i16) -> i16 {
    if request.api_key == Some(CONTROLLED_SHUTDOWN_KEY) && api_version == 0 {
        0
    } else if request.is_flexible(api_version) {
        2
    } else {
        1
    }
}

/// The ResponseHeader version of `response` at `api_version`.
pub fn response_header_version(response: &MessageSpec, api_version: i16) -> i16 {
    if response.api_key != Some(API_VERSIONS_KEY) && response.is_flexible(api_version) {
        1
    } else {
        0
    }
}

/// Reads a request `frame` (the bytes after its 4-byte size). An api key no schema has is
/// [`Error::UnknownApiKey`], a version outside the schema's is
/// [`Error::UnsupportedVersion`]; both carry the correlation id (the first 8 bytes are
/// always api key, version and correlation id).
pub fn decode_request(frame: &[u8]) -> Result<(RequestHeader, Value)> {
    decode_request_with(frame, false)
}

/// As [`decode_request`], with each `records` field (a produced record set) read as
/// [`Value::InPlace`]: where its bytes are in `frame`, not a copy of them.
pub fn decode_request_in_place(frame: &[u8]) -> Result<(RequestHeader, Value)> {
    decode_request_with(frame, true)
}

fn decode_request_with(frame: &[u8], records_in_place: bool) -> Result<(RequestHeader, Value)> {
    let Some(prefix) = frame.get(..8) else {
        return Err(Error::Malformed {
            context: "request header".into(),
            offset: 0,
            reason: format!(
                "the frame has {} bytes, fewer than the 8 of api key, version and correlation id",
                frame.len()
            ),
        });
    };
    let api_key = i16::from_be_bytes([prefix[0], prefix[1]]);
    let api_version = i16::from_be_bytes([prefix[2], prefix[3]]);
    let correlation_id = i32::from_be_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]);
    let registry = registry();
    let request = registry.request(api_key).ok_or(Error::UnknownApiKey {
        api_key,
        kind: MessageKind::Request,
        correlation_id: Some(correlation_id),
    })?;
    request.check_version(api_version, Some(correlation_id))?;

    let mut reader = Reader::new(frame);
    let header = registry
        .request_header()
        .decode_from(request_header_version(request, api_version), &mut reader)?;
    let client_id = match header.get("client_id") {
        Some(Value::Str(client_id)) => Some(client_id.clone()),
        _ => None,
    };
    let body = request.decode_from_with(api_version, &mut reader, records_in_place)?;
    // Bytes after the body are ignored, as Kafka's broker ignores them (it reads the body
    // from the buffer and drops the rest): librdkafka 2.x sends three more than the schema
    // has in a Metadata v12 request for every topic.
    let header = RequestHeader {
        api_key,
        api_version,
        correlation_id,
        client_id,
    };
    Ok((header, body))
}

/// A request frame, size prefix included.
pub fn encode_request(header: &RequestHeader, body: &Value) -> Result<Vec<u8>> {
    let (frame, splices) = encode_request_spliced(header, body)?;
    if splices.is_empty() {
        Ok(frame)
    } else {
        Err(Error::InvalidValue {
            context: format!("request api key {} v{}", header.api_key, header.api_version),
            reason: "spliced records, which only encode_request_spliced writes".into(),
        })
    }
}

/// A request frame, size prefix included, whose [`Value::Spliced`] record sets are left
/// out, as [`encode_response_spliced`] does for responses: a producer writes its batches
/// into the gaps, each copied once.
pub fn encode_request_spliced(
    header: &RequestHeader,
    body: &Value,
) -> Result<(Vec<u8>, Vec<Splice>)> {
    let registry = registry();
    let request = registry
        .request(header.api_key)
        .ok_or(Error::UnknownApiKey {
            api_key: header.api_key,
            kind: MessageKind::Request,
            correlation_id: Some(header.correlation_id),
        })?;
    request.check_version(header.api_version, Some(header.correlation_id))?;
    let header_value = Value::Struct(vec![
        ("request_api_key", header.api_key.into()),
        ("request_api_version", header.api_version.into()),
        ("correlation_id", header.correlation_id.into()),
        ("client_id", header.client_id.clone().into()),
    ]);
    let mut frame = vec![0; 4];
    registry.request_header().encode_into(
        request_header_version(request, header.api_version),
        &header_value,
        &mut frame,
    )?;
    let splices = request.encode_into_spliced(header.api_version, body, &mut frame)?;
    let spliced: usize = splices.iter().map(|(_, len)| len).sum();
    let frame = finish_frame_with(frame, spliced, &request.name)?;
    Ok((frame, splices))
}

/// A response frame, size prefix included.
pub fn encode_response(
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body: &Value,
) -> Result<Vec<u8>> {
    let (frame, splices) = encode_response_spliced(api_key, api_version, correlation_id, body)?;
    if splices.is_empty() {
        Ok(frame)
    } else {
        Err(Error::InvalidValue {
            context: format!("response to api key {api_key} v{api_version}"),
            reason: "spliced records, which only encode_response_spliced writes".into(),
        })
    }
}

/// Where a spliced record set goes in a frame: its offset in the encoded bytes (it comes
/// before the byte there) and its length.
pub type Splice = (usize, usize);

/// A response frame, size prefix included, whose [`Value::Spliced`] record sets are left
/// out: the size counts them, and `(offset, length)` says where each goes in the frame's
/// bytes, in order (the sender writes `frame[..offset]`, then the record set, and so on).
pub fn encode_response_spliced(
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body: &Value,
) -> Result<(Vec<u8>, Vec<Splice>)> {
    let registry = registry();
    let response = registry.response(api_key).ok_or(Error::UnknownApiKey {
        api_key,
        kind: MessageKind::Response,
        correlation_id: Some(correlation_id),
    })?;
    response.check_version(api_version, Some(correlation_id))?;
    let header_value = Value::Struct(vec![("correlation_id", correlation_id.into())]);
    let mut frame = vec![0; 4];
    registry.response_header().encode_into(
        response_header_version(response, api_version),
        &header_value,
        &mut frame,
    )?;
    let splices = response.encode_into_spliced(api_version, body, &mut frame)?;
    let spliced: usize = splices.iter().map(|(_, len)| len).sum();
    let frame = finish_frame_with(frame, spliced, &response.name)?;
    Ok((frame, splices))
}

/// Reads a response `frame` (the bytes after its 4-byte size) to a request of `api_key` at
/// `api_version`: its correlation id and body.
pub fn decode_response(api_key: i16, api_version: i16, frame: &[u8]) -> Result<(i32, Value)> {
    decode_response_with(api_key, api_version, frame, false)
}

/// As [`decode_response`], with each `records` field read as a [`Value::InPlace`]: where
/// its bytes are in `frame` (a consumer decodes fetched batches from there).
pub fn decode_response_in_place(
    api_key: i16,
    api_version: i16,
    frame: &[u8],
) -> Result<(i32, Value)> {
    decode_response_with(api_key, api_version, frame, true)
}

fn decode_response_with(
    api_key: i16,
    api_version: i16,
    frame: &[u8],
    records_in_place: bool,
) -> Result<(i32, Value)> {
    let correlation_id = frame
        .get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let registry = registry();
    let response = registry.response(api_key).ok_or(Error::UnknownApiKey {
        api_key,
        kind: MessageKind::Response,
        correlation_id,
    })?;
    response.check_version(api_version, correlation_id)?;
    let mut reader = Reader::new(frame);
    let header = registry
        .response_header()
        .decode_from(response_header_version(response, api_version), &mut reader)?;
    let correlation_id = header
        .get("correlation_id")
        .and_then(Value::as_int)
        .unwrap_or_default() as i32;
    let body = response.decode_from_with(api_version, &mut reader, records_in_place)?;
    response.expect_end(api_version, &reader)?;
    Ok((correlation_id, body))
}

/// Writes the size prefix of `frame` (its first 4 bytes), counting `spliced` bytes sent
/// apart.
fn finish_frame_with(mut frame: Vec<u8>, spliced: usize, message: &str) -> Result<Vec<u8>> {
    let total = frame.len() - 4 + spliced;
    let size = i32::try_from(total).map_err(|_| Error::InvalidValue {
        context: message.to_string(),
        reason: format!("a frame of {total} bytes does not fit an int32 size"),
    })?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame)
}
