//! Kernel interfaces newer than Debian's headers (and the `libc` crate): userfaultfd's
//! asynchronous write-protect mode (Linux 6.7) and the `PAGEMAP_SCAN` ioctl (Linux 6.7).
//! Values from `include/uapi/linux/userfaultfd.h` and `include/uapi/linux/fs.h`; the
//! layouts are part of the kernel ABI and checked below.

/// `UFFD_API`: the API version `UFFDIO_API` must be given.
pub const UFFD_API: u64 = 0xaa;
/// `userfaultfd(2)` flag: handle faults from user mode only, which unprivileged callers
/// need when `vm.unprivileged_userfaultfd` is 0. Async write-protect never calls the
/// handler, so kernel-mode writes are tracked all the same.
pub const UFFD_USER_MODE_ONLY: i32 = 1;

/// Write-protect also applies to pages not populated yet (`pte_none`).
pub const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
/// Write faults on protected pages are resolved by the kernel, which only clears the
/// page's write-protect bit; `PAGEMAP_SCAN` reports such pages as written.
pub const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;

/// `UFFDIO_REGISTER` mode: write-protect tracking.
pub const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
/// `UFFDIO_WRITEPROTECT` mode: protect (without it: unprotect).
pub const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;

/// `struct uffdio_api`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UffdioApi {
    /// [`UFFD_API`].
    pub api: u64,
    /// Features asked for; on return, all the kernel supports.
    pub features: u64,
    /// Out: the ioctls available.
    pub ioctls: u64,
}

/// `struct uffdio_range`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UffdioRange {
    /// Page-aligned start.
    pub start: u64,
    /// Length, a multiple of the page size.
    pub len: u64,
}

/// `struct uffdio_register`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UffdioRegister {
    /// The range to register.
    pub range: UffdioRange,
    /// `UFFDIO_REGISTER_MODE_*`.
    pub mode: u64,
    /// Out: the ioctls available on the range.
    pub ioctls: u64,
}

/// `struct uffdio_writeprotect`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UffdioWriteprotect {
    /// The range to (un)protect.
    pub range: UffdioRange,
    /// `UFFDIO_WRITEPROTECT_MODE_*`.
    pub mode: u64,
}

const fn iowr(ty: u32, nr: u32, size: usize) -> u64 {
    // _IOC(_IOC_READ | _IOC_WRITE, type, nr, size)
    ((3u32 << 30) | ((size as u32) << 16) | (ty << 8) | nr) as u64
}

/// `UFFDIO_API`: `_IOWR(0xAA, 0x3F, struct uffdio_api)`.
pub const UFFDIO_API: u64 = iowr(0xaa, 0x3f, size_of::<UffdioApi>());
/// `UFFDIO_REGISTER`: `_IOWR(0xAA, 0x00, struct uffdio_register)`.
pub const UFFDIO_REGISTER: u64 = iowr(0xaa, 0x00, size_of::<UffdioRegister>());
/// `UFFDIO_WRITEPROTECT`: `_IOWR(0xAA, 0x06, struct uffdio_writeprotect)`.
pub const UFFDIO_WRITEPROTECT: u64 = iowr(0xaa, 0x06, size_of::<UffdioWriteprotect>());

/// Page category: written since it was last write-protected (or never protected).
pub const PAGE_IS_WRITTEN: u64 = 1 << 1;
/// Page category: a file page (or shared memory).
pub const PAGE_IS_FILE: u64 = 1 << 2;
/// Page category: present in RAM.
pub const PAGE_IS_PRESENT: u64 = 1 << 3;
/// Page category: swapped out.
pub const PAGE_IS_SWAPPED: u64 = 1 << 4;
/// Page category: the shared zero page, mapped where a process read memory it never
/// wrote (a debugger's or `gcore`'s reads included).
pub const PAGE_IS_PFNZERO: u64 = 1 << 5;
/// `PAGEMAP_SCAN` flag: write-protect the pages that matched.
pub const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
/// `PAGEMAP_SCAN` flag: fail with `EPERM` on a mapping not registered for async
/// write-protect.
pub const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;

/// `struct pm_scan_arg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PmScanArg {
    /// `size_of::<PmScanArg>()`.
    pub size: u64,
    /// `PM_SCAN_*`.
    pub flags: u64,
    /// First address of the range.
    pub start: u64,
    /// One past its last address.
    pub end: u64,
    /// Out: where the walk stopped.
    pub walk_end: u64,
    /// Address of the output `PageRegion` array.
    pub vec: u64,
    /// Its length.
    pub vec_len: u64,
    /// Most pages to report (0: no limit).
    pub max_pages: u64,
    /// Categories that match when clear.
    pub category_inverted: u64,
    /// Every one of these must match.
    pub category_mask: u64,
    /// At least one of these must match.
    pub category_anyof_mask: u64,
    /// Categories reported in each region.
    pub return_mask: u64,
}

/// `struct page_region`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageRegion {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `PAGE_IS_*` bits of the region.
    pub categories: u64,
}

/// `PAGEMAP_SCAN`: `_IOWR('f', 16, struct pm_scan_arg)`.
pub const PAGEMAP_SCAN: u64 = iowr(b'f' as u32, 16, size_of::<PmScanArg>());

const _: () = assert!(size_of::<UffdioApi>() == 24);
const _: () = assert!(size_of::<UffdioRegister>() == 32);
const _: () = assert!(size_of::<UffdioWriteprotect>() == 24);
const _: () = assert!(size_of::<PmScanArg>() == 96);
const _: () = assert!(size_of::<PageRegion>() == 24);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel() {
        assert_eq!(UFFDIO_API, 0xc018_aa3f);
        assert_eq!(UFFDIO_REGISTER, 0xc020_aa00);
        assert_eq!(UFFDIO_WRITEPROTECT, 0xc018_aa06);
        assert_eq!(PAGEMAP_SCAN, 0xc060_6610);
    }
}
