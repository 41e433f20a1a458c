//! The forward pass on the GPU, brick by brick like the CPU's `forward.rs`: weights uploaded
//! once in their GGUF types, a GPU KV cache (f16, as the CPU's), activations kept on the device,
//! and greedy sampling on the GPU so a decode step copies back one token id.
//!
//! Per-brick timing (DESIGN.md): `Events` (the default) has every kernel stamp its own start
//! and end on the GPU's clock (`clock.rs`), so a decode step still replays as one CUDA graph;
//! `Sync` synchronises the stream around each brick and times with the host clock (the
//! independent cross-check); `Off` launches the kernels and nothing else.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaGraph, CudaModule, CudaSlice, CudaStream, DriverError,
    LaunchConfig, PushKernelArg,
};

use super::clock::{self, KernelClock, Owner, PinnedBuf};
use super::module;
use super::probe::GpuDesc;
use crate::brick::{Brick, BrickId as B, Recorder, Source, Span};
use crate::engine::cpu::ops::rope_table;
use crate::engine::{EngineError, LogitsFor};
use crate::model::{Model, RopeStyle};
use crate::quant::{ActType, GgmlType};

/// Per-brick timing method on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    Events,
    Sync,
    Off,
}

impl Timing {
    /// The span source this mode produces (`None`: no spans).
    pub fn source(self) -> Option<Source> {
        match self {
            Timing::Events => Some(Source::GpuGlobaltimer),
            Timing::Sync => Some(Source::HostSync),
            Timing::Off => None,
        }
    }
}

/// A device error as an engine error, out-of-memory and kernel faults named plainly.
pub fn device_error(what: &str, e: DriverError) -> EngineError {
    use sys::cudaError_enum as E;
    let why = match e.0 {
        E::CUDA_ERROR_OUT_OF_MEMORY => "out of GPU memory".to_string(),
        E::CUDA_ERROR_ILLEGAL_ADDRESS
        | E::CUDA_ERROR_MISALIGNED_ADDRESS
        | E::CUDA_ERROR_LAUNCH_FAILED
        | E::CUDA_ERROR_ILLEGAL_INSTRUCTION => format!("a GPU kernel failed ({:?})", e.0),
        other => format!("{other:?}"),
    };
    EngineError::Device(format!("{what}: {why}"))
}

fn wrap(what: &'static str) -> impl FnOnce(DriverError) -> EngineError {
    move |e| device_error(what, e)
}

/// A weight matrix on the device, in its GGUF type.
struct GMat {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    data: CudaSlice<u8>,
}

struct GLayer {
    attn_norm: CudaSlice<f32>,
    wq: GMat,
    wk: GMat,
    wv: GMat,
    bq: Option<CudaSlice<f32>>,
    bk: Option<CudaSlice<f32>>,
    bv: Option<CudaSlice<f32>>,
    wo: GMat,
    ffn_norm: CudaSlice<f32>,
    w_gate: GMat,
    w_up: GMat,
    w_down: GMat,
}

struct GWeights {
    token_embd: GMat,
    /// `None` when the output head is tied to the embedding.
    output: Option<GMat>,
    output_norm: CudaSlice<f32>,
    layers: Vec<GLayer>,
    bytes: usize,
}

/// Activation buffers for a batch of up to `n` tokens.
struct Bufs {
    n: usize,
    x: CudaSlice<f32>,
    h: CudaSlice<f32>,
    q: CudaSlice<f32>,
    k: CudaSlice<f32>,
    v: CudaSlice<f32>,
    att: CudaSlice<f32>,
    gate: CudaSlice<f32>,
    up: CudaSlice<f32>,
    normed: CudaSlice<f32>,
    logits: CudaSlice<f32>,
    scores: CudaSlice<f32>,
    tok: CudaSlice<u32>,
    /// The argmax's per-block bests (kernels/argmax.cu).
    part: CudaSlice<f32>,
    /// The matrix products' input, rounded or quantized as the weight type's dot sees it.
    act: ActBufs,
}

/// One activation batch in a weight type's vec-dot format (kernels/act_quant.cu): rounded
/// floats for float weights, or int8 values with their block scales and Q8_1 sums / Q8_K
/// bsums for quantized weights.
struct ActBufs {
    xf: CudaSlice<f32>,
    q: CudaSlice<i8>,
    d: CudaSlice<f32>,
    x: CudaSlice<f32>,
}

impl ActBufs {
    /// Room for `len` activation values.
    fn new(s: &Arc<CudaStream>, len: usize) -> Result<ActBufs, EngineError> {
        let f = |n: usize| {
            s.alloc_zeros::<f32>(n.max(1))
                .map_err(wrap("allocating activations"))
        };
        Ok(ActBufs {
            xf: f(len)?,
            q: s.alloc_zeros::<i8>(len.max(1))
                .map_err(wrap("allocating activations"))?,
            d: f(len / 32 + 1)?,
            x: f(len / 16 + 1)?,
        })
    }
}

/// A weight type's product kernels: one for float weights, or one for a single token and
/// one for batches of up to 8 for quantized weights (kernels/common.cuh).
enum Product {
    Float(CudaFunction),
    Quant {
        one: CudaFunction,
        batch: CudaFunction,
    },
}

struct Kernels {
    /// (product, embed) per weight type.
    typed: Vec<(GgmlType, Product, CudaFunction)>,
    rope: CudaFunction,
    kv_store: CudaFunction,
    attention: CudaFunction,
    silu_mul_quant: CudaFunction,
    rms_norm_quant: CudaFunction,
    argmax_blocks: CudaFunction,
    argmax_final: CudaFunction,
    act_quant: CudaFunction,
    advance: CudaFunction,
}

impl Kernels {
    fn load(m: &Arc<CudaModule>) -> Result<Kernels, String> {
        let f = |n: &str| module::function(m, n);
        let mut typed = Vec::new();
        for ty in GgmlType::ALL {
            let name = ty.name().to_lowercase();
            let product = if !ty.is_quantized() {
                Product::Float(f(&format!("matvec_{name}"))?)
            } else {
                Product::Quant {
                    one: f(&format!("qmv1_{name}"))?,
                    batch: f(&format!("qmv8_{name}"))?,
                }
            };
            typed.push((ty, product, f(&format!("embed_{name}"))?));
        }
        Ok(Kernels {
            typed,
            rope: f("rope")?,
            kv_store: f("kv_store")?,
            attention: f("attention")?,
            silu_mul_quant: f("silu_mul_quant")?,
            rms_norm_quant: f("rms_norm_quant")?,
            argmax_blocks: f("argmax_blocks")?,
            argmax_final: f("argmax_final")?,
            act_quant: f("act_quant")?,
            advance: f("advance")?,
        })
    }

    fn product(&self, ty: GgmlType) -> &Product {
        &self
            .typed
            .iter()
            .find(|t| t.0 == ty)
            .expect("every type has kernels")
            .1
    }

    fn embed(&self, ty: GgmlType) -> &CudaFunction {
        &self
            .typed
            .iter()
            .find(|t| t.0 == ty)
            .expect("every type has kernels")
            .2
    }
}

/// Blocks of the argmax's first pass (ARGMAX_BLOCKS in kernels/argmax.cu).
const ARGMAX_BLOCKS: u32 = 128;

/// Kernel launches a step may time: a layer takes at most 20 (seven products, each with its
/// activation quantization, and six more kernels), plus the embedding, head and sampling.
fn clock_slots(n_layers: usize) -> usize {
    24 * n_layers + 32
}

/// A captured decode step and the bricks its stamped launches belong to.
struct Step {
    graph: CudaGraph,
    owners: Vec<Option<Owner>>,
}

/// The model on one GPU with its KV cache.
pub struct CudaEngine {
    model: Arc<Model>,
    gpu: GpuDesc,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    k: Kernels,
    w: GWeights,
    kc: CudaSlice<u16>,
    vc: CudaSlice<u16>,
    /// RoPE's (cos, sin) for every position below `cap`, from the CPU engine's table.
    rope: CudaSlice<f32>,
    /// The next step's first position, on the device (kernels read it, so a graph replays
    /// at the current position); `dev_pos` is the host's knowledge of it.
    pos: CudaSlice<i32>,
    dev_pos: Option<usize>,
    /// The captured decode step (one token, argmax included), unstamped [0] and stamped [1],
    /// replayed unless bricks are timed with host syncs.
    graphs: [Option<Step>; 2],
    cap: usize,
    len: usize,
    bufs: Bufs,
    timing: Timing,
    /// Per-launch timestamps (`Timing::Events`).
    clock: KernelClock,
    /// The sampled token id, copied back inside the step.
    host_tok: PinnedBuf<u32>,
    /// The device's `tok[0]` already holds this id (written there by the last argmax).
    on_device: Option<u32>,
    module: Arc<CudaModule>,
    /// Whether the kernels were compiled now or came from the disk cache.
    pub module_origin: module::Origin,
}

fn upload_mat(
    s: &Arc<CudaStream>,
    w: &crate::model::Weights,
    m: &crate::model::weights::Mat,
) -> Result<GMat, EngineError> {
    Ok(GMat {
        ty: m.ty,
        rows: m.rows,
        cols: m.cols,
        row_bytes: m.row_bytes(),
        data: s
            .clone_htod(w.bytes(m))
            .map_err(|e| device_error(&format!("uploading {}", m.name), e))?,
    })
}

fn upload_vec(s: &Arc<CudaStream>, v: &[f32]) -> Result<CudaSlice<f32>, EngineError> {
    s.clone_htod(v)
        .map_err(|e| device_error("uploading a weight vector", e))
}

fn ceil_div(a: usize, b: usize) -> u32 {
    a.div_ceil(b) as u32
}

fn lin(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (ceil_div(n.max(1), 256), 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// kernels/act_quant.cu's code for an activation format.
fn kind_code(kind: ActType) -> i32 {
    match kind {
        ActType::F32 => 0,
        ActType::F16 => 1,
        ActType::BF16 => 2,
        ActType::Q8_0 => 3,
        ActType::Q8_1 => 4,
        ActType::Q8_K => 5,
    }
}

/// The activation format matrix `m`'s product takes.
fn s_kind(w: &GWeights, m: Mat) -> ActType {
    ActType::for_weights(mat(w, m).ty)
}

/// How a product treats its input and output beyond `out = W · x`.
#[derive(Clone, Copy, Default)]
struct Epilogue<'a> {
    /// `act` already holds `x` in this weight type's activation format (a previous product
    /// of the same input quantized it).
    quantized: bool,
    /// A bias row added to every output row.
    bias: Option<&'a CudaSlice<f32>>,
    /// Add into `out` instead of overwriting it (a residual add fused into the product).
    accumulate: bool,
}

/// `out[t] = W · x[t]` for `n` rows of `x`: the activations first rounded or quantized as
/// llama.cpp's CPU does for W's type (kernels/act_quant.cu), then the type's product kernel,
/// which reproduces the CPU's float order (kernels/common.cuh). `x` and `act` hold at least
/// `n × cols` values, `out` `n × rows`.
// The operands are distinct borrows of the engine's fields; bundling them would only move
// the list into a struct literal at each call.
#[allow(clippy::too_many_arguments)]
fn product(
    s: &Arc<CudaStream>,
    k: &Kernels,
    m: &GMat,
    n: usize,
    x: &CudaSlice<f32>,
    act: &mut ActBufs,
    out: &mut CudaSlice<f32>,
    ep: Epilogue,
    clock: &mut KernelClock,
) -> Result<(), DriverError> {
    let kind = kind_code(ActType::for_weights(m.ty));
    let total = (n * m.cols) as i32;
    // SAFETY: n × cols values from x into the activation buffers (sized for the widest row).
    if !ep.quantized {
        let st = clock.stamp();
        unsafe {
            s.launch_builder(&k.act_quant)
                .arg(x)
                .arg(&total)
                .arg(&kind)
                .arg(&mut act.xf)
                .arg(&mut act.q)
                .arg(&mut act.d)
                .arg(&mut act.x)
                .arg(&st.ptr)
                .arg(&st.slot)
                .launch(LaunchConfig {
                    grid_dim: (ceil_div(n * m.cols, 256), 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                })
        }?;
    }
    let (rb, rows, cols, nn) = (m.row_bytes as u64, m.rows as i32, m.cols as i32, n as i32);
    let accumulate = i32::from(ep.accumulate);
    let null = 0u64;
    // Float weights: 16 rows per block of 128 threads (8 per row), up to 8 tokens; quantized
    // weights: one thread block per row and one token, or up to 8 (kernels/common.cuh).
    let (f, grid, quantized) = match k.product(m.ty) {
        Product::Float(f) => (f, (ceil_div(m.rows, 16), ceil_div(n, 8), 1), false),
        Product::Quant { one, .. } if n == 1 => (one, (m.rows as u32, 1, 1), true),
        Product::Quant { batch, .. } => (batch, (m.rows as u32, ceil_div(n, 8), 1), true),
    };
    let cfg = LaunchConfig {
        grid_dim: grid,
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    let st = clock.stamp();
    // SAFETY: reads rows × row_bytes of weights and n × cols activations (rounded floats, or
    // int8 values with their scales and sums), writes n × rows.
    unsafe {
        let mut l = s.launch_builder(f);
        l.arg(&m.data).arg(&rb).arg(&rows).arg(&cols);
        if quantized {
            l.arg(&act.q).arg(&act.d).arg(&act.x);
        } else {
            l.arg(&act.xf);
        }
        l.arg(&nn);
        match ep.bias {
            Some(b) => l.arg(b),
            None => l.arg(&null),
        };
        l.arg(&accumulate)
            .arg(out)
            .arg(&st.ptr)
            .arg(&st.slot)
            .launch(cfg)
    }?;
    Ok(())
}

impl CudaEngine {
    /// Put `model` on GPU `gpu` with room for `ctx` positions (capped at the model's context).
    pub fn new(
        model: Arc<Model>,
        gpu: &GpuDesc,
        ctx: usize,
        timing: Timing,
    ) -> Result<CudaEngine, EngineError> {
        let cx = CudaContext::new(gpu.ordinal).map_err(wrap("creating a CUDA context"))?;
        // One stream: cudarc's cross-stream event tracking is pure overhead here.
        // SAFETY: nothing in this engine uses a second stream.
        unsafe { cx.disable_event_tracking() };
        // Not the legacy default stream: CUDA graphs cannot be captured from it.
        let stream = cx.new_stream().map_err(wrap("creating a CUDA stream"))?;
        let (m, origin) = module::load(&cx, &gpu.arch()).map_err(EngineError::Device)?;
        let k = Kernels::load(&m).map_err(EngineError::Device)?;
        let c = &model.config;
        if c.head_dim > 128 {
            return Err(EngineError::Device(format!(
                "head dimension {} is over the GPU attention kernel's 128 (kernels/attention.cu)",
                c.head_dim
            )));
        }
        let cap = ctx.clamp(1, c.context_length);
        let wt = &model.weights;
        let mut layers = Vec::with_capacity(wt.layers.len());
        let mut bytes = 0usize;
        let bias = |b: &Option<Vec<f32>>| b.as_ref().map(|v| upload_vec(&stream, v)).transpose();
        for lw in &wt.layers {
            let l = GLayer {
                attn_norm: upload_vec(&stream, &lw.attn_norm)?,
                wq: upload_mat(&stream, wt, &lw.wq)?,
                wk: upload_mat(&stream, wt, &lw.wk)?,
                wv: upload_mat(&stream, wt, &lw.wv)?,
                bq: bias(&lw.bq)?,
                bk: bias(&lw.bk)?,
                bv: bias(&lw.bv)?,
                wo: upload_mat(&stream, wt, &lw.wo)?,
                ffn_norm: upload_vec(&stream, &lw.ffn_norm)?,
                w_gate: upload_mat(&stream, wt, &lw.w_gate)?,
                w_up: upload_mat(&stream, wt, &lw.w_up)?,
                w_down: upload_mat(&stream, wt, &lw.w_down)?,
            };
            for m in [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down] {
                bytes += m.data.len();
            }
            layers.push(l);
        }
        let token_embd = upload_mat(&stream, wt, &wt.token_embd)?;
        bytes += token_embd.data.len();
        let output = if wt.tied_output {
            None
        } else {
            let o = upload_mat(&stream, wt, &wt.output)?;
            bytes += o.data.len();
            Some(o)
        };
        let w = GWeights {
            token_embd,
            output,
            output_norm: upload_vec(&stream, &wt.output_norm)?,
            layers,
            bytes,
        };
        let kv_len = c.n_layers * cap * c.kv_dim();
        let kc = stream
            .alloc_zeros::<u16>(kv_len)
            .map_err(wrap("allocating the KV cache"))?;
        let vc = stream
            .alloc_zeros::<u16>(kv_len)
            .map_err(wrap("allocating the KV cache"))?;
        let bufs = Self::alloc_bufs(&stream, &model, cap, 1)?;
        let table: Vec<f32> = (0..cap)
            .flat_map(|pos| rope_table(pos, c.rope_dims, c.rope_base))
            .flat_map(|(cos, sin)| [cos, sin])
            .collect();
        let rope = upload_vec(&stream, &table)?;
        let pos = stream
            .alloc_zeros::<i32>(1)
            .map_err(wrap("allocating the position"))?;
        let clock = KernelClock::new(&stream, clock_slots(c.n_layers))
            .map_err(wrap("allocating the kernel clock"))?;
        let host_tok = PinnedBuf::new(&cx, 1).map_err(wrap("allocating pinned memory"))?;
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
            graphs: [None, None],
            cap,
            len: 0,
            bufs,
            timing,
            clock,
            host_tok,
            on_device: None,
            module: m,
            module_origin: origin,
        })
    }

    fn alloc_bufs(
        s: &Arc<CudaStream>,
        model: &Model,
        cap: usize,
        n: usize,
    ) -> Result<Bufs, EngineError> {
        let c = &model.config;
        let a = |len: usize| {
            s.alloc_zeros::<f32>(len.max(1))
                .map_err(wrap("allocating activations"))
        };
        Ok(Bufs {
            n,
            x: a(n * c.n_embd)?,
            h: a(n * c.n_embd)?,
            q: a(n * c.q_dim())?,
            k: a(n * c.kv_dim())?,
            v: a(n * c.kv_dim())?,
            att: a(n * c.q_dim())?,
            gate: a(n * c.n_ff)?,
            up: a(n * c.n_ff)?,
            normed: a(n * c.n_embd)?,
            logits: a(n * model.weights.output.rows)?,
            scores: a(2 * n * c.n_heads * cap)?,
            act: ActBufs::new(s, n * c.n_embd.max(c.q_dim()).max(c.n_ff))?,
            part: a(2 * ARGMAX_BLOCKS as usize)?,
            tok: s
                .alloc_zeros::<u32>(n.max(1))
                .map_err(wrap("allocating activations"))?,
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
        self.len = 0;
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

    /// Evaluate `tokens`; logits for the last or every token, copied back.
    pub fn eval(
        &mut self,
        tokens: &[u32],
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        self.check(tokens)?;
        let t0 = Instant::now();
        let n = tokens.len();
        self.prepare(tokens)?;
        self.clock.arm(self.stamped(rec));
        let rows = self.launch_layers(n, want, rec)?;
        self.advance_device(n)?;
        let owners = self
            .clock
            .finish(&self.stream)
            .map_err(EngineError::Device)?;
        let vocab = self.model.weights.output.rows;
        let host = self
            .stream
            .clone_dtoh(&self.bufs.logits.slice(0..rows * vocab))
            .map_err(wrap("copying logits back"))?;
        self.advance_host(n);
        self.record_stamps(&owners, rec, t0)?;
        Ok(host.chunks_exact(vocab).map(|r| r.to_vec()).collect())
    }

    /// Evaluate `tokens` and pick the next token greedily on the GPU; only its id comes back.
    /// A single token replays a CUDA graph of the whole step (captured on first use, with and
    /// without kernel stamps), so the host issues one launch per token; only `Sync` timing,
    /// which needs the host between bricks, launches brick by brick.
    pub fn eval_argmax(&mut self, tokens: &[u32], rec: &mut Recorder) -> Result<u32, EngineError> {
        self.check(tokens)?;
        let t0 = Instant::now();
        let n = tokens.len();
        let stamped = self.stamped(rec);
        let synced = rec.enabled() && self.timing == Timing::Sync;
        self.prepare(tokens)?;
        let graphed = n == 1 && !synced;
        let owners = if graphed {
            let i = usize::from(stamped);
            if self.graphs[i].is_none() {
                self.graphs[i] = Some(self.capture(stamped)?);
            }
            let step = self.graphs[i].as_ref().expect("captured above");
            step.graph
                .launch()
                .map_err(wrap("replaying the decode step's CUDA graph"))?;
            None
        } else {
            Some(self.record_step(n, stamped, rec)?)
        };
        self.stream
            .synchronize()
            .map_err(wrap("waiting for the decode step"))?;
        self.advance_host(n);
        let id = self.host_tok.read()[0];
        self.on_device = Some(id);
        if stamped {
            let owners: &[Option<Owner>] = match &owners {
                Some(o) => o,
                None => self.graphs[1].as_ref().map_or(&[], |s| &s.owners),
            };
            self.record_stamps(owners, rec, t0)?;
        }
        Ok(id)
    }

    /// Every launch of a step that samples greedily: the layers, the argmax (which also moves
    /// the device's position on), and the copies of the token id and the stamps to the host.
    /// Returns the owners of the stamped launches.
    fn record_step(
        &mut self,
        n: usize,
        stamped: bool,
        rec: &mut Recorder,
    ) -> Result<Vec<Option<Owner>>, EngineError> {
        self.clock.arm(stamped);
        self.launch_layers(n, LogitsFor::Last, rec)?;
        self.sample(rec, n)?;
        self.host_tok
            .copy_from(&self.stream, &self.bufs.tok, 1)
            .map_err(wrap("copying the token id back"))?;
        self.clock.finish(&self.stream).map_err(EngineError::Device)
    }

    /// Record one decode step (one token already on the device at the device's position)
    /// into a CUDA graph, its kernels stamped or not. Nothing runs while capturing; the
    /// buffers it names stay allocated for the graph's life (a larger batch reallocates them
    /// and drops the graphs).
    fn capture(&mut self, stamped: bool) -> Result<Step, EngineError> {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        self.stream
            .begin_capture(mode)
            .map_err(wrap("starting a CUDA graph capture"))?;
        let recorded = self.record_step(1, stamped, &mut Recorder::off());
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
    /// per brick and the step's gaps, into `rec`.
    fn record_stamps(
        &self,
        owners: &[Option<Owner>],
        rec: &mut Recorder,
        t0: Instant,
    ) -> Result<(), EngineError> {
        if owners.is_empty() {
            return Ok(());
        }
        let r = clock::resolve(owners, self.clock.stamps())
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
        Ok(())
    }

    /// The greedy pick on the GPU: the last logits row's argmax into `tok[0]`; the device's
    /// position moves on by the step's `n` tokens in the same launch.
    fn sample(&mut self, rec: &mut Recorder, n: usize) -> Result<(), EngineError> {
        let vocab = self.model.weights.output.rows as i32;
        let nn = n as i32;
        self.brick(rec, B::Sample, None, |e| {
            let cfg = |blocks| LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (1024, 1, 1),
                shared_mem_bytes: 0,
            };
            let (s1, s2) = (e.clock.stamp(), e.clock.stamp());
            let b = &mut e.bufs;
            // SAFETY: argmax_blocks reads `vocab` logits and writes ARGMAX_BLOCKS (128) pairs
            // into `part`; argmax_final reads them, writes tok[0] and adds n to pos[0].
            unsafe {
                e.stream
                    .launch_builder(&e.k.argmax_blocks)
                    .arg(&b.logits)
                    .arg(&vocab)
                    .arg(&mut b.part)
                    .arg(&s1.ptr)
                    .arg(&s1.slot)
                    .launch(cfg(ARGMAX_BLOCKS))?;
                e.stream
                    .launch_builder(&e.k.argmax_final)
                    .arg(&b.part)
                    .arg(&mut b.tok)
                    .arg(&mut e.pos)
                    .arg(&nn)
                    .arg(&s2.ptr)
                    .arg(&s2.slot)
                    .launch(cfg(1))
            }
            .map(|_| ())
        })
    }

    /// Run one brick's launches: their stamps belong to it, or, with `Sync` timing while
    /// recording, the stream is synchronised around it and the host clock times it.
    fn brick(
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
            self.bufs = Self::alloc_bufs(&self.stream, &self.model, self.cap, n)?;
            // The graphs name the old buffers.
            self.graphs = [None, None];
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

    /// The position moves on by `n` tokens on the device (a kernel, so a graph can hold it).
    fn advance_device(&mut self, n: usize) -> Result<(), EngineError> {
        let nn = n as i32;
        let st = self.clock.stamp();
        // SAFETY: pos holds one i32.
        unsafe {
            self.stream
                .launch_builder(&self.k.advance)
                .arg(&mut self.pos)
                .arg(&nn)
                .arg(&st.ptr)
                .arg(&st.slot)
                .launch(LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (1, 1, 1),
                    shared_mem_bytes: 0,
                })
        }
        .map(|_| ())
        .map_err(wrap("advancing the position"))
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
                s.stream
                    .launch_builder(s.k.embed(m.ty))
                    .arg(&m.data)
                    .arg(&rb)
                    .arg(&cols)
                    .arg(&s.bufs.tok)
                    .arg(&mut s.bufs.x)
                    .arg(&st.ptr)
                    .arg(&st.slot)
                    .launch(cfg)
            }
            .map(|_| ())
        })?;

        const ATTN_OUT: &[B] = &[B::AttnOut, B::AttnResidual];
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
            self.brick(rec, B::Rope, layer, |s| s.rope(n))?;
            self.brick(rec, B::Attention, layer, |s| s.attention(n, l))?;
            // The residual add happens in the output projection's epilogue.
            self.brick(rec, Brick::Fused(ATTN_OUT), layer, |s| {
                s.products(n, Which::Att, &[(Mat::O(l), Which::X)], true, None)
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
                    s.stream
                        .launch_builder(&s.k.silu_mul_quant)
                        .arg(&mut b.gate)
                        .arg(&b.up)
                        .arg(&len)
                        .arg(&kind)
                        .arg(&mut b.act.xf)
                        .arg(&mut b.act.q)
                        .arg(&mut b.act.d)
                        .arg(&mut b.act.x)
                        .arg(&st.ptr)
                        .arg(&st.slot)
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

    /// `out = M · input` for each (M, out) of `outs`, quantizing `input` once per run of
    /// matrices sharing an activation format; `accumulate` adds into `out` (a fused residual).
    /// Q/K/V biases are added in the products' epilogue.
    fn products(
        &mut self,
        n: usize,
        input: Which,
        outs: &[(Mat, Which)],
        accumulate: bool,
        pre: Option<ActType>,
    ) -> Result<(), DriverError> {
        let mut last = pre;
        for &(which, output) in outs {
            let m = mat(&self.w, which);
            let kind = ActType::for_weights(m.ty);
            let bias = match which {
                Mat::Q(l) => self.w.layers[l].bq.as_ref(),
                Mat::K(l) => self.w.layers[l].bk.as_ref(),
                Mat::V(l) => self.w.layers[l].bv.as_ref(),
                _ => None,
            };
            let ep = Epilogue {
                quantized: last == Some(kind),
                bias,
                accumulate,
            };
            let act: *mut ActBufs = &mut self.bufs.act;
            let (x, out) = self.bufs.pair(input, output);
            // SAFETY: `act` is a field distinct from both buffers `pair` returned.
            let act = unsafe { &mut *act };
            product(
                &self.stream,
                &self.k,
                m,
                n,
                x,
                act,
                out,
                ep,
                &mut self.clock,
            )?;
            last = Some(kind);
        }
        Ok(())
    }

    fn rope(&mut self, n: usize) -> Result<(), DriverError> {
        let c = &self.model.config;
        let half = c.rope_dims / 2;
        let cfg = LaunchConfig {
            grid_dim: ((c.n_heads + c.n_kv_heads) as u32, n as u32, 1),
            block_dim: ((half.div_ceil(32) * 32).max(32) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let args = (
            c.n_heads as i32,
            c.n_kv_heads as i32,
            c.head_dim as i32,
            c.rope_dims as i32,
            i32::from(c.arch.rope_style() == RopeStyle::Neox),
        );
        let st = self.clock.stamp();
        let q: *mut CudaSlice<f32> = &mut self.bufs.q;
        // SAFETY: q and k are distinct fields.
        let q = unsafe { &mut *q };
        // SAFETY: n × heads × head_dim values of Q and of K, rotated in place; the table
        // holds every position below the capacity (pos + n is checked against it).
        unsafe {
            self.stream
                .launch_builder(&self.k.rope)
                .arg(q)
                .arg(&mut self.bufs.k)
                .arg(&args.0)
                .arg(&args.1)
                .arg(&args.2)
                .arg(&args.3)
                .arg(&self.pos)
                .arg(&self.rope)
                .arg(&args.4)
                .arg(&st.ptr)
                .arg(&st.slot)
                .launch(cfg)
        }
        .map(|_| ())
    }

    /// Rows `first..first + n` of X normed into H (the final norm: into Normed), and quantized
    /// as `kind` into the activation buffers for the product that follows.
    fn rms_norm(
        &mut self,
        first: usize,
        n: usize,
        norm: Norm,
        kind: ActType,
    ) -> Result<(), DriverError> {
        let c = &self.model.config;
        let (cols, eps) = (c.n_embd, c.norm_eps);
        let w = match norm {
            Norm::Attn(l) => &self.w.layers[l].attn_norm,
            Norm::Ffn(l) => &self.w.layers[l].ffn_norm,
            Norm::Output => &self.w.output_norm,
        };
        let cfg = LaunchConfig {
            grid_dim: (n as u32, 1, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        let (c, kind) = (cols as i32, kind_code(kind));
        let st = self.clock.stamp();
        let b = &mut self.bufs;
        let x = b.x.slice(first * cols..);
        let out = if norm == Norm::Output {
            &mut b.normed
        } else {
            &mut b.h
        };
        // SAFETY: n rows of `cols` values in and out; the activation buffers hold as many.
        unsafe {
            self.stream
                .launch_builder(&self.k.rms_norm_quant)
                .arg(&x)
                .arg(w)
                .arg(&c)
                .arg(&eps)
                .arg(out)
                .arg(&kind)
                .arg(&mut b.act.xf)
                .arg(&mut b.act.q)
                .arg(&mut b.act.d)
                .arg(&mut b.act.x)
                .arg(&st.ptr)
                .arg(&st.slot)
                .launch(cfg)
        }
        .map(|_| ())
    }

    fn attention(&mut self, n: usize, l: usize) -> Result<(), DriverError> {
        let c = &self.model.config;
        let kvd = c.kv_dim();
        let layer = l * self.cap * kvd..(l + 1) * self.cap * kvd;
        let (kvd_i, n_i) = (kvd as i32, n as i32);
        let mut kc = self.kc.slice_mut(layer.clone());
        let mut vc = self.vc.slice_mut(layer);
        let (s1, s2) = (self.clock.stamp(), self.clock.stamp());
        let b = &mut self.bufs;
        // SAFETY: n × kv_dim values into cache rows pos..pos+n (< capacity, checked).
        unsafe {
            self.stream
                .launch_builder(&self.k.kv_store)
                .arg(&b.k)
                .arg(&b.v)
                .arg(&mut kc)
                .arg(&mut vc)
                .arg(&kvd_i)
                .arg(&self.pos)
                .arg(&n_i)
                .arg(&s1.ptr)
                .arg(&s1.slot)
                .launch(lin(n * kvd))
        }?;
        let cfg = LaunchConfig {
            grid_dim: (c.n_heads as u32, n as u32, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: (c.head_dim * 4) as u32,
        };
        let args = (
            c.n_heads as i32,
            c.n_kv_heads as i32,
            c.head_dim as i32,
            self.cap as i32,
            1.0 / (c.head_dim as f32).sqrt(),
            // llama.cpp's CPU kernel switches to its tiled f32 path from 64 queries.
            i32::from(n >= 64),
        );
        // SAFETY: queries n × q_dim, cache rows 0..pos+n, scores n × heads × capacity.
        unsafe {
            self.stream
                .launch_builder(&self.k.attention)
                .arg(&b.q)
                .arg(&mut kc)
                .arg(&mut vc)
                .arg(&args.0)
                .arg(&args.1)
                .arg(&args.2)
                .arg(&self.pos)
                .arg(&args.3)
                .arg(&args.4)
                .arg(&args.5)
                .arg(&mut b.scores)
                .arg(&mut b.att)
                .arg(&s2.ptr)
                .arg(&s2.slot)
                .launch(cfg)
        }
        .map(|_| ())
    }
}

fn mat(w: &GWeights, m: Mat) -> &GMat {
    match m {
        Mat::Q(l) => &w.layers[l].wq,
        Mat::K(l) => &w.layers[l].wk,
        Mat::V(l) => &w.layers[l].wv,
        Mat::O(l) => &w.layers[l].wo,
        Mat::Gate(l) => &w.layers[l].w_gate,
        Mat::Up(l) => &w.layers[l].w_up,
        Mat::Down(l) => &w.layers[l].w_down,
        Mat::Output => w.output.as_ref().unwrap_or(&w.token_embd),
    }
}

/// Which norm weights.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Norm {
    Attn(usize),
    Ffn(usize),
    Output,
}

/// Which weight matrix.
#[derive(Clone, Copy)]
enum Mat {
    Q(usize),
    K(usize),
    V(usize),
    O(usize),
    Gate(usize),
    Up(usize),
    Down(usize),
    Output,
}

/// Which activation buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    X,
    H,
    Q,
    K,
    V,
    Att,
    Gate,
    Up,
    Normed,
    Logits,
}

impl Bufs {
    fn get_mut(&mut self, w: Which) -> &mut CudaSlice<f32> {
        match w {
            Which::X => &mut self.x,
            Which::H => &mut self.h,
            Which::Q => &mut self.q,
            Which::K => &mut self.k,
            Which::V => &mut self.v,
            Which::Att => &mut self.att,
            Which::Gate => &mut self.gate,
            Which::Up => &mut self.up,
            Which::Normed => &mut self.normed,
            Which::Logits => &mut self.logits,
        }
    }

    /// Two distinct buffers: one to read, one to write.
    fn pair(&mut self, a: Which, b: Which) -> (&CudaSlice<f32>, &mut CudaSlice<f32>) {
        assert!(a != b, "a kernel's input and output must differ");
        let pa: *const CudaSlice<f32> = self.get_mut(a);
        let pb = self.get_mut(b);
        // SAFETY: a != b, so the two references point at different fields.
        (unsafe { &*pa }, pb)
    }
}

impl CudaEngine {
    /// The report's GPU description.
    pub fn gpu_info(&self) -> crate::report::types::GpuInfo {
        let p = super::probe::probe();
        crate::report::types::GpuInfo {
            name: self.gpu.name.clone(),
            driver: p
                .driver_cuda_version
                .map(|v| format!("CUDA driver API {v}"))
                .unwrap_or_else(|| "unknown".into()),
            cuda: p
                .nvrtc_version
                .map(|v| format!("NVRTC {v}"))
                .unwrap_or_else(|| "unknown".into()),
            memory_total_bytes: self.gpu.memory_total_bytes,
            compute_capability: format!(
                "{}.{}",
                self.gpu.compute_capability.0, self.gpu.compute_capability.1
            ),
        }
    }

    /// The roofline's peaks measured on this GPU: device-to-device copy bandwidth (bytes read
    /// plus written, best of 5 copies of 256 MiB) and f32 FMA throughput (best of 3), both timed
    /// with CUDA events.
    pub fn measure_peaks(&self) -> Result<crate::profiler::hardware::MeasuredPeaks, String> {
        use crate::brick::peaks::Peak;
        let err = |e: DriverError| device_error("measuring the GPU's peaks", e).to_string();
        let s = &self.stream;
        let n = 64usize << 20; // f32s: 256 MiB
        let src = s.alloc_zeros::<f32>(n).map_err(err)?;
        let mut dst = s.alloc_zeros::<f32>(n).map_err(err)?;
        let ev = |c: &Arc<CudaContext>| c.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
        let (a, b) = (ev(&self.ctx).map_err(err)?, ev(&self.ctx).map_err(err)?);
        let mut best_ms = f32::MAX;
        for _ in 0..5 {
            a.record(s).map_err(err)?;
            s.memcpy_dtod(&src, &mut dst).map_err(err)?;
            b.record(s).map_err(err)?;
            best_ms = best_ms.min(a.elapsed_ms(&b).map_err(err)?);
        }
        let bandwidth_gbps = 2.0 * (n * 4) as f64 / (best_ms as f64 * 1e-3) / 1e9;
        drop((src, dst));

        let sms = self
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(err)? as usize;
        let (blocks, threads, iters) = (sms * 8, 256usize, 4096i32);
        let f = module::function(&self.module, "fma_probe")?;
        let mut out = s.alloc_zeros::<f32>(blocks * threads).map_err(err)?;
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut best_fma = f32::MAX;
        for _ in 0..3 {
            a.record(s).map_err(err)?;
            // SAFETY: writes blocks × threads floats into `out`.
            unsafe { s.launch_builder(&f).arg(&mut out).arg(&iters).launch(cfg) }.map_err(err)?;
            b.record(s).map_err(err)?;
            best_fma = best_fma.min(a.elapsed_ms(&b).map_err(err)?);
        }
        let flops = 2.0 * 8.0 * iters as f64 * (blocks * threads) as f64;
        Ok(crate::profiler::hardware::MeasuredPeaks {
            bandwidth: Peak {
                value: bandwidth_gbps,
                source: "d2d_copy",
            },
            compute: Peak {
                value: flops / (best_fma as f64 * 1e-3) / 1e9,
                source: "gpu_fma_probe",
            },
        })
    }
}

/// Single kernels on their own, for tests against the CPU reference: a typed matrix product
/// and an embedding gather on weights given as GGUF bytes.
pub struct KernelCheck {
    stream: Arc<CudaStream>,
    k: Kernels,
}

impl KernelCheck {
    pub fn new(gpu: &GpuDesc) -> Result<KernelCheck, EngineError> {
        let cx = CudaContext::new(gpu.ordinal).map_err(wrap("creating a CUDA context"))?;
        let (m, _) = module::load(&cx, &gpu.arch()).map_err(EngineError::Device)?;
        let stream = cx.default_stream();
        Ok(KernelCheck {
            stream,
            k: Kernels::load(&m).map_err(EngineError::Device)?,
        })
    }

    /// `out[t][r] = W[r] · x[t]` for the `x.len() / cols` rows of `x`, as the engine computes
    /// it (activations quantized on the GPU, then the type's product kernel).
    pub fn matvec(
        &self,
        ty: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        x: &[f32],
    ) -> Result<Vec<f32>, EngineError> {
        let n = x.len() / cols;
        let s = &self.stream;
        let m = GMat {
            ty,
            rows,
            cols,
            row_bytes: w.len() / rows,
            data: s.clone_htod(w).map_err(wrap("kernel check"))?,
        };
        let dx = s.clone_htod(x).map_err(wrap("kernel check"))?;
        let mut act = ActBufs::new(s, x.len())?;
        let mut out = s
            .alloc_zeros::<f32>(n * rows)
            .map_err(wrap("kernel check"))?;
        product(
            s,
            &self.k,
            &m,
            n,
            &dx,
            &mut act,
            &mut out,
            Epilogue::default(),
            // Never armed: the kernels run without stamps.
            &mut KernelClock::new(s, 1).map_err(wrap("kernel check"))?,
        )
        .map_err(wrap("kernel check"))?;
        s.clone_dtoh(&out).map_err(wrap("kernel check"))
    }

    /// Rows `tokens` of `W` (`rows × cols`), dequantized.
    pub fn embed(
        &self,
        ty: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        tokens: &[u32],
    ) -> Result<Vec<f32>, EngineError> {
        let s = &self.stream;
        let dw = s.clone_htod(w).map_err(wrap("kernel check"))?;
        let dt = s.clone_htod(tokens).map_err(wrap("kernel check"))?;
        let mut out = s
            .alloc_zeros::<f32>(tokens.len() * cols)
            .map_err(wrap("kernel check"))?;
        let cfg = LaunchConfig {
            grid_dim: (ceil_div(cols, 256), tokens.len() as u32, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let (rb, c) = ((w.len() / rows) as u64, cols as i32);
        // SAFETY: token ids < rows (the caller's), out holds tokens × cols.
        unsafe {
            s.launch_builder(self.k.embed(ty))
                .arg(&dw)
                .arg(&rb)
                .arg(&c)
                .arg(&dt)
                .arg(&mut out)
                .arg(&0u64)
                .arg(&0i32)
                .launch(cfg)
        }
        .map_err(wrap("kernel check"))?;
        s.clone_dtoh(&out).map_err(wrap("kernel check"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_errors_name_out_of_memory_and_kernel_faults() {
        use sys::cudaError_enum as E;
        let msg = |code| match device_error("uploading blk.0.ffn_up.weight", DriverError(code)) {
            EngineError::Device(m) => m,
            other => panic!("not a device error: {other:?}"),
        };
        assert_eq!(
            msg(E::CUDA_ERROR_OUT_OF_MEMORY),
            "uploading blk.0.ffn_up.weight: out of GPU memory"
        );
        let fault = msg(E::CUDA_ERROR_ILLEGAL_ADDRESS);
        assert!(fault.contains("a GPU kernel failed"), "{fault}");
        assert!(msg(E::CUDA_ERROR_INVALID_VALUE).contains("CUDA_ERROR_INVALID_VALUE"));
    }
}
