//! Prompt products on tensor cores (kernels/gemm_f16.cu), for `fast` numerics: a batch of at
//! least `GEMM_MIN_TOKENS` tokens (`tensor_cores_from`) against a weight matrix as one f16 matrix-matrix product.
//! The activations are rounded to f16 once per product, the weights expanded to f16 into a
//! scratch buffer a slice of rows at a time (f16 weights are used in place), and `gemm_f16`
//! writes the f32 output with the bias and residual epilogue of the one-token kernels. A
//! product with too few output tiles to fill the GPU splits K, and `gemm_reduce` adds the
//! pieces in a fixed order (the same logits every run). Quantized matrices take the kernels
//! that read their quantized weights (gemm_q.rs) from their own threshold, 16 tokens, where
//! they have the type. Below the thresholds, and under `exact`, the products keep the
//! vec-dot kernels.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DriverError, LaunchConfig};

use super::batch_graphs::Named;
use super::clock::KernelClock;
use super::env_counts::env_count;
use super::error::wrap;
use super::gemm_q::{self, QGemm};
use super::launch_params::{ceil_div, lin, Epilogue};
use super::pdl_launch::{Launcher, PushArg};
use super::qmma::QMma;
use super::split_reduce::{reduce_splits, ReduceOut};
use super::weights::GMat;
use crate::engine::error::EngineError;
use crate::quant::GgmlType;

/// Fewest tokens a product takes on tensor cores: expanding a matrix to f16 writes two bytes
/// per weight and the product reads them back, while the vec-dot kernels read the quantized
/// weights once per 8 tokens; a batch this large repays the expansion (a choice, not tuned).
pub(super) const GEMM_MIN_TOKENS: usize = 64;

/// The batch size from which the tensor cores take a prompt: `GEMM_MIN_TOKENS`, or the
/// environment's `CBTOP_TENSOR_CORES_FROM` (at least 2: one token is the decode step's).
/// The override exists to check the tensor-core path's numerics on the fixtures' short
/// prompts (tests/gpu_conformance.rs, bench/teacher-forced.py); a value that is not a number
/// is refused by name.
pub(super) fn tensor_cores_from() -> Result<usize, String> {
    let n = env_count("CBTOP_TENSOR_CORES_FROM", 2, "a batch size of 2 or more")?;
    Ok(n.unwrap_or(GEMM_MIN_TOKENS))
}

/// Largest weight scratch, in f16 values (256 MiB, a 7B model's largest layer matrix):
/// larger matrices go through it in slices of rows.
const SCRATCH_HALVES: usize = 1 << 27;

/// Split-K partial sums the scratch holds, in f32 values (32 MiB).
const PART_FLOATS: usize = 1 << 23;
/// Most pieces a product's K is split into.
const MAX_SPLITS: usize = 8;
/// Fewest 64-wide k steps a piece of a split K keeps. With 4, SmolLM2's 576-wide products
/// split in two on the 128 x 128 tile instead of taking 72 blocks of 64 x 64, and its prefill
/// got slower (docs/measurements/gpu-engine.md); with 8, products of K < 1024 are not split.
const MIN_STEPS_PER_SPLIT: usize = 8;

/// Weight rows of the scratch's slices come in multiples of this (the mma.sync tiles' largest
/// N; the 128 x 256 tile takes a slice's odd 128 rows as a part-full tile).
const TILE: usize = 128;
/// The reduction step (GM_K in kernels/gemm_f16.cu): K must be a multiple.
const TILE_K: usize = 64;
/// GM_STAGES and GM_LD: each stage holds BM + BN rows of 72 f16 values.
const STAGES: usize = 3;
const ROW_HALVES: usize = TILE_K + 8;

/// WG_STAGES in kernels/gemm_wgmma.cu: each stage holds a 128 x 64 f16 tile of A and a
/// BN x 64 one of B, and the kernel aligns them to 1024 bytes.
const WG_STAGES: usize = 3;

/// Shortest K the 128 x 256 tile takes.
const WIDE_FROM_K: usize = 4096;

/// One tile shape of `gemm_f16_<bm>x<bn>` (mma.sync, two blocks a multiprocessor), or on
/// Hopper `gemm_wgmma_128x<bn>` (128 x 256: one block a multiprocessor; 128 x 128: two; same
/// arguments and results).
struct Tile {
    bm: usize,
    bn: usize,
    f: CudaFunction,
    smem: u32,
    /// Blocks a multiprocessor holds: a wave of the GPU is `per_sm` x its multiprocessors.
    per_sm: usize,
}

impl Tile {
    fn smem_bytes(&self) -> u32 {
        self.smem
    }

    fn wave(&self, sms: usize) -> usize {
        self.per_sm * sms
    }
}

/// The tensor-core product's kernels.
pub(super) struct GemmKernels {
    /// Largest tile first.
    tiles: Vec<Tile>,
    /// The GPU's multiprocessors: a product takes the largest tile that still gives each two
    /// blocks.
    sms: usize,
    /// Fewest tokens a batch has for its products to take the tensor cores
    /// (`tensor_cores_from`).
    pub(super) from: usize,
    to_f16: CudaFunction,
    /// Adds split-K partial sums with the epilogue (kernels/gemm_f16.cu `gemm_reduce`).
    reduce: CudaFunction,
    dequant: Vec<(GgmlType, CudaFunction)>,
    /// The products that read quantized weights (None: `CBTOP_QGEMM=0`).
    pub(super) q: Option<QGemm>,
    /// The integer ones for Q4_K, Q6_K and Q8_0, which take those types' batches before
    /// any of these (qmma.rs; None: `CBTOP_QMMA=0`).
    pub(super) qmma: Option<QMma>,
}

impl GemmKernels {
    /// The kernels; `ordered` (fast numerics keeping the CPU's order, whose batches below
    /// `from` keep the CPU's bits) leaves out the quantized-weight ones.
    pub(super) fn load(
        f: &impl Fn(&str) -> Result<CudaFunction, String>,
        sms: usize,
        ordered: bool,
    ) -> Result<Self, String> {
        let mut tiles = Vec::new();
        // The module holds the warpgroup kernels only where it was compiled for Hopper; they
        // take the largest tile's place.
        let wg = |bn: usize, per_sm: usize| {
            f(&format!("gemm_wgmma_128x{bn}")).ok().map(|w| Tile {
                bm: 128,
                bn,
                f: w,
                smem: (WG_STAGES * (128 + bn) * TILE_K * 2 + 1024) as u32,
                per_sm,
            })
        };
        let mma = match (wg(256, 1), wg(128, 2)) {
            (Some(wide), Some(square)) => {
                tiles.push(wide);
                tiles.push(square);
                &[(64, 128), (64, 64)][..]
            }
            _ => &[(128, 128), (64, 128), (64, 64)][..],
        };
        for &(bm, bn) in mma {
            tiles.push(Tile {
                bm,
                bn,
                f: f(&format!("gemm_f16_{bm}x{bn}"))?,
                smem: (STAGES * (bm + bn) * ROW_HALVES * 2) as u32,
                per_sm: 2,
            });
        }
        for t in &tiles {
            t.f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                t.smem_bytes() as i32,
            )
            .map_err(|e| {
                format!(
                    "the {}x{} prompt product: setting its shared memory size: {e:?}",
                    t.bm, t.bn
                )
            })?;
        }
        let mut dequant = Vec::new();
        for ty in GgmlType::ALL {
            dequant.push((ty, f(&format!("dequant_f16_{}", ty.name().to_lowercase()))?));
        }
        Ok(GemmKernels {
            tiles,
            sms: sms.max(1),
            from: tensor_cores_from()?,
            to_f16: f("to_f16")?,
            reduce: f("gemm_reduce")?,
            dequant,
            q: if ordered { None } else { QGemm::load(f, sms)? },
            qmma: if ordered { None } else { QMma::load(f, sms)? },
        })
    }

    /// Whether a batch of `n` tokens takes the tensor cores whatever its weights' type.
    pub(super) fn takes(&self, n: usize) -> bool {
        n >= self.from
    }

    /// The fewest tokens a batch has for any of its products to take the tensor cores (their
    /// buffers, the f16 activations and the split-K partial sums, are needed from there).
    pub(super) fn f16_from(&self) -> usize {
        let q = self.q.as_ref().map_or(self.from, |q| q.from.min(self.from));
        self.qmma.as_ref().map_or(q, |m| m.from.min(q))
    }

    /// The integer kernels, where they take a product of `n` tokens against a `ty` matrix of
    /// `cols` values a row.
    pub(super) fn qmma_for(&self, ty: GgmlType, cols: usize, n: usize) -> Option<&QMma> {
        self.qmma.as_ref().filter(|q| q.takes(ty, cols, n))
    }

    /// Adds split-K partial sums (kernels/gemm_f16.cu `gemm_reduce`).
    pub(super) fn reduce(&self) -> &CudaFunction {
        &self.reduce
    }

    /// The quantized-weight kernel a product of `n` tokens against a `ty` matrix of `cols`
    /// values a row takes, if it takes one.
    pub(super) fn quantized_kernel(
        &self,
        ty: GgmlType,
        cols: usize,
        n: usize,
    ) -> Option<&CudaFunction> {
        let q = self.q.as_ref()?;
        let fits = q.takes(ty, cols, n) && cols.is_multiple_of(TILE_K);
        fits.then(|| q.kernel(ty, n)).flatten()
    }

    /// Tile and K split for an m x n output over k values with room for `part_len` partial
    /// sums: the largest tile when it fills a wave of the GPU (`Tile::wave`, `fills_wave`); else the largest
    /// tile with K split so the blocks fill one wave (a split keeps at least
    /// MIN_STEPS_PER_SPLIT k steps); else, where K is too short to split, the largest tile
    /// filling a wave or the smallest. Small tiles keep the tensor pipes far less busy than
    /// the large one (docs/measurements/gpu-engine.md).
    fn plan(&self, m: usize, n: usize, k: usize, part_len: usize) -> (&Tile, usize) {
        let tiles = self.tiles_for(k);
        let big = &tiles[0];
        let base = m.div_ceil(big.bm) * n.div_ceil(big.bn);
        if fills_wave(base, big.wave(self.sms)) {
            return (big, 1);
        }
        let splits = (big.wave(self.sms) / base)
            .min(MAX_SPLITS)
            .min(k / TILE_K / MIN_STEPS_PER_SPLIT)
            .min(part_len / (m * n).max(1));
        if splits >= 2 {
            return (big, splits);
        }
        (Self::tile(tiles, self.sms, m, n), 1)
    }

    /// The tiles a product over k values may take, largest first: the 128 x 256 tile only
    /// from WIDE_FROM_K (one block a multiprocessor, its fill and epilogue are repaid by
    /// long rows: docs/measurements/gpu-engine.md).
    fn tiles_for(&self, k: usize) -> &[Tile] {
        match self.tiles.first() {
            Some(t) if t.bn == 256 && k < WIDE_FROM_K => &self.tiles[1..],
            _ => &self.tiles,
        }
    }

    /// The tile of `tiles` for an m x n output: the largest filling a wave of the GPU, else
    /// the smallest.
    fn tile(tiles: &[Tile], sms: usize, m: usize, n: usize) -> &Tile {
        let blocks = |t: &Tile| m.div_ceil(t.bm) * n.div_ceil(t.bn);
        tiles
            .iter()
            .find(|t| blocks(t) >= t.wave(sms))
            .unwrap_or_else(|| tiles.last().expect("three tiles"))
    }

    fn dequant(&self, ty: GgmlType) -> &CudaFunction {
        &self
            .dequant
            .iter()
            .find(|t| t.0 == ty)
            .expect("every type has a dequantizer")
            .1
    }
}

/// Whether `blocks` of the largest tile fill enough of a `wave` to take it as they are: three
/// quarters or more: the largest tile's blocks outrun a smaller tile's whole wave
/// (docs/measurements/gpu-engine.md).
fn fills_wave(blocks: usize, wave: usize) -> bool {
    4 * blocks >= 3 * wave
}

/// The f16 operands: the activations of a batch and a slice of a weight matrix; and the
/// split-K partial sums.
pub(super) struct GemmBufs {
    a: CudaSlice<u16>,
    w: CudaSlice<u16>,
    part: CudaSlice<f32>,
}

impl GemmBufs {
    /// Room for `act_len` activation values and the largest of `mat_len` weights (capped at
    /// the scratch size).
    pub(super) fn new(
        s: &Arc<CudaStream>,
        act_len: usize,
        mat_len: usize,
    ) -> Result<GemmBufs, EngineError> {
        let a = |len: usize| {
            s.alloc_zeros::<u16>(len.max(1))
                .map_err(wrap("allocating the tensor-core product's buffers"))
        };
        Ok(GemmBufs {
            a: a(act_len)?,
            w: a(mat_len.min(SCRATCH_HALVES))?,
            part: s
                .alloc_zeros::<f32>(PART_FLOATS)
                .map_err(wrap("allocating the tensor-core product's buffers"))?,
        })
    }

    /// The split-K partial sums.
    pub(super) fn part(&self) -> &CudaSlice<f32> {
        &self.part
    }

    /// The f16 activations, for a producer writing them itself (`launch_params::Feed::F16`).
    pub(super) fn a_mut(&mut self) -> &mut CudaSlice<u16> {
        &mut self.a
    }

    /// Its buffers, for a captured step's record of what it names (batch_graphs.rs).
    pub(super) fn name_into(&self, s: &CudaStream, named: &mut Named) {
        named
            .slice(s, &self.a)
            .slice(s, &self.w)
            .slice(s, &self.part);
    }
}

/// How `gemm_product` multiplies a matrix.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    /// Expanded to f16 in the scratch (or f16 as it is), then `gemm_f16` / `gemm_wgmma`.
    Expand,
    /// Its quantized weights read by `gemm_q_<type>` (gemm_q.rs).
    Quantized,
}

/// How `gemm_product` takes `m` for a batch of `n` tokens, if it does.
fn route(g: Option<&GemmKernels>, bufs: Option<&GemmBufs>, m: &GMat, n: usize) -> Option<Route> {
    let (g, b) = (g?, bufs?);
    if !m.cols.is_multiple_of(TILE_K) || b.a.len() < n * m.cols {
        return None;
    }
    if g.qmma_for(m.ty, m.cols, n).is_some() {
        return None;
    }
    if g.quantized_kernel(m.ty, m.cols, n).is_some() {
        return Some(Route::Quantized);
    }
    (g.takes(n) && b.w.len() >= TILE * m.cols).then_some(Route::Expand)
}

/// Whether `gemm_product` takes `m` for a batch of `n` tokens.
pub(super) fn applies(
    g: Option<&GemmKernels>,
    bufs: Option<&GemmBufs>,
    m: &GMat,
    n: usize,
) -> bool {
    route(g, bufs, m, n).is_some()
}

/// `out[t] (+)= M · x[t] (+ bias)` for `n` tokens on tensor cores (`applies` holds). With
/// `ep.f16` the f16 activations are already there (an earlier product of the same input).
// The operands are distinct borrows of the engine's fields, as for `products::product`.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_product(
    s: &Arc<CudaStream>,
    g: &GemmKernels,
    launcher: Launcher<'_>,
    m: &GMat,
    n: usize,
    x: &CudaSlice<f32>,
    bufs: &mut GemmBufs,
    out: &mut CudaSlice<f32>,
    ep: Epilogue,
    clock: &mut KernelClock,
) -> Result<(), DriverError> {
    if !ep.f16 {
        let total = n * m.cols;
        let (t, st) = (total as i32, clock.stamp());
        // SAFETY: n × cols values of x into as many f16 (applies() checked the room).
        unsafe {
            launcher
                .launch(s, &g.to_f16)
                .arg(x)
                .arg(&t)
                .arg(&mut bufs.a)
                .stamp(&st)
                .launch(lin(total))
        }?;
    }
    if route(Some(g), Some(bufs), m, n) == Some(Route::Quantized) {
        let q = g.q.as_ref().expect("route() checked");
        let GemmBufs { a, part, .. } = bufs;
        return gemm_q::product(s, q, &g.reduce, launcher, m, n, a, part, out, ep, clock);
    }
    // f16 weights are the operand as they are; other types go through the scratch.
    let direct = m.ty == GgmlType::F16 && m.row_bytes == 2 * m.cols;
    // Equal slices (a last sliver of rows would run as a small, slow product of its own).
    let slice_rows = if direct {
        m.rows
    } else {
        let most = (bufs.w.len() / m.cols / TILE * TILE).max(TILE);
        m.rows
            .div_ceil(m.rows.div_ceil(most))
            .next_multiple_of(TILE)
            .min(most)
    };
    let (cols, nn) = (m.cols as i32, n as i32);
    let (acc, ldc) = (i32::from(ep.accumulate), m.rows as i32);
    let out_base = out.device_ptr(s).0;
    let bias_base = ep.bias.map_or(0, |b| b.device_ptr(s).0);
    let mut r0 = 0;
    while r0 < m.rows {
        let rows = slice_rows.min(m.rows - r0);
        let b_ptr = if direct {
            m.data.device_ptr(s).0
        } else {
            let (rb, r, nr, st) = (m.row_bytes as u64, r0 as i32, rows as i32, clock.stamp());
            let cfg = LaunchConfig {
                grid_dim: (ceil_div(rows * (m.cols / 32), 128), 1, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: rows r0..r0 + rows of the matrix (each row_bytes) into rows × cols f16
            // values of the scratch (slice_rows × cols fit in it).
            unsafe {
                launcher
                    .launch(s, g.dequant(m.ty))
                    .arg(&m.data)
                    .arg(&rb)
                    .arg(&r)
                    .arg(&nr)
                    .arg(&cols)
                    .arg(&mut bufs.w)
                    .reads(&m.label)
                    .stamp(&st)
                    .launch(cfg)
            }?;
            bufs.w.device_ptr(s).0
        };
        let c_ptr = out_base + 4 * r0 as u64;
        let bias = if bias_base == 0 {
            0
        } else {
            bias_base + 4 * r0 as u64
        };
        let (nr, st) = (rows as i32, clock.stamp());
        let (tile, splits) = g.plan(n, rows, m.cols, bufs.part.len());
        let cfg = LaunchConfig {
            grid_dim: (ceil_div(n, tile.bm), ceil_div(rows, tile.bn), splits as u32),
            block_dim: (256, 1, 1),
            shared_mem_bytes: tile.smem_bytes(),
        };
        // SAFETY: A holds n × cols f16 values, B `rows` rows of cols f16 values; C gets
        // n rows of `rows` values at column r0 of rows-wide output rows (out holds n × rows);
        // the bias, when there is one, holds the matrix's rows values; with a split, `part`
        // takes splits × n × rows values (plan() checked the room).
        unsafe {
            launcher
                .launch(s, &tile.f)
                .arg(&bufs.a)
                .arg(&b_ptr)
                .arg(&nn)
                .arg(&nr)
                .arg(&cols)
                .arg(&bias)
                .arg(&acc)
                .arg(&c_ptr)
                .arg(&ldc)
                .arg(&mut bufs.part)
                .reads(if direct {
                    &m.label
                } else {
                    "dequantized f16 tile"
                })
                .stamp(&st)
                .launch(cfg)
        }?;
        if splits > 1 {
            let out = ReduceOut {
                n,
                rows,
                bias,
                acc,
                c: c_ptr,
                ldc,
            };
            reduce_splits(launcher, s, &g.reduce, &bufs.part, splits, out, clock)?;
        }
        r0 += rows;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::fills_wave;

    #[test]
    fn three_quarters_of_a_wave_take_the_largest_tile() {
        // An H100's wave of the 128 x 128 tile: two blocks on each of 132 multiprocessors.
        assert!(fills_wave(264, 264));
        assert!(fills_wave(256, 264));
        assert!(fills_wave(198, 264));
        assert!(!fills_wave(197, 264));
        assert!(!fills_wave(96, 264));
    }
}
