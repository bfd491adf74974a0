//! Every message schema of the crate, parsed once on first use.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::json::strip_comments;
use super::schema::{KeyInterner, MessageKind, MessageSpec};

include!(concat!(env!("OUT_DIR"), "/kafka_schemas.rs"));

/// An api key with the versions a broker that implements every message would advertise
/// (ApiVersionsResponse's `api_keys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiVersionRange {
    pub api_key: i16,
    pub min_version: i16,
    pub max_version: i16,
}

/// The message schemas under `schemas/kafka`, indexed by api key and kind. Immutable once
/// built; shared by every thread through [`registry`].
#[derive(Debug)]
pub struct Registry {
    /// Sorted by file name.
    messages: Vec<MessageSpec>,
    by_key: HashMap<(i16, MessageKind), usize>,
    request_header: usize,
    response_header: usize,
}

/// The registry of the bundled schemas. The first call parses them (a few milliseconds).
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        // The schemas are compiled in and a test loads every one of them: a failure here
        // is a bad schema refresh, not bad input.
        Registry::load(SCHEMA_FILES)
            .unwrap_or_else(|e| panic!("the bundled Kafka schemas do not load: {e}"))
    })
}

impl Registry {
    /// Parses `(file stem, JSON with comments)` pairs. Errors name the file and field.
    pub(crate) fn load(files: &[(&str, &str)]) -> Result<Registry, String> {
        let mut keys = KeyInterner::default();
        let mut messages = Vec::with_capacity(files.len());
        let mut by_key = HashMap::new();
        let (mut request_header, mut response_header) = (None, None);
        for (stem, text) in files {
            let json: serde_json::Value = serde_json::from_str(&strip_comments(text))
                .map_err(|e| format!("{stem}.json: {e}"))?;
            let spec = MessageSpec::parse(stem, &json, &mut keys)?;
            if spec.name != *stem {
                return Err(format!("{stem}.json declares message {}", spec.name));
            }
            let index = messages.len();
            match (spec.kind, spec.api_key) {
                (MessageKind::Header, _) if spec.name == "RequestHeader" => {
                    request_header = Some(index)
                }
                (MessageKind::Header, _) if spec.name == "ResponseHeader" => {
                    response_header = Some(index)
                }
                (MessageKind::Header, _) => return Err(format!("{stem}.json: unknown header")),
                (kind, Some(api_key)) => {
                    if let Some(other) = by_key.insert((api_key, kind), index) {
                        let other: &MessageSpec = &messages[other];
                        return Err(format!(
                            "{} and {} both have api key {api_key}",
                            other.name, spec.name
                        ));
                    }
                }
                (_, None) => return Err(format!("{stem}.json has no api key")),
            }
            messages.push(spec);
        }
        Ok(Registry {
            messages,
            by_key,
            request_header: request_header.ok_or("RequestHeader.json is missing")?,
            response_header: response_header.ok_or("ResponseHeader.json is missing")?,
        })
    }

    /// The request or response schema of `api_key`.
    pub fn message(&self, api_key: i16, kind: MessageKind) -> Option<&MessageSpec> {
        self.by_key
            .get(&(api_key, kind))
            .map(|&i| &self.messages[i])
    }

    pub fn request(&self, api_key: i16) -> Option<&MessageSpec> {
        self.message(api_key, MessageKind::Request)
    }

    pub fn response(&self, api_key: i16) -> Option<&MessageSpec> {
        self.message(api_key, MessageKind::Response)
    }

    /// Every schema, headers included, sorted by file name.
    pub fn messages(&self) -> &[MessageSpec] {
        &self.messages
    }

    pub fn request_header(&self) -> &MessageSpec {
        &self.messages[self.request_header]
    }

    pub fn response_header(&self) -> &MessageSpec {
        &self.messages[self.response_header]
    }

    /// Every request's api key and versions, by api key, as Kafka advertises them by
    /// default (`unstable.api.versions.enable=false`): a latest version marked unstable
    /// is left out. Decoding still accepts every valid version. A broker lists only the
    /// api keys it serves.
    pub fn api_versions(&self) -> Vec<ApiVersionRange> {
        let mut ranges: Vec<ApiVersionRange> = self
            .messages
            .iter()
            .filter(|spec| spec.kind == MessageKind::Request)
            .filter_map(|spec| {
                let mut max_version = spec.valid_versions.highest();
                if spec.latest_version_unstable {
                    max_version -= 1;
                }
                let min_version = spec.valid_versions.lowest();
                (max_version >= min_version).then_some(ApiVersionRange {
                    api_key: spec.api_key?,
                    min_version,
                    max_version,
                })
            })
            .collect();
        ranges.sort_by_key(|range| range.api_key);
        ranges
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::Versions;

    #[test]
    fn every_bundled_schema_loads() {
        let registry = registry();
        assert_eq!(registry.messages().len(), SCHEMA_FILES.len());
        let requests = registry
            .messages()
            .iter()
            .filter(|m| m.kind == MessageKind::Request)
            .count();
        let responses = registry
            .messages()
            .iter()
            .filter(|m| m.kind == MessageKind::Response)
            .count();
        assert_eq!(requests, responses);
        assert_eq!(requests + responses + 2, SCHEMA_FILES.len());
        for request in registry
            .messages()
            .iter()
            .filter(|m| m.kind == MessageKind::Request)
        {
            let api_key = request.api_key.unwrap();
            let response = registry
                .response(api_key)
                .unwrap_or_else(|| panic!("no response for {}", request.name));
            assert_eq!(
                response.valid_versions, request.valid_versions,
                "{}",
                request.name
            );
            assert_eq!(
                response.flexible_versions, request.flexible_versions,
                "{}",
                request.name
            );
        }
    }

    #[test]
    fn lookups() {
        let registry = registry();
        let metadata = registry.request(3).unwrap();
        assert_eq!(metadata.name, "MetadataRequest");
        assert!(!metadata.is_flexible(8));
        assert!(metadata.is_flexible(9));
        assert_eq!(registry.response(18).unwrap().name, "ApiVersionsResponse");
        assert!(registry.request(-5).is_none());
        assert_eq!(
            registry.request_header().valid_versions,
            Versions::new(0, 2)
        );
        let ranges = registry.api_versions();
        assert!(ranges.windows(2).all(|w| w[0].api_key < w[1].api_key));
        let api_versions = ranges.iter().find(|r| r.api_key == 18).unwrap();
        assert_eq!((api_versions.min_version, api_versions.max_version), (0, 4));
    }

    #[test]
    fn a_broken_schema_is_named() {
        let err = Registry::load(&[("Broken", "{ \"type\": \"request\", ")]).unwrap_err();
        assert!(err.starts_with("Broken.json"), "{err}");
    }
}
