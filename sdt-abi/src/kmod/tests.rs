//! The mirror against the C headers (the module's and libsdt's, and the register layouts
//! against `<sys/user.h>` and `<asm/sigcontext.h>`), and the module's filter against
//! [`Filter`]: both by compiling the C side with the host's gcc.

use std::io::Write;
use std::mem::offset_of;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::*;
use crate::filter::Span;
use crate::regs::{UserFpregs, UserRegs, XSAVE_HEADER_END, XsaveHead, XsaveHeader};

/// What the C programs below include: every header whose layouts are mirrored.
const C_INCLUDES: &str = "#include <stddef.h>\n#include <stdio.h>\n#include <sys/user.h>\n\
    #include <asm/sigcontext.h>\n#include <sdt.h>\n#include \"include/uapi/linux/sdt_kmod.h\"\n";

fn kmod_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kmod")
}

/// Compiles `main` (C) with `sources` against the module's headers and runs it with
/// `input` on stdin; returns its stdout.
fn run_c(main: &str, sources: &[PathBuf], input: &str) -> String {
    let dir = tempfile_dir();
    let main_c = dir.join("main.c");
    std::fs::write(&main_c, main).unwrap();
    let exe = dir.join("main");
    let out = Command::new("gcc")
        .args(["-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(kmod_dir())
        .arg("-I")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdt-lib/include"))
        .arg(&main_c)
        .args(sources)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("running gcc (the tests need it)");
    assert!(out.status.success(), "gcc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let mut child = Command::new(&exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "{} failed", exe.display());
    std::fs::remove_dir_all(&dir).ok();
    String::from_utf8(out.stdout).unwrap()
}

/// A fresh directory under the system's temporary directory (no tempfile dependency here).
fn tempfile_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sdt-abi-kmod-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn layout_matches_the_c_header() {
    let checks: Vec<(&str, u64)> = vec![
        ("SDT_KMOD_VERSION", KMOD_VERSION.into()),
        ("SDT_TRAP_VERSION", crate::PROTOCOL_VERSION.into()),
        ("SDT_ATTRS_MAX", ATTRS_MAX),
        ("SDT_NSIG", NSIG as u64),
        ("SDT_FILTER_MAX_RULES", FILTER_MAX_RULES as u64),
        ("SDT_FILTER_MAX_STRINGS", FILTER_MAX_STRINGS as u64),
        ("SDT_FILTER_MAX_LEVEL", filter_flags::MAX_LEVEL.into()),
        ("SDT_FILTER_CLASSES", filter_flags::CLASSES.into()),
        ("SDT_FILTER_IDS", filter_flags::IDS.into()),
        ("SDT_FILTER_HITS", filter_flags::HITS.into()),
        ("SDT_RULE_CLASS", RULE_CLASS.into()),
        ("SDT_RULE_ID", RULE_ID.into()),
        ("SDT_RULE_HIT", RULE_HIT.into()),
        ("SDT_RULE_ATTR", RULE_ATTR.into()),
        ("SDT_RULE_ALWAYS", RULE_ALWAYS.into()),
        ("SDT_RELEASE_TURN_OFF", RELEASE_TURN_OFF.into()),
        ("SDT_GET_WAIT", GET_WAIT.into()),
        ("SDT_CAPTURE_TRIGGER", CAPTURE_TRIGGER.into()),
        ("SDT_CAPTURE_FREEZE", CAPTURE_FREEZE.into()),
        ("SDT_THREAD_TRIGGER", THREAD_TRIGGER.into()),
        ("(unsigned long long)(long long)SDT_RESULT_OFF", crate::RESULT_OFF as u64),
        ("(unsigned long long)(long long)SDT_RESULT_FILTERED", crate::RESULT_FILTERED as u64),
        ("(unsigned long long)(long long)SDT_RESULT_DECLINED", crate::RESULT_DECLINED as u64),
        ("SDT_STATE_OFF", crate::STATE_OFF as u64),
        ("SDT_STATE_ON", crate::STATE_ON as u64),
        ("SDT_IOC_VERSION", IOC_VERSION),
        ("SDT_IOC_REGISTER", IOC_REGISTER),
        ("SDT_IOC_QUERY", IOC_QUERY),
        ("SDT_IOC_TRIGGER", IOC_TRIGGER),
        // libsdt's header issues the trigger itself.
        ("SDT_KMOD_TRIGGER", IOC_TRIGGER),
        ("SDT_PROTOCOL_VERSION", crate::PROTOCOL_VERSION.into()),
        ("SDT_IOC_FREEZE", IOC_FREEZE),
        ("SDT_IOC_GET", IOC_GET),
        ("SDT_IOC_RELEASE", IOC_RELEASE),
        // The XSAVE header: Linux's `struct xstate_header` is `struct _header` here, with
        // `xcomp_bv` among its reserved words.
        ("sizeof(struct _header)", size_of::<XsaveHeader>() as u64),
        ("offsetof(struct _xstate, xstate_hdr)", offset_of!(XsaveHead, header) as u64),
        ("offsetof(struct _xstate, ymmh)", XSAVE_HEADER_END as u64),
    ];
    let mut main = format!("{C_INCLUDES}int main(void)\n{{\n");
    for (expr, _) in &checks {
        main.push_str(&format!("\tprintf(\"%llu\\n\", (unsigned long long)({expr}));\n"));
    }
    main.push_str("\treturn 0;\n}\n");
    let printed = run_c(&main, &[], "");
    let values: Vec<u64> = printed.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), checks.len());
    for ((expr, rust), c) in checks.iter().zip(values) {
        assert_eq!(*rust, c, "{expr}: Rust says {rust}, the C header {c}");
    }
}

/// Where the C compiler finds the system header `name` (`sys/user.h`).
fn system_header(name: &str) -> PathBuf {
    let mut gcc = Command::new("gcc")
        .args(["-M", "-x", "c", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running gcc (the tests need it)");
    gcc.stdin.take().unwrap().write_all(format!("#include <{name}>\n").as_bytes()).unwrap();
    let out = gcc.wait_with_output().unwrap();
    let deps = String::from_utf8(out.stdout).unwrap();
    let path = deps.split_whitespace().find(|p| p.ends_with(&format!("/{name}")));
    PathBuf::from(path.unwrap_or_else(|| panic!("gcc finds no <{name}>")))
}

/// A Rust struct's layout: its size and, in declaration order, each field's name, offset
/// and size.
macro_rules! rust_layout {
    ($ty:ty { $($field:ident),* $(,)? }) => {{
        fn size_of_field<T, F: Fn(&$ty) -> &T>(_: F) -> usize {
            size_of::<T>()
        }
        let fields: Vec<(String, usize, usize)> = vec![$((
            stringify!($field).to_owned(),
            offset_of!($ty, $field),
            size_of_field(|s: &$ty| &s.$field),
        )),*];
        (size_of::<$ty>(), fields)
    }};
}

/// The field names of `struct name` in the C header `text`, in order: declarations
/// `type a;`, `type a, b;` and `type a[N];`, comments left out.
fn c_fields(text: &str, name: &str) -> Vec<String> {
    // `struct name {`, the brace maybe on the next line.
    let tag = format!("struct {name}");
    let start = text
        .match_indices(&tag)
        .map(|(at, _)| at + tag.len())
        .find_map(|end| {
            let rest = text[end..].trim_start();
            rest.starts_with('{').then(|| text.len() - rest.len() + 1)
        })
        .unwrap_or_else(|| panic!("no {tag} {{ in the header"));
    let body = &text[start..start + text[start..].find("};").unwrap()];
    let mut code = String::new();
    let mut rest = body;
    while let Some(at) = rest.find("/*") {
        code.push_str(&rest[..at]);
        rest = &rest[at + rest[at..].find("*/").unwrap() + 2..];
    }
    code.push_str(rest);
    let mut fields = Vec::new();
    for decl in code.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        // `type first, second`: the type ends before the first declarator.
        let mut declarators = decl.split(',');
        let head = declarators.next().unwrap();
        let first = head.rsplit(|c: char| c.is_whitespace() || c == '*').next().unwrap();
        for declarator in std::iter::once(first).chain(declarators) {
            let name = declarator.trim().split('[').next().unwrap();
            assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "cannot read {decl:?}");
            fields.push(name.to_owned());
        }
    }
    fields
}

/// Every ABI struct of the module's header, and libsdt's trap record, field by field:
/// the same names in the same order (`class_` is `class` in Rust), at the same offsets,
/// with the same sizes, in structs of the same size. A field added, dropped, moved or
/// resized on either side fails here.
#[test]
fn every_field_matches_the_c_headers() {
    let kmod_h = std::fs::read_to_string(kmod_dir().join("include/uapi/linux/sdt_kmod.h")).unwrap();
    let sdt_h =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdt-lib/include/sdt.h"))
            .unwrap();
    let user_h = std::fs::read_to_string(system_header("sys/user.h")).unwrap();
    let trap = rust_layout!(TrapRecord {
        version,
        size,
        level,
        class,
        id,
        multiple_mark,
        hit,
        attrs_ptr,
        attrs_len,
        trigger_ns,
        state_ptr,
        result,
    });
    let structs = [
        ("sdt_trap", &sdt_h, trap.clone()),
        ("sdt_trap_record", &kmod_h, trap),
        ("sdt_filter", &kmod_h, rust_layout!(FilterHeader { flags, max_level, nr_rules, strings_len })),
        (
            "sdt_rule",
            &kmod_h,
            rust_layout!(Rule { kind, level, class, id, first, last, key_off, key_len, glob_off, glob_len }),
        ),
        ("sdt_version", &kmod_h, rust_layout!(Version { version, thread_size, xstate_size, reserved })),
        ("sdt_register", &kmod_h, rust_layout!(Register { version, size, pid, filter_len, filter })),
        ("sdt_query", &kmod_h, rust_layout!(Query { version, registered, daemon_pid, reserved })),
        ("sdt_release", &kmod_h, rust_layout!(Release { result, flags, reserved })),
        ("sdt_sigaction", &kmod_h, rust_layout!(SigAction { handler, flags, restorer, mask })),
        (
            "sdt_snapshot",
            &kmod_h,
            rust_layout!(Snapshot {
                threads,
                threads_len,
                flags,
                seq,
                kind,
                nr_threads,
                thread_size,
                trigger_tid,
                start_ns,
                held_ns,
                exec_id,
                record_addr,
                record,
                nr_actions,
                reserved,
                actions,
            }),
        ),
        (
            "user_regs_struct",
            &user_h,
            rust_layout!(UserRegs {
                r15,
                r14,
                r13,
                r12,
                rbp,
                rbx,
                r11,
                r10,
                r9,
                r8,
                rax,
                rcx,
                rdx,
                rsi,
                rdi,
                orig_rax,
                rip,
                cs,
                eflags,
                rsp,
                ss,
                fs_base,
                gs_base,
                ds,
                es,
                fs,
                gs,
            }),
        ),
        (
            "user_fpregs_struct",
            &user_h,
            rust_layout!(UserFpregs {
                cwd,
                swd,
                ftw,
                fop,
                rip,
                rdp,
                mxcsr,
                mxcr_mask,
                st_space,
                xmm_space,
                padding
            }),
        ),
        (
            "sdt_thread",
            &kmod_h,
            rust_layout!(Thread {
                tid,
                flags,
                sigmask,
                rseq,
                rseq_len,
                rseq_sig,
                robust_list,
                robust_list_len,
                altstack,
                altstack_size,
                gpregs_size,
                fpregs_size,
                xstate_size,
                altstack_flags,
                gpregs,
                fpregs,
            }),
        ),
    ];
    // What the C compiler says of each struct: its size, then each field's offset and size.
    let mut main = format!("{C_INCLUDES}int main(void)\n{{\n");
    let mut c_names = Vec::new();
    for (name, header, _) in &structs {
        let fields = c_fields(header, name);
        main.push_str(&format!("\tprintf(\"%zu\\n\", sizeof(struct {name}));\n"));
        for f in &fields {
            main.push_str(&format!(
                "\tprintf(\"%zu %zu\\n\", offsetof(struct {name}, {f}), sizeof(((struct {name} *)0)->{f}));\n"
            ));
        }
        c_names.push(fields);
    }
    main.push_str("\treturn 0;\n}\n");
    let printed = run_c(&main, &[], "");
    let mut lines = printed.lines();
    for ((name, _, (rust_size, rust_fields)), c_fields) in structs.iter().zip(c_names) {
        let names: Vec<String> = c_fields.iter().map(|f| f.trim_end_matches('_').to_owned()).collect();
        let rust_names: Vec<&String> = rust_fields.iter().map(|(n, _, _)| n).collect();
        assert_eq!(rust_names, names.iter().collect::<Vec<_>>(), "struct {name}: fields in C and in Rust");
        let c_size: usize = lines.next().unwrap().parse().unwrap();
        assert_eq!(*rust_size, c_size, "sizeof(struct {name})");
        for (f, (_, offset, size)) in c_fields.iter().zip(rust_fields) {
            let (c_offset, c_size) = lines.next().unwrap().split_once(' ').unwrap();
            assert_eq!(
                (*offset, *size),
                (c_offset.parse().unwrap(), c_size.parse().unwrap()),
                "struct {name}.{f}: offset, size"
            );
        }
    }
}

/// A small deterministic generator (xorshift64*), so that a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn text(&mut self, alphabet: &[u8], max: u64) -> String {
        let len = self.below(max + 1);
        (0..len).map(|_| alphabet[self.below(alphabet.len() as u64) as usize] as char).collect()
    }
    fn spans(&mut self, lo: i64, hi: i64) -> Vec<Span> {
        (0..self.below(3))
            .map(|_| {
                let a = self.range(lo, hi);
                Span { first: a, last: a + self.range(0, 2) }
            })
            .collect()
    }
}

fn random_filter(rng: &mut Rng) -> Filter {
    Filter {
        max_level: rng.chance(50).then(|| rng.range(-1, 3) as i32),
        classes: rng.chance(40).then(|| (0..rng.below(3)).map(|_| rng.range(-1, 3) as i32).collect()),
        ids: rng.chance(40).then(|| rng.spans(-2, 5)),
        hits: rng.chance(40).then(|| rng.spans(0, 5)),
        attrs: (0..rng.below(3).saturating_sub(1))
            .map(|_| (rng.text(b"ab", 2), rng.text(b"ab*?[]!^-\\=", 6)))
            .collect(),
        always: (0..rng.below(2))
            .map(|_| (rng.range(0, 3) as i32, rng.range(-1, 3) as i32, rng.range(-2, 5) as i32))
            .collect(),
    }
}

/// `key=value` pairs with stray spaces and separators, sometimes noise.
fn random_attrs(rng: &mut Rng) -> String {
    if rng.chance(10) {
        return rng.text(b"ab=, \t*?[]\\", 10);
    }
    let pairs: Vec<String> = (0..rng.below(4))
        .map(|_| {
            let space = |rng: &mut Rng| if rng.chance(20) { " " } else { "" };
            let (a, b, c) = (space(rng), space(rng), space(rng));
            format!("{a}{}{b}={c}{}", rng.text(b"ab", 2), rng.text(b"ab*?[]=\\", 4))
        })
        .collect();
    pairs.join(",")
}

fn hex(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "-".into();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const FILTER_DRIVER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdt_filter.h"

static size_t unhex(const char *s, unsigned char *out)
{
	size_t n = 0;

	if (!strcmp(s, "-"))
		return 0;
	for (; s[0] && s[1]; s += 2) {
		unsigned int b;

		sscanf(s, "%2x", &b);
		out[n++] = (unsigned char)b;
	}
	return n;
}

int main(void)
{
	static char blob_hex[1 << 16], attrs_hex[1 << 12];
	static unsigned char blob[1 << 15], attrs[1 << 11];
	int level, class_, id;
	unsigned long long hit;

	while (scanf("%65535s %d %d %d %llu %4095s", blob_hex, &level, &class_, &id, &hit,
		     attrs_hex) == 6) {
		size_t blen = unhex(blob_hex, blob);
		struct sdt_site site = { level, class_, id, hit, attrs, unhex(attrs_hex, attrs) };

		if (sdt_filter_check(blob, blen))
			printf("bad\n");
		else
			printf("%d\n", sdt_filter_match(blob, &site));
	}
	return 0;
}
"#;

#[test]
fn kernel_filter_agrees_with_sdt_abi() {
    let mut rng = Rng(0x5d7_f11e_7e57);
    let mut input = String::new();
    let mut expected = Vec::new();
    for _ in 0..300 {
        let filter = random_filter(&mut rng);
        let blob = hex(&encode_filter(&filter).unwrap());
        for _ in 0..20 {
            let (level, class, id) =
                (rng.range(-1, 3) as i32, rng.range(-1, 3) as i32, rng.range(-2, 5) as i32);
            let hit = rng.below(6);
            let attrs = random_attrs(&mut rng);
            let forced = filter.forces(level, class, id);
            let passes = forced
                || (filter.matches_numbers(level, class, id)
                    && filter.matches_attrs(attrs.as_bytes())
                    && (hit == 0 || filter.matches_hit(hit)));
            input.push_str(&format!("{blob} {level} {class} {id} {hit} {}\n", hex(attrs.as_bytes())));
            expected.push((
                passes,
                format!("{filter:?} level {level} class {class} id {id} hit {hit} attrs {attrs:?}"),
            ));
        }
    }
    let out = run_c(FILTER_DRIVER, &[kmod_dir().join("sdt_filter.c")], &input);
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got.len(), expected.len());
    // Both outcomes are common, so that agreement means something.
    let passing = expected.iter().filter(|(p, _)| *p).count();
    assert!(
        passing * 10 > expected.len() && passing * 10 < expected.len() * 9,
        "{passing} of {}",
        expected.len()
    );
    for (g, (passes, case)) in got.iter().zip(&expected) {
        assert_eq!(*g, if *passes { "1" } else { "0" }, "the kernel's filter disagrees on {case}");
    }
}

#[test]
fn the_kernel_refuses_malformed_filters() {
    let good = encode_filter(&Filter {
        ids: Some(vec![Span { first: 1, last: 3 }]),
        attrs: vec![("k".into(), "v*".into())],
        ..Filter::default()
    })
    .unwrap();
    let mut cases = vec![good.clone(), good[..good.len() - 1].to_vec(), good[..8].to_vec()];
    let mut reversed = good.clone();
    reversed[16 + 16..16 + 24].copy_from_slice(&9i64.to_le_bytes()); // first > last
    cases.push(reversed);
    let mut outside = good.clone();
    outside[16 + 48 + 32..16 + 48 + 36].copy_from_slice(&100u32.to_le_bytes()); // key past the strings
    cases.push(outside);
    let mut kind = good.clone();
    kind[16..20].copy_from_slice(&9u32.to_le_bytes());
    cases.push(kind);
    let mut flags = good;
    flags[0..4].copy_from_slice(&0x100u32.to_le_bytes());
    cases.push(flags);
    let input: String = cases.iter().map(|c| format!("{} 1 1 1 1 {}\n", hex(c), hex(b"k=vv"))).collect();
    let out = run_c(FILTER_DRIVER, &[kmod_dir().join("sdt_filter.c")], &input);
    assert_eq!(out.lines().collect::<Vec<_>>(), ["1", "bad", "bad", "bad", "bad", "bad", "bad"]);
}

#[test]
fn filters_encode_as_the_header_says() {
    let filter = Filter {
        max_level: Some(2),
        classes: Some(vec![1, 3]),
        ids: Some(vec![]),
        hits: None,
        attrs: vec![("phase".into(), "solve*".into())],
        always: vec![(5, 9, 9)],
    };
    let blob = encode_filter(&filter).unwrap();
    let u32_at = |o: usize| u32::from_le_bytes(blob[o..o + 4].try_into().unwrap());
    assert_eq!(u32_at(0), filter_flags::MAX_LEVEL | filter_flags::CLASSES | filter_flags::IDS);
    assert_eq!((u32_at(4), u32_at(8), u32_at(12)), (2, 4, 11));
    assert_eq!(blob.len(), 16 + 4 * 48 + 11);
    assert_eq!(&blob[16 + 4 * 48..], b"phasesolve*");
    let attr = 16 + 2 * 48;
    assert_eq!(u32_at(attr), RULE_ATTR);
    assert_eq!((u32_at(attr + 32), u32_at(attr + 36), u32_at(attr + 40), u32_at(attr + 44)), (0, 5, 5, 6));
    let always = 16 + 3 * 48;
    assert_eq!(
        (u32_at(always), u32_at(always + 4), u32_at(always + 8), u32_at(always + 12)),
        (RULE_ALWAYS, 5, 9, 9)
    );

    let huge = Filter { classes: Some(vec![1; FILTER_MAX_RULES + 1]), ..Filter::default() };
    let err = encode_filter(&huge).unwrap_err();
    assert_eq!(err.rules, FILTER_MAX_RULES + 1);
    assert!(err.to_string().contains("too large for the kernel module"), "{err}");
}

#[test]
fn thread_records_decode_with_their_xstate() {
    let mut bytes = vec![0u8; size_of::<Thread>() + 16];
    let field = |offset: usize| offset..offset + 4;
    let (gpregs_size, fpregs_size, xstate_size) =
        (offset_of!(Thread, gpregs_size), offset_of!(Thread, fpregs_size), offset_of!(Thread, xstate_size));
    bytes[0..4].copy_from_slice(&1234i32.to_le_bytes());
    bytes[4..8].copy_from_slice(&THREAD_TRIGGER.to_le_bytes());
    bytes[field(gpregs_size)].copy_from_slice(&216u32.to_le_bytes());
    bytes[field(fpregs_size)].copy_from_slice(&512u32.to_le_bytes());
    bytes[field(xstate_size)].copy_from_slice(&8u32.to_le_bytes());
    let rip = offset_of!(Thread, gpregs) + 16 * 8;
    bytes[rip..rip + 8].copy_from_slice(&0x40_1000u64.to_le_bytes());
    bytes[size_of::<Thread>()..size_of::<Thread>() + 8].copy_from_slice(b"XSTATE!!");
    let (thread, xstate) = Thread::from_bytes(&bytes).unwrap();
    assert_eq!((thread.tid, thread.flags, thread.gpregs[16]), (1234, THREAD_TRIGGER, 0x40_1000));
    assert_eq!(xstate, b"XSTATE!!");
    assert_eq!(thread.gpregs_bytes().len(), 216);
    // An XSAVE area longer than the bytes, or registers longer than their arrays.
    bytes[field(xstate_size)].copy_from_slice(&17u32.to_le_bytes());
    assert!(Thread::from_bytes(&bytes).is_none());
    bytes[field(xstate_size)].copy_from_slice(&0u32.to_le_bytes());
    bytes[field(gpregs_size)].copy_from_slice(&300u32.to_le_bytes());
    assert!(Thread::from_bytes(&bytes).is_none());
    assert!(Thread::from_bytes(&bytes[..100]).is_none());
}
