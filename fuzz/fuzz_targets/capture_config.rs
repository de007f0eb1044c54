//! `CaptureConfig::parse` on any text: never panics; errors carry a line inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sdt_daemon::{CaptureConfig, ConfigError};

fuzz_target!(|text: &str| {
    if let Err(ConfigError::Invalid { line, .. }) = CaptureConfig::parse(text, "fuzz.toml") {
        assert!(line >= 1 && line <= text.lines().count().max(1) + 1, "line {line}");
    }
});
