//! `cbtop inspect FILE`: metadata and tensor table of a GGUF file, as text or JSON.

use std::collections::BTreeMap;

use serde_json::json;

use super::args::InspectArgs;
use super::error::CliError;
use crate::gguf::{GgufFile, MetaValue};

/// Array items shown before an array is summarised.
const MAX_ITEMS: usize = 8;

pub fn run(a: InspectArgs) -> Result<(), CliError> {
    let f = GgufFile::open(&a.file).map_err(CliError::usage)?;
    let mut types: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &f.tensors {
        *types.entry(t.ty.name()).or_default() += 1;
    }
    let params: u64 = f.tensors.iter().map(|t| t.n_elements()).sum();
    if a.json {
        let metadata: serde_json::Map<String, serde_json::Value> = f
            .metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_json(Some(MAX_ITEMS))))
            .collect();
        let tensors: Vec<_> = f
            .tensors
            .iter()
            .map(|t| json!({"name": t.name, "type": t.ty.name(), "dims": t.dims, "offset": t.offset, "bytes": t.size}))
            .collect();
        let out = json!({
            "file": f.path, "version": f.version, "file_size": f.file_size(), "alignment": f.alignment,
            "data_offset": f.data_offset, "parameters": params, "tensor_types": types,
            "metadata": metadata, "tensors": tensors,
        });
        println!("{out}");
        return Ok(());
    }
    println!(
        "{}: GGUF v{}, {} bytes, alignment {}",
        f.path.display(),
        f.version,
        f.file_size(),
        f.alignment
    );
    println!(
        "{} parameters in {} tensors: {types:?}",
        params,
        f.tensors.len()
    );
    println!("\nmetadata ({} keys):", f.metadata.len());
    for (k, v) in f.metadata.iter() {
        let shown = match v {
            MetaValue::String(s) if s.len() > 80 => {
                format!("{:?}… ({} bytes)", &s[..s.floor_char_boundary(77)], s.len())
            }
            other => other.to_string(),
        };
        println!("  {k:<44} {shown}");
    }
    println!(
        "\n{:<36} {:<5} {:<22} {:>12} {:>12}",
        "tensor", "type", "dims", "offset", "bytes"
    );
    for t in &f.tensors {
        println!(
            "{:<36} {:<5} {:<22} {:>12} {:>12}",
            t.name,
            t.ty.name(),
            format!("{:?}", t.dims),
            t.offset,
            t.size
        );
    }
    Ok(())
}
