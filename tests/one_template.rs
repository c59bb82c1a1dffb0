//! Issue 55 (D-127): one `template` object on the four surfaces that send a template — the
//! account API's `POST /messages`, `POST /groups/{id}/messages`, the public sender and MCP's
//! `send_template` — by name with `params` and by library id with `vars`; every answer names
//! the message `id` and `provider_message_id` and every `message.ack` event the same pair as
//! `message_id` and `provider_message_id`; the old shapes still work and carry `Deprecation`.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use provider::sim::CreateNumber;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

on_both_backends! {
    four_surfaces => one_template_object_on_four_surfaces;
}

/// What each surface answered: `(surface, recipient, answer's data, Deprecation header)`.
type Answer = (String, String, Value, Option<String>);

async fn post(
    app: &TestApp,
    token: &str,
    path: &str,
    body: Value,
) -> (StatusCode, Value, Option<String>) {
    let r = app
        .http
        .post(app.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let deprecation = r
        .headers()
        .get("deprecation")
        .map(|v| v.to_str().unwrap().to_string());
    (status, r.json().await.unwrap_or(Value::Null), deprecation)
}

/// MCP's `send_template` through JSON-RPC: the tool's structured answer.
async fn mcp_send(app: &TestApp, token: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "send_template", "arguments": arguments}});
    let r = app
        .http
        .post(app.url("/api/v1/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["result"]["isError"], false, "{v}");
    v["result"]["structuredContent"].clone()
}

async fn one_template_object_on_four_surfaces(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let n = app.sim.create_number(CreateNumber::default()).unwrap();
    app.panel_bm(&admin, &n, json!({"nome": "BM Loja", "cliente": "Loja"}))
        .await;
    let ch = app.panel_number_id(&admin, &n.phone_number_id).await;
    let (s, g) = app
        .patch(
            &format!("/api/v1/channels/{ch}/guardrails"),
            json!({"daily_cap": null, "cadence_ms": 0, "warmup": false}),
        )
        .await;
    assert_eq!(s, 200, "{g}");
    let t = app
        .approved_template(
            json!({"name": "Pedido saiu", "provider_name": "pedido_saiu", "category": "utility",
            "body": "Olá {{1}}, seu pedido {{2}} saiu.",
            "var_map": {"1": {"field": "nome"}, "2": {"field": "pedido"}}}),
            &[ch],
        )
        .await;
    let receiver = Receiver::start().await;
    app.subscribe(ch, &receiver, &["message.ack"]).await;
    let (s, group) = app
        .post(
            "/api/v1/groups",
            json!({"name": "Lojas", "channel_ids": [ch]}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{group}");
    let group = group["data"]["id"].as_i64().unwrap();
    let (user, _) = app
        .panel_user("op@acme.com.br", "Operador", None, vec![])
        .await;
    let (s, b) = app
        .call(
            Method::POST,
            Some(&admin),
            &format!("/api/users/{user}/api-token"),
            None,
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let sender = b["data"]["token"].as_str().unwrap().to_string();
    let account = app.token.clone();

    // The one shape, two ways: by name with params, by library id with vars.
    let shapes = [
        json!({"name": "pedido_saiu", "language": "pt_BR", "params": ["Ana", "A-1"]}),
        json!({"id": t, "vars": {"nome": "Ana", "pedido": "A-1"}}),
    ];
    let mut answers: Vec<Answer> = Vec::new();
    for (k, template) in shapes.iter().enumerate() {
        let to = |surface: u8| format!("55119300{k}{surface:04}");
        let (s, m, d) = post(
            &app,
            &account,
            "/api/v1/messages",
            json!({"channel_id": ch, "to": to(1), "template": template}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{m}");
        answers.push(("account API".into(), to(1), m["data"].clone(), d));
        let (s, m, d) = post(
            &app,
            &account,
            &format!("/api/v1/groups/{group}/messages"),
            json!({"to": to(2), "template": template}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{m}");
        answers.push(("group".into(), to(2), m["data"].clone(), d));
        let (s, m, d) = post(
            &app,
            &sender,
            "/api/v1/messages",
            json!({"to": to(3), "template": template}),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{m}");
        answers.push(("public sender".into(), to(3), m["data"].clone(), d));
        let m = mcp_send(
            &app,
            &account,
            json!({"channel_id": ch, "to": to(4), "template": template}),
        )
        .await;
        answers.push(("MCP".into(), to(4), m["data"].clone(), None));
    }
    // The old shapes: still sent, with `Deprecation`.
    let (s, m, d) = post(
        &app,
        &account,
        &format!("/api/v1/groups/{group}/messages"),
        json!({"to": "5511930090001", "template_id": t, "params": ["Ana", "A-1"]}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    assert_eq!(d.as_deref(), Some("@1795910400"), "old group shape");
    answers.push((
        "group (old shape)".into(),
        "5511930090001".into(),
        m["data"].clone(),
        None,
    ));
    let (s, m, d) = post(
        &app,
        &sender,
        "/api/v1/messages",
        json!({"to": "5511930090002", "template": "pedido_saiu", "variables": ["Ana", "A-1"]}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    assert_eq!(d.as_deref(), Some("@1795910400"), "old sender shape");
    answers.push((
        "public sender (old shape)".into(),
        "5511930090002".into(),
        m["data"].clone(),
        None,
    ));
    let m = mcp_send(&app, &account, json!({"channel_id": ch, "to": "5511930090003", "template_id": t, "vars": {"nome": "Ana", "pedido": "A-1"}})).await;
    answers.push((
        "MCP (old arguments)".into(),
        "5511930090003".into(),
        m["data"].clone(),
        None,
    ));
    // Both shapes at once are refused, naming the conflict.
    let (s, m, _) = post(
        &app,
        &account,
        &format!("/api/v1/groups/{group}/messages"),
        json!({"to": "5511930090004", "template_id": t, "template": {"id": t}}),
    )
    .await;
    assert_eq!(
        (s, m["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("ambiguous_template")),
        "{m}"
    );
    let (s, m, _) = post(
        &app,
        &sender,
        "/api/v1/messages",
        json!({"to": "5511930090005", "template": {"id": t}, "variables": ["Ana", "A-1"]}),
    )
    .await;
    assert_eq!(
        (s, m["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("ambiguous_template")),
        "{m}"
    );

    // Every answer: the same names, the same rendered text, the same template.
    for (surface, to, data, deprecation) in &answers {
        if !surface.contains("old") {
            assert_eq!(
                deprecation, &None,
                "{surface}: the one shape is not deprecated"
            );
        }
        assert!(data["id"].as_i64().is_some(), "{surface}: {data}");
        assert!(
            data["provider_message_id"]
                .as_str()
                .is_some_and(|w| w.starts_with("wamid.")),
            "{surface}: {data}"
        );
        assert_eq!(data["to"], to.as_str(), "{surface}");
        assert_eq!(
            data["text"], "Olá Ana, seu pedido A-1 saiu.",
            "{surface}: {data}"
        );
        assert_eq!(
            data["template"],
            json!({"name": "pedido_saiu", "language": "pt_BR"}),
            "{surface}"
        );
        assert_eq!(data["channel_id"], ch, "{surface}");
    }
    // What reached the provider: the same template and parameters for every recipient.
    let ledger = app
        .sim_json(&format!(
            "/_sim/numbers/{}/sent?limit=100",
            n.phone_number_id
        ))
        .await;
    let sent = ledger["messages"].as_array().unwrap();
    for (surface, to, _, _) in &answers {
        let m = sent
            .iter()
            .find(|m| m["payload"]["to"] == to.as_str())
            .unwrap_or_else(|| panic!("{surface}: nothing sent to {to}"));
        let tpl = &m["payload"]["template"];
        assert_eq!(tpl["name"], "pedido_saiu", "{surface}: {m}");
        let body = tpl["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "body")
            .unwrap_or_else(|| panic!("{surface}: {m}"));
        let texts: Vec<&str> = body["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["Ana", "A-1"], "{surface}");
    }
    // Every message.ack names the message as the answers did.
    let ids: Vec<(i64, String)> = answers
        .iter()
        .map(|(_, _, d, _)| {
            (
                d["id"].as_i64().unwrap(),
                d["provider_message_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    eventually(15, "a message.ack per message", || async {
        let acks: Vec<Value> = receiver
            .events()
            .iter()
            .filter(|e| e.event() == "message.ack")
            .map(|e| e.json()["data"].clone())
            .collect();
        ids.iter()
            .all(|(id, wamid)| {
                acks.iter()
                    .any(|a| a["message_id"] == *id && a["provider_message_id"] == wamid.as_str())
            })
            .then_some(())
    })
    .await;
}
