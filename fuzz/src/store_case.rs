//! A whole store built from a fuzzer's description and turned against its reader: see
//! [`run`].

mod build;
mod check;
mod edit;
mod resolve;
pub mod spec;

use std::path::Path;

pub use spec::Case;

/// Builds the store `case` describes in a new directory, through the store's own writing
/// API (raw and compacted snapshots, hostile metadata, files of every kind for mappings
/// to name), edits it as `case` says, then reads every snapshot back and exports each as
/// a core file and as CRIU images, panicking on anything a hostile store must not cause:
/// a panic, an error of a kind not documented for it, an output out of proportion to what
/// the store holds, a file left or created anywhere else than asked (in the case's
/// directory, or in the working directory, where a relative path taken from the store
/// would land).
pub fn run(case: &Case) {
    let cwd = entries(Path::new("."));
    let root = tempfile::tempdir().unwrap();
    let (files_dir, store_dir, out_dir) =
        (root.path().join("files"), root.path().join("store"), root.path().join("out"));
    for dir in [&files_dir, &out_dir] {
        std::fs::create_dir(dir).unwrap();
    }
    let files = resolve::Files::create(&files_dir, &case.files);
    let id = build::build(case, &store_dir, &files);
    edit::edit(case, &store_dir.join("runs").join(id.to_string()), &files);
    check::check(&store_dir, &out_dir);

    // (`outside-files` is the edits' own: a kept folder replaced by a link to it.)
    let planted = |name: &String| name != "outside-files";
    assert_eq!(
        entries(root.path()).into_iter().filter(planted).collect::<Vec<_>>(),
        ["files", "out", "store"]
    );
    assert_eq!(entries(&store_dir), ["latest", "runs"]);
    assert_eq!(entries(&store_dir.join("runs")), [id.to_string()]);
    for name in &entries(&out_dir) {
        assert!(
            name == "cores" || name.starts_with("criu-") && !name.contains(".tmp"),
            "left in out/: {name:?}"
        );
    }
    for name in entries(&out_dir.join("cores")) {
        assert!(name.ends_with(".core") && !name.starts_with('.'), "left in out/cores: {name:?}");
    }
    assert_eq!(entries(Path::new(".")), cwd, "the working directory changed");
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
