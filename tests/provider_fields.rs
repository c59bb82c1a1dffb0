//! The provider's other webhook fields, emitted by the simulator's control API, signed the
//! provider's way, acted on through the real server (issue 16, D-074): a portfolio's limit,
//! a template's quality and category, a policy violation, business verification, a number's
//! name, account alerts and marketing opt-outs; and every inbound message kind, whole (issue
//! 48).

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use provider::sim::CreatedNumber;
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn sim(app: &TestApp, path: &str, body: Value) -> Value {
    let r = app
        .http
        .post(format!("http://{}{path}", app.sim_addr))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap()
}

async fn bm_id(app: &TestApp, n: &CreatedNumber) -> i64 {
    let (_, wabas) = app.get("/api/v1/wabas").await;
    wabas["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == n.waba_id.as_str())
        .and_then(|w| w["bm"]["id"].as_i64())
        .expect("the WABA's BM is known")
}

async fn template(app: &TestApp, id: i64) -> Value {
    let (_, list) = app.get("/api/v1/templates").await;
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

async fn health_code(app: &TestApp, channel: i64) -> String {
    let (_, h) = app.get(&format!("/api/v1/channels/{channel}/health")).await;
    h["data"]["code"].as_str().unwrap_or_default().to_string()
}

async fn every_field_is_acted_on(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, n) = app.connect_channel().await;
    let bm = bm_id(&app, &n).await;
    let receiver = Receiver::start().await;
    app.subscribe(channel, &receiver, &["template.status"])
        .await;

    // business_capability_update: the BM's shared 24 h limit changes at once.
    sim(
        &app,
        &format!("/_sim/wabas/{}/capability", n.waba_id),
        json!({"max_daily_conversations_per_business": 2000}),
    )
    .await;
    let view = eventually(10, "the BM's new limit", || async {
        let (_, b) = app.get(&format!("/api/v1/bms/{bm}")).await;
        (b["data"]["tier"] == "TIER_2K").then_some(b["data"].clone())
    })
    .await;
    assert_eq!(view["sending"]["limit_24h"], 2000, "{view}");
    sim(
        &app,
        &format!("/_sim/wabas/{}/capability", n.waba_id),
        json!({"max_daily_conversations_per_business": -1}),
    )
    .await;
    eventually(10, "unlimited", || async {
        let (_, b) = app.get(&format!("/api/v1/bms/{bm}")).await;
        (b["data"]["tier"] == "TIER_UNLIMITED" && b["data"]["sending"]["limit_24h"] == -1)
            .then_some(())
    })
    .await;

    // message_template_quality_update: kept per number, shown in the library and in health,
    // and told as template.status.
    let t = app
        .approved_template(
            json!({"name": "Aviso", "category": "utility", "body": "Olá {{1}}, tudo certo?", "var_map": {"1": {"field": "nome"}}}),
            &[channel],
        )
        .await;
    let view = template(&app, t).await;
    let tid = view["channels"][0]["provider_template_id"]
        .as_str()
        .unwrap()
        .to_string();
    sim(
        &app,
        &format!("/_sim/templates/{tid}/quality"),
        json!({"quality": "RED"}),
    )
    .await;
    eventually(10, "the RED quality in the library", || async {
        let v = template(&app, t).await;
        (v["channels"][0]["quality"] == "RED").then_some(())
    })
    .await;
    eventually(10, "health template_qualidade_baixa", || async {
        (health_code(&app, channel).await == "template_qualidade_baixa").then_some(())
    })
    .await;
    let event = eventually(10, "template.status with the quality", || async {
        receiver
            .events()
            .into_iter()
            .map(|e| e.json())
            .find(|e| e["data"]["quality"] == "RED")
    })
    .await;
    assert_eq!(event["data"]["template_id"], t, "{event}");
    assert_eq!(event["data"]["event"], "QUALITY_UPDATE", "{event}");
    sim(
        &app,
        &format!("/_sim/templates/{tid}/quality"),
        json!({"quality": "GREEN", "previous": "RED"}),
    )
    .await;
    eventually(10, "health back to ok", || async {
        (health_code(&app, channel).await == "ok").then_some(())
    })
    .await;

    // template_category_update: the library takes the provider's category.
    sim(
        &app,
        &format!("/_sim/templates/{tid}/category"),
        json!({"category": "MARKETING"}),
    )
    .await;
    eventually(10, "the new category", || async {
        let v = template(&app, t).await;
        (v["category"] == "marketing").then_some(())
    })
    .await;

    // phone_number_name_update: the number's verified name.
    sim(
        &app,
        &format!("/_sim/numbers/{}/name", n.phone_number_id),
        json!({"name": "Loja Renomeada"}),
    )
    .await;
    eventually(10, "the new verified name", || async {
        let (_, c) = app
            .get(&format!("/api/v1/channels/{channel}/official"))
            .await;
        (c["data"]["verified_name"] == "Loja Renomeada").then_some(())
    })
    .await;

    // account_alerts: listed in the overview's needs_action.
    sim(
        &app,
        &format!("/_sim/wabas/{}/alert", n.waba_id),
        json!({"severity": "CRITICAL", "type": "OBA_APPLICATION_DEFERRED", "description": "Pedido de conta oficial adiado."}),
    )
    .await;
    let alert = eventually(10, "the alert in the overview", || async {
        let (_, o) = app.get("/api/v1/overview").await;
        o["data"]["needs_action"]
            .as_array()?
            .iter()
            .find(|x| x["type"] == "alert")
            .cloned()
    })
    .await;
    assert_eq!(alert["label"], "Pedido de conta oficial adiado.", "{alert}");
    assert_eq!(alert["code"], "oba_application_deferred", "{alert}");

    // account_update VERIFIED_ACCOUNT: the BM's verification.
    app.http
        .post(format!(
            "http://{}/_sim/businesses/{}/verification",
            app.sim_addr, n.business_id
        ))
        .json(&json!({"status": "pending"}))
        .send()
        .await
        .unwrap();
    app.post(&format!("/api/v1/bms/{bm}/sync"), json!({})).await;
    eventually(10, "pending after the sync", || async {
        let (_, b) = app.get(&format!("/api/v1/bms/{bm}")).await;
        (b["data"]["verification"] == "pending").then_some(())
    })
    .await;
    sim(
        &app,
        &format!("/_sim/wabas/{}/account-update", n.waba_id),
        json!({"event": "VERIFIED_ACCOUNT"}),
    )
    .await;
    eventually(10, "verified by the webhook", || async {
        let (_, b) = app.get(&format!("/api/v1/bms/{bm}")).await;
        (b["data"]["verification"] == "verified").then_some(())
    })
    .await;

    // account_update ACCOUNT_VIOLATION: the WABA's numbers need attention, with the type.
    sim(
        &app,
        &format!("/_sim/wabas/{}/account-update", n.waba_id),
        json!({"event": "ACCOUNT_VIOLATION", "violation_type": "SCAM"}),
    )
    .await;
    eventually(10, "health violacao_de_politica", || async {
        (health_code(&app, channel).await == "violacao_de_politica").then_some(())
    })
    .await;
    let (_, o) = app.get("/api/v1/overview").await;
    let waba = o["data"]["needs_action"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["type"] == "waba")
        .cloned()
        .unwrap_or_default();
    assert_eq!(waba["code"], "violacao_de_politica", "{o}");
    assert!(waba["label"].as_str().unwrap().contains("SCAM"), "{waba}");

    // A violation never hides a ban.
    sim(
        &app,
        &format!("/_sim/wabas/{}/account-update", n.waba_id),
        json!({"event": "DISABLED_UPDATE", "ban_state": "DISABLE"}),
    )
    .await;
    eventually(10, "waba_banida", || async {
        (health_code(&app, channel).await == "waba_banida").then_some(())
    })
    .await;
    sim(
        &app,
        &format!("/_sim/wabas/{}/account-update", n.waba_id),
        json!({"event": "ACCOUNT_VIOLATION", "violation_type": "SPAM"}),
    )
    .await;
    // A later event of the same WABA, once seen, means the violation was handled too.
    sim(
        &app,
        &format!("/_sim/wabas/{}/capability", n.waba_id),
        json!({"max_daily_conversations_per_business": 10000}),
    )
    .await;
    eventually(10, "the later event", || async {
        let (_, b) = app.get(&format!("/api/v1/bms/{bm}")).await;
        (b["data"]["tier"] == "TIER_10K").then_some(())
    })
    .await;
    assert_eq!(health_code(&app, channel).await, "waba_banida");
    let (_, wabas) = app.get("/api/v1/wabas").await;
    assert_eq!(wabas["data"][0]["standing"], "banned", "{wabas}");
}

/// A contact who stops marketing messages is skipped by marketing campaigns, with the reason;
/// after resuming, it is sent again.
async fn marketing_campaigns_skip_opted_out_contacts(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, n) = app.connect_channel().await;
    let t = app
        .approved_template(
            json!({"name": "Oferta", "body": "Olá {{1}}, temos novidades.", "var_map": {"1": {"field": "nome"}}}),
            &[channel],
        )
        .await;
    sim(
        &app,
        &format!("/_sim/numbers/{}/preferences", n.phone_number_id),
        json!({"from": "5511977770001", "value": "stop"}),
    )
    .await;
    let run = |phones: Vec<&'static str>| {
        let app = &app;
        async move {
            let (status, c) = app
                .post(
                    "/api/v1/campaigns",
                    json!({"name": "Promo", "template_id": t, "channels": [{"channel_id": channel, "weight": 1}]}),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{c}");
            let id = c["data"]["id"].as_i64().unwrap();
            let rows: Vec<Value> = phones
                .iter()
                .map(|p| json!({"phone": p, "vars": {"nome": "Ana"}}))
                .collect();
            app.post(
                &format!("/api/v1/campaigns/{id}/recipients"),
                json!({"recipients": rows}),
            )
            .await;
            app.post(&format!("/api/v1/campaigns/{id}/start"), json!({}))
                .await;
            eventually(20, "the campaign completes", || async {
                let (_, c) = app.get(&format!("/api/v1/campaigns/{id}")).await;
                (c["data"]["state"] == "completed").then(|| (id, c["data"].clone()))
            })
            .await
        }
    };
    // The opt-out arrives before the campaign runs (the webhook is applied before the
    // simulator's POST is answered).
    eventually(10, "the opt-out recorded", || async {
        let (_, c) = app.get(&format!("/api/v1/channels/{channel}/health")).await;
        c["data"].is_object().then_some(())
    })
    .await;
    let (id, done) = run(vec!["5511977770001", "5511977770002"]).await;
    assert_eq!(done["stats"]["skipped"], 1, "{done}");
    let s = app.sim_summary().await;
    assert!(s["per_recipient"].get("5511977770001").is_none(), "{s}");
    let (_, report) = app
        .get(&format!(
            "/api/v1/reports/campaign-messages?campanha={id}&limit=10"
        ))
        .await;
    let skipped = report["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["to"] == "5511977770001" || m["phone"] == "5511977770001")
        .cloned()
        .unwrap_or_default();
    assert!(
        skipped.to_string().contains("opt-out"),
        "the reason is recorded: {report}"
    );
    // Resumed: sent again.
    sim(
        &app,
        &format!("/_sim/numbers/{}/preferences", n.phone_number_id),
        json!({"from": "5511977770001", "value": "resume"}),
    )
    .await;
    let (_, done) = run(vec!["5511977770001"]).await;
    assert_eq!(done["stats"]["skipped"], 0, "{done}");
}

/// A field signed by no secret of the WABA is refused and changes nothing.
async fn an_unsigned_field_changes_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, n) = app.connect_channel().await;
    let bm = bm_id(&app, &n).await;
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": n.waba_id, "time": 1, "changes": [{"field": "business_capability_update", "value": {"max_daily_conversations_per_business": 100000}}]}]}).to_string();
    let forged = provider::signature::sign("not-the-secret", body.as_bytes());
    assert_eq!(
        app.provider_post(&body, &forged).await,
        StatusCode::UNAUTHORIZED
    );
    let (_, b) = app.get(&format!("/api/v1/bms/{bm}")).await;
    assert_ne!(b["data"]["tier"], "TIER_100K", "{b}");
    let signed = provider::signature::sign(&n.app_secret, body.as_bytes());
    assert_eq!(app.provider_post(&body, &signed).await, StatusCode::OK);
    let (_, b) = app.get(&format!("/api/v1/bms/{bm}")).await;
    assert_eq!(b["data"]["tier"], "TIER_100K", "{b}");
}

/// Issue 48 item 1: every inbound kind the provider documents reaches the integrator whole
/// in `message.received` (`message.content`), and `GET /messages/{id}` answers the same: the
/// button or list row tapped, a location, shared contacts, an order, a reaction (naming our
/// message), a quoted message, an ad referral, a changed number, an unsupported message's
/// error, voice and animated flags — and what no type models, under `raw`.
async fn every_inbound_kind_reaches_the_integrator_whole(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, n) = app.connect_channel().await;
    let r = Receiver::start().await;
    app.subscribe(channel, &r, &["message.received"]).await;
    let (status, sent) = app
        .post("/api/v1/messages", json!({"to": "5511977770000", "template": {"name": "hello_world", "language": "en_US"}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let ours = sent["data"]["id"].as_i64().unwrap();
    let wamid = eventually(10, "the send answered", || async {
        let (_, m) = app.get(&format!("/api/v1/messages/{ours}")).await;
        m["data"]["provider_message_id"]
            .as_str()
            .map(str::to_string)
    })
    .await;
    let quoted = json!({"from": "5511977770000", "id": wamid, "forwarded": true, "frequently_forwarded": false});
    let referral = json!({"source_url": "https://fb.me/ad1", "source_id": "ad1", "source_type": "ad", "headline": "Promo", "body": "Só hoje", "media_type": "image", "image_url": "https://x.example/i.jpg", "ctwa_clid": "clid-1", "welcome_message": {"text": "Olá!"}});
    // (kind, payload, extra members, what must arrive under `content`)
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "interactive",
            json!({"type": "button_reply", "button_reply": {"id": "btn-sim", "title": "Sim"}}),
            json!({"context": quoted}),
            json!({"interactive": {"type": "button_reply", "button_reply": {"id": "btn-sim", "title": "Sim"}}, "context": {"provider_message_id": wamid, "message_id": ours, "forwarded": true, "frequently_forwarded": false, "from": "5511977770000"}}),
        ),
        (
            "interactive",
            json!({"type": "list_reply", "list_reply": {"id": "row-2", "title": "Boleto", "description": "Vence amanhã"}}),
            json!({}),
            json!({"interactive": {"list_reply": {"id": "row-2", "title": "Boleto", "description": "Vence amanhã"}}}),
        ),
        (
            "interactive",
            json!({"type": "nfm_reply", "nfm_reply": {"name": "flow", "body": "Sent", "response_json": "{\"cpf\":\"123\"}"}}),
            json!({}),
            json!({"interactive": {"nfm_reply": {"name": "flow", "response_json": "{\"cpf\":\"123\"}"}}}),
        ),
        (
            "button",
            json!({"payload": "QUERO", "text": "Quero"}),
            json!({"context": {"from": "5511977770000", "id": wamid}}),
            json!({"button": {"payload": "QUERO", "text": "Quero"}, "context": {"message_id": ours}}),
        ),
        (
            "location",
            json!({"latitude": -23.5505, "longitude": -46.6333, "name": "Sé", "address": "Praça da Sé, São Paulo", "url": "https://maps.example/se"}),
            json!({"referral": referral}),
            json!({"location": {"latitude": -23.5505, "longitude": -46.6333, "name": "Sé", "address": "Praça da Sé, São Paulo", "url": "https://maps.example/se"}, "referral": referral}),
        ),
        (
            "contacts",
            json!([{"name": {"formatted_name": "Ana Souza", "first_name": "Ana", "last_name": "Souza"}, "phones": [{"phone": "+55 11 98888-0000", "wa_id": "5511988880000", "type": "CELL"}], "emails": [{"email": "ana@example.com", "type": "WORK"}], "org": {"company": "ACME", "title": "CFO"}, "urls": [{"url": "https://acme.example", "type": "WORK"}], "addresses": [{"street": "Rua A, 1", "city": "São Paulo", "country_code": "BR", "type": "WORK"}], "birthday": "1990-01-31"}]),
            json!({}),
            json!({"contacts": [{"name": {"formatted_name": "Ana Souza"}, "phones": [{"wa_id": "5511988880000"}], "emails": [{"email": "ana@example.com"}], "org": {"company": "ACME"}, "urls": [{"url": "https://acme.example"}], "addresses": [{"city": "São Paulo"}], "birthday": "1990-01-31"}]}),
        ),
        (
            "reaction",
            json!({"message_id": wamid, "emoji": "👍"}),
            json!({}),
            json!({"reaction": {"provider_message_id": wamid, "message_id": ours, "emoji": "👍", "removed": false}}),
        ),
        (
            "reaction",
            json!({"message_id": wamid}),
            json!({}),
            json!({"reaction": {"message_id": ours, "removed": true}}),
        ),
        (
            "order",
            json!({"catalog_id": "cat-1", "text": "sem cebola", "product_items": [{"product_retailer_id": "sku-1", "quantity": 2, "item_price": 10.5, "currency": "BRL"}]}),
            json!({}),
            json!({"order": {"catalog_id": "cat-1", "text": "sem cebola", "product_items": [{"product_retailer_id": "sku-1", "quantity": 2, "item_price": 10.5, "currency": "BRL"}]}}),
        ),
        (
            "system",
            json!({"body": "Ana changed from 5511977770001 to 5511977770009", "wa_id": "5511977770009", "type": "user_changed_number"}),
            json!({}),
            json!({"system": {"wa_id": "5511977770009", "type": "user_changed_number"}}),
        ),
        (
            "unsupported",
            json!([{"code": 131051, "title": "Message type unknown", "message": "Message type unknown", "error_data": {"details": "Message type is currently not supported."}}]),
            json!({}),
            json!({"errors": [{"code": 131051, "title": "Message type unknown", "error_data": {"details": "Message type is currently not supported."}}]}),
        ),
        (
            "hologram",
            json!({"depth": 3}),
            json!({"from_user_id": "BR.99"}),
            json!({"raw": {"hologram": {"depth": 3}, "from_user_id": "BR.99"}}),
        ),
    ];
    let media = [
        (
            "audio",
            json!({"voice": true}),
            json!({"audio": {"voice": true, "mime_type": "audio/ogg; codecs=opus"}}),
        ),
        (
            "sticker",
            json!({"animated": true}),
            json!({"sticker": {"animated": true, "mime_type": "image/webp"}}),
        ),
    ];
    let mut expected = Vec::new();
    for (i, (kind, payload, extra, want)) in cases.iter().enumerate() {
        let from = format!("55119666600{i:02}");
        sim(&app, "/_sim/inbound", json!({"phone_number_id": n.phone_number_id, "from": from, "type": kind, "payload": payload, "extra": extra})).await;
        expected.push((from, *kind, want.clone()));
    }
    for (i, (kind, m, want)) in media.iter().enumerate() {
        let from = format!("55119555500{i:02}");
        sim(
            &app,
            "/_sim/inbound",
            json!({"phone_number_id": n.phone_number_id, "from": from, "type": kind, "media": m}),
        )
        .await;
        expected.push((from, *kind, want.clone()));
    }
    let got = eventually(15, "every inbound kind told", || async {
        let e: Vec<Value> = r
            .events()
            .iter()
            .map(|c| c.json())
            .filter(|e| e["event"] == "message.received")
            .collect();
        (e.len() == expected.len()).then_some(e)
    })
    .await;
    for (from, kind, want) in &expected {
        let event = got
            .iter()
            .find(|e| e["data"]["contact"]["phone"] == from.as_str())
            .unwrap_or_else(|| panic!("no message.received from {from}"));
        let content = &event["data"]["message"]["content"];
        assert_eq!(content["type"], *kind, "{event}");
        assert_contains(content, want, &format!("{kind} from {from}"));
        let id = event["data"]["message"]["id"].as_i64().unwrap();
        let (status, read) = app.get(&format!("/api/v1/messages/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{read}");
        assert_eq!(
            &read["data"]["content"], content,
            "GET answers what the event carried"
        );
    }
}

/// Every member of `want` is in `got` with the same value (objects compared member by
/// member, arrays element by element).
fn assert_contains(got: &Value, want: &Value, what: &str) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, v) in w {
                let inner = g
                    .get(k)
                    .unwrap_or_else(|| panic!("{what}: no `{k}` in {got}"));
                assert_contains(inner, v, &format!("{what}.{k}"));
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            assert_eq!(g.len(), w.len(), "{what}: {got}");
            for (a, b) in g.iter().zip(w) {
                assert_contains(a, b, what);
            }
        }
        _ => assert_eq!(got, want, "{what}"),
    }
}

on_both_backends! {
    inbound_kinds => every_inbound_kind_reaches_the_integrator_whole;
    fields => every_field_is_acted_on;
    opt_out => marketing_campaigns_skip_opted_out_contacts;
    unsigned => an_unsigned_field_changes_nothing;
}
