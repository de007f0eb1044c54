//! The wire form of a [`Filter`], carried in the `SDT_CAPTURE` environment variable.
//!
//! ```text
//! sdt1;L2;C1,3;I1,10-19;H1-3;Aphase=solve*;S3/1/12
//! ^^^^ version   L max_level   C classes   I ids   H hits   A attribute rule (one each)
//!                S level/class/id of a breakpoint that always traps (one each)
//! ```
//!
//! Fields are separated by `;`. In `A` fields, `%`, `;` and `=` inside the key or glob are
//! written `%25`, `%3B` and `%3D`. A list field with nothing after its letter is an empty
//! list (nothing passes); an absent field is no condition.

use std::fmt::{self, Write as _};

use crate::filter::{Filter, Span};
use crate::trap::PROTOCOL_VERSION;

/// A wire string that does not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError(String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

fn prefix() -> String {
    format!("sdt{PROTOCOL_VERSION}")
}

impl Filter {
    /// The wire form, which [`Filter::decode`] reads back unchanged.
    pub fn encode(&self) -> String {
        let mut out = prefix();
        if let Some(level) = self.max_level {
            write!(out, ";L{level}").unwrap();
        }
        if let Some(classes) = &self.classes {
            out.push_str(";C");
            push_list(&mut out, classes);
        }
        if let Some(ids) = &self.ids {
            out.push_str(";I");
            push_list(&mut out, ids);
        }
        if let Some(hits) = &self.hits {
            out.push_str(";H");
            push_list(&mut out, hits);
        }
        for (key, glob) in &self.attrs {
            out.push_str(";A");
            escape_into(&mut out, key);
            out.push('=');
            escape_into(&mut out, glob);
        }
        for (level, class, id) in &self.always {
            write!(out, ";S{level}/{class}/{id}").unwrap();
        }
        out
    }

    /// Reads the wire form written by [`Filter::encode`].
    pub fn decode(text: &str) -> Result<Filter, WireError> {
        let mut fields = text.split(';');
        let version = fields.next().unwrap_or_default();
        if version != prefix() {
            return Err(WireError(format!(
                "capture filter has version `{version}`, this library speaks `{}`",
                prefix()
            )));
        }
        let mut filter = Filter::default();
        for field in fields {
            let bad = |what: &str| WireError(format!("bad {what} field `{field}` in capture filter"));
            let (tag, body) = field.split_at(field.chars().next().map_or(0, char::len_utf8));
            match tag {
                "L" => filter.max_level = Some(body.parse().map_err(|_| bad("level"))?),
                "C" => {
                    filter.classes = Some(parse_list(body, |s| s.parse().ok()).ok_or_else(|| bad("class"))?)
                }
                "I" => filter.ids = Some(parse_list(body, |s| Span::parse(s).ok()).ok_or_else(|| bad("id"))?),
                "H" => {
                    filter.hits = Some(parse_list(body, |s| Span::parse(s).ok()).ok_or_else(|| bad("hit"))?)
                }
                "S" => {
                    let mut numbers = body.split('/').map(|n| n.parse::<i32>().ok());
                    let (Some(Some(level)), Some(Some(class)), Some(Some(id)), None) =
                        (numbers.next(), numbers.next(), numbers.next(), numbers.next())
                    else {
                        return Err(bad("breakpoint"));
                    };
                    filter.always.push((level, class, id));
                }
                "A" => {
                    let (key, glob) = body.split_once('=').ok_or_else(|| bad("attribute"))?;
                    let key = unescape(key).ok_or_else(|| bad("attribute"))?;
                    let glob = unescape(glob).ok_or_else(|| bad("attribute"))?;
                    filter.attrs.push((key, glob));
                }
                _ => return Err(bad("unknown")),
            }
        }
        Ok(filter)
    }
}

fn push_list<T: fmt::Display>(out: &mut String, items: &[T]) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write!(out, "{item}").unwrap();
    }
}

fn parse_list<T>(body: &str, parse: impl Fn(&str) -> Option<T>) -> Option<Vec<T>> {
    if body.is_empty() {
        return Some(Vec::new());
    }
    body.split(',').map(parse).collect()
}

fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            ';' => out.push_str("%3B"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
}

fn unescape(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3)?;
        out.push(char::from(u8::from_str_radix(code, 16).ok().filter(u8::is_ascii)?));
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn example_from_the_docs() {
        let f = Filter::decode("sdt1;L2;C1,3;I1,10-19;H1-3;Aphase=solve*").unwrap();
        assert_eq!(f.max_level, Some(2));
        assert_eq!(f.classes, Some(vec![1, 3]));
        assert_eq!(f.ids, Some(vec![Span::single(1), Span { first: 10, last: 19 }]));
        assert_eq!(f.hits, Some(vec![Span { first: 1, last: 3 }]));
        assert_eq!(f.attrs, vec![("phase".to_owned(), "solve*".to_owned())]);
        assert_eq!(f.encode(), "sdt1;L2;C1,3;I1,10-19;H1-3;Aphase=solve*");
    }

    #[test]
    fn empty_list_is_not_absent() {
        let f = Filter::decode("sdt1;C").unwrap();
        assert_eq!(f.classes, Some(vec![]));
        assert_eq!(Filter::decode("sdt1").unwrap(), Filter::default());
    }

    #[test]
    fn errors_name_the_field() {
        assert!(Filter::decode("sdt9;L1").unwrap_err().to_string().contains("version `sdt9`"));
        assert!(Filter::decode("sdt1;Lx").unwrap_err().to_string().contains("`Lx`"));
        assert!(Filter::decode("sdt1;I5-1").is_err());
        assert!(Filter::decode("sdt1;Anovalue").is_err());
        assert!(Filter::decode("sdt1;Aa=%4").is_err());
        assert!(Filter::decode("sdt1;Q").is_err());
        assert!(Filter::decode("sdt1;S1/2").is_err());
        assert!(Filter::decode("sdt1;S1/2/3/4").is_err());
        assert_eq!(Filter::decode("sdt1;S-1/2/30").unwrap().always, vec![(-1, 2, 30)]);
        assert!(Filter::decode("").is_err());
    }

    fn span() -> impl Strategy<Value = Span> {
        (-1000i64..1000, 0i64..50).prop_map(|(first, len)| Span { first, last: first + len })
    }

    fn filter() -> impl Strategy<Value = Filter> {
        (
            proptest::option::of(-5i32..100),
            proptest::option::of(proptest::collection::vec(-3i32..50, 0..4)),
            proptest::option::of(proptest::collection::vec(span(), 0..4)),
            proptest::collection::vec(("[a-z%;=]{1,6}", "[a-z*?%;=\\[\\]]{0,8}"), 0..3),
            proptest::option::of(proptest::collection::vec(span(), 0..3)),
            proptest::collection::vec((-3i32..9, -3i32..9, -100i32..100), 0..3),
        )
            .prop_map(|(max_level, classes, ids, attrs, hits, always)| Filter {
                max_level,
                classes,
                ids,
                attrs,
                hits,
                always,
            })
    }

    proptest! {
        #[test]
        fn round_trip(f in filter()) {
            prop_assert_eq!(Filter::decode(&f.encode()).unwrap(), f);
        }
    }
}
