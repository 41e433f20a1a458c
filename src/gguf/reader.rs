//! Parsing and validating a GGUF v2/v3 file held in memory (a memory map or a byte vector).
//!
//! Every count and length read from the file is checked against the bytes that remain before
//! anything is allocated from it, so a hostile or truncated file yields an error, never a panic
//! or a huge allocation. A metadata value takes more memory parsed (`MetaValue`, 32 bytes) than
//! encoded (1 byte for a u8), so the values of all arrays together are also capped
//! (`MAX_META_VALUES`, several times what the largest tokenizer needs): parsing a file never
//! allocates more than a small multiple of its size, nor more than a few hundred MB.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::error::{GgufError, GgufErrorKind as K};
use super::format::{DEFAULT_ALIGNMENT, MAGIC, MAX_META_VALUES};
use super::value::{ty, MetaValue, Metadata};
use crate::quant::GgmlType;

/// Deepest array nesting accepted (arrays of arrays of ...).
const MAX_NESTING: usize = 4;

/// One tensor's entry in the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions, innermost first (`dims[0]` is the row length), as GGUF stores them.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Offset relative to the start of the data section.
    pub offset: u64,
    /// Size of the data in bytes.
    pub size: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Row length (innermost dimension).
    pub fn ne0(&self) -> usize {
        self.dims[0] as usize
    }

    /// Number of rows (product of the outer dimensions).
    pub fn n_rows(&self) -> usize {
        self.dims[1..].iter().product::<u64>() as usize
    }
}

/// The bytes behind a parsed file.
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A validated GGUF file: metadata, tensor index, and access to tensor data.
pub struct GgufFile {
    pub path: PathBuf,
    pub version: u32,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_offset: u64,
    bytes: Bytes,
    /// The file's bytes copied into memory backed by huge pages (`prefault`), read instead of
    /// the map once there.
    held: std::sync::OnceLock<memmap2::Mmap>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("metadata_keys", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Memory-map and validate `path`.
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let err = |kind| GgufError {
            file: path.to_path_buf(),
            kind,
        };
        let file = std::fs::File::open(path).map_err(|e| err(K::Io(e.to_string())))?;
        let meta = file.metadata().map_err(|e| err(K::Io(e.to_string())))?;
        if !meta.is_file() {
            return Err(err(K::Io("not a regular file".into())));
        }
        // SAFETY: the map is read-only; cbtop does not modify model files while they are open,
        // and a file truncated underneath us is outside what any mmap-based reader can guard.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| err(K::Io(e.to_string())))?;
        Self::parse(path, Bytes::Mapped(map))
    }

    /// Validate an in-memory file; `label` names it in errors.
    pub fn from_bytes(label: &Path, bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        Self::parse(label, Bytes::Owned(bytes))
    }

    fn parse(path: &Path, bytes: Bytes) -> Result<GgufFile, GgufError> {
        let parsed = Parser {
            buf: bytes.as_slice(),
            pos: 0,
            values: 0,
        }
        .file();
        match parsed {
            Ok((version, metadata, tensors, alignment, data_offset)) => Ok(GgufFile {
                path: path.to_path_buf(),
                version,
                metadata,
                tensors,
                alignment,
                data_offset,
                bytes,
                held: std::sync::OnceLock::new(),
            }),
            Err(kind) => Err(GgufError {
                file: path.to_path_buf(),
                kind,
            }),
        }
    }

    /// File size in bytes.
    pub fn file_size(&self) -> u64 {
        self.bytes.as_slice().len() as u64
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Map every page of the file now, so the first pass over the weights does not take a
    /// page fault per page it reads. The CPU engine reads its weights straight from memory on
    /// every token, and its first forward pass (a timed prefill under `--timing off`)
    /// otherwise paid for mapping them (docs/measurements/cpu-engine.md); llama-bench's
    /// warm-up run keeps that out of its figures, so ours must too. On Linux, with `copy`, the
    /// file is copied into anonymous memory advised to huge pages (`hold_in_huge_pages`),
    /// else mapped in one `MADV_POPULATE_READ` call; elsewhere (or on a kernel before 5.14)
    /// one byte of each page is read. Held in memory: a no-op. The copy is memory the kernel
    /// cannot reclaim as it can the map's page cache: the caller asks for it only where the
    /// system has room.
    pub fn prefault(&self, copy: bool) {
        let Bytes::Mapped(map) = &self.bytes else {
            return;
        };
        #[cfg(target_os = "linux")]
        if self.held.get().is_some() || (copy && self.hold_in_huge_pages(map)) {
            return;
        }
        #[cfg(not(target_os = "linux"))]
        let _ = copy;
        #[cfg(target_os = "linux")]
        if map.advise(memmap2::Advice::PopulateRead).is_ok() {
            return;
        }
        const PAGE: usize = 4096;
        let sum = map
            .iter()
            .step_by(PAGE)
            .fold(0u8, |a, &b| a.wrapping_add(b));
        std::hint::black_box(sum);
    }

    /// The file's bytes copied into anonymous memory advised to huge pages, read from then on
    /// instead of the map; false (nothing changed) where the kernel refuses either. A decode
    /// step reads every weight once: through the map's 4 KB pages that is a page-table walk
    /// every 4 KB, where a 2 MB page covers 512 of them. The map's own page-table entries
    /// are dropped after the copy, so the file's pages are not counted twice in the RSS.
    #[cfg(target_os = "linux")]
    fn hold_in_huge_pages(&self, map: &memmap2::Mmap) -> bool {
        let Ok(mut anon) = memmap2::MmapMut::map_anon(map.len()) else {
            return false;
        };
        if anon.advise(memmap2::Advice::HugePage).is_err() {
            return false;
        }
        anon.copy_from_slice(map);
        let Ok(held) = anon.make_read_only() else {
            return false;
        };
        if self.held.set(held).is_err() {
            return false;
        }
        // SAFETY: the map is a read-only shared file mapping that nothing reads from now on
        // (`data` returns the copy); a later read would fault the same bytes back in.
        let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        true
    }

    /// The file's bytes: the copy `prefault` made, else the map's (or the owned buffer's).
    fn data(&self) -> &[u8] {
        self.held.get().map_or(self.bytes.as_slice(), |m| &m[..])
    }

    /// The whole file's bytes.
    pub fn tensor_data_raw(&self) -> &[u8] {
        self.data()
    }

    /// The bytes of a tensor from this file's index (validated to lie inside the file).
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let start = (self.data_offset + t.offset) as usize;
        &self.data()[start..start + t.size as usize]
    }
}

type Parsed = (u32, Metadata, Vec<TensorInfo>, u64, u64);

struct Parser<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Array elements read so far (against `MAX_META_VALUES`).
    values: u64,
}

impl<'a> Parser<'a> {
    fn left(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8], K> {
        if (n as u64) > self.left() {
            return Err(K::Truncated(what()));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], K> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, K> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, K> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of items each at least `min_size` bytes, bounded by the bytes left.
    fn count(&mut self, min_size: u64, what: &dyn Fn() -> String) -> Result<usize, K> {
        let n = self.u64(what)?;
        if n.checked_mul(min_size).is_none_or(|b| b > self.left()) {
            return Err(K::CountTooLarge {
                what: what(),
                count: n,
            });
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, K> {
        let len = self.u64(what)?;
        if len > self.left() {
            return Err(K::StringTooLong {
                what: what(),
                len,
                left: self.left(),
            });
        }
        let bytes = self.take(len as usize, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| K::InvalidUtf8(what()))
    }

    fn file(mut self) -> Result<Parsed, K> {
        let magic: [u8; 4] = self.array(&|| "the header".into())?;
        if &magic != MAGIC {
            return Err(K::BadMagic(magic));
        }
        let version = self.u32(&|| "the header".into())?;
        if !(2..=3).contains(&version) {
            return Err(K::UnsupportedVersion(version));
        }
        // A tensor entry is at least 8 (name length) + 4 (dims) + 8 (one dim) + 4 + 8 bytes.
        let n_tensors = self.count(32, &|| "tensor".into())?;
        // A key/value pair is at least 8 (key length) + 4 (type) + 1 byte.
        let n_kv = self.count(13, &|| "metadata key".into())?;

        let mut metadata = Metadata::default();
        for i in 0..n_kv {
            let key = self.string(&|| format!("metadata key #{i}"))?;
            let vty = self.u32(&|| format!("the type of metadata key {key:?}"))?;
            let value = self.value(&key, vty, 0)?;
            if !metadata.insert(key.clone(), value) {
                return Err(K::DuplicateKey(key));
            }
        }

        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => {
                let a = v.as_u64().ok_or_else(|| K::WrongValueType {
                    key: "general.alignment".into(),
                    found: MetaValue::type_name(v.type_id()),
                    expected: "an unsigned integer",
                })?;
                if a == 0 || !a.is_power_of_two() || a > 65536 {
                    return Err(K::BadAlignment(a));
                }
                a
            }
        };

        let mut tensors = Vec::with_capacity(n_tensors);
        let mut names = HashSet::with_capacity(n_tensors);
        for i in 0..n_tensors {
            let t = self.tensor_info(i, alignment)?;
            if !names.insert(t.name.clone()) {
                return Err(K::DuplicateTensor(t.name));
            }
            tensors.push(t);
        }

        let data_offset = (self.pos as u64).div_ceil(alignment) * alignment;
        let len = self.buf.len() as u64;
        for t in &tensors {
            let start = data_offset.checked_add(t.offset);
            let end = start.and_then(|s| s.checked_add(t.size));
            match (start, end) {
                (Some(_), Some(end)) if end <= len => {}
                _ => {
                    return Err(K::OutOfFile {
                        tensor: t.name.clone(),
                        start: data_offset.saturating_add(t.offset),
                        end: data_offset.saturating_add(t.offset).saturating_add(t.size),
                        len,
                    })
                }
            }
        }
        // Two tensors sharing bytes: one of them is not what its entry says it is.
        let mut by_offset: Vec<&TensorInfo> = tensors.iter().collect();
        by_offset.sort_by_key(|t| t.offset);
        for w in by_offset.windows(2) {
            if w[1].offset < w[0].offset + w[0].size {
                return Err(K::Overlap {
                    tensor: w[1].name.clone(),
                    other: w[0].name.clone(),
                    start: data_offset + w[1].offset,
                    other_end: data_offset + w[0].offset + w[0].size,
                });
            }
        }
        Ok((version, metadata, tensors, alignment, data_offset))
    }

    fn value(&mut self, key: &str, vty: u32, depth: usize) -> Result<MetaValue, K> {
        let what = || format!("the value of metadata key {key:?}");
        Ok(match vty {
            ty::U8 => MetaValue::U8(self.array::<1>(&what)?[0]),
            ty::I8 => MetaValue::I8(self.array::<1>(&what)?[0] as i8),
            ty::U16 => MetaValue::U16(u16::from_le_bytes(self.array(&what)?)),
            ty::I16 => MetaValue::I16(i16::from_le_bytes(self.array(&what)?)),
            ty::U32 => MetaValue::U32(self.u32(&what)?),
            ty::I32 => MetaValue::I32(i32::from_le_bytes(self.array(&what)?)),
            ty::U64 => MetaValue::U64(self.u64(&what)?),
            ty::I64 => MetaValue::I64(i64::from_le_bytes(self.array(&what)?)),
            ty::F32 => MetaValue::F32(f32::from_le_bytes(self.array(&what)?)),
            ty::F64 => MetaValue::F64(f64::from_le_bytes(self.array(&what)?)),
            ty::BOOL => MetaValue::Bool(self.array::<1>(&what)?[0] != 0),
            ty::STRING => MetaValue::String(self.string(&what)?),
            ty::ARRAY => {
                if depth >= MAX_NESTING {
                    return Err(K::NestingTooDeep(key.to_string()));
                }
                let ety = self.u32(&what)?;
                let min = min_value_size(ety).ok_or_else(|| K::UnknownValueType {
                    key: key.to_string(),
                    ty: ety,
                })?;
                let n = self.count(min, &|| format!("array of metadata key {key:?}"))?;
                self.values += n as u64;
                if self.values > MAX_META_VALUES {
                    return Err(K::TooManyValues(key.to_string()));
                }
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(key, ety, depth + 1)?);
                }
                MetaValue::Array(ety, items)
            }
            other => {
                return Err(K::UnknownValueType {
                    key: key.to_string(),
                    ty: other,
                })
            }
        })
    }

    fn tensor_info(&mut self, i: usize, alignment: u64) -> Result<TensorInfo, K> {
        let name = self.string(&|| format!("the name of tensor #{i}"))?;
        let what = || format!("the entry of tensor {name:?}");
        let n_dims = self.u32(&what)?;
        if !(1..=4).contains(&n_dims) {
            return Err(K::BadDimCount {
                tensor: name,
                n_dims,
            });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(self.u64(&what)?);
        }
        let type_id = self.u32(&what)?;
        let offset = self.u64(&what)?;
        let bad_shape = || K::BadShape {
            tensor: name.clone(),
            dims: dims.clone(),
        };
        let n_elements = dims
            .iter()
            .try_fold(
                1u64,
                |acc, &d| if d == 0 { None } else { acc.checked_mul(d) },
            )
            .filter(|&n| n <= usize::MAX as u64 / 4)
            .ok_or_else(bad_shape)?;
        let ty = GgmlType::from_id(type_id).ok_or_else(|| K::UnknownTensorType {
            tensor: name.clone(),
            id: type_id,
        })?;
        if dims[0] % ty.block_size() as u64 != 0 {
            return Err(K::NotBlockMultiple {
                tensor: name,
                ty,
                ne0: dims[0],
                block: ty.block_size(),
            });
        }
        let size = (n_elements / ty.block_size() as u64)
            .checked_mul(ty.block_bytes() as u64)
            .ok_or_else(bad_shape)?;
        if offset % alignment != 0 {
            return Err(K::Misaligned {
                tensor: name,
                offset,
                alignment,
            });
        }
        Ok(TensorInfo {
            name,
            dims,
            ty,
            offset,
            size,
        })
    }
}

/// Smallest encoded size of a value of type `vty`, or `None` for unknown types.
fn min_value_size(vty: u32) -> Option<u64> {
    Some(match vty {
        ty::U8 | ty::I8 | ty::BOOL => 1,
        ty::U16 | ty::I16 => 2,
        ty::U32 | ty::I32 | ty::F32 => 4,
        ty::U64 | ty::I64 | ty::F64 | ty::STRING => 8,
        ty::ARRAY => 12,
        _ => return None,
    })
}
