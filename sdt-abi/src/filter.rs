//! Which breakpoints capture.

use std::fmt;

use crate::glob::glob_match;

/// A breakpoint as the program reached it.
#[derive(Clone, Copy, Debug)]
pub struct Site<'a> {
    /// Depth of detail; deeper breakpoints have higher levels.
    pub level: i32,
    /// The user's category.
    pub class: i32,
    /// The breakpoint's own number.
    pub id: i32,
    /// `key=value,key=value` as passed to `SetBreakpoint` (spaces around keys and values
    /// are ignored).
    pub attrs: &'a [u8],
}

/// An inclusive range of numbers, written `7` or `3-9` (`-5--2` for negatives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First number in the range.
    pub first: i64,
    /// Last number in the range, `>= first`.
    pub last: i64,
}

/// A [`Span`] that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanError(String);

impl fmt::Display for SpanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not a number or an `a-b` range with a <= b", self.0)
    }
}

impl std::error::Error for SpanError {}

impl Span {
    /// The span holding one number.
    pub fn single(n: i64) -> Span {
        Span { first: n, last: n }
    }

    /// Whether `n` lies in the span.
    pub fn contains(&self, n: i64) -> bool {
        self.first <= n && n <= self.last
    }

    /// Parses `7`, `3-9` or `-5--2`.
    pub fn parse(text: &str) -> Result<Span, SpanError> {
        let err = || SpanError(text.to_owned());
        let t = text.trim();
        // The separator is the first '-' that is not a sign.
        let sep = t.char_indices().skip(1).find(|&(_, c)| c == '-').map(|(i, _)| i);
        let (first, last) = match sep {
            Some(i) => (&t[..i], &t[i + 1..]),
            None => (t, t),
        };
        let first: i64 = first.trim().parse().map_err(|_| err())?;
        let last: i64 = last.trim().parse().map_err(|_| err())?;
        if first > last {
            return Err(err());
        }
        Ok(Span { first, last })
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// The part of the capture config that decides, inside the program, whether a breakpoint
/// captures. Every condition must hold; a `None` condition holds for every breakpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Breakpoints with a level above this do not capture.
    pub max_level: Option<i32>,
    /// Only these classes capture.
    pub classes: Option<Vec<i32>>,
    /// Only ids in these spans capture.
    pub ids: Option<Vec<Span>>,
    /// Attribute rules: the breakpoint must carry each key, with a value matching the glob.
    pub attrs: Vec<(String, String)>,
    /// Only these arrivals (1 = first) at a breakpoint capture.
    pub hits: Option<Vec<Span>>,
    /// Breakpoints (level, class, id) that trap whatever the other conditions say: a
    /// refinement must see the breakpoint it refines up to.
    pub always: Vec<(i32, i32, i32)>,
}

impl Filter {
    /// Whether the breakpoint passes every condition except the hit numbers.
    ///
    /// # Signal Safe Methods
    ///
    /// Never allocates, locks or makes system calls.
    pub fn matches_site(&self, site: &Site<'_>) -> bool {
        self.matches_numbers(site.level, site.class, site.id) && self.matches_attrs(site.attrs)
    }

    /// Whether level, class and id pass: the cheap part of [`Filter::matches_site`], which
    /// never looks at the attribute string.
    ///
    /// # Signal Safe Methods
    ///
    /// Never allocates, locks or makes system calls.
    pub fn matches_numbers(&self, level: i32, class: i32, id: i32) -> bool {
        if self.max_level.is_some_and(|max| level > max) {
            return false;
        }
        if self.classes.as_ref().is_some_and(|classes| !classes.contains(&class)) {
            return false;
        }
        self.ids.as_ref().is_none_or(|ids| ids.iter().any(|s| s.contains(i64::from(id))))
    }

    /// Whether the attribute string passes every attribute rule.
    ///
    /// # Signal Safe Methods
    ///
    /// Never allocates, locks or makes system calls.
    pub fn matches_attrs(&self, attrs: &[u8]) -> bool {
        self.attrs.iter().all(|(key, glob)| {
            attr_value(attrs, key.as_bytes()).is_some_and(|v| glob_match(glob.as_bytes(), v))
        })
    }

    /// Whether [`Filter::matches_attrs`] looks at the attribute string at all.
    pub fn has_attr_rules(&self) -> bool {
        !self.attrs.is_empty()
    }

    /// Whether arrival number `hit` (1 = first) at a breakpoint captures.
    ///
    /// # Signal Safe Methods
    ///
    /// Never allocates, locks or makes system calls.
    pub fn matches_hit(&self, hit: u64) -> bool {
        match &self.hits {
            None => true,
            Some(spans) => {
                let hit = i64::try_from(hit).unwrap_or(i64::MAX);
                spans.iter().any(|s| s.contains(hit))
            }
        }
    }

    /// Whether the breakpoint is one of [`Filter::always`], which pass every condition.
    ///
    /// # Signal Safe Methods
    ///
    /// Never allocates, locks or makes system calls.
    pub fn forces(&self, level: i32, class: i32, id: i32) -> bool {
        self.always.contains(&(level, class, id))
    }

    /// The deepest level that can pass: `max_level`, or deeper if an [`Filter::always`]
    /// breakpoint is; `None` when every level can.
    pub fn deepest_level(&self) -> Option<i32> {
        let max = self.max_level?;
        Some(self.always.iter().map(|&(level, _, _)| level).fold(max, i32::max))
    }

    /// Whether [`Filter::matches_hit`] depends on the hit number, i.e. arrivals must be
    /// counted.
    pub fn counts_hits(&self) -> bool {
        self.hits.is_some()
    }
}

/// The value of `key` in a `key=value,key=value` attribute string, spaces trimmed.
pub(crate) fn attr_value<'a>(attrs: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    attrs.split(|&b| b == b',').find_map(|pair| {
        let eq = pair.iter().position(|&b| b == b'=')?;
        (trim(&pair[..eq]) == key).then(|| trim(&pair[eq + 1..]))
    })
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &bytes[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(level: i32, class: i32, id: i32, attrs: &str) -> Site<'_> {
        Site { level, class, id, attrs: attrs.as_bytes() }
    }

    #[test]
    fn spans_parse() {
        assert_eq!(Span::parse("7"), Ok(Span::single(7)));
        assert_eq!(Span::parse(" 3-9 "), Ok(Span { first: 3, last: 9 }));
        assert_eq!(Span::parse("-5--2"), Ok(Span { first: -5, last: -2 }));
        assert_eq!(Span::parse("-5"), Ok(Span::single(-5)));
        assert!(Span::parse("9-3").is_err());
        assert!(Span::parse("3-").is_err());
        assert!(Span::parse("x").is_err());
        assert!(Span::parse("").is_err());
        assert_eq!(Span::parse("3-9").unwrap().to_string(), "3-9");
    }

    #[test]
    fn empty_filter_passes_everything() {
        let f = Filter::default();
        assert!(f.matches_site(&site(99, -4, 12345, "")));
        assert!(f.matches_hit(1_000_000));
        assert!(!f.counts_hits());
    }

    #[test]
    fn every_condition_must_hold() {
        let f = Filter {
            max_level: Some(2),
            classes: Some(vec![1, 3]),
            ids: Some(vec![Span::single(1), Span { first: 10, last: 19 }]),
            attrs: vec![("phase".into(), "solve*".into())],
            hits: Some(vec![Span::single(1), Span { first: 3, last: 4 }]),
            always: vec![(5, 9, 9)],
        };
        assert!(f.matches_site(&site(2, 3, 12, "phase=solver")));
        assert!(f.matches_site(&site(0, 1, 1, " iter = 3 , phase = solve ")));
        assert!(!f.matches_site(&site(3, 3, 12, "phase=solve")), "level too deep");
        assert!(!f.matches_site(&site(1, 2, 12, "phase=solve")), "class");
        assert!(!f.matches_site(&site(1, 1, 9, "phase=solve")), "id");
        assert!(!f.matches_site(&site(1, 1, 1, "phase=setup")), "attr value");
        assert!(!f.matches_site(&site(1, 1, 1, "iter=3")), "attr missing");
        assert!(f.matches_hit(1) && f.matches_hit(3) && f.matches_hit(4));
        // A forced breakpoint passes whatever the rest says, and deepens the inline cut.
        assert!(f.forces(5, 9, 9) && !f.forces(5, 9, 8));
        assert_eq!(f.deepest_level(), Some(5));
        assert_eq!(Filter::default().deepest_level(), None);
        assert!(!f.matches_hit(2) && !f.matches_hit(5));
        assert!(f.counts_hits());
    }

    #[test]
    fn attr_values() {
        assert_eq!(attr_value(b"a=1,b=2", b"b"), Some(&b"2"[..]));
        assert_eq!(attr_value(b"a=1,b=2", b"c"), None);
        assert_eq!(attr_value(b"a=x=y", b"a"), Some(&b"x=y"[..]));
        assert_eq!(attr_value(b"noequals,a=", b"a"), Some(&b""[..]));
        assert_eq!(attr_value(b"", b"a"), None);
    }
}
