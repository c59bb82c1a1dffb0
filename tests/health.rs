//! Channels with live health: registration, quality events, WABA bans, BM sync, payment locks,
//! actor restarts, and the overview.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn sim(app: &TestApp, method: reqwest::Method, path: &str, body: Value) -> Value {
    let r = app
        .http
        .request(method, format!("http://{}{path}", app.sim_addr))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap_or(Value::Null)
}

async fn health(app: &TestApp, channel_id: i64) -> Value {
    let (status, body) = app
        .get(&format!("/api/v1/channels/{channel_id}/health"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["data"].clone()
}

async fn template(app: &TestApp, channel_id: i64, to: &str) -> (StatusCode, Value) {
    app.post("/api/v1/messages", json!({"to": to, "channel_id": channel_id, "template": {"name": "hello_world", "language": "en_US"}})).await
}

async fn a_number_is_linked_to_a_waba_with_code_and_with_pin(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (lender, number) = app.connect_channel().await;
    let receiver = Receiver::start().await;

    // Without a PIN: SMS code, then verify-code registers it.
    let (status, body) = app
        .post(
            &format!("/api/v1/wabas/{}/numbers", number.waba_id),
            json!({"phone": "11977776666", "verified_name": "Loja Filial"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let d = &body["data"];
    assert_eq!(
        (d["phone"].as_str(), d["code_requested"].as_bool()),
        (Some("5511977776666"), Some(true))
    );
    assert!(
        d["bm_id"].as_i64().is_some(),
        "the BM is known from the WABA's owner"
    );
    let channel_id = d["channel_id"].as_i64().unwrap();
    app.subscribe(channel_id, &receiver, &["session.status"])
        .await;
    let (_, cfg) = app
        .get(&format!("/api/v1/channels/{channel_id}/official"))
        .await;
    assert_eq!(cfg["data"]["status"], "PENDING");
    let pnid = cfg["data"]["phone_number_id"].as_str().unwrap().to_string();
    let (status, err) = app
        .post(
            &format!("/api/v1/channels/{channel_id}/verify-code"),
            json!({"code": "000000"}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_code")),
        "a wrong code is the operator's mistake, with the provider's reason: {err}"
    );
    assert_eq!(err["provider_code"], 136025);
    let code = sim(
        &app,
        reqwest::Method::GET,
        &format!("/_sim/numbers/{pnid}/code"),
        Value::Null,
    )
    .await["data"]["code"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, body) = app
        .post(
            &format!("/api/v1/channels/{channel_id}/verify-code"),
            json!({"code": code}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (
            body["data"]["active"].as_bool(),
            body["data"]["pin_required"].as_bool()
        ),
        (Some(true), Some(false))
    );
    // Registered and read at the provider: a new number operates (`ok`) and says it is in
    // warm-up in its next action (issue 17: the warm-up never takes the place of `ok`).
    let h = health(&app, channel_id).await;
    assert_eq!(
        (h["code"].as_str(), h["good"].as_bool()),
        (Some("ok"), Some(true)),
        "{h}"
    );
    assert_eq!(h["next_action"], engine::channel::WARMUP_ACTION, "{h}");
    let (_, cfg) = app
        .get(&format!("/api/v1/channels/{channel_id}/official"))
        .await;
    assert_eq!(cfg["data"]["status"], "WORKING");
    let event = eventually(10, "session.status", || async {
        receiver
            .events()
            .into_iter()
            .find(|c| c.event() == "session.status")
    })
    .await;
    assert_eq!(
        (
            event.json()["data"]["status"].as_str(),
            event.json()["data"]["previous_status"].as_str()
        ),
        (Some("WORKING"), Some("PENDING"))
    );
    let (status, _) = template(&app, channel_id, "5511955550000").await;
    assert_eq!(status, StatusCode::CREATED);

    // With a PIN at the provider: VOICE later, then verify-code asks for the PIN.
    let pinned = app
        .sim
        .create_number(provider::sim::CreateNumber {
            waba_id: Some(number.waba_id.clone()),
            registered: Some(false),
            pin: Some("246810".into()),
            ..Default::default()
        })
        .unwrap();
    let (_, bm) = app.get("/api/v1/wabas").await;
    let bm_id = bm["data"][0]["bm"]["id"].as_i64().unwrap();
    let (_, sync) = app
        .post(&format!("/api/v1/bms/{bm_id}/sync"), json!({}))
        .await;
    let pinned_channel = sync["data"]["created_numbers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["phone_number_id"] == pinned.phone_number_id.as_str())
        .unwrap()["channel_id"]
        .as_i64()
        .unwrap();
    let (status, body) = app
        .post(
            &format!("/api/v1/channels/{pinned_channel}/request-code"),
            json!({"method": "VOICE"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let code = sim(
        &app,
        reqwest::Method::GET,
        &format!("/_sim/numbers/{}/code", pinned.phone_number_id),
        Value::Null,
    )
    .await["data"]["code"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, body) = app
        .post(
            &format!("/api/v1/channels/{pinned_channel}/verify-code"),
            json!({"code": code}),
        )
        .await;
    assert_eq!(
        (
            body["data"]["active"].as_bool(),
            body["data"]["pin_required"].as_bool()
        ),
        (Some(false), Some(true)),
        "{body}"
    );
    let (status, err) = app
        .post(
            &format!("/api/v1/channels/{pinned_channel}/register"),
            json!({"pin": "123"}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_pin"))
    );
    let (status, err) = app
        .post(
            &format!("/api/v1/channels/{pinned_channel}/register"),
            json!({"pin": "111111"}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("registro_recusado")),
        "the provider refuses a PIN that is not the number's: {err}"
    );
    assert!(err["message"].as_str().unwrap().contains("PIN"), "{err}");
    let (status, body) = app
        .post(
            &format!("/api/v1/channels/{pinned_channel}/register"),
            json!({"pin": "246810"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["active"], true);

    // The spec's validation of new numbers.
    for (body, field) in [
        (
            json!({"phone": "5511977776666", "verified_name": "Loja"}),
            "phone",
        ),
        (
            json!({"phone": "1197777", "verified_name": "Loja"}),
            "phone",
        ),
        (
            json!({"phone": "11977776666", "verified_name": "Lj"}),
            "verified_name",
        ),
        (
            json!({"phone": "11977776666", "verified_name": "Loja", "method": "FAX"}),
            "method",
        ),
    ] {
        let (status, err) = app
            .post(
                &format!("/api/v1/wabas/{}/numbers", number.waba_id),
                body.clone(),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {err}");
        assert_eq!(err["field"], field, "{err}");
    }
    let (status, _) = app
        .post(
            "/api/v1/wabas/999/numbers",
            json!({"phone": "11977776666", "verified_name": "Loja"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The number is created but the provider fails to send the code (issue 17): the 502
    // (`provider_unavailable`, retryable: D-107) names the channel, so the code can be asked
    // again on it.
    let r = app
        .http
        .put(format!("http://{}/_sim/faults", app.sim_addr))
        .json(&json!({"next_errors": [{"waba_id": number.waba_id, "edge": "request_code", "code": 131000}]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let (status, err) = app
        .post(
            &format!("/api/v1/wabas/{}/numbers", number.waba_id),
            json!({"phone": "11977775555", "verified_name": "Loja Três"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{err}");
    let created = err["channel_id"]
        .as_i64()
        .expect("the 502 names the channel");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains(&created.to_string()),
        "{err}"
    );
    let (status, again) = app
        .post(
            &format!("/api/v1/channels/{created}/request-code"),
            json!({"method": "SMS"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    let _ = lender;
}

async fn quality_red_blocks_business_initiated_sends_until_it_recovers(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    app.inbound(&number.phone_number_id, "5511944443333", "Oi")
        .await;
    eventually(10, "window open", || async {
        app.runtime
            .store()
            .last_inbound_at(channel_id, "5511944443333")
            .await
            .unwrap()
            .map(|_| ())
    })
    .await;
    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/numbers/{}/quality", number.phone_number_id),
        json!({"quality": "RED"}),
    )
    .await;
    let h = eventually(10, "RED in health", || async {
        let h = health(&app, channel_id).await;
        (h["code"] == "qualidade_red").then_some(h)
    })
    .await;
    assert_eq!(
        (h["tone"].as_str(), h["good"].as_bool()),
        (Some("bad"), Some(false))
    );
    let (status, err) = template(&app, channel_id, "5511944443333").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("qualidade_red")),
        "{err}"
    );
    let (status, body) = app.post("/api/v1/messages", json!({"to": "5511944443333", "channel_id": channel_id, "text": "Respondendo na janela"})).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "a reply inside the window stays allowed: {body}"
    );
    let (_, list) = app.get("/api/v1/channels?quality=RED").await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    assert_eq!(list["data"][0]["can_send"], "BLOCKED");
    let (_, list) = app.get("/api/v1/channels?tone=ok").await;
    assert_eq!(list["data"], json!([]));

    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/numbers/{}/quality", number.phone_number_id),
        json!({"quality": "GREEN", "tier": "TIER_2K"}),
    )
    .await;
    let h = eventually(10, "GREEN again", || async {
        let h = health(&app, channel_id).await;
        // A new TIER_250 number in warm-up (D-031) reads as operating.
        (h["code"] == "ok").then_some(h)
    })
    .await;
    assert_eq!(h["limit_24h"], 2000);
    let (status, _) = template(&app, channel_id, "5511944443333").await;
    assert_eq!(status, StatusCode::CREATED);
    // The gauges an operator graphs.
    let metrics = app
        .http
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for g in [
        "disparo_channel_quality",
        "disparo_channel_limit_24h",
        "disparo_channel_sent_24h",
        "disparo_channel_available",
    ] {
        assert!(
            metrics.contains(&format!("{g}{{channel_id=\"{channel_id}\"}}")),
            "{g}"
        );
    }
}

async fn a_waba_ban_comes_first_in_the_overview(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (red_channel, red) = app.connect_channel().await;
    let (banned_channel, banned) = app.connect_channel().await;
    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/numbers/{}/quality", red.phone_number_id),
        json!({"quality": "YELLOW"}),
    )
    .await;
    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/wabas/{}/account-update", banned.waba_id),
        json!({"event": "DISABLED_UPDATE", "ban_state": "DISABLE"}),
    )
    .await;
    let overview = eventually(10, "ban in the overview", || async {
        let (_, o) = app.get("/api/v1/overview").await;
        (o["data"]["needs_action"].as_array().map(|a| a.len()) >= Some(3)).then_some(o)
    })
    .await;
    let needs = overview["data"]["needs_action"].as_array().unwrap();
    assert_eq!(needs[0]["code"], "waba_banida", "{overview}");
    assert_eq!(needs[0]["type"], "waba");
    assert_eq!(needs[1]["id"], banned_channel.to_string());
    assert_eq!(needs.last().unwrap()["code"], "qualidade_yellow");
    assert_eq!(needs.last().unwrap()["id"], red_channel.to_string());
    assert_eq!(overview["data"]["numbers"]["total"], 2);
    assert_eq!(overview["data"]["numbers"]["bad"], 1);
    assert_eq!(overview["data"]["numbers"]["attention"], 1);
    let (status, err) = template(&app, banned_channel, "5511933332222").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("waba_banida"))
    );
    let (_, bad) = app.get("/api/v1/wabas?health=bad").await;
    assert_eq!(bad["data"].as_array().unwrap().len(), 1);
    assert_eq!(bad["data"][0]["id"], banned.waba_id.as_str());
    assert_eq!(bad["data"][0]["standing"], "banned");
    assert_eq!(bad["data"][0]["has_credential"], true);
    let (status, _) = app.get("/api/v1/wabas?health=terrible").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

async fn bm_sync_picks_up_new_numbers_and_lists_vanished_ones(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, first) = app.connect_channel().await;
    let second = app
        .sim
        .create_number(provider::sim::CreateNumber {
            waba_id: Some(first.waba_id.clone()),
            ..Default::default()
        })
        .unwrap();
    let (_, wabas) = app.get("/api/v1/wabas").await;
    let bm_id = wabas["data"][0]["bm"]["id"].as_i64().unwrap();
    let (status, body) = app
        .post(&format!("/api/v1/bms/{bm_id}/sync"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let created = body["data"]["created_numbers"].as_array().unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(
        created[0]["phone_number_id"],
        second.phone_number_id.as_str()
    );
    assert_eq!(body["data"]["missing_numbers"], json!([]));
    let new_channel = created[0]["channel_id"].as_i64().unwrap();
    let (status, _) = template(&app, new_channel, "5511922221111").await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "the new channel sends with the BM's credential"
    );

    sim(
        &app,
        reqwest::Method::DELETE,
        &format!("/_sim/numbers/{}", second.phone_number_id),
        Value::Null,
    )
    .await;
    let (_, body) = app
        .post(&format!("/api/v1/bms/{bm_id}/sync"), json!({}))
        .await;
    assert_eq!(body["data"]["created_numbers"], json!([]));
    assert_eq!(
        body["data"]["missing_numbers"][0]["channel_id"],
        new_channel
    );
    assert_eq!(health(&app, new_channel).await["code"], "desconectado");
    let (_, bm) = app.get(&format!("/api/v1/bms/{bm_id}")).await;
    assert_eq!(bm["data"]["numbers"].as_array().unwrap().len(), 2);
    assert_eq!(bm["data"]["payment"], "ok");
    let other = app.other_account_token().await;
    let (status, _) = app.get_as(&other, &format!("/api/v1/bms/{bm_id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn a_payment_check_releases_a_payment_lock(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/businesses/{}/payment", number.business_id),
        json!({"ok": false}),
    )
    .await;
    let (status, err) = template(&app, channel_id, "5511911112222").await;
    assert_eq!(
        (status, err["provider_code"].as_i64()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some(131042)),
        "{err}"
    );
    let h = eventually(5, "payment lock", || async {
        let h = health(&app, channel_id).await;
        (h["code"] == "pagamento_bloqueado").then_some(h)
    })
    .await;
    assert_eq!(h["tone"], "bad");
    let (status, err) = template(&app, channel_id, "5511911112222").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("pagamento_bloqueado")
        )
    );
    let (_, check) = app
        .post(
            &format!("/api/v1/channels/{channel_id}/payment-check"),
            json!({}),
        )
        .await;
    assert_eq!(check["data"]["paid"], false, "still broken at the provider");
    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/businesses/{}/payment", number.business_id),
        json!({"ok": true}),
    )
    .await;
    let (status, check) = app
        .post(
            &format!("/api/v1/channels/{channel_id}/payment-check"),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, check["data"]["paid"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{check}"
    );
    assert_eq!(health(&app, channel_id).await["code"], "ok");
    let (status, _) = template(&app, channel_id, "5511911112222").await;
    assert_eq!(status, StatusCode::CREATED);
}

async fn a_killed_channel_actor_comes_back_with_the_same_health(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    for i in 0..5 {
        let (status, _) = template(&app, channel_id, &format!("551190000000{i}")).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/numbers/{}/quality", number.phone_number_id),
        json!({"quality": "YELLOW"}),
    )
    .await;
    let before = eventually(10, "yellow", || async {
        let h = health(&app, channel_id).await;
        (h["code"] == "qualidade_yellow").then_some(h)
    })
    .await;
    assert_eq!(before["sent_24h"], 5);
    let old = app
        .runtime
        .registry()
        .get(channel_id)
        .unwrap()
        .actor
        .get_id();
    app.runtime.registry().get(channel_id).unwrap().actor.kill();
    eventually(10, "restarted", || async {
        app.runtime
            .registry()
            .get(channel_id)
            .filter(|e| e.actor.get_id() != old)
            .map(|_| ())
    })
    .await;
    let after = health(&app, channel_id).await;
    assert_eq!(after, before, "rebuilt from storage");
    let (status, _) = template(&app, channel_id, "5511900000000").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        health(&app, channel_id).await["sent_24h"],
        5,
        "a recipient already reached counts once"
    );
}

async fn credentials_are_revalidated_and_the_provider_is_reread(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    let (status, err) = app
        .http
        .patch(app.url(&format!("/api/v1/channels/{channel_id}/official")))
        .bearer_auth(&app.token)
        .json(&json!({"access_token": "EAAGwrong"}))
        .send()
        .await
        .map(|r| (r.status(), r))
        .unwrap();
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        err.json::<Value>().await.unwrap()["code"],
        "credencial_invalida"
    );
    let r = app
        .http
        .patch(app.url(&format!("/api/v1/channels/{channel_id}/official")))
        .bearer_auth(&app.token)
        .json(&json!({"name": "Renomeado", "access_token": "", "app_secret": ""}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.json::<Value>().await.unwrap()["data"]["name"],
        "Renomeado"
    );
    let (status, _) = template(&app, channel_id, "5511966665555").await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "blank secrets kept the stored ones"
    );
    let (status, body) = app
        .post(&format!("/api/v1/channels/{channel_id}/verify"), json!({}))
        .await;
    assert_eq!(
        (status, body["data"]["ok"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{body}"
    );
    // A quality change made at the provider without a webhook shows after a sync.
    let r = app
        .http
        .put(format!("http://{}/_sim/config", app.sim_addr))
        .json(&json!({"webhook_url": null}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/numbers/{}/quality", number.phone_number_id),
        json!({"quality": "YELLOW", "tier": "TIER_10K"}),
    )
    .await;
    let (_, body) = app
        .post(&format!("/api/v1/channels/{channel_id}/sync"), json!({}))
        .await;
    assert_eq!(body["data"]["channel"]["quality"], "YELLOW");
    assert_eq!(body["data"]["channel"]["tier"], "TIER_10K");
    assert_eq!(body["data"]["channel"]["health"]["limit_24h"], 10_000);
    let (status, list) = app
        .get(&format!("/api/v1/channels/{channel_id}/templates"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["data"][0]["name"], "hello_world");
    assert_eq!(list["data"][0]["params"], 0);
}

async fn numbers_of_one_bm_share_its_24h_limit(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // Two numbers of one portfolio whose limit is 50 unique users per 24 h.
    let a = app
        .sim
        .create_number(provider::sim::CreateNumber {
            tier: Some("TIER_50".into()),
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let b = app
        .sim
        .create_number(provider::sim::CreateNumber {
            tier: Some("TIER_50".into()),
            waba_id: Some(a.waba_id.clone()),
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let mut ids = Vec::new();
    for n in [&a, &b] {
        let (status, body) = app
            .post("/api/v1/channels/official", json!({"phone_number_id": n.phone_number_id, "waba_id": n.waba_id, "access_token": n.access_token, "app_secret": n.app_secret}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        ids.push(body["data"]["id"].as_i64().unwrap());
    }
    for i in 0..30 {
        assert_eq!(
            template(&app, ids[0], &format!("55119700000{i:02}"))
                .await
                .0,
            StatusCode::CREATED
        );
    }
    let hb = health(&app, ids[1]).await;
    assert_eq!(
        (hb["sent_24h"].as_i64(), hb["available"].as_i64()),
        (Some(0), Some(20)),
        "B's headroom is the BM's: {hb}"
    );
    for i in 0..20 {
        assert_eq!(
            template(&app, ids[1], &format!("55119600000{i:02}"))
                .await
                .0,
            StatusCode::CREATED
        );
    }
    let hb = health(&app, ids[1]).await;
    assert_eq!(
        (
            hb["sent_24h"].as_i64(),
            hb["available"].as_i64(),
            hb["code"].as_str()
        ),
        (Some(20), Some(0), Some("limite_24h_esgotado")),
        "{hb}"
    );
    let (status, err) = template(&app, ids[1], "5511950000000").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("limite_24h_esgotado"))
    );
    // The quota that refused it, its figures and when room returns (issue 49): the BM's 50,
    // free again 24 h after its first recipient.
    assert_eq!(
        (&err["scope"], &err["limit"], &err["remaining"]),
        (&json!("bm"), &json!(50), &json!(0)),
        "{err}"
    );
    let retry = err["retry_after"].as_i64().expect("retry_after");
    assert!((86_000..=86_400).contains(&retry), "{err}");
    assert!(
        err["reset_at"]
            .as_str()
            .is_some_and(|t| t.starts_with("20") && t.contains('T')),
        "{err}"
    );
    // A user already reached by the BM costs nothing more.
    assert_eq!(
        template(&app, ids[1], "5511970000000").await.0,
        StatusCode::CREATED
    );
    let (_, wabas) = app.get("/api/v1/wabas").await;
    let bm_id = wabas["data"][0]["bm"]["id"].as_i64().unwrap();
    let (_, bm) = app.get(&format!("/api/v1/bms/{bm_id}")).await;
    assert_eq!(
        bm["data"]["sending"],
        json!({"limit_24h": 50, "sent_24h": 50, "available": 0})
    );
}

/// A number without a limit only estimates its 24 h recipients (engine::limits); when its
/// tier gains a limit, it learns from storage who already counts: a user reached before the
/// change still costs nothing once the new limit is used up.
async fn a_number_that_gains_a_limit_knows_who_already_counts(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let n = app
        .sim
        .create_number(provider::sim::CreateNumber {
            tier: Some("TIER_UNLIMITED".into()),
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let (status, body) = app
        .post("/api/v1/channels/official", json!({"phone_number_id": n.phone_number_id, "waba_id": n.waba_id, "access_token": n.access_token, "app_secret": n.app_secret}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["data"]["id"].as_i64().unwrap();
    for i in 0..5 {
        let (status, body) = template(&app, id, &format!("55119800000{i:02}")).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let h = health(&app, id).await;
    assert_eq!(
        (h["limit_24h"].as_i64(), h["sent_24h"].as_i64()),
        (Some(-1), Some(5)),
        "{h}"
    );

    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/numbers/{}/quality", n.phone_number_id),
        json!({"quality": "GREEN", "tier": "TIER_50"}),
    )
    .await;
    eventually(10, "the 50 limit", || async {
        (health(&app, id).await["limit_24h"] == 50).then_some(())
    })
    .await;
    for i in 5..50 {
        let (status, body) = template(&app, id, &format!("55119800000{i:02}")).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let h = health(&app, id).await;
    assert_eq!(
        (h["sent_24h"].as_i64(), h["available"].as_i64()),
        (Some(50), Some(0)),
        "{h}"
    );
    let (status, err) = template(&app, id, "5511980000099").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("limite_24h_esgotado"))
    );
    assert_eq!(
        (&err["scope"], &err["limit"], &err["remaining"]),
        (&json!("number"), &json!(50), &json!(0)),
        "{err}"
    );
    assert!(
        err["retry_after"].as_i64().is_some_and(|s| s > 86_000),
        "{err}"
    );
    let (status, body) = template(&app, id, "5511980000001").await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "reached before the limit came, so it counts already: {body}"
    );
}

/// Issue 17: the fields that were always empty are filled — a BM's verification read at the
/// provider, a WABA's `layouts_by_status`, a send result's `header`.
async fn the_fields_integrators_read_are_filled(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let n = app
        .sim
        .create_number(provider::sim::CreateNumber {
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let r = app
        .http
        .post(format!(
            "http://{}/_sim/businesses/{}/verification",
            app.sim_addr, n.business_id
        ))
        .json(&json!({"status": "pending"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let (status, c) = app
        .post("/api/v1/channels/official", json!({"phone_number_id": n.phone_number_id, "waba_id": n.waba_id, "access_token": n.access_token, "app_secret": n.app_secret}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let channel = c["data"]["id"].as_i64().unwrap();
    let (_, overview) = app.get("/api/v1/wabas").await;
    let waba = overview["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == n.waba_id.as_str())
        .cloned()
        .unwrap();
    let bm_id = waba["bm"]["id"].as_i64().unwrap();
    let (_, bm) = app.get(&format!("/api/v1/bms/{bm_id}")).await;
    assert_eq!(
        bm["data"]["verification"], "pending",
        "read at the provider: {bm}"
    );
    assert_eq!(waba["layouts_by_status"], json!({}), "no template yet");

    let t = app
        .approved_template(
            json!({"name": "Com cabeçalho", "header_text": "Seu pedido", "body": "Olá {{1}}, seu pedido saiu.", "var_map": {"1": {"field": "nome"}}}),
            &[channel],
        )
        .await;
    app.post(
        "/api/v1/templates",
        json!({"name": "Rascunho", "body": "Só um rascunho."}),
    )
    .await;
    let (_, overview) = app.get("/api/v1/wabas").await;
    let waba = overview["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == n.waba_id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(waba["layouts_by_status"], json!({"approved": 1}), "{waba}");

    let (status, sent) = app
        .post(
            "/api/v1/messages",
            json!({"channel_id": channel, "to": "5511944445555", "template": {"id": t, "vars": {"nome": "Ana"}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(
        sent["data"]["header"],
        json!({"type": "text", "text": "Seu pedido"}),
        "{sent}"
    );
    let id = sent["data"]["id"].as_i64().unwrap();
    let (_, read) = app.get(&format!("/api/v1/messages/{id}")).await;
    assert_eq!(read["data"]["header"]["text"], "Seu pedido");
    // A template sent by name whose layout disparo does not hold: no header to show.
    let (_, plain) = app
        .post(
            "/api/v1/messages",
            json!({"channel_id": channel, "to": "5511944445556", "template": {"name": "hello_world", "language": "en_US"}}),
        )
        .await;
    assert_eq!(plain["data"]["header"], Value::Null, "{plain}");
}

/// Issue 48 item 4: a number's health changes reach the integrator as `channel.health`
/// events — one per change, with what changed and the values before and after: RED, the
/// recovery with a new tier, and its WABA's ban.
async fn health_changes_are_events(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    let r = Receiver::start().await;
    app.subscribe(
        channel_id,
        &r,
        &["channel.health", "waba.standing", "bm.tier"],
    )
    .await;
    let of_kind = |kind: &'static str| {
        r.events()
            .iter()
            .map(|c| c.json())
            .filter(|e| e["event"] == kind)
            .collect::<Vec<_>>()
    };
    let health_events = || of_kind("channel.health");
    let quality = |q: Value| {
        let app = &app;
        let path = format!("/_sim/numbers/{}/quality", number.phone_number_id);
        async move { sim(app, reqwest::Method::POST, &path, q).await }
    };
    quality(json!({"quality": "RED"})).await;
    let red = eventually(10, "channel.health for RED", || async {
        health_events().first().cloned()
    })
    .await;
    let d = &red["data"];
    assert_eq!(red["channel"]["id"], channel_id);
    assert_eq!(
        (
            d["previous"]["quality"].as_str(),
            d["current"]["quality"].as_str()
        ),
        (Some("GREEN"), Some("RED")),
        "{red}"
    );
    assert_eq!(
        (d["current"]["code"].as_str(), d["current"]["tone"].as_str()),
        (Some("qualidade_red"), Some("bad")),
        "{red}"
    );
    assert_eq!(d["health"]["code"], "qualidade_red");
    let changed: Vec<&str> = d["changed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        changed.contains(&"quality") && changed.contains(&"code"),
        "{red}"
    );
    // The same state again changes nothing: no second event for it.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(health_events().len(), 1, "one event per change");

    quality(json!({"quality": "GREEN", "tier": "TIER_2K"})).await;
    let back = eventually(10, "channel.health for the recovery", || async {
        health_events().get(1).cloned()
    })
    .await;
    let d = &back["data"];
    assert_eq!(
        (
            d["previous"]["code"].as_str(),
            d["current"]["code"].as_str()
        ),
        (Some("qualidade_red"), Some("ok")),
        "{back}"
    );
    assert_eq!(d["current"]["tier"], "TIER_2K", "{back}");
    let changed: Vec<&str> = d["changed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        changed.contains(&"tier") && changed.contains(&"quality"),
        "{back}"
    );

    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/wabas/{}/account-update", number.waba_id),
        json!({"event": "DISABLED_UPDATE", "ban_state": "DISABLE"}),
    )
    .await;
    let banned = eventually(10, "channel.health for the ban", || async {
        health_events().get(2).cloned()
    })
    .await;
    assert_eq!(
        banned["data"]["current"]["waba_standing"], "banned",
        "{banned}"
    );
    assert_eq!(
        banned["data"]["previous"]["waba_standing"], "ok",
        "{banned}"
    );
    let standing = eventually(10, "waba.standing", || async {
        of_kind("waba.standing").first().cloned()
    })
    .await;
    let d = &standing["data"];
    assert_eq!(
        (
            d["waba_id"].as_str(),
            d["previous_standing"].as_str(),
            d["standing"].as_str()
        ),
        (Some(number.waba_id.as_str()), Some("ok"), Some("banned")),
        "{standing}"
    );

    // The provider changes the BM's portfolio limit: `bm.tier` to its numbers.
    sim(
        &app,
        reqwest::Method::POST,
        &format!("/_sim/wabas/{}/capability", number.waba_id),
        json!({"max_daily_conversations_per_business": 2000}),
    )
    .await;
    let tier = eventually(10, "bm.tier", || async {
        of_kind("bm.tier").first().cloned()
    })
    .await;
    assert_eq!(
        (
            tier["data"]["tier"].as_str(),
            tier["data"]["limit_24h"].as_i64()
        ),
        (Some("TIER_2K"), Some(2000)),
        "{tier}"
    );
    assert_eq!(tier["channel"]["id"], channel_id);
    assert_eq!(of_kind("waba.standing").len(), 1, "one event per change");
}

on_both_backends! {
    health_events => health_changes_are_events;
    fields_filled => the_fields_integrators_read_are_filled;
    gained_limit => a_number_that_gains_a_limit_knows_who_already_counts;
    bm_limit => numbers_of_one_bm_share_its_24h_limit;
    registration => a_number_is_linked_to_a_waba_with_code_and_with_pin;
    quality_red => quality_red_blocks_business_initiated_sends_until_it_recovers;
    waba_ban => a_waba_ban_comes_first_in_the_overview;
    bm_sync => bm_sync_picks_up_new_numbers_and_lists_vanished_ones;
    payment => a_payment_check_releases_a_payment_lock;
    restart => a_killed_channel_actor_comes_back_with_the_same_health;
    credentials => credentials_are_revalidated_and_the_provider_is_reread;
}
