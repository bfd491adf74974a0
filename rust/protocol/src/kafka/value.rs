//! The dynamic value of a Kafka message: what the codec reads into and writes from.

/// A message, or any part of one.
///
/// | schema type                          | value                    |
/// |--------------------------------------|--------------------------|
/// | `bool`                               | `Bool`                   |
/// | `int8` `int16` `uint16` `int32` `uint32` `int64` | `Int`        |
/// | `float64`                            | `Float`                  |
/// | `string`                             | `Str`                    |
/// | `bytes`, `records` (a record set, opaque here) | `Bytes`        |
/// | `uuid`                               | `Uuid` (16 raw bytes)    |
/// | `[]T`                                | `Array`                  |
/// | a struct                             | `Struct`, fields by snake_case key in schema order |
///
/// A null string, bytes, records, array or struct is `Null`.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Uuid([u8; 16]),
    Array(Vec<Value>),
    Struct(Vec<(&'static str, Value)>),
    /// A record set of this many bytes that the caller sends itself, after the encoded
    /// bytes before it (with `sendfile`, straight from a segment file): the encoder writes
    /// only its length prefix and says where the bytes go
    /// ([`MessageSpec::encode_into_spliced`](super::MessageSpec::encode_into_spliced)).
    /// Only for an in-place `records` field; never read by the decoder.
    Spliced(usize),
    /// A record set read in place: the `len` bytes at `offset` of the decoded input, left
    /// there rather than copied ([`decode_request_in_place`](super::decode_request_in_place)).
    /// Only from the decoder, for a `records` field; never encoded.
    InPlace {
        offset: usize,
        len: usize,
    },
}

impl Value {
    /// The field `key` of a struct; `None` for a missing field or a value that is not a
    /// struct.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Sets the field `key` of a struct, replacing or appending it; returns `false` (and
    /// changes nothing) when `self` is not a struct.
    pub fn set(&mut self, key: &'static str, value: Value) -> bool {
        let Value::Struct(fields) = self else {
            return false;
        };
        match fields.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => *slot = value,
            None => fields.push((key, value)),
        }
        true
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    /// A short name of the variant, for error messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::Bytes(_) => "bytes",
            Value::Uuid(_) => "a uuid",
            Value::Array(_) => "an array",
            Value::Struct(_) => "a struct",
            Value::Spliced(_) => "spliced records",
            Value::InPlace { .. } => "records read in place",
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(v.into())
            }
        }
    )*};
}
from_int!(i8, i16, i32, i64, u8, u16, u32);

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Str(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Bytes(v)
    }
}

impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Value {
        Value::Array(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::Value;

    #[test]
    fn get_and_set_struct_fields() {
        let mut value = Value::Struct(vec![("error_code", 0i16.into())]);
        assert_eq!(value.get("error_code"), Some(&Value::Int(0)));
        assert_eq!(value.get("missing"), None);
        assert!(value.set("error_code", 35i16.into()));
        assert!(value.set("throttle_time_ms", 10i32.into()));
        assert_eq!(
            value,
            Value::Struct(vec![
                ("error_code", Value::Int(35)),
                ("throttle_time_ms", Value::Int(10))
            ])
        );
        assert!(!Value::Null.set("x", Value::Null));
        assert_eq!(Value::from(None::<&str>), Value::Null);
        assert_eq!(Value::from(Some("a")).as_str(), Some("a"));
    }
}
