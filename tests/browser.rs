//! The pages the binary serves, clicked through in a real browser: the Swagger UI of the
//! account API (`/docs`), the panel (`/docs/painel`) and the public sender
//! (`/docs/remetente`), driven by Playwright for Python on Debian's Chromium (both installed
//! by `tests/setup.sh`; script `tests/browser/docs.py`).

mod common;

use common::{Backend, TestApp};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_api_documents_render_open_and_link() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/docs.py");
    let base = app.url("");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args([script, base.as_str()])
            .output()
    })
    .await
    .unwrap()
    .expect("python3 runs");
    assert!(
        out.status.success(),
        "the browser run failed (run tests/setup.sh):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");
    // Each page shows its own document's operations, not another's.
    let count = |p: &str| seen[p].as_u64().unwrap();
    let panel_ops: usize = http::panel::document()
        .paths
        .paths
        .values()
        .map(|item| {
            let v = serde_json::to_value(item).unwrap();
            v.as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "post", "put", "delete", "patch"].contains(&k.as_str()))
                .count()
        })
        .sum();
    assert_eq!(count("/docs/painel") as usize, panel_ops);
    assert_eq!(count("/docs/remetente"), 4);
    assert!(count("/docs") > 50, "{seen}");
}
