//! SDT's MPI interposition library (`src/sdtmpi.c`, on MPI's profiling interface, with
//! the Fortran bindings of `src/fortran.c`), built for each MPI this machine has, as bytes
//! that `sdt run` loads into an MPI program.
//!
//! ```no_run
//! use sdt_mpi::Mpi;
//!
//! let mpi = Mpi::of_needed(&["libm.so.6", "libmpi.so.40"]).expect("an MPI program");
//! match mpi.library() {
//!     Some(bytes) => println!("{} bytes of library for {}", bytes.len(), mpi.name()),
//!     None => println!("rebuild sdt with {} installed", mpi.package()),
//! }
//! ```
//!
//! # Design constraints
//!
//! - The library runs inside the user's ranks (its rules open `src/sdtmpi.c`); it writes
//!   the layout of `sdt_history::format` and nothing else.
//! - It is built against each MPI's own `mpi.h` (their ABIs differ): a program gets the
//!   build for the MPI it links, told by the `DT_NEEDED` entries of the program and of
//!   the libraries it loads.
//! - This crate does no I/O: `sdt run` puts the bytes in a sealed memfd and hands the
//!   library its three files as inherited descriptors ([`ENV_EVENTS_FD`], …).

#![deny(missing_docs)]
#![deny(unsafe_code)]

/// The descriptor of the rank's `mpi-events` file, in the program's environment.
pub const ENV_EVENTS_FD: &str = "SDT_MPI_EVENTS_FD";
/// The descriptor of the rank's `mpi-comms` file.
pub const ENV_COMMS_FD: &str = "SDT_MPI_COMMS_FD";
/// The descriptor of the rank's `mpi-sites` file.
pub const ENV_SITES_FD: &str = "SDT_MPI_SITES_FD";
/// The descriptor of the job's replay record (`sdt_history::replay`), in a replay.
pub const ENV_REPLAY_FD: &str = "SDT_MPI_REPLAY_FD";
/// In a replay: the number of events after which the rank stops (its first MPI call
/// from there on does not happen; the rank finalizes MPI and exits 0).
pub const ENV_STOP_AFTER: &str = "SDT_MPI_STOP_AFTER";
/// With [`ENV_STOP_AFTER`] (any value): the rank traps for a snapshot where it stops, a
/// breakpoint of SDT's own ([`CUT_CLASS`], [`CUT_ID`], level 0, first arrival).
pub const ENV_STOP_CAPTURE: &str = "SDT_MPI_STOP_CAPTURE";
/// The class of the breakpoint a rank stopped at a cut traps with (users' are 0 and up).
pub const CUT_CLASS: i32 = -1;
/// Its id.
pub const CUT_ID: i32 = -1;
/// (Any value) a rank that ends the job, by `MPI_Abort` or a fatal MPI error, traps for
/// a snapshot first: a breakpoint of SDT's own ([`CUT_CLASS`], [`END_ID`], level 0,
/// first arrival), attrs `sdt=abort,code=N` or `sdt=fatal_error,code=N`. ptrace only:
/// without a tracer the trap would kill the rank.
pub const ENV_END_CAPTURE: &str = "SDT_MPI_END_CAPTURE";
/// The id of the breakpoint a rank ending the job traps with.
pub const END_ID: i32 = -2;

/// An MPI implementation the library is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mpi {
    /// Open MPI (`libmpi.so.40`).
    OpenMpi,
    /// MPICH (`libmpich.so.12`, or its `libmpi.so.12`).
    Mpich,
}

impl Mpi {
    /// Every MPI the library may be built for.
    pub const ALL: [Mpi; 2] = [Mpi::OpenMpi, Mpi::Mpich];

    /// The MPI whose library (as this sdt was built with it) starts with `image`, the
    /// first bytes of a loaded copy: its first segment, which the loader maps unchanged.
    /// `None` for fewer than an ELF header's 64 bytes, or another library.
    pub fn of_image(image: &[u8]) -> Option<Mpi> {
        if image.len() < 64 {
            return None;
        }
        Mpi::ALL
            .into_iter()
            .find(|mpi| mpi.library().and_then(|bytes| bytes.get(..image.len())) == Some(image))
    }

    /// The library's file name, as `sdt gdb` writes it out for gdb.
    pub fn file_name(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "sdtmpi-openmpi.so",
            Mpi::Mpich => "sdtmpi-mpich.so",
        }
    }

    /// The MPI a program links, from its `DT_NEEDED` entries; `None` for a program that
    /// links none.
    pub fn of_needed<S: AsRef<str>>(needed: &[S]) -> Option<Mpi> {
        needed.iter().find_map(|name| match name.as_ref() {
            "libmpi.so.40" => Some(Mpi::OpenMpi),
            "libmpich.so.12" | "libmpi.so.12" => Some(Mpi::Mpich),
            _ => None,
        })
    }

    /// The library built for this MPI; `None` where it was not found when sdt was built.
    pub fn library(self) -> Option<&'static [u8]> {
        let bytes: &'static [u8] = match self {
            Mpi::OpenMpi => include_bytes!(concat!(env!("OUT_DIR"), "/sdtmpi-openmpi.so")),
            Mpi::Mpich => include_bytes!(concat!(env!("OUT_DIR"), "/sdtmpi-mpich.so")),
        };
        (!bytes.is_empty()).then_some(bytes)
    }

    /// Its name for people.
    pub fn name(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "Open MPI",
            Mpi::Mpich => "MPICH",
        }
    }

    /// The Debian package whose compiler wrapper builds the library for it.
    pub fn package(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "libopenmpi-dev",
            Mpi::Mpich => "libmpich-dev",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_the_mpi_from_the_needed_libraries() {
        assert_eq!(Mpi::of_needed(&["libc.so.6", "libmpi.so.40"]), Some(Mpi::OpenMpi));
        assert_eq!(Mpi::of_needed(&["libmpich.so.12"]), Some(Mpi::Mpich));
        assert_eq!(Mpi::of_needed(&["libmpi.so.12"]), Some(Mpi::Mpich));
        assert_eq!(Mpi::of_needed(&["libc.so.6", "libmpi.so.41"]), None);
        assert_eq!(Mpi::of_needed::<&str>(&[]), None);
    }

    #[test]
    fn libraries_are_shared_objects() {
        for mpi in Mpi::ALL {
            if let Some(bytes) = mpi.library() {
                assert_eq!(&bytes[..4], b"\x7fELF", "{}", mpi.name());
            }
        }
    }

    #[test]
    fn a_loaded_library_is_told_by_its_first_bytes() {
        for mpi in Mpi::ALL {
            let Some(bytes) = mpi.library() else { continue };
            assert_eq!(Mpi::of_image(&bytes[..4096]), Some(mpi));
            assert_eq!(Mpi::of_image(&bytes[..63]), None);
            let mut other = bytes[..4096].to_vec();
            other[100] ^= 1;
            assert_eq!(Mpi::of_image(&other), None);
        }
    }
}
