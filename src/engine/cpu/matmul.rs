//! Matrices times a batch of activation rows, with weights in their GGUF type.
//!
//! Each activation row is quantized once into the weight type's vec-dot format (as llama.cpp
//! does), then every weight row is dotted with every activation row. Several matrices that
//! read the same input (Q, K and V; gate and up) go through one call: the input is quantized
//! once per format and all their rows are split into tasks of one parallel region
//! (`pool.rs`), so a layer has fewer regions to wait at.
//!
//! A task is a range of rows of one matrix. For one token the weights stream from memory once:
//! the call's rows are cut into units of about 16 KB, each thread takes a contiguous range of
//! them front to back, and a thread that runs out takes the back half of what another has
//! left (`ranges`), so the streams stay long and no thread waits out another's slow moment.
//! The same goes for a step of 2 to 8 tokens (sequences decoding together), whose products take
//! few-token kernels that read each block once for all the tokens (`x86::few_vnni`,
//! `x86::few_kquants`, `x86::few_kquants_exact`, or the one-token dots from L1 in
//! `few_tokens`). For a batch (a prompt) it is a few rows, unpacked once
//! per task where the type's unpacking is a real share of a block's work (Q4_0, Q5_0, Q8_0,
//! Q4_1, Q5_1: `quant::x86::prompt_rows`, several tokens per block load; on AVX-512 VNNI the
//! Q8_0-activation types sixteen tokens, two per register, `quant::x86_vnni`), widened to f32
//! once for the float types (`quant::x86::float`), and otherwise taken against the tokens four
//! at a time with the four-row kernels (the k-quants, whose four-token kernels keep a block's
//! levels in registers and ran faster than unpacking; docs/measurements/cpu-engine.md).
//! Under `fast` numerics the k-quants are unpacked per task as well, into a form whose sums
//! are one integer per block (`quant::x86::fast_kquants`), and the repacked matrices take
//! their own tasks (`matmul_fast`). Results go straight to `out[token][row]`.

#[cfg(target_arch = "x86_64")]
use super::matmul_fast::{
    act_rows, kquant_lanes, kquant_task, kquant_unpacks, lane_rows, packed_task,
};
use super::matmul_fast::{fast_rows, group_rows};
use super::pool;
use super::repack::{Packed, Repacked};
use crate::model::weights::{Mat, Weights};
use crate::quant::fma::with_fma;
#[cfg(target_arch = "x86_64")]
use crate::quant::x86::prompt_rows;
#[cfg(target_arch = "x86_64")]
use crate::quant::x86_vnni::{BiasedPair, SignedRows};
use crate::quant::{
    has_x4, quantize_act_into, vec_dot_rows, vec_dot_rows_x4, ActType, GgmlType, QuantizedAct,
};
use std::cell::RefCell;

/// Tasks per thread for a one-token product in a call that also has batch products (a call of
/// one-token products alone takes `ranges` instead). A token's product streams its weights
/// from memory once, and small interleaved tasks (the threads taking 16-row pieces in turn)
/// broke each thread's stream every few kilobytes, so the hardware prefetchers kept
/// restarting. Up to `FEW_THREADS` threads, two contiguous tasks per thread keep the streams
/// long and still let a thread that starts late hand over half its share. With more threads a
/// product waits on the slowest of many, and four smaller tasks each let the others take over
/// more of a slow thread's share (docs/measurements/cpu-engine.md has the sweeps).
fn one_token_tasks(threads: usize) -> usize {
    const FEW_THREADS: usize = 4;
    if threads <= FEW_THREADS {
        2
    } else {
        4
    }
}

/// Fewest rows in a one-token task.
const MIN_ROWS_ONE_TOKEN: usize = 16;

/// Rows per task of a one-token (or few-token) product of `rows` rows in a call whose
/// products have `total` rows: `one_token_tasks` shares of the call's rows per thread, each
/// product cut into equal pieces of about a share (`MIN_ROWS_ONE_TOKEN` at least).
fn one_token_rows(total: usize, rows: usize, threads: usize) -> usize {
    let share = total.div_ceil(threads * one_token_tasks(threads));
    let pieces = rows.div_ceil(share.max(MIN_ROWS_ONE_TOKEN));
    rows.div_ceil(pieces)
}

/// Weight bytes of a unit of a one-token call's `ranges`: a thread claims up to eight at once
/// from the front of its range, so what is left when the first thread runs out is a few units
/// a thread, and each unit is one kernel call or part of one.
const UNIT_BYTES: usize = 16 << 10;

/// Rows of a unit of a one-token call's `ranges` for rows of `row_bytes`, in whole multiples
/// of `align` rows (`few_vnni`'s row tile; then whole repacked groups where rows are repacked).
fn unit_rows(row_bytes: usize, align: usize) -> usize {
    (UNIT_BYTES / row_bytes.max(1))
        .max(1)
        .next_multiple_of(align.max(1))
}

/// Weight bytes of a batch task's rows: small enough to stay in L1 beside four tokens'
/// activations while the task walks the batch four tokens at a time.
const BATCH_TASK_BYTES: usize = 12 << 10;

/// Weight bytes of a float-weight batch task's rows: the float kernels stream the rows past
/// the tokens' values in passes (`x86::float`), so more rows read each token's values from
/// L1 more often.
const FLOAT_TASK_BYTES: usize = 64 << 10;

/// Rows of a prompt's k-quant task in lane order (`x86::kquants_vnni`).
const LANE_TASK_ROWS: usize = 16;

/// Whether a `ty` prompt product under `fast` numerics takes `kquant_task` in lane order.
fn lane_task(ty: GgmlType) -> bool {
    #[cfg(target_arch = "x86_64")]
    return kquant_lanes(ty);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = ty;
        false
    }
}

/// Most tokens `few_tokens` takes (one-token task split and dots) for types without a
/// few-token kernel of their own.
const FEW_TOKENS: usize = 3;

/// Most tokens a product splits as one token's (long contiguous tasks) and takes through a
/// few-token kernel (`few_vnni`, or the k-quants' one-token dots in `few_tokens`): a step of
/// up to this many sequences reads each weight once, from memory, as one token's does.
const FEW_TOKENS_MAX: usize = 8;

/// Whether `ty`'s products of `n` tokens take `few_tokens`: two or three tokens of any type,
/// up to `FEW_TOKENS_MAX` of a k-quant (whose one-token dots keep the block's decoding in
/// registers; its prompt kernels unpack per task or take four tokens on AVX2, slower for so
/// few tokens), up to `FEW_FLOAT_TOKENS` of F16/BF16.
fn few_dots(ty: GgmlType, n: usize) -> bool {
    let kquant = matches!(
        ty,
        GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K
    );
    let float = matches!(ty, GgmlType::F16 | GgmlType::BF16);
    (2..=FEW_TOKENS).contains(&n)
        || (kquant && (2..=FEW_TOKENS_MAX).contains(&n))
        || (float && (2..=FEW_FLOAT_TOKENS).contains(&n))
}

/// Most tokens an F16/BF16 product takes through `few_tokens`: the prompt tiles fill panels of
/// 16 or 32 tokens, and a qwen2.5-0.5b f16 step of 2 or 4 tokens ran 2.4x and 1.3x faster on
/// the one-token dots under `fast` (the same under `exact`), one of 8 a third slower.
const FEW_FLOAT_TOKENS: usize = 4;

/// Weight bytes of `few_tokens`' chunk of rows: in L1 beside a token's activations.
const FEW_CHUNK_BYTES: usize = 16 << 10;

/// Most rows of a fast float-weight batch task (`x86::float_tiles`).
const FLOAT_TILE_ROWS: usize = 48;

/// A fast float product's tasks (`x86::float_tiles`, `panels` panels of tokens): whole tiles
/// (6 or 12 rows), up to `FLOAT_TILE_ROWS`, four tasks a thread at least. A matrix with too
/// few rows for that is split by panels as well, before its rows go below 48: a task's rows
/// read every token of its panels, and short rows of a long matrix against all the panels
/// left most of the time to reading the panels (a 4864-weight prompt's products at 16
/// threads).
fn float_tasks(rows: usize, panels: usize, threads: usize, product: usize, tasks: &mut Vec<Task>) {
    let want = 4 * threads;
    let parts = want
        .div_ceil(rows.div_ceil(FLOAT_TILE_ROWS))
        .clamp(1, panels.max(1));
    let per = (rows * parts).div_ceil(want).clamp(12, FLOAT_TILE_ROWS) / 12 * 12;
    let per_part = panels.div_ceil(parts);
    for p0 in (0..panels).step_by(per_part.max(1)) {
        tasks.extend((0..rows).step_by(per).map(|r0| Task {
            product,
            rows: (r0, (r0 + per).min(rows)),
            panels: (p0, (p0 + per_part).min(panels)),
        }));
    }
}

/// Fewest tokens for which fast numerics' k-quant few-token products take the exact kernel
/// (`few_kquants_exact`, the reference's bits) over the fast one (`few_kquants`): in a model's
/// decode steps, whose weights come from memory, it is the faster from four tokens.
const FEW_KQUANT_EXACT_FROM: usize = 4;

/// The kernel a product takes (chosen once per call, in this order of preference).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Path {
    /// Repacked rows under `fast` (`packed_task`).
    #[cfg(target_arch = "x86_64")]
    Packed,
    /// One to `FEW_TOKENS_MAX` tokens against Q4_0/Q5_0/Q8_0 rows in the file's layout on
    /// AVX-512 VNNI (`x86::few_vnni`), the reference's bits.
    #[cfg(target_arch = "x86_64")]
    FewVnni,
    /// Two and three tokens (below `FEW_KQUANT_EXACT_FROM`) against Q4_K/Q6_K rows in the
    /// file's layout under `fast` on AVX-512 VNNI (`x86::few_kquants`).
    #[cfg(target_arch = "x86_64")]
    FewKquant,
    /// Two to `FEW_TOKENS_MAX` tokens against Q3_K-Q6_K rows in the file's layout on
    /// AVX-512 F/BW, the reference's bits (`x86::few_kquants_exact`).
    #[cfg(target_arch = "x86_64")]
    FewKquantExact,
    /// Q4_0/Q5_0/Q8_0 prompt rows unpacked to signed bytes on AVX-512 VNNI.
    #[cfg(target_arch = "x86_64")]
    SignedVnni,
    /// F16/BF16 rows widened to f32 (tiles under `fast`).
    #[cfg(target_arch = "x86_64")]
    Widened,
    /// k-quant rows unpacked per task under `fast`.
    #[cfg(target_arch = "x86_64")]
    KquantFast,
    /// One token against F16/BF16 rows under `fast` (`x86::float::rows_fast`).
    #[cfg(target_arch = "x86_64")]
    FloatOne,
    /// One token against Q8_0 rows in the file's layout under `fast`
    /// (`x86::fast_rows::rows_q8_0_one`).
    #[cfg(target_arch = "x86_64")]
    Q8One,
    /// One token against Q2_K/Q3_K/Q6_K rows in the file's layout under `fast` on AVX2
    /// (`x86::kquants_one`).
    #[cfg(target_arch = "x86_64")]
    KquantOne,
    /// Legacy prompt rows unpacked once per task.
    #[cfg(target_arch = "x86_64")]
    Unpacked,
    /// A few tokens on the one-token dots (`few_dots`).
    FewTokens,
    /// The type's row dots, four tokens at a time where it has them.
    Rows,
}

/// What a `matmuls` call prepared that decides a product's path.
#[derive(Clone, Copy, Default)]
struct Had {
    /// The matrix has repacked rows for this many tokens (`fast_rows`).
    packed: bool,
    float_fast: bool,
    kquant_fast: bool,
    /// One token's float and unpacked Q8_0 products under `fast` take their fast one-token
    /// kernels (`x86::float::rows_fast`, `x86::fast_rows::rows_q8_0_one`).
    float_one: bool,
}

impl Path {
    /// The path a `ty` product of `n` tokens takes, given what the call prepared.
    fn choose(ty: GgmlType, n: usize, had: Had) -> Path {
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 = crate::quant::x86::available();
            let vnni = crate::quant::x86::few_vnni::takes(ty);
            let few = (2..=FEW_TOKENS_MAX).contains(&n);
            if had.packed {
                return Path::Packed;
            } else if vnni && (few || n == 1) {
                // One token too: two rows a 512-bit register streamed more of the memory's
                // rate at 4 and 16 threads than the one-token row kernels.
                return Path::FewVnni;
            } else if few
                && n < FEW_KQUANT_EXACT_FROM
                && had.kquant_fast
                && crate::quant::x86::few_kquants::takes(ty)
            {
                return Path::FewKquant;
            } else if few && crate::quant::x86::few_kquants_exact::takes(ty) {
                return Path::FewKquantExact;
            } else if vnni && n > FEW_TOKENS_MAX {
                return Path::SignedVnni;
            } else if matches!(ty, GgmlType::F16 | GgmlType::BF16)
                && (n >= 4 || had.float_fast)
                && !few_dots(ty, n)
                && avx2
            {
                return Path::Widened;
            } else if matches!(ty, GgmlType::F16 | GgmlType::BF16)
                && n == 1
                && had.float_one
                && avx2
            {
                return Path::FloatOne;
            } else if ty == GgmlType::Q8_0 && n == 1 && had.float_one && avx2 {
                return Path::Q8One;
            } else if n == 1 && had.float_one && avx2 && kquant_one(ty) {
                return Path::KquantOne;
            } else if had.kquant_fast && kquant_unpacks(ty) && n >= 4 && !few_dots(ty, n) {
                return Path::KquantFast;
            } else if prompt_rows::unpacks(ty) && n >= 8 && avx2 {
                return Path::Unpacked;
            }
        }
        let _ = (ty, had);
        if few_dots(ty, n) {
            Path::FewTokens
        } else {
            Path::Rows
        }
    }

    /// The kernel's name with the instruction set it runs on here.
    fn name(self, ty: GgmlType, n: usize) -> String {
        let t = ty.name().to_lowercase();
        let act = format!("{:?}", ActType::for_weights(ty)).to_lowercase();
        #[cfg(target_arch = "x86_64")]
        let (avx2, avx512) = (
            crate::quant::x86::available(),
            crate::quant::x86_kquants512::available(),
        );
        #[cfg(not(target_arch = "x86_64"))]
        let (avx2, avx512) = (false, false);
        // The k-quants' one-token rows (one token or four) run on AVX-512 where it is there.
        let one_isa = |ty: GgmlType| {
            let kquant = matches!(
                ty,
                GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K
            );
            if kquant && avx2 && avx512 {
                "avx512"
            } else {
                rows_isa(ty, avx2)
            }
        };
        let simd = |wide: bool| match (wide, avx2) {
            (true, _) => "avx512",
            (false, true) => "avx2",
            _ => "scalar",
        };
        match self {
            #[cfg(target_arch = "x86_64")]
            Path::Packed => {
                // packed_task pairs groups on AVX-512 VNNI for every repacked type.
                let pairs = crate::quant::x86::fast_rows_vnni::available();
                let isa = if pairs { "avx512-vnni" } else { "avx2" };
                format!("packed_task {t}x8 ({isa})")
            }
            #[cfg(target_arch = "x86_64")]
            Path::FewVnni => format!("few_vnni {t}·q8_0 x{n} (avx512-vnni)"),
            #[cfg(target_arch = "x86_64")]
            Path::FewKquant => format!("few_kquants {t}·q8_k x{n} (fast, avx512-vnni)"),
            #[cfg(target_arch = "x86_64")]
            Path::FewKquantExact => format!("few_kquants_exact {t}·q8_k x{n} (avx512)"),
            #[cfg(target_arch = "x86_64")]
            Path::SignedVnni => format!("signed_batch_vnni {t}·q8_0 (avx512-vnni)"),
            #[cfg(target_arch = "x86_64")]
            Path::Widened => {
                let tiles = crate::quant::x86::float_tiles::Tiles::pick();
                let fast = tiles.is_some() && n >= 2;
                let isa = simd(tiles.is_some_and(|_| is_x86_feature_detected!("avx512f")));
                format!(
                    "widened_batch {t} ({}{isa})",
                    if fast { "tiles, " } else { "" }
                )
            }
            #[cfg(target_arch = "x86_64")]
            Path::KquantFast => {
                let isa = if kquant_lanes(ty) {
                    "lanes, avx512-vnni"
                } else {
                    simd(avx512)
                };
                format!("kquant_task {t}·q8_k unpacked ({isa})")
            }
            #[cfg(target_arch = "x86_64")]
            Path::FloatOne => format!("float_one {t} (fast, {})", simd(false)),
            #[cfg(target_arch = "x86_64")]
            Path::Q8One => format!("q8_0_one {t}·{act} (fast, {})", simd(false)),
            #[cfg(target_arch = "x86_64")]
            Path::KquantOne => format!("kquant_one {t}·{act} (fast, avx2)"),
            #[cfg(target_arch = "x86_64")]
            Path::Unpacked => format!("unpacked_batch {t}·{act} ({})", simd(false)),
            Path::FewTokens => format!("few_tokens {t}·{act} x{n} ({})", one_isa(ty)),
            Path::Rows => {
                let isa = one_isa(ty);
                let x4 = if has_x4(ty) && n >= 4 { "_x4" } else { "" };
                format!("vec_dot_rows{x4} {t}·{act} ({isa})")
            }
        }
    }
}

/// Whether one token's `ty` product under `fast` takes `x86::kquants_one`: Q2_K and Q6_K,
/// and Q3_K where no AVX-512 row kernel (`x86::kquants512`) takes it (on an AVX-512 Xeon that
/// one streams Q3_K rows as fast; its Q6_K rows a third slower).
#[cfg(target_arch = "x86_64")]
fn kquant_one(ty: GgmlType) -> bool {
    match ty {
        GgmlType::Q2_K | GgmlType::Q6_K => true,
        GgmlType::Q3_K => !crate::quant::x86::kquants512::available(),
        _ => false,
    }
}

/// The instruction set `vec_dot_rows` takes for `ty` (quant/act.rs: AVX2 for the types it
/// has row kernels for and Q3_K's AVX2 decode, else the scalar dots).
fn rows_isa(ty: GgmlType, avx2: bool) -> &'static str {
    use GgmlType as T;
    let rows = matches!(
        ty,
        T::Q4_0
            | T::Q5_0
            | T::Q8_0
            | T::F32
            | T::F16
            | T::BF16
            | T::Q4_1
            | T::Q5_1
            | T::Q2_K
            | T::Q3_K
            | T::Q4_K
            | T::Q5_K
            | T::Q6_K
    );
    if avx2 && rows {
        "avx2"
    } else {
        "scalar"
    }
}

/// A product's kernel as a `matmuls` call chose it: the path, the weight type and the token
/// count (all its name depends on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Chosen {
    path: Path,
    ty: GgmlType,
    tokens: usize,
}

impl Chosen {
    /// The kernel's name with the instruction set it runs on here.
    pub fn name(&self) -> String {
        self.path.name(self.ty, self.tokens)
    }
}

/// The kernels the calling thread's last `matmuls` call ran, one per product, into `out`
/// (cleared first).
pub fn last_chosen(out: &mut Vec<Chosen>) {
    out.clear();
    SCRATCH.with_borrow(|s| {
        out.extend(s.paths.iter().zip(&s.types).map(|(&path, &ty)| Chosen {
            path,
            ty,
            tokens: s.tokens,
        }))
    })
}

/// One matrix of a `matmuls` call and where its `n × m.rows` results go.
pub type Product<'a> = (&'a Mat, &'a mut [f32]);

/// `out[t][r] = W[r] · x[t]` for the `n = x.len() / m.cols` rows of `x`; `out` is `n × m.rows`.
pub fn matmul(w: &Weights, m: &Mat, x: &[f32], out: &mut [f32], fast: Option<&Repacked>) {
    matmuls(w, x, &mut [(m, out)], fast);
}

/// What a `matmuls` call keeps for the next one on its thread: the input quantized in each
/// format (by kind; an entry's rows are rewritten before any use), the task list, and each
/// product's result pointer. A decode step makes four calls per layer; building these afresh
/// each time was about 20 allocations per layer (641 per SmolLM2 token).
#[derive(Default)]
struct Scratch {
    formats: Vec<(ActType, Vec<QuantizedAct>)>,
    /// The tokens' Q8_0 rows with their sums, for `packed_task`'s Q4_0 kernel.
    #[cfg(target_arch = "x86_64")]
    summed_rows: Vec<Vec<crate::quant::x86::fast_rows::SummedBlock>>,
    /// The tokens' Q8_0 rows offset to unsigned bytes, for its Q8_0 kernel on AVX-512 VNNI.
    #[cfg(target_arch = "x86_64")]
    biased_rows: Vec<Vec<crate::quant::x86::fast_rows_vnni::BiasedBlock>>,
    /// The tokens' Q8_0 rows biased, two tokens side by side, for `signed_batch_vnni`.
    #[cfg(target_arch = "x86_64")]
    pairs: Vec<BiasedPair>,
    /// A few tokens' Q8_0 rows laid out for `few_vnni`.
    #[cfg(target_arch = "x86_64")]
    few: crate::quant::x86::few_vnni::FewTokens,
    /// The tokens' Q8_K rows in lane order, for `kquant_task` on AVX-512 VNNI.
    #[cfg(target_arch = "x86_64")]
    lane_rows: Vec<Vec<crate::quant::x86::kquants_vnni::LaneAct>>,
    /// The tokens packed for `x86::float_tiles`, per float activation format.
    #[cfg(target_arch = "x86_64")]
    panels: Vec<(ActType, crate::quant::x86::float_tiles::Panels)>,
    tasks: Vec<Task>,
    /// The threads' ranges of `tasks` where a call takes them that way.
    ranges: super::ranges::Ranges,
    outs: Vec<SendPtr>,
    /// The last call's kernel and weight type per product, and its token count.
    paths: Vec<Path>,
    types: Vec<GgmlType>,
    tokens: usize,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `matmul` for several matrices with the same input `x` (all with `x`'s row length), in one
/// parallel region; the results are exactly those of one `matmul` per matrix. Under `fast` numerics
/// (`fast`: the model's repacked matrices) the Q4_0, Q4_1 and Q5_1 products and a prompt's Q8_0 and
/// Q5_0 products take the repacked rows (`packed_task`), a prompt's k-quant products rows unpacked
/// per task (`kquant_task`) and its float products tiles (`widened_batch`), all reordering their
/// float sums; everything else is the reference's arithmetic under either.
pub fn matmuls(w: &Weights, x: &[f32], products: &mut [Product], fast: Option<&Repacked>) {
    // A task never calls back in here, so the calling thread's scratch is free.
    SCRATCH.with_borrow_mut(|scratch| matmuls_in(scratch, w, x, products, fast));
}

fn matmuls_in(
    s: &mut Scratch,
    w: &Weights,
    x: &[f32],
    products: &mut [Product],
    fast: Option<&Repacked>,
) {
    let Some(cols) = products.first().map(|p| p.0.cols) else {
        return;
    };
    let n = x.len() / cols;
    // A few tokens' Q5_0 and Q8_0 products read the file's layout (`Path::FewVnni`): Q5_0's
    // copy is Q8_0's size, and Q8_0's few-token products ran faster on the file's layout.
    // Q4_0's keep the copy (`packed_task`, split like one token's): its groups ran 6-13%
    // faster than `few_vnni` at 2, 4 and 8 tokens.
    let packed = |m: &Mat| {
        #[cfg(target_arch = "x86_64")]
        if (2..=FEW_TOKENS_MAX).contains(&n)
            && matches!(m.ty, GgmlType::Q5_0 | GgmlType::Q8_0)
            && crate::quant::x86::few_vnni::takes(m.ty)
        {
            return None;
        }
        fast_rows(fast, m, n)
    };
    // A prompt's float products under `fast` numerics take `x86::float_tiles`.
    let float_fast = n > FEW_FLOAT_TOKENS && fast.is_some_and(|r| r.kernels);
    // And its k-quant products `x86::fast_kquants`.
    let kquant_fast = fast.is_some_and(|r| r.kernels);
    // And one token's float and unpacked Q8_0 products their one-token kernels.
    let float_one = n == 1 && fast.is_some_and(|r| r.kernels);
    debug_assert_eq!(x.len(), n * cols);
    for (m, out) in products.iter() {
        assert_eq!(
            m.cols, cols,
            "matrices of one matmuls call share their input"
        );
        debug_assert_eq!(out.len(), n * m.rows);
    }

    // Each product's kernel, chosen once per call (`last_kernels` names them).
    s.paths.clear();
    s.types.clear();
    for (m, _) in products.iter() {
        #[cfg(target_arch = "x86_64")]
        let had = Had {
            packed: packed(m).is_some(),
            float_fast,
            kquant_fast,
            float_one,
        };
        #[cfg(not(target_arch = "x86_64"))]
        let had = Had::default();
        s.paths.push(Path::choose(m.ty, n, had));
        s.types.push(m.ty);
    }
    s.tokens = n;
    #[cfg(target_arch = "x86_64")]
    let takes = |path: Path| s.paths.contains(&path);

    // The input in each format the matrices need, quantized once (into the buffers the last
    // call left, for one token).
    let formats = &mut s.formats;
    for (i, (m, _)) in products.iter().enumerate() {
        let kind = ActType::for_weights(m.ty);
        if products[..i]
            .iter()
            .any(|(e, _)| ActType::for_weights(e.ty) == kind)
        {
            continue;
        }
        quantize_rows(kind, x, cols, keyed(formats, kind));
    }
    let formats = &s.formats;

    // `packed_task`'s Q4_0 and Q5_0 kernels take each activation block with its sum, its Q8_0
    // kernel on AVX-512 VNNI each block offset to unsigned bytes, made once per call here (on
    // the pool, a token a task, for a prompt) where a product takes them.
    #[cfg(target_arch = "x86_64")]
    let (summed_rows, biased_rows) = {
        use crate::quant::x86::fast_rows::{Interleaved, Q4_0x8, Q8_0x8};
        use crate::quant::x86::fast_rows_vnni::{self, Pairs};
        let q8 = formats.iter().find(|(k, _)| *k == ActType::Q8_0);
        let wants = |ty: GgmlType| {
            products.iter().any(|(m, _)| {
                matches!(
                    (packed(m), ty),
                    (Some(Packed::Q4_0(_) | Packed::Q5_0(_)), GgmlType::Q4_0)
                        | (Some(Packed::Q8_0(_)), GgmlType::Q8_0)
                )
            })
        };
        let summed = act_rows(
            n,
            q8,
            wants(GgmlType::Q4_0),
            &mut s.summed_rows,
            Q4_0x8::act,
        );
        let vnni = wants(GgmlType::Q8_0) && fast_rows_vnni::available();
        let biased = act_rows(n, q8, vnni, &mut s.biased_rows, Q8_0x8::wide);
        (summed, biased)
    };

    // A prompt's k-quant products on AVX-512 VNNI take the tokens' Q8_K rows in lane order,
    // made once per call here, a token a task.
    #[cfg(target_arch = "x86_64")]
    let lanes = match formats.iter().find(|(k, _)| *k == ActType::Q8_K) {
        Some((_, q8k))
            if products
                .iter()
                .zip(&s.paths)
                .any(|((m, _), &p)| p == Path::KquantFast && kquant_lanes(m.ty)) =>
        {
            lane_rows(n, q8k, &mut s.lane_rows)
        }
        _ => &s.lane_rows[..0],
    };

    // A prompt's F16/BF16 products under `fast` take the tokens packed in panels, made once
    // per call here (a piece of a panel a task) for each float format a product reads.
    #[cfg(target_arch = "x86_64")]
    let tiles = float_fast
        .then(crate::quant::x86::float_tiles::Tiles::pick)
        .flatten()
        .map(|t| t.for_tokens(n));
    #[cfg(target_arch = "x86_64")]
    if let Some(tiles) = tiles {
        pack_panels(&mut s.panels, formats, products, (n, cols), tiles);
    }
    #[cfg(target_arch = "x86_64")]
    let panels = &s.panels;

    // A prompt's Q4_0/Q5_0/Q8_0 products on AVX-512 VNNI take the activations biased to
    // unsigned bytes, two tokens side by side, and a few tokens' products them laid out for
    // `few_vnni`, made once per call here (into the last call's buffers; none where no
    // product takes them).
    #[cfg(target_arch = "x86_64")]
    let q8 = formats
        .iter()
        .find(|(k, _)| *k == ActType::Q8_0)
        .map(|(_, rows)| move |t: usize| rows[t.min(n - 1)].q8_0().expect("quantized as Q8_0"));
    #[cfg(target_arch = "x86_64")]
    let biased: &[BiasedPair] = match q8 {
        Some(q8) if takes(Path::SignedVnni) => {
            // An odd last token pairs with itself. A pair a task: built on the calling
            // thread alone, a 64-token prompt's pairs were most of a small product's time at
            // 16 threads.
            let pairs = &mut s.pairs;
            pairs.resize_with(n.div_ceil(2), BiasedPair::default);
            pairs.truncate(n.div_ceil(2));
            pool::par_chunks_mut(pairs, 1, |p, pair| pair[0].set(q8(2 * p), q8(2 * p + 1)));
            pairs
        }
        _ => &[],
    };
    // A few tokens' on the calling thread (a parallel region costs more than their copies).
    #[cfg(target_arch = "x86_64")]
    let few_acts = match q8 {
        Some(q8) if takes(Path::FewVnni) => {
            let tokens: [&[crate::quant::blocks::BlockQ8_0]; FEW_TOKENS_MAX] =
                std::array::from_fn(q8);
            s.few.set(&tokens[..n]);
            Some(&s.few)
        }
        _ => None,
    };

    // Tasks: (product, first row, end row).
    let threads = pool::global().threads();
    let total_rows: usize = products.iter().map(|p| p.0.rows).sum();
    // A few tokens (`few_tokens`, `few_vnni`, `few_kquants`, repacked groups) split like one
    // token.
    let split_as_one = |p: usize| {
        #[cfg(target_arch = "x86_64")]
        let few = matches!(
            s.paths[p],
            Path::FewTokens | Path::FewVnni | Path::FewKquant | Path::FewKquantExact
        ) || (s.paths[p] == Path::Packed && n <= FEW_TOKENS_MAX);
        #[cfg(not(target_arch = "x86_64"))]
        let few = s.paths[p] == Path::FewTokens;
        n == 1 || few
    };
    // A call whose products all split like one token's takes its rows in units, a contiguous
    // range of them per thread, the threads that run out first taking the back half of what
    // another has left (`ranges`); otherwise each task is a pool chunk (and so on one thread,
    // with nobody to take from, where claims a few units long would only add calls).
    // One token's float rows (`Path::FloatOne`) go through their call's rows as two streams
    // (`float::rows_fast`), which claims of a few units would cut short: such a call keeps
    // fixed tasks too.
    #[cfg(target_arch = "x86_64")]
    let two_streams = s.paths.contains(&Path::FloatOne);
    #[cfg(not(target_arch = "x86_64"))]
    let two_streams = false;
    let in_ranges = threads > 1 && !two_streams && (0..products.len()).all(split_as_one);
    let tasks = &mut s.tasks;
    tasks.clear();
    for (p, (m, _)) in products.iter().enumerate() {
        // Whole groups of eight repacked rows (`packed_task`).
        let group = |per: usize| match packed(m) {
            Some(_) => per.next_multiple_of(group_rows(m.ty)),
            None => per,
        };
        let per = if in_ranges {
            #[cfg(target_arch = "x86_64")]
            let align = match s.paths[p] {
                Path::FewVnni => crate::quant::x86::few_vnni::tile_rows(n),
                _ => 1,
            };
            #[cfg(not(target_arch = "x86_64"))]
            let align = 1;
            group(unit_rows(m.row_bytes(), align))
        } else if split_as_one(p) {
            group(one_token_rows(total_rows, m.rows, threads))
        } else if let (true, Some(t)) = (matches!(m.ty, GgmlType::F16 | GgmlType::BF16), tiles) {
            float_tasks(m.rows, t.panels(n), threads, p, tasks);
            continue;
        } else if matches!(m.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
            (FLOAT_TASK_BYTES / m.row_bytes()).clamp(1, 16)
        } else if kquant_fast && n >= 4 && lane_task(m.ty) {
            // `kquant_task` in lane order reads every token's row once per task: longer
            // tasks read them less often.
            LANE_TASK_ROWS
        } else if packed(m).is_some() {
            let g = group_rows(m.ty);
            (BATCH_TASK_BYTES / m.row_bytes()).clamp(g, 2 * g) / g * g
        } else {
            (BATCH_TASK_BYTES / m.row_bytes()).clamp(1, 16)
        };
        tasks.extend((0..m.rows).step_by(per).map(|r0| Task {
            product: p,
            rows: (r0, (r0 + per).min(m.rows)),
            panels: (0, usize::MAX),
        }));
    }

    s.outs.clear();
    s.outs.extend(
        products
            .iter_mut()
            .map(|(_, out)| SendPtr(out.as_mut_ptr())),
    );
    if in_ranges {
        s.ranges.split(s.tasks.len(), threads);
    }
    let (tasks, outs, products) = (&s.tasks, &s.outs, &*products);
    let paths = &s.paths;

    let task = |task: Task| {
        let Task {
            product: p,
            rows: (r0, r1),
            panels: part,
        } = task;
        let m = products[p].0;
        let kind = ActType::for_weights(m.ty);
        let acts = &formats
            .iter()
            .find(|(k, _)| *k == kind)
            .expect("quantized above")
            .1[..n];
        let rb = m.row_bytes();
        let rows = &w.bytes(m)[r0 * rb..r1 * rb];
        let out = outs[p];
        // SAFETY: `out` is product p's `n × m.rows` results (asserted above), borrowed
        // mutably by `products` until `run` returns and written only through these pointers;
        // this task alone writes rows r0..r1 of it, for every token, so the slices handed out
        // by different tasks never overlap.
        let out_rows = |t: usize| unsafe {
            std::slice::from_raw_parts_mut(out.0.add(t * m.rows + r0), r1 - r0)
        };
        with_fma(
            #[inline(always)]
            || {
                match paths[p] {
                    #[cfg(target_arch = "x86_64")]
                    Path::Packed => {
                        let p = packed(m).expect("the path checked it");
                        let wide = (summed_rows, biased_rows);
                        return packed_task(p, (m, r0), rows, acts, wide, &out_rows);
                    }
                    #[cfg(target_arch = "x86_64")]
                    Path::FewVnni => {
                        let a = few_acts.expect("made for the path");
                        return few_vnni(m.ty, (rows, rb), a, &out_rows);
                    }
                    #[cfg(target_arch = "x86_64")]
                    path @ (Path::FewKquant | Path::FewKquantExact) => {
                        use crate::quant::x86::{few_kquants, few_kquants_exact};
                        const MAX: usize = few_kquants::MAX_TOKENS;
                        const _: () = assert!(few_kquants_exact::MAX_TOKENS == MAX);
                        let a: [&[crate::quant::blocks::BlockQ8K]; MAX] =
                            std::array::from_fn(|t| {
                                acts.get(t).and_then(QuantizedAct::q8_k).unwrap_or(&[])
                            });
                        let mut outs: [&mut [f32]; MAX] =
                            std::array::from_fn(|t| if t < n { out_rows(t) } else { &mut [] });
                        // SAFETY: `Path::FewKquant` is chosen only where `few_kquants::takes`
                        // found AVX-512 VNNI, `Path::FewKquantExact` where
                        // `few_kquants_exact::takes` found AVX-512 F/BW; whole rows of `rb`
                        // bytes, as long as every token's Q8_K row.
                        unsafe {
                            if path == Path::FewKquant {
                                few_kquants::rows_few(m.ty, rows, rb, &a[..n], &mut outs[..n])
                            } else {
                                few_kquants_exact::rows_few(m.ty, rows, rb, &a[..n], &mut outs[..n])
                            }
                        };
                        return;
                    }
                    #[cfg(target_arch = "x86_64")]
                    Path::SignedVnni => {
                        return signed_batch_vnni(m.ty, rows, rb, n, biased, &out_rows)
                    }
                    #[cfg(target_arch = "x86_64")]
                    Path::Widened => {
                        let tiles = tiles.map(|t| {
                            let kind = ActType::for_weights(m.ty);
                            let p = panels.iter().find(|(k, _)| *k == kind).map(|(_, p)| p);
                            (t, p.expect("packed above"), part)
                        });
                        return widened_batch(m.ty, rows, m.cols, acts, tiles, &out_rows);
                    }
                    #[cfg(target_arch = "x86_64")]
                    Path::KquantFast => {
                        let per_row = rb / m.ty.block_bytes();
                        return kquant_task(m.ty, rows, per_row, (acts, lanes), &out_rows);
                    }
                    #[cfg(target_arch = "x86_64")]
                    Path::FloatOne => {
                        let x = float_act(&acts[0]);
                        // SAFETY: the path needs AVX2, FMA and F16C (`Path::choose`).
                        let ran = unsafe {
                            crate::quant::x86::float::rows_fast(m.ty, rows, rb, x, out_rows(0))
                        };
                        debug_assert!(ran.is_some(), "a float type");
                        return;
                    }
                    #[cfg(target_arch = "x86_64")]
                    Path::KquantOne => {
                        let a = acts[0].q8_k().expect("k-quant activations are Q8_K");
                        // SAFETY: `Path::KquantOne` is chosen only where AVX2, FMA and F16C
                        // are (`Path::choose`); the rows and the token share their length.
                        let ran = unsafe {
                            crate::quant::x86::kquants_one::rows_one(m.ty, rows, rb, a, out_rows(0))
                        };
                        debug_assert!(ran.is_some(), "a type `kquant_one` takes");
                        return;
                    }
                    #[cfg(target_arch = "x86_64")]
                    Path::Q8One => {
                        let a = acts[0].q8_0().expect("Q8_0 products' activations are Q8_0");
                        // SAFETY: `Path::Q8One` is chosen only where AVX2, FMA and F16C are
                        // (`Path::choose`); the rows and the token share their length.
                        unsafe {
                            crate::quant::x86::fast_rows::rows_q8_0_one(rows, rb, a, out_rows(0))
                        };
                        return;
                    }
                    #[cfg(target_arch = "x86_64")]
                    Path::Unpacked => return unpacked_batch(m.ty, rows, acts, &out_rows),
                    Path::FewTokens => {
                        return few_tokens(m.ty, (rows, rb), acts, &out_rows);
                    }
                    Path::Rows => {}
                }
                let fours = if has_x4(m.ty) { n / 4 * 4 } else { 0 };
                for t in (0..fours).step_by(4) {
                    let four = std::array::from_fn(|i| &acts[t + i]);
                    let outs = [
                        out_rows(t),
                        out_rows(t + 1),
                        out_rows(t + 2),
                        out_rows(t + 3),
                    ];
                    vec_dot_rows_x4(m.ty, rows, rb, four, outs);
                }
                for (t, act) in acts.iter().enumerate().skip(fours) {
                    vec_dot_rows(m.ty, rows, rb, act, out_rows(t));
                }
            },
        )
    };
    if !in_ranges {
        return pool::global().run(tasks.len(), &|i| task(tasks[i]));
    }
    let ranges = &s.ranges;
    pool::global().run(ranges.parts(), &|part| {
        // A claimed run of units, one call per product it spans (its units of one product
        // are contiguous rows).
        ranges.work(part, |units| {
            let mut run = tasks[units.start];
            for &next in &tasks[units.start + 1..units.end] {
                if next.product == run.product && next.rows.0 == run.rows.1 {
                    run.rows.1 = next.rows.1;
                } else {
                    task(run);
                    run = next;
                }
            }
            task(run);
        })
    });
}

/// A batch task's Q4_0, Q5_0, Q8_0, Q4_1 or Q5_1 rows against every token: the rows unpacked
/// once (`prompt_rows`, into buffers each pool thread keeps), then taken against the tokens
/// (Q4_0/Q5_0/Q8_0 four rows by two tokens a step, Q4_1/Q5_1 one row by eight tokens, the
/// rest one by one); bit for bit `vec_dot`'s results. `acts` are in the type's activation
/// format (a prompt's rows are quantized alike).
#[cfg(target_arch = "x86_64")]
fn unpacked_batch<'o>(
    ty: GgmlType,
    rows: &[u8],
    acts: &[QuantizedAct],
    out_rows: &impl Fn(usize) -> &'o mut [f32],
) {
    use crate::quant::x86::prompt_rows::{
        rows_unpacked, rows_unpacked_q8_1, unpack_min, unpack_offset, unpack_signed, MinBlock,
        OffsetBlock, SignedBlock, Unpacked,
    };
    thread_local! {
        static OFFSET: RefCell<Vec<OffsetBlock>> = const { RefCell::new(Vec::new()) };
        static SIGNED: RefCell<Vec<SignedBlock>> = const { RefCell::new(Vec::new()) };
        static MIN: RefCell<Vec<MinBlock>> = const { RefCell::new(Vec::new()) };
    }
    /// `blocks` against every token of `acts`: four rows by two tokens a step
    /// (`cpu_kernels` bench: the fastest tile on AVX2), a last odd token alone.
    fn run<'o, B: Unpacked>(
        blocks: &[B],
        acts: &[QuantizedAct],
        out_rows: &impl Fn(usize) -> &'o mut [f32],
    ) {
        let q8 = |t: usize| {
            acts[t]
                .q8_0()
                .expect("a prompt's activations share one format")
        };
        let (n, per_row) = (acts.len(), q8(0).len());
        for t in (0..n / 2 * 2).step_by(2) {
            let a = [q8(t), q8(t + 1)];
            let outs = [out_rows(t), out_rows(t + 1)];
            // SAFETY: `unpacked_batch`'s caller checked AVX2, FMA and F16C; `blocks` holds
            // whole rows of `per_row` blocks.
            unsafe { rows_unpacked::<B, 4, 2>(blocks, per_row, a, outs) };
        }
        if n % 2 == 1 {
            // SAFETY: as above.
            unsafe { rows_unpacked::<B, 4, 1>(blocks, per_row, [q8(n - 1)], [out_rows(n - 1)]) };
        }
    }
    if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
        let q8 = |t: usize| {
            acts[t]
                .q8_1()
                .expect("a prompt's activations share one format")
        };
        let (n, per_row) = (acts.len(), q8(0).len());
        let mut blocks = MIN.take();
        // SAFETY: the caller checked AVX2, FMA and F16C; `blocks` then holds whole rows of
        // `per_row` blocks.
        unsafe { unpack_min(ty, rows, &mut blocks) };
        for t in (0..n / 8 * 8).step_by(8) {
            let a = std::array::from_fn(|i| q8(t + i));
            let outs = std::array::from_fn(|i| out_rows(t + i));
            // SAFETY: as above.
            unsafe { rows_unpacked_q8_1::<8>(&blocks, per_row, a, outs) };
        }
        for t in n / 8 * 8..n {
            // SAFETY: as above.
            unsafe { rows_unpacked_q8_1::<1>(&blocks, per_row, [q8(t)], [out_rows(t)]) };
        }
        MIN.set(blocks);
    } else if ty == GgmlType::Q8_0 {
        SIGNED.with_borrow_mut(|blocks| {
            // SAFETY: the caller checked AVX2, FMA and F16C.
            unsafe { unpack_signed(rows, blocks) };
            run(blocks, acts, out_rows)
        })
    } else {
        OFFSET.with_borrow_mut(|blocks| {
            // SAFETY: as above.
            unsafe { unpack_offset(ty, rows, blocks) };
            run(blocks, acts, out_rows)
        })
    }
}

/// A batch task's F16 or BF16 rows against every token: the rows widened to f32 once
/// (`x86::float::widen`, into a buffer each pool thread keeps), then taken against the tokens
/// four at a time by the F32 kernel, the rest one by one; bit for bit `vec_dot`'s results
/// (the widening is exact and the F32 kernel keeps the float dots' order). Under `fast`
/// numerics (`tiles`: the kernel and the tokens packed for it) the rows go to the fused
/// multiply-add tiles (`x86::float_tiles`, which widen them a step at a time) instead.
#[cfg(target_arch = "x86_64")]
fn widened_batch<'o>(
    ty: GgmlType,
    rows: &[u8],
    cols: usize,
    acts: &[QuantizedAct],
    tiles: Option<(
        crate::quant::x86::float_tiles::Tiles,
        &crate::quant::x86::float_tiles::Panels,
        (usize, usize),
    )>,
    out_rows: &impl Fn(usize) -> &'o mut [f32],
) {
    use crate::quant::x86::float::{rows_wide_x4, widen};
    thread_local! {
        static WIDE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }
    let x = |t: usize| float_act(&acts[t]);
    let n = acts.len();
    if let Some((tiles, panels, part)) = tiles {
        debug_assert_eq!(panels.tokens(), n);
        let (t0, t1) = (part.0 * tiles.width(), (part.1 * tiles.width()).min(n));
        let mut outs: Vec<&mut [f32]> = (t0..t1).map(out_rows).collect();
        // SAFETY: `Tiles::pick` found the kernel's features.
        unsafe { tiles.run(ty, rows, cols, panels, part, &mut outs) };
        return;
    }
    let mut wide = WIDE.take();
    // SAFETY: the caller checked AVX2, FMA and F16C.
    unsafe { widen(ty, rows, &mut wide) };
    for t in (0..n / 4 * 4).step_by(4) {
        let a = std::array::from_fn(|i| x(t + i));
        let outs = std::array::from_fn(|i| out_rows(t + i));
        // SAFETY: as above; `wide` holds whole rows of `cols` weights.
        unsafe { rows_wide_x4(&wide, cols, a, outs) };
    }
    for (t, act) in acts.iter().enumerate().skip(n / 4 * 4) {
        vec_dot_rows(ty, rows, 2 * cols, act, out_rows(t));
    }
    WIDE.set(wide);
}

/// The entry of `kind` in `v`, made (default) where there is none yet.
fn keyed<T: Default>(v: &mut Vec<(ActType, T)>, kind: ActType) -> &mut T {
    let at = match v.iter().position(|(k, _)| *k == kind) {
        Some(at) => at,
        None => {
            v.push((kind, T::default()));
            v.len() - 1
        }
    };
    &mut v[at].1
}

/// The tokens of each F16/BF16 format the products read, packed for `x86::float_tiles` into
/// `panels` (kept from call to call), a piece of a panel a task.
#[cfg(target_arch = "x86_64")]
fn pack_panels(
    panels: &mut Vec<(ActType, crate::quant::x86::float_tiles::Panels)>,
    formats: &[(ActType, Vec<QuantizedAct>)],
    products: &[Product],
    (n, cols): (usize, usize),
    tiles: crate::quant::x86::float_tiles::Tiles,
) {
    use crate::quant::x86::float_tiles::{pack_piece, Panels};
    for (i, (m, _)) in products.iter().enumerate() {
        let kind = ActType::for_weights(m.ty);
        // Once per format: Q, K and V (or gate and up) share their input.
        if !matches!(kind, ActType::F16 | ActType::BF16)
            || products[..i]
                .iter()
                .any(|(e, _)| ActType::for_weights(e.ty) == kind)
        {
            continue;
        }
        let (_, rows) = formats
            .iter()
            .find(|(k, _)| *k == kind)
            .expect("quantized above");
        let x: Vec<&[f32]> = rows[..n].iter().map(float_act).collect();
        let (panels, w) = (keyed::<Panels>(panels, kind), tiles.width());
        panels.resize(n, cols, w);
        let (data, len) = panels.pieces_mut();
        pool::par_chunks_mut(data, len, |i, piece| pack_piece(&x, cols, w, i, piece));
    }
}

/// Two or three tokens (a few sequences decoding together) against a task's rows: a chunk
/// of rows against each token in turn, so the later tokens read the chunk from L1, through
/// the one-token dots (a sequence's results are its results alone). The four-token kernels
/// with stand-ins for the missing tokens cost more than two one-token passes
/// (docs/measurements/cpu-engine.md).
fn few_tokens<'o>(
    ty: GgmlType,
    (rows, rb): (&[u8], usize),
    acts: &[QuantizedAct],
    out_rows: &impl Fn(usize) -> &'o mut [f32],
) {
    let count = rows.len() / rb;
    let chunk = (FEW_CHUNK_BYTES / rb).clamp(1, 64);
    for r in (0..count).step_by(chunk) {
        let end = (r + chunk).min(count);
        for (t, act) in acts.iter().enumerate() {
            vec_dot_rows(
                ty,
                &rows[r * rb..end * rb],
                rb,
                act,
                &mut out_rows(t)[r..end],
            );
        }
    }
}

/// Two to `FEW_TOKENS_MAX` tokens (laid out in `a`) against a task's Q4_0, Q5_0 or Q8_0
/// rows on AVX-512 VNNI (`x86::few_vnni`). The same bits as each token's one-token dots.
#[cfg(target_arch = "x86_64")]
fn few_vnni<'o>(
    ty: GgmlType,
    (rows, rb): (&[u8], usize),
    a: &crate::quant::x86::few_vnni::FewTokens,
    out_rows: &impl Fn(usize) -> &'o mut [f32],
) {
    use crate::quant::x86::few_vnni::{rows_few, MAX_TOKENS};
    let n = a.tokens();
    let mut outs: [&mut [f32]; MAX_TOKENS] =
        std::array::from_fn(|t| if t < n { out_rows(t) } else { &mut [] });
    // SAFETY: `Path::FewVnni` is chosen only where `few_vnni::takes` found AVX-512 VNNI;
    // the rows are whole rows of `rb` bytes, as long as every token's row.
    unsafe { rows_few(ty, rows, rb, a, &mut outs[..n]) };
}

/// A float activation row's values (F16 and BF16 rows hold the rounded values as f32).
#[cfg(target_arch = "x86_64")]
fn float_act(a: &QuantizedAct) -> &[f32] {
    match a {
        QuantizedAct::F16(x) | QuantizedAct::BF16(x) => x.as_slice(),
        _ => unreachable!("float weights take float activations"),
    }
}

/// `unpacked_batch` on AVX-512 VNNI (`x86_vnni`) for the `n` tokens, whose activations
/// `pairs` holds two by two (an odd last one paired with itself); the same bits.
#[cfg(target_arch = "x86_64")]
fn signed_batch_vnni<'o>(
    ty: GgmlType,
    rows: &[u8],
    row_bytes: usize,
    n: usize,
    pairs: &[BiasedPair],
    out_rows: &impl Fn(usize) -> &'o mut [f32],
) {
    use crate::quant::x86_vnni::rows_signed;
    /// Token pairs per kernel call: sixteen tokens' accumulators in eight registers.
    const PAIRS: usize = 8;
    thread_local! {
        static UNPACKED: RefCell<(SignedRows, Vec<f32>)> = RefCell::default();
    }
    UNPACKED.with_borrow_mut(|(w, spare)| {
        // SAFETY: `pairs` is made only where `x86_vnni::available()` (AVX2 included).
        unsafe { w.unpack(ty, rows, row_bytes / ty.block_bytes()) };
        let full = n / (2 * PAIRS) * PAIRS;
        for p in (0..full).step_by(PAIRS) {
            let a = std::array::from_fn(|i| &pairs[p + i]);
            let outs = std::array::from_fn(|i| [out_rows(2 * (p + i)), out_rows(2 * (p + i) + 1)]);
            // SAFETY: as above.
            unsafe { rows_signed::<PAIRS>(w, a, outs) };
        }
        for (p, pair) in pairs.iter().enumerate().skip(full) {
            let second = if 2 * p + 1 < n {
                out_rows(2 * p + 1)
            } else {
                spare.resize(rows.len() / row_bytes, 0.0);
                &mut spare[..]
            };
            // SAFETY: as above.
            unsafe { rows_signed::<1>(w, [pair], [[out_rows(2 * p), second]]) };
        }
    });
}

/// Every row of `x` (rows of `cols`) quantized into `kind`, into the buffers `rows` already
/// holds (a decode step's one row; a prompt's rows spread over the pool), so that on x86,
/// whose quantizers write into their buffers, a call of the last one's shape allocates
/// nothing.
fn quantize_rows(kind: ActType, x: &[f32], cols: usize, rows: &mut Vec<QuantizedAct>) {
    let n = x.len() / cols;
    rows.truncate(n);
    rows.resize_with(n, || QuantizedAct::F32(Vec::new()));
    if n == 1 {
        return quantize_act_into(kind, x, &mut rows[0]);
    }
    pool::par_chunks_mut(rows, 1, |t, row| {
        quantize_act_into(kind, &x[t * cols..(t + 1) * cols], &mut row[0])
    });
}

/// A task of a `matmuls` call: rows `rows.0..rows.1` of product `product`, against the
/// tokens of panels `panels.0..panels.1` where the product takes `x86::float_tiles` (every
/// token otherwise).
#[derive(Clone, Copy)]
struct Task {
    product: usize,
    rows: (usize, usize),
    panels: (usize, usize),
}

/// A result buffer shared by the tasks of one `run`, each writing its own rows.
#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: tasks write disjoint parts of the buffer behind the pointer, which outlives `run`.
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token's calls of Qwen2.5-0.5B (q4_k_m's Q5_0, Q8_0 and Q6_K; q8_0; q4_0 repacked)
    /// in `ranges` at 16 threads: a unit or more for every thread in every call, each unit in
    /// whole `few_vnni` row tiles and repacked groups where its product takes them, and none
    /// past `UNIT_BYTES` by more than its alignment.
    #[test]
    fn one_token_units_cover_sixteen_threads() {
        use crate::quant::x86::few_vnni;
        use GgmlType as T;
        /// A call's name, input length and products' (rows, type).
        type Call<'a> = (&'a str, usize, &'a [(usize, GgmlType)]);
        let calls: [Call; 5] = [
            (
                "qkv",
                896,
                &[(896, T::Q5_0), (128, T::Q5_0), (128, T::Q8_0)],
            ),
            ("attn_out", 896, &[(896, T::Q5_0)]),
            ("ffn_gate_up", 896, &[(4864, T::Q5_0), (4864, T::Q5_0)]),
            ("ffn_down", 4864, &[(896, T::Q6_K)]),
            ("lm_head", 896, &[(151936, T::Q8_0)]),
        ];
        let threads = 16;
        for (name, cols, products) in calls {
            for packed in [false, true] {
                let mut units = 0;
                for &(rows, ty) in products {
                    let ty = if packed { T::Q4_0 } else { ty };
                    let rb = cols / ty.block_size() * ty.block_bytes();
                    for n in 1..=FEW_TOKENS_MAX {
                        // As `run` aligns a unit: repacked rows in whole groups, rows of a
                        // `few_vnni` product in whole tiles.
                        let align = if packed {
                            group_rows(ty)
                        } else if few_vnni::takes(ty) {
                            few_vnni::tile_rows(n)
                        } else {
                            1
                        };
                        let per = if packed {
                            unit_rows(rb, 1).next_multiple_of(align)
                        } else {
                            unit_rows(rb, align)
                        };
                        assert_eq!(
                            per % align,
                            0,
                            "{name} {ty} x{n}: {per} rows, in whole units of {align}"
                        );
                        assert!(
                            (per - align) * rb < UNIT_BYTES,
                            "{name} {ty} x{n}: {per} rows of {rb} bytes"
                        );
                        if n == 1 {
                            units += rows.div_ceil(per);
                        }
                    }
                }
                assert!(units >= threads, "{name} (packed {packed}): {units} units");
            }
        }
    }

    /// A decode step of 2 to 8 sequences of Qwen2.5-0.5B (q4_k_m's Q5_0, Q8_0, Q4_K and Q6_K;
    /// q8_0; q4_0) takes a few-token kernel in every product on AVX-512 VNNI (or, q4_0's under
    /// `fast`, its repacked groups). In a call that also has batch products those products take
    /// fixed tasks (`one_token_rows`): at 16 threads each call has two tasks a thread or more
    /// (none idle while others take two), and its tasks differ by at most one row's share of
    /// work (a product's pieces are equal; pieces of different products of a call within 20%).
    #[test]
    fn few_token_steps_split_over_sixteen_threads() {
        if !crate::quant::x86_vnni::available() {
            eprintln!("skipped: no AVX-512 VNNI here, so 4-8 token Q4_0/Q5_0/Q8_0 products take the batch kernels");
            return;
        }
        use GgmlType as T;
        let calls: [(&str, &[(usize, GgmlType)]); 5] = [
            ("qkv", &[(896, T::Q5_0), (128, T::Q5_0), (128, T::Q8_0)]),
            ("attn_out", &[(896, T::Q5_0)]),
            ("ffn_gate_up", &[(4864, T::Q5_0), (4864, T::Q5_0)]),
            ("ffn_down", &[(896, T::Q6_K)]),
            ("lm_head", &[(151936, T::Q8_0)]),
        ];
        let threads = 16;
        let mut table = String::from("call         rows per task (tasks) per product\n");
        for (name, products) in calls {
            let total: usize = products.iter().map(|p| p.0).sum();
            let mut tasks = 0;
            let mut sizes = Vec::new();
            for &(rows, ty) in products {
                for ty in [ty, T::Q4_0, T::Q8_0, T::Q4_K] {
                    for n in 2..=FEW_TOKENS_MAX {
                        for kquant_fast in [false, true] {
                            let had = Had {
                                kquant_fast,
                                ..Had::default()
                            };
                            let path = Path::choose(ty, n, had);
                            assert!(
                                matches!(
                                    path,
                                    Path::FewVnni
                                        | Path::FewKquant
                                        | Path::FewKquantExact
                                        | Path::FewTokens
                                ),
                                "{ty} x{n}: {path:?}"
                            );
                        }
                    }
                }
                let per = one_token_rows(total, rows, threads);
                let count = rows.div_ceil(per);
                tasks += count;
                sizes.push(per);
                table += &format!("{name:<12} {per} ({count})  ");
            }
            table += "\n";
            // On `few_vnni`, a task's rows in whole row tiles (the rest go a pair at a
            // time): at least one whole tile a task, and most of its rows, for 2 to 8 tokens.
            for &(rows, ty) in products {
                if !crate::quant::x86::few_vnni::takes(ty) {
                    continue;
                }
                let per = one_token_rows(total, rows, threads);
                for n in 2..=FEW_TOKENS_MAX {
                    let tile = crate::quant::x86::few_vnni::tile_rows(n);
                    let whole = per / tile * tile;
                    assert!(
                        whole >= tile && 4 * whole >= 3 * per.min(rows),
                        "{name} {ty} x{n}: {per} rows a task, tiles of {tile}"
                    );
                }
            }
            assert!(tasks >= 2 * threads, "{name}: {tasks} tasks");
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(
                *hi as f64 <= 1.2 * *lo as f64,
                "{name}: tasks of {lo} to {hi} rows"
            );
            // A q4_0 model's repacked groups under `fast` (`Path::Packed`) round each task up
            // to whole pairs of groups: still three tasks for every two threads or more.
            let mut packed = 0;
            table += &format!("{:<12} ", "  q4_0 fast");
            for &(rows, _) in products {
                let had = Had {
                    packed: true,
                    kquant_fast: true,
                    ..Had::default()
                };
                assert_eq!(Path::choose(T::Q4_0, 4, had), Path::Packed);
                let per = one_token_rows(total, rows, threads).next_multiple_of(16);
                packed += rows.div_ceil(per);
                table += &format!("{per} ({})  ", rows.div_ceil(per));
            }
            table += "\n";
            assert!(2 * packed >= 3 * threads, "{name}: {packed} packed tasks");
        }
        eprintln!("{table}");
    }

    /// A prompt's rows quantized into the last call's buffers: the same values as each row
    /// quantized alone, and a second call of the same shape keeps every row's buffer.
    #[test]
    fn quantize_rows_reuses_the_last_calls_buffers() {
        let (n, cols) = (5, 256);
        let mut rng = crate::rng::SplitMix64::new(0x9a7e);
        let x: Vec<f32> = (0..n * cols).map(|_| rng.next_signed()).collect();
        for kind in [ActType::F16, ActType::Q8_0] {
            let mut rows = Vec::new();
            quantize_rows(kind, &x, cols, &mut rows);
            let at = |rows: &[QuantizedAct]| -> Vec<usize> {
                rows.iter()
                    .map(|r| match r {
                        QuantizedAct::F16(v) => v.as_ptr() as usize,
                        QuantizedAct::Q8_0(v) => v.as_ptr() as usize,
                        other => panic!("{:?}", other.act_type()),
                    })
                    .collect()
            };
            let first = at(&rows);
            quantize_rows(kind, &x, cols, &mut rows);
            assert_eq!(at(&rows), first, "{kind:?}: buffers kept");
            for (t, row) in rows.iter().enumerate() {
                let alone = crate::quant::quantize_act(kind, &x[t * cols..(t + 1) * cols]);
                match (row, &alone) {
                    (QuantizedAct::F16(a), QuantizedAct::F16(b)) => assert_eq!(a, b),
                    (QuantizedAct::Q8_0(a), QuantizedAct::Q8_0(b)) => assert_eq!(a, b),
                    _ => panic!("{kind:?}: another format"),
                }
            }
        }
    }

    /// Every (row, panel) pair of a fast float product falls in exactly one task, each task
    /// holds whole tiles (but the last rows), and a matrix with few rows for the threads is
    /// split by panels before its tasks go below 48 rows.
    #[test]
    fn float_tasks_cover_every_row_and_panel_once() {
        for (rows, panels, threads) in [(896, 2, 16), (9728, 4, 2), (128, 2, 16), (13, 1, 4)] {
            let mut tasks = Vec::new();
            float_tasks(rows, panels, threads, 7, &mut tasks);
            let mut seen = vec![0u8; rows * panels];
            for t in &tasks {
                assert_eq!(t.product, 7);
                assert!(t.rows.1 == rows || (t.rows.1 - t.rows.0) % 12 == 0);
                for r in t.rows.0..t.rows.1 {
                    for p in t.panels.0..t.panels.1 {
                        seen[r * panels + p] += 1;
                    }
                }
            }
            assert!(
                seen.iter().all(|&c| c == 1),
                "{rows} x {panels} at {threads}"
            );
        }
        let mut tasks = Vec::new();
        float_tasks(896, 2, 16, 0, &mut tasks);
        assert!(tasks.iter().any(|t| t.panels == (0, 1)), "split by panels");
        assert!(tasks.len() >= 64, "{} tasks", tasks.len());
        tasks.clear();
        float_tasks(9728, 4, 2, 0, &mut tasks);
        assert!(tasks
            .iter()
            .all(|t| t.panels == (0, 4) && (t.rows.1 - t.rows.0 == 48 || t.rows.1 == 9728)));
    }
}
