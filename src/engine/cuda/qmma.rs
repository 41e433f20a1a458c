//! Integer tensor-core products on quantized weights (kernels/gemm_qmma.cu), for `fast`
//! numerics: `QMMA_MIN_TOKENS` to `QMMA_MAX_TOKENS` tokens against a Q4_K, Q6_K or Q8_0
//! matrix, with the activations quantized as the CPU quantizes them for the type. A block
//! stages its rows' quantized bytes and its tokens' int8 activations in shared memory one or
//! two k steps ahead, and each warp turns its rows' bytes into the int8 mma operand, so a decode
//! step of a few sequences reads the weights with many bytes in flight and a larger batch runs
//! on the int8 tensor cores, where the few-token kernels (kernels/matvec_few.cu) and the f16
//! ones (gemm_q.rs) take these types otherwise. `CBTOP_QMMA=0` turns them off for A/B runs;
//! `CBTOP_QMMA_FROM`, `_UNTIL`, `_TILE`, `_MIN_STEPS` and `_ROUNDS` move their range, largest
//! token tile and K split (docs/environment.md).

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DriverError, LaunchConfig};

use super::clock::KernelClock;
use super::env_counts::{env_count, env_range};
use super::gemm_q::{smallest_holding, KSplit};
use super::launch_params::{ceil_div, Epilogue};
use super::pdl_launch::{Launcher, PushArg};
use super::split_reduce::{reduce_splits, ReduceOut};
use super::weights::GMat;
use crate::quant::GgmlType;

/// Fewest tokens a product takes these kernels with (`CBTOP_QMMA_FROM`, for every type): two
/// and three tokens keep the few-token kernels, which read the weights faster at that size,
/// and one token the one-token kernels, which fuse several matrices in one launch.
pub(super) const QMMA_MIN_TOKENS: usize = 4;
/// The same for Q8_0, whose few-token kernels also read four tokens' weights faster than its
/// 8-token tile does (docs/measurements/gpu-engine.md).
const Q8_0_MIN_TOKENS: usize = 5;
/// Most tokens (`CBTOP_QMMA_UNTIL`): past them the f16 expansion's 128-wide tiles take over,
/// as they do from gemm_q.rs's range.
pub(super) const QMMA_MAX_TOKENS: usize = 256;

/// The types these kernels take.
const TYPES: [GgmlType; 3] = [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0];
/// Tokens a block takes, one kernel each (`qmma_<type>_<bt>`): the smallest holding the
/// batch, else the largest in several token tiles.
const TOKEN_TILES: [usize; 4] = [8, 16, 32, 64];
/// The largest token tile a batch takes by default (`CBTOP_QMMA_TILE`): a batch of 64 runs
/// faster as two 32-token tiles, whose blocks hold fewer registers and so share a
/// multiprocessor three at a time, than as one 64-token tile at two.
const MAX_TILE: usize = 32;
/// Q8_0's: its 64-token tile reads each weight block once for the 64 tokens, where two
/// 32-token tiles stage it twice.
const Q8_0_MAX_TILE: usize = 64;
/// Fewest k steps a piece of a split K keeps (`CBTOP_QMMA_MIN_STEPS`).
const MIN_STEPS: usize = 2;
/// Weight rows a block takes (four warps of 16 rows: QM_WARPS x QM_ROWS).
const BLOCK_ROWS: usize = 64;
const THREADS: u32 = 128;
/// Values of a k step (QM_KS): K must be a multiple.
const KS: usize = 256;

/// Shared memory of a block of `ty`'s kernel taking `bt` tokens: its stages (CBTOP_QMMA_ALL in
/// gemm_qmma.cu), each the tokens' k step (LDA bytes) and scales (SCF floats) and the block's
/// 64 rows of the step's bytes (WLD bytes each) (the type structs of gemm_qmma.cu).
fn smem_bytes(ty: GgmlType, bt: usize) -> usize {
    let (lda, scf, wld) = match ty {
        GgmlType::Q4_K => (288, 20, 160),
        GgmlType::Q6_K => (272, 4, 240),
        _ => (288, 8, 304),
    };
    // Two for 64 tokens and for Q8_0's 32 (ST32 in CBTOP_QMMA_ALL), else three.
    let stages = if bt >= 64 || (ty == GgmlType::Q8_0 && bt == 32) {
        2
    } else {
        3
    };
    stages * (bt * (lda + 4 * scf) + BLOCK_ROWS * wld)
}

/// Whether these kernels are on (`CBTOP_QMMA=0`: off) and their batch range; a value that is
/// not a number is refused by name.
fn qmma_range() -> Result<Option<(usize, usize)>, String> {
    env_range("CBTOP_QMMA", (QMMA_MIN_TOKENS, QMMA_MAX_TOKENS))
}

/// The fewest tokens a `ty` product takes these kernels with: `CBTOP_QMMA_FROM` where set,
/// else the type's default.
fn type_from(ty: GgmlType, set: bool, from: usize) -> usize {
    match ty {
        GgmlType::Q8_0 if !set => Q8_0_MIN_TOKENS,
        _ => from,
    }
}

/// One token tile's kernel: its shared memory and the blocks a multiprocessor holds.
struct Tile {
    f: CudaFunction,
    smem: u32,
    per_sm: usize,
}

/// The integer tensor-core kernels.
pub(super) struct QMma {
    /// Per type, the fewest tokens a product takes them with (`type_from`) and one tile per
    /// `TOKEN_TILES` entry.
    types: Vec<(GgmlType, usize, Vec<Tile>)>,
    sms: usize,
    /// Fewest tokens a product of any type takes them with.
    pub(super) from: usize,
    until: usize,
    /// Largest token tile of every type (`CBTOP_QMMA_TILE`), else the type's default.
    max_tile: Option<usize>,
    /// Fewest k steps a split piece keeps (`CBTOP_QMMA_MIN_STEPS`, default MIN_STEPS).
    min_steps: usize,
    /// Whether K is split where the blocks fill a wave but leave the last round part full
    /// (`CBTOP_QMMA_ROUNDS=0`: only where they fill less than one).
    rounds: bool,
}

impl QMma {
    /// The kernels, or None where `CBTOP_QMMA=0` turns them off.
    pub(super) fn load(
        f: &impl Fn(&str) -> Result<CudaFunction, String>,
        sms: usize,
    ) -> Result<Option<Self>, String> {
        let Some((from, until)) = qmma_range()? else {
            return Ok(None);
        };
        let from_set = std::env::var_os("CBTOP_QMMA_FROM").is_some();
        let max_tile = env_count("CBTOP_QMMA_TILE", 8, "a token tile of 8, 16, 32 or 64")?;
        let min_steps =
            env_count("CBTOP_QMMA_MIN_STEPS", 1, "a count of k steps")?.unwrap_or(MIN_STEPS);
        let rounds = match env_count("CBTOP_QMMA_ROUNDS", 0, "0 or 1")? {
            None | Some(1) => true,
            Some(0) => false,
            Some(v) => return Err(format!("CBTOP_QMMA_ROUNDS={v}: expected 0 or 1")),
        };
        if let Some(max_tile) = max_tile.filter(|t| !TOKEN_TILES.contains(t)) {
            return Err(format!(
                "CBTOP_QMMA_TILE={max_tile}: expected a token tile of 8, 16, 32 or 64"
            ));
        }
        let mut types = Vec::new();
        for ty in TYPES {
            let mut tiles = Vec::new();
            for bt in TOKEN_TILES {
                let name = format!("qmma_{}_{bt}", ty.name().to_lowercase());
                let func = f(&name)?;
                let smem = smem_bytes(ty, bt);
                func.set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .map_err(|e| format!("{name}: setting its shared memory size: {e:?}"))?;
                let per_sm = func
                    .occupancy_max_active_blocks_per_multiprocessor(THREADS, smem, None)
                    .map_err(|e| format!("{name}: its occupancy: {e:?}"))?;
                tiles.push(Tile {
                    f: func,
                    smem: smem as u32,
                    per_sm: (per_sm as usize).max(1),
                });
            }
            types.push((ty, type_from(ty, from_set, from), tiles));
        }
        Ok(Some(QMma {
            from: types.iter().map(|t| t.1).min().unwrap_or(from),
            types,
            sms: sms.max(1),
            until,
            max_tile,
            min_steps,
            rounds,
        }))
    }

    /// The index in TOKEN_TILES of the tile a batch of `n` tokens against `ty` takes: the
    /// smallest holding it, at most the largest tile.
    fn tile_index(&self, ty: GgmlType, n: usize) -> usize {
        let type_max = if ty == GgmlType::Q8_0 {
            Q8_0_MAX_TILE
        } else {
            MAX_TILE
        };
        smallest_holding(&TOKEN_TILES, n.min(self.max_tile.unwrap_or(type_max)))
    }

    fn tiles(&self, ty: GgmlType) -> Option<&[Tile]> {
        self.types
            .iter()
            .find(|(t, ..)| *t == ty)
            .map(|(.., tiles)| tiles.as_slice())
    }

    /// Whether a product of `n` tokens against a `ty` matrix of `cols` values a row takes
    /// these kernels.
    pub(super) fn takes(&self, ty: GgmlType, cols: usize, n: usize) -> bool {
        let from = self.types.iter().find(|(t, ..)| *t == ty).map(|t| t.1);
        from.is_some_and(|from| (from..=self.until).contains(&n)) && cols.is_multiple_of(KS)
    }

    /// The kernel a product of `n` tokens against `ty` takes (`takes` holds).
    #[cfg(feature = "test-support")]
    pub(super) fn kernel(&self, ty: GgmlType, n: usize) -> Option<&CudaFunction> {
        self.tiles(ty).map(|t| &t[self.tile_index(ty, n)].f)
    }
}

/// The activations a product reads: int8 values, their scales and (Q8_K) sums, in the
/// format act_quant.cu writes for the weights' type.
pub(super) struct QuantActs<'a> {
    pub(super) q: &'a CudaSlice<i8>,
    pub(super) d: &'a CudaSlice<f32>,
    pub(super) x: &'a CudaSlice<f32>,
}

/// `out[t] (+)= M · x[t] (+ bias)` for `n` tokens whose activations `act` holds in `m`'s
/// format (`QMma::takes` holds), K split into pieces (partial sums in `part`, added by
/// `reduce`) where the blocks would leave the GPU part idle.
#[allow(clippy::too_many_arguments)]
pub(super) fn product(
    s: &CudaStream,
    q: &QMma,
    reduce: &CudaFunction,
    launcher: Launcher<'_>,
    m: &GMat,
    n: usize,
    act: QuantActs<'_>,
    part: Option<&CudaSlice<f32>>,
    out: &mut CudaSlice<f32>,
    ep: Epilogue,
    clock: &mut KernelClock,
) -> Result<(), DriverError> {
    let tiles = q.tiles(m.ty).expect("takes() checked the type");
    let ti = q.tile_index(m.ty, n);
    let bt = TOKEN_TILES[ti];
    let tile = &tiles[ti];
    let blocks = n.div_ceil(bt) * m.rows.div_ceil(BLOCK_ROWS);
    let room = part.map_or(0, |p| p.len());
    let split = KSplit {
        wave: tile.per_sm * q.sms,
        blocks,
        n,
        rows: m.rows,
        steps: m.cols / KS,
        min_steps: q.min_steps,
        part_len: room,
    };
    let splits = if q.rounds {
        split.rounds()
    } else {
        split.count()
    };
    let (rb, nn, rows, cols) = (m.row_bytes as u64, n as i32, m.rows as i32, m.cols as i32);
    let bias = ep.bias.map_or(0, |b| b.device_ptr(s).0);
    let o = ReduceOut::whole(n, m.rows, bias, ep.accumulate, out.device_ptr(s).0);
    let part_ptr = part.map_or(0, |p| p.device_ptr(s).0);
    let cfg = LaunchConfig {
        grid_dim: (ceil_div(n, bt), ceil_div(m.rows, BLOCK_ROWS), splits as u32),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: tile.smem,
    };
    let st = clock.stamp();
    // SAFETY: reads `rows` rows of row_bytes quantized bytes (each k step from the 16-byte
    // boundary at or below it, in whole 16-byte pieces: at most 16 bytes past a row's end,
    // within the next row or the upload's MAT_PADDING; every matrix is its own 256-aligned
    // allocation), n × cols int8 activations with their scales and sums (ActBufs holds the
    // batch); writes n rows of `rows` values of `out` (n × rows), or with a split
    // splits × n × rows partial sums of `part` (KSplit checked the room); the bias,
    // when there is one, holds `rows` values.
    unsafe {
        launcher
            .launch(s, &tile.f)
            .arg(&m.data)
            .arg(&rb)
            .arg(act.q)
            .arg(act.d)
            .arg(act.x)
            .arg(&nn)
            .arg(&rows)
            .arg(&cols)
            .arg(&o.bias)
            .arg(&o.acc)
            .arg(&o.c)
            .arg(&o.ldc)
            .arg(&part_ptr)
            .reads(&m.label)
            .stamp(&st)
            .launch(cfg)
    }?;
    match part {
        Some(part) if splits > 1 => reduce_splits(launcher, s, reduce, part, splits, o, clock),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_memory_holds_the_stages_of_values_scales_and_rows() {
        assert_eq!(
            smem_bytes(GgmlType::Q4_K, 64),
            2 * (64 * (288 + 80) + 64 * 160)
        );
        assert_eq!(
            smem_bytes(GgmlType::Q6_K, 8),
            3 * (8 * (272 + 16) + 64 * 240)
        );
        assert_eq!(
            smem_bytes(GgmlType::Q8_0, 16),
            3 * (16 * (288 + 32) + 64 * 304)
        );

        assert_eq!(
            smem_bytes(GgmlType::Q8_0, 32),
            2 * (32 * (288 + 32) + 64 * 304)
        );
        assert_eq!(
            smem_bytes(GgmlType::Q4_K, 32),
            3 * (32 * (288 + 80) + 64 * 160)
        );
    }
}
