//! The CPU engine: a model, its KV cache and the forward pass's scratch buffers, evaluating
//! tokens after what is cached (a whole prompt at once, or one at a time). The reference the
//! GPU engine (`cuda::CudaEngine`) is checked against.

use std::sync::Arc;

use super::forward::{self, Scratch};
use super::kv_cache::KvCache;
use super::repack::Repacked;
use crate::brick::Recorder;
use crate::engine::error::EngineError;
use crate::engine::options::{LogitsFor, Numerics};
use crate::model::Model;

/// A model with a KV cache, ready to evaluate tokens on the CPU.
pub struct CpuEngine {
    model: Arc<Model>,
    kv: KvCache,
    /// Boxed: `Backend` holds a `CpuEngine` by value beside a boxed CUDA engine.
    scratch: Box<Scratch>,
    numerics: Numerics,
    /// The repacked Q4_0/Q4_1/Q8_0 matrices under `fast` numerics.
    repacked: Option<Arc<Repacked>>,
}

impl CpuEngine {
    /// The weight bytes a decode step reads, and the most one brick of one layer reads (the memory
    /// probe's model-sized and matrix-sized buffers, `brick::peaks::cpu_read_bandwidth`).
    pub fn weight_bytes_per_token(&self) -> (usize, usize) {
        let shapes = crate::brick::cost::Shapes::new(&self.model.config, &self.model.weights);
        (
            shapes.weight_bytes_per_token(),
            shapes.largest_weight_bytes(),
        )
    }

    /// An engine with room for `ctx` positions (capped at the model's context length).
    pub fn new(model: Arc<Model>, ctx: usize) -> CpuEngine {
        let c = &model.config;
        let ctx = ctx.clamp(1, c.context_length);
        let kv = KvCache::new(c.n_layers, c.kv_dim(), ctx);
        CpuEngine {
            model,
            kv,
            scratch: Box::default(),
            numerics: Numerics::Exact,
            repacked: None,
        }
    }

    /// The engine with `numerics`: `fast` repacks the Q4_0, Q4_1 and Q8_0 matrices (`repack`) and
    /// takes their products on kernels that reorder float sums (`quant::x86::fast_rows`);
    /// everything else stays the reference.
    pub fn with_numerics(mut self, numerics: Numerics) -> CpuEngine {
        self.numerics = numerics;
        self.repacked = match numerics {
            Numerics::Fast => Some(Arc::new(Repacked::build(&self.model.weights))),
            Numerics::Exact => None,
        };
        self
    }

    /// What repacking the weights for `fast` numerics cost: bytes held and seconds taken (None
    /// under `exact`).
    pub fn repacked(&self) -> Option<(usize, f64)> {
        self.repacked.as_ref().map(|r| (r.bytes, r.seconds))
    }

    /// The numerics the engine runs with (`exact` unless `with_numerics` said otherwise).
    /// Name the greedy pick's kernel as the `sample` brick's (when `rec` records).
    pub fn note_sample(&mut self, rec: &mut Recorder) {
        let name = "ops::argmax (portable)";
        let sample = crate::brick::BrickId::Sample;
        self.scratch.kernels.op(rec, sample, None, name, None);
    }

    /// The kernels the forward pass has named (`forward::Scratch::kernels`).
    pub fn kernels(&self) -> crate::brick::Catalogue {
        self.scratch.kernels.catalogue().clone()
    }

    pub fn numerics(&self) -> Numerics {
        self.numerics
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The model, shared.
    pub fn model_arc(&self) -> Arc<Model> {
        Arc::clone(&self.model)
    }

    /// The repacked weights under `fast` numerics, shared.
    pub fn repacked_arc(&self) -> Option<Arc<Repacked>> {
        self.repacked.clone()
    }

    /// Positions used so far.
    pub fn position(&self) -> usize {
        self.kv.len()
    }

    /// Context capacity.
    pub fn context(&self) -> usize {
        self.kv.capacity()
    }

    /// Drop the cache and start over.
    pub fn reset(&mut self) {
        self.kv.clear();
    }

    /// Evaluate `tokens` after what is cached; logits for the last or every token.
    pub fn eval(&mut self, tokens: &[u32], want: LogitsFor) -> Result<Vec<Vec<f32>>, EngineError> {
        self.eval_recorded(tokens, want, &mut Recorder::off())
    }

    /// `eval`, handing each brick's span to `rec` (when it is enabled).
    pub fn eval_recorded(
        &mut self,
        tokens: &[u32],
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::Empty);
        }
        let vocab = self.model.config.vocab_size;
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(EngineError::BadToken { id, vocab });
        }
        if self.kv.len() + tokens.len() > self.kv.capacity() {
            return Err(EngineError::ContextFull {
                ctx: self.kv.capacity(),
                used: self.kv.len(),
                asked: tokens.len(),
            });
        }
        let m = &self.model;
        Ok(forward::forward(
            m,
            &mut self.kv,
            tokens,
            want,
            rec,
            &mut self.scratch,
            self.repacked.as_deref(),
        ))
    }
}
