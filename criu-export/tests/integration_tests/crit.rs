//! `crit` decodes each image `export_criu` writes, and encodes it back to the same bytes.

use std::fs;
use std::path::Path;
use std::process::Command;

use criu_export::export_criu;
use sdt_test_harness::Skip;

use crate::fake;

/// CRIU's own decoder reads every image, and encodes it back to the same bytes.
fn crit_decodes_and_reencodes_every_image() -> Result<(), Skip> {
    if Command::new("crit").arg("--help").output().is_err() {
        return Err(Skip::new("crit", "crit is not installed", "apt-get install criu"));
    }
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("img");
    let report = export_criu(&fake::sample(), &dir).unwrap();
    for (name, bytes) in &report.images {
        let path = dir.join(name);
        if name.starts_with("pages-") {
            assert_eq!(*bytes, report.pages * 4096);
            continue;
        }
        let json = parent.path().join(format!("{name}.json"));
        let again = parent.path().join(format!("{name}.again"));
        let crit = |args: &[&Path]| {
            let out = Command::new("crit").args(args).output().unwrap();
            assert!(out.status.success(), "crit {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        crit(&["decode".as_ref(), "-i".as_ref(), &path, "-o".as_ref(), &json]);
        crit(&["encode".as_ref(), "-i".as_ref(), &json, "-o".as_ref(), &again]);
        assert_eq!(fs::read(&again).unwrap(), fs::read(&path).unwrap(), "{name} re-encoded differs");
    }
    let pstree = fs::read_to_string(parent.path().join("pstree.img.json")).unwrap();
    assert!(pstree.contains(r#""threads": [100, 101, 102]"#), "{pstree}");
    Ok(())
}

sdt_test_harness::tests![crit_decodes_and_reencodes_every_image];
