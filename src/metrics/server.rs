//! `--metrics-listen ADDR`: the latest `Frame` over HTTP at `GET /metrics`, rendered at each
//! request. A std `TcpListener` on one thread, written here rather than taken from an HTTP
//! crate: there is one route, one method and no body to read, requests are handled one at a
//! time (a scraper asks every few seconds), and each connection has a short timeout so a
//! stalled client cannot hold the thread.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::frame::Frame;
use super::openmetrics::{render, render_all, CONTENT_TYPE};
use crate::telemetry::GpuSample;

/// How long one client may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest request head read; a scraper's is a few hundred bytes.
const MAX_REQUEST: usize = 16 * 1024;

/// One engine's picture: its latest frame and the latest NVML reading of its GPU.
#[derive(Clone, Default)]
struct Slot {
    frame: Frame,
    gpu: Option<GpuSample>,
}

impl Slot {
    /// The frame a scrape sees (the frame's own `gpu`, if any, wins over `set_gpu`'s).
    fn frame(&self) -> Frame {
        let mut f = self.frame.clone();
        if f.gpu.is_none() {
            f.gpu = self.gpu.clone();
        }
        f
    }
}

/// What the server shows: one slot per engine (`--device all` runs one per GPU), each set by
/// its run's side (frames) and its telemetry side (GPU readings). Cloning shares it.
#[derive(Clone, Default)]
pub struct Shared {
    slots: Arc<Mutex<Vec<Slot>>>,
    /// The slot this handle writes.
    index: usize,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shared(metrics, slot {})", self.index)
    }
}

impl Shared {
    /// A handle on the same exposition that writes slot `index` (one per engine).
    pub fn slot(&self, index: usize) -> Shared {
        Shared {
            slots: Arc::clone(&self.slots),
            index,
        }
    }

    fn with_slot(&self, f: impl FnOnce(&mut Slot)) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.len() <= self.index {
            slots.resize_with(self.index + 1, Slot::default);
        }
        f(&mut slots[self.index]);
    }

    /// Replace this engine's picture.
    pub fn set_frame(&self, f: Frame) {
        self.with_slot(|s| s.frame = f);
    }

    /// The latest NVML reading of the GPU this engine runs on.
    pub fn set_gpu(&self, g: Option<GpuSample>) {
        self.with_slot(|s| s.gpu = g);
    }

    /// The exposition a scrape gets now: every engine's frame, each family once.
    pub fn render(&self) -> String {
        let frames: Vec<Frame> = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.iter().map(Slot::frame).collect()
        };
        if frames.is_empty() {
            return render(&Frame::default());
        }
        render_all(&frames)
    }
}

/// A listening server; dropping it stops and joins its thread.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Bind `addr` (`HOST:PORT`; port 0 picks a free one) and serve `shared`. The error is one
    /// line naming the address (in use, not an address, not this machine's).
    pub fn bind(addr: &str, shared: Shared) -> Result<MetricsServer, String> {
        let named = |e: &dyn std::fmt::Display| format!("--metrics-listen {addr}: {e}");
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(|e| named(&e))?.collect();
        let listener = TcpListener::bind(&addrs[..]).map_err(|e| named(&e))?;
        let local = listener.local_addr().map_err(|e| named(&e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("cbtop-metrics".into())
                .spawn(move || serve(&listener, &shared, &stop))
                .map_err(|e| named(&e))?
        };
        Ok(MetricsServer {
            addr: local,
            stop,
            thread: Some(thread),
        })
    }

    /// The address bound (with the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept; if the connection fails the thread is left to the exit.
        let woke = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok();
        if let (true, Some(t)) = (woke, self.thread.take()) {
            let _ = t.join();
        }
    }
}

fn serve(listener: &TcpListener, shared: &Shared, stop: &AtomicBool) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(mut c) = conn {
            let _ = c.set_read_timeout(Some(CLIENT_TIMEOUT));
            let _ = c.set_write_timeout(Some(CLIENT_TIMEOUT));
            let _ = answer(&mut c, shared);
        }
    }
}

/// Read one request head and answer it; the connection closes after.
fn answer(c: &mut TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut parts = line.lines().next().unwrap_or("").split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => ("200 OK", CONTENT_TYPE, shared.render()),
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "cbtop: metrics at /metrics\n".to_string(),
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: cbtop serves /metrics\n".to_string(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET\n".to_string(),
        ),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(body.as_bytes());
    }
    c.write_all(&out)?;
    c.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    /// Each engine writes its own slot; a scrape sees every slot, each with its own GPU reading.
    #[test]
    fn slots_keep_each_engines_frame() {
        let shared = Shared::default();
        for (i, dev) in ["cuda:0", "cuda:1"].into_iter().enumerate() {
            let s = shared.slot(i);
            s.set_frame(Frame {
                labels: crate::metrics::Labels {
                    model: "m".into(),
                    device: dev.into(),
                    numerics: "fast".into(),
                },
                tokens_per_second: Some(10.0 + i as f64),
                ..Frame::default()
            });
            s.set_gpu(Some(GpuSample {
                name: format!("gpu {i}"),
                power_w: Some(100.0 + i as f64),
                ..GpuSample::default()
            }));
        }
        let t = shared.render();
        let line = |d: &str, f: &str, v: &str| {
            format!("{f}{{model=\"m\",device=\"{d}\",numerics=\"fast\"}} {v}")
        };
        for want in [
            line("cuda:0", "cbtop_tokens_per_second", "10"),
            line("cuda:1", "cbtop_tokens_per_second", "11"),
            r#"cbtop_gpu_power_watts{model="m",device="cuda:1",numerics="fast",gpu="gpu 1"} 101"#
                .to_string(),
        ] {
            assert!(t.lines().any(|l| l == want), "{want} missing:\n{t}");
        }
        assert_eq!(t.matches("# TYPE cbtop_gpu_power_watts ").count(), 1, "{t}");
    }

    #[test]
    fn serves_the_latest_frame_and_refuses_a_bound_address() {
        let shared = Shared::default();
        let server = MetricsServer::bind("127.0.0.1:0", shared.clone()).unwrap();
        let addr = server.local_addr();
        let first = get(addr, "/metrics");
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.contains(CONTENT_TYPE) && first.ends_with("# EOF\n"));
        shared.set_frame(Frame {
            tokens_per_second: Some(12.0),
            ..Frame::default()
        });
        assert!(get(addr, "/metrics").contains("\ncbtop_tokens_per_second{"));
        assert!(get(addr, "/nope").starts_with("HTTP/1.1 404"));
        let e = MetricsServer::bind(&addr.to_string(), Shared::default())
            .err()
            .unwrap();
        assert!(e.starts_with(&format!("--metrics-listen {addr}: ")), "{e}");
        assert!(MetricsServer::bind("no-port", Shared::default()).is_err());
        drop(server);
    }
}
