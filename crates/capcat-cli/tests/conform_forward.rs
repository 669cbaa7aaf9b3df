//! `capcat conform` runs the conformance kit beside the `capcat` binary
//! with its arguments unchanged, and its exit status is the kit's; without
//! a kit it says how to build one. Run on a copy of `capcat` in a
//! directory of its own, next to a stand-in kit (a shell script), so the
//! test does not depend on what else the build put in target/.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn capcat_in(dir: &Path) -> std::path::PathBuf {
    let copy = dir.join("capcat");
    std::fs::copy(env!("CARGO_BIN_EXE_capcat"), &copy).unwrap();
    copy
}

fn stand_in_kit(dir: &Path, exit: u8) {
    let kit = dir.join("capcat-conform");
    std::fs::write(
        &kit,
        format!("#!/bin/sh\nfor a in \"$@\"; do echo \"arg:$a\"; done\nexit {exit}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&kit, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn the_kit_beside_capcat_gets_the_arguments_unchanged_and_decides_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let capcat = capcat_in(dir.path());
    stand_in_kit(dir.path(), 0);
    let out = Command::new(&capcat)
        .args([
            "conform",
            "--driver",
            "python3 my driver.py",
            "--case",
            "walk/3",
        ])
        .env("PATH", "")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "arg:--driver\narg:python3 my driver.py\narg:--case\narg:walk/3\n"
    );

    stand_in_kit(dir.path(), 1);
    let out = Command::new(&capcat)
        .args(["conform", "--driver", "x"])
        .env("PATH", "")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the conformance kit did not pass"),
        "{out:?}"
    );
}

#[test]
fn without_a_kit_capcat_conform_says_how_to_build_one() {
    let dir = tempfile::tempdir().unwrap();
    let capcat = capcat_in(dir.path());
    let out = Command::new(&capcat)
        .args(["conform", "--list"])
        .env("PATH", "")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot run the conformance kit")
            && stderr.contains("cargo build -p capcat-conform"),
        "{stderr}"
    );
}
