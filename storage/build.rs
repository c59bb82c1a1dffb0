//! Rebuilds the crate when a migration is added or changed: `sqlx::migrate!` embeds the
//! migration files at compile time, and cargo does not watch them on its own.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
