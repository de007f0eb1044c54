//! The capture config: a TOML file saying which breakpoints capture, plus timed snapshots
//! and limits.
//!
//! ```toml
//! max_level = 2            # breakpoints deeper than this do not capture
//! classes = [1, 3]         # only these classes
//! ids = [1, "10-19"]       # only these ids: numbers and "a-b" ranges
//! hits = [1, "3-4"]        # only these arrivals at a breakpoint (1 = first)
//! every_ms = 100           # also a timed snapshot every 100 ms
//! max_snapshots = 50       # stop capturing after 50 snapshots
//!
//! [attrs]                  # the breakpoint must carry each key, value matching the glob
//! phase = "solve*"
//! ```
//!
//! Every key is optional; an empty config captures every breakpoint.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use sdt_abi::{Filter, Span};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A parsed capture config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureConfig {
    /// Which breakpoints capture; checked inside the program.
    pub filter: Filter,
    /// A timed snapshot every this many milliseconds.
    pub every_ms: Option<u64>,
    /// No snapshots after this many.
    pub max_snapshots: Option<u32>,
    /// The config's text as given, kept with the run.
    pub text: String,
}

/// A config that does not parse, with where and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read capture config {path}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid config.
    #[error("bad capture config {path}, line {line}{}: {message}", key.as_ref().map(|k| format!(", key `{k}`")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line of the problem.
        line: usize,
        /// The key at fault, as a path (`ids[1]`, `attrs.phase`), when known.
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    max_level: Option<i32>,
    classes: Option<Vec<i32>>,
    ids: Option<Vec<SpanSpec>>,
    hits: Option<Vec<SpanSpec>>,
    attrs: Option<BTreeMap<String, String>>,
    every_ms: Option<u64>,
    max_snapshots: Option<u32>,
}

/// A number or an `"a-b"` string.
struct SpanSpec(Span);

impl<'de> Deserialize<'de> for SpanSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SpanSpec, D::Error> {
        struct SpanVisitor;
        impl Visitor<'_> for SpanVisitor {
            type Value = SpanSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or an \"a-b\" range")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SpanSpec, E> {
                Ok(SpanSpec(Span::single(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SpanSpec, E> {
                i64::try_from(v).map(|v| SpanSpec(Span::single(v))).map_err(|_| E::custom("number too large"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SpanSpec, E> {
                Span::parse(v).map(SpanSpec).map_err(E::custom)
            }
        }
        d.deserialize_any(SpanVisitor)
    }
}

impl CaptureConfig {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<CaptureConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        CaptureConfig::parse(&text, &path.display().to_string())
    }

    /// Parses a config's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<CaptureConfig, ConfigError> {
        let invalid = |span: Option<std::ops::Range<usize>>, key: Option<String>, message: String| {
            let line = span.map_or(1, |s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            ConfigError::Invalid { path: origin.to_owned(), line, key, message }
        };
        let de =
            toml::Deserializer::parse(text).map_err(|e| invalid(e.span(), None, e.message().to_owned()))?;
        let raw: RawConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            invalid(inner.span(), (key != ".").then_some(key), inner.message().to_owned())
        })?;
        let key_line = |key: &str| {
            text.lines()
                .position(|l| {
                    l.trim_start().strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('='))
                })
                .map_or(1, |i| i + 1)
        };
        if let Some(0) = raw.every_ms {
            let line = key_line("every_ms");
            return Err(ConfigError::Invalid {
                path: origin.to_owned(),
                line,
                key: Some("every_ms".into()),
                message: "must be at least 1 (leave it out for no timed snapshots)".into(),
            });
        }
        let spans = |v: Option<Vec<SpanSpec>>| v.map(|v| v.into_iter().map(|s| s.0).collect());
        Ok(CaptureConfig {
            filter: Filter {
                max_level: raw.max_level,
                classes: raw.classes,
                ids: spans(raw.ids),
                attrs: raw.attrs.unwrap_or_default().into_iter().collect(),
                hits: spans(raw.hits),
                always: Vec::new(),
            },
            every_ms: raw.every_ms,
            max_snapshots: raw.max_snapshots,
            text: text.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CaptureConfig, ConfigError> {
        CaptureConfig::parse(text, "capture.toml")
    }

    #[test]
    fn full_config() {
        let c = parse(
            "max_level = 2\nclasses = [1, 3]\nids = [1, \"10-19\"]\nhits = [\"1-2\"]\nevery_ms = 50\nmax_snapshots = 7\n[attrs]\nphase = \"solve*\"\n",
        )
        .unwrap();
        assert_eq!(c.filter.max_level, Some(2));
        assert_eq!(c.filter.classes, Some(vec![1, 3]));
        assert_eq!(c.filter.ids, Some(vec![Span::single(1), Span { first: 10, last: 19 }]));
        assert_eq!(c.filter.hits, Some(vec![Span { first: 1, last: 2 }]));
        assert_eq!(c.filter.attrs, vec![("phase".into(), "solve*".into())]);
        assert_eq!(c.every_ms, Some(50));
        assert_eq!(c.max_snapshots, Some(7));
    }

    #[test]
    fn empty_config_captures_everything() {
        assert_eq!(parse("").unwrap().filter, Filter::default());
    }

    fn error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_key_and_line() {
        assert_eq!(
            error("max_level = 1\nmax_levle = 2\n"),
            "bad capture config capture.toml, line 2, key `max_levle`: unknown field `max_levle`, expected one of `max_level`, `classes`, `ids`, `hits`, `attrs`, `every_ms`, `max_snapshots`"
        );
        let e = error("max_level = 1\n\nids = [1,\n  \"9-3\"]\n");
        assert!(e.starts_with("bad capture config capture.toml, line 4, key `ids[1]`:"), "{e}");
        assert!(e.contains("`9-3` is not a number"), "{e}");
        let e = error("classes = \"x\"\n");
        assert!(e.starts_with("bad capture config capture.toml, line 1, key `classes`:"), "{e}");
        let e = error("[attrs]\nphase = 3\n");
        assert!(e.starts_with("bad capture config capture.toml, line 2, key `attrs.phase`:"), "{e}");
        let e = error("max_level = = 2\n");
        assert!(e.starts_with("bad capture config capture.toml, line 1:"), "{e}");
        let e = error("# timed\nevery_ms = 0\n");
        assert_eq!(
            e,
            "bad capture config capture.toml, line 2, key `every_ms`: must be at least 1 (leave it out for no timed snapshots)"
        );
    }
}
