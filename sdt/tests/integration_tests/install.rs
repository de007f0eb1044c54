//! SDT installed like a system tool (`scripts/install` into a prefix, `scripts/deb`), and
//! the bank example built against the installed copy the way users build: make with
//! pkg-config, CMake's `find_package(SDT)`, Meson's `dependency('sdt')`, with no path
//! into the source tree; each build captured by the installed `sdt`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sdt_test_harness::Skip;

use crate::harness::{describe, run, stdout, workspace};

/// A prefix `scripts/install --no-build` filled, once per test run.
fn installed() -> &'static Path {
    static PREFIX: OnceLock<tempfile::TempDir> = OnceLock::new();
    PREFIX
        .get_or_init(|| {
            let prefix = tempfile::tempdir().unwrap();
            let out = run(Command::new(workspace().join("scripts/install"))
                .arg("--no-build")
                .env("PREFIX", prefix.path())
                .env_remove("DESTDIR"));
            assert!(out.status.success(), "scripts/install: {}", describe(&out));
            prefix
        })
        .path()
}

/// The bank example's folder, copied out of the source tree.
fn bank_sources() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for file in ["bank.c", "capture.toml", "Makefile", "CMakeLists.txt", "meson.build"] {
        std::fs::copy(workspace().join("examples/bank").join(file), dir.path().join(file)).unwrap();
    }
    dir
}

/// A command with the installed SDT found as users point to a prefix of their own.
fn with_prefix(program: &str, prefix: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .env("CMAKE_PREFIX_PATH", prefix)
        .env("LD_LIBRARY_PATH", prefix.join("lib"));
    cmd
}

/// Builds with `steps` in `dir`, then captures `exe` with the installed `sdt` and checks
/// the snapshots its capture config asks for.
fn build_and_capture(prefix: &Path, dir: &Path, steps: &[&[&str]], exe: &Path) {
    for step in steps {
        let out = run(with_prefix(step[0], prefix).args(&step[1..]).current_dir(dir));
        assert!(out.status.success(), "{step:?}: {}", describe(&out));
    }
    let store = dir.join("store");
    let out = run(with_prefix(prefix.join("bin/sdt").to_str().unwrap(), prefix)
        .args(["run", "-q", "--store"])
        .arg(&store)
        .args(["--config", "capture.toml", "--"])
        .arg(exe)
        .arg("2")
        .current_dir(dir));
    assert!(matches!(out.status.code(), Some(0 | 1)), "sdt run: {}", describe(&out));
    let ls = run(Command::new(prefix.join("bin/sdt")).args(["ls", "--json", "--store"]).arg(&store));
    let snapshots: Vec<serde_json::Value> = serde_json::from_slice(&ls.stdout).expect("ls --json");
    assert_eq!(snapshots.len(), 10, "{}", describe(&ls));
}

/// `tool --version` runs, or the [`Skip`] saying how to install it.
fn needs(tool: &'static str, package: &'static str) -> Result<(), Skip> {
    match Command::new(tool).arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => Err(Skip::new(tool, format!("{tool} is not installed"), package)),
    }
}

fn install_puts_every_file_under_the_prefix() {
    let prefix = installed();
    for file in [
        "bin/sdt",
        "include/sdt.h",
        "lib/libsdt.a",
        "lib/libsdt.so",
        "lib/libsdt.so.0",
        "lib/pkgconfig/sdt.pc",
        "lib/cmake/SDT/SDTConfig.cmake",
        "lib/cmake/SDT/SDTConfigVersion.cmake",
        "share/man/man1/sdt.1",
        "share/man/man1/sdt-run.1",
        "share/man/man1/sdt-export-core.1",
        "share/bash-completion/completions/sdt",
        "share/zsh/site-functions/_sdt",
        "share/fish/vendor_completions.d/sdt.fish",
    ] {
        assert!(prefix.join(file).exists(), "{file} not installed");
    }
    let soname = run(Command::new("readelf").arg("-d").arg(prefix.join("lib/libsdt.so")));
    assert!(stdout(&soname).contains("Library soname: [libsdt.so.0]"), "{}", describe(&soname));
    let flags = run(with_prefix("pkg-config", prefix).args(["--cflags", "--libs", "sdt"]));
    let expected = format!("-I{}/include -L{}/lib -lsdt", prefix.display(), prefix.display());
    assert_eq!(stdout(&flags).split_whitespace().collect::<Vec<_>>().join(" "), expected);
    let man = std::fs::read_to_string(prefix.join("share/man/man1/sdt-run.1")).unwrap();
    assert!(man.contains(r"\fB\-\-config\fR"), "sdt-run.1 documents the options");
    let version = run(Command::new(prefix.join("bin/sdt")).arg("--version"));
    assert!(stdout(&version).contains("store format"), "{}", describe(&version));
}

/// The example built with make and pkg-config (linked to `libsdt.so`, no rpath) is
/// captured with `LD_LIBRARY_PATH` set; without it, the loader stops it before its first
/// breakpoint, and `sdt run` says which variable to set, to what.
fn make_builds_the_example_against_the_installed_sdt() -> Result<(), Skip> {
    needs("pkg-config", "apt-get install pkg-config")?;
    let dir = bank_sources();
    let prefix = installed();
    build_and_capture(prefix, dir.path(), &[&["make"]], &dir.path().join("bank"));

    let out = run(Command::new(prefix.join("bin/sdt"))
        .args(["run", "--store"])
        .arg(dir.path().join("store"))
        .args(["--", "./bank", "2"])
        .current_dir(dir.path())
        .env_remove("LD_LIBRARY_PATH"));
    assert_eq!(out.status.code(), Some(127), "{}", describe(&out));
    let hint = format!(
        "exited 127 before its first breakpoint, which is what the dynamic loader does when it cannot find a \
         library: it needs libsdt.so.0 (the loader's message is above). Run it with LD_LIBRARY_PATH={}/lib",
        prefix.display()
    );
    assert!(crate::harness::stderr(&out).contains(&hint), "{}", describe(&out));
    Ok(())
}

fn cmake_finds_the_installed_package() -> Result<(), Skip> {
    needs("cmake", "apt-get install cmake")?;
    let dir = bank_sources();
    let steps: [&[&str]; 2] = [&["cmake", "-S", ".", "-B", "build"], &["cmake", "--build", "build"]];
    build_and_capture(installed(), dir.path(), &steps, &dir.path().join("build/bank"));
    Ok(())
}

fn meson_finds_the_installed_package() -> Result<(), Skip> {
    needs("meson", "apt-get install meson ninja-build")?;
    needs("ninja", "apt-get install ninja-build")?;
    let dir = bank_sources();
    let steps: [&[&str]; 2] = [&["meson", "setup", "build"], &["meson", "compile", "-C", "build"]];
    build_and_capture(installed(), dir.path(), &steps, &dir.path().join("build/bank"));
    Ok(())
}

fn debian_packages_hold_the_installed_tree() -> Result<(), Skip> {
    needs("dpkg-deb", "apt-get install dpkg")?;
    let out = run(Command::new(workspace().join("scripts/deb")).arg("--no-build"));
    assert!(out.status.success(), "scripts/deb: {}", describe(&out));
    let debs: Vec<PathBuf> = stdout(&out).split_whitespace().skip(1).map(|p| workspace().join(p)).collect();
    assert_eq!(debs.len(), 2, "{}", describe(&out));
    let root = tempfile::tempdir().unwrap();
    for deb in &debs {
        let out = run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(root.path()));
        assert!(out.status.success(), "{}: {}", deb.display(), describe(&out));
    }
    for file in ["usr/bin/sdt", "usr/include/sdt.h", "usr/lib/libsdt.so.0", "usr/lib/pkgconfig/sdt.pc"] {
        assert!(root.path().join(file).exists(), "{file} not in the package");
    }
    assert!(root.path().join("usr/src/sdt-0.1.0/dkms.conf").exists(), "sdt-dkms holds the module's sources");
    let pc = std::fs::read_to_string(root.path().join("usr/lib/pkgconfig/sdt.pc")).unwrap();
    assert!(pc.starts_with("prefix=/usr\n"), "{pc}");
    let doctor = run(Command::new(root.path().join("usr/bin/sdt")).arg("doctor"));
    assert!(doctor.status.success(), "the packaged sdt's doctor: {}", describe(&doctor));
    Ok(())
}

sdt_test_harness::tests![
    install_puts_every_file_under_the_prefix,
    make_builds_the_example_against_the_installed_sdt,
    cmake_finds_the_installed_package,
    meson_finds_the_installed_package,
    debian_packages_hold_the_installed_tree,
];
