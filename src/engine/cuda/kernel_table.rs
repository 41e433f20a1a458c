//! The kernel table: every function of the compiled module the engine launches, looked up
//! once, and the one place where a weight type's product kernels are chosen for the numerics.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaModule, CudaStream};

use super::gemm::GemmKernels;
use super::launch_log::LaunchLog;
use super::launch_params::{
    few_split, group_mma_shared_bytes, prefill_shared_bytes, FAST_ROWS, FEW_TOKENS, GROUP_MAX,
    MVO_BYTES, PREFILL_HEADS, WIDE_HEAD,
};
use super::module;
use super::pdl_launch::{Launch, Launcher};
use crate::engine::options::Numerics;
use crate::quant::GgmlType;

/// A weight type's product kernels: for a single token and for batches of up to 8 a grid row
/// (kernels/common.cuh, kernels/matvec_float.cu), and under fast numerics for a few tokens. The single-token
/// kernel takes `one_rows` weight rows per block: 1 per 128 threads for the exact kernels,
/// `FAST_ROWS` for the fast ones (a warp per row, kernels/matvec_fast.cu; more for very tall
/// matrices, `fast_rows_for`), with `one_shared` bytes of dynamic shared memory per
/// `FAST_ROWS` rows (the fast legacy kernels' CPU-order fold).
pub(super) enum Product {
    /// Float weights: `batch` for any number of tokens, `one` for a single token whose rows are
    /// whole 16-byte chunks (kernels/matvec_float.cu); both in the CPU's order.
    Float {
        batch: CudaFunction,
        one: CudaFunction,
        /// Fast numerics where the model's products need not keep the CPU's order: one token
        /// in any order, a warp per row.
        free: Option<CudaFunction>,
    },
    Quant {
        one: CudaFunction,
        one_rows: usize,
        one_shared: u32,
        batch: CudaFunction,
        /// Fast numerics in any order: the products of 2 to `FEW_TOKENS` tokens a chunk
        /// (kernels/matvec_few.cu), `few[nt - 2]` for chunks of `nt`; empty where batches keep
        /// `batch` (exact numerics, the CPU's order, `CBTOP_FAST_FEW=0`).
        few: Vec<CudaFunction>,
    },
}

/// Every kernel the engine launches, looked up once in the compiled module.
pub(super) struct Kernels {
    /// (product, embed) per weight type.
    pub(super) typed: Vec<(GgmlType, Product, CudaFunction)>,
    pub(super) attention: CudaFunction,
    /// RoPE and the KV-cache store in one launch (kernels/rope.cu).
    pub(super) rope_store: CudaFunction,
    /// Fast numerics: split-KV decode attention (kernels/attention_fast.cu), a block per
    /// query head, and the grouped kernel long contexts take.
    pub(super) attention_split: CudaFunction,
    /// The same for a sliding-window layer (reads only the window).
    pub(super) attention_split_window: CudaFunction,
    /// The same for heads of 256 (`WIDE_HEAD`), windowed or not.
    pub(super) attention_split_wide: CudaFunction,
    /// The split kernel over a batch step's tokens, each over its own sequence.
    pub(super) attention_split_rows: CudaFunction,
    pub(super) attention_group: CudaFunction,
    /// The grouped kernel on tensor cores, head sizes 64 and 128
    /// (kernels/attention_group_mma.cu).
    pub(super) attention_group_mma: CudaFunction,
    /// `attention_group_mma`'s threads per block (16 positions of a tile per warp).
    pub(super) group_mma_threads: u32,
    /// The same kernel for heads of 256 (`WIDE_HEAD`), and its threads per block.
    pub(super) attention_group_mma_wide: CudaFunction,
    pub(super) group_mma_wide_threads: u32,
    /// Both for a batch step's tokens, each over its own sequence's cache, and their threads.
    pub(super) attention_group_mma_rows: CudaFunction,
    pub(super) group_mma_rows_threads: u32,
    pub(super) attention_group_mma_wide_rows: CudaFunction,
    pub(super) group_mma_wide_rows_threads: u32,
    /// Fast numerics: up to three products of one input in one launch (`set_kernel`).
    mvf_multi: CudaFunction,
    /// The same for two to four tokens on quantized weights (kernels/matvec_few.cu
    /// `mvfm<nt>`, `few_multi[nt - 2]`); empty where the few-token kernels are off or
    /// `CBTOP_FEW_MULTI=0`.
    few_multi: Vec<CudaFunction>,
    /// The multiprocessors `few_split` sizes the few-token launches for; 0 under
    /// `CBTOP_FEW_SPLIT=0` (a warp a row pair whatever the matrix).
    few_split_sms: usize,
    /// Fast numerics keeping the CPU's order in a decode step (`cpu_order_fast`): the legacy
    /// products' `mvo` kernels, and CPU-order decode attention at short contexts.
    pub(super) ordered: bool,
    pub(super) silu_mul_quant: CudaFunction,
    /// GeGLU with the down projection's quantization (kernels/geglu.cu).
    pub(super) geglu_quant: CudaFunction,
    pub(super) rms_norm_quant: CudaFunction,
    /// Per-head RMSNorm of Q and K (kernels/qk_norm.cu).
    pub(super) qk_norm: CudaFunction,
    /// RMSNorm of a product's output added to the residual (kernels/post_norm.cu).
    pub(super) post_norm_residual: CudaFunction,
    /// Final logit soft-capping (kernels/softcap.cu).
    pub(super) softcap: CudaFunction,
    pub(super) argmax_blocks: CudaFunction,
    pub(super) argmax_final: CudaFunction,
    /// The greedy pick of every row of a batch step (a row a sequence).
    pub(super) argmax_row_blocks: CudaFunction,
    pub(super) argmax_rows: CudaFunction,
    pub(super) act_quant: CudaFunction,
    pub(super) advance: CudaFunction,
    /// Launches carry programmatic dependent launch (pdl_launch.rs).
    pub(super) pdl: bool,
    /// The kernels stamped launches ran (launch_log.rs).
    pub(super) log: LaunchLog,
    /// Fast numerics: prompt products on tensor cores (gemm.rs).
    pub(super) gemm: Option<GemmKernels>,
    /// Fast numerics: prompt attention on tensor cores, a kernel for each head size of
    /// `PREFILL_HEADS` (kernels/attention_prefill.cu).
    attention_prefill: Option<Vec<(usize, CudaFunction)>>,
}

impl Kernels {
    /// Every kernel of module `m`, the products chosen for `numerics` and `ordered`
    /// (`product_kernels`).
    pub(super) fn load(
        m: &Arc<CudaModule>,
        numerics: Numerics,
        ordered: bool,
        pdl: bool,
        sms: usize,
    ) -> Result<Kernels, String> {
        let log = LaunchLog::default();
        let f = |n: &str| {
            let func = module::function(m, n)?;
            log.name(&func, n);
            Ok(func)
        };
        let mut typed = Vec::new();
        for ty in GgmlType::ALL {
            let name = ty.name().to_lowercase();
            let product = product_kernels(&f, ty, numerics, ordered)?;
            typed.push((ty, product, f(&format!("embed_{name}"))?));
        }
        // The tensor-core grouped attention's blocks (their launch bounds) and their largest
        // shared memory (GROUP_MAX heads a group), which is past the default limit.
        let (agm, group_mma_threads) = group_mma_kernel(&f, "attention_group_mma", 128)?;
        let (agm_wide, group_mma_wide_threads) =
            group_mma_kernel(&f, "attention_group_mma_wide", WIDE_HEAD)?;
        let (agm_rows, group_mma_rows_threads) =
            group_mma_kernel(&f, "attention_group_mma_rows", 128)?;
        let (agm_wide_rows, group_mma_wide_rows_threads) =
            group_mma_kernel(&f, "attention_group_mma_wide_rows", WIDE_HEAD)?;
        Ok(Kernels {
            typed,
            attention: f("attention")?,
            rope_store: f("rope_store")?,
            attention_split: f("attention_split")?,
            attention_split_window: f("attention_split_window")?,
            attention_split_wide: f("attention_split_wide")?,
            attention_split_rows: f("attention_split_rows")?,
            attention_group: f("attention_group")?,
            attention_group_mma: agm,
            group_mma_threads,
            attention_group_mma_wide: agm_wide,
            group_mma_wide_threads,
            attention_group_mma_rows: agm_rows,
            group_mma_rows_threads,
            attention_group_mma_wide_rows: agm_wide_rows,
            group_mma_wide_rows_threads,
            mvf_multi: f("mvf_multi")?,
            few_multi: if numerics == Numerics::Fast && !ordered && few_multi_on() {
                (2..=FEW_MULTI_TOKENS)
                    .map(|nt| f(&format!("mvfm{nt}")))
                    .collect::<Result<_, _>>()?
            } else {
                Vec::new()
            },
            few_split_sms: if std::env::var("CBTOP_FEW_SPLIT").is_ok_and(|v| v == "0") {
                0
            } else {
                sms
            },
            ordered: ordered && numerics == Numerics::Fast,
            silu_mul_quant: f("silu_mul_quant")?,
            geglu_quant: f("geglu_quant")?,
            rms_norm_quant: f("rms_norm_quant")?,
            qk_norm: f("qk_norm")?,
            post_norm_residual: f("post_norm_residual")?,
            softcap: f("softcap")?,
            argmax_blocks: f("argmax_blocks")?,
            argmax_final: f("argmax_final")?,
            argmax_row_blocks: f("argmax_row_blocks")?,
            argmax_rows: f("argmax_rows")?,
            act_quant: f("act_quant")?,
            advance: f("advance")?,
            pdl,
            gemm: match numerics {
                Numerics::Fast => Some(GemmKernels::load(&f, sms, ordered)?),
                Numerics::Exact => None,
            },
            attention_prefill: match numerics {
                Numerics::Fast => Some(prefill_kernels(&f)?),
                Numerics::Exact => None,
            },
            log,
        })
    }

    /// The tensor-core prompt attention for a batch of `n` queries over `c`'s heads, when
    /// it takes them (`flash_prompt_from`).
    pub(super) fn attention_prefill(
        &self,
        c: &crate::model::Config,
        n: usize,
    ) -> Option<&CudaFunction> {
        let from = flash_prompt_from(c, self.gemm.as_ref().map(|g| g.from))?;
        (n >= from).then_some(self.attention_prefill_for(c.head_dim)?)
    }

    /// The tensor-core prompt attention's kernel for heads of `head_dim` (fast numerics).
    pub(super) fn attention_prefill_for(&self, head_dim: usize) -> Option<&CudaFunction> {
        let kernels = self.attention_prefill.as_ref()?;
        kernels.iter().find(|k| k.0 == head_dim).map(|k| &k.1)
    }

    /// A launch of `f` (one of this table's kernels) on `s`.
    pub(super) fn launch<'a>(&'a self, s: &'a CudaStream, f: &'a CudaFunction) -> Launch<'a> {
        self.launcher().launch(s, f)
    }

    /// How this table's kernels are launched.
    pub(super) fn launcher(&self) -> Launcher<'_> {
        Launcher {
            pdl: self.pdl,
            log: Some(&self.log),
        }
    }

    pub(super) fn product(&self, ty: GgmlType) -> &Product {
        &self
            .typed
            .iter()
            .find(|t| t.0 == ty)
            .expect("every type has kernels")
            .1
    }

    /// The warps a row pair of a `ty` matrix of `rows` rows of `row_bytes` bytes takes in
    /// the few-token kernels (`few_split`).
    pub(super) fn few_split(&self, ty: GgmlType, rows: usize, row_bytes: usize) -> usize {
        if self.few_split_sms == 0 {
            return 1;
        }
        // A unit is a legacy block of 32 values or a quarter of a 256-value k-quant block.
        let unit = ty.block_size().min(64);
        let units = row_bytes / ty.block_bytes() * ty.block_size() / unit;
        few_split(rows, units, self.few_split_sms)
    }

    /// The kernel that runs `n` tokens' products of one input as one launch (products.rs
    /// `launch_set`): `mvf_multi` for one token, `mvfm<n>` for two to four; None where the
    /// table has none for `n`.
    pub(super) fn set_kernel(&self, n: usize) -> Option<&CudaFunction> {
        match n {
            0 => None,
            1 => Some(&self.mvf_multi),
            _ => self.few_multi.get(n - 2),
        }
    }

    pub(super) fn embed(&self, ty: GgmlType) -> &CudaFunction {
        &self
            .typed
            .iter()
            .find(|t| t.0 == ty)
            .expect("every type has kernels")
            .2
    }
}

/// The tensor-core prompt attention's kernels, one for each head size of `PREFILL_HEADS`,
/// those whose shared memory is past the default 48 KiB (heads of 256) allowed theirs.
/// A tensor-core grouped decode attention kernel `name` for heads up to `head_dim`, with its
/// threads per block (its launch bounds) and its dynamic shared memory limit raised to its
/// largest launch (GROUP_MAX heads a group).
fn group_mma_kernel(
    f: &impl Fn(&str) -> Result<CudaFunction, String>,
    name: &str,
    head_dim: usize,
) -> Result<(CudaFunction, u32), String> {
    let k = f(name)?;
    let threads = k
        .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        .map_err(|e| format!("{name}: reading its thread count: {e:?}"))? as u32;
    let most = group_mma_shared_bytes(head_dim, GROUP_MAX, threads);
    k.set_attribute(
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        most as i32,
    )
    .map_err(|e| format!("{name}: setting its shared memory size: {e:?}"))?;
    Ok((k, threads))
}

fn prefill_kernels(
    f: &impl Fn(&str) -> Result<CudaFunction, String>,
) -> Result<Vec<(usize, CudaFunction)>, String> {
    let mut kernels = Vec::new();
    for hd in PREFILL_HEADS {
        let name = format!("attention_prefill_{hd}");
        let k = f(&name)?;
        k.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            prefill_shared_bytes(hd) as i32,
        )
        .map_err(|e| format!("{name}: setting its shared memory size: {e:?}"))?;
        kernels.push((hd, k));
    }
    Ok(kernels)
}

/// The product kernels for weight type `ty` under `numerics`: the one place where the matrix
/// product's kernel set is chosen. Exact: kernels that reproduce the CPU's float order
/// (kernels/common.cuh). Fast: a token's product on quantized weights takes the bandwidth-
/// shaped kernels of kernels/matvec_fast.cu (`ordered`: the legacy types' in the CPU's
/// order), and a few tokens' (below the tensor cores' threshold, gemm.rs) those of
/// kernels/matvec_few.cu, except under `ordered` (the model's prompts then keep the CPU's
/// bits); float weights' batches keep the exact kernels.
fn product_kernels(
    f: &impl Fn(&str) -> Result<CudaFunction, String>,
    ty: GgmlType,
    numerics: Numerics,
    ordered: bool,
) -> Result<Product, String> {
    let name = ty.name().to_lowercase();
    if !ty.is_quantized() {
        return Ok(Product::Float {
            batch: f(&format!("matvec_{name}"))?,
            one: f(&format!("mvo_{name}"))?,
            free: match numerics {
                Numerics::Fast if !ordered => Some(f(&format!("mvf_{name}"))?),
                _ => None,
            },
        });
    }
    let (one, one_rows, one_shared) = match numerics {
        Numerics::Exact => (f(&format!("qmv1_{name}"))?, 1, 0),
        Numerics::Fast if ordered && is_legacy(ty) => {
            (f(&format!("mvo_{name}"))?, FAST_ROWS, MVO_BYTES)
        }
        Numerics::Fast => (f(&format!("mvf_{name}"))?, FAST_ROWS, 0),
    };
    let few = match numerics {
        Numerics::Fast if !ordered && few_kernels_on() => (2..=FEW_TOKENS)
            .map(|nt| f(&format!("mvf{nt}_{name}")))
            .collect::<Result<_, _>>()?,
        _ => Vec::new(),
    };
    Ok(Product::Quant {
        one,
        one_rows,
        one_shared,
        batch: f(&format!("qmv8_{name}"))?,
        few,
    })
}

/// Whether fast products of a few tokens take kernels/matvec_few.cu; `CBTOP_FAST_FEW=0` keeps
/// them on the CPU-order batch kernels (`qmv8_*`), to measure what the few-token kernels gain.
fn few_kernels_on() -> bool {
    !std::env::var("CBTOP_FAST_FEW").is_ok_and(|v| v == "0")
}

/// Most tokens the few-token kernels take several matrices in one launch for (`mvfm<nt>`).
const FEW_MULTI_TOKENS: usize = 4;

/// Whether two to four tokens' products of one input share a launch (`CBTOP_FEW_MULTI=0`:
/// one launch a matrix, to measure what sharing gains).
fn few_multi_on() -> bool {
    few_kernels_on() && !std::env::var("CBTOP_FEW_MULTI").is_ok_and(|v| v == "0")
}

/// The smallest batch the tensor-core prompt attention takes for `c`'s heads under fast
/// numerics, whose tensor-core products start at `gemm_from` tokens (None: exact numerics),
/// or None where it takes none: a head size of `PREFILL_HEADS`, whole query groups per KV head, and
/// batches as large as the tensor-core products'. Smaller batches, and exact numerics, run
/// the CPU-order kernel (attention.cu), whose score rows the batch buffers size from this.
pub(super) fn flash_prompt_from(
    c: &crate::model::Config,
    gemm_from: Option<usize>,
) -> Option<usize> {
    let fits = PREFILL_HEADS.contains(&c.head_dim)
        && c.n_kv_heads > 0
        && c.n_heads.is_multiple_of(c.n_kv_heads);
    gemm_from.filter(|_| fits)
}

/// The legacy 32-weight quantized types, whose fast products have a CPU-order kernel.
fn is_legacy(ty: GgmlType) -> bool {
    ty.is_quantized() && ty.block_size() == 32
}

/// The most decode-product weight bytes a model may have for fast numerics to keep the CPU's
/// float order (`cpu_order_fast`): SmolLM2-135M's ~100 MB and the conformance models are
/// under it; a step that reads more is bound by bandwidth, where the CPU-order kernels' serial
/// fold costs a quarter or more of the decode rate (docs/measurements/kernels.md).
pub const CPU_ORDER_MAX_BYTES: usize = 256 << 20;

/// Whether fast numerics keep the CPU's float order for `model`'s decode steps: where every
/// decode product is of a legacy type and the products are small (`CPU_ORDER_MAX_BYTES`: their
/// CPU-order kernels then cost little; the k-quants' and the float weights' free kernels are
/// much faster than any in that order), the legacy products take their CPU-order kernels and
/// decode attention its CPU-order path up to 128 positions, so a short decode gives the CPU
/// engine's bits, as `--numerics exact` does (SmolLM2 Q4_1's greedy tokens are then llama.cpp's
/// CPU's). Where some product reorders anyway, order buys nothing and the free kernels are
/// faster. `CBTOP_FAST_CPU_ORDER=0` turns it off (for measuring what it costs).
pub fn cpu_order_fast(model: &crate::model::Model) -> bool {
    if std::env::var("CBTOP_FAST_CPU_ORDER").is_ok_and(|v| v == "0") {
        return false;
    }
    let w = &model.weights;
    let products: Vec<_> = std::iter::once(&w.output)
        .chain(
            w.layers
                .iter()
                .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]),
        )
        .collect();
    let bytes: usize = products.iter().map(|m| m.rows * m.row_bytes()).sum();
    // The split attention's CPU-order path rounds the query as it comes; a model whose query
    // is scaled before attention (gemma3, phi3) would need that product first.
    !model.config.attn_scale_on_q
        && bytes <= CPU_ORDER_MAX_BYTES
        && products.iter().all(|m| is_legacy(m.ty))
}
