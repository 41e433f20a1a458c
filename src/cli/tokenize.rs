//! `cbtop tokenize --model-path FILE TEXT`: token ids and pieces of a text. Device-independent:
//! only the tokenizer is read from the file (no weights, no engine), so it takes no `--device`,
//! `--numerics` or `--threads`.

use serde_json::json;

use super::args::TokenizeArgs;
use super::error::CliError;
use crate::gguf::GgufFile;
use crate::model::tokenizer::Tokenizer;

pub fn run(a: TokenizeArgs) -> Result<(), CliError> {
    let f = GgufFile::open(&a.model_path).map_err(CliError::usage)?;
    let tok = Tokenizer::from_gguf(&f)
        .map_err(|e| CliError::usage(format!("{}: {e}", a.model_path.display())))?;
    let ids = tok.encode(&a.text, !a.no_parse_special);
    let pieces: Vec<String> = ids
        .iter()
        .map(|&id| String::from_utf8_lossy(&tok.token_bytes(id)).into_owned())
        .collect();
    if a.json {
        println!("{}", json!({"ids": ids, "pieces": pieces}));
    } else {
        for (id, p) in ids.iter().zip(&pieces) {
            println!("{id:>8} {p:?}");
        }
    }
    Ok(())
}
