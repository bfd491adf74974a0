//! The model of Kafka's JSON message schemas (`clients/src/main/resources/common/message`),
//! as Kafka's generator (`generator/src/main/java/org/apache/kafka/message`) reads them.
//!
//! A message is a struct of fields; a field has a type (`int32`, `string`, `[]int32`,
//! `[]SomeStruct`, `SomeStruct`, ...), the versions that carry it, the versions in which it
//! may be null, and, for a tagged field, its tag and the versions in which it travels in the
//! tagged-fields section instead of in place. Struct types are declared inline (the field
//! carries `fields`) or once per file in `commonStructs`.
//!
//! Values name fields by their snake_case key, made by Kafka's own rule
//! ([`snake_case`]): `ThrottleTimeMs` is `throttle_time_ms`, `ProducerIDs` is
//! `producer_ids`, `KRaftVersionFeature` is `kraft_version_feature`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value as Json;

use super::value::Value;
use super::versions::Versions;

/// What a schema file describes: its `"type"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageKind {
    Request,
    Response,
    Header,
}

/// A field's type. `Records` is a record set carried as opaque bytes.
#[derive(Clone, Debug)]
pub enum FieldType {
    Bool,
    Int8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Float64,
    String,
    Bytes,
    Records,
    Uuid,
    Struct(Arc<StructSpec>),
    /// Elements are never null; arrays of arrays do not exist.
    Array(Box<FieldType>),
}

impl FieldType {
    fn can_be_nullable(&self) -> bool {
        matches!(
            self,
            FieldType::String
                | FieldType::Bytes
                | FieldType::Records
                | FieldType::Struct(_)
                | FieldType::Array(_)
        )
    }

    /// The range of an integer type, `None` for the others.
    pub(crate) fn int_range(&self) -> Option<(i64, i64)> {
        match self {
            FieldType::Int8 => Some((i8::MIN.into(), i8::MAX.into())),
            FieldType::Int16 => Some((i16::MIN.into(), i16::MAX.into())),
            FieldType::Uint16 => Some((0, u16::MAX.into())),
            FieldType::Int32 => Some((i32::MIN.into(), i32::MAX.into())),
            FieldType::Uint32 => Some((0, u32::MAX.into())),
            FieldType::Int64 => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::Bool => write!(f, "bool"),
            FieldType::Int8 => write!(f, "int8"),
            FieldType::Int16 => write!(f, "int16"),
            FieldType::Uint16 => write!(f, "uint16"),
            FieldType::Int32 => write!(f, "int32"),
            FieldType::Uint32 => write!(f, "uint32"),
            FieldType::Int64 => write!(f, "int64"),
            FieldType::Float64 => write!(f, "float64"),
            FieldType::String => write!(f, "string"),
            FieldType::Bytes => write!(f, "bytes"),
            FieldType::Records => write!(f, "records"),
            FieldType::Uuid => write!(f, "uuid"),
            FieldType::Struct(spec) => write!(f, "{}", spec.name),
            FieldType::Array(element) => write!(f, "[]{element}"),
        }
    }
}

/// One field of a struct.
#[derive(Clone, Debug)]
pub struct FieldSpec {
    /// Kafka's name, `ThrottleTimeMs`.
    pub name: String,
    /// The name values use, `throttle_time_ms` ([`snake_case`]).
    pub key: &'static str,
    pub field_type: FieldType,
    /// The versions that carry the field (in place or tagged).
    pub versions: Versions,
    pub nullable_versions: Versions,
    /// The versions in which the field travels in the tagged-fields section, with `tag`.
    pub tagged_versions: Versions,
    pub tag: Option<u32>,
    /// Whether a non-default value may be dropped silently at a version without the field.
    pub ignorable: bool,
    /// Overrides the message's flexible versions for this field's own encoding (only
    /// `RequestHeader.ClientId`, a legacy string in every header version).
    pub flexible_versions: Option<Versions>,
    /// The schema's `"default"`, else the type's: 0, false, 0.0, the zero uuid, `""`,
    /// empty bytes, records or array. A non-null struct default is an empty
    /// `Value::Struct`, which stands for "every field at its default". (Kafka's Java
    /// default for records is null; an empty record set is what an omitted one means here.)
    pub(crate) default: Value,
}

impl FieldSpec {
    /// Whether `version` carries the field in place (not tagged).
    pub fn is_in_place(&self, version: i16) -> bool {
        self.versions.contains(version) && !self.tagged_versions.contains(version)
    }

    /// Whether `version` carries the field in the tagged-fields section.
    pub fn is_tagged(&self, version: i16) -> bool {
        self.versions.contains(version) && self.tagged_versions.contains(version)
    }

    /// The field's default value at `version`: a struct with every field `version` carries.
    pub fn default_value(&self, version: i16) -> Value {
        match (&self.field_type, &self.default) {
            (FieldType::Struct(spec), Value::Struct(_)) => spec.default_value(version),
            (_, default) => default.clone(),
        }
    }

    /// Whether `value` equals the default; a struct does when each field it gives does
    /// (the fields it leaves out take their defaults).
    pub fn is_default(&self, value: &Value) -> bool {
        match (&self.field_type, &self.default, value) {
            (FieldType::Struct(spec), Value::Struct(_), Value::Struct(fields)) => fields
                .iter()
                .all(|(key, value)| spec.field(key).is_some_and(|field| field.is_default(value))),
            (_, default, value) => default == value,
        }
    }
}

/// A struct: the message body, an inline struct type, or one of a file's `commonStructs`.
#[derive(Clone, Debug)]
pub struct StructSpec {
    pub name: String,
    pub versions: Versions,
    pub fields: Vec<FieldSpec>,
}

impl StructSpec {
    /// The field whose snake_case key is `key`.
    pub fn field(&self, key: &str) -> Option<&FieldSpec> {
        self.fields.iter().find(|field| field.key == key)
    }

    /// Every field `version` carries, at its default.
    pub fn default_value(&self, version: i16) -> Value {
        Value::Struct(
            self.fields
                .iter()
                .filter(|field| field.versions.contains(version))
                .map(|field| (field.key, field.default_value(version)))
                .collect(),
        )
    }
}

/// One schema file: a request, a response or a header.
#[derive(Clone, Debug)]
pub struct MessageSpec {
    /// `None` for the headers.
    pub api_key: Option<i16>,
    pub kind: MessageKind,
    pub name: String,
    pub valid_versions: Versions,
    pub flexible_versions: Versions,
    /// The newest version is still being designed (Kafka does not advertise it by default).
    pub latest_version_unstable: bool,
    pub body: StructSpec,
}

impl MessageSpec {
    /// Whether `version` uses compact lengths and tagged fields.
    pub fn is_flexible(&self, version: i16) -> bool {
        self.flexible_versions.contains(version)
    }

    /// The body with every field `version` carries at its default.
    pub fn default_value(&self, version: i16) -> Value {
        self.body.default_value(version)
    }

    /// Parses one schema file (comments already stripped). Errors name the file and field.
    pub(crate) fn parse(
        file: &str,
        json: &Json,
        keys: &mut KeyInterner,
    ) -> Result<MessageSpec, String> {
        let context = |e: String| format!("{file}: {e}");
        let kind = match str_key(json, "type").map_err(context)? {
            "request" => MessageKind::Request,
            "response" => MessageKind::Response,
            "header" => MessageKind::Header,
            other => return Err(context(format!("unknown message type {other:?}"))),
        };
        let api_key = match json.get("apiKey") {
            Some(key) => Some(
                json_int(key)
                    .and_then(|k| i16::try_from(k).ok())
                    .ok_or_else(|| context(format!("invalid apiKey {key}")))?,
            ),
            None if kind == MessageKind::Header => None,
            None => return Err(context("a request or response needs an apiKey".into())),
        };
        let name = str_key(json, "name").map_err(context)?.to_string();
        let valid_versions =
            Versions::parse(str_key(json, "validVersions").map_err(context)?).map_err(context)?;
        let flexible_versions =
            Versions::parse(str_key(json, "flexibleVersions").map_err(context)?)
                .map_err(context)?;
        let latest_version_unstable = json
            .get("latestVersionUnstable")
            .and_then(Json::as_bool)
            .unwrap_or(false);

        let mut common = HashMap::new();
        for spec in json
            .get("commonStructs")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let struct_name = str_key(spec, "name").map_err(context)?;
            if common.insert(struct_name.to_string(), spec).is_some() {
                return Err(context(format!(
                    "common struct {struct_name} is declared twice"
                )));
            }
        }
        let mut parser = StructParser {
            common,
            resolved: HashMap::new(),
            resolving: Vec::new(),
            flexible_versions,
            keys,
        };
        let body = parser
            .struct_spec(&name, valid_versions, fields_of(json), &name)
            .map_err(context)?;
        Ok(MessageSpec {
            api_key,
            kind,
            name,
            valid_versions,
            flexible_versions,
            latest_version_unstable,
            body,
        })
    }
}

/// The snake_case key of a schema field name, by the rule of Kafka's generator
/// (`MessageGenerator.toSnakeCase`): an upper-case letter that follows a lower-case letter
/// or a digit starts a new word; a run of capitals stays one word. `ThrottleTimeMs` is
/// `throttle_time_ms`, `ProducerIDs` is `producer_ids`, `V3AndBelowTopics` is
/// `v3_and_below_topics`, `isKRaftController` is `is_kraft_controller`.
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous_was_capital = true;
    for c in name.chars() {
        if c.is_uppercase() {
            if !previous_was_capital {
                out.push('_');
            }
            out.extend(c.to_lowercase());
            previous_was_capital = true;
        } else {
            out.push(c);
            previous_was_capital = false;
        }
    }
    out
}

/// Field keys live as long as the registry (the process): each distinct key is leaked
/// once, so values can name fields with `&'static str`.
#[derive(Default)]
pub(crate) struct KeyInterner(HashMap<String, &'static str>);

impl KeyInterner {
    fn intern(&mut self, key: String) -> &'static str {
        if let Some(interned) = self.0.get(&key) {
            return interned;
        }
        let interned: &'static str = Box::leak(key.clone().into_boxed_str());
        self.0.insert(key, interned);
        interned
    }
}

fn str_key<'j>(json: &'j Json, key: &str) -> Result<&'j str, String> {
    json.get(key)
        .and_then(Json::as_str)
        .ok_or_else(|| format!("missing string {key:?}"))
}

/// An integer, written as a JSON number or a string (Kafka's Jackson accepts both).
fn json_int(json: &Json) -> Option<i64> {
    match json {
        Json::Number(number) => number.as_i64(),
        Json::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

fn fields_of(json: &Json) -> &[Json] {
    json.get("fields")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Resolves the struct types of one file; `commonStructs` are parsed once and shared.
struct StructParser<'j, 'k> {
    common: HashMap<String, &'j Json>,
    resolved: HashMap<String, Arc<StructSpec>>,
    /// Common structs being parsed, to refuse one that contains itself.
    resolving: Vec<String>,
    flexible_versions: Versions,
    keys: &'k mut KeyInterner,
}

impl StructParser<'_, '_> {
    fn struct_spec(
        &mut self,
        name: &str,
        versions: Versions,
        fields: &[Json],
        path: &str,
    ) -> Result<StructSpec, String> {
        let mut specs: Vec<FieldSpec> = Vec::with_capacity(fields.len());
        for json in fields {
            let field = self.field(json, path)?;
            if let Some(other) = specs.iter().find(|other| other.key == field.key) {
                return Err(format!(
                    "{path}: fields {} and {} have the same key {}",
                    other.name, field.name, field.key
                ));
            }
            if let Some(tag) = field.tag {
                if let Some(other) = specs.iter().find(|other| other.tag == Some(tag)) {
                    return Err(format!(
                        "{path}: fields {} and {} use tag {tag}",
                        other.name, field.name
                    ));
                }
            }
            specs.push(field);
        }
        Ok(StructSpec {
            name: name.to_string(),
            versions,
            fields: specs,
        })
    }

    fn field(&mut self, json: &Json, parent: &str) -> Result<FieldSpec, String> {
        let name = str_key(json, "name")
            .map_err(|e| format!("{parent}: {e}"))?
            .to_string();
        let path = format!("{parent}.{name}");
        let err = |e: String| format!("{path}: {e}");
        let optional_versions = |key: &str| match json.get(key) {
            None => Ok(None),
            Some(Json::String(text)) => Versions::parse(text).map(Some).map_err(err),
            Some(other) => Err(err(format!("{key} must be a string, not {other}"))),
        };
        let tagged_versions = optional_versions("taggedVersions")?.unwrap_or(Versions::NONE);
        // As in Kafka, a tagged field without "versions" exists in its tagged versions.
        let versions = match optional_versions("versions")? {
            Some(versions) => versions,
            None if !tagged_versions.is_empty() => tagged_versions,
            None => return Err(err("missing \"versions\"".into())),
        };
        let nullable_versions = optional_versions("nullableVersions")?.unwrap_or(Versions::NONE);
        let flexible_versions = optional_versions("flexibleVersions")?;
        let type_name = str_key(json, "type").map_err(err)?;
        let field_type = self.field_type(type_name, versions, fields_of(json), &path)?;

        if !nullable_versions.is_empty() && !field_type.can_be_nullable() {
            return Err(err(format!("type {field_type} cannot be nullable")));
        }
        if flexible_versions.is_some()
            && !matches!(field_type, FieldType::String | FieldType::Bytes)
        {
            return Err(err(
                "only string and bytes fields may override flexibleVersions".into(),
            ));
        }
        let tag = match json.get("tag") {
            None => None,
            Some(tag) => Some(
                json_int(tag)
                    .and_then(|t| u32::try_from(t).ok())
                    .ok_or_else(|| err(format!("invalid tag {tag}")))?,
            ),
        };
        if tag.is_some() == tagged_versions.is_empty() {
            return Err(err("a tag and taggedVersions go together".into()));
        }
        if !versions.includes(tagged_versions) || !self.flexible_versions.includes(tagged_versions)
        {
            return Err(err(format!(
                "taggedVersions {tagged_versions} must be within versions {versions} and the flexible versions"
            )));
        }
        let default = parse_default(&field_type, json.get("default")).map_err(err)?;
        if default == Value::Null && !nullable_versions.includes(versions) {
            return Err(err(
                "null is the default but the field is not nullable in every version".into(),
            ));
        }
        Ok(FieldSpec {
            key: self.keys.intern(snake_case(&name)),
            name,
            field_type,
            versions,
            nullable_versions,
            tagged_versions,
            tag,
            ignorable: json
                .get("ignorable")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            flexible_versions,
            default,
        })
    }

    fn field_type(
        &mut self,
        type_name: &str,
        versions: Versions,
        fields: &[Json],
        path: &str,
    ) -> Result<FieldType, String> {
        if let Some(element) = type_name.strip_prefix("[]") {
            if element.starts_with("[]") {
                return Err(format!("{path}: arrays of arrays are not supported"));
            }
            return Ok(FieldType::Array(Box::new(
                self.field_type(element, versions, fields, path)?,
            )));
        }
        if !fields.is_empty() && !type_name.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Err(format!("{path}: a {type_name} field cannot have fields"));
        }
        Ok(match type_name {
            "bool" => FieldType::Bool,
            "int8" => FieldType::Int8,
            "int16" => FieldType::Int16,
            "uint16" => FieldType::Uint16,
            "int32" => FieldType::Int32,
            "uint32" => FieldType::Uint32,
            "int64" => FieldType::Int64,
            "float64" => FieldType::Float64,
            "string" => FieldType::String,
            "bytes" => FieldType::Bytes,
            "records" => FieldType::Records,
            "uuid" => FieldType::Uuid,
            name if name.starts_with(|c: char| c.is_ascii_uppercase()) => {
                FieldType::Struct(self.struct_type(name, versions, fields, path)?)
            }
            other => return Err(format!("{path}: unknown type {other:?}")),
        })
    }

    fn struct_type(
        &mut self,
        name: &str,
        versions: Versions,
        fields: &[Json],
        path: &str,
    ) -> Result<Arc<StructSpec>, String> {
        let Some(common) = self.common.get(name).copied() else {
            return Ok(Arc::new(self.struct_spec(name, versions, fields, path)?));
        };
        if !fields.is_empty() {
            return Err(format!(
                "{path}: re-declares the common struct {name} inline"
            ));
        }
        if let Some(spec) = self.resolved.get(name) {
            return Ok(spec.clone());
        }
        if self.resolving.iter().any(|n| n == name) {
            return Err(format!("{path}: common struct {name} contains itself"));
        }
        let common_versions = Versions::parse(str_key(common, "versions")?)?;
        self.resolving.push(name.to_string());
        let spec = self.struct_spec(name, common_versions, fields_of(common), name);
        self.resolving.pop();
        let spec = Arc::new(spec?);
        self.resolved.insert(name.to_string(), spec.clone());
        Ok(spec)
    }
}

/// A field's default, from the schema's `"default"` (a string, or a bare JSON number or
/// boolean, which Kafka's generator reads as their text).
fn parse_default(field_type: &FieldType, raw: Option<&Json>) -> Result<Value, String> {
    let text = match raw {
        None => String::new(),
        Some(Json::String(text)) => text.clone(),
        Some(Json::Number(number)) => number.to_string(),
        Some(Json::Bool(b)) => b.to_string(),
        Some(other) => return Err(format!("invalid default {other}")),
    };
    let invalid = || format!("invalid default {text:?} for a {field_type} field");
    if let Some((min, max)) = field_type.int_range() {
        if text.is_empty() {
            return Ok(Value::Int(0));
        }
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16),
            None => text.parse::<i64>(),
        };
        return match parsed {
            Ok(v) if (min..=max).contains(&v) => Ok(Value::Int(v)),
            _ => Err(invalid()),
        };
    }
    match field_type {
        FieldType::Bool => match text.to_ascii_lowercase().as_str() {
            "" | "false" => Ok(Value::Bool(false)),
            "true" => Ok(Value::Bool(true)),
            _ => Err(invalid()),
        },
        FieldType::Float64 if text.is_empty() => Ok(Value::Float(0.0)),
        FieldType::Float64 => text.parse().map(Value::Float).map_err(|_| invalid()),
        FieldType::Uuid if text.is_empty() => Ok(Value::Uuid([0; 16])),
        FieldType::String if text == "null" => Ok(Value::Null),
        FieldType::String => Ok(Value::Str(text)),
        _ if text == "null" => Ok(Value::Null),
        FieldType::Bytes | FieldType::Records if text.is_empty() => Ok(Value::Bytes(Vec::new())),
        FieldType::Array(_) if text.is_empty() => Ok(Value::Array(Vec::new())),
        FieldType::Struct(_) if text.is_empty() => Ok(Value::Struct(Vec::new())),
        _ => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_follows_kafkas_generator() {
        for (name, key) in [
            ("ThrottleTimeMs", "throttle_time_ms"),
            ("ApiKeys", "api_keys"),
            ("IsrNodes", "isr_nodes"),
            ("TopicId", "topic_id"),
            ("ClusterId", "cluster_id"),
            ("ZkVersion", "zk_version"),
            ("ProducerIDs", "producer_ids"),
            ("KRaftVersionFeature", "kraft_version_feature"),
            ("isKRaftController", "is_kraft_controller"),
            ("V3AndBelowTopics", "v3_and_below_topics"),
            ("V0Host", "v0_host"),
            ("Name", "name"),
        ] {
            assert_eq!(snake_case(name), key, "{name}");
        }
    }

    #[test]
    fn defaults_by_type() {
        let json = |s: &str| serde_json::from_str::<Json>(s).unwrap();
        assert_eq!(parse_default(&FieldType::Int32, None), Ok(Value::Int(0)));
        assert_eq!(
            parse_default(&FieldType::Int32, Some(&json("\"0x7fffffff\""))),
            Ok(Value::Int(i32::MAX.into()))
        );
        assert_eq!(
            parse_default(&FieldType::Int64, Some(&json("-1"))),
            Ok(Value::Int(-1))
        );
        assert_eq!(
            parse_default(&FieldType::Bool, Some(&json("false"))),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            parse_default(&FieldType::Bool, Some(&json("\"true\""))),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            parse_default(&FieldType::String, Some(&json("\"null\""))),
            Ok(Value::Null)
        );
        assert_eq!(
            parse_default(&FieldType::String, None),
            Ok(Value::Str(String::new()))
        );
        assert_eq!(
            parse_default(&FieldType::Uuid, None),
            Ok(Value::Uuid([0; 16]))
        );
        assert_eq!(
            parse_default(&FieldType::Float64, None),
            Ok(Value::Float(0.0))
        );
        assert!(parse_default(&FieldType::Int8, Some(&json("\"200\""))).is_err());
        assert!(parse_default(&FieldType::Uint16, Some(&json("\"-1\""))).is_err());
        assert!(parse_default(&FieldType::Bytes, Some(&json("\"abc\""))).is_err());
    }

    #[test]
    fn schema_errors_name_the_field() {
        let parse = |text: &str| {
            let json: Json = serde_json::from_str(text).unwrap();
            MessageSpec::parse("Test", &json, &mut KeyInterner::default()).map(|_| ())
        };
        let header = r#""type": "request", "apiKey": 99, "name": "TestRequest", "validVersions": "0-3", "flexibleVersions": "2+""#;
        assert!(parse(&format!(r#"{{ {header}, "fields": [] }}"#)).is_ok());
        let err = parse(&format!(
            r#"{{ {header}, "fields": [ {{ "name": "Bad", "type": "int33", "versions": "0+" }} ] }}"#
        ))
        .unwrap_err();
        assert!(
            err.contains("TestRequest.Bad") && err.contains("int33"),
            "{err}"
        );
        let err = parse(&format!(
            r#"{{ {header}, "fields": [ {{ "name": "Count", "type": "int32", "versions": "0+", "nullableVersions": "0+" }} ] }}"#
        ))
        .unwrap_err();
        assert!(err.contains("cannot be nullable"), "{err}");
        let err = parse(&format!(
            r#"{{ {header}, "fields": [ {{ "name": "A", "type": "int32", "versions": "0+" }}, {{ "name": "a", "type": "int32", "versions": "0+" }} ] }}"#
        ))
        .unwrap_err();
        assert!(err.contains("same key a"), "{err}");
        let err = parse(&format!(
            r#"{{ {header}, "fields": [ {{ "name": "T", "type": "int32", "versions": "0+", "taggedVersions": "1+", "tag": 0 }} ] }}"#
        ))
        .unwrap_err();
        assert!(err.contains("flexible versions"), "{err}");
        let err = parse(&format!(
            r#"{{ {header}, "fields": [ {{ "name": "S", "type": "Loop", "versions": "0+" }} ],
                "commonStructs": [ {{ "name": "Loop", "versions": "0+", "fields": [ {{ "name": "Inner", "type": "Loop", "versions": "0+" }} ] }} ] }}"#
        ))
        .unwrap_err();
        assert!(err.contains("contains itself"), "{err}");
    }
}
