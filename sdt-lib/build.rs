//! Gives `libsdt.so` its soname, `libsdt.so.MAJOR`, so that programs linked against an
//! installed copy find it again after an upgrade that keeps the ABI.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets it");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsdt.so.{major}");
}
