//! The GGUF reader on valid, malformed and random files: every validation error is produced by
//! a file built to trigger it, and no input makes the reader panic.

use std::path::Path;

use cbtop::gguf::{value_type as vt, GgufErrorKind as K, GgufFile, GgufWriter, MetaValue};
use cbtop::quant::GgmlType;
use proptest::prelude::*;

fn parse(bytes: Vec<u8>) -> Result<GgufFile, K> {
    GgufFile::from_bytes(Path::new("test.gguf"), bytes).map_err(|e| {
        assert!(
            e.to_string().starts_with("test.gguf: "),
            "error names the file: {e}"
        );
        e.kind
    })
}

/// A small valid file with every value type, a nested array, and two tensors.
fn valid() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.meta("general.architecture", MetaValue::String("llama".into()))
        .meta("u8", MetaValue::U8(1))
        .meta("i8", MetaValue::I8(-1))
        .meta("u16", MetaValue::U16(2))
        .meta("i16", MetaValue::I16(-2))
        .meta("u32", MetaValue::U32(3))
        .meta("i32", MetaValue::I32(-3))
        .meta("u64", MetaValue::U64(4))
        .meta("i64", MetaValue::I64(-4))
        .meta("f32", MetaValue::F32(0.5))
        .meta("f64", MetaValue::F64(0.25))
        .meta("bool", MetaValue::Bool(true))
        .meta(
            "nested",
            MetaValue::Array(
                vt::ARRAY,
                vec![
                    MetaValue::Array(vt::STRING, vec![MetaValue::String("a".into())]),
                    MetaValue::Array(vt::U32, vec![MetaValue::U32(7), MetaValue::U32(8)]),
                ],
            ),
        )
        .tensor("a", &[4, 2], GgmlType::F32, (0..32).collect())
        .tensor("b", &[32], GgmlType::Q8_0, vec![0; 34]);
    w
}

/// Raw little-endian byte builder for malformed files.
#[derive(Default)]
struct Raw(Vec<u8>);

impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw::default();
        r.0.extend_from_slice(b"GGUF");
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s);
        self
    }
    fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.str(key.as_bytes()).u32(vt::U32).u32(v)
    }
    fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name.as_bytes()).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    /// Pad to 32 and append `n` data bytes.
    fn data(&mut self, n: usize) -> Vec<u8> {
        let mut v = self.0.clone();
        v.resize(v.len().div_ceil(32) * 32 + n, 0);
        v
    }
}

#[test]
fn valid_file_round_trips() {
    let f = parse(valid().to_bytes()).unwrap();
    assert_eq!(f.version, 3);
    assert_eq!(f.metadata.len(), 13);
    assert_eq!(f.metadata.get_str("general.architecture"), Some("llama"));
    assert_eq!(f.metadata.get("i16"), Some(&MetaValue::I16(-2)));
    assert_eq!(f.metadata.get_f32("f64"), Some(0.25));
    assert_eq!(
        f.metadata.get("nested").unwrap().as_array().unwrap()[1]
            .as_array()
            .unwrap()[1],
        MetaValue::U32(8)
    );
    let a = f.tensor("a").unwrap();
    assert_eq!(
        (a.dims.clone(), a.ty, a.size),
        (vec![4, 2], GgmlType::F32, 32)
    );
    assert_eq!(f.tensor_data(a), (0..32).collect::<Vec<u8>>());
    let b = f.tensor("b").unwrap();
    assert_eq!(b.offset % 32, 0);
    assert_eq!(f.data_offset % 32, 0);
}

#[test]
fn version_2_and_custom_alignment_are_read() {
    let mut raw = Raw::header(2, 1, 1);
    raw.kv_u32("general.alignment", 64)
        .tensor("t", &[8], GgmlType::F32.id(), 0);
    let mut bytes = raw.0.clone();
    bytes.resize(bytes.len().div_ceil(64) * 64 + 32, 0);
    let f = parse(bytes).unwrap();
    assert_eq!((f.version, f.alignment, f.data_offset % 64), (2, 64, 0));
}

#[test]
fn conformance_and_real_model_files_open() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conformance/models");
    for e in std::fs::read_dir(dir).unwrap() {
        let f = GgufFile::open(&e.unwrap().path()).unwrap();
        assert!(f.tensors.len() >= 21);
    }
}

#[test]
fn missing_file_is_an_io_error() {
    let e = GgufFile::open(Path::new("/nonexistent/x.gguf")).unwrap_err();
    assert!(matches!(e.kind, K::Io(_)));
    assert!(e.to_string().contains("/nonexistent/x.gguf"));
}

#[test]
fn bad_magic() {
    let mut b = valid().to_bytes();
    b[0] = b'X';
    assert!(matches!(parse(b), Err(K::BadMagic(_))));
}

#[test]
fn unsupported_versions() {
    for v in [0, 1, 4, u32::MAX] {
        assert_eq!(
            parse(Raw::header(v, 0, 0).0).err(),
            Some(K::UnsupportedVersion(v))
        );
    }
}

#[test]
fn truncated_anywhere_is_an_error() {
    let b = valid().to_bytes();
    for cut in 0..b.len() {
        let r = parse(b[..cut].to_vec());
        assert!(r.is_err(), "cut at {cut} parsed");
    }
    assert!(matches!(parse(b[..10].to_vec()), Err(K::Truncated(_))));
}

#[test]
fn counts_beyond_the_file() {
    assert!(matches!(
        parse(Raw::header(3, u64::MAX, 0).0),
        Err(K::CountTooLarge { .. })
    ));
    assert!(matches!(
        parse(Raw::header(3, 0, 1 << 40).0),
        Err(K::CountTooLarge { .. })
    ));
    let mut r = Raw::header(3, 0, 1);
    r.str(b"arr").u32(vt::ARRAY).u32(vt::U64).u64(1 << 50);
    assert!(matches!(parse(r.0), Err(K::CountTooLarge { .. })));
}

#[test]
fn string_longer_than_file() {
    let mut r = Raw::header(3, 0, 1);
    r.u64(1 << 60);
    r.0.extend_from_slice(&[0; 16]);
    assert!(matches!(parse(r.0), Err(K::StringTooLong { .. })));
}

#[test]
fn invalid_utf8_key() {
    let mut r = Raw::header(3, 0, 1);
    r.str(&[0xff, 0xfe]).u32(vt::U8);
    r.0.push(0);
    assert!(matches!(parse(r.0), Err(K::InvalidUtf8(_))));
}

#[test]
fn unknown_value_types() {
    let mut r = Raw::header(3, 0, 1);
    r.str(b"k").u32(13).u64(0);
    assert_eq!(
        parse(r.0).err(),
        Some(K::UnknownValueType {
            key: "k".into(),
            ty: 13
        })
    );
    let mut r = Raw::header(3, 0, 1);
    r.str(b"k").u32(vt::ARRAY).u32(99).u64(0);
    assert_eq!(
        parse(r.0).err(),
        Some(K::UnknownValueType {
            key: "k".into(),
            ty: 99
        })
    );
}

#[test]
fn nesting_too_deep() {
    let mut r = Raw::header(3, 0, 1);
    r.str(b"deep").u32(vt::ARRAY);
    for _ in 0..6 {
        r.u32(vt::ARRAY).u64(1);
    }
    r.0.extend_from_slice(&[0; 64]);
    assert_eq!(parse(r.0).err(), Some(K::NestingTooDeep("deep".into())));
}

#[test]
fn duplicate_key() {
    let mut r = Raw::header(3, 0, 2);
    r.kv_u32("k", 1).kv_u32("k", 2);
    assert_eq!(parse(r.0).err(), Some(K::DuplicateKey("k".into())));
}

#[test]
fn alignment_checks() {
    let mut r = Raw::header(3, 0, 1);
    r.kv_u32("general.alignment", 24);
    assert_eq!(parse(r.0).err(), Some(K::BadAlignment(24)));
    let mut r = Raw::header(3, 0, 1);
    r.kv_u32("general.alignment", 0);
    assert_eq!(parse(r.0).err(), Some(K::BadAlignment(0)));
    let mut r = Raw::header(3, 0, 1);
    r.str(b"general.alignment").u32(vt::STRING).str(b"32");
    assert!(matches!(parse(r.0), Err(K::WrongValueType { .. })));
}

#[test]
fn duplicate_tensor() {
    let mut r = Raw::header(3, 2, 0);
    r.tensor("t", &[8], 0, 0).tensor("t", &[8], 0, 32);
    assert_eq!(
        parse(r.data(64)).err(),
        Some(K::DuplicateTensor("t".into()))
    );
}

#[test]
fn bad_dimension_counts_and_shapes() {
    for n in [0u32, 5] {
        let mut r = Raw::header(3, 1, 0);
        r.str(b"t").u32(n);
        r.0.extend_from_slice(&[0; 64]);
        assert_eq!(
            parse(r.0).err(),
            Some(K::BadDimCount {
                tensor: "t".into(),
                n_dims: n
            })
        );
    }
    let mut r = Raw::header(3, 1, 0);
    r.tensor("t", &[8, 0], 0, 0);
    assert!(matches!(parse(r.data(32)), Err(K::BadShape { .. })));
    let mut r = Raw::header(3, 1, 0);
    r.tensor("t", &[1 << 32, 1 << 32], 0, 0);
    assert!(matches!(parse(r.data(32)), Err(K::BadShape { .. })));
}

#[test]
fn unknown_tensor_type() {
    for id in [4u32, 16, 39, 1 << 20] {
        let mut r = Raw::header(3, 1, 0);
        r.tensor("t", &[32], id, 0);
        assert_eq!(
            parse(r.data(64)).err(),
            Some(K::UnknownTensorType {
                tensor: "t".into(),
                id
            })
        );
    }
}

#[test]
fn row_not_a_block_multiple() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("t", &[33, 2], GgmlType::Q4_0.id(), 0);
    assert!(matches!(
        parse(r.data(64)),
        Err(K::NotBlockMultiple { ne0: 33, .. })
    ));
}

#[test]
fn misaligned_offset() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("t", &[8], 0, 4);
    assert!(matches!(
        parse(r.data(64)),
        Err(K::Misaligned { offset: 4, .. })
    ));
}

#[test]
fn tensor_past_end_of_file() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("t", &[8], 0, 0);
    assert!(matches!(parse(r.data(31)), Err(K::OutOfFile { .. })));
    let mut r = Raw::header(3, 1, 0);
    r.tensor("t", &[8], 0, u64::MAX - 31);
    assert!(matches!(parse(r.data(64)), Err(K::OutOfFile { .. })));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(bytes);
    }

    #[test]
    fn random_bytes_after_magic_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..512), v in 2u32..4) {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&v.to_le_bytes());
        b.extend_from_slice(&tail);
        let _ = parse(b);
    }

    #[test]
    fn mutated_valid_files_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>()) {
        let mut b = valid().to_bytes();
        for (i, v) in edits {
            let n = b.len();
            b[i % n] = v;
        }
        let n = b.len();
        b.truncate(n - cut % 16);
        if let Ok(f) = parse(b) {
            for t in &f.tensors {
                assert_eq!(f.tensor_data(t).len() as u64, t.size);
            }
        }
    }
}
