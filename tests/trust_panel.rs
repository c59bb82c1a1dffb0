//! Issue 46, "Trust, second round", through the real server against the simulator: a forged
//! provider event reaches no client and changes nothing whichever ids it names; a BM-scoped
//! Operador neither sees nor changes another BM's client and reads none of its log lines.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use provider::sim::{CreateNumber, CreatedNumber};
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Duration;

on_both_backends! {
    forged_events => forged_events_scenario;
    bm_scope => bm_scope_scenario;
}

/// A client with a webhook URL pointing at `receiver`; its id.
async fn client(app: &TestApp, admin: &str, name: &str, receiver: &Receiver) -> i64 {
    let (s, b) = app
        .call(
            Method::POST,
            Some(admin),
            "/api/clientes",
            Some(json!({"nome": name, "webhook_url": receiver.url()})),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    b["data"]["id"].as_i64().unwrap()
}

/// An inbound text of `pnid` in an entry of `waba`, as the provider writes it.
fn inbound_body(waba: &str, pnid: &str, wamid: &str, text: &str) -> String {
    json!({"object": "whatsapp_business_account", "entry": [{"id": waba, "time": 1_700_000_000, "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "5511999990000", "phone_number_id": pnid},
        "contacts": [{"profile": {"name": "Banco"}, "wa_id": "5511988887777"}],
        "messages": [{"from": "5511988887777", "id": wamid, "timestamp": "1700000000", "type": "text", "text": {"body": text}}]
    }}]}]})
    .to_string()
}

/// Posts `body` to the panel's receiver, signed with `secret` (unsigned with `None`).
async fn post_panel(app: &TestApp, body: &str, secret: Option<&str>) -> u16 {
    let mut req = app
        .http
        .post(app.url("/api/webhooks/provider"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(s) = secret {
        req = req.header(
            "x-hub-signature-256",
            engine::webhook::signature_header(s, body.as_bytes()),
        );
    }
    req.send().await.unwrap().status().as_u16()
}

/// The inbound messages the account API shows for a number.
async fn inbound_count(app: &TestApp, channel: i64) -> usize {
    let (s, b) = app
        .get(&format!(
            "/api/v1/messages?direction=in&channel_id={channel}"
        ))
        .await;
    assert_eq!(s, 200, "{b}");
    b["data"].as_array().unwrap().len()
}

async fn number_id(app: &TestApp, admin: &str, n: &CreatedNumber) -> i64 {
    let (_, numbers) = app
        .call(Method::GET, Some(admin), "/api/phone-numbers", None)
        .await;
    numbers["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["phone_number_id"] == n.phone_number_id.as_str())
        .unwrap()["id"]
        .as_i64()
        .unwrap()
}

async fn event_lines(app: &TestApp, token: &str) -> Vec<Value> {
    let (s, b) = app
        .call(
            Method::GET,
            Some(token),
            "/api/webhook-logs?tipo=evento&limit=200",
            None,
        )
        .await;
    assert_eq!(s, 200, "{b}");
    b["data"].as_array().unwrap().clone()
}

async fn forged_events_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let (ra, rc) = (Receiver::start().await, Receiver::start().await);
    let client_a = client(&app, &admin, "Cliente A", &ra).await;
    let client_c = client(&app, &admin, "Cliente C", &rc).await;
    // n1: a BM with its app secret, serving A. n3: a BM without one, serving C.
    let n1 = app.sim.create_number(CreateNumber::default()).unwrap();
    app.panel_bm(
        &admin,
        &n1,
        json!({"nome": "BM Um", "cliente_id": client_a}),
    )
    .await;
    let n3 = app.sim.create_number(CreateNumber::default()).unwrap();
    app.panel_bm(
        &admin,
        &n3,
        json!({"nome": "BM Três", "cliente_id": client_c, "app_secret": null}),
    )
    .await;
    let (c1, c3) = (
        number_id(&app, &admin, &n1).await,
        number_id(&app, &admin, &n3).await,
    );
    let boleto = "Pague este boleto hoje: 34191.79001 01043.510047 91020.150008 1 96610000012345";

    // The attack of issue 46: unsigned, an unknown WABA, a client's number. And its variants:
    // signed by the right BM but for a WABA that is not the number's; signed by another
    // secret; signed by the deployment's app secret while the BM has its own.
    let attempts: Vec<(String, Option<&str>)> = vec![
        (
            inbound_body("999999999999", &n1.phone_number_id, "wamid.f1", boleto),
            None,
        ),
        (
            inbound_body("999999999999", &n1.phone_number_id, "wamid.f2", boleto),
            Some(n1.app_secret.as_str()),
        ),
        (
            inbound_body(&n1.waba_id, &n1.phone_number_id, "wamid.f3", boleto),
            Some("outro-segredo"),
        ),
        (
            inbound_body(&n1.waba_id, &n1.phone_number_id, "wamid.f4", boleto),
            Some(app.app_secret_fallback.as_str()),
        ),
        (
            inbound_body(&n1.waba_id, &n1.phone_number_id, "wamid.f5", boleto),
            None,
        ),
        (
            inbound_body(&n3.waba_id, &n3.phone_number_id, "wamid.f6", boleto),
            None,
        ),
        (
            inbound_body(&n3.waba_id, &n3.phone_number_id, "wamid.f7", boleto),
            Some(n1.app_secret.as_str()),
        ),
    ];
    for (i, (body, secret)) in attempts.iter().enumerate() {
        assert_eq!(
            post_panel(&app, body, *secret).await,
            401,
            "attempt {i} refused"
        );
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(ra.events().is_empty(), "A received no forged event");
    assert!(rc.events().is_empty(), "C received no forged event");
    assert_eq!(inbound_count(&app, c1).await, 0, "nothing applied to n1");
    assert_eq!(inbound_count(&app, c3).await, 0, "nothing applied to n3");
    let lines = event_lines(&app, &admin).await;
    assert!(!lines.is_empty());
    for l in &lines {
        assert_eq!(l["assinatura"], "invalida", "{l}");
        assert_eq!(l["aplicado"], false);
        assert_eq!(l["encaminhamento"], "nao_encaminhado");
        assert!(
            l["corpo"].as_str().unwrap_or_default().len() <= 512,
            "an excerpt only"
        );
    }

    // The real thing: n1 signed by its BM's secret, n3 (no BM secret) by the deployment's.
    let good1 = inbound_body(&n1.waba_id, &n1.phone_number_id, "wamid.ok1", "oi do n1");
    assert_eq!(post_panel(&app, &good1, Some(&n1.app_secret)).await, 200);
    let good3 = inbound_body(&n3.waba_id, &n3.phone_number_id, "wamid.ok3", "oi do n3");
    assert_eq!(
        post_panel(&app, &good3, Some(&app.app_secret_fallback)).await,
        200
    );
    let got_a = eventually(10, "A received the signed event", || async {
        (!ra.events().is_empty()).then(|| ra.events())
    })
    .await;
    let got_c = eventually(10, "C received the signed event", || async {
        (!rc.events().is_empty()).then(|| rc.events())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ra.events().len(), 1, "only the signed event reached A");
    assert_eq!(rc.events().len(), 1, "only the signed event reached C");
    assert_eq!(got_a[0].json()["client_id"], client_a);
    assert_eq!(got_c[0].json()["client_id"], client_c);
    assert!(!String::from_utf8_lossy(&got_a[0].body).contains("boleto"));
    eventually(10, "n1's message applied", || async {
        (inbound_count(&app, c1).await == 1).then_some(())
    })
    .await;
    let valid: Vec<Value> = event_lines(&app, &admin)
        .await
        .into_iter()
        .filter(|l| l["assinatura"] == "valida")
        .collect();
    assert_eq!(valid.len(), 2, "{valid:?}");
}

async fn bm_scope_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let (ra, rb) = (Receiver::start().await, Receiver::start().await);
    let client_a = client(&app, &admin, "Cliente A", &ra).await;
    let client_b = client(&app, &admin, "Cliente B", &rb).await;
    let n1 = app.sim.create_number(CreateNumber::default()).unwrap();
    let bm1 = app
        .panel_bm(
            &admin,
            &n1,
            json!({"nome": "BM Um", "cliente_id": client_a}),
        )
        .await;
    let n2 = app.sim.create_number(CreateNumber::default()).unwrap();
    app.panel_bm(
        &admin,
        &n2,
        json!({"nome": "BM Dois", "cliente_id": client_b}),
    )
    .await;
    let c1 = number_id(&app, &admin, &n1).await;
    // Events of both BMs through the panel's receiver, forwarded to both clients.
    app.sim
        .set_webhook_url(Some(app.url("/api/webhooks/provider")))
        .await;
    app.inbound(&n1.phone_number_id, "5511933330000", "para A")
        .await;
    app.inbound(&n2.phone_number_id, "5511944440000", "segredo de B")
        .await;
    eventually(10, "both forwarded", || async {
        (!ra.events().is_empty() && !rb.events().is_empty()).then_some(())
    })
    .await;
    let (_, op) = app
        .panel_user("op@acme.com.br", "Operador", None, vec![bm1])
        .await;

    // Clients: only A is in reach.
    let (s, list) = app
        .call(Method::GET, Some(&op), "/api/clientes", None)
        .await;
    assert_eq!(s, 200);
    let ids: Vec<i64> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![client_a]);
    let evil = json!({"nome": "Cliente B", "webhook_url": "https://atacante.example.com/hook"});
    for (method, path, body) in [
        (Method::GET, format!("/api/clientes/{client_b}"), None),
        (
            Method::PUT,
            format!("/api/clientes/{client_b}"),
            Some(evil.clone()),
        ),
        (
            Method::POST,
            format!("/api/clientes/{client_b}/webhook-secret"),
            None,
        ),
        (Method::DELETE, format!("/api/clientes/{client_b}"), None),
    ] {
        let (s, b) = app.call(method.clone(), Some(&op), &path, body).await;
        assert_eq!(s, 404, "{method} {path}: {b}");
    }
    let (s, b) = app
        .call(
            Method::POST,
            Some(&op),
            "/api/clientes",
            Some(json!({"nome": "Novo"})),
        )
        .await;
    assert_eq!(s, 403, "{b}");
    // Linking one's own number to B does not open B either.
    let (s, b) = app
        .call(
            Method::PUT,
            Some(&op),
            &format!("/api/phone-numbers/{c1}"),
            Some(json!({"cliente_id": client_b})),
        )
        .await;
    assert_eq!(
        (s.as_u16(), b["code"].as_str()),
        (422, Some("cliente_invalido")),
        "{b}"
    );
    let (_, b_after) = app
        .call(
            Method::GET,
            Some(&admin),
            &format!("/api/clientes/{client_b}"),
            None,
        )
        .await;
    assert_eq!(
        b_after["data"]["webhook_url"],
        rb.url().as_str(),
        "B untouched"
    );
    // A stays the Operador's to change.
    let (s, b) = app
        .call(
            Method::PUT,
            Some(&op),
            &format!("/api/clientes/{client_a}"),
            Some(json!({"nome": "Cliente A Ltda", "webhook_url": ra.url()})),
        )
        .await;
    assert_eq!(s, 200, "{b}");

    // The log: the Operador sees n1's lines and none of n2's; the Admin sees both.
    let mine = event_lines(&app, &op).await;
    assert!(!mine.is_empty());
    for l in &mine {
        let named = l["numeros"].to_string();
        assert!(named.contains(&n1.phone_number_id), "{l}");
        assert!(!named.contains(&n2.phone_number_id), "{l}");
        assert!(!l["corpo"]
            .as_str()
            .unwrap_or_default()
            .contains("segredo de B"));
    }
    let all = event_lines(&app, &admin).await;
    let of_b = all
        .iter()
        .find(|l| l["numeros"].to_string().contains(&n2.phone_number_id))
        .expect("the Admin sees B's line");
    let (s, _) = app
        .call(
            Method::POST,
            Some(&op),
            &format!("/api/webhook-logs/{}/reforward", of_b["id"]),
            None,
        )
        .await;
    assert_eq!(s, 404, "another BM's line cannot be reforwarded");
    let (s, b) = app
        .call(
            Method::POST,
            Some(&op),
            &format!("/api/webhook-logs/{}/reforward", mine[0]["id"]),
            None,
        )
        .await;
    assert_eq!(s, 200, "{b}");
}
