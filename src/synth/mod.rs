//! Synthetic models: real shapes (from `profiles/`), random weights from a seed, written as
//! GGUF with cbtop's own writer. They let cbtop (and llama.cpp, for comparison) be measured on
//! models of real size without downloading them: timings are real, the text is noise.
//!
//! Same shape, mix and seed give the same bytes: every tensor is cut into fixed chunks of
//! blocks, each drawn from its own generator seeded by (seed, tensor, chunk), so the chunks can
//! be drawn in parallel without the thread count changing the result.

pub mod blocks;
pub mod placement;
pub mod vocab;

use std::io::Write;
use std::path::Path;

use rayon::prelude::*;

pub use placement::{QuantMix, Role};

use crate::gguf::{value_type, GgufWriter, MetaValue};
use crate::profile::Shape;
use crate::quant::GgmlType;
use crate::rng::SplitMix64;

/// The metadata key marking a file's weights as synthetic.
pub const SYNTHETIC_KEY: &str = "cbtop.synthetic";

/// Blocks per independently seeded chunk.
const CHUNK_BLOCKS: usize = 4096;

/// What fills a tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    /// Random weights in `[-amax, amax]`.
    Weight { amax: f32 },
    /// Norm weights: 1 ± 0.2.
    Norm,
    /// Biases: ± 0.1.
    Bias,
}

/// One tensor of a synthetic model.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    /// Innermost first, as GGUF stores them: `[ncols, nrows]`.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    pub fill: Fill,
}

impl TensorSpec {
    pub fn bytes(&self) -> u64 {
        let rows: u64 = self.dims[1..].iter().product();
        self.ty.row_bytes(self.dims[0] as usize).unwrap_or(0) as u64 * rows
    }
}

/// The tensors of `shape` in `mix`, in llama.cpp's order.
pub fn tensors(shape: &Shape, mix: QuantMix) -> Vec<TensorSpec> {
    let (e, ff, vocab, nl) = (shape.n_embd, shape.n_ff, shape.vocab, shape.n_layers);
    let hd = shape.head_dim();
    let (qd, kvd) = (shape.n_heads * hd, shape.n_kv_heads * hd);
    let tied = shape.tied_embeddings;
    let n_gqa = shape.n_heads / shape.n_kv_heads.max(1);
    let weight = |name: String, role: Role, layer: usize, ncols: usize, nrows: usize| {
        TensorSpec {
            name,
            dims: vec![ncols as u64, nrows as u64],
            ty: placement::weight_type(
                mix,
                placement::Place {
                    role,
                    layer,
                    n_layers: nl,
                    ncols,
                    tied,
                    n_gqa,
                },
            ),
            // uniform in ±amax has std amax/√3: 0.5/√ncols keeps a normalised input's
            // projection at std ~0.5 in every layer
            fill: Fill::Weight {
                amax: 3f32.sqrt() * 0.5 / (ncols as f32).sqrt(),
            },
        }
    };
    let vector = |name: String, n: usize, fill: Fill| TensorSpec {
        name,
        dims: vec![n as u64],
        ty: GgmlType::F32,
        fill,
    };
    let mut t = vec![weight(
        "token_embd.weight".into(),
        Role::TokenEmbd,
        0,
        e,
        vocab,
    )];
    t.push(vector("output_norm.weight".into(), e, Fill::Norm));
    if !tied {
        t.push(weight("output.weight".into(), Role::Output, 0, e, vocab));
    }
    let arch = shape.arch.as_str();
    for l in 0..nl {
        let n = |s: &str| format!("blk.{l}.{s}");
        t.push(vector(n("attn_norm.weight"), e, Fill::Norm));
        if arch == "phi3" {
            // llama.cpp's fused Q, K, V rows.
            t.push(weight(
                n("attn_qkv.weight"),
                Role::AttnQkv,
                l,
                e,
                qd + 2 * kvd,
            ));
        } else {
            t.push(weight(n("attn_q.weight"), Role::AttnQ, l, e, qd));
            t.push(weight(n("attn_k.weight"), Role::AttnK, l, e, kvd));
            t.push(weight(n("attn_v.weight"), Role::AttnV, l, e, kvd));
        }
        if arch == "qwen2" {
            t.push(vector(n("attn_q.bias"), qd, Fill::Bias));
            t.push(vector(n("attn_k.bias"), kvd, Fill::Bias));
            t.push(vector(n("attn_v.bias"), kvd, Fill::Bias));
        }
        if arch == "qwen3" {
            t.push(vector(n("attn_q_norm.weight"), hd, Fill::Norm));
            t.push(vector(n("attn_k_norm.weight"), hd, Fill::Norm));
        }
        t.push(weight(n("attn_output.weight"), Role::AttnOut, l, qd, e));
        if arch == "gemma3" {
            // gemma3's per-head Q/K norms and its norms of the attention and FFN outputs
            // (the converter stores them with Gemma's +1 already added: weights near 1)
            t.push(vector(n("attn_q_norm.weight"), hd, Fill::Norm));
            t.push(vector(n("attn_k_norm.weight"), hd, Fill::Norm));
            t.push(vector(n("post_attention_norm.weight"), e, Fill::Norm));
        }
        t.push(vector(n("ffn_norm.weight"), e, Fill::Norm));
        if arch == "phi3" {
            // Gate rows then up rows in one tensor.
            t.push(weight(n("ffn_up.weight"), Role::FfnUp, l, e, 2 * ff));
        } else {
            t.push(weight(n("ffn_gate.weight"), Role::FfnGate, l, e, ff));
            t.push(weight(n("ffn_up.weight"), Role::FfnUp, l, e, ff));
        }
        t.push(weight(n("ffn_down.weight"), Role::FfnDown, l, ff, e));
        if arch == "gemma3" {
            t.push(vector(n("post_ffw_norm.weight"), e, Fill::Norm));
        }
    }
    t
}

/// The data of tensor number `index`.
pub fn tensor_data(spec: &TensorSpec, seed: u64, index: usize) -> Vec<u8> {
    let mut out = vec![0u8; spec.bytes() as usize];
    let chunk = spec.ty.block_bytes() * CHUNK_BLOCKS;
    out.par_chunks_mut(chunk).enumerate().for_each(|(c, buf)| {
        let mut key = SplitMix64::new(seed);
        let mut rng = SplitMix64::new(
            key.next_u64() ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (c as u64) << 1,
        );
        match spec.fill {
            Fill::Weight { amax } => blocks::fill(spec.ty, amax, &mut rng, buf),
            Fill::Norm => {
                for w in buf.chunks_exact_mut(4) {
                    w.copy_from_slice(&(1.0 + 0.2 * rng.next_signed()).to_le_bytes());
                }
            }
            Fill::Bias => blocks::fill(GgmlType::F32, 0.1, &mut rng, buf),
        }
    });
    out
}

fn strings(items: impl IntoIterator<Item = String>) -> MetaValue {
    MetaValue::Array(
        value_type::STRING,
        items.into_iter().map(MetaValue::String).collect(),
    )
}

/// The GGUF header of the model (tensors declared, data produced at write time) and the specs.
pub fn writer(shape: &Shape, mix: QuantMix, seed: u64) -> (GgufWriter, Vec<TensorSpec>) {
    let arch = shape.arch.as_str();
    let specs = tensors(shape, mix);
    let v = vocab::build(arch, &shape.name, shape.vocab);
    let mut w = GgufWriter::new();
    let k = |s: &str| format!("{arch}.{s}");
    let u32v = |x: usize| MetaValue::U32(x as u32);
    w.meta("general.architecture", MetaValue::String(arch.into()))
        .meta(
            "general.name",
            MetaValue::String(format!(
                "{} synthetic {} (seed {seed})",
                shape.name,
                mix.name()
            )),
        )
        .meta("general.file_type", MetaValue::U32(mix.file_type()))
        .meta("general.quantization_version", MetaValue::U32(2))
        .meta(SYNTHETIC_KEY, MetaValue::Bool(true))
        .meta("cbtop.synth.seed", MetaValue::U64(seed))
        .meta("cbtop.synth.quant", MetaValue::String(mix.name().into()))
        .meta(&k("context_length"), u32v(shape.context_length))
        .meta(&k("embedding_length"), u32v(shape.n_embd))
        .meta(&k("block_count"), u32v(shape.n_layers))
        .meta(&k("feed_forward_length"), u32v(shape.n_ff))
        .meta(&k("attention.head_count"), u32v(shape.n_heads))
        .meta(&k("attention.head_count_kv"), u32v(shape.n_kv_heads))
        .meta(&k("rope.dimension_count"), u32v(shape.head_dim()))
        .meta(&k("rope.freq_base"), MetaValue::F32(shape.rope_base))
        .meta(
            &k("attention.layer_norm_rms_epsilon"),
            MetaValue::F32(shape.norm_eps),
        )
        .meta(&k("vocab_size"), u32v(shape.vocab))
        .meta("tokenizer.ggml.model", MetaValue::String(v.model.into()));
    if let Some(pre) = v.pre {
        w.meta("tokenizer.ggml.pre", MetaValue::String(pre.into()));
    }
    w.meta("tokenizer.ggml.tokens", strings(v.tokens)).meta(
        "tokenizer.ggml.token_type",
        MetaValue::Array(
            value_type::I32,
            v.types.into_iter().map(MetaValue::I32).collect(),
        ),
    );
    if !v.merges.is_empty() {
        w.meta("tokenizer.ggml.merges", strings(v.merges));
    }
    if !v.scores.is_empty() {
        let scores = v.scores.into_iter().map(MetaValue::F32).collect();
        w.meta(
            "tokenizer.ggml.scores",
            MetaValue::Array(value_type::F32, scores),
        );
    }
    if let Some(unk) = v.unk {
        w.meta("tokenizer.ggml.unknown_token_id", MetaValue::U32(unk));
    }
    w.meta("tokenizer.ggml.bos_token_id", MetaValue::U32(v.bos))
        .meta("tokenizer.ggml.eos_token_id", MetaValue::U32(v.eos))
        .meta("tokenizer.ggml.add_bos_token", MetaValue::Bool(v.add_bos));
    if let Some(eot) = v.eot {
        w.meta("tokenizer.ggml.eot_token_id", MetaValue::U32(eot));
    }
    if let Some(hd) = shape.head_dim {
        w.meta(&k("attention.key_length"), u32v(hd))
            .meta(&k("attention.value_length"), u32v(hd));
    }
    if let Some(n) = shape.sliding_window {
        w.meta(&k("attention.sliding_window"), u32v(n));
    }
    if let Some(base) = shape.rope_base_swa {
        w.meta(&k("rope.freq_base_swa"), MetaValue::F32(base));
    }
    if let Some(factor) = shape.rope_scaling_factor {
        w.meta(&k("rope.scaling.type"), MetaValue::String("linear".into()))
            .meta(&k("rope.scaling.factor"), MetaValue::F32(factor));
    }
    if let Some(add) = v.add_space_prefix {
        w.meta("tokenizer.ggml.add_space_prefix", MetaValue::Bool(add));
    }
    for s in &specs {
        w.tensor_later(&s.name, &s.dims, s.ty, s.bytes());
    }
    (w, specs)
}

/// Write the model to `out`; returns the bytes written.
pub fn write(shape: &Shape, mix: QuantMix, seed: u64, out: &mut impl Write) -> std::io::Result<()> {
    let (w, specs) = writer(shape, mix, seed);
    w.write_with(out, |i| Ok(tensor_data(&specs[i], seed, i)))
}

/// The model as bytes in memory (the embedded default).
pub fn build(shape: &Shape, mix: QuantMix, seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    write(shape, mix, seed, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// Write the model to `path`; returns its size in bytes.
pub fn write_file(shape: &Shape, mix: QuantMix, seed: u64, path: &Path) -> std::io::Result<u64> {
    let f = std::fs::File::create(path)?;
    let mut bw = std::io::BufWriter::with_capacity(8 << 20, f);
    write(shape, mix, seed, &mut bw)?;
    bw.flush()?;
    Ok(std::fs::metadata(path)?.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    #[test]
    fn tensor_list_has_the_shapes_bytes() {
        let s = Profile::shape("qwen2.5-0.5b").unwrap();
        let t = tensors(&s, QuantMix::Q4KM);
        // tied: no output.weight; qwen2: 3 biases per layer
        assert_eq!(t.len(), 2 + 24 * 12);
        assert!(t.iter().all(|x| x.name != "output.weight"));
        let total: u64 = t.iter().map(TensorSpec::bytes).sum();
        // llama.cpp's Qwen2.5-0.5B Q4_K_M is ~395 MB with the same placement rules
        assert!((350e6..420e6).contains(&(total as f64)), "{total}");
        let embd = &t[0];
        assert_eq!(embd.ty, GgmlType::Q8_0); // tied head, 896 % 256 != 0
    }

    #[test]
    fn qwen3_and_phi3_shapes_have_their_architectures_tensors() {
        let q = Profile::shape("qwen3-0.6b").unwrap();
        assert_eq!((q.head_dim(), q.n_heads * q.head_dim()), (128, 2048));
        let t = tensors(&q, QuantMix::Q4KM);
        // tied; per layer: norms 2, q/k/v/o 4, q/k norms 2, gate/up/down 3
        assert_eq!(t.len(), 2 + 28 * 11);
        let q_proj = t.iter().find(|x| x.name == "blk.0.attn_q.weight").unwrap();
        assert_eq!(q_proj.dims, [1024, 2048]);
        let k_norm = t
            .iter()
            .find(|x| x.name == "blk.3.attn_k_norm.weight")
            .unwrap();
        assert_eq!(
            (k_norm.dims.as_slice(), k_norm.ty),
            (&[128u64][..], GgmlType::F32)
        );
        let p = Profile::shape("phi3-mini").unwrap();
        let t = tensors(&p, QuantMix::Q4KM);
        // untied; per layer: norms 2, qkv, o, up (gate and up), down
        assert_eq!(t.len(), 3 + 32 * 6);
        let qkv = t
            .iter()
            .find(|x| x.name == "blk.0.attn_qkv.weight")
            .unwrap();
        assert_eq!(
            (qkv.dims.as_slice(), qkv.ty),
            (&[3072u64, 9216][..], GgmlType::Q5_K)
        );
        let up = t.iter().find(|x| x.name == "blk.0.ffn_up.weight").unwrap();
        assert_eq!(up.dims, [3072, 16384]);
        assert!(t.iter().all(|x| !x.name.contains("ffn_gate")));
        // The parameter counts llama-bench gave these files: 596.05 M and 3.82 B.
        let params = |t: &[TensorSpec]| {
            t.iter()
                .map(|x| x.dims.iter().product::<u64>())
                .sum::<u64>()
        };
        assert_eq!(params(&tensors(&q, QuantMix::F16)), 596_049_920);
        assert_eq!(params(&t), 3_821_079_552);
    }

    /// gemma3's shapes: the published parameter counts (Gemma-3-1B 999,885,952; the 4B's
    /// language model 3.88e9, llama.cpp's llama-bench reads the same from these files), the
    /// per-head Q/K norms and the two post norms in every layer, no output head.
    #[test]
    fn gemma3_shapes_have_their_tensors_and_sizes() {
        let params =
            |t: &[TensorSpec]| -> u64 { t.iter().map(|x| x.dims.iter().product::<u64>()).sum() };
        let s = Profile::shape("gemma3-1b").unwrap();
        assert_eq!(s.head_dim(), 256);
        let t = tensors(&s, QuantMix::Q8_0);
        assert_eq!(params(&t), 999_885_952);
        assert_eq!(t.len(), 2 + 26 * 13);
        for name in [
            "blk.5.attn_q_norm.weight",
            "blk.5.attn_k_norm.weight",
            "blk.5.post_attention_norm.weight",
            "blk.5.post_ffw_norm.weight",
        ] {
            assert!(t.iter().any(|x| x.name == name), "{name}");
        }
        let qn = t
            .iter()
            .find(|x| x.name == "blk.0.attn_q_norm.weight")
            .unwrap();
        assert_eq!(qn.dims, [256]);
        assert!(t.iter().all(|x| x.name != "output.weight"));
        let s4 = Profile::shape("gemma3-4b").unwrap();
        let p4 = params(&tensors(&s4, QuantMix::Q4_0));
        assert_eq!(p4, 3_880_263_168);
    }

    #[test]
    fn chunks_do_not_depend_on_threads() {
        let spec = TensorSpec {
            name: "x".into(),
            dims: vec![256, 600],
            ty: GgmlType::Q4_K,
            fill: Fill::Weight { amax: 0.1 },
        };
        let a = tensor_data(&spec, 3, 1);
        let b = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| tensor_data(&spec, 3, 1));
        assert_eq!(a, b);
        assert_ne!(a, tensor_data(&spec, 4, 1));
        assert_ne!(a, tensor_data(&spec, 3, 2));
    }
}
