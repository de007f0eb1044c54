//! Extra environment variables for a resumed program (`sdt restore SNAP -- NAME=VALUE`).
//!
//! A running program's environment is the array its C library's `environ` points at:
//! `getenv` reads it, and the block the kernel wrote at `execve` (what
//! `/proc/PID/environ` shows) is only where it started. The array is rebuilt with the
//! variables added or replaced, in a new anonymous mapping of the restored process, and
//! `environ` is pointed at it; the snapshot's own array and strings stay as they were.

use sdt_store::{PAGE_SIZE, Snapshot};

use crate::Error;
use crate::remote::Remote;

/// glibc's names for the pointer (one object; a program that uses `environ` directly
/// may hold a copy of its own, which the dynamic linker makes the live one).
const ENVIRON_SYMBOLS: [&str; 3] = ["__environ", "environ", "_environ"];
/// Most entries read from the snapshot's array before giving up on it.
const MAX_ENTRIES: usize = 1 << 16;
/// Longest entry read from the snapshot.
const MAX_ENTRY_BYTES: usize = 1 << 20;

/// Sets `vars` (name, value), in order, in the environment of the process restored from
/// `snap`, replacing variables of the same name. Its memory must be in place.
pub(crate) fn set(remote: &mut Remote, snap: &Snapshot, vars: &[(String, String)]) -> Result<(), Error> {
    if vars.is_empty() {
        return Ok(());
    }
    let not_found = || Error::Unsupported {
        what: "extra environment variables: the program's `environ` was not found among its \
               libraries' symbols"
            .into(),
    };
    let mut pointers: Vec<u64> = Vec::new();
    let open = sdt_target::checked_files(snap);
    for name in ENVIRON_SYMBOLS {
        if let Some(addr) = sdt_target::symbol(snap.meta(), name, &open).filter(|a| !pointers.contains(a)) {
            pointers.push(addr);
        }
    }
    let first = *pointers.first().ok_or_else(not_found)?;
    let array = read_word(snap, first).ok_or_else(not_found)?;
    let entries = merged(read_entries(snap, array), vars);

    // The new array, then its strings, in one mapping.
    let table_len = (entries.len() + 1) * 8;
    let strings_len: usize = entries.iter().map(|e| e.len() + 1).sum();
    let len = (table_len + strings_len).next_multiple_of(PAGE_SIZE as usize);
    let at = remote.call(
        "mapping the extra environment",
        libc::SYS_mmap,
        &[
            0,
            len as u64,
            (libc::PROT_READ | libc::PROT_WRITE) as u64,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64,
            u64::MAX,
            0,
        ],
    )?;
    let mut table = Vec::with_capacity(table_len);
    let mut strings = Vec::with_capacity(strings_len);
    for entry in &entries {
        table.extend_from_slice(&(at + table_len as u64 + strings.len() as u64).to_le_bytes());
        strings.extend_from_slice(entry);
        strings.push(0);
    }
    table.extend_from_slice(&0u64.to_le_bytes());
    table.extend_from_slice(&strings);
    sdt_sys::memory::write(remote.leader, at, &table).map_err(Error::Sys)?;
    for pointer in pointers {
        sdt_sys::memory::write(remote.leader, pointer, &at.to_le_bytes()).map_err(Error::Sys)?;
    }
    Ok(())
}

/// `entries` (`NAME=VALUE` bytes) without those `vars` names, then `vars`.
fn merged(entries: Vec<Vec<u8>>, vars: &[(String, String)]) -> Vec<Vec<u8>> {
    let name = |entry: &[u8]| entry.split(|&b| b == b'=').next().unwrap_or_default().to_vec();
    let mut out: Vec<Vec<u8>> =
        entries.into_iter().filter(|e| !vars.iter().any(|(n, _)| n.as_bytes() == name(e))).collect();
    out.extend(vars.iter().map(|(n, v)| format!("{n}={v}").into_bytes()));
    out
}

/// The entries of the NULL-terminated array of C strings at `array` in the snapshot;
/// an unreadable entry ends it.
fn read_entries(snap: &Snapshot, array: u64) -> Vec<Vec<u8>> {
    let mut entries = Vec::new();
    if array == 0 {
        return entries;
    }
    for i in 0..MAX_ENTRIES as u64 {
        match read_word(snap, array + 8 * i) {
            Some(0) | None => break,
            Some(ptr) => match read_c_string(snap, ptr) {
                Some(entry) => entries.push(entry),
                None => break,
            },
        }
    }
    entries
}

fn read_word(snap: &Snapshot, addr: u64) -> Option<u64> {
    let mut word = [0u8; 8];
    snap.read(addr, &mut word).ok().map(|()| u64::from_le_bytes(word))
}

/// The NUL-terminated string at `addr`, read page by page (it may end just before an
/// unmapped page).
fn read_c_string(snap: &Snapshot, mut addr: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut chunk = vec![0u8; PAGE_SIZE as usize];
    while out.len() < MAX_ENTRY_BYTES {
        let len = (PAGE_SIZE - addr % PAGE_SIZE) as usize;
        snap.read(addr, &mut chunk[..len]).ok()?;
        match chunk[..len].iter().position(|&b| b == 0) {
            Some(end) => {
                out.extend_from_slice(&chunk[..end]);
                return Some(out);
            }
            None => out.extend_from_slice(&chunk[..len]),
        }
        addr += len as u64;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::merged;

    #[test]
    fn variables_are_replaced_or_added_in_order() {
        let entries = vec![b"HOME=/root".to_vec(), b"KEEP=1".to_vec(), b"EMPTY=".to_vec(), b"ODD".to_vec()];
        let vars = [("HOME".to_owned(), "/tmp".to_owned()), ("NEW".to_owned(), "a=b".to_owned())];
        let out: Vec<String> =
            merged(entries, &vars).into_iter().map(|e| String::from_utf8(e).unwrap()).collect();
        assert_eq!(out, ["KEEP=1", "EMPTY=", "ODD", "HOME=/tmp", "NEW=a=b"]);
    }
}
