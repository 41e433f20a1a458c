//! The CUDA engine (`CudaEngine`) and its decode loop, the GPU twin of `cpu::decode`: weights
//! uploaded once in their GGUF types, a GPU KV cache (f16, as the CPU's), activations kept on
//! the device, and greedy sampling on the GPU so a decode step copies back one token id.
//! `setup` builds it, `forward` is the launch plan each step runs; here are evaluation, the
//! decode step and its CUDA graphs (captured once per kind of step, then replayed).
//!
//! Per-brick timing (docs/DESIGN.md): `Events` (the default) has every kernel stamp its own start
//! and end on the GPU's clock (`clock.rs`), so a decode step still replays as one CUDA graph;
//! `Sync` synchronises the stream around each brick and times with the host clock (the
//! independent cross-check); `Off` launches the kernels and nothing else.
//!
//! Decode is pipelined: a caller that says what its next step will be (`decode`'s `next`) has
//! that step launched before this one's token is read. The greedy token and the position stay
//! on the device, so the next graph can run straight after this one; the host's reading and
//! bookkeeping then overlap the GPU's work instead of idling it between tokens. Consecutive
//! steps stamp alternate areas of the kernel clock, each with its own captured graphs.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaGraph, CudaModule, CudaSlice, CudaStream};

use super::batch_graphs::BatchGraphs;
use super::buffers::{Bufs, RowsStep, SplitScratch};
use super::clock::{self, KernelClock, Slot, AREAS};
use super::env_counts::env_count;
use super::error::{device_error, wrap};
use super::kernel_table::Kernels;
use super::module;
use super::probe::GpuDesc;
use super::rope_tables::RopeTables;
use super::step_trace::{StepRow, StepTrace};
use super::weights::GWeights;
use crate::brick::{KernelSpan, KernelTime, Recorder, Source, Span};
use crate::engine::error::EngineError;
use crate::engine::options::{LogitsFor, Numerics, Timing};
use crate::model::Model;

/// Largest batch one step evaluates under fast numerics: longer prompts go in chunks, so the
/// batch buffers (and the tensor-core products' operands) stay this size whatever the prompt.
/// Each chunk expands every weight matrix to f16 again and runs its products as GEMMs of this
/// many rows, so larger chunks are faster (docs/measurements/gpu-engine.md), for activations
/// of chunk x n_ff x 8 bytes.
const PREFILL_CHUNK: usize = 4096;

/// `PREFILL_CHUNK`, or the environment's `CBTOP_PREFILL_CHUNK` (a measuring aid: the chunk
/// size's cost in prompt speed and memory; at least 64, the tensor cores' smallest batch); a
/// value that is not such a number is refused by name.
pub(super) fn prefill_chunk() -> Result<usize, String> {
    let n = env_count("CBTOP_PREFILL_CHUNK", 64, "a batch size of 64 or more")?;
    Ok(n.unwrap_or(PREFILL_CHUNK))
}

/// A captured step (a decode step, or a batch step) and the bricks its stamped launches
/// belong to.
pub(super) struct Step {
    graph: CudaGraph,
    owners: Vec<Slot>,
}

impl Step {
    /// Replay it on the stream it was captured from.
    pub(super) fn launch(&self, what: &str) -> Result<(), EngineError> {
        self.graph
            .launch()
            .map_err(|e| device_error(&format!("replaying {what}'s CUDA graph"), e))
    }

    /// The owners of its stamped launches (empty when unstamped).
    pub(super) fn owners(&self) -> &[Slot] {
        &self.owners
    }
}

/// A decode step launched before the host asked for it: it runs on the token and at the
/// position the step before it leaves on the device.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ahead {
    stamped: bool,
    /// Its kernel clock area.
    area: usize,
    /// Its position.
    pos: usize,
}

/// A decode step's result (`CudaEngine::decode`).
#[derive(Clone, Copy, Debug)]
pub struct Decoded {
    pub token: u32,
    /// The step was launched ahead by the call before (it was running when asked for).
    pub ahead: bool,
    /// When its token was on the host (before its stamps were read).
    pub arrived: Instant,
}

/// The graph a decode step launched ahead replays, from the caller's word on that step
/// (`next`: whether it is profiled): stamped when profiled under `Events`, plain when not
/// profiled or under `Off`, and none when profiled under `Sync`, which runs brick by brick with
/// host syncs (a step launched for it would never be taken).
fn graph_of_next(next: Option<bool>, timing: Timing) -> Option<bool> {
    match (next?, timing) {
        (true, Timing::Sync) => None,
        (profiled, timing) => Some(profiled && timing == Timing::Events),
    }
}

/// Shortest context the grouped decode attention takes for a model with `n_kv_heads` KV
/// heads of `head_dim` on `sms` multiprocessors. Head sizes 64, 128 and 256 take the
/// tensor-core grouped kernels, which ran at least as fast as the kernels with a block per
/// query head at every context measured (docs/measurements/kernels.md): they take every
/// context past the short ones kept in the CPU's order (`ordered_upto`, none for 256). Other head sizes take the CUDA-core
/// grouped kernel where its launch has about one block per two multiprocessors (a KV head's
/// chunks are 128 positions or more); below that, fewer blocks left it slower. Or the
/// environment's `CBTOP_ATTN_GROUP_FROM` (a measuring aid); a value that is not a number is
/// refused by name.
pub(super) fn group_from(
    n_kv_heads: usize,
    head_dim: usize,
    sms: usize,
    ordered_upto: usize,
) -> Result<usize, String> {
    let n = env_count("CBTOP_ATTN_GROUP_FROM", 0, "a number of positions")?;
    Ok(n.unwrap_or_else(|| {
        if matches!(head_dim, 64 | 128 | 256) {
            ordered_upto + 1
        } else {
            (sms / 2).max(1).div_ceil(n_kv_heads.max(1)) * 128
        }
    }))
}

/// Captured decode steps by [stamped][clock area].
pub(super) type Graphs = [[Option<Step>; AREAS]; 2];

/// The model on one GPU with its KV cache.
pub struct CudaEngine {
    pub(super) model: Arc<Model>,
    pub(super) gpu: GpuDesc,
    pub(super) stream: Arc<CudaStream>,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) k: Kernels,
    pub(super) w: GWeights,
    pub(super) kc: CudaSlice<u16>,
    pub(super) vc: CudaSlice<u16>,
    /// RoPE's (cos, sin) for every position below `cap`, from the CPU engine's table.
    pub(super) rope: RopeTables,
    /// The next step's first position, on the device (kernels read it, so a graph replays
    /// at the current position); `dev_pos` is the host's knowledge of it.
    pub(super) pos: CudaSlice<i32>,
    pub(super) dev_pos: Option<usize>,
    /// The captured decode step (one token, argmax included), unstamped [0] and stamped [1],
    /// for each clock area, replayed unless bricks are timed with host syncs.
    pub(super) graphs: Graphs,
    /// The graphs launch the grouped decode attention (`grouped_at` their steps' positions).
    pub(super) graphs_grouped: bool,
    /// The launches being recorded take the grouped decode attention.
    pub(super) grouped_now: bool,
    /// Recorded behind each area's last step: the host waits for its step, not the one after.
    pub(super) done: [CudaEvent; AREAS],
    /// The step launched ahead of the host's asking, if one is on the device.
    pub(super) ahead: Option<Ahead>,
    /// The clock area the next step launched uses.
    pub(super) area: usize,
    pub(super) cap: usize,
    pub(super) len: usize,
    /// The sequence of the cache that one sequence's launches address (`CudaBatch` holds
    /// several; 0 otherwise).
    pub(super) seq: usize,
    /// A batch step's rows (`CudaBatch`): while set, the step's tokens are one a sequence.
    pub(super) rows: Option<RowsStep>,
    /// The batch steps captured so far, one per batch size (batch_graphs.rs); each holds the
    /// buffers it names and is dropped when they change.
    pub(super) batch_graphs: BatchGraphs<Step>,
    /// Largest batch one step evaluates under fast numerics (`prefill_chunk`).
    pub(super) prefill_chunk: usize,
    /// Shortest context the grouped decode attention takes (`group_from`).
    pub(super) group_from: usize,
    pub(super) bufs: Bufs,
    pub(super) timing: Timing,
    pub(super) numerics: Numerics,
    /// Scratch of the split-KV decode attention (fast numerics).
    pub(super) split: SplitScratch,
    /// Per-launch timestamps (`Timing::Events`).
    pub(super) clock: KernelClock,
    /// Logits that were NaN or infinite in the last greedy step's row.
    pub(super) nonfinite: usize,
    /// The device's `tok[0]` already holds this id (written there by the last argmax).
    pub(super) on_device: Option<u32>,
    pub(super) module: Arc<CudaModule>,
    /// Whether the kernels were compiled now or came from the disk cache.
    pub module_origin: module::Origin,
    /// Per-step host and GPU times, when `CBTOP_STEP_TRACE` names a file (a measuring aid).
    pub(super) trace: Option<StepTrace>,
}

impl Drop for CudaEngine {
    /// A step launched ahead (taken over or forgotten) may still be running: let it finish
    /// before its graph and buffers go.
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}

impl CudaEngine {
    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn gpu(&self) -> &GpuDesc {
        &self.gpu
    }

    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// The numerics the product kernels were chosen for.
    /// The kernels stamped launches have run (launch_log.rs).
    pub fn kernels(&self) -> crate::brick::Catalogue {
        self.k.log.catalogue()
    }

    pub fn numerics(&self) -> Numerics {
        self.numerics
    }

    /// The longest context (positions, the step's own included) at which a decode step gives
    /// the CPU engine's bits: any under exact numerics; under fast numerics 128 where every
    /// product keeps the CPU's order (`kernel_table::cpu_order_fast`), else 0.
    pub fn cpu_bits_upto(&self) -> usize {
        match self.numerics {
            Numerics::Exact => usize::MAX,
            Numerics::Fast => self.split.ordered_upto as usize,
        }
    }

    /// How many logits of the last greedy step (`eval_argmax`) were NaN or infinite: the
    /// logits stay on the device, so the argmax kernels count them.
    pub fn nonfinite_logits(&self) -> usize {
        self.nonfinite
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> usize {
        self.w.bytes
    }

    pub fn position(&self) -> usize {
        self.len
    }

    pub fn context(&self) -> usize {
        self.cap
    }

    pub fn reset(&mut self) {
        self.settle();
        self.len = 0;
    }

    /// Forget a step launched ahead: the device's token and position are then past the
    /// host's, so both are uploaded before the next launch, which the stream orders after it
    /// (so nothing waits for it here).
    pub(super) fn settle(&mut self) {
        if self.ahead.take().is_some() {
            self.dev_pos = None;
            self.on_device = None;
        }
    }

    fn check(&self, tokens: &[u32]) -> Result<(), EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::Empty);
        }
        let vocab = self.model.config.vocab_size;
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(EngineError::BadToken { id, vocab });
        }
        if self.len + tokens.len() > self.cap {
            return Err(EngineError::ContextFull {
                ctx: self.cap,
                used: self.len,
                asked: tokens.len(),
            });
        }
        Ok(())
    }

    /// Whether this step's kernels stamp themselves (`Timing::Events` while recording).
    pub(super) fn stamped(&self, rec: &Recorder) -> bool {
        rec.enabled() && self.timing == Timing::Events
    }

    /// Whether a prompt of `n` tokens has its products on the tensor cores (fast numerics,
    /// its chunks large enough), so its bricks are judged against their peak.
    pub fn prompt_on_tensor_cores(&self, n: usize) -> bool {
        self.k
            .gemm
            .as_ref()
            .is_some_and(|g| n.min(self.prefill_chunk) >= g.f16_from())
    }

    /// Whether a batch of `n` tokens runs as several chunks of `prefill_chunk` (fast numerics;
    /// the exact path evaluates a prompt in one batch, as the CPU does, so its arithmetic
    /// follows the CPU's batch rules).
    fn chunked(&self, n: usize) -> bool {
        self.numerics == Numerics::Fast && n > self.prefill_chunk
    }

    /// Evaluate `tokens`; logits for the last or every token, copied back.
    pub fn eval(
        &mut self,
        tokens: &[u32],
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        self.check(tokens)?;
        if self.chunked(tokens.len()) {
            let mut rows = Vec::new();
            for chunk in tokens.chunks(self.prefill_chunk) {
                let mut r = self.eval(chunk, want, rec)?;
                match want {
                    LogitsFor::All => rows.append(&mut r),
                    LogitsFor::Last => rows = r,
                }
            }
            return Ok(rows);
        }
        self.settle();
        let t0 = Instant::now();
        let n = tokens.len();
        self.grouped_now = self.grouped_at(self.len);
        self.prepare(tokens)?;
        self.clock.arm(self.stamped(rec), self.area);
        let rows = self.launch_layers(n, want, rec)?;
        self.advance_device(n)?;
        let launched = self.k.log.take_step();
        let owners = self
            .clock
            .finish(&self.stream, false, &launched)
            .map_err(EngineError::Device)?;
        let vocab = self.model.weights.output.rows;
        let host = self
            .stream
            .clone_dtoh(&self.bufs.logits.slice(0..rows * vocab))
            .map_err(wrap("copying logits back"))?;
        self.advance_host(n);
        self.record_stamps(&owners, self.area, rec, t0)?;
        Ok(host.chunks_exact(vocab).map(|r| r.to_vec()).collect())
    }

    /// Evaluate `tokens` and pick the next token greedily on the GPU; only its id comes back.
    pub fn eval_argmax(&mut self, tokens: &[u32], rec: &mut Recorder) -> Result<u32, EngineError> {
        Ok(self.decode(tokens, rec, None)?.token)
    }

    /// `eval_argmax`, and with `next` (whether the caller's next step will be profiled) that
    /// step launched before this one's token is read, on the token and position this one
    /// leaves on the device; the next call with that token takes it over. A single token
    /// replays a CUDA graph of the whole step (captured on first use, with and without kernel
    /// stamps), so the host issues one launch per token; only `Sync` timing, which needs the
    /// host between bricks, launches brick by brick.
    pub fn decode(
        &mut self,
        tokens: &[u32],
        rec: &mut Recorder,
        next: Option<bool>,
    ) -> Result<Decoded, EngineError> {
        self.check(tokens)?;
        let called = self.trace.as_ref().map(|_| Instant::now());
        let stamped = self.stamped(rec);
        let synced = rec.enabled() && self.timing == Timing::Sync;
        let n = tokens.len();
        let graphed = n == 1 && !synced;
        let taken = match self.ahead {
            Some(a) => {
                graphed
                    && a.stamped == stamped
                    && a.pos == self.len
                    && self.on_device == Some(tokens[0])
            }
            None => false,
        };
        if !taken {
            self.settle();
        }
        if self.chunked(n) {
            // Every chunk but the last as a plain batch; the last picks the token.
            let c = self.prefill_chunk;
            let (head, tail) = tokens.split_at((n - 1) / c * c);
            for chunk in head.chunks(c) {
                self.eval(chunk, LogitsFor::Last, rec)?;
            }
            return self.decode(tail, rec, next);
        }
        let t0 = Instant::now();
        let grouped = self.grouped_at(self.len);
        // The step after this one, launched ahead: graphed, with room in the cache, and taking
        // the same attention kernel (the graphs hold one).
        let then = graph_of_next(next, self.timing).filter(|_| {
            !synced && self.len + n < self.cap && self.grouped_at(self.len + n) == grouped
        });
        if graphed || then.is_some() {
            if self.graphs_grouped != grouped {
                self.graphs = Default::default();
                self.graphs_grouped = grouped;
            }
            self.ensure_graphs(graphed.then_some(stamped), then)?;
        }
        self.grouped_now = grouped;
        let (area, owners) = match self.ahead.take() {
            Some(a) if taken => (a.area, None),
            _ => {
                let area = self.area;
                self.prepare(tokens)?;
                let owners = if graphed {
                    self.replay(stamped, area)?;
                    None
                } else {
                    Some(self.record_step(n, stamped, area, rec)?)
                };
                self.mark_end(area)?;
                (area, owners)
            }
        };
        self.launch_ahead(then, area, self.len + n)?;
        let launched = self.trace.as_ref().map(|_| Instant::now());
        self.done[area]
            .synchronize()
            .map_err(wrap("waiting for the decode step"))?;
        let arrived = Instant::now();
        self.advance_host(n);
        let (id, nonfinite) = self.clock.sampled(area);
        self.nonfinite = nonfinite as usize;
        self.on_device = Some(id);
        let mut gpu = None;
        if stamped {
            let owners: &[Slot] = match &owners {
                Some(o) => o,
                None => self.graphs[1][area].as_ref().map_or(&[], |s| &s.owners),
            };
            gpu = self.record_stamps(owners, area, rec, t0)?;
        }
        if let (Some(t), Some(called), Some(launched)) = (self.trace.as_mut(), called, launched) {
            let (gpu_first_ns, gpu_end_ns) = gpu.unwrap_or((0, 0));
            t.push(StepRow {
                stamped,
                ahead: taken,
                call_ns: t.ns(called),
                launched_ns: t.ns(launched),
                arrived_ns: t.ns(arrived),
                done_ns: t.ns(Instant::now()),
                gpu_first_ns,
                gpu_end_ns,
            });
        }
        Ok(Decoded {
            token: id,
            ahead: taken,
            arrived,
        })
    }

    /// Whether a decode step at position `pos` takes the grouped attention kernel: from
    /// `group_from` positions of context, for models it serves (`SplitScratch::group_splits`).
    pub(super) fn grouped_at(&self, pos: usize) -> bool {
        self.split.group_splits > 0 && pos + 1 >= self.group_from
    }

    /// Record `done[area]` behind the step just launched in clock area `area`; the next step
    /// launched takes the other area.
    fn mark_end(&mut self, area: usize) -> Result<(), EngineError> {
        self.done[area]
            .record(&self.stream)
            .map_err(wrap("marking the decode step's end"))?;
        self.area = (area + 1) % AREAS;
        Ok(())
    }

    /// Capture the decode graphs this step (`now`: stamped or not) and the one launched ahead
    /// of it (`then`) replay, where they are missing. When one is, every graph the engine's
    /// timing can use is captured with it (unstamped, and stamped under `Events`, in both
    /// clock areas): the captures then land on the first decode step after the buffers change
    /// (a warm-up step in a measured run), not on the first measured step that switches
    /// between stamped and unstamped steps. A capture needs the stream idle.
    fn ensure_graphs(&mut self, now: Option<bool>, then: Option<bool>) -> Result<(), EngineError> {
        let area = match self.ahead {
            Some(a) => a.area,
            None => self.area,
        };
        let want = [
            now.map(|s| (s, area)),
            then.map(|s| (s, (area + 1) % AREAS)),
        ];
        let missing =
            |g: &Graphs, (stamped, a): (bool, usize)| g[usize::from(stamped)][a].is_none();
        if !want.into_iter().flatten().any(|w| missing(&self.graphs, w)) {
            return Ok(());
        }
        self.stream
            .synchronize()
            .map_err(wrap("waiting before a CUDA graph capture"))?;
        let stamped_too = self.timing == Timing::Events;
        let all = (0..AREAS).flat_map(|a| [(false, a), (true, a)]);
        for (stamped, a) in all.filter(|&(s, _)| !s || stamped_too) {
            if missing(&self.graphs, (stamped, a)) {
                self.graphs[usize::from(stamped)][a] = Some(self.capture(stamped, a)?);
            }
        }
        Ok(())
    }

    /// Launch the captured decode step (stamped or not) of clock area `area`.
    fn replay(&self, stamped: bool, area: usize) -> Result<(), EngineError> {
        let step = self.graphs[usize::from(stamped)][area]
            .as_ref()
            .ok_or_else(|| EngineError::Device("the decode step's CUDA graph is missing".into()))?;
        step.launch("the decode step")
    }

    /// With `then` (whether it is stamped), launch the step after the one in clock area
    /// `area` now, at position `pos`, on the token and position that one leaves on the device.
    fn launch_ahead(
        &mut self,
        then: Option<bool>,
        area: usize,
        pos: usize,
    ) -> Result<(), EngineError> {
        let Some(stamped) = then else { return Ok(()) };
        let next = (area + 1) % AREAS;
        self.replay(stamped, next)?;
        self.mark_end(next)?;
        self.ahead = Some(Ahead {
            stamped,
            area: next,
            pos,
        });
        Ok(())
    }

    /// Every launch of a step that samples greedily: the layers, the argmax (which also moves
    /// the device's position on), and the copies of the token id and the stamps to the host.
    /// Returns the owners of the stamped launches.
    fn record_step(
        &mut self,
        n: usize,
        stamped: bool,
        area: usize,
        rec: &mut Recorder,
    ) -> Result<Vec<Slot>, EngineError> {
        self.clock.arm(stamped, area);
        self.launch_layers(n, LogitsFor::Last, rec)?;
        self.sample(rec, n)?;
        let launched = self.k.log.take_step();
        self.clock
            .finish(&self.stream, true, &launched)
            .map_err(EngineError::Device)
    }

    /// Record one decode step (one token already on the device at the device's position)
    /// into a CUDA graph, its kernels stamped or not.
    fn capture(&mut self, stamped: bool, area: usize) -> Result<Step, EngineError> {
        self.grouped_now = self.graphs_grouped;
        self.capture_with("the decode step", |e| {
            e.record_step(1, stamped, area, &mut Recorder::off())
        })
    }

    /// Record the launches `record` makes (returning the owners of the stamped ones) into a
    /// CUDA graph, `what` naming the step in errors. Nothing runs while capturing; the
    /// buffers it names must stay allocated for the graph's life (a larger batch reallocates
    /// them and drops the graphs).
    pub(super) fn capture_with(
        &mut self,
        what: &str,
        record: impl FnOnce(&mut Self) -> Result<Vec<Slot>, EngineError>,
    ) -> Result<Step, EngineError> {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        self.stream
            .begin_capture(mode)
            .map_err(wrap("starting a CUDA graph capture"))?;
        let recorded = record(self);
        let graph = self
            .stream
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .map_err(|e| device_error(&format!("capturing {what}'s CUDA graph"), e));
        let owners = recorded?;
        match graph? {
            Some(graph) => Ok(Step { graph, owners }),
            None => Err(EngineError::Device(format!(
                "capturing {what}'s CUDA graph: the capture came back empty"
            ))),
        }
    }

    /// The kernels' stamps of the step that just ended (its stream synchronised), as one span
    /// per brick and the step's gaps, into `rec`; returns the first kernel's start and the last
    /// one's end on the GPU's clock (None: no stamped launch).
    pub(super) fn record_stamps(
        &self,
        owners: &[Slot],
        area: usize,
        rec: &mut Recorder,
        t0: Instant,
    ) -> Result<Option<(u64, u64)>, EngineError> {
        if owners.is_empty() {
            return Ok(None);
        }
        let r = clock::resolve(owners, self.clock.stamps(area))
            .map_err(|e| EngineError::Device(format!("reading the kernel timestamps: {e}")))?;
        let base_ns = rec.since_origin(t0);
        for b in &r.bricks {
            rec.push(Span {
                brick: b.owner.brick,
                layer: b.owner.layer,
                start_ns: base_ns + b.offset_ns,
                dur_ns: b.busy_ns,
                source: Source::GpuGlobaltimer,
            });
        }
        for k in &r.kernels {
            let Some(kernel) = k.kernel else { continue };
            rec.push_kernel(KernelSpan {
                brick: k.owner.brick,
                layer: k.owner.layer,
                kernel,
                timed: Some(KernelTime {
                    start_ns: base_ns + k.offset_ns,
                    dur_ns: k.busy_ns,
                    gap_before_ns: k.gap_before_ns,
                }),
            });
        }
        rec.add_gaps(r.gaps_ns);
        Ok(Some((r.first_ns, r.first_ns + r.window_ns)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_launched_ahead_is_the_one_the_timing_will_run() {
        assert_eq!(graph_of_next(None, Timing::Events), None);
        assert_eq!(graph_of_next(Some(true), Timing::Events), Some(true));
        assert_eq!(graph_of_next(Some(false), Timing::Events), Some(false));
        assert_eq!(graph_of_next(Some(true), Timing::Sync), None);
        assert_eq!(graph_of_next(Some(false), Timing::Sync), Some(false));
        assert_eq!(graph_of_next(Some(true), Timing::Off), Some(false));
        assert_eq!(graph_of_next(Some(false), Timing::Off), Some(false));
    }
}
