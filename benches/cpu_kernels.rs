//! Single-thread speed of the CPU engine's product kernels, one weight type at a time: a
//! matrix of random blocks times one activation row (decode) and times four (prompt), on a
//! matrix that stays in L2 (`hot`: the kernel's own speed) and on one streamed from memory
//! (`cold`: what a token sees). Prints ns per weight block and GB/s of weights, for `vec_dot`
//! row by row and for the engine's row loop (`vec_dot_rows`).
//!
//! `cargo bench --bench cpu_kernels` for the full run (`-- TYPE` for one type); under
//! `cargo test` a few rows, as a smoke test.

use std::time::Instant;

use cbtop::quant::{has_x4, quantize_act, vec_dot, vec_dot_x4, ActType, GgmlType, QuantizedAct};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `rows` random rows of `cols` weights of `ty`, every f16 scale field a small finite value.
fn matrix(ty: GgmlType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let bb = ty.block_bytes();
    let mut m: Vec<u8> = (0..rows * cols / ty.block_size() * bb)
        .map(|_| rng.next() as u8)
        .collect();
    let scale = half::f16::from_f32(0.01).to_le_bytes();
    let at: &[usize] = match ty {
        GgmlType::Q6_K => &[208],
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q4_1 | GgmlType::Q5_1 => &[0, 2],
        _ => &[0],
    };
    for b in m.chunks_exact_mut(bb) {
        for &o in at {
            b[o..o + 2].copy_from_slice(&scale);
        }
    }
    m
}

/// Best of `reps` passes over the matrix, seconds.
/// `n` activation rows of `cols` values in [-1, 1], quantized to `kind`.
fn random_acts(kind: ActType, cols: usize, n: usize, rng: &mut Rng) -> Vec<QuantizedAct> {
    (0..n)
        .map(|_| {
            let x: Vec<f32> = (0..cols)
                .map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            quantize_act(kind, &x)
        })
        .collect()
}

/// `n` random activation rows of `cols` values as Q8_0 blocks.
#[cfg(target_arch = "x86_64")]
fn q8_rows(cols: usize, n: usize, rng: &mut Rng) -> Vec<Vec<cbtop::quant::legacy::BlockQ8_0>> {
    random_acts(ActType::Q8_0, cols, n, rng)
        .into_iter()
        .map(|a| match a {
            QuantizedAct::Q8_0(a) => a,
            _ => unreachable!("quantized as Q8_0"),
        })
        .collect()
}

fn best(reps: usize, mut pass: impl FnMut() -> f32) -> f64 {
    let mut best = f64::MAX;
    let mut sink = 0f32;
    for _ in 0..reps {
        let t0 = Instant::now();
        sink += pass();
        best = best.min(t0.elapsed().as_secs_f64());
    }
    std::hint::black_box(sink);
    best
}

/// Best of `reps` passes, seconds of this thread's CPU time (a long pass on a shared machine
/// is mostly someone else's time slices by the wall clock).
fn best_cpu(reps: usize, mut pass: impl FnMut() -> f32) -> f64 {
    let now = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec for the call to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    };
    let mut best = f64::MAX;
    let mut sink = 0f32;
    for _ in 0..reps {
        let t0 = now();
        sink += pass();
        best = best.min(now() - t0);
    }
    std::hint::black_box(sink);
    best
}

fn run(ty: GgmlType, cols: usize, bytes: usize, reps: usize, label: &str) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let row_bytes = cols / ty.block_size() * ty.block_bytes();
    let rows = (bytes / row_bytes).max(4) / 4 * 4;
    let m = matrix(ty, rows, cols, &mut rng);
    let acts = random_acts(ActType::for_weights(ty), cols, 4, &mut rng);
    let blocks = (rows * cols / ty.block_size()) as f64;
    let one = best(reps, || {
        m.chunks_exact(row_bytes)
            .map(|r| vec_dot(ty, r, &acts[0]))
            .sum()
    });
    // The engine's decode path: the whole matrix in one `vec_dot_rows` call (its row loop,
    // the kernels inlined), as one thread's share of a product.
    let mut out = vec![0f32; rows];
    let looped = best(reps, || {
        cbtop::quant::vec_dot_rows(ty, &m, row_bytes, &acts[0], &mut out);
        out.iter().sum()
    });
    let mut line = format!(
        "{ty:<5} {label:<4} {:>7.1} MB  1 row: {:>6.2} ns/block {:>6.1} GB/s  rows: {:>6.2} ns/block",
        m.len() as f64 / 1e6,
        one * 1e9 / blocks,
        m.len() as f64 / one / 1e9,
        looped * 1e9 / blocks,
    );
    if has_x4(ty) {
        let four = best(reps, || {
            m.chunks_exact(row_bytes)
                .map(|r| {
                    let o = vec_dot_x4(ty, r, std::array::from_fn(|t| &acts[t])).unwrap();
                    o.iter().sum::<f32>()
                })
                .sum()
        });
        line += &format!("  4 rows: {:>6.2} ns/block/row", four * 1e9 / blocks / 4.0);
    }
    println!("{line}");
}

/// A prompt's F16 kernels, GFLOP/s on one thread: exact (a task's rows widened to f32 once,
/// not timed, then against four tokens, `rows_wide_x4`) and fast (`float_tiles`) on a matrix
/// in L2; then the fast tiles over the engine's 48-row tasks, streamed from memory and one
/// task repeated, in alternating passes (what streaming costs, apart from the machine's
/// moments).
#[cfg(target_arch = "x86_64")]
fn float_prompt(reps: usize) {
    use cbtop::quant::x86::{self, float_tiles, float_tiles::Tiles};
    if !x86::available() {
        return;
    }
    const TOKENS: usize = 64;
    for (cols, rows) in [(896, 48), (4864, 12)] {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let w: Vec<f32> = (0..rows * cols)
            .map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let mut m = Vec::new();
        cbtop::quant::float::quantize_f16(&w, &mut m);
        let x: Vec<Vec<f32>> = (0..TOKENS)
            .map(|_| {
                (0..cols)
                    .map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0)
                    .collect()
            })
            .collect();
        let mut wide = Vec::new();
        // SAFETY: AVX2 was just detected.
        unsafe { x86::float::widen(GgmlType::F16, &m, &mut wide) };
        let mut out = vec![vec![0f32; rows]; TOKENS];
        let flops = (2 * rows * cols * TOKENS) as f64;
        let exact = best(reps * 10, || {
            for t0 in (0..TOKENS).step_by(4) {
                let [o0, o1, o2, o3] = &mut out[t0..t0 + 4] else {
                    unreachable!()
                };
                let a = std::array::from_fn(|t| x[t0 + t].as_slice());
                // SAFETY: AVX2 was just detected.
                unsafe { x86::float::rows_wide_x4(&wide, cols, a, [o0, o1, o2, o3]) };
            }
            out[0][0]
        });
        let xs: Vec<&[f32]> = x.iter().map(|t| t.as_slice()).collect();
        let mut fast = |tiles: Tiles| {
            let mut panels = float_tiles::Panels::default();
            panels.resize(TOKENS, cols, tiles.width());
            let (data, len) = panels.pieces_mut();
            for (i, piece) in data.chunks_mut(len).enumerate() {
                float_tiles::pack_piece(&xs, cols, tiles.width(), i, piece);
            }
            best(reps * 10, || {
                let mut outs: Vec<&mut [f32]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
                // SAFETY: `Tiles::pick` found the kernels' features.
                unsafe { tiles.run(GgmlType::F16, &m, cols, &panels, (0, usize::MAX), &mut outs) };
                out[0][0]
            })
        };
        let avx2 = fast(Tiles::Avx2);
        let avx512 = (Tiles::pick() == Some(Tiles::Avx512))
            .then(|| [fast(Tiles::Avx512), fast(Tiles::Avx512Wide)]);
        println!(
            "F16 prompt, {cols} cols x {rows} rows, {TOKENS} tokens, GFLOP/s: exact {:.1}, fast \
             AVX2 {:.1}, fast AVX-512 12x32 / 6x64 {}",
            flops / exact / 1e9,
            flops / avx2 / 1e9,
            avx512.map_or("-".to_string(), |[a, b]| format!(
                "{:.1} / {:.1}",
                flops / a / 1e9,
                flops / b / 1e9
            ))
        );
        // The engine's tasks (48 rows) over a matrix held in huge pages as the engine holds
        // the file (64 MB of F16, 4 MB as a smoke test), timed by the thread's CPU time:
        // streamed (each task's rows from memory, as a prompt's products read them) and
        // repeated (the first task's rows over and over, from L2), in alternating passes so
        // both see the same moments of a shared machine.
        let (mb, rounds) = if reps >= 10 { (64, 15) } else { (4, 2) };
        const TASK_ROWS: usize = 48;
        let mut out = vec![vec![0f32; TASK_ROWS]; TOKENS];
        let one = m.repeat(TASK_ROWS.div_ceil(rows));
        let task_bytes = TASK_ROWS * 2 * cols;
        let mut big =
            cbtop::engine::cpu::huge::HugeSlice::<u8>::new((mb << 20) / task_bytes * task_bytes)
                .expect("the matrix's map");
        for (chunk, from) in big
            .chunks_mut(task_bytes)
            .zip(std::iter::repeat(&one[..task_bytes]))
        {
            chunk.copy_from_slice(from);
        }
        let tiles = Tiles::pick().expect("AVX2 was detected").for_tokens(TOKENS);
        let mut panels = float_tiles::Panels::default();
        panels.resize(TOKENS, cols, tiles.width());
        let (data, len) = panels.pieces_mut();
        for (i, piece) in data.chunks_mut(len).enumerate() {
            float_tiles::pack_piece(&xs, cols, tiles.width(), i, piece);
        }
        let flops = (big.len() / 2 * 2 * TOKENS) as f64;
        let mut rates = [Vec::new(), Vec::new()];
        for _ in 0..rounds {
            for (repeated, rates) in rates.iter_mut().enumerate() {
                let secs = best_cpu(1, || {
                    for task in big.chunks(task_bytes) {
                        let task = if repeated == 1 {
                            &big[..task_bytes]
                        } else {
                            task
                        };
                        let mut outs: Vec<&mut [f32]> =
                            out.iter_mut().map(|o| o.as_mut_slice()).collect();
                        // SAFETY: `Tiles::pick` found the kernel's features.
                        unsafe {
                            tiles.run(
                                GgmlType::F16,
                                task,
                                cols,
                                &panels,
                                (0, usize::MAX),
                                &mut outs,
                            )
                        };
                    }
                    out[0][0]
                });
                rates.push(flops / secs / 1e9);
            }
        }
        let summary = |r: &mut Vec<f64>| {
            r.sort_by(f64::total_cmp);
            format!("median {:.1}, best {:.1}", r[r.len() / 2], r[r.len() - 1])
        };
        let [streamed, repeated] = &mut rates;
        println!(
            "F16 prompt, {cols} cols, {TASK_ROWS}-row tasks, {TOKENS} tokens, fast {tiles:?}, GFLOP/s \
             over {rounds} alternating passes: streamed over {mb} MB {}; one task repeated {}",
            summary(streamed),
            summary(repeated)
        );
    }
}

/// A prompt's Q4_0, Q5_0 and Q8_0 kernels on a matrix in L2: the rows unpacked once and
/// taken against eight tokens at a time, AVX2 (`x86::prompt_rows`) and, where the CPU has it,
/// AVX-512 VNNI (`x86_vnni::rows_signed`). Prints ns per block and token.
#[cfg(target_arch = "x86_64")]
fn legacy_prompt(reps: usize) {
    use cbtop::quant::legacy::BlockQ8_0;
    use cbtop::quant::x86::prompt_rows::{self, Unpacked};
    use cbtop::quant::{x86, x86_vnni};
    if !x86::available() {
        return;
    }
    /// Best time of eight tokens against the unpacked rows, `R` rows by `T` tokens a tile.
    fn eight<B: Unpacked, const R: usize, const T: usize>(
        reps: usize,
        blocks: &[B],
        per_row: usize,
        acts: &[Vec<BlockQ8_0>],
        out: &mut [Vec<f32>],
    ) -> f64 {
        best(reps * 50, || {
            for t0 in (0..8).step_by(T) {
                let a = std::array::from_fn(|t| acts[t0 + t].as_slice());
                let mut rest = &mut out[t0..];
                let outs = std::array::from_fn(|_| {
                    let (o, r) = std::mem::take(&mut rest).split_first_mut().expect("8 rows");
                    rest = r;
                    o.as_mut_slice()
                });
                // SAFETY: AVX2 was detected by the caller.
                unsafe { prompt_rows::rows_unpacked::<B, R, T>(blocks, per_row, a, outs) };
            }
            out[0][0]
        })
    }
    /// The tile shapes tried, as (R, T, seconds).
    fn shapes<B: Unpacked>(
        reps: usize,
        blocks: &[B],
        per_row: usize,
        acts: &[Vec<BlockQ8_0>],
        out: &mut [Vec<f32>],
    ) -> Vec<(usize, usize, f64)> {
        vec![
            (1, 8, eight::<B, 1, 8>(reps, blocks, per_row, acts, out)),
            (2, 4, eight::<B, 2, 4>(reps, blocks, per_row, acts, out)),
            (4, 2, eight::<B, 4, 2>(reps, blocks, per_row, acts, out)),
            (3, 4, eight::<B, 3, 4>(reps, blocks, per_row, acts, out)),
            (2, 8, eight::<B, 2, 8>(reps, blocks, per_row, acts, out)),
        ]
    }
    for (ty, cols, rows) in [
        (GgmlType::Q4_0, 896, 16),
        (GgmlType::Q4_0, 4864, 4),
        (GgmlType::Q5_0, 896, 16),
        (GgmlType::Q8_0, 896, 12),
        (GgmlType::Q8_0, 4864, 4),
    ] {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let m = matrix(ty, rows, cols, &mut rng);
        let acts = q8_rows(cols, 8, &mut rng);
        let blocks = (rows * cols / 32 * 8) as f64;
        let mut out = vec![vec![0f32; rows]; 8];
        let t = if ty == GgmlType::Q8_0 {
            let mut unpacked = Vec::new();
            // SAFETY: AVX2 was just detected.
            unsafe { prompt_rows::unpack_signed(&m, &mut unpacked) };
            shapes(reps, &unpacked, cols / 32, &acts, &mut out)
        } else {
            let mut unpacked = Vec::new();
            // SAFETY: AVX2 was just detected.
            unsafe { prompt_rows::unpack_offset(ty, &m, &mut unpacked) };
            shapes(reps, &unpacked, cols / 32, &acts, &mut out)
        };
        let shown: Vec<String> = t
            .iter()
            .map(|(r, k, t)| format!("{r}x{k} {:.2}", t * 1e9 / blocks))
            .collect();
        println!(
            "{ty} prompt, {cols} cols, unpacked, AVX2, rows x tokens: {} ns/block/token",
            shown.join(", ")
        );
        if !x86_vnni::available() {
            println!("{ty} prompt, AVX-512 VNNI          : skipped (no AVX-512 VNNI on this CPU)");
            continue;
        }
        let pairs: Vec<x86_vnni::BiasedPair> = (0..4)
            .map(|p| x86_vnni::BiasedPair::new(&acts[2 * p], &acts[2 * p + 1]))
            .collect();
        let mut w = x86_vnni::SignedRows::default();
        // SAFETY: AVX-512 VNNI (so AVX2) was just detected.
        unsafe { w.unpack(ty, &m, cols / 32) };
        let t = best(reps * 50, || {
            let [o0, o1, o2, o3, o4, o5, o6, o7] = &mut out[..] else {
                unreachable!()
            };
            let a = std::array::from_fn(|p| &pairs[p]);
            // SAFETY: AVX-512 VNNI was just detected.
            unsafe { x86_vnni::rows_signed::<4>(&w, a, [[o0, o1], [o2, o3], [o4, o5], [o6, o7]]) };
            out[0][0]
        });
        println!(
            "{ty} prompt, AVX-512 VNNI          : {:>6.2} ns/block/token",
            t * 1e9 / blocks
        );
    }
}

/// A prompt's Q4_0/Q4_1/Q5_1/Q8_0 products under `fast` numerics (`x86::fast_rows`): rows repacked
/// eight at a time (not timed), then against eight tokens, on a matrix in L2. Prints ns per
/// block and token and GOP/s on one thread for several tokens per step.
#[cfg(target_arch = "x86_64")]
fn fast_prompt(reps: usize) {
    use cbtop::quant::x86::{self, fast_rows};
    if !x86::available() {
        return;
    }
    for (ty, cols, rows) in [
        (GgmlType::Q4_0, 896, 32),
        (GgmlType::Q4_0, 4864, 16),
        (GgmlType::Q4_1, 896, 32),
        (GgmlType::Q4_1, 4864, 16),
        (GgmlType::Q5_1, 896, 32),
        (GgmlType::Q5_1, 4864, 16),
        (GgmlType::Q8_0, 896, 32),
        (GgmlType::Q8_0, 4864, 16),
    ] {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let m = matrix(ty, rows, cols, &mut rng);
        let acts = q8_rows(cols, 8, &mut rng);
        let row_bytes = cols / 32 * ty.block_bytes();
        let t = match ty {
            GgmlType::Q8_0 => fast_tiles::<fast_rows::Q8_0x8>(reps, &m, row_bytes, &acts),
            GgmlType::Q4_1 => fast_tiles::<fast_rows::Q4_1x8>(reps, &m, row_bytes, &acts),
            GgmlType::Q5_1 => fast_tiles::<fast_rows::Q5_1x8>(reps, &m, row_bytes, &acts),
            _ => fast_tiles::<fast_rows::Q4_0x8>(reps, &m, row_bytes, &acts),
        };
        let shown: Vec<String> = t
            .iter()
            .map(|(k, t)| {
                let per = t * 1e9 / (rows * cols / 32 * 8) as f64;
                format!("8x{k} {per:.2} ({:.0} GOP/s)", 64.0 / per)
            })
            .collect();
        println!(
            "{ty} prompt, {cols} cols, fast repacked, rows x tokens: {} ns/block/token",
            shown.join(", ")
        );
        match ty {
            GgmlType::Q8_0 => fast_vnni::<fast_rows::Q8_0x8>(reps, &m, row_bytes, &acts),
            GgmlType::Q4_1 => fast_vnni::<fast_rows::Q4_1x8>(reps, &m, row_bytes, &acts),
            GgmlType::Q5_1 => fast_vnni::<fast_rows::Q5_1x8>(reps, &m, row_bytes, &acts),
            _ => fast_vnni::<fast_rows::Q4_0x8>(reps, &m, row_bytes, &acts),
        }
    }
}

/// Q8_0's one-token `fast` kernel on the file's layout (`rows_q8_0_one`), a matrix in L2
/// (`hot`) and one streamed from memory (`cold`). Prints GB/s of weights on one thread.
#[cfg(target_arch = "x86_64")]
fn q8_0_one(hot: usize, cold: usize, reps: usize) {
    use cbtop::quant::x86::{self, fast_rows};
    if !x86::available() {
        return;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cols = 896;
    let row_bytes = cols / 32 * 34;
    let QuantizedAct::Q8_0(a) = random_acts(ActType::Q8_0, cols, 1, &mut rng).remove(0) else {
        unreachable!("Q8_0 activations")
    };
    for (label, bytes) in [("hot", hot), ("cold", cold)] {
        let rows = bytes / row_bytes;
        let m = matrix(GgmlType::Q8_0, rows, cols, &mut rng);
        let mut out = vec![0f32; rows];
        // SAFETY: AVX2/FMA/F16C were just detected; every row holds `a.len()` blocks.
        let t = best_cpu(reps, || {
            unsafe { fast_rows::rows_q8_0_one(&m, row_bytes, &a, &mut out) };
            out.iter().sum()
        });
        println!(
            "Q8_0 one token {label:<4} {:>6.1} MB: {:>5.1} GB/s",
            m.len() as f64 / 1e6,
            m.len() as f64 / t / 1e9
        );
    }
}

/// One token against Q2_K, Q3_K and Q6_K rows in the file's layout under `fast` numerics
/// (`x86::kquants_one`), in L2 and streamed. Prints GB/s of weights on one thread.
#[cfg(target_arch = "x86_64")]
fn kquant_one(hot: usize, cold: usize, reps: usize) {
    use cbtop::quant::x86::{self, kquants_one};
    if !x86::available() {
        return;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cols = 4864;
    let QuantizedAct::Q8_K(a) = random_acts(ActType::Q8_K, cols, 1, &mut rng).remove(0) else {
        unreachable!("Q8_K activations")
    };
    for ty in [GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q6_K] {
        let row_bytes = cols / 256 * ty.block_bytes();
        for (label, bytes) in [("hot", hot), ("cold", cold)] {
            let rows = bytes / row_bytes;
            let m = matrix(ty, rows, cols, &mut rng);
            let mut out = vec![0f32; rows];
            let t = best_cpu(reps, || {
                // SAFETY: AVX2/FMA/F16C were just detected; every row holds `a.len()` blocks.
                unsafe { kquants_one::rows_one(ty, &m, row_bytes, &a, &mut out) };
                out.iter().sum()
            });
            println!(
                "{ty} one token fast {label:<4} {:>6.1} MB: {:>5.1} GB/s",
                m.len() as f64 / 1e6,
                m.len() as f64 / t / 1e9
            );
        }
    }
}

/// One token against a matrix streamed from memory (`bytes`) under `fast` numerics: the rows
/// repacked (not timed) on `rows16` (AVX-512 VNNI) or `rows8`, beside the exact row loop
/// (`vec_dot_rows`) on the file's layout. Prints GB/s of weights on one thread.
#[cfg(target_arch = "x86_64")]
fn fast_decode(bytes: usize, reps: usize) {
    use cbtop::quant::x86::{self, fast_rows, fast_rows_vnni};
    if !x86::available() {
        return;
    }
    /// Seconds of the best pass of one token over `blocks` (`per_row` blocks a row).
    fn packed<B: fast_rows_vnni::Pairs>(
        reps: usize,
        blocks: &[B],
        per_row: usize,
        a: &[B::Wide],
        act: &[B::Act],
    ) -> f64 {
        let groups: Vec<&[B]> = blocks.chunks_exact(per_row).collect();
        let mut out = [0f32; 16];
        best(reps, || {
            for pair in groups.chunks(2) {
                if pair.len() == 2 && fast_rows_vnni::available() {
                    // SAFETY: AVX-512 VNNI was just detected; every group and `a` hold
                    // `per_row` blocks.
                    unsafe { fast_rows_vnni::rows16::<B, 1>(pair[0], pair[1], [a], [&mut out]) };
                } else {
                    for g in pair {
                        // SAFETY: `x86::available()` was checked above.
                        unsafe { fast_rows::rows8::<B, 1>(g, [act], [&mut out[..8]]) };
                    }
                }
            }
            out[0]
        })
    }
    for (ty, cols) in [
        (GgmlType::Q4_0, 896),
        (GgmlType::Q4_1, 896),
        (GgmlType::Q4_1, 4864),
        (GgmlType::Q5_1, 896),
        (GgmlType::Q5_1, 4864),
    ] {
        let mut rng = Rng(0x5151_0000_0000_0001);
        let row_bytes = cols / 32 * ty.block_bytes();
        let rows = (bytes / row_bytes) / 16 * 16;
        let m = matrix(ty, rows, cols, &mut rng);
        let q8 = q8_rows(cols, 1, &mut rng).remove(0);
        let exact_act = random_acts(ActType::for_weights(ty), cols, 1, &mut rng).remove(0);
        let mut out = vec![0f32; rows];
        let exact = best(reps, || {
            cbtop::quant::vec_dot_rows(ty, &m, row_bytes, &exact_act, &mut out);
            out[0]
        });
        fn run<B: fast_rows_vnni::Pairs>(
            reps: usize,
            m: &[u8],
            row_bytes: usize,
            q8: &[cbtop::quant::legacy::BlockQ8_0],
        ) -> f64 {
            let mut blocks: Vec<B> = Vec::new();
            fast_rows::repack(m, row_bytes, &mut blocks);
            let wide: Vec<B::Wide> = q8.iter().map(B::wide).collect();
            let act: Vec<B::Act> = q8.iter().map(B::act).collect();
            packed(reps, &blocks, q8.len(), &wide, &act)
        }
        let fast = match ty {
            GgmlType::Q4_0 => run::<fast_rows::Q4_0x8>(reps, &m, row_bytes, &q8),
            GgmlType::Q4_1 => run::<fast_rows::Q4_1x8>(reps, &m, row_bytes, &q8),
            _ => run::<fast_rows::Q5_1x8>(reps, &m, row_bytes, &q8),
        };
        let gbs = |t: f64| m.len() as f64 / t / 1e9;
        println!(
            "{ty} decode, {cols} cols, {:.1} MB: exact rows {:.1} GB/s, fast repacked {:.1} GB/s \
             ({})",
            m.len() as f64 / 1e6,
            gbs(exact),
            gbs(fast),
            if fast_rows_vnni::available() {
                "rows16"
            } else {
                "rows8"
            }
        );
    }
}

/// The Q4_0, Q4_1, Q5_1 or Q8_0 kernel on AVX-512 VNNI (`x86::fast_rows_vnni`, sixteen rows by
/// eight tokens).
#[cfg(target_arch = "x86_64")]
fn fast_vnni<B: cbtop::quant::x86::fast_rows_vnni::Pairs>(
    reps: usize,
    m: &[u8],
    row_bytes: usize,
    acts: &[Vec<cbtop::quant::legacy::BlockQ8_0>],
) {
    use cbtop::quant::x86::{fast_rows, fast_rows_vnni};
    if !fast_rows_vnni::available() {
        println!(
            "{} prompt, fast AVX-512 VNNI: skipped (no AVX-512 VNNI on this CPU)",
            B::TYPE
        );
        return;
    }
    let mut blocks: Vec<B> = Vec::new();
    fast_rows::repack(m, row_bytes, &mut blocks);
    let per_row = acts[0].len();
    let acts: Vec<Vec<_>> = acts
        .iter()
        .map(|a| a.iter().map(B::wide).collect())
        .collect();
    let mut out = vec![[0f32; 16]; 8];
    let groups: Vec<&[B]> = blocks.chunks_exact(per_row).collect();
    let t = best(reps * 50, || {
        for pair in groups.chunks_exact(2) {
            let a = std::array::from_fn(|t| acts[t].as_slice());
            let mut rest = &mut out[..];
            let outs = std::array::from_fn(|_| {
                let (o, r) = std::mem::take(&mut rest).split_first_mut().expect("8");
                rest = r;
                o.as_mut_slice()
            });
            // SAFETY: AVX-512 VNNI was just detected.
            unsafe { fast_rows_vnni::rows16::<B, 8>(pair[0], pair[1], a, outs) };
        }
        out[0][0]
    });
    let per = t * 1e9 / (groups.len() / 2 * 16 * per_row * 8) as f64;
    println!(
        "{} prompt, {} cols, fast AVX-512 VNNI 16x8: {per:.2} ns/block/token ({:.0} GOP/s)",
        B::TYPE,
        per_row * 32,
        64.0 / per
    );
}

/// `fast_tile` at 4, 6 and 8 tokens a step, as (tokens, seconds for eight tokens).
#[cfg(target_arch = "x86_64")]
fn fast_tiles<B: cbtop::quant::x86::fast_rows::Interleaved>(
    reps: usize,
    m: &[u8],
    row_bytes: usize,
    acts: &[Vec<cbtop::quant::legacy::BlockQ8_0>],
) -> [(usize, f64); 3] {
    [
        (4, fast_tile::<B, 4>(reps, m, row_bytes, acts)),
        (6, fast_tile::<B, 6>(reps, m, row_bytes, acts) * 8.0 / 6.0),
        (8, fast_tile::<B, 8>(reps, m, row_bytes, acts)),
    ]
}

/// Best time of eight tokens against `m`'s rows repacked as `B`, `T` tokens a step.
#[cfg(target_arch = "x86_64")]
fn fast_tile<B: cbtop::quant::x86::fast_rows::Interleaved, const T: usize>(
    reps: usize,
    m: &[u8],
    row_bytes: usize,
    acts: &[Vec<cbtop::quant::legacy::BlockQ8_0>],
) -> f64 {
    use cbtop::quant::x86::fast_rows;
    let mut blocks: Vec<B> = Vec::new();
    fast_rows::repack(m, row_bytes, &mut blocks);
    let per_row = acts[0].len();
    let acts: Vec<Vec<B::Act>> = acts
        .iter()
        .map(|a| a.iter().map(B::act).collect())
        .collect();
    let mut out = vec![[0f32; 8]; 8];
    best(reps * 50, || {
        for group in blocks.chunks_exact(per_row) {
            for t0 in (0..8 / T * T).step_by(T) {
                let a = std::array::from_fn(|t| acts[t0 + t].as_slice());
                let mut rest = &mut out[t0..];
                let outs = std::array::from_fn(|_| {
                    let (o, r) = std::mem::take(&mut rest).split_first_mut().expect("8");
                    rest = r;
                    o.as_mut_slice()
                });
                // SAFETY: as above.
                unsafe { fast_rows::rows8::<B, T>(group, a, outs) };
            }
        }
        out[0][0]
    })
}

/// A prompt's k-quant products (four tokens per weight row) on a matrix in L2: the AVX2
/// kernels (`x86_kquants`) and, where the CPU has it, AVX-512 (`x86_kquants512`). Prints ns
/// per block and token.
#[cfg(target_arch = "x86_64")]
fn kquant_prompt(reps: usize) {
    use cbtop::quant::kquants::BlockQ8K;
    use cbtop::quant::{x86, x86_kquants as k, x86_kquants512 as k512};
    if !x86::available() {
        return;
    }
    type Rows4 = unsafe fn(&[u8], usize, [&[BlockQ8K]; 4], [&mut [f32]; 4]);
    let cases: [(GgmlType, Rows4, Rows4); 3] = [
        (
            GgmlType::Q4_K,
            k::rows_q4_k_q8_k_x4,
            k512::rows_q4_k_q8_k_x4,
        ),
        (
            GgmlType::Q5_K,
            k::rows_q5_k_q8_k_x4,
            k512::rows_q5_k_q8_k_x4,
        ),
        (
            GgmlType::Q6_K,
            k::rows_q6_k_q8_k_x4,
            k512::rows_q6_k_q8_k_x4,
        ),
    ];
    let (cols, rows) = (4864, 16);
    let mut rng = Rng(0x0fed_cba9_8765_4321);
    for (ty, avx2, avx512) in cases {
        let m = matrix(ty, rows, cols, &mut rng);
        let row_bytes = m.len() / rows;
        let acts: Vec<Vec<BlockQ8K>> = random_acts(ActType::Q8_K, cols, 4, &mut rng)
            .into_iter()
            .map(|a| match a {
                QuantizedAct::Q8_K(a) => a,
                _ => unreachable!(),
            })
            .collect();
        let blocks = (rows * cols / 256 * 4) as f64;
        let mut out = vec![vec![0f32; rows]; 4];
        let mut time = |f: Rows4| {
            best(reps * 50, || {
                let [o0, o1, o2, o3] = &mut out[..] else {
                    unreachable!()
                };
                let a = std::array::from_fn(|t| acts[t].as_slice());
                // SAFETY: the kernel's features were detected before it is timed.
                unsafe { f(&m, row_bytes, a, [o0, o1, o2, o3]) };
                out[0][0]
            })
        };
        let t = time(avx2);
        let mut line = format!(
            "{ty:<5} prompt x4, AVX2: {:>6.2} ns/block/token",
            t * 1e9 / blocks
        );
        if k512::available() {
            let t = time(avx512);
            line += &format!(", AVX-512: {:>6.2}", t * 1e9 / blocks);
        } else {
            line += ", AVX-512: skipped (no AVX-512 F/BW on this CPU)";
        }
        let (unpack, fast) = fast_kquant(reps, ty, &m, &acts);
        line += &format!(
            "; fast: {:>6.2} ns/block/token (unpacking {:.1} ns/block)",
            fast * 1e9 / blocks,
            unpack * 1e9 / (rows * cols / 256) as f64
        );
        println!("{line}");
    }
}

/// The `fast` numerics' k-quant kernel (`x86::fast_kquants`): seconds to unpack `m`, and to
/// take the unpacked rows against the four tokens of `acts`.
#[cfg(target_arch = "x86_64")]
fn fast_kquant(
    reps: usize,
    ty: GgmlType,
    m: &[u8],
    acts: &[Vec<cbtop::quant::kquants::BlockQ8K>],
) -> (f64, f64) {
    use cbtop::quant::x86::fast_kquants::{self, rows, unpack};
    let mut blocks = Vec::new();
    let per_row = acts[0].len();
    let unpacking = best(reps * 50, || {
        // SAFETY: the caller checked `x86::available()`.
        unsafe { unpack(ty, m, &mut blocks) };
        blocks.len() as f32
    });
    let mut out = vec![vec![0f32; m.len() / (per_row * ty.block_bytes())]; 4];
    let dots = best(reps * 50, || {
        let [o0, o1, o2, o3] = &mut out[..] else {
            unreachable!()
        };
        let a = std::array::from_fn(|t| acts[t].as_slice());
        // SAFETY: as above; every token's row has `per_row` blocks.
        unsafe { rows::<4>(&blocks, per_row, a, [o0, o1, o2, o3]) };
        out[0][0]
    });
    if cbtop::quant::x86_kquants512::available() {
        let wide = best(reps * 50, || {
            let [o0, o1, o2, o3] = &mut out[..] else {
                unreachable!()
            };
            let a = |t: usize| acts[t].as_slice();
            // SAFETY: AVX-512 F/BW were just detected; as above.
            unsafe {
                fast_kquants::rows512::<2>(
                    &blocks,
                    per_row,
                    [[a(0), a(1)], [a(2), a(3)]],
                    [[o0, o1], [o2, o3]],
                )
            };
            out[0][0]
        });
        println!(
            "{ty:<5} prompt, fast AVX-512 pairs: {:.2} ns/block/token",
            wide * 1e9 / (blocks.len() * 4) as f64
        );
    }
    (unpacking, dots)
}

/// One decode step's attention on one thread: SmolLM2's shape (9 query heads over 3 KV heads
/// of 64) against `n_ctx` cached positions. Prints ns per (head, position).
/// One decode query over `n_ctx` cached positions; `window`: a sliding layer's (gemma3),
/// which reads only the last `window` of them.
fn attention(n_ctx: usize, window: Option<usize>, reps: usize) {
    use cbtop::engine::cpu::attention::{attention_layer, AttnLayer, AttnShape};
    let shape = AttnShape {
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
    };
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut val = || half::f16::from_f32((rng.next() % 2001) as f32 / 1000.0 - 1.0);
    let kv = n_ctx * 3 * 64;
    let keys: Vec<half::f16> = (0..kv).map(|_| val()).collect();
    let values: Vec<half::f16> = (0..kv).map(|_| val()).collect();
    let q: Vec<f32> = (0..9 * 64)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect();
    let mut out = vec![0f32; q.len()];
    let t = best(reps, || {
        let layer = AttnLayer {
            window,
            ..AttnLayer::causal(64)
        };
        attention_layer(shape, layer, &q, &keys, &values, n_ctx - 1, &mut out);
        out[0]
    });
    let w = window.map_or(String::new(), |w| format!(" window {w}"));
    println!(
        "attention decode  ctx {n_ctx:>5}{w}: {:>8.2} us per query ({:>6.2} ns/(head, position))",
        t * 1e6,
        t * 1e9 / (9 * n_ctx) as f64
    );
}

fn main() {
    cbtop::engine::cpu::pool::init(1);
    let full = std::env::args().any(|a| a == "--bench");
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let (hot, cold, reps) = if full {
        (256 << 10, 64 << 20, 20)
    } else {
        (16 << 10, 64 << 10, 2)
    };
    for (ty, cols) in [
        (GgmlType::Q4_0, 896),
        (GgmlType::Q4_1, 576),
        (GgmlType::Q5_0, 896),
        (GgmlType::Q8_0, 896),
        (GgmlType::Q2_K, 4864),
        (GgmlType::Q3_K, 4864),
        (GgmlType::Q4_K, 4864),
        (GgmlType::Q5_K, 4864),
        (GgmlType::Q6_K, 4864),
    ] {
        if !only.is_empty() && !only.iter().any(|o| o.eq_ignore_ascii_case(&ty.to_string())) {
            continue;
        }
        run(ty, cols, hot, reps, "hot");
        run(ty, cols, cold, reps.min(5), "cold");
    }
    #[cfg(target_arch = "x86_64")]
    if only.iter().any(|o| o.eq_ignore_ascii_case("fast")) {
        q8_0_one(hot, cold, reps);
        kquant_one(hot, cold, reps);
        fast_decode(cold, reps.min(5));
        fast_prompt(reps);
    }
    #[cfg(target_arch = "x86_64")]
    if only.iter().any(|o| o.eq_ignore_ascii_case("float")) {
        float_prompt(reps);
    }
    if only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case("prompt")) {
        legacy_prompt(reps);
        fast_prompt(reps);
        float_prompt(reps);
        kquant_prompt(reps);
    }
    if only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case("attention")) {
        for n_ctx in [128, 1024] {
            attention(n_ctx, None, reps);
        }
        attention(8192, None, reps);
        attention(8192, Some(512), reps);
    }
}
