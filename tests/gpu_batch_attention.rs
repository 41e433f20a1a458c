//! A GPU batch step's attention on the grouped tensor-core kernel
//! (kernels/attention_group_mma.cu `attention_group_mma_rows`, fast numerics): with
//! `CBTOP_ATTN_GROUP_FROM=1` every step of three sequences at contexts of 5 to 156 positions
//! (one tile to several, one chunk to several) takes it, and each sequence's logits lie
//! within the conformance bound of the same sequence alone; a step of every sequence names the
//! kernel among its stamped launches. The same batch with the grouped kernel kept off
//! (`CBTOP_ATTN_GROUP_FROM` past the context) takes the split-KV kernel instead, within the
//! bound too. Skips (saying why) without a GPU.
//!
//! One test function: it sets `CBTOP_ATTN_GROUP_FROM`, which engines read when created.

mod common;
mod gpu;

use std::time::Instant;

use cbtop::brick::Recorder;
use cbtop::engine::cuda::{CudaBatch, CudaEngine, Timing};
use cbtop::engine::{Batched, LogitsFor, Numerics};
use common::batch::{alone, assert_within, batched, requests};

const MODELS: [&str; 2] = ["conf-qwen2-Q8_0", "conf-llama-Q4_K_S"];
const CTX: usize = 256;

#[test]
fn a_batch_step_on_the_grouped_attention_is_each_sequence_alone() {
    let Some(g) = gpu::gpu("gpu_batch_attention") else {
        return;
    };
    for name in MODELS {
        let (model, base, _, bound) = requests(name);
        let long = |n: usize| -> Vec<u32> { base[0].iter().cycle().take(n).copied().collect() };
        let prompts = vec![long(150), base[2].clone(), long(70)];
        let max = [7, 3, 5];
        for from in ["1", "100000"] {
            std::env::set_var("CBTOP_ATTN_GROUP_FROM", from);
            let what = format!("{name}, grouped attention from {from} positions");
            let mut e =
                CudaEngine::new(model.clone(), &g, CTX, Timing::Events, Numerics::Fast).unwrap();
            let (all, stamped) = {
                let mut b = CudaBatch::new(&mut e, CTX, prompts.len()).unwrap();
                let all = batched(&mut b, &prompts, &max);
                // One more step of every sequence, its kernels stamped.
                let last: Vec<[u32; 1]> = all.iter().map(|r| [r[r.len() - 1].0]).collect();
                let work: Vec<(usize, &[u32])> =
                    last.iter().enumerate().map(|(s, t)| (s, &t[..])).collect();
                let mut rec = Recorder::new(true, Instant::now());
                b.eval(&work, LogitsFor::Last, &mut rec).unwrap();
                (all, rec.take_kernels())
            };
            let cat = e.kernels();
            let grouped = stamped.iter().any(|k| {
                cat.get(k.kernel)
                    .is_some_and(|i| i.name == "attention_group_mma_rows")
            });
            assert_eq!(
                grouped,
                from == "1",
                "{what}: a step of every sequence took attention_group_mma_rows"
            );
            let mut worst = 0f32;
            for (s, (prompt, &m)) in prompts.iter().zip(&max).enumerate() {
                e.reset();
                let rec = &mut Recorder::off();
                let one = alone(
                    |t| e.eval(t, LogitsFor::Last, rec).unwrap().pop().unwrap(),
                    prompt,
                    m,
                );
                worst = worst.max(assert_within(&what, s, &all[s], &one, bound));
            }
            eprintln!("{what}: batch against alone, max |logit diff| {worst:.5} (bound {bound})");
        }
        std::env::remove_var("CBTOP_ATTN_GROUP_FROM");
    }
}
