//! Programs built with LeakSanitizer (`-fsanitize=address` or `-fsanitize=leak`): its
//! leak check at exit stops the program's threads with ptrace, which a program under
//! sdt cannot have (sdt is its tracer already), so the program ends with "LeakSanitizer
//! has encountered a fatal error" and exit status 1 whatever it did. `sdt run` turns
//! the check off unless the user chose.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use crate::launch::Linking;

/// Libraries that bring LeakSanitizer (gcc links the runtime dynamically).
const RUNTIMES: [&str; 2] = ["libasan.so", "liblsan.so"];

/// Symbols of a program with the runtime linked in (clang links it statically), for
/// [`Linking::of`] to look for.
pub(crate) const ENTRY_POINTS: [&str; 2] = ["__asan_init", "__lsan_init"];

/// The variable that turns LeakSanitizer's check off for a program linked as `linking`:
/// `LSAN_OPTIONS` (read as `env` gives it) with `detect_leaks=0` added. `None` where the
/// program has no LeakSanitizer, or `LSAN_OPTIONS` or `ASAN_OPTIONS` says `detect_leaks`.
pub(crate) fn leak_check_off(
    linking: &Linking,
    env: impl Fn(&str) -> Option<OsString>,
) -> Option<(String, Vec<u8>)> {
    let has_runtime = linking.needed.iter().any(|n| RUNTIMES.iter().any(|r| n.starts_with(r)))
        || linking.symbols.iter().any(|s| ENTRY_POINTS.contains(&s.as_str()));
    let chosen = |var| env(var).is_some_and(|v| v.to_string_lossy().contains("detect_leaks"));
    if !has_runtime || chosen("LSAN_OPTIONS") || chosen("ASAN_OPTIONS") {
        return None;
    }
    let mut options = env("LSAN_OPTIONS").map(OsString::into_vec).unwrap_or_default();
    if !options.is_empty() {
        options.push(b':');
    }
    options.extend_from_slice(b"detect_leaks=0");
    Some(("LSAN_OPTIONS".into(), options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linking(needed: &[&str], symbols: &[&str]) -> Linking {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Linking { needed: own(needed), symbols: own(symbols) }
    }

    #[test]
    fn turns_the_leak_check_off_unless_the_user_chose() {
        let none = |_: &str| None;
        let gcc = linking(&["libasan.so.8", "libc.so.6"], &["__asan_init"]);
        assert_eq!(leak_check_off(&gcc, none), Some(("LSAN_OPTIONS".into(), b"detect_leaks=0".to_vec())));
        let clang = linking(&["libc.so.6"], &["__lsan_init"]);
        let verbose = |var: &str| (var == "LSAN_OPTIONS").then(|| OsString::from("verbosity=1"));
        assert_eq!(
            leak_check_off(&clang, verbose),
            Some(("LSAN_OPTIONS".into(), b"verbosity=1:detect_leaks=0".to_vec()))
        );
        let chosen = |var: &str| (var == "ASAN_OPTIONS").then(|| OsString::from("detect_leaks=1"));
        assert_eq!(leak_check_off(&gcc, chosen), None);
        assert_eq!(leak_check_off(&linking(&["libtsan.so.2"], &["__tsan_init"]), none), None);
    }
}
