//! Several sequences decoded together, whichever engine holds them (`Batched`): the seam the
//! batch sweep and `generate --batch` drive. The CPU's batch evaluates every sequence's tokens
//! in one pass; the GPU's evaluates a step of one token a sequence in one pass and prompts one
//! sequence at a time (each on the prompt kernels).

use super::error::EngineError;
use super::options::LogitsFor;
use super::sampler::argmax;
use crate::brick::Recorder;
use crate::model::Model;

/// Sequences with their own KV caches and positions on one engine.
pub trait Batched {
    /// Sequences in the batch.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn model(&self) -> &Model;

    /// Sequence `s`'s position (tokens cached).
    fn position(&self, s: usize) -> usize;

    /// Bytes the caches hold.
    fn kv_bytes(&self) -> usize;

    /// Whether one `eval` of several sequences' prompts runs them in one pass (so each
    /// sequence's first token arrives with the others'), rather than one after another.
    fn prompts_together(&self) -> bool;

    /// Evaluate each `(s, tokens)` of `work` (sequences in increasing order, each at most
    /// once) after what sequence `s` has cached; logits for each item's last or every token,
    /// in `work`'s order.
    fn eval(
        &mut self,
        work: &[(usize, &[u32])],
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<Vec<Vec<Vec<f32>>>, EngineError>;

    /// `eval`, and each item's greedy next token after its last token (picked where the
    /// logits are).
    fn greedy(
        &mut self,
        work: &[(usize, &[u32])],
        rec: &mut Recorder,
    ) -> Result<Vec<u32>, EngineError> {
        let rows = self.eval(work, LogitsFor::Last, rec)?;
        Ok(rows
            .iter()
            .map(|r| r.last().map_or(0, |l| argmax(l)))
            .collect())
    }
}

/// The checks every batch makes of `work` before running it: sequences in increasing order and
/// in the batch (a caller's bug otherwise), then tokens present, in the vocabulary, and within
/// each sequence's cache (`room(s)`: its position and capacity).
pub fn check_work(
    work: &[(usize, &[u32])],
    seqs: usize,
    vocab: usize,
    room: impl Fn(usize) -> (usize, usize),
) -> Result<(), EngineError> {
    for (i, &(s, tokens)) in work.iter().enumerate() {
        assert!(
            s < seqs && (i == 0 || work[i - 1].0 < s),
            "sequences in increasing order, each once"
        );
        if tokens.is_empty() {
            return Err(EngineError::Empty);
        }
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(EngineError::BadToken { id, vocab });
        }
        let (used, ctx) = room(s);
        if used + tokens.len() > ctx {
            return Err(EngineError::ContextFull {
                ctx,
                used,
                asked: tokens.len(),
            });
        }
    }
    Ok(())
}
