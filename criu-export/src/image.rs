//! CRIU's image files: their names, their magic numbers and how entries are framed.
//!
//! ```text
//! inventory.img       INVENTORY_MAGIC                 then entries
//! every other image   IMG_COMMON_MAGIC, KIND_MAGIC    then entries
//! pages-<id>.img      no magic: raw pages, 4096 bytes each, in pagemap order
//! pagemap-shmem-<id>  as a pagemap (the same magic), by offset in the object
//! memfd.img           IMG_COMMON_MAGIC, MEMFD_INODE_MAGIC  then entries
//!
//! entry               u32 size (little-endian), then `size` bytes of protobuf
//! ```
//!
//! The magics are CRIU's (`criu/include/magic.h`); the file names and which magic goes
//! with which file are CRIU's table of image kinds (`criu/image-desc.c`). Images written
//! here are version 1.1 (`CRTOOLS_IMAGES_V1_1`): every image but the inventory starts with
//! the common magic.

use prost::Message;

/// `CRTOOLS_IMAGES_V1_1`: the image version whose images carry the common magic.
pub const IMAGES_V1_1: u32 = 2;

/// `IMG_COMMON_MAGIC`: first word of every image except the inventory and raw images.
pub const IMG_COMMON_MAGIC: u32 = 0x5456_4319;
/// `INVENTORY_MAGIC`.
pub const INVENTORY_MAGIC: u32 = 0x5831_3116;
/// `PSTREE_MAGIC`.
pub const PSTREE_MAGIC: u32 = 0x5027_3030;
/// `FDINFO_MAGIC`.
pub const FDINFO_MAGIC: u32 = 0x5621_3732;
/// `PAGEMAP_MAGIC`.
pub const PAGEMAP_MAGIC: u32 = 0x5608_4025;
/// `CORE_MAGIC`.
pub const CORE_MAGIC: u32 = 0x5505_3847;
/// `IDS_MAGIC`.
pub const IDS_MAGIC: u32 = 0x5443_2030;
/// `FS_MAGIC`.
pub const FS_MAGIC: u32 = 0x5140_3912;
/// `MM_MAGIC`.
pub const MM_MAGIC: u32 = 0x5749_2820;
/// `FILES_MAGIC`.
pub const FILES_MAGIC: u32 = 0x5630_3138;
/// `MEMFD_INODE_MAGIC`.
pub const MEMFD_INODE_MAGIC: u32 = 0x4845_3499;

/// The kinds of image this crate writes, with what names the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// `inventory.img`: image version and the ids of the restoring side's own objects.
    Inventory,
    /// `pstree.img`: the process tree (here one process) and its threads.
    Pstree,
    /// `core-<tid>.img`: one thread's registers and state; the leader's also the task's.
    Core(u32),
    /// `ids-<pid>.img`: which shared objects (memory, files, fs, namespaces) a task uses.
    Ids(u32),
    /// `mm-<pid>.img`: the memory descriptor and every mapping.
    Mm(u32),
    /// `pagemap-<pid>.img`: which pages `pages-<id>.img` holds.
    Pagemap(u32),
    /// `pagemap-shmem-<shmid>.img`: which pages of a shared memory object (by offset)
    /// `pages-<id>.img` holds.
    ShmemPagemap(u64),
    /// `pages-<id>.img`: page contents, raw.
    Pages(u32),
    /// `files.img`: every file object (regular files, pipes) by id.
    Files,
    /// `fdinfo-<files_id>.img`: which descriptor holds which file object.
    Fdinfo(u32),
    /// `fs-<pid>.img`: working and root directories, umask.
    Fs(u32),
    /// `memfd.img`: the memfds the descriptors and mappings open.
    MemfdInode,
}

impl ImageKind {
    /// The file's name in the image directory, as CRIU spells it.
    pub fn file_name(self) -> String {
        match self {
            ImageKind::Inventory => "inventory.img".into(),
            ImageKind::Pstree => "pstree.img".into(),
            ImageKind::Core(tid) => format!("core-{tid}.img"),
            ImageKind::Ids(pid) => format!("ids-{pid}.img"),
            ImageKind::Mm(pid) => format!("mm-{pid}.img"),
            ImageKind::Pagemap(pid) => format!("pagemap-{pid}.img"),
            ImageKind::ShmemPagemap(shmid) => format!("pagemap-shmem-{shmid}.img"),
            ImageKind::Pages(id) => format!("pages-{id}.img"),
            ImageKind::Files => "files.img".into(),
            ImageKind::Fdinfo(id) => format!("fdinfo-{id}.img"),
            ImageKind::Fs(pid) => format!("fs-{pid}.img"),
            ImageKind::MemfdInode => "memfd.img".into(),
        }
    }

    /// The words the file starts with: none for raw pages, the kind's magic alone for the
    /// inventory, else the common magic then the kind's.
    pub fn head(self) -> &'static [u32] {
        match self {
            ImageKind::Inventory => &[INVENTORY_MAGIC],
            ImageKind::Pstree => &[IMG_COMMON_MAGIC, PSTREE_MAGIC],
            ImageKind::Core(_) => &[IMG_COMMON_MAGIC, CORE_MAGIC],
            ImageKind::Ids(_) => &[IMG_COMMON_MAGIC, IDS_MAGIC],
            ImageKind::Mm(_) => &[IMG_COMMON_MAGIC, MM_MAGIC],
            // (`SHMEM_PAGEMAP_MAGIC` is `PAGEMAP_MAGIC`.)
            ImageKind::Pagemap(_) | ImageKind::ShmemPagemap(_) => &[IMG_COMMON_MAGIC, PAGEMAP_MAGIC],
            ImageKind::Pages(_) => &[],
            ImageKind::Files => &[IMG_COMMON_MAGIC, FILES_MAGIC],
            ImageKind::Fdinfo(_) => &[IMG_COMMON_MAGIC, FDINFO_MAGIC],
            ImageKind::Fs(_) => &[IMG_COMMON_MAGIC, FS_MAGIC],
            ImageKind::MemfdInode => &[IMG_COMMON_MAGIC, MEMFD_INODE_MAGIC],
        }
    }
}

/// One protobuf image, built in memory: its head, then entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// What the image is.
    pub kind: ImageKind,
    /// The file's bytes.
    pub bytes: Vec<u8>,
}

impl Image {
    /// An image of `kind` with its head written and no entries.
    pub fn new(kind: ImageKind) -> Image {
        let bytes = kind.head().iter().flat_map(|m| m.to_le_bytes()).collect();
        Image { kind, bytes }
    }

    /// An image of `kind` holding `entries`, in order.
    pub fn with<'a, M: Message + 'a>(kind: ImageKind, entries: impl IntoIterator<Item = &'a M>) -> Image {
        let mut image = Image::new(kind);
        for e in entries {
            image.push(e);
        }
        image
    }

    /// Appends one entry: its encoded length as a little-endian `u32`, then the message.
    pub fn push(&mut self, entry: &impl Message) {
        let len = entry.encoded_len();
        // No entry of ours comes near 4 GiB: an mm entry is ~100 bytes per mapping.
        let size = u32::try_from(len).expect("a CRIU image entry over 4 GiB");
        self.bytes.extend_from_slice(&size.to_le_bytes());
        entry.encode(&mut self.bytes).expect("a Vec grows as needed");
    }

    /// The file's name in the image directory.
    pub fn file_name(&self) -> String {
        self.kind.file_name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

    #[test]
    fn names_follow_criu() {
        assert_eq!(ImageKind::Core(7).file_name(), "core-7.img");
        assert_eq!(ImageKind::Pagemap(12).file_name(), "pagemap-12.img");
        assert_eq!(ImageKind::Pages(1).file_name(), "pages-1.img");
        assert_eq!(ImageKind::Fdinfo(2).file_name(), "fdinfo-2.img");
        assert_eq!(ImageKind::Inventory.file_name(), "inventory.img");
    }

    #[test]
    fn pstree_entry_framing() {
        let entry = pb::PstreeEntry { pid: 42, ppid: 0, pgid: 42, sid: 300, threads: vec![42, 43] };
        let image = Image::with(ImageKind::Pstree, [&entry]);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x19, 0x43, 0x56, 0x54,             // IMG_COMMON_MAGIC
            0x30, 0x30, 0x27, 0x50,             // PSTREE_MAGIC
            13, 0, 0, 0,                        // entry size
            0x08, 42,                           // 1: pid
            0x10, 0,                            // 2: ppid (required: written when 0)
            0x18, 42,                           // 3: pgid
            0x20, 0xac, 0x02,                   // 4: sid 300, a two-byte varint
            0x28, 42, 0x28, 43,                 // 5: threads, not packed (proto2)
        ];
        assert_eq!(image.bytes, expected);
    }

    #[test]
    fn inventory_has_no_common_magic() {
        let entry = pb::InventoryEntry {
            img_version: IMAGES_V1_1,
            fdinfo_per_id: Some(true),
            root_ids: None,
            ns_per_id: None,
        };
        let image = Image::with(ImageKind::Inventory, [&entry]);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x16, 0x31, 0x31, 0x58,             // INVENTORY_MAGIC, alone
            4, 0, 0, 0,
            0x08, 2,                            // 1: img_version
            0x10, 1,                            // 2: fdinfo_per_id
        ];
        assert_eq!(image.bytes, expected);
    }

    #[test]
    fn entries_follow_each_other_and_pages_have_no_head() {
        let mut image = Image::new(ImageKind::Pagemap(5));
        image.push(&pb::PagemapHead { pages_id: 1 });
        image.push(&pb::PagemapEntry { vaddr: 0x1000, nr_pages: 2, in_parent: None, flags: Some(4) });
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x19, 0x43, 0x56, 0x54, 0x25, 0x40, 0x08, 0x56,
            2, 0, 0, 0, 0x08, 1,
            7, 0, 0, 0, 0x08, 0x80, 0x20, 0x10, 2, 0x20, 4,
        ];
        assert_eq!(image.bytes, expected);
        assert!(Image::new(ImageKind::Pages(1)).bytes.is_empty());
    }
}
