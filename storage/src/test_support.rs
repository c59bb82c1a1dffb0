//! What the crate's unit tests share.

use crate::channels::NewChannel;
use crate::templates::NewTemplate;
use crate::{Cipher, Store};
use engine::Secret;

/// A migrated SQLite store in `dir` with one account and one connected number: the store,
/// the account's id and the number's id.
pub(crate) async fn store_with_channel(dir: &std::path::Path) -> (Store, i64, i64) {
    let url = format!("sqlite://{}?mode=rwc", dir.join("t.db").display());
    store_with_channel_at(&url).await
}

/// The same on a new PostgreSQL database, when `DISPARO_TEST_POSTGRES_URL` names a server
/// (`.ci/run` sets it): the store, the account, the number and the database's name (for
/// [`drop_postgres`]).
pub(crate) async fn postgres_store_with_channel() -> Option<(Store, i64, i64, String)> {
    let (url, name) = new_postgres_database().await?;
    let (store, account, channel) = store_with_channel_at(&url).await;
    Some((store, account, channel, name))
}

/// A new, empty PostgreSQL database next to `DISPARO_TEST_POSTGRES_URL`: its URL and name.
async fn new_postgres_database() -> Option<(String, String)> {
    let admin = std::env::var("DISPARO_TEST_POSTGRES_URL").ok()?;
    sqlx::any::install_default_drivers();
    let name = format!("disparo_test_{}", rand::random::<u64>());
    let (base, _) = admin.rsplit_once('/').expect("a URL with a database");
    let admin_pool = sqlx::AnyPool::connect(&admin).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin_pool)
        .await
        .unwrap();
    admin_pool.close().await;
    Some((format!("{base}/{name}"), name))
}

/// Closes `store` and drops its PostgreSQL database `name`.
pub(crate) async fn drop_postgres(store: Store, name: &str) {
    store.pool.close().await;
    store.writer.close().await;
    let admin = std::env::var("DISPARO_TEST_POSTGRES_URL").unwrap();
    let admin_pool = sqlx::AnyPool::connect(&admin).await.unwrap();
    sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&admin_pool)
        .await
        .unwrap();
}

/// Two stores on one new PostgreSQL database, as two processes would have (same master key,
/// a session each), with one account and number (issue 50): (first, second, account, number,
/// database name). `None` without `DISPARO_TEST_POSTGRES_URL`.
pub(crate) async fn postgres_pair() -> Option<(Store, Store, i64, i64, String)> {
    let (url, name) = new_postgres_database().await?;
    let key = Cipher::generate_key_base64();
    let (a, account, channel) = store_with_channel_keyed(&url, &key).await;
    let b = Store::connect(&url, Cipher::from_base64(&key).unwrap())
        .await
        .unwrap();
    a.register_session("a", 10_000).await.unwrap();
    b.register_session("b", 10_000).await.unwrap();
    Some((a, b, account, channel, name))
}

async fn store_with_channel_at(url: &str) -> (Store, i64, i64) {
    store_with_channel_keyed(url, &Cipher::generate_key_base64()).await
}

async fn store_with_channel_keyed(url: &str, key: &str) -> (Store, i64, i64) {
    let cipher = Cipher::from_base64(key).unwrap();
    let store = Store::connect(url, cipher).await.unwrap();
    store.migrate().await.unwrap();
    let account = store.ensure_account("t").await.unwrap();
    let channel = store
        .insert_channel(&NewChannel {
            account_id: account.id,
            name: "n".into(),
            phone: "5511999990000".into(),
            phone_number_id: "1".into(),
            waba_id: "2".into(),
            verified_name: "n".into(),
            status: "WORKING".into(),
            quality: "GREEN".into(),
            tier: None,
            access_token: Secret::new("t".to_string()),
            app_secret: None,
            verify_token: "v".into(),
            bm_id: None,
        })
        .await
        .unwrap();
    (store, account.id, channel.id)
}

/// A library template of `account_id` (`pt_BR`, no header, footer or buttons).
pub(crate) fn new_template(
    account_id: i64,
    name: &str,
    provider_name: &str,
    category: &str,
    body: &str,
) -> NewTemplate {
    NewTemplate {
        account_id,
        name: name.into(),
        provider_name: provider_name.into(),
        category: category.into(),
        language: "pt_BR".into(),
        body: body.into(),
        header_text: None,
        header_media: None,
        footer_text: None,
        buttons: serde_json::json!([]),
        var_map: serde_json::json!({}),
        problems: serde_json::json!([]),
        auto_replicate: false,
    }
}

/// A campaign of `account_id` over `channel_id` (weight 1, template `oferta`) with `n`
/// recipients (`55119…`, no columns), in `draft`.
pub(crate) async fn campaign_with_recipients_on(
    store: &Store,
    account_id: i64,
    channel_id: i64,
    n: usize,
) -> crate::campaigns::CampaignRecord {
    let template = store
        .insert_template(&new_template(
            account_id,
            "oferta",
            "oferta",
            "MARKETING",
            "Oi",
        ))
        .await
        .unwrap();
    let campaign = store
        .insert_campaign(&crate::campaigns::NewCampaign {
            account_id,
            name: "c".into(),
            category: "MARKETING".into(),
            template_id: template.id,
            var_map: serde_json::json!({}),
            channels: vec![(channel_id, 1)],
            group_id: None,
            mode: "all".into(),
        })
        .await
        .unwrap();
    let rows: Vec<(String, String)> = (0..n)
        .map(|i| (format!("55119{i:08}"), "{}".to_string()))
        .collect();
    store
        .add_campaign_recipients(campaign.id, &rows)
        .await
        .unwrap();
    campaign
}
