//! The walking skeleton end to end: integrator → disparo → simulator → status webhooks →
//! signed events to the integrator; and the edges around it (auth, tenancy, validation,
//! forged provider signatures, webhook retries).

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn a_template_message_travels_to_read_and_the_integrator_gets_signed_events(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, _) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    let (subscription_id, secret) = app
        .subscribe(channel_id, &receiver, &["message.sent", "message.ack"])
        .await;
    assert!(secret.starts_with("whsec_"));

    let (status, body) = app
        .post("/api/v1/messages", json!({"to": "5511988887777", "channel_id": channel_id, "template": {"name": "hello_world", "language": "en_US"}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let sent = &body["data"];
    assert_eq!(sent["to"], "5511988887777");
    assert_eq!(sent["type"], "template");
    assert_eq!(sent["channel_id"], channel_id);
    assert!(sent["conversation_id"].as_i64().is_some());
    let wamid = sent["provider_message_id"]
        .as_str()
        .expect("provider id")
        .to_string();
    assert!(wamid.starts_with("wamid."));
    let message_id = sent["id"].as_i64().unwrap();

    // The stored message reaches `read` through the simulator's status webhooks.
    let read = eventually(10, "message read", || async {
        let (_, m) = app.get(&format!("/api/v1/messages/{message_id}")).await;
        (m["data"]["status"] == "read").then_some(m)
    })
    .await;
    for field in ["sent_at", "delivered_at", "read_at"] {
        assert!(read["data"][field].is_string(), "{field} set: {read}");
    }

    // The receiver gets message.sent and the acks, each signed over its raw body.
    // Acks only move forward: sent, delivered, read (a `delivered` that arrives after `read`
    // is stale and reported by read already).
    eventually(10, "message.sent and the read ack", || async {
        let e = receiver.events();
        let read = e
            .iter()
            .any(|c| c.event() == "message.ack" && c.json()["data"]["ack_label"] == "read");
        (e.iter().any(|c| c.event() == "message.sent") && read).then_some(())
    })
    .await;
    // Attempts run concurrently: wait until the log has nothing pending, then read them all.
    eventually(10, "every delivery delivered", || async {
        let (_, log) = app
            .get(&format!("/api/v1/webhooks/{subscription_id}/deliveries"))
            .await;
        let rows = log["data"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .all(|d| d["status"] == "delivered")
            .then_some(())
    })
    .await;
    let events = receiver.events();
    for captured in &events {
        let header = captured
            .headers
            .get("x-svc-signature")
            .unwrap()
            .to_str()
            .unwrap();
        assert!(
            engine::webhook::verify_signature(&secret, &captured.body, header),
            "signature verifies"
        );
        assert!(!engine::webhook::verify_signature(
            "whsec_wrong",
            &captured.body,
            header
        ));
        let env = captured.json();
        assert_eq!(env["channel"]["id"], channel_id);
        assert!(env["delivery_id"].as_i64().is_some());
        assert!(env["created_at"].as_str().unwrap().ends_with("+00:00"));
    }
    let sent_event = events
        .iter()
        .find(|c| c.event() == "message.sent")
        .unwrap()
        .json();
    assert_eq!(
        sent_event["data"]["message"]["provider_message_id"],
        wamid.as_str()
    );
    // In the order disparo recorded them (delivery ids); arrival order is not guaranteed.
    let mut acks: Vec<Value> = events
        .iter()
        .map(Captured::json)
        .filter(|e| e["event"] == "message.ack")
        .collect();
    acks.sort_by_key(|e| e["delivery_id"].as_i64());
    let labels: Vec<String> = acks
        .iter()
        .map(|e| e["data"]["ack_label"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        labels.first().map(String::as_str),
        Some("sent"),
        "{labels:?}"
    );
    assert_eq!(
        labels.last().map(String::as_str),
        Some("read"),
        "{labels:?}"
    );
    assert!(
        labels.len() <= 3 && labels.iter().filter(|l| *l == "read").count() == 1,
        "{labels:?}"
    );
    let read_ack = events
        .iter()
        .map(Captured::json)
        .find(|e| e["data"]["ack_label"] == "read")
        .unwrap();
    assert_eq!(read_ack["data"]["engine_message_id"], wamid.as_str());
    assert_eq!(read_ack["data"]["provider_message_id"], wamid.as_str());
    assert_eq!(read_ack["data"]["message_id"], message_id);
    assert_eq!(read_ack["data"]["ack"], 3);

    // The delivery log lists them, delivered on the first attempt.
    let (status, log) = app
        .get(&format!("/api/v1/webhooks/{subscription_id}/deliveries"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let rows = log["data"].as_array().unwrap();
    assert!(rows.len() >= 4, "{log}");
    assert!(
        rows.iter()
            .all(|r| r["status"] == "delivered" && r["attempts"] == 1),
        "{log}"
    );

    // Every write went to the audit log under the token's name.
    let audit = app
        .runtime
        .store()
        .list_audit(app.account_id, 50)
        .await
        .unwrap();
    let actions: Vec<(&str, &str)> = audit
        .iter()
        .map(|a| (a.action.as_str(), a.target.as_str()))
        .collect();
    assert!(
        actions.contains(&("POST /api/v1/messages", "/api/v1/messages")),
        "{actions:?}"
    );
    assert!(actions.contains(&(
        "POST /api/v1/channels/official",
        "/api/v1/channels/official"
    )));
    assert!(audit.iter().all(|a| a.token_name == "ci-token"));
}

use common::Captured;

async fn requests_without_a_valid_token_get_401(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let r = app
        .http
        .get(app.url("/api/v1/channels"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let body: Value = r.json().await.unwrap();
    assert!(body["message"].as_str().unwrap().contains("Token"));
    let (status, _) = app
        .get_as("svc_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "/api/v1/channels")
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app.get_as("not-a-token", "/api/v1/channels").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app
        .post_as(
            "nope",
            "/api/v1/messages",
            json!({"to": "5511988887777", "text": "x"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Health needs no token.
    let r = app.http.get(app.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["data"]["database"]["ok"], true);
}

async fn another_accounts_records_answer_404(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, _) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    let (subscription_id, _) = app.subscribe(channel_id, &receiver, &["message.ack"]).await;
    let (status, body) = app.post("/api/v1/messages", json!({"to": "5511988887777", "template": {"name": "hello_world", "language": "en_US"}})).await;
    assert_eq!(status, StatusCode::CREATED);
    let message_id = body["data"]["id"].as_i64().unwrap();

    let intruder = app.other_account_token().await;
    for path in [
        format!("/api/v1/channels/{channel_id}/official"),
        format!("/api/v1/channels/{channel_id}/health"),
        format!("/api/v1/channels/{channel_id}/webhooks"),
        format!("/api/v1/webhooks/{subscription_id}/deliveries"),
        format!("/api/v1/messages/{message_id}"),
    ] {
        let (status, body) = app.get_as(&intruder, &path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert!(body.get("data").is_none());
    }
    let (status, _) = app
        .post_as(
            &intruder,
            &format!("/api/v1/channels/{channel_id}/webhooks"),
            json!({"url": "http://127.0.0.1:9/x", "events": ["message.ack"]}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app
        .post_as(&intruder, "/api/v1/messages", json!({"to": "5511988887777", "channel_id": channel_id, "template": {"name": "hello_world", "language": "en_US"}}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, list) = app.get_as(&intruder, "/api/v1/channels").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["data"], json!([]));
    // Ids that are not numbers are unknown records too.
    let (status, _) = app.get("/api/v1/channels/abc/official").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn bad_input_gets_a_clear_4xx_in_the_envelope(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, _) = app.connect_channel().await;
    let cases = [
        (json!({"to": "123", "text": "oi"}), "invalid_phone"),
        (
            json!({"to": "55 11 9abc-8888", "text": "oi"}),
            "invalid_phone",
        ),
        (
            json!({"to": "+5511999998888123456", "text": "oi"}),
            "invalid_phone",
        ),
        (json!({"text": "oi"}), "required"),
        (json!({"to": "5511999998888"}), "required"),
        (json!({"to": "5511999998888", "text": ""}), "invalid_text"),
        (
            json!({"to": "5511999998888", "text": "oi", "template": {"name": "x"}}),
            "ambiguous_content",
        ),
        (
            json!({"to": "5511999998888", "template": {"name": "Hello World"}}),
            "invalid_template_name",
        ),
        (
            json!({"to": 5511999998888i64, "text": "oi"}),
            "invalid_field",
        ),
        (
            json!({"to": "5511999998888", "text": "oi", "surprise": 1}),
            "invalid_field",
        ),
        (
            json!({"to": "5511999998888", "template": {"language": "pt_BR"}}),
            "required",
        ),
    ];
    for (body, code) in cases {
        let (status, err) = app.post("/api/v1/messages", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body} → {err}");
        assert_eq!(err["code"], code, "{body} → {err}");
        assert!(!err["message"].as_str().unwrap().is_empty());
        if code == "invalid_field" {
            // A field at fault is named (issue 49 item 4).
            assert!(
                err["field"].as_str().is_some_and(|f| !f.is_empty()),
                "{body} → {err}"
            );
        }
    }
    let (_, err) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511999998888", "text": "oi", "surprise": 1}),
        )
        .await;
    assert_eq!(err["field"], "surprise", "{err}");
    // A bad `limit` has one code, whatever is wrong with it and whichever list it pages.
    for path in [
        "/api/v1/channels?limit=abc",
        "/api/v1/channels?limit=0",
        "/api/v1/messages?limit=abc",
        "/api/v1/campaigns?limit=100000",
    ] {
        let (status, err) = app.get(path).await;
        assert_eq!(
            (status, err["code"].as_str(), err["field"].as_str()),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("invalid_limit"),
                Some("limit")
            ),
            "{path} → {err}"
        );
    }
    // Malformed JSON: 400. Not JSON: 415. Too large: 413.
    let r = app
        .http
        .post(app.url("/api/v1/messages"))
        .bearer_auth(&app.token)
        .header("content-type", "application/json")
        .body("{\"to\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "invalid_json");
    let r = app
        .http
        .post(app.url("/api/v1/messages"))
        .bearer_auth(&app.token)
        .body("to=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let huge = format!(
        "{{\"to\": \"5511999998888\", \"text\": \"{}\"}}",
        "a".repeat(2 * 1024 * 1024)
    );
    // (On a client of its own: the server answers before reading the whole body and closes.)
    let r = reqwest::Client::new()
        .post(app.url("/api/v1/messages"))
        .bearer_auth(&app.token)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Missing fields on connect; a bad subscription.
    let (status, err) = app
        .post("/api/v1/channels/official", json!({"phone_number_id": "1"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    let (status, err) = app
        .post(
            &format!("/api/v1/channels/{channel_id}/webhooks"),
            json!({"url": "ftp://x", "events": ["message.ack"]}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_url"))
    );
    let (status, err) = app
        .post(
            &format!("/api/v1/channels/{channel_id}/webhooks"),
            json!({"url": "http://127.0.0.1:1/x", "events": ["message.bogus"]}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("unknown_event"))
    );
    // Unknown routes and methods answer in the envelope too, a route with its own code
    // (issue 55): not "record not found".
    let (status, err) = app.get("/api/v1/nothing-here").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(err["code"], "route_not_found");
    let (status, err) = app.get("/api/v1/messages/999999").await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
}

async fn a_credential_the_provider_refuses_is_422_and_nothing_is_stored(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let number = app.sim.create_number(Default::default()).unwrap();
    let (status, err) = app
        .post("/api/v1/channels/official", json!({"phone_number_id": number.phone_number_id, "waba_id": number.waba_id, "access_token": "EAAGwrong"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(err["code"], "credencial_invalida");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("Invalid OAuth access token"),
        "{err}"
    );
    let (_, list) = app.get("/api/v1/channels").await;
    assert_eq!(list["data"], json!([]));
    // The right token connects; the same number twice is refused.
    let ok = json!({"phone_number_id": number.phone_number_id, "waba_id": number.waba_id, "access_token": number.access_token});
    let (status, body) = app.post("/api/v1/channels/official", ok.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["data"]["official"], true);
    assert_eq!(body["data"]["status"], "WORKING");
    assert_eq!(body["verification"]["ok"], true);
    assert_eq!(
        body["verification"]["verified_name"],
        number.verified_name.as_str()
    );
    let (status, _) = app.post("/api/v1/channels/official", ok).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // The official config shows this channel's own receiver and never the secrets.
    let id = body["data"]["id"].as_i64().unwrap();
    let (_, cfg) = app.get(&format!("/api/v1/channels/{id}/official")).await;
    assert_eq!(
        cfg["data"]["webhook"]["url"],
        app.url(&format!("/webhooks/messaging/{id}"))
    );
    assert_eq!(cfg["data"]["webhook"]["fields"], json!(["messages"]));
    let text = cfg.to_string();
    assert!(!text.contains(&number.access_token) && !text.contains(&number.app_secret));
}

async fn a_forged_provider_signature_is_refused_and_nothing_is_recorded(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    let (_, body) = app.post("/api/v1/messages", json!({"to": "5511988887777", "template": {"name": "hello_world", "language": "en_US"}})).await;
    let message_id = body["data"]["id"].as_i64().unwrap();
    let wamid = body["data"]["provider_message_id"]
        .as_str()
        .unwrap()
        .to_string();
    eventually(10, "read", || async {
        let (_, m) = app.get(&format!("/api/v1/messages/{message_id}")).await;
        (m["data"]["status"] == "read").then_some(())
    })
    .await;

    // A forged `failed` status and a forged inbound message, signed with the wrong secret.
    let forged = json!({"object": "whatsapp_business_account", "entry": [{"id": number.waba_id, "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": number.display_phone_number, "phone_number_id": number.phone_number_id},
        "contacts": [{"profile": {"name": "Mallory"}, "wa_id": "5511977776666"}],
        "messages": [{"from": "5511977776666", "id": "wamid.forged1", "timestamp": "1700000000", "type": "text", "text": {"body": "forged"}}],
        "statuses": [{"id": wamid, "status": "failed", "timestamp": "1700000000", "recipient_id": "5511988887777",
                      "errors": [{"code": 131026, "title": "Message undeliverable"}]}]
    }}]}]})
    .to_string();
    let wrong = provider::signature::sign("not-the-app-secret", forged.as_bytes());
    assert_eq!(
        app.provider_post(&forged, &wrong).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.provider_post(&forged, "sha256=").await,
        StatusCode::UNAUTHORIZED
    );
    let r = app
        .http
        .post(app.url("/webhooks/messaging"))
        .body(forged.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "no signature at all");
    // The per-channel receiver checks the channel's secret too.
    let r = app
        .http
        .post(app.url(&format!("/webhooks/messaging/{channel_id}")))
        .header("x-hub-signature-256", &wrong)
        .body(forged.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // The app-level secret cannot speak for a channel that has its own.
    let app_signed = provider::signature::sign(&app.app_secret_fallback, forged.as_bytes());
    assert_eq!(
        app.provider_post(&forged, &app_signed).await,
        StatusCode::UNAUTHORIZED
    );

    let (_, m) = app.get(&format!("/api/v1/messages/{message_id}")).await;
    assert_eq!(
        m["data"]["status"], "read",
        "the forged failure changed nothing"
    );
    assert_eq!(
        app.runtime
            .store()
            .last_inbound_at(channel_id, "5511977776666")
            .await
            .unwrap(),
        None
    );

    // Signed with the number's own secret, the same body is accepted (the inbound message is
    // recorded; the failure after read is not credible and changes nothing).
    let right = provider::signature::sign(&number.app_secret, forged.as_bytes());
    assert_eq!(app.provider_post(&forged, &right).await, StatusCode::OK);
    assert!(app
        .runtime
        .store()
        .last_inbound_at(channel_id, "5511977776666")
        .await
        .unwrap()
        .is_some());
}

async fn a_receiver_that_fails_first_gets_the_event_on_retry(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, _) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    receiver
        .fail_first
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let (subscription_id, secret) = app
        .subscribe(channel_id, &receiver, &["message.sent"])
        .await;
    let (status, _) = app.post("/api/v1/messages", json!({"to": "5511988887777", "template": {"name": "hello_world", "language": "en_US"}})).await;
    assert_eq!(status, StatusCode::CREATED);
    let got = eventually(10, "message.sent after a retry", || async {
        receiver
            .events()
            .into_iter()
            .find(|c| c.event() == "message.sent")
    })
    .await;
    assert_eq!(
        receiver.hits.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "one 500, then 200"
    );
    let header = got
        .headers
        .get("x-svc-signature")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(engine::webhook::verify_signature(
        &secret, &got.body, header
    ));
    let log = eventually(5, "attempt recorded", || async {
        let (_, log) = app
            .get(&format!("/api/v1/webhooks/{subscription_id}/deliveries"))
            .await;
        (log["data"][0]["status"] == "delivered").then_some(log)
    })
    .await;
    assert_eq!(log["data"][0]["attempts"], 2, "{log}");
    assert_eq!(log["data"][0]["event"], "message.sent");
    assert_eq!(log["data"].as_array().unwrap().len(), 1, "delivered once");
}

async fn free_text_needs_the_24_hour_window_opened_by_the_contact(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, number) = app.connect_channel().await;
    let receiver = Receiver::start().await;
    app.subscribe(channel_id, &receiver, &["message.received"])
        .await;
    let (status, err) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511955554444", "text": "Olá!"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(err["code"], "janela_24h_fechada");

    app.inbound(
        &number.phone_number_id,
        "5511955554444",
        "Oi, tudo bem? Ação ✓",
    )
    .await;
    let got = eventually(10, "message.received", || async {
        receiver.events().into_iter().next()
    })
    .await;
    let env = got.json();
    assert_eq!(env["event"], "message.received");
    assert_eq!(env["data"]["contact"]["phone"], "5511955554444");
    assert_eq!(env["data"]["contact"]["name"], "Ana");
    assert_eq!(
        env["data"]["message"]["text"], "Oi, tudo bem? Ação ✓",
        "non-ASCII survives the provider's \\u escaping"
    );

    let (status, body) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511955554444", "text": "Olá! Como posso ajudar?"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["data"]["type"], "text");
}

async fn the_provider_handshake_answers_the_challenge_only_to_the_right_token(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel_id, _) = app.connect_channel().await;
    let q = |t: &str| format!("?hub.mode=subscribe&hub.verify_token={t}&hub.challenge=1158201444");
    let r = app
        .http
        .get(app.url(&format!("/webhooks/messaging{}", q("app-verify-token"))))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.unwrap(), "1158201444");
    let r = app
        .http
        .get(app.url(&format!("/webhooks/messaging{}", q("wrong"))))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (_, cfg) = app
        .get(&format!("/api/v1/channels/{channel_id}/official"))
        .await;
    let token = cfg["data"]["webhook"]["verify_token"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .http
        .get(app.url(&format!("/webhooks/messaging/{channel_id}{}", q(&token))))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = app
        .http
        .get(app.url(&format!(
            "/webhooks/messaging/{channel_id}{}",
            q("app-verify-token")
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

async fn oversized_webhooks_metrics_and_cap_raises_are_guarded(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| {
        s.metrics_token = Some(engine::Secret::new("scrape-me"));
    })
    .await;
    let (channel_id, number) = app.connect_channel().await;

    // A provider webhook over 2 MB is refused (413, the envelope) before it is parsed, even
    // correctly signed; nothing of it is recorded.
    let filler = "x".repeat(2 * 1024 * 1024);
    let big = json!({"object": "whatsapp_business_account", "entry": [{"id": number.waba_id, "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": number.display_phone_number, "phone_number_id": number.phone_number_id},
        "contacts": [{"profile": {"name": "Big"}, "wa_id": "5511977770000"}],
        "messages": [{"from": "5511977770000", "id": "wamid.big", "timestamp": "1700000000", "type": "text", "text": {"body": filler}}]
    }}]}]})
    .to_string();
    let signature = provider::signature::sign(&number.app_secret, big.as_bytes());
    for path in [
        "/webhooks/messaging".to_string(),
        format!("/webhooks/messaging/{channel_id}"),
    ] {
        let r = app
            .http
            .post(app.url(&path))
            .header("x-hub-signature-256", &signature)
            .header("content-type", "application/json")
            .body(big.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["code"], "payload_too_large", "{err}");
    }
    assert_eq!(
        app.runtime
            .store()
            .last_inbound_at(channel_id, "5511977770000")
            .await
            .unwrap(),
        None
    );
    // An alternative provider's notification is capped at 64 KB.
    let r = app
        .http
        .post(app.url("/webhooks/alternative"))
        .header("content-type", "application/json")
        .body(format!("{{\"pad\": \"{}\"}}", "y".repeat(70 * 1024)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);

    // /metrics names every account's channels: only the configured bearer gets it.
    let r = app.http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = app
        .http
        .get(app.url("/metrics"))
        .bearer_auth("scrape-me-not")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = app
        .http
        .get(app.url("/metrics"))
        .bearer_auth("scrape-me")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("disparo_"));

    // Raising a number's daily campaign cap is an admin's (spec "Limits": owner or admin).
    let store = app.runtime.store();
    let writer = store
        .create_token(app.account_id, "writer", "write")
        .await
        .unwrap();
    let r = app
        .http
        .patch(app.url(&format!("/api/v1/channels/{channel_id}/guardrails")))
        .bearer_auth(writer.value.expose())
        .json(&json!({"daily_cap": 100000}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["required_level"], "admin", "{err}");
}

async fn the_server_limits_rates_slow_clients_long_requests_and_floods(backend: Backend) {
    let app = TestApp::spawn_with(backend.clone(), |s| {
        s.rate_limit_per_min = 3;
        s.header_timeout_ms = 300;
        // Long enough for connecting a number (several provider calls) on a loaded machine:
        // at 400 ms the connect itself was cut once in CI.
        s.request_timeout_ms = 1_500;
    })
    .await;

    // Per-token rate limit: 3 a minute, then 429 with Retry-After and the draft IETF headers.
    for left in (0..3).rev() {
        let r = app
            .http
            .get(app.url("/api/v1/channels"))
            .bearer_auth(&app.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["ratelimit-policy"], "\"token\";q=3;w=60");
        let rl = r.headers()["ratelimit"].to_str().unwrap().to_string();
        assert!(rl.starts_with(&format!("\"token\";r={left};t=")), "{rl}");
    }
    let r = app
        .http
        .get(app.url("/api/v1/channels"))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["code"], "limite_de_requisicoes", "{err}");
    // Another token has its own quota.
    let other = app.other_account_token().await;
    let (status, _) = app.get_as(&other, "/api/v1/channels").await;
    assert_eq!(status, StatusCode::OK);

    // A client that does not finish its headers is dropped after the header timeout.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut slow = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    slow.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    let mut buf = [0u8; 256];
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), slow.read(&mut buf))
        .await
        .expect("the server closed the slow connection");
    // Closed (0 bytes), a 408, or reset (an error) all end the slow client.
    if let Ok(n) = read {
        assert!(
            n == 0 || String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"),
            "{}",
            String::from_utf8_lossy(&buf[..n])
        );
    }

    // A request that runs past the request timeout: 503 in the envelope, with Retry-After.
    // On fresh connections: the pooled ones idled past the 300 ms header timeout while the
    // slow client was dropped, and the server closing one as a request goes out on it is a
    // keep-alive race (hyper's IncompleteMessage), not what this test is about.
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let number = app
        .sim
        .create_number(provider::sim::CreateNumber::default())
        .unwrap();
    let r = fresh
        .post(app.url("/api/v1/channels/official"))
        .bearer_auth(&other)
        .json(&json!({"phone_number_id": number.phone_number_id, "waba_id": number.waba_id, "access_token": number.access_token}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let created: Value = r.json().await.unwrap();
    let channel_id = created["data"]["id"].as_i64().unwrap();
    app.hold_answers(Some(3_000)).await;
    let r = fresh
        .get(app.url(&format!("/api/v1/channels/{channel_id}/templates")))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()["retry-after"], "1");
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["code"], "tempo_esgotado", "{err}");
    app.hold_answers(None).await;

    // More requests at once than the server takes: the extra ones are shed with 503.
    let app = TestApp::spawn_with(backend, |s| s.max_concurrent_requests = 1).await;
    let (channel_id, _) = app.connect_channel().await;
    app.hold_answers(Some(800)).await;
    let path = format!("/api/v1/channels/{channel_id}/templates");
    let (a, b) = tokio::join!(app.get(&path), async {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        app.get(&path).await
    });
    assert_eq!(a.0, StatusCode::OK, "{}", a.1);
    assert_eq!(
        (b.0, b.1["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("sobrecarregado"))
    );
    // Shed before the handler ran: nothing was done, and the body says a retry can help.
    assert_eq!(b.1["retryable"], true, "{}", b.1);
}

/// Issue 17: `GET /messages` reads back every message, with filters and keyset paging over
/// 2,500 rows.
async fn messages_are_listed_with_filters_and_cursor_paging(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, n) = app.fast_channel().await;
    let template = app
        .approved_template(
            json!({"name": "Aviso", "body": "Olá {{1}}.", "var_map": {"1": {"field": "nome", "default": "cliente"}}}),
            &[channel],
        )
        .await;
    let (s, c) = app
        .post("/api/v1/campaigns", json!({"name": "Muitos", "template_id": template, "channels": [{"channel_id": channel}]}))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    let id = c["data"]["id"].as_i64().unwrap();
    let rows: Vec<Value> = (0..2500)
        .map(|i| json!({"phone": format!("5511933{i:06}")}))
        .collect();
    let (s, _) = app
        .post(
            &format!("/api/v1/campaigns/{id}/recipients"),
            json!({"recipients": rows}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = app
        .post(&format!("/api/v1/campaigns/{id}/start"), json!({}))
        .await;
    assert_eq!(s, StatusCode::OK);
    eventually(60, "campaign completed", || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{id}")).await;
        (c["data"]["state"] == "completed").then_some(())
    })
    .await;
    app.inbound(&n.phone_number_id, "5511933000007", "oi").await;

    let mut seen = std::collections::HashSet::new();
    let mut last_id = i64::MAX;
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/messages?direction=out&limit=500&cursor={c}"),
            None => "/api/v1/messages?direction=out&limit=500".to_string(),
        };
        let (s, page) = app.get(&path).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        pages += 1;
        for m in page["data"].as_array().unwrap() {
            let mid = m["id"].as_i64().unwrap();
            assert!(mid < last_id, "newest first, no repeat");
            last_id = mid;
            assert!(seen.insert(mid));
            assert_eq!(m["direction"], "out");
        }
        match page["next_cursor"].as_str() {
            Some(c) if page["has_more"] == true => cursor = Some(c.to_string()),
            _ => break,
        }
    }
    assert_eq!((seen.len(), pages), (2500, 5));
    // The campaign's detail report pages with a cursor too (offset stays, the spec's).
    let base = format!("/api/v1/reports/campaign-messages?campanha={id}&limit=1000");
    let ids = page_through(&app, &base, true).await;
    assert_eq!(ids.len(), 2500);
    let (_, p) = app.get(&format!("{base}&offset=2000")).await;
    assert_eq!(
        p["data"].as_array().unwrap().len(),
        500,
        "offset still works"
    );
    assert_eq!(
        (p["has_more"].as_bool(), p["next_cursor"].as_str()),
        (Some(false), None)
    );
    let inbound = eventually(10, "the inbound message listed", || async {
        let (_, b) = app.get("/api/v1/messages?direction=in").await;
        (b["data"].as_array()?.len() == 1).then_some(b)
    })
    .await;
    assert_eq!(inbound["data"][0]["status"], "received");
    let (_, one) = app.get("/api/v1/messages?to=%2B55%2011%2093300-0007").await;
    assert_eq!(
        one["data"].as_array().unwrap().len(),
        2,
        "the send and the reply: {one}"
    );
    let (_, none) = app
        .get(&format!("/api/v1/messages?channel_id={}", channel + 1000))
        .await;
    assert_eq!(none["data"], json!([]));
    let (_, future) = app.get("/api/v1/messages?since=2099-01-01T00:00:00Z").await;
    assert_eq!(future["data"], json!([]));
    let (_, failed) = app.get("/api/v1/messages?status=failed").await;
    assert_eq!(failed["data"], json!([]));
    for bad in [
        "direction=up",
        "status=lido",
        "limit=0",
        "cursor=x",
        "since=ontem",
        "to=123",
    ] {
        let (s, b) = app.get(&format!("/api/v1/messages?{bad}")).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {b}");
    }
    let other = app.other_account_token().await;
    let (_, theirs) = app.get_as(&other, "/api/v1/messages").await;
    assert_eq!(theirs["data"], json!([]));
}

/// Pages through a list with its cursor until `has_more` is false; checks the order (`asc`:
/// ids rising, else falling) and that no row repeats. Returns the ids.
async fn page_through(app: &TestApp, base: &str, asc: bool) -> Vec<i64> {
    let sep = if base.contains('?') { '&' } else { '?' };
    let mut ids: Vec<i64> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("{base}{sep}cursor={c}"),
            None => base.to_string(),
        };
        let (s, page) = app.get(&path).await;
        assert_eq!(s, StatusCode::OK, "{path}: {page}");
        for row in page["data"].as_array().unwrap() {
            let id = row["id"].as_i64().unwrap();
            if let Some(&last) = ids.last() {
                assert!(
                    if asc { id > last } else { id < last },
                    "{path}: order at {id}"
                );
            }
            ids.push(id);
        }
        match (page["has_more"].as_bool(), page["next_cursor"].as_str()) {
            (Some(true), Some(c)) => cursor = Some(c.to_string()),
            (Some(false), None) => break,
            other => panic!("{path}: has_more/next_cursor {other:?}"),
        }
    }
    ids
}

/// Issue 17: every list of the account API pages with `limit` and an opaque `cursor` (keyset
/// on the id) over 2,500 rows: channels, templates, groups, wiki pages, tokens and a
/// subscription's deliveries; a bad cursor or limit is a 422 in the envelope.
async fn every_list_pages_with_a_cursor(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, _) = app.connect_channel().await;
    let store = app.runtime.store();
    let a = app.account_id;
    const N: usize = 2500;
    for i in 0..N {
        store
            .insert_alternative_channel(&storage::alternative::NewAlternativeChannel {
                account_id: a,
                name: format!("Remetente {i}"),
                phone: format!("5511955{i:06}"),
                engine: "360dialog".into(),
                provider_url: None,
                api_key: engine::Secret::new(format!("chave-{i}")),
            })
            .await
            .unwrap();
        store
            .insert_template(&storage::templates::NewTemplate {
                account_id: a,
                name: format!("Modelo {i}"),
                provider_name: format!("modelo_{i}"),
                category: "utility".into(),
                language: "pt_BR".into(),
                body: "Olá, seu pedido saiu.".into(),
                header_text: None,
                header_media: None,
                footer_text: None,
                buttons: json!([]),
                var_map: json!({}),
                problems: json!([]),
                auto_replicate: false,
            })
            .await
            .unwrap();
        store
            .insert_group(a, &format!("Grupo {i}"), None)
            .await
            .unwrap();
        store
            .insert_wiki_page(
                a,
                &format!("Página {i}"),
                &format!("pagina-{i}"),
                None,
                "private",
                false,
                "",
                "Texto.",
            )
            .await
            .unwrap();
        store
            .create_token(a, &format!("token {i}"), "read")
            .await
            .unwrap();
    }
    let receiver = Receiver::start().await;
    let (sub, _) = app.subscribe(channel, &receiver, &["message.ack"]).await;
    let (s, _) = app
        .patch(&format!("/api/v1/webhooks/{sub}"), json!({"active": false}))
        .await;
    assert_eq!(s, StatusCode::OK);
    for _ in 0..N {
        store
            .enqueue_for_subscription(
                a,
                sub,
                engine::webhook::EventKind::Ping,
                &json!({}),
                &json!({}),
            )
            .await
            .unwrap();
    }

    for (path, asc, total) in [
        ("/api/v1/channels?limit=500", true, N + 1),
        ("/api/v1/templates?limit=500", true, N),
        ("/api/v1/groups?limit=500", true, N),
        ("/api/v1/wiki?limit=500", false, N),
        ("/api/v1/tokens?limit=500", false, N + 1),
        (
            &format!("/api/v1/webhooks/{sub}/deliveries?limit=200"),
            false,
            N,
        ),
    ] {
        let ids = page_through(&app, path, asc).await;
        assert_eq!(ids.len(), total, "{path}");
    }
    // A filter on live state fills the page from further rows, and reads to the end when
    // nothing matches (every number here operates).
    let (_, ok) = app.get("/api/v1/channels?tone=ok&limit=3").await;
    assert_eq!(ok["data"].as_array().unwrap().len(), 3, "{ok}");
    let (_, none) = app.get("/api/v1/channels?tone=bad&limit=3").await;
    assert_eq!(
        (
            none["data"].as_array().unwrap().len(),
            none["has_more"].as_bool()
        ),
        (0, Some(false)),
        "{none}"
    );
    for bad in [
        "/api/v1/channels?cursor=abc",
        "/api/v1/templates?limit=0",
        "/api/v1/groups?limit=501",
        "/api/v1/wiki?cursor=1.5",
        "/api/v1/tokens?limit=x",
    ] {
        let (s, err) = app.get(bad).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {err}");
        assert!(
            err["code"].is_string() && err["message"].is_string(),
            "{bad}: {err}"
        );
    }
}

/// Issue 16 (first part): a WABA-level field disparo does not act on, signed by the secret of a
/// number of that WABA (not the app secret), is answered 200 — a 401 makes the provider retry
/// it for days — and counted; the same body unsigned or signed by another secret is 401.
async fn a_signed_waba_level_field_is_accepted_whatever_the_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, number) = app.connect_channel().await;
    let bodies = [
        json!({"object": "whatsapp_business_account", "entry": [{"id": number.waba_id, "time": 1743451903, "changes": [
            {"field": "business_capability_update", "value": {"max_daily_conversations_per_business": 2000, "max_phone_numbers_per_business": 2}}]}]}),
        json!({"object": "whatsapp_business_account", "entry": [{"id": number.waba_id, "time": 1743451903, "changes": [
            {"field": "account_update", "value": {"event": "ACCOUNT_VIOLATION", "violation_info": {"violation_type": "SCAM"}}}]}]}),
        json!({"object": "whatsapp_business_account", "entry": [{"id": number.waba_id, "time": 1743451903, "changes": [
            {"field": "account_update", "value": {"event": "PARTNER_ADDED", "waba_info": {"waba_id": number.waba_id, "owner_business_id": number.business_id}}}]}]}),
    ];
    for body in &bodies {
        let raw = body.to_string();
        let signed = provider::signature::sign(&number.app_secret, raw.as_bytes());
        assert_eq!(
            app.provider_post(&raw, &signed).await,
            StatusCode::OK,
            "{raw}"
        );
        let forged = provider::signature::sign("someone-else", raw.as_bytes());
        assert_eq!(
            app.provider_post(&raw, &forged).await,
            StatusCode::UNAUTHORIZED,
            "{raw}"
        );
    }
    let metrics = app.metrics().await;
    let ignored: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("disparo_provider_fields_ignored_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |a, b| a + b);
    assert!(
        ignored >= 1.0,
        "the field not acted on is counted: {ignored}"
    );
}

on_both_backends! {
    waba_level_fields => a_signed_waba_level_field_is_accepted_whatever_the_field;
    every_list_pages => every_list_pages_with_a_cursor;
    list_messages => messages_are_listed_with_filters_and_cursor_paging;
    server_limits => the_server_limits_rates_slow_clients_long_requests_and_floods;
    abuse_limits => oversized_webhooks_metrics_and_cap_raises_are_guarded;
    template_message_end_to_end => a_template_message_travels_to_read_and_the_integrator_gets_signed_events;
    unauthenticated => requests_without_a_valid_token_get_401;
    tenancy => another_accounts_records_answer_404;
    validation => bad_input_gets_a_clear_4xx_in_the_envelope;
    refused_credential => a_credential_the_provider_refuses_is_422_and_nothing_is_stored;
    forged_signature => a_forged_provider_signature_is_refused_and_nothing_is_recorded;
    webhook_retry => a_receiver_that_fails_first_gets_the_event_on_retry;
    window => free_text_needs_the_24_hour_window_opened_by_the_contact;
    handshake => the_provider_handshake_answers_the_challenge_only_to_the_right_token;
}
