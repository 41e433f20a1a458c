//! The report as text: JSON (the contract CI reads), Markdown (for people and PR comments) and
//! CSV (one row per brick plus `other`, for spreadsheets). All three render the same `Report`.

use std::fmt::Write;

use super::types::{Report, Status};

/// What a report of `--device all` calls one engine's section: `cuda:N NAME`, else the backend.
pub fn device_label(r: &Report) -> String {
    match &r.hardware.gpu {
        Some(g) => format!("cuda:{} {}", g.ordinal, g.name),
        None => r.hardware.backend.clone(),
    }
}

/// Pretty JSON, newline-terminated.
pub fn to_json(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("a report always serialises");
    s.push('\n');
    s
}

/// The model line: name, arch, and the synthetic label when the weights are random.
pub fn model_label(r: &Report) -> String {
    let m = &r.model;
    format!(
        "{} ({}, {} layers, {:.1}M params{})",
        m.name,
        m.arch,
        m.layers,
        m.params as f64 / 1e6,
        if m.synthetic {
            ", synthetic weights"
        } else {
            ""
        }
    )
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.digits$}"))
}

/// A Markdown summary: header, throughput, brick table with `other`, bottleneck, gates.
pub fn to_markdown(r: &Report) -> String {
    if let Some(devices) = &r.devices {
        let mut s = format!(
            "# cbtop: {} GPUs, one engine each (status {})\n\n",
            devices.len(),
            status_name(r.status)
        );
        for d in devices {
            let _ = writeln!(s, "## {}\n", device_label(d));
            // Each GPU's own report, its headings one level under the GPU's.
            for line in to_markdown(d).lines() {
                match line.strip_prefix("# ") {
                    Some(title) => {
                        let _ = writeln!(s, "### {title}");
                    }
                    None => {
                        let _ = writeln!(s, "{line}");
                    }
                }
            }
        }
        return s;
    }
    let mut s = String::new();
    header_markdown(&mut s, r);
    bricks_markdown(&mut s, r);
    kernels_markdown(&mut s, r);
    if let Some(b) = &r.bottleneck {
        let _ = writeln!(
            s,
            "Bottleneck: **{}** — {:.1} us against a budget of {:.1} us (gap {:.2}x). Top 3 over budget: {}.\n",
            b.id,
            b.actual_us,
            b.budget_us,
            b.gap_factor,
            b.top3
                .iter()
                .map(|e| format!("{} (+{:.1} us)", e.id, e.over_us))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(p) = &r.prefill {
        prefill_markdown(&mut s, p);
    }
    if let Some(points) = &r.batch {
        batch_markdown(&mut s, points);
    }
    let tel = &r.telemetry;
    if !tel.available {
        let _ = writeln!(
            s,
            "Telemetry: none ({}).\n",
            tel.reason.as_deref().unwrap_or("unavailable")
        );
    } else {
        let _ = writeln!(s, "{}\n", telemetry_line(tel));
    }
    if !r.gates.is_empty() {
        let _ = writeln!(
            s,
            "| gate | threshold | actual | result |\n|---|---:|---:|---|"
        );
        for g in &r.gates {
            let _ = writeln!(
                s,
                "| {} | {:.3} | {:.3} | {} |",
                g.name,
                g.threshold,
                g.actual,
                if g.pass { "pass" } else { "FAIL" }
            );
        }
    }
    s
}

/// The report's heading and its summary lines: model, hardware, run, throughput, score.
fn header_markdown(s: &mut String, r: &Report) {
    let t = &r.throughput;
    let h = &r.hardware;
    let _ = writeln!(s, "# cbtop report: {}\n", model_label(r));
    let _ = writeln!(
        s,
        "- model: `{}`{}",
        r.model.path.as_deref().unwrap_or("embedded default"),
        if r.model.synthetic {
            " — **synthetic weights**: timings are real, generated text is not"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "- hardware: {} backend, {}, {} threads; peaks {:.1} GB/s ({}), {:.1} GFLOP/s ({})",
        h.backend,
        h.gpu
            .as_ref()
            .map_or(h.cpu_model.as_str(), |g| g.name.as_str()),
        h.threads,
        h.peaks.bandwidth_gbps,
        h.peaks.bandwidth_source,
        h.peaks.compute_gflops,
        h.peaks.compute_source
    );
    let others: Vec<String> = h
        .peaks
        .bandwidth_candidates
        .iter()
        .filter(|(k, _)| **k != h.peaks.bandwidth_source)
        .map(|(k, v)| format!("{v:.1} GB/s ({k})"))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(
            s,
            "- other bandwidth peaks (not used for the roofline): {}",
            others.join(", ")
        );
    }
    if let Some(c) = h.peaks.cache_bandwidth_gbps {
        let _ = writeln!(
            s,
            "- caches: {c:.1} GB/s (cpu_cache_read_probe or cpu_cache_add_probe), the roof of a decode step's activations"
        );
    }
    let c = &r.config;
    let measured = if c.measured_tokens == c.tokens {
        format!("{}", c.tokens)
    } else {
        format!("{} (of {} asked)", c.measured_tokens, c.tokens)
    };
    let _ = writeln!(
        s,
        "- run: timing {}, numerics {}, {} warm-up + {measured} measured tokens, prompt {} \
         tokens, ctx {}",
        c.timing,
        c.numerics.name(),
        c.warmup,
        c.prefill,
        c.ctx
    );
    if let Some(p) = &c.repacked {
        let _ = writeln!(
            s,
            "- repacked at load: {:.1} MB of weights in {:.0} ms",
            p.bytes as f64 / 1e6,
            p.seconds * 1e3
        );
    }
    if let Some(note) = &r.hardware.note {
        let _ = writeln!(s, "- note: {note}");
    }
    for a in r.assertions.iter().filter(|a| !a.pass) {
        let _ = writeln!(s, "- assertion **{}** failed: {}", a.name, a.detail);
    }
    let _ = writeln!(
        s,
        "- throughput: **{:.2} tok/s** (CV {:.1}%, p50 {:.1} us, p99 {:.1} us), TTFT {:.1} ms, \
         prefill {:.1} tok/s, unprofiled {} tok/s, profiling overhead {}%",
        t.tokens_per_sec,
        t.cv_percent,
        t.p50_us,
        t.p99_us,
        t.ttft_ms,
        t.prefill_tokens_per_sec,
        opt(t.unprofiled_tokens_per_sec, 2),
        opt(t.overhead_percent, 1)
    );
    let _ = writeln!(
        s,
        "- score **{:.1} ({})**, status **{}**\n",
        r.score,
        r.grade,
        status_name(r.status)
    );
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Interrupted => "INTERRUPTED",
    }
}

/// The decode brick table, with `gaps`, `other` and the token's total.
fn bricks_markdown(s: &mut String, r: &Report) {
    if r.bricks.is_empty() {
        let _ = writeln!(s, "Per-brick timing was off: no brick table.\n");
    } else {
        let _ = writeln!(
            s,
            "| brick | source | mean us | p50 | p99 | CV % | share % | budget us | gap | GB/s | GFLOP/s | roofline us | eff % | grade |"
        );
        let _ = writeln!(
            s,
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        let bottleneck = r.bottleneck.as_ref().map(|b| b.id.as_str());
        for b in &r.bricks {
            let mark = if Some(b.id.as_str()) == bottleneck {
                " ◀ bottleneck"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "| {}{mark} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.1} | {:.0} | {} |",
                b.id,
                b.source.name(),
                b.mean_us,
                b.p50_us,
                b.p99_us,
                b.cv_percent,
                b.share_percent,
                b.budget_us,
                b.gap_factor,
                b.gbps,
                b.gflops,
                b.roofline_us,
                100.0 * b.efficiency,
                b.grade
            );
        }
        if let (Some(g), Some(share)) = (r.gaps_us, r.gaps_share_percent) {
            let _ = writeln!(
                s,
                "| gaps | {} | {:.1} | | | | {:.1} | | | | | | | |",
                crate::brick::Source::GpuGlobaltimer.name(),
                g,
                share
            );
        }
        let _ = writeln!(
            s,
            "| other | host clock | {:.1} | | | | {:.1} | | | | | | | |",
            r.other_us, r.other_share_percent
        );
        let _ = writeln!(
            s,
            "| **token** | | **{:.1}** | | | | 100 | | | | | | | |\n",
            r.token_us
        );
    }
}

/// Each brick's kernels: one table, a row per kernel under its brick.
fn kernels_markdown(s: &mut String, r: &Report) {
    if r.bricks.iter().all(|b| b.kernels.is_empty()) {
        return;
    }
    let _ = writeln!(
        s,
        "| brick | kernel | reads | per token | mean us | p99 us | share % | gap before us | regs | smem B | occ % | grid | block |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    );
    let num = |v: Option<f64>, d: usize| v.map_or_else(|| "-".into(), |x| format!("{x:.d$}"));
    let int = |v: Option<u32>| v.map_or_else(|| "-".into(), |x| x.to_string());
    for b in &r.bricks {
        for k in &b.kernels {
            let smem = match (k.static_shared_bytes, k.dynamic_shared_bytes) {
                (Some(a), Some(d)) => Some(a + d),
                (a, d) => a.or(d),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                b.id,
                k.name,
                k.reads.as_deref().unwrap_or("-"),
                k.launches_per_token,
                num(k.mean_us, 2),
                num(k.p99_us, 2),
                num(k.share_percent, 1),
                num(k.gap_before_us, 2),
                int(k.registers_per_thread),
                int(smem),
                num(k.occupancy_percent, 0),
                k.grid
                    .map_or_else(|| "-".into(), |[x, y, z]| format!("{x},{y},{z}")),
                int(k.block),
            );
        }
    }
    s.push('\n');
}

/// The `--batch` sweep: a line per batch size, then each size's brick table.
fn batch_markdown(s: &mut String, points: &[super::types::BatchPoint]) {
    let _ = writeln!(s, "Batched decode:\n");
    let _ = writeln!(
        s,
        "| batch | tok/s (all) | tok/s (each) | step us | p99 us | prefill ms | KV MiB | overhead % |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for p in points {
        let _ = writeln!(
            s,
            "| {} | {:.1} | {:.1} | {:.0} | {:.0} | {:.1} | {:.1} | {} |",
            p.n,
            p.tokens_per_sec,
            p.per_sequence_tokens_per_sec,
            p.step_us,
            p.step_p99_us,
            p.prefill_ms,
            p.kv_cache_bytes as f64 / (1 << 20) as f64,
            p.overhead_percent
                .map_or("-".to_string(), |o| format!("{o:.1}"))
        );
    }
    let _ = writeln!(s);
    for p in points.iter().filter(|p| !p.bricks.is_empty()) {
        let _ = writeln!(s, "Batch {}, per brick:\n", p.n);
        let _ = writeln!(
            s,
            "| brick | us/step | us/token | share % | GB/s | TFLOP/s | FLOP/byte |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
        for b in &p.bricks {
            let _ = writeln!(
                s,
                "| {} | {:.1} | {:.2} | {:.1} | {:.1} | {:.3} | {:.2} |",
                b.id, b.per_step_us, b.per_token_us, b.share_percent, b.gbps, b.tflops, b.intensity
            );
        }
        if let Some(o) = p.other_us {
            let _ = writeln!(s, "| other | {o:.1} | | | | | |");
        }
        let _ = writeln!(s);
    }
}

fn prefill_markdown(s: &mut String, p: &super::types::PrefillReport) {
    let int8 = match (p.int8_gops, &p.int8_source) {
        (Some(v), Some(src)) => format!("; quantized products {v:.1} GOP/s int8, {src}"),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "Prefill of {} tokens, brick by brick ({:.1} us; roofline compute peak {:.1} GFLOP/s, {}{int8}):\n",
        p.tokens, p.total_us, p.compute_gflops, p.compute_source
    );
    let _ = writeln!(
        s,
        "| brick | source | total us | us/token | share % | GB/s | TFLOP/s | roofline us | eff % |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for b in &p.bricks {
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {:.2} | {:.1} | {:.1} | {:.3} | {:.1} | {:.0} |",
            b.id,
            b.source.name(),
            b.total_us,
            b.per_token_us,
            b.share_percent,
            b.gbps,
            b.tflops,
            b.roofline_us,
            100.0 * b.efficiency
        );
    }
    let pct = |us: f64| {
        if p.total_us > 0.0 {
            100.0 * us / p.total_us
        } else {
            0.0
        }
    };
    if let Some(g) = p.gaps_us {
        let src = crate::brick::Source::GpuGlobaltimer.name();
        let _ = writeln!(s, "| gaps | {src} | {g:.1} | | {:.1} | | | | |", pct(g));
    }
    let _ = writeln!(
        s,
        "| other | host clock | {:.1} | | {:.1} | | | | |\n",
        p.other_us,
        pct(p.other_us)
    );
}

/// One Markdown line summarising the GPU telemetry of a run.
fn telemetry_line(t: &super::types::Telemetry) -> String {
    let mm = |v: Option<super::types::StatSummary>, unit: &str| {
        v.map_or("-".to_string(), |v| {
            format!("mean {:.0}{unit} max {:.0}{unit}", v.mean, v.max)
        })
    };
    let mut line =
        format!(
        "Telemetry ({}, NVML, {} samples over {:.0} ms): util {}, power {} (limit {}), SM clock \
         {}, memory clock {}, temperature {}, memory used max {}",
        t.gpu_name.as_deref().unwrap_or("GPU"),
        t.samples,
        t.window_ms.unwrap_or(0.0),
        mm(t.gpu_util_percent, "%"),
        mm(t.power_w, " W"),
        t.power_limit_w.map_or("-".into(), |w| format!("{w:.0} W")),
        mm(t.sm_clock_mhz, " MHz"),
        mm(t.mem_clock_mhz, " MHz"),
        mm(t.temperature_c, " C"),
        t.memory_used_bytes
            .map_or("-".into(), |m| format!("{:.0} MiB", m.max / (1u64 << 20) as f64)),
    );
    if let Some(n) = &t.note {
        line.push_str(&format!(" ({n})"));
    }
    line.push('.');
    line
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row per brick, then `other`. Times in microseconds per token.
pub fn to_csv(r: &Report) -> String {
    if let Some(devices) = &r.devices {
        // One table: each engine's rows behind a `device` column.
        let mut s = String::new();
        for (i, d) in devices.iter().enumerate() {
            let label = csv_field(&device_label(d));
            for (j, line) in to_csv(d).lines().enumerate() {
                match (i, j) {
                    (0, 0) => {
                        let _ = writeln!(s, "device,{line}");
                    }
                    (_, 0) => {}
                    _ => {
                        let _ = writeln!(s, "{label},{line}");
                    }
                }
            }
        }
        return s;
    }
    let mut s = String::from(
        "id,source,count,mean_us,p50_us,p90_us,p99_us,p999_us,max_us,cv_percent,share_percent,\
         budget_us,gap_factor,bytes,flops,gbps,gflops,roofline_us,efficiency,score,grade\n",
    );
    for b in &r.bricks {
        let _ = writeln!(
            s,
            "{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.4},{},{},{:.4},{:.4},{:.3},{:.4},{:.2},{}",
            csv_field(&b.id),
            b.source.name(),
            b.count,
            b.mean_us,
            b.p50_us,
            b.p90_us,
            b.p99_us,
            b.p999_us,
            b.max_us,
            b.cv_percent,
            b.share_percent,
            b.budget_us,
            b.gap_factor,
            b.bytes,
            b.flops,
            b.gbps,
            b.gflops,
            b.roofline_us,
            b.efficiency,
            b.score,
            b.grade
        );
    }
    let _ = writeln!(
        s,
        "other,{},{},{:.3},,,,,,,{:.3},,,,,,,,,,",
        r.throughput.source.name(),
        r.config.measured_tokens,
        r.other_us,
        r.other_share_percent
    );
    s
}
