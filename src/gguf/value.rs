//! Metadata values of a GGUF file: the thirteen value types, typed accessors, and the ordered
//! key/value table.

use std::collections::HashMap;
use std::fmt;

/// GGUF value type ids.
pub mod ty {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

/// One metadata value. Arrays are homogeneous in the file; they may nest.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    /// Element type id and the elements.
    Array(u32, Vec<MetaValue>),
}

impl MetaValue {
    /// Any non-negative integer value as u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v as u64),
            MetaValue::U16(v) => Some(v as u64),
            MetaValue::U32(v) => Some(v as u64),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer value as i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetaValue::I8(v) => Some(v as i64),
            MetaValue::I16(v) => Some(v as i64),
            MetaValue::I32(v) => Some(v as i64),
            MetaValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// Any float value (or integer) as f32.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            MetaValue::F32(v) => Some(v),
            MetaValue::F64(v) => Some(v as f32),
            _ => self.as_i64().map(|v| v as f32),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(_, v) => Some(v),
            _ => None,
        }
    }

    /// The GGUF type id of this value.
    pub fn type_id(&self) -> u32 {
        match self {
            MetaValue::U8(_) => ty::U8,
            MetaValue::I8(_) => ty::I8,
            MetaValue::U16(_) => ty::U16,
            MetaValue::I16(_) => ty::I16,
            MetaValue::U32(_) => ty::U32,
            MetaValue::I32(_) => ty::I32,
            MetaValue::U64(_) => ty::U64,
            MetaValue::I64(_) => ty::I64,
            MetaValue::F32(_) => ty::F32,
            MetaValue::F64(_) => ty::F64,
            MetaValue::Bool(_) => ty::BOOL,
            MetaValue::String(_) => ty::STRING,
            MetaValue::Array(..) => ty::ARRAY,
        }
    }

    /// Name of a value type id, for messages and `inspect`.
    pub fn type_name(id: u32) -> &'static str {
        match id {
            ty::U8 => "u8",
            ty::I8 => "i8",
            ty::U16 => "u16",
            ty::I16 => "i16",
            ty::U32 => "u32",
            ty::I32 => "i32",
            ty::F32 => "f32",
            ty::BOOL => "bool",
            ty::STRING => "string",
            ty::ARRAY => "array",
            ty::U64 => "u64",
            ty::I64 => "i64",
            ty::F64 => "f64",
            _ => "unknown",
        }
    }

    /// A JSON rendering; long arrays are summarised when `max_items` is given.
    pub fn to_json(&self, max_items: Option<usize>) -> serde_json::Value {
        use serde_json::{json, Value};
        match self {
            MetaValue::U8(v) => json!(v),
            MetaValue::I8(v) => json!(v),
            MetaValue::U16(v) => json!(v),
            MetaValue::I16(v) => json!(v),
            MetaValue::U32(v) => json!(v),
            MetaValue::I32(v) => json!(v),
            MetaValue::U64(v) => json!(v),
            MetaValue::I64(v) => json!(v),
            MetaValue::F32(v) => json!(v),
            MetaValue::F64(v) => json!(v),
            MetaValue::Bool(v) => json!(v),
            MetaValue::String(s) => json!(s),
            MetaValue::Array(t, items) => match max_items {
                Some(m) if items.len() > m => json!({
                    "type": format!("array[{}]", MetaValue::type_name(*t)),
                    "len": items.len(),
                    "head": items.iter().take(m).map(|v| v.to_json(Some(m))).collect::<Vec<Value>>(),
                }),
                _ => Value::Array(items.iter().map(|v| v.to_json(max_items)).collect()),
            },
        }
    }
}

impl fmt::Display for MetaValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaValue::String(s) => write!(f, "{s:?}"),
            MetaValue::Array(t, items) => {
                write!(f, "[{} x {}]", items.len(), MetaValue::type_name(*t))
            }
            other => write!(f, "{}", other.to_json(None)),
        }
    }
}

/// The key/value table in file order, with lookup by key.
#[derive(Clone, Debug, Default)]
pub struct Metadata {
    entries: Vec<(String, MetaValue)>,
    index: HashMap<String, usize>,
}

impl Metadata {
    /// Insert a key; returns false (and keeps the first) if the key was already present.
    pub fn insert(&mut self, key: String, value: MetaValue) -> bool {
        if self.index.contains_key(&key) {
            return false;
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        true
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(MetaValue::as_str)
    }

    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(MetaValue::as_u64)
    }

    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.get(key).and_then(MetaValue::as_f32)
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(MetaValue::as_bool)
    }

    /// Entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &MetaValue)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
