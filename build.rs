// Rebuild when a rule file changes: the rule sets under rules/ are embedded in the binary.
fn main() {
    println!("cargo:rerun-if-changed=rules");
}
