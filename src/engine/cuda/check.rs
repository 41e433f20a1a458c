//! Single kernels on their own, for tests against the CPU reference (tests/gpu_kernels.rs):
//! the engine's own product launch and embedding gather, on weights given as GGUF bytes,
//! without a model or a KV cache around them, and the fast numerics' decode and prompt
//! attention on a cache given as f16 rows.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaStream, DevicePtrMut, LaunchConfig};

use super::attention::{
    attention_prefill, attention_split, attention_threads, takes_tiled, HeadArgs, PrefillArgs,
    SplitArgs,
};
use super::buffers::{group_chunk, split_shared_bytes, ActBufs, MIN_CHUNK};
use super::clock::{KernelClock, Stamp};
use super::error::wrap;
use super::gemm::GemmBufs;
use super::kernel_table::Kernels;
use super::launch_params::{ceil_div, kind_code, lin, Epilogue, GROUP_MAX};
use super::module;
use super::pdl_launch::{pdl_for, PushArg};
use super::probe::GpuDesc;
use super::products::{launch_set, product, quantize, vec_dot_launch, SetMat};
use super::rope_tables::rope_rows;
use super::weights::{upload_padded, GMat};
use crate::engine::cpu::attention::{AttnLayer, AttnShape};
use crate::engine::error::EngineError;
use crate::engine::options::Numerics;
use crate::quant::{ActType, GgmlType};

/// One decode step for `KernelCheck::decode_attention`: the step's query, K and V (one token's
/// projections, before RoPE) and the cache's rows for the positions before it.
pub struct DecodeStep<'a> {
    pub shape: AttnShape,
    /// Rotated dimensions per head, NEOX pairs (qwen2) or NORM pairs (llama), RoPE base.
    pub n_rot: usize,
    pub neox: bool,
    pub rope_base: f32,
    /// A sliding-window layer's window in positions (0: none): the step sees only the keys of
    /// the last `window` positions, its own included.
    pub window: usize,
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    /// Cache rows `0..pos` (`pos × n_kv_heads·head_dim` f16 bits each): the step is at `pos`.
    pub keys: &'a [u16],
    pub values: &'a [u16],
}

/// A prompt batch for `KernelCheck::prefill_attention`: `q.len() / q_dim` queries at the
/// cache's last positions, already rotated (and scaled where the model does).
pub struct PrefillStep<'a> {
    pub shape: AttnShape,
    /// The scores' scale.
    pub scale: f32,
    /// A sliding-window layer's window in positions (0: none).
    pub window: usize,
    pub q: &'a [f32],
    /// Cache rows `0..pos + n` (`n_kv_heads·head_dim` f16 bits each), the queries' own last.
    pub keys: &'a [u16],
    pub values: &'a [u16],
}

/// What the decode attention kernel left: the heads' outputs and the step's cache rows.
pub struct DecodeOut {
    pub out: Vec<f32>,
    pub key_row: Vec<u16>,
    pub value_row: Vec<u16>,
    /// The output as the kernel quantized it for the output projection, when asked.
    pub quantized: Option<QuantizedOut>,
}

/// Activation buffers as kernels/act_quant.cu lays them out: rounded floats (`xf`, float
/// formats), or int8 values (`q`) with a scale per 32 (`d`) and, for Q8_1, a sum per 32 (`x`).
pub struct QuantizedOut {
    pub xf: Vec<f32>,
    pub q: Vec<i8>,
    pub d: Vec<f32>,
    pub x: Vec<f32>,
}

/// Single kernels on their own, for tests against the CPU reference: a typed matrix product
/// and an embedding gather on weights given as GGUF bytes. The products are the set
/// `numerics` picks: the exact set must match the CPU bit for bit, the fast one within float
/// reordering.
pub struct KernelCheck {
    stream: Arc<CudaStream>,
    k: Kernels,
}

impl KernelCheck {
    pub fn new(gpu: &GpuDesc, numerics: Numerics) -> Result<KernelCheck, EngineError> {
        Self::load(gpu, numerics, false, None)
    }

    /// Fast numerics as the engine runs a model whose decode products all keep the CPU's
    /// order (`kernel_table::cpu_order_fast`): the legacy types' one-token products in that order.
    pub fn fast_in_cpu_order(gpu: &GpuDesc) -> Result<KernelCheck, EngineError> {
        Self::load(gpu, Numerics::Fast, true, None)
    }

    /// As `new`, but the kernels choose their launch shapes as if the GPU had `sms`
    /// multiprocessors (None: its own count): 1 makes the tensor-core products take their
    /// largest tile for any product of two blocks or more, a large count their smallest, so
    /// a test can run every tile on small shapes.
    pub fn with_multiprocessors(
        gpu: &GpuDesc,
        numerics: Numerics,
        sms: Option<usize>,
    ) -> Result<KernelCheck, EngineError> {
        Self::load(gpu, numerics, false, sms)
    }

    fn load(
        gpu: &GpuDesc,
        numerics: Numerics,
        ordered: bool,
        sms: Option<usize>,
    ) -> Result<KernelCheck, EngineError> {
        let cx = CudaContext::new(gpu.ordinal).map_err(wrap("creating a CUDA context"))?;
        let (m, _) = module::load(&cx, &gpu.arch()).map_err(EngineError::Device)?;
        let stream = cx.default_stream();
        let sms = match sms {
            Some(n) => n,
            None => cx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(wrap("reading the multiprocessor count"))?
                .max(1) as usize,
        };
        let pdl = pdl_for(gpu.compute_capability);
        Ok(KernelCheck {
            stream,
            k: Kernels::load(&m, numerics, ordered, pdl, sms).map_err(EngineError::Device)?,
        })
    }

    /// `w` (`rows` GGUF rows of `cols` values of `ty`) on the device, padded as the engine
    /// uploads matrices (the fast kernels may read past the end).
    fn upload(
        &self,
        ty: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
    ) -> Result<GMat, EngineError> {
        Ok(GMat {
            ty,
            rows,
            cols,
            row_bytes: w.len() / rows,
            data: upload_padded(&self.stream, w).map_err(wrap("kernel check"))?,
            label: format!("kernel check {}", ty.name()),
        })
    }

    /// `out[t][r] = W[r] · x[t]` for the `x.len() / cols` rows of `x`, as the engine computes
    /// it (activations quantized on the GPU, then the type's product kernel; under fast
    /// numerics, from 16 rows of `x` on quantized weights (gemm_q.rs) and from 64 on any
    /// (`gemm::tensor_cores_from`), the tensor-core products).
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
        let m = self.upload(ty, w, rows, cols)?;
        let dx = s.clone_htod(x).map_err(wrap("kernel check"))?;
        let mut act = ActBufs::new(s, x.len())?;
        if self.k.gemm.as_ref().is_some_and(|g| n >= g.f16_from()) {
            // Room for 128 weight rows only, so a taller matrix goes through the scratch in
            // slices as the engine's largest ones do.
            act.f16 = Some(GemmBufs::new(s, x.len(), 128 * cols)?);
        }
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

    /// `out_i[t][r] = W_i[r] · x[t]` for two or three matrices (type, GGUF bytes, rows) of
    /// one activation format in one launch, as the engine runs a step's Q, K and V under fast
    /// numerics (`products::launch_set`: one token, or two to four on quantized weights).
    /// None where these kernels do not take `n` tokens.
    pub fn matvec_set(
        &self,
        mats: &[(GgmlType, &[u8], usize)],
        cols: usize,
        x: &[f32],
    ) -> Result<Option<Vec<Vec<f32>>>, EngineError> {
        let n = x.len() / cols;
        if self.k.set_kernel(n).is_none() || !(2..=3).contains(&mats.len()) {
            return Ok(None);
        }
        let s = &self.stream;
        let gm = mats
            .iter()
            .map(|&(ty, w, rows)| self.upload(ty, w, rows, cols))
            .collect::<Result<Vec<_>, EngineError>>()?;
        let dx = s.clone_htod(x).map_err(wrap("kernel check"))?;
        let mut act = ActBufs::new(s, x.len())?;
        let mut clock = KernelClock::new(s, 1).map_err(wrap("kernel check"))?;
        let kind = ActType::for_weights(mats[0].0);
        quantize(s, &self.k, &dx, n, cols, kind, &mut act, &mut clock)
            .map_err(wrap("kernel check"))?;
        let mut outs = gm
            .iter()
            .map(|m| {
                s.alloc_zeros::<f32>(n * m.rows)
                    .map_err(wrap("kernel check"))
            })
            .collect::<Result<Vec<_>, EngineError>>()?;
        let set: Vec<SetMat> = gm
            .iter()
            .zip(outs.iter_mut())
            .map(|(m, o)| SetMat {
                m,
                bias: 0,
                out: o.device_ptr_mut(s).0,
            })
            .collect();
        launch_set(s, &self.k, n, &set, &act, false, &mut clock).map_err(wrap("kernel check"))?;
        let got = outs
            .iter()
            .map(|o| s.clone_dtoh(o).map_err(wrap("kernel check")))
            .collect::<Result<Vec<_>, EngineError>>()?;
        Ok(Some(got))
    }

    /// The kernel `matvec` runs for `n` tokens against a `ty` matrix of `rows × cols`: its name
    /// in the module, or "tensor cores" where the product takes them after expanding the
    /// weights to f16 (`gemm::tensor_cores_from`).
    pub fn product_kernel(&self, ty: GgmlType, rows: usize, cols: usize, n: usize) -> String {
        let int = self
            .k
            .gemm
            .as_ref()
            .and_then(|g| g.qmma_for(ty, cols, n))
            .and_then(|q| q.kernel(ty, n));
        if let Some(f) = int {
            return self.k.log.name_of(f).unwrap_or_else(|| "(unnamed)".into());
        }
        let q = self
            .k
            .gemm
            .as_ref()
            .and_then(|g| g.quantized_kernel(ty, cols, n));
        if let Some(f) = q {
            return self.k.log.name_of(f).unwrap_or_else(|| "(unnamed)".into());
        }
        if self.k.gemm.as_ref().is_some_and(|g| g.takes(n)) && cols.is_multiple_of(64) {
            return "tensor cores".to_string();
        }
        let row_bytes = ty.row_bytes(cols).unwrap_or(0);
        let f = vec_dot_launch(&self.k, ty, rows, row_bytes, n).f;
        self.k.log.name_of(f).unwrap_or_else(|| "(unnamed)".into())
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
            self.k
                .launch(s, self.k.embed(ty))
                .arg(&dw)
                .arg(&rb)
                .arg(&c)
                .arg(&dt)
                .arg(&1.0f32)
                .arg(&mut out)
                .arg(&0u64)
                .launch(cfg)
        }
        .map_err(wrap("kernel check"))?;
        s.clone_dtoh(&out).map_err(wrap("kernel check"))
    }

    /// qwen3's and gemma3's per-head RMSNorm (kernels/qk_norm.cu) of `n` tokens' query rows
    /// `q` (`n_heads` heads of `qw.len()` values each per token) and key rows `k`
    /// (`n_kv_heads` heads), as the engine launches it; returns the normed (q, k).
    pub fn qk_norm(
        &self,
        q: &[f32],
        k: &[f32],
        (qw, kw): (&[f32], &[f32]),
        (n_heads, n_kv_heads): (usize, usize),
        eps: f32,
    ) -> Result<(Vec<f32>, Vec<f32>), EngineError> {
        let s = &self.stream;
        let w = || wrap("kernel check");
        let hd = qw.len();
        let n = q.len() / (n_heads * hd);
        let (mut dq, mut dk) = (s.clone_htod(q).map_err(w())?, s.clone_htod(k).map_err(w())?);
        let (dqw, dkw) = (
            s.clone_htod(qw).map_err(w())?,
            s.clone_htod(kw).map_err(w())?,
        );
        let (h, kvh, d) = (n_heads as i32, n_kv_heads as i32, hd as i32);
        let cfg = LaunchConfig {
            grid_dim: ((n_heads + n_kv_heads) as u32, n as u32, 1),
            block_dim: (hd.next_multiple_of(32) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: n tokens' heads of hd values in place; hd <= 1024 (the caller's).
        unsafe {
            self.k
                .launch(s, &self.k.qk_norm)
                .arg(&mut dq)
                .arg(&mut dk)
                .arg(&dqw)
                .arg(&dkw)
                .arg(&h)
                .arg(&kvh)
                .arg(&d)
                .arg(&eps)
                .arg(&0u64)
                .launch(cfg)
        }
        .map_err(w())?;
        Ok((
            s.clone_dtoh(&dq).map_err(w())?,
            s.clone_dtoh(&dk).map_err(w())?,
        ))
    }

    /// gemma3's post norm with its residual add (kernels/post_norm.cu) on rows of `w.len()`
    /// values: `x += rms_norm(y) * w` row by row, as the engine launches it; returns x.
    pub fn post_norm(
        &self,
        y: &[f32],
        w: &[f32],
        x: &[f32],
        eps: f32,
    ) -> Result<Vec<f32>, EngineError> {
        let s = &self.stream;
        let e = || wrap("kernel check");
        let cols = w.len();
        let (dy, dw) = (s.clone_htod(y).map_err(e())?, s.clone_htod(w).map_err(e())?);
        let mut dx = s.clone_htod(x).map_err(e())?;
        let c = cols as i32;
        let cfg = LaunchConfig {
            grid_dim: (ceil_div(cols, 1024), (y.len() / cols) as u32, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: rows of `cols` values read from y, added into x (as many).
        unsafe {
            self.k
                .launch(s, &self.k.post_norm_residual)
                .arg(&dy)
                .arg(&dw)
                .arg(&c)
                .arg(&eps)
                .arg(&mut dx)
                .arg(&0u64)
                .launch(cfg)
        }
        .map_err(e())?;
        s.clone_dtoh(&dx).map_err(e())
    }

    /// GeGLU (kernels/geglu.cu) with the CPU's GELU table, as the engine launches it for f32
    /// down-projection weights: returns gelu(gate) * up.
    pub fn geglu(&self, gate: &[f32], up: &[f32]) -> Result<Vec<f32>, EngineError> {
        let s = &self.stream;
        let e = || wrap("kernel check");
        let mut dg = s.clone_htod(gate).map_err(e())?;
        let du = s.clone_htod(up).map_err(e())?;
        let table = s
            .clone_htod(&crate::engine::cpu::geglu::gelu_table()[..])
            .map_err(e())?;
        let mut act = ActBufs::new(s, gate.len().next_multiple_of(256))?;
        let (len, kind) = (gate.len() as i32, kind_code(ActType::F32));
        // SAFETY: len values of gate (in place) and up; the activation buffers hold as many;
        // the table 65536 entries.
        unsafe {
            self.k
                .launch(s, &self.k.geglu_quant)
                .arg(&mut dg)
                .arg(&du)
                .arg(&table)
                .arg(&len)
                .arg(&kind)
                .arg(&mut act.xf)
                .arg(&mut act.q)
                .arg(&mut act.d)
                .arg(&mut act.x)
                .arg(&0u64)
                .launch(lin(gate.len()))
        }
        .map_err(e())?;
        s.clone_dtoh(&dg).map_err(e())
    }

    /// The exact numerics' attention (kernels/attention.cu `attention`, in the CPU's order) of
    /// `n` queries `q` (`n × n_heads·head_dim`, rotated) at positions `pos0..pos0 + n`, over
    /// the cache rows `keys` and `values` of positions `0..pos0 + n` (f16 bits,
    /// `n_kv_heads·head_dim` a position), with `layer`'s score scale and window, as the engine
    /// launches it for one sequence: the f16 decode order below 64 queries, the tiled f32
    /// order from there. Returns the `n × n_heads·head_dim` outputs.
    pub fn attention(
        &self,
        shape: AttnShape,
        layer: AttnLayer,
        q: &[f32],
        (keys, values): (&[u16], &[u16]),
        pos0: usize,
    ) -> Result<Vec<f32>, EngineError> {
        let s = &self.stream;
        let e = || wrap("attention check");
        let AttnShape {
            n_heads,
            n_kv_heads,
            head_dim,
        } = shape;
        let n = q.len() / (n_heads * head_dim);
        let ctx = pos0 + n;
        let kv_dim = n_kv_heads * head_dim;
        assert!(
            keys.len() >= ctx * kv_dim && values.len() >= ctx * kv_dim,
            "the cache rows must cover positions 0..pos0 + n"
        );
        let (dq, kc, vc) = (
            s.clone_htod(q).map_err(e())?,
            s.clone_htod(&keys[..ctx * kv_dim]).map_err(e())?,
            s.clone_htod(&values[..ctx * kv_dim]).map_err(e())?,
        );
        let pos = s.clone_htod(&[pos0 as i32]).map_err(e())?;
        let mut scores = s.alloc_zeros::<f32>(2 * n * n_heads * ctx).map_err(e())?;
        let mut out = s.alloc_zeros::<f32>(q.len().max(1)).map_err(e())?;
        let (h, kvh, hd) = (n_heads as i32, n_kv_heads as i32, head_dim as i32);
        let (cap, seq_stride) = (ctx as i32, 0i64);
        let window = layer.window.map_or(0, |w| w.min(i32::MAX as usize) as i32);
        let tiled = i32::from(takes_tiled(n));
        let cfg = LaunchConfig {
            grid_dim: (n_heads as u32, n as u32, 1),
            block_dim: (attention_threads(head_dim), 1, 1),
            shared_mem_bytes: (head_dim * 4) as u32,
        };
        // SAFETY: n queries of q_dim values in and out; cache rows 0..pos0 + n (checked
        // above), the capacity; scores n × heads × 2 capacity.
        unsafe {
            self.k
                .launch(s, &self.k.attention)
                .arg(&dq)
                .arg(&kc)
                .arg(&vc)
                .arg(&h)
                .arg(&kvh)
                .arg(&hd)
                .arg(&pos)
                .arg(&seq_stride)
                .arg(&cap)
                .arg(&layer.scale)
                .arg(&window)
                .arg(&tiled)
                .arg(&mut scores)
                .arg(&mut out)
                .arg(&0u64)
                .launch(cfg)
        }
        .map_err(e())?;
        s.clone_dtoh(&out).map_err(e())
    }

    /// The fast numerics' decode attention (kernels/attention_fast.cu: RoPE on the query and
    /// the step's K, the step's cache rows written, attention over positions `0..=pos`) as the
    /// engine launches it, with `splits` splits of the context (and `group_splits` chunks on
    /// the grouped path, which takes a KV head's query heads together; 0: a block per query
    /// head); contexts of `ordered_upto` positions or fewer (at most 128) in the CPU's order,
    /// as the engine asks for models whose products all keep it. Heads of 256 take the wide
    /// one-head kernel whatever is asked (no grouped or CPU-order path). With `quant`, the
    /// kernel also quantizes its output in that format, as the engine asks for before an
    /// output projection taking it.
    pub fn decode_attention(
        &self,
        step: &DecodeStep,
        splits: usize,
        group_splits: usize,
        ordered_upto: usize,
        quant: Option<ActType>,
    ) -> Result<DecodeOut, EngineError> {
        let s = &self.stream;
        let AttnShape {
            n_heads,
            n_kv_heads,
            head_dim,
        } = step.shape;
        let kv_dim = n_kv_heads * head_dim;
        let pos = step.keys.len() / kv_dim;
        let table = rope_rows(pos + 1, step.n_rot, step.rope_base, 1.0);
        let w = || wrap("decode attention check");
        let cache = |rows: &[u16]| {
            let mut all = rows.to_vec();
            all.resize((pos + 1) * kv_dim, 0);
            s.clone_htod(&all)
        };
        let (mut kc, mut vc) = (
            cache(step.keys).map_err(w())?,
            cache(step.values).map_err(w())?,
        );
        let (q, k, v) = (
            s.clone_htod(step.q).map_err(w())?,
            s.clone_htod(step.k).map_err(w())?,
            s.clone_htod(step.v).map_err(w())?,
        );
        let dpos = s.clone_htod(&[pos as i32]).map_err(w())?;
        let rope = s.clone_htod(&table).map_err(w())?;
        let mut part = s
            .alloc_zeros::<f32>(n_heads * splits.max(2 * group_splits) * (head_dim + 4))
            .map_err(w())?;
        let mut tickets = s.alloc_zeros::<i32>(n_heads).map_err(w())?;
        let mut out = s.alloc_zeros::<f32>(n_heads * head_dim).map_err(w())?;
        let mut act = match quant {
            Some(_) => Some(ActBufs::new(s, n_heads * head_dim)?),
            None => None,
        };
        attention_split(
            s,
            &self.k,
            SplitArgs {
                head: HeadArgs {
                    window: step.window.min(i32::MAX as usize) as i32,
                    ..HeadArgs::new(step.shape, step.n_rot, step.neox)
                },
                q: &q,
                k: &k,
                v: &v,
                kc: &mut kc.slice_mut(..),
                vc: &mut vc.slice_mut(..),
                pos: &dpos,
                rope: &rope,
                splits,
                group_splits,
                // The engine's chunks: a split's scores in shared memory (SplitScratch).
                shared_bytes: split_shared_bytes(
                    head_dim,
                    (pos + 1).div_ceil(splits).max(MIN_CHUNK),
                    ordered_upto > 0 && head_dim <= 128,
                    // As the engine's scratch: only a group the grouped kernels take (heads
                    // of 256 take the wide one-head kernel alone).
                    (group_splits > 0
                        && head_dim <= 128
                        && (2..=GROUP_MAX).contains(&(n_heads / n_kv_heads)))
                    .then(|| (n_heads / n_kv_heads, group_chunk(pos + 1, group_splits))),
                ),
                ordered_upto: ordered_upto.min(i32::MAX as usize) as i32,
                part: &mut part,
                tickets: &mut tickets,
                out: &mut out,
                quant: quant.zip(act.as_mut()),
                qk_norm: None,
            },
            Stamp::default(),
        )
        .map_err(w())?;
        let row = |c: &cudarc::driver::CudaSlice<u16>| {
            s.clone_dtoh(&c.slice(pos * kv_dim..(pos + 1) * kv_dim))
        };
        let quantized = match &act {
            Some(a) => Some(QuantizedOut {
                xf: s.clone_dtoh(&a.xf).map_err(w())?,
                q: s.clone_dtoh(&a.q).map_err(w())?,
                d: s.clone_dtoh(&a.d).map_err(w())?,
                x: s.clone_dtoh(&a.x).map_err(w())?,
            }),
            None => None,
        };
        Ok(DecodeOut {
            out: s.clone_dtoh(&out).map_err(w())?,
            key_row: row(&kc).map_err(w())?,
            value_row: row(&vc).map_err(w())?,
            quantized,
        })
    }

    /// The fast numerics' prompt attention on tensor cores (kernels/attention_prefill.cu) as
    /// the engine launches it, for heads of a size it has a kernel for: the queries' outputs.
    pub fn prefill_attention(&self, step: &PrefillStep) -> Result<Vec<f32>, EngineError> {
        let s = &self.stream;
        let AttnShape {
            n_heads,
            n_kv_heads,
            head_dim,
        } = step.shape;
        let (q_dim, kv_dim) = (n_heads * head_dim, n_kv_heads * head_dim);
        let n = step.q.len() / q_dim;
        let pos = (step.keys.len() / kv_dim)
            .checked_sub(n)
            .ok_or_else(|| EngineError::Device("fewer cache rows than queries".into()))?;
        let f = self.k.attention_prefill_for(head_dim).ok_or_else(|| {
            EngineError::Device(format!(
                "no tensor-core prompt attention for heads of {head_dim}"
            ))
        })?;
        let w = || wrap("prefill attention check");
        let q = s.clone_htod(step.q).map_err(w())?;
        let kc = s.clone_htod(step.keys).map_err(w())?;
        let vc = s.clone_htod(step.values).map_err(w())?;
        let dpos = s.clone_htod(&[pos as i32]).map_err(w())?;
        let mut out = s.alloc_zeros::<f32>(n * q_dim).map_err(w())?;
        attention_prefill(
            s,
            &self.k,
            f,
            PrefillArgs {
                head: HeadArgs {
                    window: step.window.min(i32::MAX as usize) as i32,
                    scale: step.scale,
                    ..HeadArgs::new(step.shape, head_dim, false)
                },
                n,
                q: &q,
                kc: &kc.slice(..),
                vc: &vc.slice(..),
                pos: &dpos,
                out: &mut out,
            },
            Stamp::default(),
        )
        .map_err(w())?;
        s.clone_dtoh(&out).map_err(w())
    }
}
