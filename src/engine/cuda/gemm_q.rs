//! Tensor-core products that read the quantized weights (kernels/gemm_q.cu), for `fast`
//! numerics: a batch of `QGEMM_MIN_TOKENS` to `QGEMM_MAX_TOKENS` tokens against a
//! quantized matrix, each warp dequantizing its 16 rows a k step at a time in shared memory
//! instead of the whole matrix being expanded to f16 first (gemm.rs). Decode steps of 16..64
//! sequences gain most: the expansion wrote and read two bytes a weight a step. The f16
//! activations and split-K partial sums are gemm.rs's buffers; `CBTOP_QGEMM=0` keeps the
//! expansion for A/B runs.

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DriverError, LaunchConfig};

use super::clock::KernelClock;
use super::env_counts::env_range;
use super::launch_params::{ceil_div, Epilogue};
use super::pdl_launch::{Launcher, PushArg};
use super::split_reduce::{reduce_splits, ReduceOut};
use super::weights::GMat;
use crate::quant::GgmlType;

/// Fewest tokens a product on quantized weights takes these kernels: from 16 tokens the n8
/// tiles of a block are full and the few-token kernels (at most 8 tokens a weight read) read
/// the weights at least twice (a starting point to measure from, `CBTOP_QGEMM_FROM`).
pub(super) const QGEMM_MIN_TOKENS: usize = 16;

/// Most tokens a product takes these kernels with (`CBTOP_QGEMM_UNTIL`): each 64-token tile
/// dequantizes the weights again and its mma operands come from L1 at about 320 bytes an
/// mma, where the expansion's 128-wide tiles (wgmma on Hopper) repay expanding once on long
/// prompts (a choice, not measured).
pub(super) const QGEMM_MAX_TOKENS: usize = 256;

/// Tokens a block takes, one kernel each (`gemm_q_<type>_<bt>`); a product takes the
/// smallest holding its batch, else the largest in several token tiles.
const TOKEN_TILES: [usize; 3] = [16, 32, 64];
/// Weight rows a block takes (four warps of one m16 tile each: GQ_WARPS x GQ_ROWS).
const BLOCK_ROWS: usize = 64;
const WARPS: usize = 4;
const WARP_ROWS: usize = 16;
/// Most pieces a product's K is split into, and fewest k steps a piece keeps.
const MAX_SPLITS: usize = 8;
const MIN_STEPS_PER_SPLIT: usize = 2;
/// Shared memory a multiprocessor gives blocks (H100: 227 KiB), and the launch bounds'
/// blocks a multiprocessor (kernels/gemm_q.cu).
const SM_SHARED: usize = 227 * 1024;
const MAX_PER_SM: usize = 3;

/// Whether these kernels are on (`CBTOP_QGEMM=0`: off) and their batch range
/// (`CBTOP_QGEMM_FROM`, at least 2, default QGEMM_MIN_TOKENS; `CBTOP_QGEMM_UNTIL`, the
/// largest batch, default QGEMM_MAX_TOKENS); a value that is not a number is refused by name.
fn qgemm_range() -> Result<Option<(usize, usize)>, String> {
    env_range("CBTOP_QGEMM", (QGEMM_MIN_TOKENS, QGEMM_MAX_TOKENS))
}

/// One type's kernels and their k step.
struct TypeKernels {
    ty: GgmlType,
    /// One per `TOKEN_TILES` entry.
    f: Vec<CudaFunction>,
    /// Values of a k step (KS): a k-quant's block, or two 32-wide blocks.
    ks: usize,
    smem: u32,
}

/// The quantized-weight tensor-core kernels.
pub(super) struct QGemm {
    types: Vec<TypeKernels>,
    sms: usize,
    /// Fewest tokens a product takes them with (`CBTOP_QGEMM_FROM`).
    pub(super) from: usize,
    until: usize,
}

/// Shared memory of a block of `ty`'s kernel with k steps of `ks` values: per warp two stages
/// of 16 rows of a step's bytes (from the 4-byte word below their first byte) and a 16 x
/// (ks + 32) f16 tile (GqStage and gemm_q_impl in kernels/gemm_q.cu).
fn smem_bytes(ty: GgmlType, ks: usize) -> usize {
    let step_bytes = ks / ty.block_size() * ty.block_bytes();
    // Steps of whole 16-byte pieces are staged in 16-byte units (GqStage).
    let words = if step_bytes.is_multiple_of(16) {
        (step_bytes + 2).div_ceil(16) * 4
    } else {
        (step_bytes + 2).div_ceil(4)
    };
    WARPS * (2 * WARP_ROWS * words * 4 + WARP_ROWS * (ks + 32) * 2)
}

impl QGemm {
    /// The kernels, or None where `CBTOP_QGEMM=0` turns them off.
    pub(super) fn load(
        f: &impl Fn(&str) -> Result<CudaFunction, String>,
        sms: usize,
    ) -> Result<Option<Self>, String> {
        let Some((from, until)) = qgemm_range()? else {
            return Ok(None);
        };
        let mut types = Vec::new();
        for ty in GgmlType::ALL.into_iter().filter(|t| t.is_quantized()) {
            let ks = if ty.block_size() == 256 { 256 } else { 64 };
            let smem = smem_bytes(ty, ks) as u32;
            let mut fs = Vec::new();
            for bt in TOKEN_TILES {
                let name = format!("gemm_q_{}_{bt}", ty.name().to_lowercase());
                let func = f(&name)?;
                func.set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .map_err(|e| format!("{name}: setting its shared memory size: {e:?}"))?;
                fs.push(func);
            }
            types.push(TypeKernels {
                ty,
                f: fs,
                ks,
                smem,
            });
        }
        Ok(Some(QGemm {
            types,
            sms: sms.max(1),
            from,
            until,
        }))
    }

    fn of(&self, ty: GgmlType) -> Option<&TypeKernels> {
        self.types.iter().find(|t| t.ty == ty)
    }

    /// Whether a product of `n` tokens against a `ty` matrix of `cols` values a row takes
    /// these kernels.
    pub(super) fn takes(&self, ty: GgmlType, cols: usize, n: usize) -> bool {
        (self.from..=self.until).contains(&n)
            && self.of(ty).is_some_and(|t| cols.is_multiple_of(t.ks))
    }

    /// The kernel a product of `n` tokens against `ty` takes (`takes` holds).
    pub(super) fn kernel(&self, ty: GgmlType, n: usize) -> Option<&CudaFunction> {
        self.of(ty).map(|t| &t.f[tile_index(n)])
    }

    /// The K split for `n` tokens against `rows` rows of `k` values on `t`'s kernels, with room
    /// for `part_len` partial sums (`KSplit::count`, at the blocks a multiprocessor's shared
    /// memory holds, at most the launch bounds' 3).
    fn splits(&self, t: &TypeKernels, n: usize, rows: usize, k: usize, part_len: usize) -> usize {
        let per_sm = (SM_SHARED / t.smem as usize).clamp(1, MAX_PER_SM);
        let blocks = n.div_ceil(TOKEN_TILES[tile_index(n)]) * rows.div_ceil(BLOCK_ROWS);
        KSplit {
            wave: per_sm * self.sms,
            blocks,
            n,
            rows,
            steps: k / t.ks,
            min_steps: MIN_STEPS_PER_SPLIT,
            part_len,
        }
        .count()
    }
}

/// A product's K split: `blocks` blocks for `n` tokens against `rows` rows of `steps` k
/// steps, a `wave` of blocks filling the GPU once, room for `part_len` partial sums (these
/// kernels' and gemm_qmma.cu's), each piece keeping at least `min_steps` steps.
pub(super) struct KSplit {
    pub(super) wave: usize,
    pub(super) blocks: usize,
    pub(super) n: usize,
    pub(super) rows: usize,
    pub(super) steps: usize,
    pub(super) min_steps: usize,
    pub(super) part_len: usize,
}

impl KSplit {
    /// Pieces K is split into: none where the blocks fill a wave, else `rounds`' choice.
    pub(super) fn count(&self) -> usize {
        if self.blocks >= self.wave {
            1
        } else {
            self.rounds()
        }
    }

    /// The count whose blocks finish soonest, counted as the rounds of waves they take times a
    /// piece's steps (a part-full last round costs a whole one), where it beats a smaller
    /// count by a tenth (a split adds the reduce), at most MAX_SPLITS; also where the blocks
    /// fill a wave or more, whose part-full last round is then split with the rest
    /// (gemm_qmma.cu's blocks, whose k steps are few).
    pub(super) fn rounds(&self) -> usize {
        let (wave, blocks, steps) = (self.wave.max(1), self.blocks, self.steps);
        let most = MAX_SPLITS
            .min(steps / self.min_steps.max(1))
            .min(self.part_len / (self.n * self.rows).max(1))
            .max(1);
        let cost = |s: usize| (blocks * s).div_ceil(wave) * steps.div_ceil(s);
        (2..=most).fold(1, |best, s| {
            if 10 * cost(s) < 9 * cost(best) {
                s
            } else {
                best
            }
        })
    }
}

/// The index in TOKEN_TILES of the tile a batch of `n` tokens takes.
fn tile_index(n: usize) -> usize {
    smallest_holding(&TOKEN_TILES, n)
}

/// The index of the smallest of `tiles` (ascending) holding `n` tokens, else the largest's
/// (these kernels' and gemm_qmma.cu's token tiles).
pub(super) fn smallest_holding(tiles: &[usize], n: usize) -> usize {
    tiles
        .iter()
        .position(|&bt| n <= bt)
        .unwrap_or(tiles.len().saturating_sub(1))
}

/// `out[t] (+)= M · x[t] (+ bias)` for `n` tokens whose f16 activations are in `a`, on `q`'s
/// kernel for `m`'s type (`QGemm::takes` holds); `reduce` (kernels/gemm_f16.cu `gemm_reduce`)
/// adds split-K pieces from `part`.
#[allow(clippy::too_many_arguments)]
pub(super) fn product(
    s: &CudaStream,
    q: &QGemm,
    reduce: &CudaFunction,
    launcher: Launcher<'_>,
    m: &GMat,
    n: usize,
    a: &CudaSlice<u16>,
    part: &mut CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
    ep: Epilogue,
    clock: &mut KernelClock,
) -> Result<(), DriverError> {
    let t = q.of(m.ty).expect("takes() checked the type");
    let f = &t.f[tile_index(n)];
    let bt = TOKEN_TILES[tile_index(n)];
    let splits = q.splits(t, n, m.rows, m.cols, part.len());
    let (rb, nn, rows, cols) = (m.row_bytes as u64, n as i32, m.rows as i32, m.cols as i32);
    let bias = ep.bias.map_or(0, |b| b.device_ptr(s).0);
    let o = ReduceOut::whole(n, m.rows, bias, ep.accumulate, out.device_ptr(s).0);
    let cfg = LaunchConfig {
        grid_dim: (ceil_div(n, bt), ceil_div(m.rows, BLOCK_ROWS), splits as u32),
        block_dim: ((WARPS * 32) as u32, 1, 1),
        shared_mem_bytes: t.smem,
    };
    let st = clock.stamp();
    // SAFETY: reads `rows` rows of row_bytes quantized bytes (staged from the 4-byte word
    // below each k step's first byte, at most 3 bytes past a row's end: within the next row
    // or the upload's MAT_PADDING) and n × cols f16 activations of `a` (applies() checked
    // the room); writes n rows of `rows` values of `out` (n × rows), or with a split
    // splits × n × rows partial sums of `part` (splits() checked the room); the bias, when
    // there is one, holds `rows` values.
    unsafe {
        launcher
            .launch(s, f)
            .arg(&m.data)
            .arg(&rb)
            .arg(a)
            .arg(&nn)
            .arg(&rows)
            .arg(&cols)
            .arg(&o.bias)
            .arg(&o.acc)
            .arg(&o.c)
            .arg(&o.ldc)
            .arg(&mut *part)
            .reads(&m.label)
            .stamp(&st)
            .launch(cfg)
    }?;
    if splits > 1 {
        reduce_splits(launcher, s, reduce, part, splits, o, clock)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_takes_the_smallest_token_tile_holding_it() {
        assert_eq!(tile_index(16), 0);
        assert_eq!(tile_index(17), 1);
        assert_eq!(tile_index(32), 1);
        assert_eq!(tile_index(33), 2);
        assert_eq!(tile_index(100), 2);
    }

    /// The blocks of gemm_q's launch for `n` tokens against `rows` rows.
    fn split(
        wave: usize,
        blocks: usize,
        n: usize,
        rows: usize,
        steps: usize,
        min_steps: usize,
        part_len: usize,
    ) -> KSplit {
        KSplit {
            wave,
            blocks,
            n,
            rows,
            steps,
            min_steps,
            part_len,
        }
    }

    fn gq_blocks(n: usize, rows: usize) -> usize {
        n.div_ceil(TOKEN_TILES[tile_index(n)]) * rows.div_ceil(BLOCK_ROWS)
    }

    #[test]
    fn k_is_split_where_its_pieces_finish_soonest_in_whole_waves() {
        // An H100's wave at three blocks a multiprocessor.
        let wave = 3 * 132;
        let room = 1 << 23;
        // qwen2.5-7b's ffn_up at 100 tokens: 2 x 296 blocks, more than a wave: whole.
        assert_eq!(
            split(wave, gq_blocks(100, 18944), 100, 18944, 14, 2, room).count(),
            1
        );
        // At 64 tokens 296 blocks: whole, one round of 14 steps; 2 pieces, two rounds of 7
        // (no better); 4 pieces, three rounds of 4 steps (12).
        assert_eq!(
            split(wave, gq_blocks(64, 18944), 64, 18944, 14, 2, room).count(),
            4
        );
        // Its Q at 16 tokens: 56 blocks; 7 pieces (392 blocks) fill one round, 14 steps allow 7.
        assert_eq!(
            split(wave, gq_blocks(16, 3584), 16, 3584, 14, 2, room).count(),
            7
        );
        // Its ffn_down: 74 steps, 56 blocks: 7 pieces, one round of 11 steps; 8 would
        // take a second round (448 blocks) of 10.
        assert_eq!(
            split(wave, gq_blocks(16, 3584), 16, 3584, 74, 2, room).count(),
            7
        );
        // Room for two pieces' partial sums only.
        assert_eq!(
            split(wave, gq_blocks(16, 3584), 16, 3584, 74, 2, 2 * 16 * 3584).count(),
            2
        );
        // One k step: no split.
        assert_eq!(
            split(wave, gq_blocks(16, 896), 16, 896, 1, 2, room).count(),
            1
        );
    }

    #[test]
    fn past_a_wave_a_part_full_last_round_is_split_with_the_rest() {
        let (wave, room) = (3 * 132, 1 << 23);
        // qwen2.5-7b's gate at 64 tokens in two 32-token tiles of 64-row blocks: 592 blocks,
        // 1.5 waves: whole, two rounds of 14 steps (28); 2 pieces, three rounds of 7 (21).
        assert_eq!(split(wave, 592, 64, 18944, 14, 2, room).count(), 1);
        assert_eq!(split(wave, 592, 64, 18944, 14, 2, room).rounds(), 2);
        // Three rounds all but full (1184 blocks): no piece count finishes a tenth sooner.
        assert_eq!(split(wave, 1184, 64, 18944, 14, 2, room).rounds(), 1);
        // Below a wave both choose alike.
        assert_eq!(
            split(wave, 56, 16, 3584, 14, 2, room).rounds(),
            split(wave, 56, 16, 3584, 14, 2, room).count()
        );
    }

    #[test]
    fn shared_memory_holds_two_staged_steps_and_the_f16_tile_per_warp() {
        // Q6_K: 210 bytes a step -> 53 words; tile 16 x 288 halves.
        assert_eq!(
            smem_bytes(GgmlType::Q6_K, 256),
            4 * (2 * 16 * 53 * 4 + 16 * 288 * 2)
        );
        // Q8_0: two blocks, 68 bytes -> 18 words; tile 16 x 96.
        assert_eq!(
            smem_bytes(GgmlType::Q8_0, 64),
            4 * (2 * 16 * 18 * 4 + 16 * 96 * 2)
        );
    }
}
