//! The GGUF reader (header, metadata, tensor index) and the model built on it (configuration,
//! weights table, tokenizer): any bytes give a model or an error naming the file, never a
//! panic, and every tensor the reader accepts lies inside the file.
#![no_main]

use std::path::Path;

use cbtop::gguf::GgufFile;
use cbtop::model::Model;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let label = Path::new("fuzz.gguf");
    match GgufFile::from_bytes(label, data.to_vec()) {
        Ok(f) => {
            for t in &f.tensors {
                let bytes = f.tensor_data(t);
                assert_eq!(bytes.len() as u64, t.size);
                assert!(t.n_elements() > 0);
            }
            let _ = f.metadata.len();
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz.gguf: "), "{e}"),
    }
    if let Err(e) = Model::from_bytes("fuzz.gguf", data.to_vec()) {
        assert!(e.to_string().starts_with("fuzz.gguf: "), "{e}");
    }
});
