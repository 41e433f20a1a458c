//! Which code runs each brick on the CPU backend and on which tensors (names, GGUF types,
//! shapes), for the drill-down's "kernels" panel. Read from the model's weights table, so it is
//! a fact about this model, not a guess.

use crate::brick::{Brick, BrickId};
use crate::model::weights::Mat;
use crate::model::Model;

fn mats<'a>(
    model: &'a Model,
    pick: impl Fn(&'a crate::model::weights::LayerWeights) -> Vec<&'a Mat>,
) -> String {
    // Types can differ per layer (e.g. Q4_K_M mixes Q4_K and Q6_K): list the distinct ones.
    let Some(first) = model.weights.layers.first() else {
        return String::new();
    };
    let names: Vec<String> = pick(first)
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut types: Vec<&str> = model
                .weights
                .layers
                .iter()
                .filter_map(|l| pick(l).get(i).map(|m| m.ty.name()))
                .collect();
            types.sort_unstable();
            types.dedup();
            let short = m.name.split_once('.').map_or(m.name.as_str(), |(_, r)| r);
            let short = short.split_once('.').map_or(short, |(_, r)| r);
            format!("{short} {} [{}x{}]", types.join("/"), m.rows, m.cols)
        })
        .collect();
    names.join(", ")
}

fn one(m: &Mat) -> String {
    format!("{} {} [{}x{}]", m.name, m.ty.name(), m.rows, m.cols)
}

fn describe_one(model: &Model, b: BrickId) -> Vec<String> {
    let c = &model.config;
    let w = &model.weights;
    let layers = c.n_layers;
    match b {
        BrickId::Embed => vec![format!("quant::dequantize_row of {}", one(&w.token_embd))],
        BrickId::AttnNorm | BrickId::FfnNorm => vec![format!(
            "cpu::ops::rms_norm over {} f32, x{layers} layers",
            c.n_embd
        )],
        BrickId::FinalNorm => vec![format!("cpu::ops::rms_norm over {} f32", c.n_embd)],
        BrickId::Qkv => {
            let bias = w.layers.first().is_some_and(|l| l.bq.is_some());
            vec![
                format!(
                    "cpu::matmul x3: {}",
                    mats(model, |l| vec![&l.wq, &l.wk, &l.wv])
                ),
                if bias {
                    "+ bias add (qwen2)".to_string()
                } else {
                    "no bias".to_string()
                },
            ]
        }
        BrickId::Rope => vec![format!(
            "cpu::ops::rope, {:?} style, {} of {} dims rotated",
            c.arch.rope_style(),
            c.rope_dims,
            c.head_dim
        )],
        BrickId::Attention => vec![format!(
            "kv store + cpu::attention: {} heads over {} KV heads (GQA), f16 KV cache",
            c.n_heads, c.n_kv_heads
        )],
        BrickId::AttnOut => vec![format!("cpu::matmul: {}", mats(model, |l| vec![&l.wo]))],
        BrickId::AttnResidual | BrickId::FfnResidual => vec![format!(
            "cpu::ops::add_in_place over {} f32, x{layers} layers",
            c.n_embd
        )],
        BrickId::FfnGateUp => vec![format!(
            "cpu::matmul x2: {}",
            mats(model, |l| vec![&l.w_gate, &l.w_up])
        )],
        BrickId::FfnAct => vec![format!("cpu::ops::silu_mul over {} f32", c.n_ff)],
        BrickId::FfnDown => vec![format!("cpu::matmul: {}", mats(model, |l| vec![&l.w_down]))],
        BrickId::LmHead => vec![format!("cpu::matmul: {}", one(&w.output))],
        BrickId::Sample => vec![format!("argmax over {} logits", w.output.rows)],
    }
}

/// Lines describing the code and tensors behind `brick`.
pub fn describe(model: &Model, brick: Brick) -> Vec<String> {
    let mut out = Vec::new();
    if let Brick::Fused(bs) = brick {
        out.push(format!("fused kernel covering {} bricks", bs.len()));
    }
    for b in brick.covers() {
        out.extend(describe_one(model, b));
    }
    out
}
