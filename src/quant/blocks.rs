//! The activation block formats llama.cpp quantizes a product's input into (Q8_0, Q8_1, Q8_K)
//! and the rounding steps that make them: the bottom layer of `quant`, shared by the scalar
//! references, the AVX2 kernels and the dispatch.

use half::f16;

/// Weights per super-block (`QK_K`).
pub const QK_K: usize = 256;

/// A Q8_0 activation block: 32 int8 values and the scale (f16-rounded, kept as f32), plus
/// `sums16`, 16 times the sum of each four consecutive values (the AVX2 lanes), which the
/// Q5_0 kernels subtract from their unsigned products (`x86`): made once per activation row
/// instead of once per weight row. Build blocks with `new`, which fills it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_0 {
    pub d: f32,
    pub qs: [i8; 32],
    pub sums16: [i32; 8],
}

impl BlockQ8_0 {
    pub fn new(d: f32, qs: [i8; 32]) -> BlockQ8_0 {
        let sums16 = std::array::from_fn(|l| {
            16 * qs[4 * l..4 * l + 4].iter().map(|&q| q as i32).sum::<i32>()
        });
        BlockQ8_0 { d, qs, sums16 }
    }
}

/// A Q8_1 activation block: as Q8_0, plus `s = d * sum(qs)` (f16-rounded, kept as f32).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_1 {
    pub d: f32,
    pub s: f32,
    pub qs: [i8; 32],
}

/// A Q8_K activation block: 256 int8 values, an f32 scale, and sums of each 16 values.
/// `qs_pairs` holds the same values reordered within each 16 as `PAIR_ORDER`, the order the
/// AVX2 k-quant kernels (`x86_kquants`) read them in; made once per activation row so the
/// kernels do not reorder them again for every weight row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; 256],
    pub bsums: [i16; 16],
    pub qs_pairs: [i8; 256],
}

impl BlockQ8K {
    /// A block of zeros (what an all-zero activation block quantizes to).
    pub const ZERO: BlockQ8K = BlockQ8K {
        d: 0.0,
        qs: [0; QK_K],
        bsums: [0; 16],
        qs_pairs: [0; QK_K],
    };
}

/// Position `p` of each 16 values in `BlockQ8K::qs_pairs` holds value `PAIR_ORDER[p]`: values
/// `j` and `j + 8` side by side, the two that share lane `j % 8` of the k-quant lane sums.
pub const PAIR_ORDER: [u8; 16] = [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15];

/// `qs` in `PAIR_ORDER` within each 16.
pub fn pair_order(qs: &[i8; QK_K]) -> [i8; QK_K] {
    std::array::from_fn(|p| qs[p & !15 | PAIR_ORDER[p % 16] as usize])
}

/// ggml's `nearest_int`: round to nearest, ties to even (`round_half_even`, below). Outside
/// ggml's asserted range this saturates instead of returning garbage.
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    round_half_even(x) as i32
}

/// `x.round_ties_even()` without the libm `rintf` call it compiles to on baseline x86-64 (no
/// SSE4.1 `roundss`): for |x| < 2^22, adding and subtracting 1.5 * 2^23 leaves x rounded to an
/// integer, ties to even (ggml's own trick; -0.0 may come out as +0.0); NaN stays NaN. Larger
/// values take the library call.
#[inline(always)]
pub(crate) fn round_half_even(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    if x.abs() < 4_194_304.0 {
        (x + MAGIC) - MAGIC
    } else {
        x.round_ties_even()
    }
}

/// The value of `v` after a round trip through f16 (`GGML_CPU_FP32_TO_FP16`: F16C, nearest-even).
#[inline]
pub(crate) fn round_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_half_even_matches_the_library_everywhere_it_is_used() {
        let mut rng = crate::rng::SplitMix64::new(11);
        let mut edge: Vec<f32> = vec![0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, 127.5, -128.5];
        edge.extend([
            4_194_303.5,
            -4_194_303.5,
            4_194_304.5,
            8_388_609.0,
            1e30,
            -1e30,
        ]);
        edge.extend((0..100_000).map(|_| rng.next_signed() * 200.0));
        edge.extend((0..10_000).map(|i| i as f32 * 0.5 - 2500.0));
        for x in edge {
            // Equal as numbers (a negative value rounding to zero may give +0 for -0).
            assert_eq!(super::round_half_even(x), x.round_ties_even(), "{x}");
        }
        assert!(super::round_half_even(f32::NAN).is_nan());
        assert_eq!(super::round_half_even(f32::INFINITY), f32::INFINITY);
    }
}
