//! A `generate` prompt's token ids: the text as it is, or with `--chat` a user's turn laid out
//! by the model's chat template (shared by the one-sequence and the batched run).

use super::args::GenerateArgs;
use super::error::CliError;
use crate::model::chat::{self, ChatTemplate};
use crate::model::Model;

/// The token ids of prompt `text`: with `--chat` a user's turn (after `--system`'s) laid out
/// by the model's chat template, the assistant's turn opened; special tokens are parsed.
pub(super) fn prompt_ids(
    a: &GenerateArgs,
    model: &Model,
    text: &str,
) -> Result<Vec<u32>, CliError> {
    if !a.chat {
        return Ok(model.tokenizer.encode(text, true));
    }
    let file = a.model_path.display();
    let template = ChatTemplate::of(model)
        .ok_or_else(|| {
            CliError::usage(format!(
                "--chat: {file} has no chat template ({})",
                chat::TEMPLATE_KEY
            ))
        })?
        .map_err(|e| CliError::usage(format!("--chat: {file}: {e}")))?;
    let turns = chat::conversation(a.system.as_deref(), text);
    let laid_out = template
        .render(&turns, true)
        .map_err(|e| CliError::usage(format!("--chat: {file}: {e}")))?;
    Ok(model.tokenizer.encode(&laid_out, true))
}
