//! The x86_64 register layouts the kernel hands over, as ptrace's register sets
//! (`PTRACE_GETREGSET`), the kernel module's thread records and core files carry them:
//! the general registers ([`UserRegs`]), the FXSAVE area ([`UserFpregs`]), and the start
//! of the XSAVE area ([`XsaveHead`]). Each is plain old data: read from bytes once,
//! length-checked ([`bytemuck::try_pod_read_unaligned`]), then used by field.

use bytemuck::{Pod, Zeroable};

/// Size of `struct user_regs_struct`.
pub const GPREGS_SIZE: usize = 27 * 8;
/// Size of `struct user_fpregs_struct`, the FXSAVE area.
pub const FPREGS_SIZE: usize = 512;
/// End of the XSAVE header (the legacy area and the header): the extended components,
/// YMM first, come after it.
pub const XSAVE_HEADER_END: usize = size_of::<XsaveHead>();

/// Names of the `user_regs_struct` fields, in order.
pub const GPREG_NAMES: [&str; 27] = [
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi", "rdi",
    "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs",
];

/// `struct user_regs_struct` (`<sys/user.h>`): the general registers, as
/// `PTRACE_GETREGSET` with `NT_PRSTATUS` returns them, in [`GPREG_NAMES`] order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[allow(missing_docs)]
pub struct UserRegs {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rax: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub orig_rax: u64,
    pub rip: u64,
    pub cs: u64,
    pub eflags: u64,
    pub rsp: u64,
    pub ss: u64,
    pub fs_base: u64,
    pub gs_base: u64,
    pub ds: u64,
    pub es: u64,
    pub fs: u64,
    pub gs: u64,
}
const _: () = assert!(size_of::<UserRegs>() == GPREGS_SIZE);

impl UserRegs {
    /// The registers in [`GPREG_NAMES`] order.
    pub fn words(self) -> [u64; 27] {
        bytemuck::cast(self)
    }
}

/// `struct user_fpregs_struct` (`<sys/user.h>`): the FXSAVE area, as `PTRACE_GETREGSET`
/// with `NT_PRFPREG` returns it, and the first 512 bytes of an XSAVE area.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct UserFpregs {
    /// x87 control word.
    pub cwd: u16,
    /// x87 status word.
    pub swd: u16,
    /// x87 tag word (abridged).
    pub ftw: u16,
    /// Last x87 opcode.
    pub fop: u16,
    /// Last x87 instruction pointer.
    pub rip: u64,
    /// Last x87 data pointer.
    pub rdp: u64,
    /// SSE control and status.
    pub mxcsr: u32,
    /// The `mxcsr` bits the CPU supports.
    pub mxcr_mask: u32,
    /// `st0`–`st7`, 16 bytes each.
    pub st_space: [u32; 32],
    /// `xmm0`–`xmm15`, 16 bytes each.
    pub xmm_space: [u32; 64],
    /// Unused by FXSAVE; in an XSAVE area from ptrace, words 12 and 13 hold XCR0
    /// ([`UserFpregs::xcr0`]).
    pub padding: [u32; 24],
}
const _: () = assert!(size_of::<UserFpregs>() == FPREGS_SIZE);

impl UserFpregs {
    /// Where in [`UserFpregs::padding`] ptrace puts XCR0 (the enabled features): the first
    /// word of the software-reserved bytes, offset 464 (Linux's `USER_XSTATE_XCR0_WORD`,
    /// gdb's `I386_LINUX_XSAVE_XCR0_OFFSET`).
    const XCR0_WORD: usize = 12;

    /// XCR0, as ptrace records it in an XSAVE area's legacy region.
    pub fn xcr0(&self) -> u64 {
        u64::from(self.padding[Self::XCR0_WORD]) | u64::from(self.padding[Self::XCR0_WORD + 1]) << 32
    }

    /// Replaces the XCR0 that [`UserFpregs::xcr0`] reads.
    pub fn set_xcr0(&mut self, xcr0: u64) {
        self.padding[Self::XCR0_WORD] = xcr0 as u32;
        self.padding[Self::XCR0_WORD + 1] = (xcr0 >> 32) as u32;
    }
}

/// The XSAVE header (Linux's `struct xstate_header`; `struct _header` of
/// `<asm/sigcontext.h>`), at offset 512 of an XSAVE area.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct XsaveHeader {
    /// `XSTATE_BV`: the components the area holds (those not set are in their initial
    /// state).
    pub xstate_bv: u64,
    /// `XCOMP_BV`: bit 63 set for the compacted format (ptrace gives the standard one).
    pub xcomp_bv: u64,
    /// Zero.
    pub reserved: [u64; 6],
}

/// The start of an XSAVE area in standard format, as `NT_X86_XSTATE` gives it: the
/// legacy region, then the header; the extended components follow at offsets the CPU
/// decides (CPUID leaf 0xD).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct XsaveHead {
    /// The legacy region: the FXSAVE area, with XCR0 in its software-reserved bytes.
    pub legacy: UserFpregs,
    /// The XSAVE header.
    pub header: XsaveHeader,
}

impl XsaveHead {
    /// The head of the XSAVE area `xstate`; `None` if it is shorter than
    /// [`XSAVE_HEADER_END`].
    pub fn read(xstate: &[u8]) -> Option<XsaveHead> {
        bytemuck::try_pod_read_unaligned(xstate.get(..XSAVE_HEADER_END)?).ok()
    }

    /// The head as the first [`XSAVE_HEADER_END`] bytes of an XSAVE area.
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::bytes_of(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xcr0_and_the_header_sit_where_ptrace_puts_them() {
        let mut area = vec![0u8; 1024];
        area[464..472].copy_from_slice(&0x2e7u64.to_le_bytes());
        area[512..520].copy_from_slice(&0x7u64.to_le_bytes());
        area[520..528].copy_from_slice(&(1u64 << 63).to_le_bytes());
        let mut head = XsaveHead::read(&area).unwrap();
        assert_eq!((head.legacy.xcr0(), head.header.xstate_bv, head.header.xcomp_bv), (0x2e7, 7, 1 << 63));
        head.legacy.set_xcr0(0x1_0000_0003);
        assert_eq!(&head.as_bytes()[464..472], &0x1_0000_0003u64.to_le_bytes());
        assert_eq!(XsaveHead::read(&area[..XSAVE_HEADER_END - 1]), None);
    }
}
