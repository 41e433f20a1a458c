//! Several sequences decoded together on the CPU (`CpuBatch`): each its own KV cache and
//! position, one forward pass per step for all of them (`forward::forward_batch`), so every
//! weight read serves every sequence. The caches are sized before anything runs, and a batch
//! whose caches would not fit in the memory the system has free is refused with the figure.

use std::sync::Arc;

use super::forward::{forward_batch, forward_batch_rows, Scratch};
use super::kv_cache::KvCache;
use super::repack::Repacked;
use super::CpuEngine;
use crate::brick::Recorder;
use crate::engine::batched::{check_work, Batched};
use crate::engine::error::EngineError;
use crate::engine::options::LogitsFor;
use crate::engine::sampler::argmax;
use crate::model::Model;

/// A model with one KV cache per sequence.
pub struct CpuBatch {
    model: Arc<Model>,
    kvs: Vec<KvCache>,
    scratch: Box<Scratch>,
    repacked: Option<Arc<Repacked>>,
}

/// Bytes of `n` KV caches of `ctx` positions for `model` (f16 keys and values, every layer).
pub fn kv_bytes(model: &Model, ctx: usize, n: usize) -> usize {
    let c = &model.config;
    n.saturating_mul(2 * c.n_layers * c.kv_dim() * ctx.clamp(1, c.context_length) * 2)
}

/// Bytes the system reports free for new allocations (`MemAvailable`), where it says.
pub fn memory_available() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

impl CpuBatch {
    /// `n` sequences of up to `ctx` positions each, with `engine`'s model and numerics
    /// (its repacked weights shared). Refused when the caches need more than the memory free.
    pub fn new(engine: &CpuEngine, ctx: usize, n: usize) -> Result<CpuBatch, EngineError> {
        let model = engine.model_arc();
        let need = kv_bytes(&model, ctx, n);
        if let Some(free) = memory_available() {
            if need > free {
                return Err(EngineError::BatchTooLarge { n, ctx, need, free });
            }
        }
        let c = &model.config;
        let ctx = ctx.clamp(1, c.context_length);
        let kvs = (0..n)
            .map(|_| KvCache::new(c.n_layers, c.kv_dim(), ctx))
            .collect();
        Ok(CpuBatch {
            model,
            kvs,
            scratch: Box::default(),
            repacked: engine.repacked_arc(),
        })
    }

    /// Forget every sequence's tokens.
    pub fn reset(&mut self) {
        self.kvs.iter_mut().for_each(KvCache::clear);
    }
}

impl Batched for CpuBatch {
    fn len(&self) -> usize {
        self.kvs.len()
    }

    fn model(&self) -> &Model {
        &self.model
    }

    fn position(&self, s: usize) -> usize {
        self.kvs[s].len()
    }

    fn kv_bytes(&self) -> usize {
        self.kvs.iter().map(KvCache::bytes).sum()
    }

    fn prompts_together(&self) -> bool {
        true
    }

    /// Every item in one pass (`forward_batch`).
    fn eval(
        &mut self,
        work: &[(usize, &[u32])],
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<Vec<Vec<Vec<f32>>>, EngineError> {
        let mut seqs = checked_seqs(&mut self.kvs, work, self.model.config.vocab_size)?;
        Ok(forward_batch(
            &self.model,
            &mut seqs,
            want,
            rec,
            &mut self.scratch,
            self.repacked.as_deref(),
        ))
    }

    /// Every item in one pass, each sequence's pick read from the pass's logits where they
    /// lie (`forward_batch_rows`), the rows picked on the engine's pool.
    fn greedy(
        &mut self,
        work: &[(usize, &[u32])],
        rec: &mut Recorder,
    ) -> Result<Vec<u32>, EngineError> {
        let mut seqs = checked_seqs(&mut self.kvs, work, self.model.config.vocab_size)?;
        let rows = forward_batch_rows(
            &self.model,
            &mut seqs,
            LogitsFor::Last,
            rec,
            &mut self.scratch,
            self.repacked.as_deref(),
        );
        let logits = self.scratch.logits();
        let width = logits.len() / rows.max(1);
        let mut picks = vec![0u32; rows];
        super::pool::par_chunks_mut(&mut picks, 1, |i, p| {
            p[0] = argmax(&logits[i * width..(i + 1) * width]);
        });
        Ok(picks)
    }
}

/// `work`'s sequences with their caches, in order, after `check_work`'s checks.
fn checked_seqs<'a>(
    kvs: &'a mut [KvCache],
    work: &[(usize, &'a [u32])],
    vocab: usize,
) -> Result<Vec<(&'a mut KvCache, &'a [u32])>, EngineError> {
    check_work(work, kvs.len(), vocab, |s| {
        (kvs[s].len(), kvs[s].capacity())
    })?;
    let mut items = work.iter().peekable();
    let mut seqs = Vec::with_capacity(work.len());
    for (s, kv) in kvs.iter_mut().enumerate() {
        if let Some(&(_, tokens)) = items.next_if(|(w, _)| *w == s) {
            seqs.push((kv, tokens));
        }
    }
    Ok(seqs)
}
