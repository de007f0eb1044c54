//! Shell-style glob matching for attribute values, without allocation, and the check a
//! capture config's globs pass first.

use std::fmt;

/// Matches `text` against a shell glob: `*` (any run), `?` (any one byte), `[abc]`,
/// `[a-z]` and `[!abc]` (one byte in / not in the set), `\x` (a literal `x`).
///
/// Works on bytes, so attribute values need not be UTF-8. Runs in `O(len(pattern) *
/// len(text))` at worst and never allocates: it is called on the breaking thread.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    // Classic backtracking over the last `*` only: a later `*` subsumes every choice an
    // earlier one could make.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = match_class(&pattern[p..], text[t]) {
                        if matched {
                            p += next;
                            t += 1;
                            continue;
                        }
                    } else if text[t] == b'[' {
                        // An unterminated `[` is a literal.
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == text[t] {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if c == text[t] {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, st)) => {
                p = sp + 1;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches one byte against the bracket expression at the start of `pattern`. Returns
/// whether it matched and the length of the expression, or `None` if the `[` is not closed.
fn match_class(pattern: &[u8], byte: u8) -> Option<(bool, usize)> {
    let mut matched = false;
    let (negate, len) = scan_class(pattern, |first, last| matched |= (first..=last).contains(&byte))?;
    Some((matched != negate, len))
}

/// Walks the bracket expression at the start of `pattern` (`[abc]`, `[a-z]`, `[!abc]`; a
/// `]` right after the `[` or `!` is a member), calling `item(first, last)` for each member
/// or range. Returns whether it is negated and its length, or `None` if it is not closed.
fn scan_class(pattern: &[u8], mut item: impl FnMut(u8, u8)) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(pattern.get(i), Some(b'!') | Some(b'^'));
    if negate {
        i += 1;
    }
    let mut first = true;
    loop {
        let c = *pattern.get(i)?;
        if c == b']' && !first {
            return Some((negate, i + 1));
        }
        first = false;
        if pattern.get(i + 1) == Some(&b'-') && pattern.get(i + 2).is_some_and(|&e| e != b']') {
            item(c, pattern[i + 2]);
            i += 3;
        } else {
            item(c, c);
            i += 1;
        }
    }
}

/// A capture config's glob that cannot mean what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobError {
    /// The glob.
    pub pattern: String,
    /// Byte offset of the fault.
    pub at: usize,
    /// What is wrong, and what to write instead.
    pub problem: &'static str,
}

impl fmt::Display for GlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not a usable glob: at byte {}, {}", self.pattern, self.at, self.problem)
    }
}

impl std::error::Error for GlobError {}

/// Checks that `pattern` is a glob [`glob_match`] reads as written and that some
/// attribute value can match: every `[` closed, no range backwards, no `\` escaping
/// nothing, no braces (`{a,b}` alternatives are not glob syntax here) and no `,` (which
/// separates attributes, so no value holds one).
pub fn check_glob(pattern: &str) -> Result<(), GlobError> {
    let bytes = pattern.as_bytes();
    let fail = |at: usize, problem: &'static str| Err(GlobError { pattern: pattern.to_owned(), at, problem });
    let mut p = 0;
    while p < bytes.len() {
        match bytes[p] {
            b'[' => {
                let mut backwards = false;
                let Some((_, len)) = scan_class(&bytes[p..], |first, last| backwards |= first > last) else {
                    return fail(p, "this `[` is not closed by a `]` (write `\\[` for a literal `[`)");
                };
                if backwards {
                    return fail(p, "a range in this bracket goes backwards (write `[a-z]`, not `[z-a]`)");
                }
                p += len;
                continue;
            }
            b'\\' => match bytes.get(p + 1) {
                None => return fail(p, "a `\\` at the end escapes nothing (write `\\\\` for a literal one)"),
                Some(b',') => return fail(p + 1, COMMA),
                Some(_) => p += 1,
            },
            b'{' | b'}' => {
                return fail(
                    p,
                    "braces are not glob syntax here: no `{a,b}` alternatives (write `\\{` for a literal brace)",
                );
            }
            b',' => return fail(p, COMMA),
            _ => {}
        }
        p += 1;
    }
    Ok(())
}

const COMMA: &str = "no attribute value holds a `,` (it separates attributes)";

#[cfg(test)]
mod tests {
    use super::{check_glob, glob_match};

    fn m(p: &str, t: &str) -> bool {
        glob_match(p.as_bytes(), t.as_bytes())
    }

    #[test]
    fn literals_and_wildcards() {
        assert!(m("solve", "solve"));
        assert!(!m("solve", "solver"));
        assert!(m("sol*", "solver"));
        assert!(m("*", ""));
        assert!(m("*ve*", "solver"));
        assert!(!m("*x*", "solver"));
        assert!(m("s?lve", "solve"));
        assert!(!m("s?lve", "slve"));
        assert!(m("a*b*c", "aXXbYYbZc"));
        assert!(!m("a*b*c", "aXXbYYbZ"));
        assert!(m("**a", "bba"));
        assert!(!m("", "a"));
        assert!(m("", ""));
    }

    #[test]
    fn classes() {
        assert!(m("iter=[0-9]", "iter=7"));
        assert!(!m("iter=[0-9]", "iter=x"));
        assert!(m("[!a]bc", "xbc"));
        assert!(!m("[!a]bc", "abc"));
        assert!(m("[]]", "]"));
        assert!(m("[a-]", "-"));
        assert!(m("x[", "x["), "unterminated bracket is literal");
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "a"));
    }

    fn problem(p: &str) -> (usize, &'static str) {
        let e = check_glob(p).unwrap_err();
        assert!(e.to_string().starts_with(&format!("`{p}` is not a usable glob: at byte {}", e.at)), "{e}");
        (e.at, e.problem)
    }

    #[test]
    fn globs_check() {
        for good in
            ["", "solve*", "iter=[0-9]", "[!a]bc", "[]]", "[a-]", "\\*", "\\[", "[,x]", "a?b", "[^a-c]"]
        {
            assert_eq!(check_glob(good), Ok(()), "{good}");
        }
        assert!(problem("[x").1.contains("not closed"));
        assert_eq!(problem("ab[x").0, 2);
        assert!(problem("[z-a]").1.contains("backwards"));
        assert!(problem("x\\").1.contains("escapes nothing"));
        assert!(problem("{a,b}").1.contains("braces"));
        assert!(problem("a}").1.contains("braces"));
        assert!(problem("a,b").1.contains("separates"));
        assert!(problem("a\\,b").1.contains("separates"));
    }

    #[test]
    fn non_utf8() {
        assert!(glob_match(b"\xff*", b"\xff\xfe"));
    }

    proptest::proptest! {
        #[test]
        fn star_matches_anything(t in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            proptest::prop_assert!(glob_match(b"*", &t));
        }

        #[test]
        fn pattern_without_specials_is_equality(
            p in "[a-z0-9=]{0,8}", t in "[a-z0-9=]{0,8}"
        ) {
            proptest::prop_assert_eq!(glob_match(p.as_bytes(), t.as_bytes()), p == t);
        }

        #[test]
        fn prefix_star(p in "[a-z]{0,5}", t in "[a-z]{0,8}") {
            let pat = format!("{p}*");
            proptest::prop_assert_eq!(glob_match(pat.as_bytes(), t.as_bytes()), t.starts_with(&p));
        }
    }
}
