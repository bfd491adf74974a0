//! Reads a message's bytes into a [`Value`] by walking its schema.
//!
//! Kafka's rules, per field of a struct in schema order: a field the version carries in
//! place is read; a field it carries tagged takes its default until the struct's
//! tagged-fields section (flexible versions only, after the last field) gives it a value;
//! a field the version does not carry is left out of the value. Unknown tags are skipped.
//!
//! Nothing here trusts a length: each is checked against the bytes left before anything
//! is sliced or allocated, and an array may not claim more elements than bytes left (as
//! Kafka's own readers check). Recursion follows the schema, whose structs nest a few
//! levels at most, never the input.

use std::cell::{Cell, RefCell};

use super::error::{Error, Fault, Result};
use super::schema::{FieldSpec, FieldType, MessageSpec, StructSpec};
use super::value::Value;
use super::wire::Reader;

/// What every field of one message needs to know.
pub(crate) struct Ctx {
    pub(crate) version: i16,
    /// Whether the message's version is flexible (compact lengths, tagged fields).
    pub(crate) flexible: bool,
    /// Encoding: where each [`Value::Spliced`] goes (its offset in the output, its length).
    pub(crate) splices: RefCell<Vec<(usize, usize)>>,
    /// Encoding: a tagged field's bytes are being written apart (no splice may go there).
    pub(crate) in_tagged: Cell<bool>,
    /// Decoding: `records` fields become [`Value::InPlace`] (where they are in the input)
    /// instead of copies of their bytes.
    pub(crate) records_in_place: bool,
}

impl Ctx {
    pub(crate) fn new(spec: &MessageSpec, version: i16) -> Ctx {
        Ctx {
            version,
            flexible: spec.is_flexible(version),
            splices: RefCell::new(Vec::new()),
            in_tagged: Cell::new(false),
            records_in_place: false,
        }
    }

    /// Whether `field` uses compact lengths: the message's flexibility, unless the field
    /// overrides it (`RequestHeader.ClientId`).
    pub(crate) fn compact(&self, field: &FieldSpec) -> bool {
        field
            .flexible_versions
            .map_or(self.flexible, |versions| versions.contains(self.version))
    }
}

impl MessageSpec {
    /// Reads the body of this message at `version` from `bytes`, all of which it must use.
    pub fn decode(&self, version: i16, bytes: &[u8]) -> Result<Value> {
        let mut reader = Reader::new(bytes);
        let value = self.decode_from(version, &mut reader)?;
        self.expect_end(version, &reader)?;
        Ok(value)
    }

    pub(crate) fn decode_from(&self, version: i16, reader: &mut Reader<'_>) -> Result<Value> {
        self.decode_from_with(version, reader, false)
    }

    /// As [`Self::decode_from`]; with `records_in_place`, `records` fields are read as
    /// [`Value::InPlace`].
    pub(crate) fn decode_from_with(
        &self,
        version: i16,
        reader: &mut Reader<'_>,
        records_in_place: bool,
    ) -> Result<Value> {
        self.check_version(version, None)?;
        let ctx = Ctx {
            records_in_place,
            ..Ctx::new(self, version)
        };
        read_struct(&self.body, &ctx, reader).map_err(|fault| fault.into_error(&self.name, version))
    }

    pub(crate) fn expect_end(&self, version: i16, reader: &Reader<'_>) -> Result<()> {
        match reader.remaining() {
            0 => Ok(()),
            left => Err(Fault::malformed(
                reader.offset(),
                format!("{left} bytes left after the message"),
            )
            .into_error(&self.name, version)),
        }
    }

    pub(crate) fn check_version(&self, version: i16, correlation_id: Option<i32>) -> Result<()> {
        if self.valid_versions.contains(version) {
            return Ok(());
        }
        Err(Error::UnsupportedVersion {
            message: self.name.clone(),
            api_key: self.api_key.unwrap_or(-1),
            api_version: version,
            valid_versions: self.valid_versions,
            correlation_id,
        })
    }
}

pub(crate) fn read_struct(
    spec: &StructSpec,
    ctx: &Ctx,
    reader: &mut Reader<'_>,
) -> Result<Value, Fault> {
    let mut fields: Vec<(&'static str, Value)> = Vec::with_capacity(spec.fields.len());
    for field in &spec.fields {
        if !field.versions.contains(ctx.version) {
            continue;
        }
        let value = if field.tagged_versions.contains(ctx.version) {
            field.default_value(ctx.version)
        } else {
            read_field(field, ctx, reader, false).map_err(|fault| fault.in_field(field.key))?
        };
        fields.push((field.key, value));
    }
    if ctx.flexible {
        read_tagged_fields(spec, ctx, reader, &mut fields)?;
    }
    Ok(Value::Struct(fields))
}

/// The tagged-fields section: a count, then per field its tag, its size and its value.
fn read_tagged_fields(
    spec: &StructSpec,
    ctx: &Ctx,
    reader: &mut Reader<'_>,
    fields: &mut [(&'static str, Value)],
) -> Result<(), Fault> {
    let count = reader.uvarint()?;
    for _ in 0..count {
        let tag = reader.uvarint()?;
        let size = reader.uvarint()? as usize;
        let mut value_reader = reader.sub(size, "a tagged field")?;
        let known = spec
            .fields
            .iter()
            .find(|field| field.tag == Some(tag) && field.is_tagged(ctx.version));
        let Some(field) = known else {
            // A tag from a newer schema: skipped, as Kafka keeps it only as raw bytes.
            continue;
        };
        let value = read_field(field, ctx, &mut value_reader, true)
            .and_then(|value| match value_reader.remaining() {
                0 => Ok(value),
                left => Err(Fault::malformed(
                    value_reader.offset(),
                    format!("tagged field {tag} has {left} bytes beyond its value"),
                )),
            })
            .map_err(|fault| fault.in_field(field.key))?;
        if let Some((_, slot)) = fields.iter_mut().find(|(key, _)| *key == field.key) {
            *slot = value;
        }
    }
    Ok(())
}

fn read_field(
    field: &FieldSpec,
    ctx: &Ctx,
    reader: &mut Reader<'_>,
    tagged: bool,
) -> Result<Value, Fault> {
    let shape = Shape {
        nullable: field.nullable_versions.contains(ctx.version),
        compact: ctx.compact(field),
        tagged,
    };
    read_value(&field.field_type, shape, ctx, reader)
}

/// How one value is laid out, beyond its type.
#[derive(Clone, Copy)]
struct Shape {
    nullable: bool,
    /// Compact lengths (unsigned varint of length + 1, 0 for null).
    compact: bool,
    /// In the tagged-fields section: a nullable struct's marker is a varint there.
    tagged: bool,
}

fn read_value(
    field_type: &FieldType,
    shape: Shape,
    ctx: &Ctx,
    reader: &mut Reader<'_>,
) -> Result<Value, Fault> {
    let start = reader.offset();
    let null = || {
        if shape.nullable {
            Ok(Value::Null)
        } else {
            Err(Fault::malformed(
                start,
                format!(
                    "null, but the field is not nullable in version {}",
                    ctx.version
                ),
            ))
        }
    };
    Ok(match field_type {
        FieldType::Bool => Value::Bool(reader.i8()? != 0),
        FieldType::Int8 => Value::Int(reader.i8()?.into()),
        FieldType::Int16 => Value::Int(reader.i16()?.into()),
        FieldType::Uint16 => Value::Int(reader.u16()?.into()),
        FieldType::Int32 => Value::Int(reader.i32()?.into()),
        FieldType::Uint32 => Value::Int(reader.u32()?.into()),
        FieldType::Int64 => Value::Int(reader.i64()?),
        FieldType::Float64 => Value::Float(reader.f64()?),
        FieldType::Uuid => Value::Uuid(reader.uuid()?),
        FieldType::String => {
            let Some(len) = read_length(reader, shape.compact, LengthWidth::Int16)? else {
                return null();
            };
            if len > i16::MAX as usize {
                return Err(Fault::malformed(
                    start,
                    format!("string length {len} is over 32767"),
                ));
            }
            let bytes = reader.take(len, "a string")?;
            let text = std::str::from_utf8(bytes)
                .map_err(|e| Fault::malformed(start, format!("string is not UTF-8: {e}")))?;
            Value::Str(text.to_string())
        }
        FieldType::Bytes | FieldType::Records => {
            let Some(len) = read_length(reader, shape.compact, LengthWidth::Int32)? else {
                return null();
            };
            let offset = reader.offset();
            let bytes = reader.take(len, "bytes")?;
            if ctx.records_in_place && matches!(field_type, FieldType::Records) {
                Value::InPlace { offset, len }
            } else {
                Value::Bytes(bytes.to_vec())
            }
        }
        FieldType::Array(element) => {
            let Some(count) = read_length(reader, shape.compact, LengthWidth::Int32)? else {
                return null();
            };
            if count > reader.remaining() {
                return Err(Fault::malformed(
                    start,
                    format!(
                        "array of {count} elements, but only {} bytes left",
                        reader.remaining()
                    ),
                ));
            }
            let element_shape = Shape {
                nullable: false,
                tagged: false,
                ..shape
            };
            let mut items = Vec::with_capacity(count);
            for index in 0..count {
                let item = read_value(element, element_shape, ctx, reader)
                    .map_err(|fault| fault.at_index(index))?;
                items.push(item);
            }
            Value::Array(items)
        }
        FieldType::Struct(spec) => {
            if shape.nullable {
                let present = if shape.tagged {
                    reader.uvarint()? != 0
                } else {
                    reader.i8()? >= 0
                };
                if !present {
                    return Ok(Value::Null);
                }
            }
            read_struct(spec, ctx, reader)?
        }
    })
}

#[derive(Clone, Copy)]
enum LengthWidth {
    Int16,
    Int32,
}

/// A length or count; `None` for null (-1, or 0 in compact form). Other negative lengths
/// are malformed.
fn read_length(
    reader: &mut Reader<'_>,
    compact: bool,
    width: LengthWidth,
) -> Result<Option<usize>, Fault> {
    let start = reader.offset();
    if compact {
        return Ok(match reader.uvarint()? {
            0 => None,
            n => Some(n as usize - 1),
        });
    }
    let len = match width {
        LengthWidth::Int16 => i32::from(reader.i16()?),
        LengthWidth::Int32 => reader.i32()?,
    };
    match len {
        -1 => Ok(None),
        len if len < 0 => Err(Fault::malformed(start, format!("negative length {len}"))),
        len => Ok(Some(len as usize)),
    }
}
