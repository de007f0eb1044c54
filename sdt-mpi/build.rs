//! Compiles `src/sdtmpi.c` and `src/fortran.c` as a shared object with each MPI's
//! compiler wrapper found (`mpicc.openmpi`, `mpicc.mpich`) into `OUT_DIR/sdtmpi-<mpi>.so`. A missing MPI leaves
//! an empty file and a warning: `sdt run` then refuses that MPI's programs, naming the
//! package to install, until a build after the MPI is installed.

use std::path::PathBuf;
use std::process::Command;

/// (file stem, compiler wrapper, Debian package).
const MPIS: [(&str, &str, &str); 2] =
    [("openmpi", "mpicc.openmpi", "libopenmpi-dev"), ("mpich", "mpicc.mpich", "libmpich-dev")];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo::rerun-if-changed=src/sdtmpi.c");
    println!("cargo::rerun-if-changed=src/fortran.c");
    println!("cargo::rerun-if-changed=../sdt-lib/include/sdt.h");
    println!("cargo::rerun-if-env-changed=PATH");
    for (stem, cc, package) in MPIS {
        let so = out.join(format!("sdtmpi-{stem}.so"));
        let built = Command::new(cc)
            .args(["-O2", "-g", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"])
            // Loaded only by LD_PRELOAD, at the program's start: its thread-local variables can
            // live in the static TLS block, read without a call to __tls_get_addr.
            .args(["-ftls-model=initial-exec", "-fvisibility=default", "-I", "../sdt-lib/include", "-o"])
            .arg(&so)
            .args(["src/sdtmpi.c", "src/fortran.c"])
            // The Fortran bindings call the C wrappers beside them, not whatever the
            // program's symbol lookup would find first.
            .args(["-Wl,-Bsymbolic-functions", "-ldl", "-lpthread"])
            .output();
        match built {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!("{cc} failed to build the library:\n{}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => {
                println!(
                    "cargo::warning=no MPI history for {stem} programs: {cc} not found ({e}); install {package}"
                );
                std::fs::write(&so, b"").expect("writing OUT_DIR");
                // Built again once the wrapper is installed into a directory on PATH.
                let path = std::env::var_os("PATH").unwrap_or_default();
                for dir in std::env::split_paths(&path).filter(|d| d.is_dir()) {
                    println!("cargo::rerun-if-changed={}", dir.display());
                }
            }
        }
    }
}
