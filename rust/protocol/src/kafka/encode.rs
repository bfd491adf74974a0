//! Writes a [`Value`] as a message's bytes by walking its schema.
//!
//! Kafka's rules, per field of a struct in schema order:
//! - a field the value leaves out takes its schema default (a struct: every field at its
//!   default);
//! - a field the version does not carry is dropped when its value is the default or the
//!   field is `ignorable`, and refused otherwise (the caller would lose data silently);
//! - a field the version carries tagged is written, in the tagged-fields section in tag
//!   order, only when its value differs from the default.
//!
//! Values are checked against the schema: the type, the integer range, null only where the
//! version allows it, field names the struct knows, each named once.

use super::decode::Ctx;
use super::error::{Fault, Result};
use super::schema::{FieldSpec, FieldType, MessageSpec, StructSpec};
use super::value::Value;
use super::wire::put_uvarint;

impl MessageSpec {
    /// The body of this message at `version`.
    pub fn encode(&self, version: i16, value: &Value) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_into(version, value, &mut out)?;
        Ok(out)
    }

    /// Appends the body of this message at `version` to `out`; on error `out` may hold
    /// part of it. A [`Value::Spliced`] is refused: see [`Self::encode_into_spliced`].
    pub fn encode_into(&self, version: i16, value: &Value, out: &mut Vec<u8>) -> Result<()> {
        let splices = self.encode_into_spliced(version, value, out)?;
        if splices.is_empty() {
            Ok(())
        } else {
            Err(
                Fault::invalid("spliced records, which only encode_into_spliced writes")
                    .into_error(&self.name, version),
            )
        }
    }

    /// As [`Self::encode_into`], and each [`Value::Spliced`] record set is left out: its
    /// length prefix is written, and `(offset in out, length)` says where its bytes go, in
    /// the order they come.
    pub fn encode_into_spliced(
        &self,
        version: i16,
        value: &Value,
        out: &mut Vec<u8>,
    ) -> Result<Vec<super::Splice>> {
        self.check_version(version, None)?;
        let ctx = Ctx::new(self, version);
        write_struct(&self.body, value, &ctx, out)
            .map_err(|fault| fault.into_error(&self.name, version))?;
        Ok(ctx.splices.into_inner())
    }
}

fn write_struct(
    spec: &StructSpec,
    value: &Value,
    ctx: &Ctx,
    out: &mut Vec<u8>,
) -> Result<(), Fault> {
    let Value::Struct(given) = value else {
        return Err(Fault::invalid(format!(
            "expected a {} struct, got {}",
            spec.name,
            value.kind()
        )));
    };
    for (i, (key, _)) in given.iter().enumerate() {
        if spec.field(key).is_none() {
            return Err(Fault::invalid(format!("{} has no field {key}", spec.name)));
        }
        if given[..i].iter().any(|(other, _)| other == key) {
            return Err(Fault::invalid(format!("field {key} is given twice")));
        }
    }

    let mut tagged: Vec<(u32, &FieldSpec, &Value)> = Vec::new();
    for field in &spec.fields {
        let given = given
            .iter()
            .find(|(key, _)| *key == field.key)
            .map(|(_, v)| v);
        if !field.versions.contains(ctx.version) {
            match given {
                Some(value) if !field.ignorable && !field.is_default(value) => {
                    return Err(Fault::invalid(format!(
                        "a non-default value, but version {} does not carry the field (versions {})",
                        ctx.version, field.versions
                    ))
                    .in_field(field.key));
                }
                _ => continue,
            }
        }
        let value = given.unwrap_or(&field.default);
        match field.tag {
            Some(tag) if field.tagged_versions.contains(ctx.version) => {
                if !field.is_default(value) {
                    tagged.push((tag, field, value));
                }
            }
            _ => write_field(field, value, ctx, out, false)
                .map_err(|fault| fault.in_field(field.key))?,
        }
    }

    if ctx.flexible {
        tagged.sort_by_key(|(tag, _, _)| *tag);
        put_uvarint(out, tagged.len() as u32);
        let mut payload = Vec::new();
        for (tag, field, value) in tagged {
            payload.clear();
            ctx.in_tagged.set(true);
            let written = write_field(field, value, ctx, &mut payload, true);
            ctx.in_tagged.set(false);
            written.map_err(|fault| fault.in_field(field.key))?;
            put_uvarint(out, tag);
            put_uvarint(
                out,
                length_u32(payload.len(), "a tagged field")
                    .map_err(|fault| fault.in_field(field.key))?,
            );
            out.extend_from_slice(&payload);
        }
    }
    Ok(())
}

fn write_field(
    field: &FieldSpec,
    value: &Value,
    ctx: &Ctx,
    out: &mut Vec<u8>,
    tagged: bool,
) -> Result<(), Fault> {
    let shape = Shape {
        nullable: field.nullable_versions.contains(ctx.version),
        compact: ctx.compact(field),
        tagged,
    };
    write_value(&field.field_type, shape, value, ctx, out)
}

/// How one value is laid out, beyond its type (as in `decode`).
#[derive(Clone, Copy)]
struct Shape {
    nullable: bool,
    compact: bool,
    tagged: bool,
}

fn write_value(
    field_type: &FieldType,
    shape: Shape,
    value: &Value,
    ctx: &Ctx,
    out: &mut Vec<u8>,
) -> Result<(), Fault> {
    match (field_type, value) {
        (
            FieldType::String
            | FieldType::Bytes
            | FieldType::Records
            | FieldType::Array(_)
            | FieldType::Struct(_),
            Value::Null,
        ) => {
            if !shape.nullable {
                return Err(Fault::invalid(format!(
                    "null, but the field is not nullable in version {}",
                    ctx.version
                )));
            }
            match field_type {
                FieldType::Struct(_) if shape.tagged => put_uvarint(out, 0),
                FieldType::Struct(_) => out.push(0xff),
                _ if shape.compact => put_uvarint(out, 0),
                FieldType::String => out.extend_from_slice(&(-1i16).to_be_bytes()),
                _ => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        (FieldType::Bool, Value::Bool(b)) => out.push(u8::from(*b)),
        (FieldType::Float64, Value::Float(f)) => out.extend_from_slice(&f.to_be_bytes()),
        (FieldType::Uuid, Value::Uuid(uuid)) => out.extend_from_slice(uuid),
        (int_type, Value::Int(i)) if int_type.int_range().is_some() => {
            write_int(int_type, *i, out)?
        }
        (FieldType::String, Value::Str(text)) => {
            if text.len() > i16::MAX as usize {
                return Err(Fault::invalid(format!(
                    "string of {} bytes is over 32767",
                    text.len()
                )));
            }
            write_length(text.len(), shape.compact, true, out)?;
            out.extend_from_slice(text.as_bytes());
        }
        (FieldType::Bytes | FieldType::Records, Value::Bytes(bytes)) => {
            write_length(bytes.len(), shape.compact, false, out)?;
            out.extend_from_slice(bytes);
        }
        (FieldType::Records, Value::Spliced(len)) => {
            if ctx.in_tagged.get() {
                return Err(Fault::invalid(
                    "spliced records inside a tagged field (only in-place records can be)",
                ));
            }
            write_length(*len, shape.compact, false, out)?;
            ctx.splices.borrow_mut().push((out.len(), *len));
        }
        (FieldType::Array(element), Value::Array(items)) => {
            write_length(items.len(), shape.compact, false, out)?;
            let element_shape = Shape {
                nullable: false,
                tagged: false,
                ..shape
            };
            for (index, item) in items.iter().enumerate() {
                write_value(element, element_shape, item, ctx, out)
                    .map_err(|fault| fault.at_index(index))?;
            }
        }
        (FieldType::Struct(spec), Value::Struct(_)) => {
            if shape.nullable {
                // Present: 1, as a varint in the tagged section and as an int8 in place.
                out.push(1);
            }
            write_struct(spec, value, ctx, out)?;
        }
        (field_type, value) => {
            return Err(Fault::invalid(format!(
                "expected {field_type}, got {}",
                value.kind()
            )));
        }
    }
    Ok(())
}

fn write_int(field_type: &FieldType, value: i64, out: &mut Vec<u8>) -> Result<(), Fault> {
    let (min, max) = field_type.int_range().unwrap_or((i64::MIN, i64::MAX));
    if value < min || value > max {
        return Err(Fault::invalid(format!(
            "{value} is out of range for {field_type}"
        )));
    }
    // In range, so the narrowing casts below keep the value.
    match field_type {
        FieldType::Int8 => out.push(value as i8 as u8),
        FieldType::Int16 => out.extend_from_slice(&(value as i16).to_be_bytes()),
        FieldType::Uint16 => out.extend_from_slice(&(value as u16).to_be_bytes()),
        FieldType::Int32 => out.extend_from_slice(&(value as i32).to_be_bytes()),
        FieldType::Uint32 => out.extend_from_slice(&(value as u32).to_be_bytes()),
        _ => out.extend_from_slice(&value.to_be_bytes()),
    }
    Ok(())
}

/// A length or count: compact (varint of length + 1), int16 (strings) or int32. Kafka
/// reads a compact length into an int32, so it too stays below 2^31.
fn write_length(len: usize, compact: bool, int16: bool, out: &mut Vec<u8>) -> Result<(), Fault> {
    if compact {
        match i32::try_from(len + 1) {
            Ok(len_plus_one) => put_uvarint(out, len_plus_one as u32),
            Err(_) => {
                return Err(Fault::invalid(format!(
                    "length {len} does not fit a compact length"
                )))
            }
        }
    } else if int16 {
        let len = i16::try_from(len)
            .map_err(|_| Fault::invalid(format!("length {len} does not fit an int16")))?;
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        let len = i32::try_from(len)
            .map_err(|_| Fault::invalid(format!("length {len} does not fit an int32")))?;
        out.extend_from_slice(&len.to_be_bytes());
    }
    Ok(())
}

fn length_u32(len: usize, what: &str) -> Result<u32, Fault> {
    u32::try_from(len)
        .map_err(|_| Fault::invalid(format!("{what} of {len} bytes does not fit 32 bits")))
}
