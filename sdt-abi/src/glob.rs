//! Shell-style glob matching for attribute values, without allocation.

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
    let mut i = 1;
    let negate = matches!(pattern.get(i), Some(b'!') | Some(b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let c = *pattern.get(i)?;
        if c == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if pattern.get(i + 1) == Some(&b'-') && pattern.get(i + 2).is_some_and(|&e| e != b']') {
            let end = pattern[i + 2];
            matched |= (c..=end).contains(&byte);
            i += 3;
        } else {
            matched |= c == byte;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

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
