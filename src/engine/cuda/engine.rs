//! The forward pass on the GPU, brick by brick like the CPU's `forward.rs`: weights uploaded
//! once in their GGUF types, a GPU KV cache (f16, as the CPU's), activations kept on the device,
//! and greedy sampling on the GPU so a decode step copies back one token id.
//!
//! Per-brick timing (DESIGN.md): `Events` (the default) has every kernel stamp its own start
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

use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaGraph, CudaModule, CudaSlice, CudaStream, DriverError,
    LaunchConfig,
};

use super::buffers::{Bufs, Which};
use super::clock::{self, KernelClock, Owner, AREAS};
use super::error::{device_error, wrap};
use super::kernels::{ceil_div, cpu_order_fast, kind_code, lin, Kernels};
use super::launcher::PushArg;
use super::module;
use super::probe::GpuDesc;
use super::step_trace::{StepRow, StepTrace};
use super::weights::{s_kind, upload_vec, GWeights, Mat, Norm};
use crate::brick::{Brick, BrickId as B, Recorder, Source, Span};
use crate::engine::cpu::ops::rope_table;
use crate::engine::options::{Numerics, Timing};
use crate::engine::{EngineError, LogitsFor};
use crate::model::Model;

/// Largest batch one step evaluates under fast numerics: longer prompts go in chunks, so the
/// batch buffers (and the tensor-core products' operands) stay this size whatever the prompt.
const PREFILL_CHUNK: usize = 512;

/// Kernel launches a step may time: a layer takes at most 20 on the vec-dot products (seven
/// products, each with its activation quantization, and six more kernels); on tensor cores a
/// product is a rounding, a dequantization per slice of rows and a product per slice (about 32
/// for a layer whose largest matrices take two slices). Plus the embedding, head and sampling.
fn clock_slots(n_layers: usize) -> usize {
    48 * n_layers + 32
}

/// The RoPE table kernels/rope.cu reads, for positions `0..positions`: per position the CPU
/// engine's `n_rot / 2` (cos, sin) pairs, flattened.
pub(super) fn rope_rows(positions: usize, n_rot: usize, base: f32) -> Vec<f32> {
    (0..positions)
        .flat_map(|pos| rope_table(pos, n_rot, base))
        .flat_map(|(cos, sin)| [cos, sin])
        .collect()
}

/// The split decode attention's dynamic shared memory for chunks of `chunk` positions: the
/// query and a chunk's scores (kernels/attention_fast.cu), or, with CPU-order short contexts
/// (`ordered`), the query and up to `ORDERED_ATTENTION_MAX` f16 V rows if that is more.
pub(super) fn split_shared_bytes(head_dim: usize, chunk: usize, ordered: bool) -> usize {
    let split = (head_dim + chunk) * 4;
    if ordered {
        split.max(head_dim * 4 + ORDERED_ATTENTION_MAX as usize * head_dim * 2)
    } else {
        split
    }
}

/// The split-KV decode attention's scratch (kernels/attention_fast.cu): per head and split the
/// partial sums, per head a ticket counter, and the launch's shape for this context.
pub(super) struct SplitScratch {
    pub(super) part: CudaSlice<f32>,
    pub(super) tickets: CudaSlice<i32>,
    pub(super) splits: usize,
    pub(super) shared_bytes: usize,
    /// Contexts this short take the CPU-order attention (`ORDERED_ATTENTION_MAX` when the
    /// kernels keep the CPU's order, else 0).
    pub(super) ordered_upto: i32,
}

/// Longest context the fast decode attention takes in the CPU's order when the kernels keep
/// it (`Kernels::ordered`; kernels/attention_fast.cu, ATTF_ORDERED_MAX).
const ORDERED_ATTENTION_MAX: i32 = 128;

impl SplitScratch {
    /// Splits for about four blocks per multiprocessor, at most one per 128 positions of the
    /// context (ATTF_MIN_CHUNK) and 256 (ATTF_MAX_SPLITS), and enough that a split's scores
    /// fit in 32 KB of shared memory.
    fn new(
        s: &Arc<CudaStream>,
        c: &crate::model::Config,
        cap: usize,
        sms: usize,
        ordered: bool,
    ) -> Result<SplitScratch, EngineError> {
        const MIN_CHUNK: usize = 128;
        const MAX_SPLITS: usize = 256;
        const MAX_CHUNK: usize = 8192;
        let splits = (4 * sms)
            .div_ceil(c.n_heads)
            .max(8)
            .min(cap.div_ceil(MIN_CHUNK))
            .max(cap.div_ceil(MAX_CHUNK))
            .clamp(1, MAX_SPLITS);
        if cap.div_ceil(splits) > MAX_CHUNK {
            return Err(EngineError::Device(format!(
                "a context of {cap} positions is over the split attention's {}",
                MAX_SPLITS * MAX_CHUNK
            )));
        }
        let chunk = cap.div_ceil(splits).max(MIN_CHUNK);
        let what = || wrap("allocating attention scratch");
        Ok(SplitScratch {
            part: s
                .alloc_zeros::<f32>(c.n_heads * splits * (c.head_dim + 2))
                .map_err(what())?,
            tickets: s.alloc_zeros::<i32>(c.n_heads).map_err(what())?,
            splits,
            shared_bytes: split_shared_bytes(c.head_dim, chunk, ordered),
            ordered_upto: if ordered { ORDERED_ATTENTION_MAX } else { 0 },
        })
    }
}

/// A captured decode step and the bricks its stamped launches belong to.
struct Step {
    graph: CudaGraph,
    owners: Vec<Option<Owner>>,
}

/// A decode step launched before the host asked for it: it runs on the token and at the
/// position the step before it leaves on the device.
#[derive(Clone, Copy, Debug)]
struct Ahead {
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

/// Captured decode steps by [stamped][clock area].
type Graphs = [[Option<Step>; AREAS]; 2];

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
    pub(super) rope: CudaSlice<f32>,
    /// The next step's first position, on the device (kernels read it, so a graph replays
    /// at the current position); `dev_pos` is the host's knowledge of it.
    pub(super) pos: CudaSlice<i32>,
    dev_pos: Option<usize>,
    /// The captured decode step (one token, argmax included), unstamped [0] and stamped [1],
    /// for each clock area, replayed unless bricks are timed with host syncs.
    graphs: Graphs,
    /// Recorded behind each area's last step: the host waits for its step, not the one after.
    done: [CudaEvent; AREAS],
    /// The step launched ahead of the host's asking, if one is on the device.
    ahead: Option<Ahead>,
    /// The clock area the next step launched uses.
    area: usize,
    pub(super) cap: usize,
    len: usize,
    pub(super) bufs: Bufs,
    timing: Timing,
    pub(super) numerics: Numerics,
    /// Scratch of the split-KV decode attention (fast numerics).
    pub(super) split: SplitScratch,
    /// Per-launch timestamps (`Timing::Events`).
    pub(super) clock: KernelClock,
    /// Logits that were NaN or infinite in the last greedy step's row.
    nonfinite: usize,
    /// The device's `tok[0]` already holds this id (written there by the last argmax).
    on_device: Option<u32>,
    pub(super) module: Arc<CudaModule>,
    /// Whether the kernels were compiled now or came from the disk cache.
    pub module_origin: module::Origin,
    /// Per-step host and GPU times, when `CBTOP_STEP_TRACE` names a file (a measuring aid).
    trace: Option<StepTrace>,
}

impl Drop for CudaEngine {
    /// A step launched ahead (taken over or forgotten) may still be running: let it finish
    /// before its graph and buffers go.
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}

impl CudaEngine {
    /// Put `model` on GPU `gpu` with room for `ctx` positions (capped at the model's context),
    /// bricks timed by `timing`, products run with the kernels `numerics` picks.
    pub fn new(
        model: Arc<Model>,
        gpu: &GpuDesc,
        ctx: usize,
        timing: Timing,
        numerics: Numerics,
    ) -> Result<CudaEngine, EngineError> {
        let cx = CudaContext::new(gpu.ordinal).map_err(wrap("creating a CUDA context"))?;
        // One stream: cudarc's cross-stream event tracking is pure overhead here.
        // SAFETY: nothing in this engine uses a second stream.
        unsafe { cx.disable_event_tracking() };
        // Not the legacy default stream: CUDA graphs cannot be captured from it.
        let stream = cx.new_stream().map_err(wrap("creating a CUDA stream"))?;
        let (m, origin) = module::load(&cx, &gpu.arch()).map_err(EngineError::Device)?;
        let pdl = super::launcher::pdl_for(gpu.compute_capability);
        let sms = cx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(wrap("reading the multiprocessor count"))?
            .max(1) as usize;
        let k = Kernels::load(&m, numerics, cpu_order_fast(&model), pdl, sms)
            .map_err(EngineError::Device)?;
        let c = &model.config;
        if c.head_dim > 128 {
            return Err(EngineError::Device(format!(
                "head dimension {} is over the GPU attention kernel's 128 (kernels/attention.cu)",
                c.head_dim
            )));
        }
        let cap = ctx.clamp(1, c.context_length);
        let w = GWeights::upload(&stream, &model)?;
        let kv_len = c.n_layers * cap * c.kv_dim();
        let kc = stream
            .alloc_zeros::<u16>(kv_len)
            .map_err(wrap("allocating the KV cache"))?;
        let vc = stream
            .alloc_zeros::<u16>(kv_len)
            .map_err(wrap("allocating the KV cache"))?;
        let bufs = Bufs::alloc(&stream, &model, cap, 1, None)?;
        let rope = upload_vec(&stream, &rope_rows(cap, c.rope_dims, c.rope_base))?;
        let pos = stream
            .alloc_zeros::<i32>(1)
            .map_err(wrap("allocating the position"))?;
        let clock = KernelClock::new(&stream, clock_slots(c.n_layers))
            .map_err(wrap("allocating the kernel clock"))?;
        let split = SplitScratch::new(&stream, c, cap, sms, k.ordered)?;
        let event = || cx.new_event(None).map_err(wrap("creating a CUDA event"));
        let done = [event()?, event()?];
        Ok(CudaEngine {
            model,
            gpu: gpu.clone(),
            stream,
            ctx: cx,
            k,
            w,
            kc,
            vc,
            rope,
            pos,
            dev_pos: Some(0),
            graphs: Default::default(),
            done,
            ahead: None,
            area: 0,
            cap,
            len: 0,
            bufs,
            timing,
            numerics,
            split,
            clock,
            nonfinite: 0,
            on_device: None,
            module: m,
            module_origin: origin,
            trace: StepTrace::from_env(),
        })
    }

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
    pub fn numerics(&self) -> Numerics {
        self.numerics
    }

    /// The longest context (positions, the step's own included) at which a decode step gives
    /// the CPU engine's bits: any under exact numerics; under fast numerics 128 where every
    /// product keeps the CPU's order (`kernels::cpu_order_fast`), else 0.
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
    fn settle(&mut self) {
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
    fn stamped(&self, rec: &Recorder) -> bool {
        rec.enabled() && self.timing == Timing::Events
    }

    /// Whether a prompt of `n` tokens has its products on the tensor cores (fast numerics,
    /// its chunks large enough), so its bricks are judged against their peak.
    pub fn prompt_on_tensor_cores(&self, n: usize) -> bool {
        self.k
            .gemm
            .as_ref()
            .is_some_and(|g| g.takes(n.min(PREFILL_CHUNK)))
    }

    /// Whether a batch of `n` tokens runs as several chunks of `PREFILL_CHUNK` (fast numerics;
    /// the exact path evaluates a prompt in one batch, as the CPU does, so its arithmetic
    /// follows the CPU's batch rules).
    fn chunked(&self, n: usize) -> bool {
        self.numerics == Numerics::Fast && n > PREFILL_CHUNK
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
            for chunk in tokens.chunks(PREFILL_CHUNK) {
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
        self.prepare(tokens)?;
        self.clock.arm(self.stamped(rec), self.area);
        let rows = self.launch_layers(n, want, rec)?;
        self.advance_device(n)?;
        let owners = self
            .clock
            .finish(&self.stream, false)
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
            let (head, tail) = tokens.split_at((n - 1) / PREFILL_CHUNK * PREFILL_CHUNK);
            for chunk in head.chunks(PREFILL_CHUNK) {
                self.eval(chunk, LogitsFor::Last, rec)?;
            }
            return self.decode(tail, rec, next);
        }
        let t0 = Instant::now();
        // The step after this one, launched ahead: graphed, and with room in the cache.
        let then = graph_of_next(next, self.timing).filter(|_| !synced && self.len + n < self.cap);
        if graphed || then.is_some() {
            self.ensure_graphs(graphed.then_some(stamped), then)?;
        }
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
            let owners: &[Option<Owner>] = match &owners {
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
        step.graph
            .launch()
            .map_err(wrap("replaying the decode step's CUDA graph"))
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
    ) -> Result<Vec<Option<Owner>>, EngineError> {
        self.clock.arm(stamped, area);
        self.launch_layers(n, LogitsFor::Last, rec)?;
        self.sample(rec, n)?;
        self.clock
            .finish(&self.stream, true)
            .map_err(EngineError::Device)
    }

    /// Record one decode step (one token already on the device at the device's position)
    /// into a CUDA graph, its kernels stamped or not. Nothing runs while capturing; the
    /// buffers it names stay allocated for the graph's life (a larger batch reallocates them
    /// and drops the graphs).
    fn capture(&mut self, stamped: bool, area: usize) -> Result<Step, EngineError> {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        self.stream
            .begin_capture(mode)
            .map_err(wrap("starting a CUDA graph capture"))?;
        let recorded = self.record_step(1, stamped, area, &mut Recorder::off());
        let graph = self
            .stream
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .map_err(wrap("capturing the decode step's CUDA graph"));
        let owners = recorded?;
        match graph? {
            Some(graph) => Ok(Step { graph, owners }),
            None => Err(EngineError::Device(
                "capturing the decode step's CUDA graph: the capture came back empty".into(),
            )),
        }
    }

    /// The kernels' stamps of the step that just ended (its stream synchronised), as one span
    /// per brick and the step's gaps, into `rec`; returns the first kernel's start and the last
    /// one's end on the GPU's clock (None: no stamped launch).
    fn record_stamps(
        &self,
        owners: &[Option<Owner>],
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
        rec.add_gaps(r.gaps_ns);
        Ok(Some((r.first_ns, r.first_ns + r.window_ns)))
    }

    /// Run one brick's launches: their stamps belong to it, or, with `Sync` timing while
    /// recording, the stream is synchronised around it and the host clock times it.
    pub(super) fn brick(
        &mut self,
        rec: &mut Recorder,
        brick: impl Into<Brick>,
        layer: Option<usize>,
        work: impl FnOnce(&mut Self) -> Result<(), DriverError>,
    ) -> Result<(), EngineError> {
        let brick = brick.into();
        let layer = layer.map(|l| l as u32);
        let what = |e| device_error(&format!("brick {brick}"), e);
        if !(rec.enabled() && self.timing == Timing::Sync) {
            self.clock.enter(Some(Owner { brick, layer }));
            let r = work(self);
            self.clock.enter(None);
            return r.map_err(what);
        }
        self.stream.synchronize().map_err(what)?;
        let t0 = Instant::now();
        work(self).map_err(what)?;
        self.stream.synchronize().map_err(what)?;
        let t1 = Instant::now();
        rec.push(Span {
            brick,
            layer,
            start_ns: rec.since_origin(t0),
            dur_ns: t1.saturating_duration_since(t0).as_nanos() as u64,
            source: Source::HostSync,
        });
        Ok(())
    }

    /// Put `tokens` and the current position on the device (where they are not already), and
    /// make the batch buffers big enough.
    fn prepare(&mut self, tokens: &[u32]) -> Result<(), EngineError> {
        let n = tokens.len();
        if n > self.bufs.n {
            self.bufs = Bufs::alloc(
                &self.stream,
                &self.model,
                self.cap,
                n,
                self.k.gemm.as_ref().map(|g| (self.w.largest, g.from)),
            )?;
            // The graphs name the old buffers.
            self.graphs = Default::default();
            self.on_device = None;
        }
        if !(n == 1 && self.on_device == Some(tokens[0])) {
            self.stream
                .memcpy_htod(tokens, &mut self.bufs.tok.slice_mut(0..n))
                .map_err(wrap("uploading token ids"))?;
        }
        self.on_device = None;
        if self.dev_pos != Some(self.len) {
            let pos = [self.len as i32];
            self.stream
                .memcpy_htod(&pos, &mut self.pos)
                .map_err(wrap("uploading the position"))?;
            self.dev_pos = Some(self.len);
        }
        Ok(())
    }

    /// The host's record of the position after a step of `n` tokens ran on the device.
    fn advance_host(&mut self, n: usize) {
        self.len += n;
        self.dev_pos = Some(self.len);
    }

    /// Every launch of a step of `n` tokens (ids in `bufs.tok`, first position in `pos`).
    fn launch_layers(
        &mut self,
        n: usize,
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<usize, EngineError> {
        let model = self.model.clone();
        let c = &model.config;
        let ff = c.n_ff;

        self.brick(rec, B::Embed, None, |s| {
            let m = &s.w.token_embd;
            let (rb, cols) = (m.row_bytes as u64, m.cols as i32);
            let cfg = LaunchConfig {
                grid_dim: (ceil_div(m.cols, 256), n as u32, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let st = s.clock.stamp();
            // SAFETY: rows of token_embd for ids checked < vocab; x holds n × n_embd.
            unsafe {
                s.k.launch(&s.stream, s.k.embed(m.ty))
                    .arg(&m.data)
                    .arg(&rb)
                    .arg(&cols)
                    .arg(&s.bufs.tok)
                    .arg(&mut s.bufs.x)
                    .arg(&st.ptr)
                    .launch(cfg)
            }
            .map(|_| ())
        })?;

        const ATTN_OUT: &[B] = &[B::AttnOut, B::AttnResidual];
        const ROPE_ATTENTION: &[B] = &[B::Rope, B::Attention];
        const FFN_DOWN: &[B] = &[B::FfnDown, B::FfnResidual];
        for l in 0..c.n_layers {
            let layer = Some(l);
            // Each norm also quantizes its output for the first product it feeds.
            let qkind = s_kind(&self.w, Mat::Q(l));
            self.brick(rec, B::AttnNorm, layer, |s| {
                s.rms_norm(0, n, Norm::Attn(l), qkind)
            })?;
            self.brick(rec, B::Qkv, layer, |s| {
                let outs = [
                    (Mat::Q(l), Which::Q),
                    (Mat::K(l), Which::K),
                    (Mat::V(l), Which::V),
                ];
                s.products(n, Which::H, &outs, false, Some(qkind))
            })?;
            // RoPE runs in the launch that writes K and V to the cache (the attention brick's
            // KV write), or inside the attention kernel itself: the two bricks are one. One
            // token's attention also quantizes its output for the output projection.
            let akind = self.split_quantizes(n, l);
            self.brick(rec, Brick::Fused(ROPE_ATTENTION), layer, |s| {
                s.rope_attention(n, l, akind)
            })?;
            // The residual add happens in the output projection's epilogue.
            self.brick(rec, Brick::Fused(ATTN_OUT), layer, |s| {
                s.products(n, Which::Att, &[(Mat::O(l), Which::X)], true, akind)
            })?;
            let gkind = s_kind(&self.w, Mat::Gate(l));
            self.brick(rec, B::FfnNorm, layer, |s| {
                s.rms_norm(0, n, Norm::Ffn(l), gkind)
            })?;
            self.brick(rec, B::FfnGateUp, layer, |s| {
                let outs = [(Mat::Gate(l), Which::Gate), (Mat::Up(l), Which::Up)];
                s.products(n, Which::H, &outs, false, Some(gkind))
            })?;
            // SwiGLU quantizes its output for the down projection.
            let dkind = s_kind(&self.w, Mat::Down(l));
            self.brick(rec, B::FfnAct, layer, |s| {
                let (len, kind) = ((n * ff) as i32, kind_code(dkind));
                let st = s.clock.stamp();
                let b = &mut s.bufs;
                // SAFETY: n × n_ff values each; the activation buffers hold as many.
                unsafe {
                    s.k.launch(&s.stream, &s.k.silu_mul_quant)
                        .arg(&mut b.gate)
                        .arg(&b.up)
                        .arg(&len)
                        .arg(&kind)
                        .arg(&mut b.act.xf)
                        .arg(&mut b.act.q)
                        .arg(&mut b.act.d)
                        .arg(&mut b.act.x)
                        .arg(&st.ptr)
                        .launch(lin(n * ff))
                }
                .map(|_| ())
            })?;
            self.brick(rec, Brick::Fused(FFN_DOWN), layer, |s| {
                s.products(
                    n,
                    Which::Gate,
                    &[(Mat::Down(l), Which::X)],
                    true,
                    Some(dkind),
                )
            })?;
        }

        let (first, rows) = match want {
            LogitsFor::Last => (n - 1, 1),
            LogitsFor::All => (0, n),
        };
        let okind = s_kind(&self.w, Mat::Output);
        self.brick(rec, B::FinalNorm, None, |s| {
            s.rms_norm(first, rows, Norm::Output, okind)
        })?;
        self.brick(rec, B::LmHead, None, |s| {
            s.products(
                rows,
                Which::Normed,
                &[(Mat::Output, Which::Logits)],
                false,
                Some(okind),
            )
        })?;
        Ok(rows)
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
