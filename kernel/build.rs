fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let script = std::path::Path::new(&dir).join("../boot/linker.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    if std::env::var("TARGET").as_deref() == Ok("x86_64-unknown-none") {
        println!("cargo:rustc-link-arg-bins=-T{}", script.display());
        println!("cargo:rustc-link-arg-bins=--no-pie");
    }
}
