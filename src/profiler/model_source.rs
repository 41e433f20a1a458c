//! Which model a profiling run uses: a GGUF file, or the embedded default — a synthetic model
//! of SmolLM2-135M's shape with Q4_K_M-placed random weights, built in memory in well under a
//! second. Either way the caller learns whether the weights are synthetic, so every output can
//! say so.

use std::path::Path;
use std::sync::Arc;

use crate::model::{LoadError, Model};
use crate::profile::Profile;
use crate::synth::{self, QuantMix, SYNTHETIC_KEY};

/// The embedded default's shape (a built-in profile), weight mix and seed.
pub const DEFAULT_SHAPE: &str = "smollm2-135m";
pub const DEFAULT_QUANT: QuantMix = QuantMix::Q4KM;
pub const DEFAULT_SEED: u64 = 0;

/// The prompt a run evaluates when none is given, headless and live (where decoding restarts
/// from it whenever the context fills).
pub const DEFAULT_PROMPT: &str = "The history of computing is a story of machines that got \
    faster every year, and of the people who measured exactly where the time went.";

/// The live view's default prompt for `model`: on a chat model (one with a chat template)
/// `DEFAULT_PROMPT` as a user's turn, laid out by the template with the assistant's turn
/// opened; else the text as it is. A template that fails to render is said in the returned
/// note (the text is then used as it is).
pub fn chat_default_prompt(model: &Model) -> (String, Option<String>) {
    use crate::model::chat::{conversation, ChatTemplate};
    let rendered = ChatTemplate::of(model)
        .map(|t| t.and_then(|t| t.render(&conversation(None, DEFAULT_PROMPT), true)));
    match rendered {
        None => (DEFAULT_PROMPT.to_string(), None),
        Some(Ok(text)) => (text, None),
        Some(Err(e)) => (
            DEFAULT_PROMPT.to_string(),
            Some(format!("the default prompt is raw text: {e}")),
        ),
    }
}

/// A loaded model and what the report says about where it came from.
pub struct ModelSource {
    pub model: Arc<Model>,
    /// `None` for the embedded default.
    pub path: Option<String>,
    pub synthetic: bool,
    pub file_size: u64,
}

impl ModelSource {
    /// Load `path`.
    pub fn file(path: &Path) -> Result<ModelSource, LoadError> {
        let model = Model::load(path)?;
        Ok(ModelSource::wrap(model, Some(path.display().to_string())))
    }

    /// Build the embedded default.
    pub fn embedded_default() -> Result<ModelSource, String> {
        let shape = Profile::shape(DEFAULT_SHAPE).map_err(|e| e.to_string())?;
        let bytes = synth::build(&shape, DEFAULT_QUANT, DEFAULT_SEED);
        let name = format!("embedded default (synthetic {DEFAULT_SHAPE})");
        let model = Model::from_bytes(&name, bytes).map_err(|e| e.to_string())?;
        Ok(ModelSource::wrap(model, None))
    }

    fn wrap(model: Model, path: Option<String>) -> ModelSource {
        let synthetic = model.file.metadata.get_bool(SYNTHETIC_KEY).unwrap_or(false);
        let file_size = model.file.file_size();
        ModelSource {
            model: Arc::new(model),
            path,
            synthetic,
            file_size,
        }
    }

    /// Room for `ctx` positions past the context the model was trained on, as llama.cpp's
    /// `-c` allows: the engines size their caches and RoPE tables from the model's context, so
    /// it is raised to `ctx`. Returns the warning to print, or None where `ctx` fits already
    /// (or the model is shared and cannot change).
    pub fn extend_context(&mut self, ctx: usize) -> Option<String> {
        let trained = self.model.config.context_length;
        if ctx <= trained {
            return None;
        }
        let model = Arc::get_mut(&mut self.model)?;
        model.config.context_length = ctx;
        Some(format!(
            "--ctx {ctx} is past the {trained} positions the model was trained on; positions \
             beyond {trained} run, but the model was not made for them"
        ))
    }

    /// The model as every output names it: its name and where it came from. Each output adds
    /// its own "synthetic weights" marker from `synthetic`.
    pub fn label(&self) -> String {
        match &self.path {
            Some(p) => format!("{} ({p})", self.model.name()),
            None => format!("{} (embedded default)", self.model.name()),
        }
    }
}
