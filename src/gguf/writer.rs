//! Writing GGUF v3 files: used by `synth` and by tests that build files to feed the reader.

use std::io::Write;
use std::path::Path;

use super::format::{DEFAULT_ALIGNMENT, MAGIC};
use super::value::MetaValue;
use crate::quant::GgmlType;

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    /// The encoded data, or `None` when it is produced at write time (`write_with`).
    data: Option<Vec<u8>>,
    size: u64,
}

/// Collects metadata and tensors, then serialises them as a GGUF v3 file.
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<PendingTensor>,
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a metadata entry (kept in insertion order).
    pub fn meta(&mut self, key: &str, value: MetaValue) -> &mut Self {
        self.metadata.push((key.to_string(), value));
        self
    }

    /// Add a tensor; `dims` innermost first, `data` already encoded as `ty`.
    pub fn tensor(&mut self, name: &str, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> &mut Self {
        self.tensors.push(PendingTensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            ty,
            size: data.len() as u64,
            data: Some(data),
        });
        self
    }

    /// Add a tensor of `size` bytes whose data `write_with` asks for at write time, so a
    /// multi-gigabyte model never has to sit in memory whole.
    pub fn tensor_later(&mut self, name: &str, dims: &[u64], ty: GgmlType, size: u64) -> &mut Self {
        self.tensors.push(PendingTensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            ty,
            data: None,
            size,
        });
        self
    }

    fn alignment(&self) -> u64 {
        self.metadata
            .iter()
            .find(|(k, _)| k == "general.alignment")
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(DEFAULT_ALIGNMENT)
    }

    /// Serialise to bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out)
            .expect("writing to a Vec cannot fail");
        out
    }

    /// Write the file to `path`.
    pub fn write_file(&self, path: &Path) -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        self.write_to(&mut f)?;
        f.flush()
    }

    /// Serialise into any writer (every tensor must have its data).
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        self.write_with(w, |i| {
            Err(std::io::Error::other(format!(
                "tensor {} was added without data",
                self.tensors[i].name
            )))
        })
    }

    /// Serialise into any writer; `later(i)` produces the data of tensor `i` (in insertion
    /// order) for tensors added with `tensor_later`.
    pub fn write_with(
        &self,
        w: &mut impl Write,
        mut later: impl FnMut(usize) -> std::io::Result<Vec<u8>>,
    ) -> std::io::Result<()> {
        let align = self.alignment();
        let mut head = Vec::new();
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&3u32.to_le_bytes());
        head.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        head.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_string(&mut head, k);
            head.extend_from_slice(&v.type_id().to_le_bytes());
            put_value(&mut head, v);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            put_string(&mut head, &t.name);
            head.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                head.extend_from_slice(&d.to_le_bytes());
            }
            head.extend_from_slice(&t.ty.id().to_le_bytes());
            head.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + t.size).div_ceil(align) * align;
        }
        let data_start = (head.len() as u64).div_ceil(align) * align;
        head.resize(data_start as usize, 0);
        w.write_all(&head)?;
        let mut written = 0u64;
        for (i, (t, &off)) in self.tensors.iter().zip(&offsets).enumerate() {
            w.write_all(&vec![0u8; (off - written) as usize])?;
            match &t.data {
                Some(d) => w.write_all(d)?,
                None => {
                    let d = later(i)?;
                    if d.len() as u64 != t.size {
                        return Err(std::io::Error::other(format!(
                            "tensor {}: {} bytes produced, {} declared",
                            t.name,
                            d.len(),
                            t.size
                        )));
                    }
                    w.write_all(&d)?;
                }
            }
            written = off + t.size;
        }
        Ok(())
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.push(*x as u8),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(*x as u8),
        MetaValue::String(s) => put_string(out, s),
        MetaValue::Array(ety, items) => {
            out.extend_from_slice(&ety.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
    }
}
