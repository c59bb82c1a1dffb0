//! The disk full (issue 53): a gateway on SQLite whose database lives on a small tmpfs the test
//! fills. While full, an API write answers 503 `database_unavailable` with `Retry-After` (never
//! a 500, never a panic) and the gateway keeps serving; once space is freed the same request
//! (its idempotency key) is sent once; after a stop the database passes SQLite's integrity
//! check. Needs the right to mount a tmpfs (root, as on this project's machines and CI);
//! skipped otherwise.

mod common;

use common::gateway::{campaign_over_numbers, sent_log, Api, Gateway};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` mounted on a new directory; unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = std::env::temp_dir().join(format!("disparo-full-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .ok()?
            .success();
        mounted.then(|| Tmpfs(dir))
    }

    /// Fills the filesystem with `filler` until a write fails for lack of space.
    fn fill(&self) -> PathBuf {
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 16 * 1024];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_503_and_the_database_stays_whole() {
    let Some(fs) = Tmpfs::mount("24m") else {
        eprintln!("cannot mount a tmpfs here (not root): disk-full run skipped");
        return;
    };
    let db_path = fs.0.join("disparo.db");
    let mut gateway = Gateway::on_free_port(vec![
        (
            "DATABASE_URL",
            format!("sqlite://{}?mode=rwc", db_path.display()),
        ),
        ("DISPARO_MASTER_KEY", storage::Cipher::generate_key_base64()),
    ]);
    let sim =
        common::gateway::patient_simulator(format!("http://{}/webhooks/messaging", gateway.addr));
    let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    gateway
        .env
        .push(("PROVIDER_BASE_URL", format!("http://{sim_addr}")));
    gateway.start().await;
    let token = gateway.token();
    let api = Api::new(&gateway.addr, &token);
    let (campaign, channels) = campaign_over_numbers(&api, &sim, 0, 1).await;
    let (_, c) = api
        .call(Method::GET, &format!("/api/v1/campaigns/{campaign}"), None)
        .await;
    let template = c["data"]["template_id"].clone();
    let send = |to: &str| {
        let body = json!({
            "channel_id": channels[0],
            "to": to,
            "template": {"id": template, "vars": {"nome": "Ana"}},
        });
        api.http
            .post(format!("http://{}/api/v1/messages", gateway.addr))
            .bearer_auth(&token)
            .header("Idempotency-Key", format!("disco-{to}"))
            .json(&body)
            .send()
    };
    assert_eq!(
        send("5511940000001").await.unwrap().status(),
        StatusCode::CREATED
    );

    let filler = fs.fill();
    // Writes until one meets the full disk (SQLite may still have room in pages it holds).
    let mut refused = None;
    for i in 0..400 {
        let r = send(&format!("55119401{i:05}")).await.unwrap();
        let status = r.status();
        assert_ne!(
            status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{}",
            r.text().await.unwrap_or_default()
        );
        if status == StatusCode::SERVICE_UNAVAILABLE {
            let retry_after = r.headers().get("retry-after").cloned();
            refused = Some((i, retry_after, r.json::<Value>().await.unwrap()));
            break;
        }
        assert_eq!(status, StatusCode::CREATED);
    }
    let (i, retry_after, body) = refused.expect("a write met the full disk");
    eprintln!("the full disk met after {i} accepted writes: {body}");
    assert_eq!(body["code"], "database_unavailable", "{body}");
    assert_eq!(body["retryable"], true, "{body}");
    assert!(retry_after.is_some());
    // Still serving: health answers and reads work.
    let health = reqwest::get(format!("http://{}/health", gateway.addr))
        .await
        .unwrap();
    assert!(health.status().is_success() || health.status() == StatusCode::SERVICE_UNAVAILABLE);
    let (status, _) = api.call(Method::GET, "/api/v1/channels", None).await;
    assert_eq!(status, StatusCode::OK);

    std::fs::remove_file(&filler).unwrap();
    let to = format!("55119401{i:05}");
    let again = send(&to).await.unwrap();
    assert_eq!(again.status(), StatusCode::CREATED);
    common::eventually(10, "the send after the disk was freed", || async {
        let log = sent_log(sim_addr).await;
        (log["per_recipient"][&to]["oferta"] == 1).then_some(())
    })
    .await;
    gateway.terminate();
    assert_eq!(integrity(&db_path).await, "ok");
}

/// SQLite's `PRAGMA integrity_check` of the database file.
async fn integrity(path: &Path) -> String {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let (result,): (String,) = sqlx::query_as("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    result
}
