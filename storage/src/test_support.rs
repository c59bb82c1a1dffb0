//! What the crate's unit tests share.

use crate::channels::NewChannel;
use crate::{Cipher, Store};
use engine::Secret;

/// A migrated SQLite store in `dir` with one account and one connected number: the store,
/// the account's id and the number's id.
pub(crate) async fn store_with_channel(dir: &std::path::Path) -> (Store, i64, i64) {
    let url = format!("sqlite://{}?mode=rwc", dir.join("t.db").display());
    let cipher = Cipher::from_base64(&Cipher::generate_key_base64()).unwrap();
    let store = Store::connect(&url, cipher).await.unwrap();
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
