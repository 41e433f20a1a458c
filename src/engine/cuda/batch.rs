//! Several sequences decoded together on one GPU (`CudaBatch`), the GPU twin of
//! `cpu::batch`: each sequence its own KV cache (one allocation, [sequence][layer][position]
//! [kv_dim]) and position. A step of one token a sequence is one pass of the launch plan over
//! all of them: products of N rows, RoPE and the KV store putting each token in its own
//! sequence's cache at its own position, attention of each token over its own sequence, and a
//! greedy pick a row on the device. A prompt runs on the engine's prompt path over its
//! sequence's cache. While a batch lives its caches stand in the engine's place; the engine's
//! own come back when the batch is dropped.
//!
//! A step's launches depend only on its count of rows (and whether it picks, whether it is
//! stamped): each row's sequence and position, and the tokens, are device data uploaded
//! before the launches. So the first step of each size is captured into a CUDA graph and the
//! later ones replay it (batch_graphs.rs), one host launch a step; `CBTOP_BATCH_GRAPH=0`
//! launches every kernel from the host instead, as `Sync` timing must.

use std::time::Instant;

use cudarc::driver::{result, CudaSlice, DriverError, LaunchConfig};

use super::attention::HeadArgs;
use super::batch_graphs::{batch_graph_on, BatchKey, Named};
use super::buffers::RowsStep;
use super::clock::Slot;
use super::decode::CudaEngine;
use super::error::wrap;
use super::launch_params::{group_mma_shared_bytes, ARGMAX_ROW_BLOCKS, WIDE_HEAD};
use super::pdl_launch::PushArg;
use crate::brick::{BrickId as B, Recorder};
use crate::engine::batched::{check_work, Batched};
use crate::engine::error::EngineError;
use crate::engine::options::{LogitsFor, Numerics, Timing};
use crate::model::Model;

/// The kernel clock area batch steps stamp: each step is read back before the next is
/// launched, so one area serves them all and a captured step names the same one.
const ROWS_AREA: usize = 0;

/// The engine's own cache while a batch's stands in its place.
struct Parked {
    kc: CudaSlice<u16>,
    vc: CudaSlice<u16>,
    cap: usize,
    len: usize,
}

/// Sequences decoded together on a `CudaEngine`, which the batch holds for its life.
pub struct CudaBatch<'e> {
    e: &'e mut CudaEngine,
    parked: Option<Parked>,
    lens: Vec<usize>,
    step: Option<RowsStep>,
    kv_bytes: usize,
    /// Steps replay a CUDA graph per batch size (`CBTOP_BATCH_GRAPH`, on by default).
    graphed: bool,
    /// The sequence whose decode state (device position and token, decode graphs) the
    /// engine's one-sequence path holds: a step of that sequence alone reuses it.
    single: Option<usize>,
}

/// What a batch step brings back.
enum Out {
    Picks(Vec<u32>),
    Logits(Vec<f32>),
}

/// Under fast numerics and head sizes the split-KV kernel takes (a multiple of 8 up to 128),
/// the floats of its scratch one token of a batch step needs: n_heads × splits × (head_dim +
/// 2). None: a batch step takes the CPU-order attention (unless it takes the grouped kernel,
/// `rows_group_splits`).
fn split_rows(e: &CudaEngine) -> Option<usize> {
    let c = &e.model.config;
    let takes = e.numerics == Numerics::Fast
        && c.head_dim.is_multiple_of(8)
        && c.head_dim <= 128
        && c.n_heads.is_multiple_of(c.n_kv_heads.max(1));
    takes.then(|| c.n_heads * e.split.splits * (c.head_dim + 2))
}

/// Chunks a token's context is cut in when a batch step of `rows` tokens takes the grouped
/// tensor-core attention (kernels/attention_group_mma.cu `attention_group_mma_rows`; 0: the
/// model has none, or not under fast numerics): about two blocks a multiprocessor over the
/// step's KV heads and tokens, at most the one-token kernel's count.
pub(super) fn rows_group_splits(e: &CudaEngine, rows: usize) -> usize {
    let c = &e.model.config;
    let serves = e.numerics == Numerics::Fast
        && e.split.group_splits > 0
        && matches!(c.head_dim, 64 | 128 | WIDE_HEAD);
    if !serves {
        return 0;
    }
    (2 * e.split.sms)
        .div_ceil(c.n_kv_heads.max(1) * rows.max(1))
        .clamp(1, e.split.group_splits)
}

/// Floats of the batch step's attention scratch for steps of up to `n` tokens: the split-KV
/// kernel's (`split_rows`) or the grouped kernel's (n_heads × 2 splits × (head_dim + 4) a
/// token), whichever is larger. None: neither runs.
fn rows_scratch(e: &CudaEngine, n: usize) -> Option<usize> {
    let c = &e.model.config;
    let split = split_rows(e).map(|per| n * per);
    let group = (1..=n)
        .map(|r| r * rows_group_splits(e, r))
        .max()
        .filter(|&most| most > 0)
        .map(|most| most * c.n_heads * 2 * (c.head_dim + 4));
    split.max(group)
}

/// Device bytes a batch of `n` sequences of `cap` positions needs beyond the engine's own:
/// the caches (also returned alone), the attention's scratch, and the activations of `n` rows
/// (the logits most).
fn batch_bytes(model: &Model, cap: usize, n: usize) -> (usize, usize) {
    let c = &model.config;
    let kv = n.saturating_mul(c.n_layers * cap * c.kv_dim() * 2 * 2);
    let scores = n.saturating_mul(c.n_heads * 2 * cap * 4);
    let rows = model.weights.output.rows + 4 * c.n_embd + 2 * c.q_dim() + 3 * c.n_ff;
    let acts = n.saturating_mul(rows * 4);
    (kv, kv.saturating_add(scores).saturating_add(acts))
}

impl<'e> CudaBatch<'e> {
    /// `n` sequences of up to `ctx` positions each (at most the engine's context, which its
    /// RoPE table covers) on `engine`. Refused, before anything is allocated, when the device
    /// has less memory free than the caches and the step's buffers need.
    pub fn new(engine: &'e mut CudaEngine, ctx: usize, n: usize) -> Result<Self, EngineError> {
        let cap = ctx.clamp(1, engine.cap);
        let graphed = batch_graph_on().map_err(EngineError::Device)?;
        let (kv_bytes, need) = batch_bytes(&engine.model, cap, n);
        let split = rows_scratch(engine, n).map_or(0, |floats| floats.saturating_mul(4));
        let need = need.saturating_add(split);
        engine
            .ctx
            .bind_to_thread()
            .map_err(wrap("binding the GPU's context"))?;
        let (free, _) = result::mem_get_info().map_err(wrap("reading the GPU's free memory"))?;
        if need > free {
            return Err(EngineError::BatchTooLarge {
                n,
                ctx: cap,
                need,
                free,
            });
        }
        let c = &engine.model.config;
        let s = &engine.stream;
        let kv_len = n * c.n_layers * cap * c.kv_dim();
        let kc = s
            .alloc_zeros::<u16>(kv_len)
            .map_err(wrap("allocating the batch's KV caches"))?;
        let vc = s
            .alloc_zeros::<u16>(kv_len)
            .map_err(wrap("allocating the batch's KV caches"))?;
        let step = RowsStep {
            ids: s
                .alloc_zeros::<i32>(2 * n)
                .map_err(wrap("allocating the batch's rows"))?,
            scores: s
                .alloc_zeros::<f32>(n * c.n_heads * 2 * cap)
                .map_err(wrap("allocating the batch's attention scratch"))?,
            picks: s
                .alloc_zeros::<u32>(2 * n)
                .map_err(wrap("allocating the batch's picks"))?,
            pick_part: s
                .alloc_zeros::<f32>(3 * ARGMAX_ROW_BLOCKS as usize * n)
                .map_err(wrap("allocating the batch's picks"))?,
            split: match rows_scratch(engine, n) {
                Some(floats) => Some((
                    s.alloc_zeros::<f32>(floats)
                        .map_err(wrap("allocating the batch's attention scratch"))?,
                    s.alloc_zeros::<i32>(n * c.n_heads)
                        .map_err(wrap("allocating the batch's attention scratch"))?,
                )),
                None => None,
            },
        };
        // Nothing of the engine's may still run on its own cache once the batch's is in place.
        engine.settle();
        engine
            .stream
            .synchronize()
            .map_err(wrap("waiting for the engine"))?;
        // Any captured on another batch's caches and rows.
        engine.batch_graphs.clear();
        let parked = Parked {
            kc: std::mem::replace(&mut engine.kc, kc),
            vc: std::mem::replace(&mut engine.vc, vc),
            cap: std::mem::replace(&mut engine.cap, cap),
            len: engine.len,
        };
        engine.forget_device_state();
        Ok(CudaBatch {
            e: engine,
            parked: Some(parked),
            lens: vec![0; n],
            step: Some(step),
            kv_bytes,
            graphed,
            single: None,
        })
    }

    /// Batch steps captured as CUDA graphs so far (one per batch size, picks or logits,
    /// stamped or not); 0 with `CBTOP_BATCH_GRAPH=0`.
    pub fn captured_steps(&self) -> usize {
        self.e.batch_graphs.len()
    }

    /// Forget every sequence's tokens.
    pub fn reset(&mut self) {
        self.lens.iter_mut().for_each(|l| *l = 0);
        self.single = None;
    }

    /// `f` on the engine as sequence `s` alone (its cache and position), the position kept.
    fn on_sequence<T>(
        &mut self,
        s: usize,
        f: impl FnOnce(&mut CudaEngine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let e = &mut *self.e;
        e.seq = s;
        e.len = self.lens[s];
        // The device's position and token may be another sequence's, and a one-token decode
        // graph would name another sequence's cache.
        if self.single != Some(s) {
            e.forget_device_state();
        }
        self.single = Some(s);
        let r = f(e);
        self.lens[s] = e.len;
        r
    }

    /// One token for each `(s, token)` of `items`, in one pass; each row's greedy pick, or
    /// (without `pick`) its logits.
    fn run_rows(
        &mut self,
        items: &[(usize, u32)],
        pick: bool,
        rec: &mut Recorder,
    ) -> Result<Out, EngineError> {
        let rows: Vec<(usize, u32, usize)> =
            items.iter().map(|&(s, t)| (s, t, self.lens[s])).collect();
        // A batch step overwrites the device's token and position.
        self.single = None;
        let e = &mut *self.e;
        e.rows = self.step.take();
        let out = e.step_rows(&rows, pick, self.graphed, rec);
        self.step = e.rows.take();
        let out = out?;
        for &(s, _) in items {
            self.lens[s] += 1;
        }
        Ok(out)
    }
}

impl Drop for CudaBatch<'_> {
    /// The engine's own cache back in place.
    fn drop(&mut self) {
        let e = &mut *self.e;
        let _ = e.stream.synchronize();
        // They name the batch's caches and rows, which go now.
        e.batch_graphs.clear();
        if let Some(p) = self.parked.take() {
            e.kc = p.kc;
            e.vc = p.vc;
            e.cap = p.cap;
            e.len = p.len;
        }
        e.seq = 0;
        e.rows = None;
        e.forget_device_state();
    }
}

impl Batched for CudaBatch<'_> {
    fn len(&self) -> usize {
        self.lens.len()
    }

    fn model(&self) -> &Model {
        &self.e.model
    }

    fn position(&self, s: usize) -> usize {
        self.lens[s]
    }

    fn kv_bytes(&self) -> usize {
        self.kv_bytes
    }

    fn prompts_together(&self) -> bool {
        false
    }

    /// Items of one token each in one batch step; otherwise each item on the engine's
    /// prompt path, one after another.
    fn eval(
        &mut self,
        work: &[(usize, &[u32])],
        want: LogitsFor,
        rec: &mut Recorder,
    ) -> Result<Vec<Vec<Vec<f32>>>, EngineError> {
        let vocab = self.e.model.config.vocab_size;
        let cap = self.e.cap;
        check_work(work, self.lens.len(), vocab, |s| (self.lens[s], cap))?;
        if work.iter().all(|(_, t)| t.len() == 1) {
            let items: Vec<(usize, u32)> = work.iter().map(|&(s, t)| (s, t[0])).collect();
            let Out::Logits(all) = self.run_rows(&items, false, rec)? else {
                unreachable!("a step without picks brings back logits")
            };
            return Ok(all.chunks_exact(vocab).map(|r| vec![r.to_vec()]).collect());
        }
        work.iter()
            .map(|&(s, tokens)| self.on_sequence(s, |e| e.eval(tokens, want, rec)))
            .collect()
    }

    /// One-token items in one batch step with the picks made on the device; prompts one
    /// after another, each picked on the device too.
    fn greedy(
        &mut self,
        work: &[(usize, &[u32])],
        rec: &mut Recorder,
    ) -> Result<Vec<u32>, EngineError> {
        let vocab = self.e.model.config.vocab_size;
        let cap = self.e.cap;
        check_work(work, self.lens.len(), vocab, |s| (self.lens[s], cap))?;
        let mut picks = vec![0u32; work.len()];
        let mut singles = Vec::new();
        for (i, &(s, tokens)) in work.iter().enumerate() {
            if tokens.len() == 1 {
                singles.push((i, (s, tokens[0])));
            } else {
                picks[i] = self.on_sequence(s, |e| Ok(e.decode(tokens, rec, None)?.token))?;
            }
        }
        if let [(i, (s, token))] = singles[..] {
            // One sequence's token: the engine's own decode step (its graph and fused
            // kernels), which is what that sequence alone would run.
            picks[i] = self.on_sequence(s, |e| Ok(e.decode(&[token], rec, None)?.token))?;
        } else if !singles.is_empty() {
            let items: Vec<(usize, u32)> = singles.iter().map(|&(_, it)| it).collect();
            let Out::Picks(ids) = self.run_rows(&items, true, rec)? else {
                unreachable!("a step with picks brings them back")
            };
            for (&(i, _), id) in singles.iter().zip(ids) {
                picks[i] = id;
            }
        }
        Ok(picks)
    }
}

impl CudaEngine {
    /// The device's token, position and decode graphs forgotten: the next launch uploads its
    /// own, and the graphs (which name the cache they were captured on) are captured again.
    fn forget_device_state(&mut self) {
        self.graphs = Default::default();
        self.dev_pos = None;
        self.on_device = None;
    }

    /// A batch step (`rows` set): `rows` are (sequence, token, position), one a sequence;
    /// every launch of the pass, then the greedy picks (`pick`) or the logits copied back.
    /// With `graph` (and unless bricks are timed with host syncs) the launches are the
    /// replay of the step captured for this many rows, captured now if missing.
    fn step_rows(
        &mut self,
        rows: &[(usize, u32, usize)],
        pick: bool,
        graph: bool,
        rec: &mut Recorder,
    ) -> Result<Out, EngineError> {
        let t0 = Instant::now();
        let n = rows.len();
        let tokens: Vec<u32> = rows.iter().map(|r| r.1).collect();
        self.on_device = None;
        self.prepare(&tokens)?;
        let ids: Vec<i32> = rows
            .iter()
            .flat_map(|&(s, _, p)| [s as i32, p as i32])
            .collect();
        let step = self
            .rows
            .as_mut()
            .ok_or_else(|| EngineError::Device("a batch step without its rows".into()))?;
        self.stream
            .memcpy_htod(&ids, &mut step.ids.slice_mut(0..2 * n))
            .map_err(wrap("uploading the batch's positions"))?;
        let groups = rows_group_splits(self, n) > 0;
        let key = BatchKey {
            rows: n,
            pick,
            stamped: self.stamped(rec),
            grouped: groups && rows.iter().all(|r| r.2 + 1 >= self.group_from),
        };
        let synced = rec.enabled() && self.timing == Timing::Sync;
        let launched = if graph && !synced {
            self.replay_rows(key)?;
            None
        } else {
            Some(self.record_rows(key, rec)?)
        };
        let out = match (pick, &self.rows) {
            (true, Some(step)) => Out::Picks(
                self.stream
                    .clone_dtoh(&step.picks.slice(0..2 * n))
                    .map_err(wrap("copying the picks back"))?,
            ),
            _ => {
                let vocab = self.model.weights.output.rows;
                Out::Logits(
                    self.stream
                        .clone_dtoh(&self.bufs.logits.slice(0..n * vocab))
                        .map_err(wrap("copying logits back"))?,
                )
            }
        };
        let owners: &[Slot] = match &launched {
            Some(owners) => owners,
            None if key.stamped => self.rows_owners(key)?,
            None => &[],
        };
        self.record_stamps(owners, ROWS_AREA, rec, t0)?;
        match out {
            Out::Picks(mut p) => {
                self.nonfinite = p[n..].iter().map(|&c| c as usize).sum();
                p.truncate(n);
                Ok(Out::Picks(p))
            }
            logits => Ok(logits),
        }
    }

    /// Every launch of a batch step of `key.rows` rows, from the host (the tokens and rows
    /// already on the device); with `rec` timing by host syncs when it asks for them. Returns
    /// the owners of the stamped launches.
    fn record_rows(&mut self, key: BatchKey, rec: &mut Recorder) -> Result<Vec<Slot>, EngineError> {
        self.clock.arm(key.stamped, ROWS_AREA);
        self.grouped_now = key.grouped;
        self.launch_layers(key.rows, LogitsFor::All, rec)?;
        if key.pick {
            self.pick_rows(key.rows, rec)?;
        }
        let launched = self.k.log.take_step();
        self.clock
            .finish(&self.stream, false, &launched)
            .map_err(EngineError::Device)
    }

    /// The buffers and baked values a batch step's launches name: the activations, the
    /// batch's caches and rows, the capacity (the caches' stride between sequences and the
    /// CPU-order attention's score rows follow it), and the device position. The weights,
    /// RoPE tables, kernel clock and attention scratch shape live as long as the engine.
    fn rows_named(&self) -> Result<Named, EngineError> {
        let s = &self.stream;
        let mut named = Named::default();
        self.bufs.name_into(s, &mut named);
        named
            .slice(s, &self.kc)
            .slice(s, &self.vc)
            .slice(s, &self.pos)
            .value(self.cap as u64);
        self.rows
            .as_ref()
            .ok_or_else(|| EngineError::Device("a batch step without its rows".into()))?
            .name_into(s, &mut named);
        Ok(named)
    }

    /// Launch the captured step for `key` (its tokens and rows already on the device),
    /// capturing it first when missing or captured on other buffers. A capture takes the
    /// step's stamped twin with it under `Events` timing (as the decode graphs do), so a
    /// measured run's first profiled step after unprofiled warm-up steps does not pay for one.
    fn replay_rows(&mut self, key: BatchKey) -> Result<(), EngineError> {
        let named = self.rows_named()?;
        if self.batch_graphs.get(key, &named).is_none() {
            // The stream idle, as for the decode graphs' captures.
            self.stream
                .synchronize()
                .map_err(wrap("waiting before a CUDA graph capture"))?;
            let stamped_too = self.timing == Timing::Events;
            for stamped in [false, true].into_iter().filter(|&s| !s || stamped_too) {
                let k = BatchKey { stamped, ..key };
                if k != key && self.batch_graphs.get(k, &named).is_some() {
                    continue;
                }
                let step = self
                    .capture_with("the batch step", |e| e.record_rows(k, &mut Recorder::off()))?;
                self.batch_graphs.insert(k, named.clone(), step);
            }
        }
        self.batch_graphs
            .get(key, &named)
            .ok_or_else(|| EngineError::Device("the batch step's CUDA graph is missing".into()))?
            .launch("the batch step")
    }

    /// The owners of the stamped launches of the step captured for `key`.
    fn rows_owners(&self, key: BatchKey) -> Result<&[Slot], EngineError> {
        self.batch_graphs
            .peek(key)
            .map(|s| s.owners())
            .ok_or_else(|| EngineError::Device("the batch step's CUDA graph is missing".into()))
    }

    /// RoPE, the KV store and attention of a batch step's `n` tokens over layer `l`, each
    /// over its own sequence's cache, in one launch: the grouped tensor-core kernel where the
    /// step takes it (`BatchKey::grouped`, kernels/attention_group_mma.cu
    /// `attention_group_mma_rows`), else the split-KV kernel (kernels/attention_fast.cu
    /// `attention_split_rows`).
    pub(super) fn attention_split_rows(&mut self, n: usize, l: usize) -> Result<(), DriverError> {
        let c = &self.model.config;
        let h = HeadArgs::layer(c, l);
        let (span, seq_stride) = self.cache_span(l);
        let st = self.clock.stamp();
        let sp = &self.split;
        let group_splits = if self.grouped_now {
            rows_group_splits(self, n)
        } else {
            0
        };
        let wide = c.head_dim == WIDE_HEAD;
        let (f, cfg) = if group_splits > 0 {
            let (f, threads) = if wide {
                (
                    &self.k.attention_group_mma_wide_rows,
                    self.k.group_mma_wide_rows_threads,
                )
            } else {
                (
                    &self.k.attention_group_mma_rows,
                    self.k.group_mma_rows_threads,
                )
            };
            let group = c.n_heads / c.n_kv_heads.max(1);
            let cfg = LaunchConfig {
                grid_dim: (c.n_kv_heads as u32, 2 * group_splits as u32, n as u32),
                block_dim: (threads, 1, 1),
                shared_mem_bytes: group_mma_shared_bytes(c.head_dim, group, threads),
            };
            (f, cfg)
        } else {
            let cfg = LaunchConfig {
                grid_dim: (c.n_heads as u32, sp.splits as u32, n as u32),
                block_dim: (256, 1, 1),
                shared_mem_bytes: sp.shared_bytes as u32,
            };
            (&self.k.attention_split_rows, cfg)
        };
        let (splits, ordered) = if group_splits > 0 {
            (group_splits as i32, None)
        } else {
            (sp.splits as i32, Some(sp.ordered_upto))
        };
        let scale = h.folded_scale();
        let (Some(step), b) = (self.rows.as_mut(), &mut self.bufs) else {
            return Ok(());
        };
        let Some((part, tickets)) = step.split.as_mut() else {
            return Ok(());
        };
        let mut kc = self.kc.slice_mut(span.clone());
        let mut vc = self.vc.slice_mut(span);
        // The two kernels share their parameters but for the split kernel's CPU-order limit.
        let mut launch = self.k.launch(&self.stream, f);
        launch
            .arg(&b.q)
            .arg(&b.k)
            .arg(&b.v)
            .arg(&mut kc)
            .arg(&mut vc)
            .arg(&h.heads)
            .arg(&h.kv_heads)
            .arg(&h.head_dim)
            .arg(&step.ids)
            .arg(&seq_stride)
            .arg(self.rope.layer(l))
            .arg(&h.rope_dims)
            .arg(&h.neox)
            .arg(&h.window)
            .arg(&splits)
            .arg(&scale);
        if let Some(ordered) = &ordered {
            launch.arg(ordered);
        }
        launch
            .arg(part)
            .arg(tickets)
            .arg(&mut b.att)
            .reads(super::attention::KV_CACHE)
            .stamp(&st);
        // SAFETY: n tokens' q_dim query and kv_dim K and V values in, q_dim out each; each
        // token's sequence's cache rows 0..=its position (below the capacity, checked; the
        // RoPE table holds every position below it), the span holding every sequence's
        // caches from this layer on; part and tickets hold n tokens' of the kernel launched
        // (`rows_scratch`: n_heads × splits × (head_dim + 2), or n_heads × 2 splits ×
        // (head_dim + 4) for the grouped kernel, whose shared memory `group_mma_shared_bytes`
        // sizes and whose heads (64, 128 or 256, 2 to GROUP_MAX a KV head) `rows_group_splits`
        // checked), the tickets left zeroed.
        unsafe { launch.launch(cfg) }.map(|_| ())
    }

    /// The greedy pick of each of the step's `n` logits rows (kernels/argmax.cu
    /// `argmax_rows`), the sample brick.
    fn pick_rows(&mut self, n: usize, rec: &mut Recorder) -> Result<(), EngineError> {
        let vocab = self.model.weights.output.rows as i32;
        self.brick(rec, B::Sample, None, |e| {
            let (s1, s2) = (e.clock.stamp(), e.clock.stamp());
            let Some(step) = e.rows.as_mut() else {
                return Ok(());
            };
            let cfg = |grid, threads| LaunchConfig {
                grid_dim: grid,
                block_dim: (threads, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: n rows of `vocab` logits in; each row's ARGMAX_ROW_BLOCKS triples into
            // `pick_part` (sized for n rows), then 2n u32 out (the picks hold 2 × sequences).
            unsafe {
                e.k.launch(&e.stream, &e.k.argmax_row_blocks)
                    .arg(&e.bufs.logits)
                    .arg(&vocab)
                    .arg(&mut step.pick_part)
                    .stamp(&s1)
                    .launch(cfg((ARGMAX_ROW_BLOCKS, n as u32, 1), 256))?;
                e.k.launch(&e.stream, &e.k.argmax_rows)
                    .arg(&step.pick_part)
                    .arg(&mut step.picks)
                    .stamp(&s2)
                    .launch(cfg((n as u32, 1, 1), 32))
            }
            .map(|_| ())
        })
    }
}
