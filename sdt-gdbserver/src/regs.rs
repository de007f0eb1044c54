//! The registers gdb gets, and the target description (`target.xml`) that tells it
//! their names, sizes and order: amd64 as gdb's own `amd64-avx-linux` description has
//! them, in the same features (`org.gnu.gdb.i386.core`, `.sse`, `.linux`, `.segments`,
//! and `.avx` when the snapshot's XCR0 enables AVX), so that gdb recognises the
//! architecture and builds its pseudo registers (`$ymm0`, `$eax`, …) on them.
//!
//! ```text
//! number  registers                 bits  from
//! 0–16    rax rbx rcx rdx rsi rdi   64    user_regs_struct (NT_PRSTATUS)
//!         rbp rsp r8–r15 rip
//! 17–23   eflags cs ss ds es fs gs  32    user_regs_struct
//! 24–31   st0–st7                   80    FXSAVE area (NT_PRFPREG)
//! 32–39   fctrl fstat ftag fiseg    32    FXSAVE area; ftag expanded from the abridged
//!         fioff foseg fooff fop             tag word as the CPU's FSTENV would give it
//! 40–56   xmm0–xmm15 mxcsr          128   FXSAVE area
//! 57      orig_rax                  64    user_regs_struct
//! 58–59   fs_base gs_base           64    user_regs_struct
//! 60–75   ymm0h–ymm15h              128   XSAVE area, offset 576 (only with AVX)
//! ```
//!
//! A `g` reply is every register in this order, little-endian, back to back.

use bytemuck::Zeroable;
use sdt_store::{ThreadState, UserFpregs, XsaveHead};

/// XCR0's AVX bit.
const XFEATURE_AVX: u64 = 1 << 2;
/// Offset of the YMM upper halves in a standard-format XSAVE area.
const YMM_HI_OFFSET: usize = 576;

/// One register: name, size in bits, type as target descriptions name types, group.
struct Reg {
    name: &'static str,
    bits: usize,
    ty: &'static str,
    group: Option<&'static str>,
}

const fn reg(name: &'static str, bits: usize, ty: &'static str) -> Reg {
    Reg { name, bits, ty, group: None }
}

const fn float(name: &'static str) -> Reg {
    Reg { name, bits: 32, ty: "int", group: Some("float") }
}

const CORE: [Reg; 40] = [
    reg("rax", 64, "int64"),
    reg("rbx", 64, "int64"),
    reg("rcx", 64, "int64"),
    reg("rdx", 64, "int64"),
    reg("rsi", 64, "int64"),
    reg("rdi", 64, "int64"),
    reg("rbp", 64, "data_ptr"),
    reg("rsp", 64, "data_ptr"),
    reg("r8", 64, "int64"),
    reg("r9", 64, "int64"),
    reg("r10", 64, "int64"),
    reg("r11", 64, "int64"),
    reg("r12", 64, "int64"),
    reg("r13", 64, "int64"),
    reg("r14", 64, "int64"),
    reg("r15", 64, "int64"),
    reg("rip", 64, "code_ptr"),
    reg("eflags", 32, "i386_eflags"),
    reg("cs", 32, "int32"),
    reg("ss", 32, "int32"),
    reg("ds", 32, "int32"),
    reg("es", 32, "int32"),
    reg("fs", 32, "int32"),
    reg("gs", 32, "int32"),
    reg("st0", 80, "i387_ext"),
    reg("st1", 80, "i387_ext"),
    reg("st2", 80, "i387_ext"),
    reg("st3", 80, "i387_ext"),
    reg("st4", 80, "i387_ext"),
    reg("st5", 80, "i387_ext"),
    reg("st6", 80, "i387_ext"),
    reg("st7", 80, "i387_ext"),
    float("fctrl"),
    float("fstat"),
    float("ftag"),
    float("fiseg"),
    float("fioff"),
    float("foseg"),
    float("fooff"),
    float("fop"),
];

const EFLAGS: &str = r#"<flags id="i386_eflags" size="4"><field name="CF" start="0" end="0"/><field name="" start="1" end="1"/><field name="PF" start="2" end="2"/><field name="AF" start="4" end="4"/><field name="ZF" start="6" end="6"/><field name="SF" start="7" end="7"/><field name="TF" start="8" end="8"/><field name="IF" start="9" end="9"/><field name="DF" start="10" end="10"/><field name="OF" start="11" end="11"/><field name="NT" start="14" end="14"/><field name="RF" start="16" end="16"/><field name="VM" start="17" end="17"/><field name="AC" start="18" end="18"/><field name="VIF" start="19" end="19"/><field name="VIP" start="20" end="20"/><field name="ID" start="21" end="21"/></flags>"#;

const SSE_TYPES: &str = r#"<vector id="v8bf16" type="bfloat16" count="8"/><vector id="v4f" type="ieee_single" count="4"/><vector id="v2d" type="ieee_double" count="2"/><vector id="v16i8" type="int8" count="16"/><vector id="v8i16" type="int16" count="8"/><vector id="v4i32" type="int32" count="4"/><vector id="v2i64" type="int64" count="2"/><union id="vec128"><field name="v8_bfloat16" type="v8bf16"/><field name="v4_float" type="v4f"/><field name="v2_double" type="v2d"/><field name="v16_int8" type="v16i8"/><field name="v8_int16" type="v8i16"/><field name="v4_int32" type="v4i32"/><field name="v2_int64" type="v2i64"/><field name="uint128" type="uint128"/></union><flags id="i386_mxcsr" size="4"><field name="IE" start="0" end="0"/><field name="DE" start="1" end="1"/><field name="ZE" start="2" end="2"/><field name="OE" start="3" end="3"/><field name="UE" start="4" end="4"/><field name="PE" start="5" end="5"/><field name="DAZ" start="6" end="6"/><field name="IM" start="7" end="7"/><field name="DM" start="8" end="8"/><field name="ZM" start="9" end="9"/><field name="OM" start="10" end="10"/><field name="UM" start="11" end="11"/><field name="PM" start="12" end="12"/><field name="FZ" start="15" end="15"/></flags>"#;

const XMM: [&str; 16] = [
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
    "xmm12", "xmm13", "xmm14", "xmm15",
];
const YMMH: [&str; 16] = [
    "ymm0h", "ymm1h", "ymm2h", "ymm3h", "ymm4h", "ymm5h", "ymm6h", "ymm7h", "ymm8h", "ymm9h", "ymm10h",
    "ymm11h", "ymm12h", "ymm13h", "ymm14h", "ymm15h",
];

/// The registers of a snapshot's threads: which there are, their description, and their
/// values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registers {
    /// Whether the AVX upper halves are described and sent.
    avx: bool,
}

impl Registers {
    /// The registers to describe for a process whose threads are `threads`: AVX if the
    /// first thread's XSAVE area enables it (XCR0 is the same for every thread).
    pub fn of(threads: &[ThreadState]) -> Registers {
        let xcr0 = threads.first().and_then(|t| XsaveHead::read(&t.xstate)).map_or(0, |h| h.legacy.xcr0());
        Registers { avx: xcr0 & XFEATURE_AVX != 0 }
    }

    /// Every register, by number: name, size in bits, type, group, feature.
    fn table(&self) -> Vec<(Reg, &'static str)> {
        let mut regs: Vec<(Reg, &str)> = CORE.into_iter().map(|r| (r, "core")).collect();
        regs.extend(XMM.map(|n| (reg(n, 128, "vec128"), "sse")));
        regs.push((Reg { name: "mxcsr", bits: 32, ty: "i386_mxcsr", group: Some("vector") }, "sse"));
        regs.push((reg("orig_rax", 64, "int"), "linux"));
        regs.push((reg("fs_base", 64, "int"), "segments"));
        regs.push((reg("gs_base", 64, "int"), "segments"));
        if self.avx {
            regs.extend(YMMH.map(|n| (reg(n, 128, "uint128"), "avx")));
        }
        regs
    }

    /// The target description, `target.xml`.
    pub fn target_xml(&self) -> String {
        let mut xml = String::from(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n<target version=\"1.0\">\
             <architecture>i386:x86-64</architecture><osabi>GNU/Linux</osabi>",
        );
        let mut open: Option<&str> = None;
        for (r, feature) in self.table() {
            if open != Some(feature) {
                if open.is_some() {
                    xml.push_str("</feature>");
                }
                xml.push_str(&format!("<feature name=\"org.gnu.gdb.i386.{feature}\">"));
                match feature {
                    "core" => xml.push_str(EFLAGS),
                    "sse" => xml.push_str(SSE_TYPES),
                    _ => {}
                }
                open = Some(feature);
            }
            xml.push_str(&format!("<reg name=\"{}\" bitsize=\"{}\" type=\"{}\"", r.name, r.bits, r.ty));
            if let Some(group) = r.group {
                xml.push_str(&format!(" group=\"{group}\""));
            }
            xml.push_str("/>");
        }
        xml.push_str("</feature></target>\n");
        xml
    }

    /// Where register `n` lies in a `g` reply: its byte range; `None` past the last.
    pub fn range(&self, n: usize) -> Option<std::ops::Range<usize>> {
        let table = self.table();
        let start = table.get(..n)?.iter().map(|(r, _)| r.bits / 8).sum();
        Some(start..start + table.get(n)?.0.bits / 8)
    }

    /// The length of a `g` reply, in bytes.
    pub fn values_len(&self) -> usize {
        self.table().iter().map(|(r, _)| r.bits / 8).sum()
    }

    /// Every register of `thread`, in order, as a `g` reply holds them. Register sets of
    /// the wrong size (a damaged snapshot) read as zeros.
    pub fn values(&self, thread: &ThreadState) -> Vec<u8> {
        let g = thread.regs().unwrap_or_default();
        let fx = thread.fp_regs().unwrap_or_else(|_| UserFpregs::zeroed());
        let mut out = Vec::with_capacity(600);
        for w in [g.rax, g.rbx, g.rcx, g.rdx, g.rsi, g.rdi, g.rbp, g.rsp] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        for w in [g.r8, g.r9, g.r10, g.r11, g.r12, g.r13, g.r14, g.r15, g.rip] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        for w in [g.eflags, g.cs, g.ss, g.ds, g.es, g.fs, g.gs] {
            out.extend_from_slice(&(w as u32).to_le_bytes());
        }
        let st = words_le(&fx.st_space);
        for i in 0..8 {
            out.extend_from_slice(&st[16 * i..16 * i + 10]);
        }
        // The instruction and operand pointers: offset in the low half, selector above.
        let x87 = [
            u32::from(fx.cwd),
            u32::from(fx.swd),
            full_tag_word(&fx),
            (fx.rip >> 32) as u32,
            fx.rip as u32,
            (fx.rdp >> 32) as u32,
            fx.rdp as u32,
            u32::from(fx.fop & 0x7ff),
        ];
        for v in x87 {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&words_le(&fx.xmm_space));
        out.extend_from_slice(&fx.mxcsr.to_le_bytes());
        for w in [g.orig_rax, g.fs_base, g.gs_base] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        if self.avx {
            let mut ymmh = [0; 256];
            if let Some(area) = thread.xstate.get(YMM_HI_OFFSET..YMM_HI_OFFSET + 256)
                && XsaveHead::read(&thread.xstate).is_some_and(|h| h.header.xstate_bv & XFEATURE_AVX != 0)
            {
                ymmh.copy_from_slice(area);
            }
            out.extend_from_slice(&ymmh);
        }
        out
    }
}

impl Registers {
    /// Writes `values` (every register, as a `g` packet holds them) into `thread`'s
    /// register sets: what [`values`](Self::values) reads, the other way. The x87 tag word
    /// goes back abridged (each register empty or not); the FXSAVE part of the XSAVE
    /// area follows the FXSAVE area, and the area marks x87, SSE (and AVX, if its halves
    /// are not zero) as in use, so that a restore loads them.
    /// Values of any other length than a `g` reply's change nothing.
    pub fn apply(&self, values: &[u8], thread: &mut ThreadState) {
        if values.len() != self.values_len() {
            return;
        }
        let at = |n: usize| self.range(n).and_then(|r| values.get(r)).unwrap_or(&[]);
        let word = |n: usize| {
            let mut w = [0; 8];
            let b = at(n);
            w[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
            u64::from_le_bytes(w)
        };
        let mut g = thread.regs().unwrap_or_default();
        let general = [
            &mut g.rax,
            &mut g.rbx,
            &mut g.rcx,
            &mut g.rdx,
            &mut g.rsi,
            &mut g.rdi,
            &mut g.rbp,
            &mut g.rsp,
            &mut g.r8,
            &mut g.r9,
            &mut g.r10,
            &mut g.r11,
            &mut g.r12,
            &mut g.r13,
            &mut g.r14,
            &mut g.r15,
            &mut g.rip,
            &mut g.eflags,
            &mut g.cs,
            &mut g.ss,
            &mut g.ds,
            &mut g.es,
            &mut g.fs,
            &mut g.gs,
        ];
        for (n, r) in general.into_iter().enumerate() {
            *r = word(n);
        }
        (g.orig_rax, g.fs_base, g.gs_base) = (word(57), word(58), word(59));
        thread.gpregs = bytemuck::bytes_of(&g).to_vec();

        let mut fx = thread.fp_regs().unwrap_or_else(|_| UserFpregs::zeroed());
        (fx.cwd, fx.swd, fx.fop) = (word(32) as u16, word(33) as u16, word(39) as u16 & 0x7ff);
        let tags = word(34);
        fx.ftw = (0..8).filter(|p| (tags >> (2 * p)) & 3 != 3).fold(0, |ftw, p| ftw | 1 << p);
        fx.rip = word(35) << 32 | word(36) & 0xffff_ffff;
        fx.rdp = word(37) << 32 | word(38) & 0xffff_ffff;
        fx.mxcsr = word(56) as u32;
        let area = bytemuck::bytes_of_mut(&mut fx);
        for i in 0..8 {
            area[32 + 16 * i..32 + 16 * i + 10].copy_from_slice(at(24 + i));
        }
        for i in 0..16 {
            let xmm = at(40 + i);
            area[160 + 16 * i..160 + 16 * i + xmm.len()].copy_from_slice(xmm);
        }
        thread.fpregs = area.to_vec();
        // Up to the end of xmm15: the rest of the legacy area holds what ptrace put there.
        if let Some(legacy) = thread.xstate.get_mut(..416) {
            legacy.copy_from_slice(&area[..416]);
        }
        let mut in_use = 3;
        if self.avx
            && let Some(halves) = thread.xstate.get_mut(YMM_HI_OFFSET..YMM_HI_OFFSET + 256)
        {
            for i in 0..16 {
                let half = at(60 + i);
                halves[16 * i..16 * i + half.len()].copy_from_slice(half);
            }
            if halves.iter().any(|&b| b != 0) {
                in_use |= XFEATURE_AVX;
            }
        }
        if let Some(bv) = thread.xstate.get_mut(512..520) {
            let old = u64::from_le_bytes(bv.try_into().expect("8 bytes"));
            bv.copy_from_slice(&(old | in_use).to_le_bytes());
        }
    }
}

/// `words` as little-endian bytes.
fn words_le(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The x87 tag word, two bits per physical register, from FXSAVE's abridged one (a bit
/// per register: empty or not), as `FSTENV` would give it: 0 valid, 1 zero, 2 special,
/// 3 empty.
fn full_tag_word(fx: &UserFpregs) -> u32 {
    let top = usize::from((fx.swd >> 11) & 7);
    let st = words_le(&fx.st_space);
    let mut tags = 0;
    for physical in 0..8 {
        let tag = if fx.ftw & (1 << physical) == 0 {
            3
        } else {
            let i = (physical + 8 - top) % 8;
            let value = &st[16 * i..16 * i + 10];
            let mantissa = u64::from_le_bytes(value[..8].try_into().expect("8 bytes"));
            let exponent = u16::from_le_bytes([value[8], value[9]]) & 0x7fff;
            match exponent {
                0x7fff => 2,
                0 if mantissa == 0 => 1,
                0 => 2,
                _ if mantissa >> 63 == 0 => 2,
                _ => 0,
            }
        };
        tags |= tag << (2 * physical);
    }
    tags
}

#[cfg(test)]
mod tests {
    use super::*;
    use sdt_store::{ThreadRunState, UserRegs};

    #[test]
    fn registers_follow_the_description() {
        let regs =
            UserRegs { rax: 1, rbx: 2, rip: 0x401000, eflags: 0x246, fs_base: 0x7f00, ..UserRegs::default() };
        let mut fx = [0u8; 512];
        fx[0..2].copy_from_slice(&0x37fu16.to_le_bytes());
        fx[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
        fx[160] = 0xaa; // xmm0's first byte
        let mut xstate = vec![0u8; 1024];
        xstate[..512].copy_from_slice(&fx);
        xstate[464..472].copy_from_slice(&0x7u64.to_le_bytes()); // XCR0: x87 SSE AVX
        xstate[512..520].copy_from_slice(&0x7u64.to_le_bytes()); // XSTATE_BV
        xstate[576] = 0xbb; // ymm0h's first byte
        let thread = thread_with(regs, &fx, xstate);
        let r = Registers::of(std::slice::from_ref(&thread));
        assert!(r.avx);
        let g = r.values(&thread);
        assert_eq!(g.len(), r.range(75).unwrap().end);
        assert_eq!(r.range(76), None);
        let at = |n: usize| &g[r.range(n).unwrap()];
        assert_eq!(at(0), 1u64.to_le_bytes());
        assert_eq!(at(1), 2u64.to_le_bytes());
        assert_eq!(at(16), 0x401000u64.to_le_bytes());
        assert_eq!(at(17), 0x246u32.to_le_bytes());
        assert_eq!(at(32), 0x37fu32.to_le_bytes());
        assert_eq!(at(34), 0xffffu32.to_le_bytes(), "all eight empty");
        assert_eq!(at(40)[0], 0xaa);
        assert_eq!(at(56), 0x1f80u32.to_le_bytes());
        assert_eq!(at(58), 0x7f00u64.to_le_bytes());
        assert_eq!(at(60)[0], 0xbb);
        let xml = r.target_xml();
        assert!(xml.contains("<feature name=\"org.gnu.gdb.i386.avx\"><reg name=\"ymm0h\" bitsize=\"128\""));
        assert_eq!(xml.matches("<reg ").count(), 76);
        // Without an XSAVE area: no AVX, described or sent.
        let plain = thread_with(regs, &fx, Vec::new());
        let r = Registers::of(std::slice::from_ref(&plain));
        assert_eq!(r.values(&plain).len(), r.range(59).unwrap().end);
        assert!(!r.target_xml().contains("avx"));
    }

    #[test]
    fn written_registers_read_back() {
        let regs = UserRegs { rax: 1, rip: 0x401000, eflags: 0x246, ..UserRegs::default() };
        let mut fx = [0u8; 512];
        fx[4] = 0x80; // st0 in use
        let mut xstate = vec![0u8; 1024];
        xstate[464..472].copy_from_slice(&0x7u64.to_le_bytes());
        let mut thread = thread_with(regs, &fx, xstate);
        let r = Registers::of(std::slice::from_ref(&thread));
        let mut g = r.values(&thread);
        assert_eq!(g.len(), r.values_len());
        let mut set = |n: usize, byte: u8| g[r.range(n).unwrap()][0] = byte;
        set(0, 99); // rax
        set(5, 7); // rdi
        set(58, 0x10); // fs_base
        set(40, 0xaa); // xmm0
        set(60, 0xbb); // ymm0h
        r.apply(&g, &mut thread);
        assert_eq!(r.values(&thread), g);
        assert_eq!(thread.regs().unwrap().rax, 99);
        assert_eq!(thread.xstate[160], 0xaa, "the XSAVE area's legacy part follows");
        assert_eq!(
            u64::from_le_bytes(thread.xstate[512..520].try_into().unwrap()),
            7,
            "x87, SSE, AVX in use"
        );
        r.apply(&g[1..], &mut thread);
        assert_eq!(r.values(&thread), g, "a short packet changes nothing");
    }

    #[test]
    fn the_tag_word_is_expanded() {
        let mut fx = UserFpregs::zeroed();
        fx.swd = 7 << 11; // top = 7
        fx.ftw = 1 << 7; // physical 7 = st0 in use
        fx.st_space[1] = 0x8000_0000; // st0 = 1.0: integer bit set, exponent 0x3fff
        fx.st_space[2] = 0x3fff;
        assert_eq!(full_tag_word(&fx), 0x3fff);
    }

    fn thread_with(regs: UserRegs, fx: &[u8], xstate: Vec<u8>) -> ThreadState {
        ThreadState {
            tid: 7,
            name: "t".to_owned(),
            state: ThreadRunState::Running,
            gpregs: regs.words().iter().flat_map(|w| w.to_le_bytes()).collect(),
            fpregs: fx.to_vec(),
            xstate,
            sigmask: 0,
            rseq: None,
            robust_list: None,
            altstack: None,
        }
    }
}
