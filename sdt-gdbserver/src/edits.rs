//! Values written in gdb (`set var`, `set $rax = …`) over the current snapshot: kept
//! here, served back on reads, never written into the snapshot, which the store keeps
//! as captured. `monitor commit` stores the snapshot with them as a new one.

use std::collections::BTreeMap;

use sdt_store::{PAGE_SIZE, SnapshotMeta, SnapshotSource};

use crate::regs::Registers;

/// The edits of one snapshot.
#[derive(Debug, Default)]
pub struct Edits {
    /// Pages written to, whole, by address.
    pages: BTreeMap<u64, Vec<u8>>,
    /// Registers written, by thread: every register, as a `g` reply holds them.
    regs: BTreeMap<i32, Vec<u8>>,
}

impl Edits {
    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty() && self.regs.is_empty()
    }

    /// Fills `buf` with `snap`'s memory at `addr`, as edited; false if some of it cannot
    /// be read.
    pub fn read(&self, snap: &impl SnapshotSource, addr: u64, buf: &mut [u8]) -> bool {
        if self.pages.is_empty() {
            return snap.read(addr, buf).is_ok();
        }
        let mut done = 0;
        while done < buf.len() {
            let Some(at) = addr.checked_add(done as u64) else { return false };
            let (page, from) = (at - at % PAGE_SIZE, (at % PAGE_SIZE) as usize);
            let n = (PAGE_SIZE as usize - from).min(buf.len() - done);
            let out = &mut buf[done..done + n];
            match self.pages.get(&page) {
                Some(edited) => out.copy_from_slice(&edited[from..from + n]),
                None if snap.read(at, out).is_ok() => {}
                None => return false,
            }
            done += n;
        }
        true
    }

    /// Writes `bytes` at `addr`; false, and nothing written, if the snapshot cannot read
    /// every page they fall in (unmapped, or not stored).
    pub fn write(&mut self, snap: &impl SnapshotSource, addr: u64, bytes: &[u8]) -> bool {
        let Some(end) = addr.checked_add(bytes.len() as u64) else { return false };
        let first = addr - addr % PAGE_SIZE;
        let mut pages = Vec::new();
        for page in (first..end).step_by(PAGE_SIZE as usize) {
            let mut data = vec![0; PAGE_SIZE as usize];
            if !self.read(snap, page, &mut data) {
                return false;
            }
            pages.push((page, data));
        }
        for (page, mut data) in pages {
            let from = addr.max(page);
            let to = end.min(page + PAGE_SIZE);
            let src = &bytes[(from - addr) as usize..(to - addr) as usize];
            data[(from - page) as usize..(to - page) as usize].copy_from_slice(src);
            // Written back as captured (gdb putting back what a call changed): no edit.
            let mut captured = vec![0; PAGE_SIZE as usize];
            if snap.read(page, &mut captured).is_ok() && captured == data {
                self.pages.remove(&page);
            } else {
                self.pages.insert(page, data);
            }
        }
        true
    }

    /// Puts back, as `snap` has them, the bytes written in `range`: memory the program
    /// does not use (below a thread's stack), where gdb sets up a function call.
    pub fn forget(&mut self, snap: &impl SnapshotSource, range: std::ops::Range<u64>) {
        let written: Vec<u64> =
            self.pages.range(range.start - range.start % PAGE_SIZE..range.end).map(|(&p, _)| p).collect();
        for page in written {
            let mut captured = vec![0; PAGE_SIZE as usize];
            if snap.read(page, &mut captured).is_err() {
                continue;
            }
            let data = self.pages.get_mut(&page).expect("listed above");
            let (from, to) = (range.start.max(page) - page, range.end.min(page + PAGE_SIZE) - page);
            data[from as usize..to as usize].copy_from_slice(&captured[from as usize..to as usize]);
            if *data == captured {
                self.pages.remove(&page);
            }
        }
    }

    /// The registers written for thread `tid`, if any were.
    pub fn regs(&self, tid: i32) -> Option<&[u8]> {
        self.regs.get(&tid).map(Vec::as_slice)
    }

    /// Sets every register of thread `tid`, as a `g` packet holds them; none counts as
    /// written when they are the snapshot's (`captured`).
    pub fn set_regs(&mut self, tid: i32, values: Vec<u8>, captured: &[u8]) {
        if values == captured {
            self.regs.remove(&tid);
        } else {
            self.regs.insert(tid, values);
        }
    }

    /// `snap`'s metadata with the registers written.
    pub fn meta(&self, snap: &impl SnapshotSource, layout: &Registers) -> SnapshotMeta {
        let mut meta = snap.meta().clone();
        for thread in &mut meta.threads {
            if let Some(values) = self.regs.get(&thread.tid) {
                layout.apply(values, thread);
            }
        }
        meta
    }

    /// Every page of `snap` the store holds, and every page written, as edited, in
    /// address order (all in memory: the new snapshot is written whole).
    pub fn pages(&self, snap: &impl SnapshotSource) -> sdt_store::Result<Vec<(u64, Vec<u8>)>> {
        let mut pages = Vec::new();
        let mut edited = self.pages.iter().peekable();
        for range in snap.stored_ranges() {
            for page in (range.start..range.end).step_by(PAGE_SIZE as usize) {
                while let Some((&at, data)) = edited.next_if(|(at, _)| **at < page) {
                    pages.push((at, data.clone()));
                }
                match edited.next_if(|(at, _)| **at == page) {
                    Some((_, data)) => pages.push((page, data.clone())),
                    None => {
                        let mut data = vec![0; PAGE_SIZE as usize];
                        snap.read(page, &mut data)?;
                        pages.push((page, data));
                    }
                }
            }
        }
        pages.extend(edited.map(|(&at, data)| (at, data.clone())));
        Ok(pages)
    }
}
