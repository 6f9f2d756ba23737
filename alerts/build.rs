// `sqlx::migrate!` embeds the migrations when the crate compiles; a new
// file in the directory must make it compile again.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
