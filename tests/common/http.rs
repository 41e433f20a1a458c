//! A minimal HTTP/1.0 GET for the metrics tests: cbtop's `/metrics` and Prometheus's query
//! API. HTTP/1.0 so the server closes the connection to end the body (no chunked encoding).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `GET path` from `addr` (`host:port`): the status code and the body.
pub fn get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut c = TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(c, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = Vec::new();
    c.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

/// Percent-encode a query parameter's value.
pub fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
