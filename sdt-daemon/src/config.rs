//! The capture config: a TOML file saying which breakpoints capture, plus timed snapshots
//! and limits.
//!
//! ```toml
//! max_level = 2            # breakpoints deeper than this do not capture
//! classes = [1, 3]         # only these classes
//! ids = [1, "10-19"]       # only these ids: numbers and "a-b" ranges
//! hits = [1, "3-4"]        # only these arrivals at a breakpoint (1 = first)
//! every_ms = 100           # also a timed snapshot every 100 ms the program runs
//! max_snapshots = 50       # stop capturing after 50 snapshots
//!
//! [attrs]                  # the breakpoint must carry each key, value matching the glob
//! phase = "solve*"
//! ```
//!
//! Every key is optional; an empty config captures every breakpoint. A value that cannot
//! mean anything is refused with its line, key and what is allowed, rather than silently
//! filtering everything out: levels, classes and ids are 0 to 2147483647, hits count from
//! 1, lists are not empty, attribute names are non-empty words without `=` or `,`, globs
//! close their brackets (see [`sdt_abi::check_glob`]), `every_ms` is at least 1.
//! `max_snapshots = 0` is a config that captures nothing. The file must be a regular
//! file of at most 1 MiB.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use sdt_abi::{Filter, Span};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use toml::Spanned;

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
    /// The path names something else than a regular file: reading a device or a FIFO
    /// may never end.
    #[error("capture config {path} is {kind}, not a regular file")]
    NotAFile {
        /// The path.
        path: String,
        /// What it is (`a character device`, `a FIFO`, …).
        kind: &'static str,
    },
    /// The file is larger than any capture config.
    #[error("capture config {path} is too large ({size} bytes; a capture config is at most 1 MiB)")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size, or how much of it was read.
        size: u64,
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
    max_level: Option<Spanned<i64>>,
    classes: Option<Spanned<Vec<Spanned<i64>>>>,
    ids: Option<Spanned<Vec<Spanned<SpanSpec>>>>,
    hits: Option<Spanned<Vec<Spanned<SpanSpec>>>>,
    attrs: Option<BTreeMap<String, Spanned<String>>>,
    every_ms: Option<Spanned<i64>>,
    max_snapshots: Option<Spanned<i64>>,
}

/// The largest capture config file read (a config is a few lines).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// What a file that is not a regular file is, for messages.
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
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
    /// Reads and parses a config file: a regular file of at most [`MAX_CONFIG_BYTES`].
    pub fn load(path: &Path) -> Result<CaptureConfig, ConfigError> {
        let name = path.display().to_string();
        let read_error = |source| ConfigError::Read { path: name.clone(), source };
        // Non-blocking: opening a FIFO does not wait for a writer (it is refused below).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(read_error)?;
        let meta = file.metadata().map_err(read_error)?;
        if !meta.is_file() {
            return Err(ConfigError::NotAFile { path: name, kind: file_kind(&meta.file_type()) });
        }
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge { path: name, size: meta.len() });
        }
        // The file may grow meanwhile: no more than the limit is read either way.
        let mut text = String::new();
        file.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text).map_err(read_error)?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge { path: name, size: text.len() as u64 });
        }
        CaptureConfig::parse(&text, &name)
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
            let key = key_path(e.path());
            let inner = e.into_inner();
            invalid(inner.span(), (!key.is_empty()).then_some(key), inner.message().to_owned())
        })?;
        let (filter, every_ms, max_snapshots) =
            lower(raw).map_err(|Refused { span, key, message }| invalid(Some(span), Some(key), message))?;
        Ok(CaptureConfig { filter, every_ms, max_snapshots, text: text.to_owned() })
    }
}

/// The key at `path` as the config writes it (`ids[1]`, `attrs.phase`): the path, less
/// the steps into `Spanned` values.
fn key_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut key = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => key.push_str(&format!("[{index}]")),
            Segment::Map { key: name } | Segment::Enum { variant: name } => {
                if name.starts_with("$__serde_spanned_private") {
                    continue;
                }
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
            }
            Segment::Unknown => key.push_str(".?"),
        }
    }
    key
}

/// A value that parses but cannot mean anything: where it is, its key, and why.
struct Refused {
    span: Range<usize>,
    key: String,
    message: String,
}

/// The config's meaning, refusing the values no breakpoint can match or that would
/// silently filter everything: negative levels, classes and ids (or beyond `i32`), hits
/// before the first, empty lists, attribute names that no attribute string holds, globs
/// that do not parse, a zero `every_ms`.
fn lower(raw: RawConfig) -> Result<(Filter, Option<u64>, Option<u32>), Refused> {
    let max_level =
        raw.max_level.map(|v| number(&v, "max_level", 0, "levels are 0 to 2147483647")).transpose()?;
    let classes = match &raw.classes {
        Some(list) => {
            not_empty(list, "classes")?;
            let each = list.get_ref().iter().enumerate();
            Some(
                each.map(|(i, v)| number(v, &format!("classes[{i}]"), 0, "classes are 0 to 2147483647"))
                    .collect::<Result<_, _>>()?,
            )
        }
        None => None,
    };
    let ids = spans(raw.ids, "ids", 0, i64::from(i32::MAX), "ids are 0 to 2147483647")?;
    let hits = spans(raw.hits, "hits", 1, i64::MAX, "hits count from 1 (the first arrival at a breakpoint)")?;
    let mut attrs = Vec::new();
    for (name, glob) in raw.attrs.unwrap_or_default() {
        let key = format!("attrs.{}", if name.is_empty() { "\"\"" } else { &name });
        if name.is_empty() || name.trim() != name || name.contains([',', '=']) {
            // The value's line is the name's.
            let message = format!(
                "`{name}` cannot name an attribute: names are not empty and hold no `=`, `,` or surrounding \
                 spaces"
            );
            return Err(Refused { span: glob.span(), key, message });
        }
        if let Err(e) = sdt_abi::check_glob(glob.get_ref()) {
            return Err(Refused { span: glob.span(), key, message: e.to_string() });
        }
        attrs.push((name, glob.into_inner()));
    }
    let every_ms = raw
        .every_ms
        .map(|v| number(&v, "every_ms", 1, "at least 1 millisecond (leave it out for no timed snapshots)"))
        .transpose()?;
    let max_snapshots = raw
        .max_snapshots
        .map(|v| number(&v, "max_snapshots", 0, "0 (capture nothing) to 4294967295"))
        .transpose()?;
    let filter = Filter { max_level, classes, ids, attrs, hits, always: Vec::new() };
    Ok((filter, every_ms, max_snapshots))
}

/// The number `value` as a `T`, refused unless it is at least `min` and fits.
fn number<T: TryFrom<i64>>(value: &Spanned<i64>, key: &str, min: i64, allowed: &str) -> Result<T, Refused> {
    let v = *value.get_ref();
    let refused =
        || Refused { span: value.span(), key: key.to_owned(), message: format!("`{v}`: {allowed}") };
    if v < min {
        return Err(refused());
    }
    T::try_from(v).map_err(|_| refused())
}

/// The spans of a list of numbers and ranges, each refused unless within `min..=max`.
fn spans(
    list: Option<Spanned<Vec<Spanned<SpanSpec>>>>,
    key: &str,
    min: i64,
    max: i64,
    allowed: &str,
) -> Result<Option<Vec<Span>>, Refused> {
    let Some(list) = list else { return Ok(None) };
    not_empty(&list, key)?;
    let mut spans = Vec::new();
    for (i, spanned) in list.into_inner().into_iter().enumerate() {
        let span = spanned.get_ref().0;
        if span.first < min || span.last > max {
            let message = format!("`{span}`: {allowed}");
            return Err(Refused { span: spanned.span(), key: format!("{key}[{i}]"), message });
        }
        spans.push(span);
    }
    Ok(Some(spans))
}

/// Refuses an empty list, which would let no breakpoint capture.
fn not_empty<T>(list: &Spanned<Vec<T>>, key: &str) -> Result<(), Refused> {
    if !list.get_ref().is_empty() {
        return Ok(());
    }
    Err(Refused {
        span: list.span(),
        key: key.to_owned(),
        message: format!(
            "`[]` lets no breakpoint capture: leave `{key}` out to let every one (`max_snapshots = 0` \
             captures nothing)"
        ),
    })
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
            "bad capture config capture.toml, line 2, key `every_ms`: `0`: at least 1 millisecond (leave it out for no timed snapshots)"
        );
    }

    /// The error of `text`, which must name `line` and `key`; its message.
    fn refused(text: &str, line: usize, key: &str) -> String {
        let e = error(text);
        let head = format!("bad capture config capture.toml, line {line}, key `{key}`: ");
        e.strip_prefix(&head).unwrap_or_else(|| panic!("{text:?}: {e}")).to_owned()
    }

    #[test]
    fn values_that_cannot_mean_anything_are_refused() {
        assert_eq!(refused("# deep\nmax_level = -1\n", 2, "max_level"), "`-1`: levels are 0 to 2147483647");
        assert_eq!(refused("classes = [1,\n  -1]\n", 2, "classes[1]"), "`-1`: classes are 0 to 2147483647");
        assert!(refused("classes = []\n", 1, "classes").starts_with("`[]` lets no breakpoint capture"));
        assert_eq!(refused("ids = [\"-5--2\"]\n", 1, "ids[0]"), "`-5--2`: ids are 0 to 2147483647");
        assert_eq!(refused("ids = [3000000000]\n", 1, "ids[0]"), "`3000000000`: ids are 0 to 2147483647");
        assert!(refused("ids = []\n", 1, "ids").contains("leave `ids` out"));
        // Inverted ranges, as before.
        assert!(refused("ids = [\"9-3\"]\n", 1, "ids[0]").contains("a <= b"));
        assert!(refused("hits = [\"9-3\"]\n", 1, "hits[0]").contains("a <= b"));
        assert_eq!(
            refused("hits = [0, 2]\n", 1, "hits[0]"),
            "`0`: hits count from 1 (the first arrival at a breakpoint)"
        );
        assert!(refused("hits = [\"-1-2\"]\n", 1, "hits[0]").starts_with("`-1-2`: hits count from 1"));
        assert!(refused("hits = []\n", 1, "hits").contains("lets no breakpoint capture"));
        assert!(refused("[attrs]\n\"\" = \"x\"\n", 2, "attrs.\"\"").contains("cannot name an attribute"));
        assert!(refused("[attrs]\n\"a=b\" = \"x\"\n", 2, "attrs.a=b").contains("cannot name an attribute"));
        assert!(refused("[attrs]\n\" a\" = \"x\"\n", 2, "attrs. a").contains("cannot name an attribute"));
        assert!(
            refused("[attrs]\nphase = \"[x\"\n", 2, "attrs.phase").starts_with("`[x` is not a usable glob")
        );
        assert!(refused("[attrs]\nphase = \"{a,b\"\n", 2, "attrs.phase").contains("braces"));
        assert!(refused("[attrs]\nphase = \"[z-a]\"\n", 2, "attrs.phase").contains("backwards"));
        assert!(refused("every_ms = -5\n", 1, "every_ms").starts_with("`-5`: at least 1 millisecond"));
        assert_eq!(
            refused("max_snapshots = -1\n", 1, "max_snapshots"),
            "`-1`: 0 (capture nothing) to 4294967295"
        );
        assert_eq!(
            refused("max_level = 3000000000\n", 1, "max_level"),
            "`3000000000`: levels are 0 to 2147483647"
        );
    }

    #[test]
    fn only_regular_files_of_sane_size_are_read() {
        let load = |path: &Path| CaptureConfig::load(path).unwrap_err().to_string();
        assert_eq!(
            load(Path::new("/dev/zero")),
            "capture config /dev/zero is a character device, not a regular file"
        );
        assert_eq!(load(Path::new("/")), "capture config / is a directory, not a regular file");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // No writer: opening it must not wait for one.
        assert!(load(&fifo).ends_with("is a FIFO, not a regular file"));
        let big = dir.path().join("big.toml");
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(4 << 30).unwrap();
        assert!(load(&big).ends_with("is too large (4294967296 bytes; a capture config is at most 1 MiB)"));
        let fine = dir.path().join("fine.toml");
        std::fs::write(&fine, "max_level = 1\n").unwrap();
        assert_eq!(CaptureConfig::load(&fine).unwrap().filter.max_level, Some(1));
    }

    #[test]
    fn zero_snapshots_is_a_config() {
        assert_eq!(parse("max_snapshots = 0\n").unwrap().max_snapshots, Some(0));
        let c =
            parse("max_level = 0\nclasses = [0]\nids = [0]\nhits = [1]\n[attrs]\nphase = \"\"\n").unwrap();
        assert_eq!(c.filter.max_level, Some(0));
    }
}
