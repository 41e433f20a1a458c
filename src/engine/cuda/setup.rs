//! Putting a model on a GPU: the context and stream, the compiled kernels and their table, the
//! weights, the KV cache, the RoPE table, the activation buffers and the kernel clock.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};

use super::buffers::{Bufs, SplitScratch};
use super::clock::KernelClock;
use super::decode::{group_from, prefill_chunk, CudaEngine};
use super::error::wrap;
use super::kernel_table::{cpu_order_fast, Kernels};
use super::module;
use super::pdl_launch::pdl_for;
use super::probe::GpuDesc;
use super::rope_tables::RopeTables;
use super::step_trace::StepTrace;
use super::weights::GWeights;
use crate::engine::error::EngineError;
use crate::engine::options::{Numerics, Timing};
use crate::model::{Config, Model};

/// Kernel launches a step may time: a layer takes at most 20 on the vec-dot products (seven
/// products, each with its activation quantization, and six more kernels); on tensor cores a
/// product is a rounding, a dequantization per slice of rows and a product per slice (about 32
/// for a layer whose largest matrices take two slices). Plus the embedding, head and sampling.
fn clock_slots(n_layers: usize) -> usize {
    48 * n_layers + 32
}

/// What of `cfg` the GPU engine does not run, as a sentence (None: it runs all of it): every
/// architecture cbtop reads runs; only soft-capped attention scores (which no supported
/// architecture's llama.cpp graph applies) are refused.
pub fn unsupported(cfg: &Config) -> Option<String> {
    cfg.attn_logit_softcap.map(|cap| {
        format!(
            "the GPU engine does not soft-cap attention scores ({}.attn_logit_softcapping = \
             {cap})",
            cfg.arch.name()
        )
    })
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
        if let Some(why) = unsupported(&model.config) {
            return Err(EngineError::Device(why));
        }
        let cx = CudaContext::new(gpu.ordinal).map_err(wrap("creating a CUDA context"))?;
        // One stream: cudarc's cross-stream event tracking is pure overhead here.
        // SAFETY: nothing in this engine uses a second stream.
        unsafe { cx.disable_event_tracking() };
        // Not the legacy default stream: CUDA graphs cannot be captured from it.
        let stream = cx.new_stream().map_err(wrap("creating a CUDA stream"))?;
        let (m, origin) = module::load(&cx, &gpu.arch()).map_err(EngineError::Device)?;
        let pdl = pdl_for(gpu.compute_capability);
        let sms = cx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(wrap("reading the multiprocessor count"))?
            .max(1) as usize;
        let k = Kernels::load(&m, numerics, cpu_order_fast(&model), pdl, sms)
            .map_err(EngineError::Device)?;
        let c = &model.config;
        // Heads wider than the split kernels' 128 take the CPU-order attention, a thread per
        // dimension (`attention::attention_threads`), at most a block's 1024.
        if c.head_dim > 1024 {
            return Err(EngineError::Device(format!(
                "head dimension {} is over the GPU attention kernel's 1024 (kernels/attention.cu)",
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
        let rope = RopeTables::upload(&stream, c, cap)?;
        let pos = stream
            .alloc_zeros::<i32>(1)
            .map_err(wrap("allocating the position"))?;
        let clock = KernelClock::new(&stream, clock_slots(c.n_layers))
            .map_err(wrap("allocating the kernel clock"))?;
        let split = SplitScratch::new(&stream, c, cap, sms, k.ordered)?;
        let group_from = group_from(c.n_kv_heads, c.head_dim, sms, split.ordered_upto as usize)
            .map_err(EngineError::Device)?;
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
            graphs_grouped: false,
            grouped_now: false,
            done,
            ahead: None,
            area: 0,
            cap,
            len: 0,
            seq: 0,
            rows: None,
            batch_graphs: Default::default(),
            prefill_chunk: prefill_chunk().map_err(EngineError::Device)?,
            group_from,
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
}
