//! The panel's provider webhook receiver (`/api/webhooks/provider`, issue 21) through the real
//! server against the simulator: the handshake, valid events applied and forwarded to each
//! number's client (signed with the client's secret, in order, once, through a receiver that
//! fails first), an invalid signature neither applied nor forwarded, a BM without an app secret
//! verified with the deployment's app secret (unsigned: refused and flagged; issue 46), the log
//! with its statuses, reforward and retention.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use provider::sim::{CreateNumber, CreatedNumber};
use reqwest::Method;
use serde_json::{json, Value};

on_both_backends! {
    handshake => handshake_scenario;
    forwarding => forwarding_scenario;
    retention => retention_scenario;
    account_receivers => account_receivers_scenario;
}

async fn bm(app: &TestApp, admin: &str, n: &CreatedNumber, client: i64, with_secret: bool) -> i64 {
    let mut body = json!({"nome": format!("BM {}", n.business_id), "cliente_id": client});
    if !with_secret {
        body["app_secret"] = Value::Null;
    }
    app.panel_bm(admin, n, body).await
}

/// An inbound text for number `n` posted to receiver `path`, signed with a wrong secret;
/// the answer's status.
async fn post_forged(app: &TestApp, path: &str, n: &CreatedNumber, text: &str) -> u16 {
    let forged = json!({"object": "whatsapp_business_account", "entry": [{"id": n.waba_id, "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp", "metadata": {"display_phone_number": "5511", "phone_number_id": n.phone_number_id}, "messages": [{"from": "5511900000000", "id": "wamid.forjado", "timestamp": "1", "type": "text", "text": {"body": text}}]}}]}]}).to_string();
    app.http
        .post(app.url(path))
        .header(
            "x-hub-signature-256",
            engine::webhook::signature_header("segredo-errado", forged.as_bytes()),
        )
        .header("content-type", "application/json")
        .body(forged)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A template sent 1:1 through `channel`, waited for until the provider reports it read.
async fn send_until_read(app: &TestApp, channel: i64) {
    let (s, sent) = app
        .post("/api/v1/messages", json!({"to": "5511944440000", "channel_id": channel, "template": {"name": "hello_world", "language": "en_US"}}))
        .await;
    assert_eq!(s, 201, "{sent}");
    let mid = sent["data"]["id"].as_i64().unwrap();
    eventually(10, "read", || async {
        let (_, m) = app.get(&format!("/api/v1/messages/{mid}")).await;
        (m["data"]["status"] == "read").then_some(())
    })
    .await;
}

/// Waits until `receiver` got a forward carrying status reports.
async fn statuses_reach(receiver: &Receiver, what: &str) {
    eventually(10, what, || async {
        receiver
            .events()
            .iter()
            .any(|c| c.json()["payload"]["entry"][0]["changes"][0]["value"]["statuses"].is_array())
            .then_some(())
    })
    .await;
}

async fn logs(app: &TestApp, admin: &str, query: &str) -> Vec<Value> {
    let (s, b) = app
        .call(
            Method::GET,
            Some(admin),
            &format!("/api/webhook-logs{query}"),
            None,
        )
        .await;
    assert_eq!(s, 200, "{b}");
    b["data"].as_array().unwrap().clone()
}

/// The account API's receivers feed the same pipeline as the panel's (issue 47 item 2): with
/// the provider app posting to `/webhooks/messaging` (the demo's configuration) or to a
/// number's own `/webhooks/messaging/{id}`, each event is applied, logged with its body and
/// forwarded to the number's client; a forged call is answered 401, logged as invalid, and
/// reaches no client.
async fn account_receivers_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let ra = Receiver::start().await;
    let (client_a, secret_a) = app.panel_client(&admin, "Cliente A", &ra.url()).await;
    let n1 = app.sim.create_number(CreateNumber::default()).unwrap();
    bm(&app, &admin, &n1, client_a, true).await;
    let c1 = app.panel_number_id(&admin, &n1.phone_number_id).await;
    // The simulator posts to the app-level receiver, as `serve --simulator` sets it up.
    app.inbound(
        &n1.phone_number_id,
        "5511933330000",
        "pelo receptor da conta",
    )
    .await;
    let got = eventually(20, "A received the message", || async {
        let e = ra.events();
        (!e.is_empty()).then_some(e)
    })
    .await;
    let env = got[0].json();
    let sig = got[0]
        .headers
        .get("x-svc-signature")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(engine::webhook::verify_signature(
        &secret_a,
        &got[0].body,
        sig
    ));
    assert_eq!(env["client_id"], client_a);
    assert_eq!(env["phone_number_id"], n1.phone_number_id.as_str());
    let text = &env["payload"]["entry"][0]["changes"][0]["value"]["messages"][0]["text"]["body"];
    assert_eq!(
        text, "pelo receptor da conta",
        "the provider's change, whole"
    );
    // Applied: the message is stored and listed.
    let (_, list) = app.get("/api/v1/messages").await;
    assert!(
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.to_string().contains("pelo receptor da conta")),
        "{list}"
    );
    // Logged, with its body.
    let lines = eventually(10, "logged", || async {
        let l = logs(&app, &admin, "?tipo=evento").await;
        (!l.is_empty()).then_some(l)
    })
    .await;
    assert_eq!(lines[0]["assinatura"], "valida", "{lines:?}");
    assert_eq!(lines[0]["aplicado"], true, "{lines:?}");
    assert!(
        lines[0]["corpo"]
            .as_str()
            .unwrap_or_default()
            .contains("pelo receptor da conta"),
        "{lines:?}"
    );
    assert_eq!(lines[0]["http_status"], 200);

    // The number's own receiver.
    app.sim
        .set_webhook_url(Some(app.url(&format!("/webhooks/messaging/{c1}"))))
        .await;
    app.inbound(
        &n1.phone_number_id,
        "5511933330000",
        "pelo receptor do número",
    )
    .await;
    eventually(20, "A received the second message", || async {
        (ra.events().len() >= 2).then_some(())
    })
    .await;
    let second = ra.events()[1].json();
    assert_eq!(
        second["payload"]["entry"][0]["changes"][0]["value"]["messages"][0]["text"]["body"],
        "pelo receptor do número"
    );

    // A forged call at the account receiver: 401, logged as invalid, forwarded nowhere.
    let status = post_forged(&app, "/webhooks/messaging", &n1, "forjado").await;
    assert_eq!(status, 401);
    let lines = eventually(10, "the forgery logged", || async {
        let l = logs(&app, &admin, "?tipo=evento").await;
        (l.len() >= 3).then_some(l)
    })
    .await;
    assert_eq!(lines[0]["assinatura"], "invalida", "{lines:?}");
    assert_eq!(lines[0]["aplicado"], false);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(ra.events().len(), 2, "the forgery reached no client");

    // Status reports: a number with a client gets them forwarded (and logged); a number
    // without one has them applied and counted, not logged (D-117).
    app.sim
        .set_webhook_url(Some(app.url("/webhooks/messaging")))
        .await;
    let (c2, n2) = app.fast_channel().await;
    send_until_read(&app, c2).await;
    send_until_read(&app, c1).await;
    statuses_reach(&ra, "statuses forwarded to A").await;
    let own = logs(&app, &admin, &format!("?numero={}", n1.phone_number_id)).await;
    assert!(
        own.iter()
            .any(|l| l["campos"].to_string().contains("messages")
                && l["corpo"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("\"statuses\"")),
        "A's statuses are logged with their forward: {own:?}"
    );
    let quiet = logs(&app, &admin, &format!("?numero={}", n2.phone_number_id)).await;
    assert!(
        quiet.is_empty(),
        "routine statuses are not logged: {quiet:?}"
    );
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("disparo_provider_calls_unlogged_total"),
        "counted instead"
    );
}

async fn handshake_scenario(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| {
        s.provider_webhook_verify_token = Some("painel-verify".into())
    })
    .await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let ok = app
        .http
        .get(app.url("/api/webhooks/provider?hub.mode=subscribe&hub.verify_token=painel-verify&hub.challenge=1158201444"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "1158201444");
    let wrong = app
        .http
        .get(app.url(
            "/api/webhooks/provider?hub.mode=subscribe&hub.verify_token=outro&hub.challenge=1",
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 403);
    let lines = logs(&app, &admin, "?tipo=verificacao").await;
    let sigs: Vec<&str> = lines
        .iter()
        .map(|l| l["assinatura"].as_str().unwrap())
        .collect();
    assert_eq!(sigs, vec!["invalida", "valida"], "newest first");
    assert!(logs(&app, &admin, "?tipo=evento").await.is_empty());
}

async fn forwarding_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let (ra, rb, rc) = (
        Receiver::start().await,
        Receiver::start().await,
        Receiver::start().await,
    );
    let (client_a, secret_a) = app.panel_client(&admin, "Cliente A", &ra.url()).await;
    let (client_b, secret_b) = app.panel_client(&admin, "Cliente B", &rb.url()).await;
    let (client_c, _) = app.panel_client(&admin, "Cliente C", &rc.url()).await;
    // Business 1 (app secret registered): n1 serves A (the BM's client), n2 serves B (its own).
    let n1 = app.sim.create_number(CreateNumber::default()).unwrap();
    let n2 = app
        .sim
        .create_number(CreateNumber {
            waba_id: Some(n1.waba_id.clone()),
            ..CreateNumber::default()
        })
        .unwrap();
    bm(&app, &admin, &n1, client_a, true).await;
    let c2 = app.panel_number_id(&admin, &n2.phone_number_id).await;
    let (s, _) = app
        .call(
            Method::PUT,
            Some(&admin),
            &format!("/api/phone-numbers/{c2}"),
            Some(json!({"cliente_id": client_b})),
        )
        .await;
    assert_eq!(s, 200);
    // Business 2, no app secret: serves C.
    let n3 = app.sim.create_number(CreateNumber::default()).unwrap();
    let bm3 = bm(&app, &admin, &n3, client_c, false).await;

    // The provider now calls the panel's receiver; A's receiver fails its first 3 attempts.
    app.sim
        .set_webhook_url(Some(app.url("/api/webhooks/provider")))
        .await;
    ra.fail_first.store(3, std::sync::atomic::Ordering::SeqCst);
    for text in ["um", "dois", "tres"] {
        app.inbound(&n1.phone_number_id, "5511933330000", text)
            .await;
    }
    app.inbound(&n2.phone_number_id, "5511944440000", "para B")
        .await;
    // The provider batches: however the three messages arrive, A gets each once, in order.
    let texts_of = |events: &[common::Captured]| -> Vec<String> {
        events
            .iter()
            .flat_map(|c| {
                c.json()["payload"]["entry"][0]["changes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|ch| {
                        ch["value"]["messages"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                    })
                    .map(|m| m["text"]["body"].as_str().unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let got_a = eventually(20, "A received its three messages", || async {
        let e = ra.events();
        (texts_of(&e).len() >= 3).then_some(e)
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let got_a = if ra.events().len() > got_a.len() {
        ra.events()
    } else {
        got_a
    };
    assert_eq!(
        texts_of(&got_a),
        vec!["um", "dois", "tres"],
        "each once, in order"
    );
    for c in &got_a {
        let sig = c.headers.get("x-svc-signature").unwrap().to_str().unwrap();
        assert!(
            engine::webhook::verify_signature(&secret_a, &c.body, sig),
            "signed with A's secret"
        );
        assert!(!engine::webhook::verify_signature(&secret_b, &c.body, sig));
        // The Standard Webhooks headers, with the client's secret (D-119).
        let header = |name: &str| c.headers[name].to_str().unwrap().to_string();
        let at: i64 = header("webhook-timestamp").parse().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let (id, standard) = (header("webhook-id"), header("webhook-signature"));
        assert!(engine::webhook::verify_standard(
            &secret_a, &id, at, now, &c.body, &standard
        ));
        assert!(!engine::webhook::verify_standard(
            &secret_b, &id, at, now, &c.body, &standard
        ));
        let env = c.json();
        assert_eq!(env["event"], "messages");
        assert_eq!(env["phone_number_id"], n1.phone_number_id.as_str());
        assert_eq!(env["client_id"], client_a);
        assert_eq!(env["payload"]["entry"][0]["id"], n1.waba_id.as_str());
        assert!(env["delivery_id"].is_i64() && env["received_at"].is_string());
    }
    // Each forward matches the panel document's `webhooks` schema (issue 48 item 3).
    let doc: Value = app
        .http
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let forwards = got_a
        .iter()
        .map(|c| ("provider.forwarded".to_string(), c.json()))
        .collect();
    let verdicts = common::schema_errors(&doc, forwards).await;
    assert!(
        verdicts.iter().all(|(_, e)| e.is_empty()),
        "forwards off their schema: {verdicts:?}"
    );
    let got_b = eventually(10, "B received", || async {
        (!rb.events().is_empty()).then(|| rb.events())
    })
    .await;
    assert_eq!(
        got_b[0].json()["phone_number_id"],
        n2.phone_number_id.as_str()
    );
    assert_eq!(got_b[0].json()["client_id"], client_b);
    assert!(
        got_a
            .iter()
            .all(|c| c.json()["phone_number_id"] != n2.phone_number_id.as_str()),
        "B's number never reaches A"
    );

    // Applied through the one ingest path: a send's statuses come back through this receiver.
    send_until_read(&app, c2).await;
    statuses_reach(&rb, "statuses forwarded to B").await;

    // An invalid signature: 401, nothing applied or forwarded.
    let before_a = ra.events().len();
    let forged = "forjado ".repeat(300);
    let status = post_forged(&app, "/api/webhooks/provider", &n1, &forged).await;
    assert_eq!(status, 401);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(ra.events().len(), before_a, "not forwarded");

    // BM 2 has no app secret: an unsigned call is refused and flagged (issue 46, D-099); one
    // signed with the deployment's app secret is forwarded to C.
    let unsigned = json!({"object": "whatsapp_business_account", "entry": [{"id": n3.waba_id, "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp", "metadata": {"display_phone_number": "5511", "phone_number_id": n3.phone_number_id}, "messages": [{"from": "5511900000001", "id": "wamid.semvalidacao", "timestamp": "1", "type": "text", "text": {"body": "sem validação"}}]}}]}]}).to_string();
    let r = app
        .http
        .post(app.url("/api/webhooks/provider"))
        .header("content-type", "application/json")
        .body(unsigned.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = app
        .http
        .post(app.url("/api/webhooks/provider"))
        .header(
            "x-hub-signature-256",
            engine::webhook::signature_header(&app.app_secret_fallback, unsigned.as_bytes()),
        )
        .header("content-type", "application/json")
        .body(unsigned)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let got_c = eventually(10, "C received", || async {
        (!rc.events().is_empty()).then(|| rc.events())
    })
    .await;
    assert_eq!(got_c.len(), 1, "only the signed call");
    assert_eq!(got_c[0].json()["client_id"], client_c);
    let (_, alerts) = app
        .call(Method::GET, Some(&admin), "/api/alertas", None)
        .await;
    assert!(
        alerts["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["codigo"] == "webhook_sem_validacao" && a["id"] == bm3),
        "{alerts}"
    );

    // The log: both kinds of signature, what was applied, each forward's delivery.
    let events = logs(&app, &admin, "?tipo=evento").await;
    let invalid = events
        .iter()
        .find(|l| {
            l["assinatura"] == "invalida" && l["numeros"].to_string().contains(&n1.phone_number_id)
        })
        .expect("invalid line");
    assert_eq!(
        (
            invalid["http_status"].as_i64(),
            invalid["encaminhamento"].as_str()
        ),
        (Some(401), Some("nao_encaminhado"))
    );
    assert_eq!(
        invalid["corpo"].as_str().unwrap().len(),
        512,
        "an unsigned body is kept short"
    );
    let valid: Vec<&Value> = events
        .iter()
        .filter(|l| l["assinatura"] == "valida")
        .collect();
    assert!(valid.iter().all(|l| l["aplicado"] == true), "{valid:?}");
    assert!(
        events.iter().all(|l| l["assinatura"] != "sem_validacao"),
        "nothing is forwarded unvalidated"
    );
    let a_lines = logs(
        &app,
        &admin,
        &format!("?numero={}&assinatura=valida", n1.phone_number_id),
    )
    .await;
    assert!(!a_lines.is_empty());
    let retried = a_lines
        .iter()
        .flat_map(|l| l["entregas"].as_array().unwrap().clone())
        .map(|d| d["attempts"].as_i64().unwrap())
        .max()
        .unwrap();
    assert!(
        retried >= 2,
        "the failing receiver made some deliveries retry: {a_lines:?}"
    );
    assert!(a_lines.iter().all(|l| l["entregas"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["status"] == "delivered")));
    let by_client = logs(&app, &admin, &format!("?cliente_id={client_b}")).await;
    assert!(
        !by_client.is_empty()
            && by_client.iter().all(|l| l["entregas"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["client_id"] == client_b))
    );
    // Paging.
    let (_, page) = app
        .call(
            Method::GET,
            Some(&admin),
            "/api/webhook-logs?tipo=evento&limit=1",
            None,
        )
        .await;
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    assert_eq!(page["has_more"], true);
    let cursor = page["next_cursor"].as_str().unwrap().to_string();
    let (_, next) = app
        .call(
            Method::GET,
            Some(&admin),
            &format!("/api/webhook-logs?tipo=evento&limit=1&cursor={cursor}"),
            None,
        )
        .await;
    assert!(next["data"][0]["id"].as_i64().unwrap() < page["data"][0]["id"].as_i64().unwrap());

    // Reforward: the line's forward is delivered again.
    let line = a_lines[0]["id"].as_i64().unwrap();
    let to_a = a_lines[0]["entregas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["client_id"] == client_a)
        .count();
    let forwards = a_lines[0]["entregas"].as_array().unwrap().len() as i64;
    let before = ra.events().len();
    let (s, b) = app
        .call(
            Method::POST,
            Some(&admin),
            &format!("/api/webhook-logs/{line}/reforward"),
            None,
        )
        .await;
    assert_eq!(
        (s.as_u16(), b["data"]["queued"].as_i64()),
        (200, Some(forwards)),
        "{b}"
    );
    let before = before + to_a - 1;
    eventually(10, "reforwarded", || async {
        (ra.events().len() == before + 1).then_some(())
    })
    .await;
    // Another account sees none of it; a Client user may not read the log.
    let (_, cli) = app
        .panel_user("cli@acme.com.br", "Client", Some(client_a), vec![])
        .await;
    assert_eq!(
        app.call(Method::GET, Some(&cli), "/api/webhook-logs", None)
            .await
            .0,
        403
    );
    // The client's secret rotates: the next forward is signed with the new one.
    let (s, rot) = app
        .call(
            Method::POST,
            Some(&admin),
            &format!("/api/clientes/{client_a}/webhook-secret"),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let new_secret = rot["data"]["webhook_secret"].as_str().unwrap().to_string();
    let before = ra.events().len();
    app.inbound(&n1.phone_number_id, "5511933330000", "quatro")
        .await;
    let last = eventually(10, "after rotation", || async {
        let e = ra.events();
        (e.len() > before).then(|| e.last().cloned().unwrap())
    })
    .await;
    let sig = last
        .headers
        .get("x-svc-signature")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(engine::webhook::verify_signature(
        &new_secret,
        &last.body,
        sig
    ));
    assert!(!engine::webhook::verify_signature(
        &secret_a, &last.body, sig
    ));
}

async fn retention_scenario(backend: Backend) {
    let mut app = TestApp::spawn_with(backend, |s| s.provider_log_retention_ms = 300).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let ra = Receiver::start().await;
    let (client_a, _) = app.panel_client(&admin, "Cliente A", &ra.url()).await;
    let n = app.sim.create_number(CreateNumber::default()).unwrap();
    bm(&app, &admin, &n, client_a, true).await;
    app.sim
        .set_webhook_url(Some(app.url("/api/webhooks/provider")))
        .await;
    app.inbound(&n.phone_number_id, "5511933330000", "guardado")
        .await;
    eventually(10, "forwarded", || async {
        (!ra.events().is_empty()).then_some(())
    })
    .await;
    let lines = logs(&app, &admin, "?tipo=evento").await;
    assert!(lines[0]["corpo"].as_str().unwrap().contains("guardado"));
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    // The retention runs when the dispatcher starts and every hour after.
    app.restart().await;
    let admin = app
        .panel_login("admin@acme.com.br", common::PANEL_PASSWORD)
        .await;
    let after = eventually(5, "body dropped", || async {
        let l = logs(&app, &admin, "?tipo=evento").await;
        l[0]["corpo"].is_null().then_some(l)
    })
    .await;
    assert_eq!(after.len(), lines.len(), "the lines stay");
    assert_eq!(after[0]["assinatura"], "valida");
}
