//! The report readers behind `cbtop compare A B` and `--baseline FILE`: any text is a report
//! (which then compares and formats without a panic) or an error naming the file.
#![no_main]

use std::path::Path;

use cbtop::report::compare::{compare, parse_report, to_text};
use cbtop::report::format;
use cbtop::report::gates::parse_baseline;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.json");
    match parse_report(path, text) {
        Ok(r) => {
            let c = compare(&r, &r);
            let _ = to_text(&c);
            let _ = format::to_markdown(&r);
            let _ = format::to_csv(&r);
            let _ = format::to_json(&r);
        }
        Err(e) => assert!(e.contains("fuzz.json"), "{e}"),
    }
    match parse_baseline(path, text) {
        Ok(b) => assert!(b.tokens_per_sec > 0.0),
        Err(e) => assert!(e.contains("fuzz.json"), "{e}"),
    }
});
