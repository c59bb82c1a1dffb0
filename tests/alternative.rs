//! Numbers of an alternative provider (decision D-034), through the real server against the
//! simulator's 360dialog sender: registration checked at the provider, template sync through
//! the provider trait, sends refused, and the notification URLs and their receivers.

mod common;

use common::{Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn d360_sender(app: &TestApp, api_key: Option<&str>, templates: Value) -> String {
    let resp: Value = reqwest::Client::new()
        .post(format!("http://{}/_sim/d360/senders", app.sim_addr))
        .json(&json!({"api_key": api_key, "templates": templates}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    resp["data"]["api_key"].as_str().unwrap().to_string()
}

async fn post_raw(url: &str, body: &str) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn names(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

async fn alternative_numbers_are_referenced_only(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let sim = format!("http://{}", app.sim_addr);
    let key = d360_sender(
        &app,
        None,
        json!([
            {"name": "boas_vindas", "body": "Olá {{1}}, seja bem-vindo!"},
            {"name": "promo_natal", "status": "pending", "body": "Promoção"}
        ]),
    )
    .await;

    // Registration checks the engine, the phone and the key at the provider.
    for (body, code) in [
        (
            json!({"phone": "5511988887777", "engine": "zapi", "api_key": key, "provider_url": sim}),
            "unknown_engine",
        ),
        (
            json!({"phone": "12", "engine": "360dialog", "api_key": key, "provider_url": sim}),
            "invalid_phone",
        ),
        (
            json!({"phone": "5511988887777", "engine": "360dialog", "api_key": "wrong", "provider_url": sim}),
            "credencial_invalida",
        ),
        // A key that cannot travel in a header is the caller's fault, not the provider's
        // (found by schemathesis: it was a 502 `provider_unavailable`).
        (
            json!({"phone": "5511988887777", "engine": "360dialog", "api_key": "abc\r\ndef", "provider_url": sim}),
            "invalid_field",
        ),
        (
            json!({"phone": "5511988887777", "engine": "360dialog", "api_key": key, "provider_url": "ftp://x"}),
            "invalid_url",
        ),
        // Only the provider's own host or a listed one (D-042): never an arbitrary GET.
        (
            json!({"phone": "5511988887777", "engine": "360dialog", "api_key": key, "provider_url": "https://intranet.example.com/api"}),
            "provider_url_not_allowed",
        ),
        (
            json!({"phone": "5511988887777", "engine": "360dialog", "api_key": key, "provider_url": "http://169.254.169.254/latest"}),
            "private_url",
        ),
    ] {
        let (status, err) = app.post("/api/v1/channels/alternative", body).await;
        assert_eq!(
            (status, err["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(code)),
            "{err}"
        );
        assert!(err["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let (status, created) = app
        .post(
            "/api/v1/channels/alternative",
            json!({"name": "Loja 360", "phone": "+55 (11) 98888-7777", "engine": "360dialog", "api_key": key, "provider_url": sim}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["data"]["id"].as_i64().unwrap();
    assert_eq!(created["data"]["engine"], "360dialog");
    assert_eq!(created["data"]["official"], false);
    assert_eq!(created["data"]["phone"], "5511988887777");
    assert_eq!(created["data"]["health"]["code"], "provedor_alternativo");
    assert_eq!(created["templates"], 2);
    let (status, err) = app
        .post(
            "/api/v1/channels/alternative",
            json!({"phone": "5511988887777", "engine": "360dialog", "api_key": key, "provider_url": sim}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("conflict")),
        "{err}"
    );

    // Listed with the Cloud numbers, with its engine.
    let (official, _) = app.connect_channel().await;
    let (_, list) = app.get("/api/v1/channels").await;
    let engines: Vec<(i64, String)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_i64().unwrap(),
                c["engine"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        engines,
        vec![
            (id, "360dialog".to_string()),
            (official, "cloud_api".to_string())
        ]
    );
    let (status, health) = app.get(&format!("/api/v1/channels/{id}/health")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["data"]["code"], "provedor_alternativo", "{health}");

    // The sender's approved templates; a sync reads them again.
    let (status, templates) = app.get(&format!("/api/v1/channels/{id}/templates")).await;
    assert_eq!(status, StatusCode::OK, "{templates}");
    assert_eq!(names(&templates), vec!["boas_vindas"]);
    assert_eq!(templates["data"][0]["body"], "Olá {{1}}, seja bem-vindo!");
    d360_sender(
        &app,
        Some(&key),
        json!([
            {"name": "boas_vindas", "body": "Olá {{1}}, seja bem-vindo!"},
            {"name": "promo_natal", "status": "approved", "body": "Promoção"},
            {"name": "cobranca", "category": "UTILITY", "body": "Sua fatura {{1}} vence amanhã."}
        ]),
    )
    .await;
    let (status, synced) = app
        .post(&format!("/api/v1/channels/{id}/sync"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{synced}");
    assert_eq!(synced["data"]["channel"]["engine"], "360dialog");
    let (_, templates) = app.get(&format!("/api/v1/channels/{id}/templates")).await;
    assert_eq!(
        names(&templates),
        vec!["boas_vindas", "cobranca", "promo_natal"]
    );

    // Business-initiated sends through it are refused with a clear message.
    for body in [
        json!({"channel_id": id, "to": "5511977776666", "template": {"name": "boas_vindas", "language": "pt_BR", "params": ["Ana"]}}),
        json!({"channel_id": id, "to": "5511977776666", "text": "oi"}),
    ] {
        let (status, err) = app.post("/api/v1/messages", body).await;
        assert_eq!(
            (status, err["code"].as_str()),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("provedor_alternativo")
            ),
            "{err}"
        );
        assert!(err["message"]
            .as_str()
            .unwrap()
            .contains("provedor alternativo"));
    }
    let (status, t) = app
        .post("/api/v1/templates", json!({"name": "Oferta", "body": "Olá {{1}}, tudo bem?", "var_map": {"1": {"field": "nome"}}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    let (status, err) = app
        .post(
            "/api/v1/campaigns",
            json!({"name": "X", "template_id": t["data"]["id"], "channels": [{"channel_id": id}]}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_channels")),
        "{err}"
    );
    // Nothing reached the provider's Cloud API for it.
    let log: Value = reqwest::get(format!("{sim}/_sim/sent/summary"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(log["data"]["total"], 0, "{log}");
    let (status, err) = app
        .patch(
            &format!("/api/v1/channels/{id}/official"),
            json!({"name": "x"}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("not_official")),
        "{err}"
    );

    // The notification URLs: one per account, stable; the fixed one shared.
    let (status, urls) = app.get("/api/v1/channels/alternative/notify-url").await;
    assert_eq!(status, StatusCode::OK, "{urls}");
    let notify = urls["data"]["notify_url"].as_str().unwrap().to_string();
    let fixed = urls["data"]["fixed_url"].as_str().unwrap().to_string();
    assert!(notify.contains("/webhooks/alternative/"), "{notify}");
    assert!(fixed.ends_with("/webhooks/alternative"), "{fixed}");
    assert!(urls["data"]["observacao"].as_str().unwrap().len() > 40);
    let (_, again) = app.get("/api/v1/channels/alternative/notify-url").await;
    assert_eq!(again["data"]["notify_url"], notify.as_str());
    let other = app.other_account_token().await;
    let (_, theirs) = app
        .get_as(&other, "/api/v1/channels/alternative/notify-url")
        .await;
    assert_ne!(theirs["data"]["notify_url"], notify.as_str());
    assert_eq!(theirs["data"]["fixed_url"], fixed.as_str());

    // The receivers, at this server's address.
    let path = notify.split("/webhooks/").nth(1).unwrap();
    let notify_here = app.url(&format!("/webhooks/{path}"));
    let fixed_here = app.url("/webhooks/alternative");
    let status_update = json!({"object": "whatsapp_business_account", "entry": [{"id": "x", "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp", "metadata": {"display_phone_number": "55 11 98888-7777", "phone_number_id": "d360"}, "statuses": [{"id": "wamid.X", "status": "delivered", "timestamp": "1700000000", "recipient_id": "5511977776666"}]}}]}]});
    let (status, ok) = post_raw(&notify_here, &status_update.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    let (status, ok) = post_raw(&fixed_here, &status_update.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    let unknown_phone = status_update
        .to_string()
        .replace("55 11 98888-7777", "5521900000000");
    let (status, _) = post_raw(&fixed_here, &unknown_phone).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = post_raw(&app.url("/webhooks/alternative/not-a-key"), "{}").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, err) = post_raw(&notify_here, "not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let stored = app
        .runtime
        .store()
        .alternative_notifications(app.account_id, 10)
        .await
        .unwrap();
    let seen: Vec<(&str, Option<i64>)> = stored
        .iter()
        .map(|n| (n.via.as_str(), n.channel_id))
        .collect();
    assert_eq!(
        seen,
        vec![("fixed_url", Some(id)), ("notify_url", Some(id))]
    );
    let body: Value = serde_json::from_str(&stored[1].body).unwrap();
    assert_eq!(body, status_update);

    // Another account may reference the same sender (the phone is unique per account, not
    // across accounts); then the shared URL cannot tell whose a notification is and refuses
    // it, while each account's own URL still routes to that account.
    let other_key = d360_sender(&app, None, json!([])).await;
    let other_token = app.other_account_token().await;
    let (status, theirs) = app
        .post_as(
            &other_token,
            "/api/v1/channels/alternative",
            json!({"phone": "5511988887777", "engine": "360dialog", "api_key": other_key, "provider_url": sim}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    let (status, err) = post_raw(&fixed_here, &status_update.to_string()).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("remetente_ambiguo")),
        "{err}"
    );
    let (status, _) = post_raw(&notify_here, &status_update.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let stored = app
        .runtime
        .store()
        .alternative_notifications(app.account_id, 10)
        .await
        .unwrap();
    assert_eq!(stored.len(), 3, "only this account's own URL reached it");
    assert_eq!(stored[0].channel_id, Some(id));

    // A read token may read the URLs but not register a number.
    let (_, read) = app
        .post(
            "/api/v1/tokens",
            json!({"name": "leitura", "level": "read"}),
        )
        .await;
    let read = read["data"]["token"].as_str().unwrap().to_string();
    let (status, _) = app
        .get_as(&read, "/api/v1/channels/alternative/notify-url")
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .post_as(&read, "/api/v1/channels/alternative", json!({"phone": "5511955554444", "engine": "360dialog", "api_key": key, "provider_url": sim}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

on_both_backends! {
    alternative => alternative_numbers_are_referenced_only;
}
