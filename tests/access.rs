//! Access levels and tenancy across every route of `/api/v1`.

mod common;

use common::{eventually, Backend, TestApp};
use engine::access::Level;
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn call(
    app: &TestApp,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Value,
) -> (StatusCode, Value) {
    let mut req = app.http.request(method.parse().unwrap(), app.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if method != "GET" && method != "DELETE" {
        req = req.json(&body);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn every_route_answers_by_the_tokens_level(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let store = app.runtime.store();
    let account = store.ensure_account("acme").await.unwrap();
    let mut tokens = Vec::new();
    for level in Level::ALL {
        tokens.push((
            level,
            store
                .create_token(account.id, level.as_str(), level.as_str())
                .await
                .unwrap()
                .value
                .expose()
                .to_string(),
        ));
    }
    for (method, route, needed) in http::access::ROUTES {
        let path = route
            .replace("{id}", "999999")
            .replace("{waba}", "999999")
            .replace("{channel_id}", "999999");
        let (status, _) = call(&app, None, method, &path, json!({})).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{method} {route} exists and needs a token"
        );
        for (level, token) in &tokens {
            let (status, body) = call(&app, Some(token), method, &path, json!({})).await;
            if level < needed {
                assert_eq!(
                    status,
                    StatusCode::FORBIDDEN,
                    "{method} {route} with {level:?}: {body}"
                );
                assert_eq!(body["code"], "insufficient_level");
                assert_eq!(body["required_level"], needed.as_str());
                assert!(body["message"].as_str().unwrap().contains(needed.as_str()));
            } else {
                assert!(
                    status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
                    "{method} {route} with {level:?}: {status} {body}"
                );
            }
        }
    }
}

async fn every_route_with_an_id_answers_404_to_another_account(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, number) = app.connect_channel().await;
    let receiver = common::Receiver::start().await;
    let (subscription, _) = app.subscribe(channel, &receiver, &["message.ack"]).await;
    let (_, m) = app.post("/api/v1/messages", json!({"to": "5511900001111", "template": {"name": "hello_world", "language": "en_US"}})).await;
    let message = m["data"]["id"].as_i64().unwrap();
    let (_, t) = app
        .post(
            "/api/v1/templates",
            json!({"name": "Aviso", "body": "Olá {{1}}, tudo bem?", "submit_channels": [channel]}),
        )
        .await;
    let template = t["data"]["id"].as_i64().unwrap();
    let (_, wabas) = app.get("/api/v1/wabas").await;
    let bm = wabas["data"][0]["bm"]["id"].as_i64().unwrap();
    let (_, tk) = app
        .post("/api/v1/tokens", json!({"name": "outro", "level": "read"}))
        .await;
    let token_id = tk["data"]["id"].as_i64().unwrap();
    let (_, page) = app.post("/api/v1/wiki", json!({"title": "Página"})).await;
    let wiki_page = page["data"]["id"].as_i64().unwrap();
    let (_, cat) = app
        .post("/api/v1/wiki/categories", json!({"name": "Geral"}))
        .await;
    let wiki_category = cat["data"]["id"].as_i64().unwrap();
    let (status, camp) = app.post("/api/v1/campaigns", json!({"name": "C", "template_id": template, "channels": [{"channel_id": channel, "weight": 1}]})).await;
    let campaign = if status == StatusCode::CREATED {
        camp["data"]["id"].as_i64().unwrap()
    } else {
        0
    };
    let (_, grp) = app.post("/api/v1/groups", json!({"name": "Grupo"})).await;
    let group = grp["data"]["id"].as_i64().unwrap();
    let intruder = app.other_account_token().await;
    let body_for = |method: &str, route: &str| -> Value {
        match (method, route) {
            (_, r) if r.starts_with("/api/v1/groups/") && r.ends_with("/numbers") => {
                json!({"channel_ids": [channel]})
            }
            (_, r) if r.starts_with("/api/v1/groups/") && r.ends_with("/campaigns") => {
                json!({"name": "G", "template_id": template})
            }
            (_, r) if r.starts_with("/api/v1/groups/") && r.ends_with("/messages") => {
                json!({"to": "5511900003333", "template_id": template})
            }
            ("PATCH", r) if r.ends_with("/guardrails") => json!({"cadence_ms": 10}),
            ("PATCH", "/api/v1/webhooks/{id}") => json!({"active": true}),
            (_, r) if r.ends_with("/rotate-secret") => json!({"overlap_seconds": 0}),
            (_, r) if r.ends_with("/recover") => json!({"since": "2026-01-01T00:00:00Z"}),
            ("PATCH", _) => json!({"name": "x"}),
            (_, r) if r.ends_with("/guardrails/authorize") => json!({"extra": 1}),
            (_, r) if r.ends_with("/resend") => json!({"target_channel_id": channel}),
            ("PUT", r) if r.starts_with("/api/v1/wiki/categories") => json!({"name": "Outra"}),
            ("PUT", _) => json!({"title": "Outro"}),
            (_, r) if r.ends_with("/request-code") => json!({"method": "SMS"}),
            (_, r) if r.ends_with("/verify-code") => json!({"code": "123456"}),
            (_, r) if r.ends_with("/register") => json!({"pin": "123456"}),
            (_, r) if r.ends_with("/numbers") => {
                json!({"phone": "11988887777", "verified_name": "Loja"})
            }
            ("POST", "/api/v1/channels/{id}/webhooks") => {
                json!({"url": "http://127.0.0.1:9/x", "events": ["message.ack"]})
            }
            (_, r) if r.ends_with("/templates/{id}/channels") => json!({"channels": [channel]}),
            (_, r) if r.ends_with("/recipients") => {
                json!({"recipients": [{"phone": "5511900002222", "vars": {}}]})
            }
            _ => json!({}),
        }
    };
    let mut checked = 0;
    for (method, route, _) in http::access::ROUTES
        .iter()
        .filter(|(_, r, _)| r.contains('{'))
    {
        let id = match route {
            r if r.starts_with("/api/v1/channels/") => channel,
            r if r.starts_with("/api/v1/webhooks/") => subscription,
            r if r.starts_with("/api/v1/messages/") => message,
            r if r.starts_with("/api/v1/templates/") => template,
            r if r.starts_with("/api/v1/bms/") => bm,
            r if r.starts_with("/api/v1/tokens/") => token_id,
            r if r.starts_with("/api/v1/campaigns/") => campaign,
            r if r.starts_with("/api/v1/wiki/categories/") => wiki_category,
            r if r.starts_with("/api/v1/wiki/") => wiki_page,
            r if r.starts_with("/api/v1/groups/") => group,
            _ => 0,
        };
        let path = route
            .replace("{id}", &id.to_string())
            .replace("{waba}", &number.waba_id)
            .replace("{channel_id}", &channel.to_string());
        let (status, body) = call(
            &app,
            Some(&intruder),
            method,
            &path,
            body_for(method, route),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {body}");
        assert!(body.get("data").is_none());
        checked += 1;
    }
    assert!(checked >= 25, "{checked}");
    // And the records are all still there for their owner.
    let (status, _) = app.get(&format!("/api/v1/messages/{message}")).await;
    assert_eq!(status, StatusCode::OK);
}

async fn tokens_are_created_with_a_level_and_revoked(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (status, created) = app
        .post("/api/v1/tokens", json!({"name": "painel", "level": "read"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let read_token = created["data"]["token"].as_str().unwrap().to_string();
    assert!(read_token.starts_with("svc_"));
    let (status, _) = app.get_as(&read_token, "/api/v1/channels").await;
    assert_eq!(status, StatusCode::OK);
    let (status, err) = app
        .post_as(
            &read_token,
            "/api/v1/messages",
            json!({"to": "5511900001111", "text": "x"}),
        )
        .await;
    assert_eq!(
        (
            status,
            err["required_level"].as_str(),
            err["token_level"].as_str()
        ),
        (StatusCode::FORBIDDEN, Some("write"), Some("read"))
    );
    let (_, list) = app.get("/api/v1/tokens").await;
    assert!(list["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t.get("token").is_none() && t["prefix"].as_str().unwrap().starts_with("svc_")));
    let (status, err) = app
        .post("/api/v1/tokens", json!({"name": "x", "level": "root"}))
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_level"))
    );
    // Used just before (so the gateway holds it in its token cache, D-075) …
    let (s, _) = app.get_as(&read_token, "/api/v1/channels").await;
    assert_eq!(s, StatusCode::OK);
    let r = app
        .http
        .delete(app.url(&format!("/api/v1/tokens/{}", created["data"]["id"])))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // … and refused at once after its revocation, not when the cache entry ages out; the
    // answer says it was revoked (issue 55), while an unknown token gets the generic one.
    let (status, err) = app.get_as(&read_token, "/api/v1/channels").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("token_revoked")),
        "{err}"
    );
    let last = if read_token.ends_with('x') { 'y' } else { 'x' };
    let unknown = format!("{}{last}", &read_token[..read_token.len() - 1]);
    let (status, err) = app.get_as(&unknown, "/api/v1/channels").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized")),
        "{err}"
    );
    let audit = app
        .runtime
        .store()
        .list_audit(app.account_id, 10)
        .await
        .unwrap();
    assert!(audit
        .iter()
        .any(|a| a.action == "DELETE /api/v1/tokens/{id}"));
}

/// An `account_update` ban of `waba_id`, signed with `secret` the provider's way.
fn signed_ban(waba_id: &str, secret: &str) -> (String, String) {
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": waba_id, "time": 1743451903, "changes": [
        {"value": {"event": "DISABLED_UPDATE", "ban_info": {"waba_ban_state": "DISABLE", "waba_ban_date": "April 17, 2025"}}, "field": "account_update"}
    ]}]})
    .to_string();
    let signature = provider::signature::sign(secret, body.as_bytes());
    (body, signature)
}

/// The account's row of a WABA, as `GET /wabas` lists it to `token`.
async fn waba_row(app: &TestApp, token: &str, waba_id: &str) -> Value {
    let (_, wabas) = call(app, Some(token), "GET", "/api/v1/wabas", json!({})).await;
    wabas["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == waba_id)
        .cloned()
        .unwrap()
}

async fn an_account_cannot_claim_or_ban_another_accounts_waba(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (victim_channel, victim) = app.connect_channel().await;
    let intruder = app.other_account_token().await;
    let own = app
        .sim
        .create_number(provider::sim::CreateNumber::default())
        .unwrap();

    // Its own number, claiming the victim's WABA: the provider does not list the number there
    // for this token, so nothing is stored.
    let (status, err) = call(
        &app,
        Some(&intruder),
        "POST",
        "/api/v1/channels/official",
        json!({
        "phone_number_id": own.phone_number_id, "waba_id": victim.waba_id,
        "access_token": own.access_token, "app_secret": "squatter-secret"}),
    )
    .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("waba_invalida")),
        "{err}"
    );
    // The victim's number with its own token: the token does not reach it.
    let (status, err) = call(
        &app,
        Some(&intruder),
        "POST",
        "/api/v1/channels/official",
        json!({
        "phone_number_id": victim.phone_number_id, "waba_id": victim.waba_id,
        "access_token": own.access_token}),
    )
    .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("credencial_invalida")
        ),
        "{err}"
    );
    let (_, list) = call(&app, Some(&intruder), "GET", "/api/v1/channels", json!({})).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 0, "nothing stored");
    let (_, wabas) = call(&app, Some(&intruder), "GET", "/api/v1/wabas", json!({})).await;
    assert_eq!(wabas["data"].as_array().unwrap().len(), 0, "no WABA learnt");
    // Its own WABA is fine.
    let (status, body) = call(
        &app,
        Some(&intruder),
        "POST",
        "/api/v1/channels/official",
        json!({
        "phone_number_id": own.phone_number_id, "waba_id": own.waba_id,
        "access_token": own.access_token, "app_secret": own.app_secret}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // A row that claims the victim's WABA id anyway (stored before connect proved WABAs):
    // a ban signed with its secret changes that account's records only.
    let store = app.runtime.store();
    let other = store.ensure_account("other").await.unwrap();
    let squat = store
        .insert_channel(&storage::channels::NewChannel {
            account_id: other.id,
            name: "squat".into(),
            phone: "5511900001111".into(),
            phone_number_id: "990001112223".into(),
            waba_id: victim.waba_id.clone(),
            verified_name: "Squat".into(),
            status: "WORKING".into(),
            quality: "GREEN".into(),
            tier: Some("TIER_250".into()),
            access_token: engine::Secret::new(own.access_token.clone()),
            app_secret: Some(engine::Secret::new("squatter-secret")),
            verify_token: "v".into(),
            bm_id: None,
        })
        .await
        .unwrap();
    store
        .upsert_waba(other.id, None, &victim.waba_id, "squatted")
        .await
        .unwrap();
    app.runtime.start_channel(squat.id).await.unwrap();
    let (body, signature) = signed_ban(&victim.waba_id, "squatter-secret");
    assert_eq!(app.provider_post(&body, &signature).await, StatusCode::OK);
    eventually(10, "the squatter's own number banned", || async {
        let (_, h) = call(
            &app,
            Some(&intruder),
            "GET",
            &format!("/api/v1/channels/{}/health", squat.id),
            json!({}),
        )
        .await;
        (h["data"]["code"] == "waba_banida").then_some(())
    })
    .await;
    let (_, h) = app
        .get(&format!("/api/v1/channels/{victim_channel}/health"))
        .await;
    assert_ne!(h["data"]["code"], "waba_banida", "{h}");
    let row = waba_row(&app, &app.token, &victim.waba_id).await;
    assert_eq!(row["standing"], "ok", "{row}");
    let row = waba_row(&app, &intruder, &victim.waba_id).await;
    assert_eq!(row["standing"], "banned", "{row}");

    // Signed by the victim's own secret, the ban reaches the victim (and not the squatter's
    // records, already banned above, nor anyone else).
    let (body, signature) = signed_ban(&victim.waba_id, &victim.app_secret);
    assert_eq!(app.provider_post(&body, &signature).await, StatusCode::OK);
    eventually(10, "the victim banned by its own signed event", || async {
        let (_, h) = app
            .get(&format!("/api/v1/channels/{victim_channel}/health"))
            .await;
        (h["data"]["code"] == "waba_banida").then_some(())
    })
    .await;
}

on_both_backends! {
    waba_tenancy => an_account_cannot_claim_or_ban_another_accounts_waba;
    levels => every_route_answers_by_the_tokens_level;
    tenancy => every_route_with_an_id_answers_404_to_another_account;
    tokens => tokens_are_created_with_a_level_and_revoked;
}
