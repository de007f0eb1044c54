//! Dirty-page tracking: what it captures equals a full copy, it copies only what was
//! written, and without userfaultfd SDT falls back to page hashes and says so.

use std::process::Stdio;

use crate::harness::{Sdt, describe, int, program, run, stderr, stdout};

/// Runs `mutate` under `--verify` with a tracking mode: every snapshot read back from the
/// store must equal the whole live memory at the capture, byte for byte.
fn mutate_verified(tracking: &str) -> Sdt {
    let sdt = Sdt::new();
    let prog = program("mutate");
    let out = sdt.ok(&["run", "--verify", "--tracking", tracking, "--", prog.to_str().unwrap(), "4"]);
    let err = stderr(&out);
    let snaps = sdt.snapshots();
    assert_eq!(snaps.len(), 1 + 4 * 5, "{}", describe(&out));
    assert_eq!(err.matches("matches the live process").count(), snaps.len(), "{err}");
    assert!(!err.contains("MISMATCH"), "{err}");
    assert!(stdout(&out).starts_with("mutate done: 4 rounds"));
    for s in &snaps {
        assert_eq!(s["mode"], tracking, "{s}");
    }
    sdt
}

fn tracked_snapshots_equal_a_full_copy_through_every_kind_of_change() {
    mutate_verified("uffd-wp");
}

fn page_hash_snapshots_equal_a_full_copy_too() {
    mutate_verified("page-hash");
}

/// Bytes copied in the pause for each snapshot after the first.
fn copied_after_first(sdt: &Sdt) -> Vec<i64> {
    sdt.snapshots().iter().skip(1).map(|s| int(s, "copied_bytes").unwrap()).collect()
}

fn tracking_copies_only_the_pages_written() {
    let heap = 32 << 20;
    let prog = program("dirty");
    let tracked = Sdt::new();
    tracked.ok(&["run", "--tracking", "uffd-wp", "--", prog.to_str().unwrap(), "32", "1", "4"]);
    let hashed = Sdt::new();
    hashed.ok(&["run", "--tracking", "page-hash", "--", prog.to_str().unwrap(), "32", "1", "4"]);
    for copied in copied_after_first(&tracked) {
        // 1% of the heap, plus stacks, globals and libraries' data.
        assert!(copied < heap / 50, "uffd-wp copied {copied} bytes for 1% of {heap}");
    }
    for copied in copied_after_first(&hashed) {
        assert!(copied >= heap, "page-hash copies every resident page: {copied}");
    }
    // Both store the same: only what changed.
    let stored = |sdt: &Sdt| {
        sdt.compacted_snapshots().iter().skip(1).map(|s| int(s, "pages_stored").unwrap()).collect::<Vec<_>>()
    };
    let (a, b) = (stored(&tracked), stored(&hashed));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 4, "tracked {a:?} vs hashed {b:?} pages stored");
    }
}

fn pages_written_then_dropped_are_not_copied() {
    let heap = 32 << 20;
    let prog = program("dirty");
    let sdt = Sdt::new();
    sdt.ok(&["run", "--tracking", "uffd-wp", "--", prog.to_str().unwrap(), "32", "100", "3", "drop"]);
    for copied in copied_after_first(&sdt) {
        // Every page was written, then dropped: they read as zero, nothing to copy.
        assert!(copied < heap / 50, "copied {copied} bytes of {heap} written and dropped");
    }
}

/// `phases` rewrites an 8 MiB array whole, then sparsely, then not at all, then whole
/// and by halves: the chunks write tracking leaves writable while a sample of them says
/// they are rewritten. Every snapshot must still equal the live memory.
fn chunks_left_writable_are_captured_exactly_through_every_phase() {
    let sdt = Sdt::new();
    let prog = program("phases");
    let out = sdt.ok(&["run", "--verify", "--", prog.to_str().unwrap()]);
    let err = stderr(&out);
    let snaps = sdt.snapshots();
    assert_eq!(snaps.len(), 13, "{}", describe(&out));
    assert_eq!(err.matches("matches the live process").count(), 13, "{err}");
    assert!(!err.contains("MISMATCH"), "{err}");
    let copied: Vec<i64> = snaps.iter().map(|s| int(s, "copied_bytes").unwrap()).collect();
    let array = 8 << 20;
    // The last quiet round, after the sparse ones re-armed the chunks: nothing of the
    // array is copied.
    assert!(copied[7] < array / 16, "{copied:?}");
    // Rewritten whole, left writable or not, the array is copied whole.
    assert!(copied[8] >= array && copied[9] >= array, "{copied:?}");
}

/// `noufd` fails the program's userfaultfd(2) by a seccomp filter, which sdt, without
/// `CAP_SYS_ADMIN` to suspend it, does not dare call through.
fn without_userfaultfd_it_falls_back_to_page_hashes() {
    let sdt = Sdt::new();
    let noufd = program("noufd");
    let prog = program("dirty");
    let run_noufd = |options: &[&str]| {
        let args =
            [&["run"], options, &["--", noufd.to_str().unwrap(), prog.to_str().unwrap(), "4", "10", "3"]];
        run(sdt.command_without_sys_admin(&args.concat()).stdin(Stdio::null()))
    };
    let out = run_noufd(&[]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("sdt: warning: dirty-page tracking is off (thread "), "{}", describe(&out));
    assert!(stderr(&out).contains("runs under a seccomp filter"), "{}", describe(&out));
    let snaps = sdt.snapshots();
    assert_eq!(snaps.len(), 3);
    assert!(snaps.iter().all(|s| s["mode"] == "page-hash"));
    let show = stdout(&sdt.ok(&["show", "S1"]));
    assert!(show.contains("page-hash mode"), "{show}");

    let out = run_noufd(&["--tracking", "uffd-wp"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stderr(&out).contains("userfaultfd write tracking is unavailable"), "{}", describe(&out));
}

sdt_test_harness::tests![
    tracked_snapshots_equal_a_full_copy_through_every_kind_of_change,
    page_hash_snapshots_equal_a_full_copy_too,
    tracking_copies_only_the_pages_written,
    pages_written_then_dropped_are_not_copied,
    chunks_left_writable_are_captured_exactly_through_every_phase,
    without_userfaultfd_it_falls_back_to_page_hashes,
];
