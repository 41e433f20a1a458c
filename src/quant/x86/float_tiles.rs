//! A prompt's float-weight products (F16/BF16 rows widened to f32 a tile and a step at a
//! time) for the CPU's `fast` numerics, as small matrix products: the tokens are packed once
//! per call into panels of a few vectors' width, value by value along the row (`Panels`), and
//! each weight of a tile's rows is broadcast against a panel's vectors. A step loads `TV`
//! token vectors and `MR` weights for `MR * TV` fused multiply-adds, and each lane of an
//! accumulator is one (row, token) result, so no lane sums are left at the end. AVX2 takes 6
//! rows by 16 tokens (twelve accumulators of sixteen registers), AVX-512 12 rows by 32 or,
//! past 32 tokens, 6 rows by 64 (24 of 32). Each result is one chain of fused multiply-adds
//! along the row, so results are within float reordering of the reference's lane sums.

use crate::quant::GgmlType;
use std::arch::x86_64::*;
use std::cell::RefCell;

/// A vector of f32 lanes and the operations the tiles take.
trait Lanes: Copy {
    const N: usize;
    unsafe fn zero() -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn splat(p: *const f32) -> Self;
    unsafe fn store(self, p: *mut f32);
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    /// The F16 or BF16 (`ty`) weights of `w` widened to f32 into `out`, exactly.
    #[inline(always)]
    unsafe fn widen(ty: GgmlType, w: &[u8], out: &mut [f32]) {
        super::float::widen_into(ty, w, out)
    }
}

impl Lanes for __m256 {
    const N: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        _mm256_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> __m256 {
        _mm256_broadcast_ss(&*p)
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm256_storeu_ps(p, self)
    }
    #[inline(always)]
    unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
}

impl Lanes for __m512 {
    const N: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        _mm512_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> __m512 {
        _mm512_set1_ps(*p)
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm512_storeu_ps(p, self)
    }
    #[inline(always)]
    unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    /// Sixteen weights a conversion, the rest through the AVX2 widening.
    #[inline(always)]
    unsafe fn widen(ty: GgmlType, w: &[u8], out: &mut [f32]) {
        let n = w.len() / 2;
        assert!(out.len() >= n, "short widening buffer");
        let whole = n / 16 * 16;
        let (src, dst) = (w.as_ptr(), out.as_mut_ptr());
        for i in (0..whole).step_by(16) {
            let h = _mm256_loadu_si256(src.add(2 * i) as *const __m256i);
            let v = match ty {
                GgmlType::F16 => _mm512_cvtph_ps(h),
                GgmlType::BF16 => {
                    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
                }
                _ => panic!("{ty} weights are not widened"),
            };
            _mm512_storeu_ps(dst.add(i), v);
        }
        super::float::widen_into(ty, &w[2 * whole..], &mut out[whole..]);
    }
}

/// Weights of a row per step over the panels: a panel's values for a step (16 KB on AVX2,
/// 32 KB on AVX-512) stay in L1 or L2 while the task's row groups stream past them.
const STEP: usize = 256;

/// Which tile kernel runs, picked from the CPU's features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiles {
    /// 6 rows by two 8-lane vectors of tokens (AVX2, FMA).
    Avx2,
    /// 12 rows by two 16-lane vectors of tokens (AVX-512F).
    Avx512,
    /// 6 rows by four 16-lane vectors of tokens (AVX-512F), for more than 32 tokens: a
    /// tile's six rows of a step stay in L1 beside the panel's step, a weight's row is
    /// broadcast against 64 tokens, and the task streams its rows a tile at a time.
    Avx512Wide,
}

impl Tiles {
    /// AVX-512 where the CPU has AVX-512F, else AVX2; None without AVX2, FMA and F16C.
    pub fn pick() -> Option<Tiles> {
        if !super::features::available() {
            None
        } else if is_x86_feature_detected!("avx512f") {
            Some(Tiles::Avx512)
        } else {
            Some(Tiles::Avx2)
        }
    }

    /// The kernel for `n` tokens: AVX-512's wide tiles past 32 tokens (a prompt of 64 is one
    /// panel), where no more of a panel is padding than of two narrow ones.
    pub fn for_tokens(self, n: usize) -> Tiles {
        match self {
            Tiles::Avx512 | Tiles::Avx512Wide if n > 32 => Tiles::Avx512Wide,
            Tiles::Avx512Wide => Tiles::Avx512,
            other => other,
        }
    }

    /// Tokens in a panel.
    pub fn width(self) -> usize {
        match self {
            Tiles::Avx2 => 16,
            Tiles::Avx512 => 32,
            Tiles::Avx512Wide => 64,
        }
    }

    /// Panels for `n` tokens.
    pub fn panels(self, n: usize) -> usize {
        n.div_ceil(self.width())
    }

    /// `out[t - t0][r] = row r · token t` for the F16 or BF16 (`ty`) rows of `rows` (`cols`
    /// weights each) and the tokens `t` of panels `part.0..part.1` of `tokens` (`t0` the
    /// first of them).
    ///
    /// # Safety
    /// The CPU must have this kernel's features (as `pick` found them).
    pub unsafe fn run(
        self,
        ty: GgmlType,
        rows: &[u8],
        cols: usize,
        tokens: &Panels,
        part: (usize, usize),
        out: &mut [&mut [f32]],
    ) {
        assert_eq!(
            tokens.width,
            self.width(),
            "panels packed for another kernel"
        );
        let end = part.1.min(tokens.count());
        let part = (part.0.min(end), end);
        match self {
            Tiles::Avx2 => rows_avx2(ty, rows, cols, (tokens, part), out),
            Tiles::Avx512 => rows_avx512(ty, rows, cols, (tokens, part), out),
            Tiles::Avx512Wide => rows_avx512_wide(ty, rows, cols, (tokens, part), out),
        }
    }
}

/// A prompt's tokens packed for the tiles: panels of `width` tokens, each panel's values
/// weight by weight (`[panel][k][token]`), the last panel padded with zero tokens and each
/// panel's weights to whole pieces of `PIECE` (so the pieces can be packed in parallel).
#[derive(Default)]
pub struct Panels {
    data: Vec<f32>,
    /// Values before the first whole cache line of `data`, where the panels start: a token
    /// vector's load then never spans two lines (a large allocation starts 16 bytes into one).
    skew: usize,
    n: usize,
    cols: usize,
    width: usize,
}

/// f32 values in a cache line.
const LINE_VALUES: usize = 16;

/// Weights of a panel packed by one `pack_piece` call: a 4864-weight input's 64-token panel
/// is 76 pieces, enough to keep sixteen threads busy.
pub const PIECE: usize = 64;

impl Panels {
    /// Room for `n` tokens of `cols` values in panels of `width`; `pieces_mut` then fills it.
    /// The buffer only grows (a step's products alternate between inputs of two lengths):
    /// `pack_piece` writes every piece whole, so what an earlier call left is not cleared.
    pub fn resize(&mut self, n: usize, cols: usize, width: usize) {
        self.n = n;
        self.cols = cols;
        self.width = width;
        let len = self.len();
        if self.data.len() < len + LINE_VALUES {
            self.data.resize(len + LINE_VALUES, 0.0);
        }
        self.skew = self.data.as_ptr().align_offset(64).min(LINE_VALUES);
    }

    /// Values the packed panels take (`resize`'s shape).
    fn len(&self) -> usize {
        self.n.div_ceil(self.width.max(1)) * self.width * self.cols.next_multiple_of(PIECE)
    }

    /// The panels' storage and the length of a piece: piece `i` goes to `pack_piece`.
    pub fn pieces_mut(&mut self) -> (&mut [f32], usize) {
        let len = self.len();
        (
            &mut self.data[self.skew..self.skew + len],
            self.width * PIECE,
        )
    }

    /// Tokens packed.
    pub fn tokens(&self) -> usize {
        self.n
    }

    /// Panels packed.
    pub fn count(&self) -> usize {
        self.n.div_ceil(self.width.max(1))
    }

    fn panel(&self, p: usize) -> *const f32 {
        self.data[self.skew + p * self.width * self.cols.next_multiple_of(PIECE)..].as_ptr()
    }
}

/// Packs piece `i` of `Panels` (`width * PIECE` values) from the tokens `x` (every token of
/// the prompt, each at least `cols` long): a panel's `PIECE` weights, zeros past `cols` and
/// for tokens past the last.
pub fn pack_piece(x: &[&[f32]], cols: usize, width: usize, i: usize, piece: &mut [f32]) {
    assert_eq!(piece.len(), width * PIECE, "piece shape");
    let per = cols.div_ceil(PIECE);
    let (p, k0) = (i / per, i % per * PIECE);
    let k1 = (k0 + PIECE).min(cols);
    let x = &x[(p * width).min(x.len())..];
    let x = &x[..width.min(x.len())];
    assert!(x.iter().all(|t| t.len() >= k1), "short token");
    piece.fill(0.0);
    let mut done = 0;
    if super::features::available() && width.is_multiple_of(8) {
        // SAFETY: AVX2 was just detected; every token holds `k0..k1` and the piece
        // `PIECE * width` values.
        done = unsafe { pack_avx2(x, (k0, k1), width, piece) };
    }
    for (t, tok) in x.iter().enumerate().skip(done) {
        for (k, v) in tok[k0..k1].iter().enumerate() {
            piece[k * width + t] = *v;
        }
    }
    if done > 0 {
        // The weights past the last whole eight of the transposed tokens.
        for (t, tok) in x.iter().enumerate().take(done) {
            for k in k0 + (k1 - k0) / 8 * 8..k1 {
                piece[(k - k0) * width + t] = tok[k];
            }
        }
    }
}

/// `pack_piece`'s whole groups of eight tokens and eight weights, eight by eight through a
/// transpose (the scalar copy wrote a value at a time a line apart); returns the tokens it
/// packed (their weights past the last whole eight are left to the caller).
///
/// # Safety
/// The CPU must support AVX2; every token of `x` holds weights `k0..k1`, and `piece` holds
/// `(k1 - k0) * width` values, `x.len() <= width`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_avx2(
    x: &[&[f32]],
    (k0, k1): (usize, usize),
    width: usize,
    piece: &mut [f32],
) -> usize {
    let groups = x.len() / 8;
    let ks = (k1 - k0) / 8 * 8;
    for g in 0..groups {
        let t0 = 8 * g;
        for k in (0..ks).step_by(8) {
            let v =
                std::array::from_fn(|i| _mm256_loadu_ps(x[t0 + i][k0 + k..k0 + k + 8].as_ptr()));
            for (j, v) in transpose8(v).into_iter().enumerate() {
                let at = (k + j) * width + t0;
                _mm256_storeu_ps(piece[at..at + 8].as_mut_ptr(), v);
            }
        }
    }
    groups * 8
}

/// The file's rows a tile prefetches while it computes (the next tile's weights of a step,
/// which the next `widen_into` reads): `lines` cache lines, `RUN_LINES` of them from each
/// row from `at` on (a short last step's runs ask for a few lines past it, which a prefetch
/// may), rows `row_bytes` apart, the first `first` lines asked for already.
#[derive(Clone, Copy)]
struct Ahead {
    at: *const u8,
    row_bytes: usize,
    lines: usize,
    first: usize,
}

/// Cache lines of a row's run of a step (`STEP` 2-byte weights).
const RUN_LINES: usize = STEP * 2 / 64;

impl Ahead {
    /// Asks for line `line` of the runs.
    #[inline(always)]
    unsafe fn line(&self, line: usize) {
        let at = (line / RUN_LINES) * self.row_bytes + (line % RUN_LINES) * 64;
        _mm_prefetch::<_MM_HINT_T0>(self.at.wrapping_add(at) as *const i8);
    }
}

/// One tile: rows `MR` from `rows` (a row every `cols`) against a panel's `TV` vectors of
/// tokens (`panel`, `width` a weight), over `kc` weights, adding into `acc` (a row every
/// `stride`; with `FIRST`, the first step's, writing over it), asking for a line of `ahead` a
/// weight until it has asked for them all.
#[inline(always)]
unsafe fn tile<V: Lanes, const MR: usize, const TV: usize, const FIRST: bool>(
    rows: *const f32,
    cols: usize,
    panel: *const f32,
    kc: usize,
    acc: *mut f32,
    stride: usize,
    ahead: Ahead,
) {
    let width = TV * V::N;
    let mut a = [[V::zero(); TV]; MR];
    if !FIRST {
        for (r, a) in a.iter_mut().enumerate() {
            for (v, a) in a.iter_mut().enumerate() {
                *a = V::load(acc.add(r * stride + v * V::N));
            }
        }
    }
    for k in 0..kc {
        if ahead.first + k < ahead.lines {
            ahead.line(ahead.first + k);
        }
        let mut x = [V::zero(); TV];
        for (v, x) in x.iter_mut().enumerate() {
            *x = V::load(panel.add(k * width + v * V::N));
        }
        for (r, a) in a.iter_mut().enumerate() {
            let w = V::splat(rows.add(r * cols + k));
            for (a, x) in a.iter_mut().zip(&x) {
                *a = V::fma(w, *x, *a);
            }
        }
    }
    for (r, a) in a.iter().enumerate() {
        for (v, a) in a.iter().enumerate() {
            a.store(acc.add(r * stride + v * V::N));
        }
    }
}

thread_local! {
    /// Each thread's results of a task (`[row][token]` over the panels' width) and a tile's
    /// rows of the current step widened to f32 (`[row][STEP]`).
    static ACC: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Every row of `rows` against every token of `tokens`, in steps of `STEP` weights, each step
/// `MR` rows at a time (the last tile's missing rows are zeros): the tile's weights of the
/// step widened to f32 (exact) into a buffer that stays in L1, then taken over the panels.
/// The rows stream from memory in runs of a step, shorter than the hardware prefetchers
/// follow, so each tile asks for the next tile's runs while it computes.
#[inline(always)]
unsafe fn all<V: Lanes, const MR: usize, const TV: usize>(
    ty: GgmlType,
    rows: &[u8],
    cols: usize,
    (tokens, (p0, p1)): (&Panels, (usize, usize)),
    out: &mut [&mut [f32]],
) {
    let row_bytes = 2 * cols;
    let (t0, t1) = (p0 * tokens.width, (p1 * tokens.width).min(tokens.n));
    let (n_rows, n) = (rows.len() / row_bytes, t1.saturating_sub(t0));
    assert!(
        tokens.cols == cols && tokens.width == TV * V::N,
        "panels' shape"
    );
    assert!(
        out.len() >= n && out.iter().all(|o| o.len() >= n_rows),
        "short output"
    );
    let padded = n_rows.next_multiple_of(MR);
    let stride = (p1 - p0) * tokens.width;
    let (mut acc, mut wide) = ACC.take();
    // The first step writes every result over whatever an earlier task left (rows without
    // weights have no step: their zeros are written here).
    if acc.len() < padded * stride {
        acc.resize(padded * stride, 0.0);
    }
    if cols == 0 {
        acc.fill(0.0);
    }
    // The rows past the task's last stay zero: only live rows are widened into it.
    wide.clear();
    wide.resize(MR * STEP, 0.0);
    // Tile `r0`'s runs of step `k0`, as `Ahead` asks for them.
    let runs = |r0: usize, k0: usize| Ahead {
        at: rows.as_ptr().wrapping_add(r0 * row_bytes + 2 * k0),
        row_bytes,
        lines: MR.min(n_rows.saturating_sub(r0)) * RUN_LINES,
        first: 0,
    };
    let first = runs(0, 0);
    for line in 0..first.lines {
        first.line(line);
    }
    for k0 in (0..cols).step_by(STEP) {
        let kc = STEP.min(cols - k0);
        for r0 in (0..padded).step_by(MR) {
            for r in r0..n_rows.min(r0 + MR) {
                let at = r * row_bytes + 2 * k0;
                let into = &mut wide[(r - r0) * STEP..];
                V::widen(ty, &rows[at..at + 2 * kc], into);
            }
            let next = match r0 + MR < padded {
                true => runs(r0 + MR, k0),
                false => runs(0, k0 + STEP),
            };
            for p in p0..p1 {
                let panel = tokens.panel(p).add(k0 * tokens.width);
                let at = acc.as_mut_ptr().add(r0 * stride + (p - p0) * tokens.width);
                let ahead = Ahead {
                    first: (p - p0) * kc,
                    ..next
                };
                let w = wide.as_ptr();
                match k0 {
                    0 => tile::<V, MR, TV, true>(w, STEP, panel, kc, at, stride, ahead),
                    _ => tile::<V, MR, TV, false>(w, STEP, panel, kc, at, stride, ahead),
                }
            }
        }
    }
    transpose_out(&acc, stride, n_rows, &mut out[..n]);
    ACC.set((acc, wide));
}

/// Eight vectors of eight lanes transposed: lane `j` of vector `i` goes to lane `i` of
/// vector `j`.
#[inline(always)]
unsafe fn transpose8(v: [__m256; 8]) -> [__m256; 8] {
    let lo = |a, b| _mm256_unpacklo_ps(a, b);
    let hi = |a, b| _mm256_unpackhi_ps(a, b);
    let (t0, t1, t2, t3) = (
        lo(v[0], v[1]),
        hi(v[0], v[1]),
        lo(v[2], v[3]),
        hi(v[2], v[3]),
    );
    let (t4, t5, t6, t7) = (
        lo(v[4], v[5]),
        hi(v[4], v[5]),
        lo(v[6], v[7]),
        hi(v[6], v[7]),
    );
    let (s0, s1) = (
        _mm256_shuffle_ps::<0x44>(t0, t2),
        _mm256_shuffle_ps::<0xee>(t0, t2),
    );
    let (s2, s3) = (
        _mm256_shuffle_ps::<0x44>(t1, t3),
        _mm256_shuffle_ps::<0xee>(t1, t3),
    );
    let (s4, s5) = (
        _mm256_shuffle_ps::<0x44>(t4, t6),
        _mm256_shuffle_ps::<0xee>(t4, t6),
    );
    let (s6, s7) = (
        _mm256_shuffle_ps::<0x44>(t5, t7),
        _mm256_shuffle_ps::<0xee>(t5, t7),
    );
    [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ]
}

/// `out[t][r] = acc[r * stride + t]` for the task's `n_rows` rows and `out.len()` tokens,
/// eight rows by eight tokens a transpose (a value a load and a store, the results' rows
/// read a line each, was several percent of a task).
#[inline(always)]
unsafe fn transpose_out(acc: &[f32], stride: usize, n_rows: usize, out: &mut [&mut [f32]]) {
    let n = out.len();
    assert!(n_rows == 0 || n == 0 || acc.len() >= (n_rows - 1) * stride + n);
    let (rows8, n8) = (n_rows / 8 * 8, n / 8 * 8);
    for t0 in (0..n8).step_by(8) {
        for r0 in (0..rows8).step_by(8) {
            let v =
                std::array::from_fn(|i| _mm256_loadu_ps(acc.as_ptr().add((r0 + i) * stride + t0)));
            for (j, v) in transpose8(v).into_iter().enumerate() {
                _mm256_storeu_ps(out[t0 + j][r0..r0 + 8].as_mut_ptr(), v);
            }
        }
    }
    for (t, o) in out.iter_mut().enumerate() {
        let from = &acc[t..];
        let rows = if t < n8 { rows8..n_rows } else { 0..n_rows };
        for r in rows {
            o[r] = from[r * stride];
        }
    }
}

/// `Tiles::Avx2`'s products.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C (`x86::available()`).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rows_avx2(
    ty: GgmlType,
    rows: &[u8],
    cols: usize,
    tokens: (&Panels, (usize, usize)),
    out: &mut [&mut [f32]],
) {
    all::<__m256, 6, 2>(ty, rows, cols, tokens, out)
}

/// `Tiles::Avx512`'s products.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn rows_avx512(
    ty: GgmlType,
    rows: &[u8],
    cols: usize,
    tokens: (&Panels, (usize, usize)),
    out: &mut [&mut [f32]],
) {
    all::<__m512, 12, 2>(ty, rows, cols, tokens, out)
}

/// `Tiles::Avx512Wide`'s products.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn rows_avx512_wide(
    ty: GgmlType,
    rows: &[u8],
    cols: usize,
    tokens: (&Panels, (usize, usize)),
    out: &mut [&mut [f32]],
) {
    all::<__m512, 6, 4>(ty, rows, cols, tokens, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::float;
    use crate::rng::SplitMix64;

    /// The panels start on a cache line, as the buffer grows and whatever the allocator
    /// returned, so no token vector's load spans two lines.
    #[test]
    fn panels_start_on_a_cache_line() {
        let mut panels = Panels::default();
        for (n, cols, width) in [(5, 8, 16), (64, 896, 16), (17, 4864, 32), (64, 896, 64)] {
            panels.resize(n, cols, width);
            for p in 0..panels.count() {
                assert_eq!(
                    panels.panel(p) as usize % 64,
                    0,
                    "{n} tokens x {cols}, panel {p}"
                );
            }
            let (data, _) = panels.pieces_mut();
            assert_eq!(data.as_ptr() as usize % 64, 0);
        }
    }

    /// Every kernel, with rows not whole tiles, tokens not whole panels and rows longer than a
    /// step and not a multiple of it, within float reordering of an f64 dot.
    #[test]
    fn tiles_match_an_f64_dot_within_reordering() {
        let Some(best) = Tiles::pick() else {
            eprintln!("skipped: this CPU lacks AVX2, FMA or F16C");
            return;
        };
        let mut kernels = vec![Tiles::Avx2];
        if best == Tiles::Avx512 {
            kernels.extend([Tiles::Avx512, Tiles::Avx512Wide]);
        } else {
            eprintln!("AVX-512 tiles skipped: no AVX-512F on this CPU");
        }
        let mut rng = SplitMix64::new(11);
        let shapes = [
            (1, 8, 1),
            (7, 37, 5),
            (13, 896, 17),
            (25, 300, 33),
            (19, 600, 130),
        ];
        for ((n_rows, cols, n), ty) in shapes.into_iter().zip([
            GgmlType::F16,
            GgmlType::BF16,
            GgmlType::F16,
            GgmlType::BF16,
            GgmlType::F16,
        ]) {
            let mut v = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.next_signed()).collect() };
            let (mut bytes, mut rows) = (Vec::new(), vec![0f32; n_rows * cols]);
            if ty == GgmlType::F16 {
                float::quantize_f16(&v(n_rows * cols), &mut bytes);
                float::dequantize_f16(&bytes, &mut rows);
            } else {
                float::quantize_bf16(&v(n_rows * cols), &mut bytes);
                float::dequantize_bf16(&bytes, &mut rows);
            }
            let x: Vec<Vec<f32>> = (0..n).map(|_| v(cols)).collect();
            let xs: Vec<&[f32]> = x.iter().map(|t| t.as_slice()).collect();
            for kernel in &kernels {
                let mut panels = Panels::default();
                panels.resize(n, cols, kernel.width());
                let (data, len) = panels.pieces_mut();
                for (i, piece) in data.chunks_mut(len).enumerate() {
                    pack_piece(&xs, cols, kernel.width(), i, piece);
                }
                let mut out = vec![vec![f32::NAN; n_rows]; n];
                let mut outs: Vec<&mut [f32]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
                // SAFETY: `pick` found these kernels' features.
                unsafe { kernel.run(ty, &bytes, cols, &panels, (0, usize::MAX), &mut outs) };
                // Panel by panel, the same bits.
                let w = kernel.width();
                for p in 0..panels.count() {
                    let mut part = vec![vec![f32::NAN; n_rows]; n];
                    let mut outs: Vec<&mut [f32]> = part[p * w..((p + 1) * w).min(n)]
                        .iter_mut()
                        .map(|o| o.as_mut_slice())
                        .collect();
                    // SAFETY: as above.
                    unsafe { kernel.run(ty, &bytes, cols, &panels, (p, p + 1), &mut outs) };
                    for t in p * w..((p + 1) * w).min(n) {
                        assert_eq!(part[t], out[t], "{kernel:?} {ty} panel {p} token {t}");
                    }
                }
                for (t, o) in out.iter().enumerate() {
                    for (r, &got) in o.iter().enumerate() {
                        let row = &rows[r * cols..(r + 1) * cols];
                        let (want, mag) =
                            row.iter().zip(&x[t]).fold((0f64, 0f64), |(s, m), (a, b)| {
                                (s + *a as f64 * *b as f64, m + (*a as f64 * *b as f64).abs())
                            });
                        let bound = cols as f64 * 1.2e-7 * mag + 1e-6;
                        assert!(
                            (got as f64 - want).abs() <= bound,
                            "{kernel:?} {ty} {n_rows}x{cols}, {n} tokens: row {r} token {t}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
