//! The MCP tool endpoint (decision D-033) driven by the official MCP Python SDK (`mcp` on
//! PyPI, pinned in tests/requirements.txt) as the client, plus the protocol's edges by hand.

mod common;

use common::{Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn approved_template(app: &TestApp, channel: i64) -> i64 {
    app.approved_template(json!({"name": "Oferta MCP", "body": "Olá {{1}}, tudo bem?", "var_map": {"1": {"field": "nome"}}}), &[channel]).await
}

async fn rpc(app: &TestApp, token: &str, body: &str) -> (StatusCode, String) {
    let resp = reqwest::Client::new()
        .post(app.url("/api/v1/mcp"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.text().await.unwrap())
}

async fn the_python_sdk_lists_tools_and_calls_them_with_levels(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, _) = app.connect_channel().await;
    let template = approved_template(&app, channel).await;
    let (status, read) = app
        .post(
            "/api/v1/tokens",
            json!({"name": "bot leitura", "level": "read"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{read}");
    let read_token = read["data"]["token"].as_str().unwrap().to_string();

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/client.py");
    let url = app.url("/api/v1/mcp");
    let args = [
        script.to_string(),
        url,
        app.token.clone(),
        read_token,
        channel.to_string(),
        template.to_string(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3").args(&args).output()
    })
    .await
    .unwrap()
    .expect("python3 runs");
    assert!(
        out.status.success(),
        "the MCP client failed (install tests/requirements.txt):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the client prints JSON");

    assert_eq!(seen["server"], "disparo");
    let tools = seen["tools"].as_object().unwrap();
    for name in [
        "list_channels",
        "channel_health",
        "list_templates",
        "send_template",
        "campaign_status",
        "create_campaign",
    ] {
        assert_eq!(tools[name]["type"], "object", "{name} has an inputSchema");
    }
    assert_eq!(seen["auto_mode_tools"].as_array().unwrap().len(), 6);
    assert_eq!(
        tools["create_campaign"]["properties"]["dry_run"]["type"],
        "boolean"
    );

    // list_channels: id, name, phone, status, engine.
    let listed = &seen["list_channels"];
    assert_eq!(listed["is_error"], false);
    let ch = &listed["structured"]["channels"][0];
    assert_eq!(ch["id"], channel);
    assert_eq!(ch["engine"], "cloud_api");
    assert_eq!(ch["status"], "WORKING");
    assert!(ch["phone"].as_str().is_some_and(|p| !p.is_empty()));
    assert_eq!(listed["text"], listed["structured"]);

    // The dry run checked the audience and the headroom, and stored nothing.
    let dry = &seen["dry_run"];
    assert_eq!(dry["is_error"], false, "{dry}");
    let d = &dry["structured"]["data"];
    assert_eq!(d["dry_run"], true);
    assert_eq!(d["valid"], 1, "{d}");
    assert_eq!(d["duplicates"], 1);
    let invalid: Vec<i64> = d["invalid"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["index"].as_i64().unwrap())
        .collect();
    assert_eq!(invalid, vec![2, 3], "bad phone and missing `nome`: {d}");
    assert_eq!(d["channels"][0]["channel_id"], channel);
    // A new number warms up: 50 campaign sends on day 1.
    assert_eq!(d["channels"][0]["cap_remaining_today"], 50, "{d}");
    assert_eq!(d["headroom_today"], 50);
    assert_eq!(d["fits_today"], true);
    let (status, err) = app
        .post("/api/v1/campaigns", json!({"name": "X", "template_id": template, "channels": [{"channel_id": channel}], "recipients": [{"phone": "5511999990001"}]}))
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("recipients_need_dry_run")
        )
    );
    let (status, _) = app.get("/api/v1/campaigns/1").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a dry run stores no campaign"
    );

    assert_eq!(seen["health"]["is_error"], false);
    assert_eq!(seen["health"]["structured"]["data"]["good"], true);

    // send_template with the write token sends (the simulator got it)…
    let send = &seen["send"];
    assert_eq!(send["is_error"], false, "{send}");
    assert_eq!(send["structured"]["data"]["status"], "sent", "{send}");
    // …and a read token is refused with the route's 403 naming the level.
    let refused = &seen["read_send"];
    assert_eq!(refused["is_error"], true);
    assert_eq!(
        refused["structured"]["code"], "insufficient_level",
        "{refused}"
    );
    assert!(refused["structured"]["message"]
        .as_str()
        .unwrap()
        .contains("write"));
    assert_eq!(seen["read_list"]["is_error"], false);
    let log: Value = reqwest::get(format!("http://{}/_sim/sent/summary", app.sim_addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let recipients: Vec<&String> = log["data"]["per_recipient"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        recipients,
        vec!["5511988887777"],
        "one send, by the write token: {log}"
    );
    assert_eq!(log["data"]["total"], 1, "{log}");
}

async fn protocol_edges_answer_as_json_rpc(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let token = app.token.clone();
    // No token: 401 like every route of /api/v1.
    let resp = reqwest::Client::new()
        .post(app.url("/api/v1/mcp"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    // A notification: 202, no body.
    let (status, body) = rpc(
        &app,
        &token,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!((status, body.as_str()), (StatusCode::ACCEPTED, ""));
    for (req, code) in [
        ("not json", -32700),
        ("[]", -32600),
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, -32600),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"channel_health","arguments":{}}}"#,
            -32602,
        ),
    ] {
        let (status, body) = rpc(&app, &token, req).await;
        assert_eq!(status, StatusCode::OK, "{req}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["error"]["code"], code, "{req}: {v}");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    // An unknown revision gets our newest; a known one is echoed.
    let (_, body) = rpc(&app, &token, r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25");
    let (_, body) = rpc(&app, &token, r#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["id"].clone(), v["result"]["protocolVersion"].clone()),
        (json!("a"), json!("2025-03-26"))
    );
    // A tool on another account's record: the route's 404 as a tool error.
    let other = app.other_account_token().await;
    let (_, body) = rpc(&app, &other, r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"campaign_status","arguments":{"campaign_id":1}}}"#).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert_eq!(v["result"]["structuredContent"]["code"], "not_found", "{v}");
}

on_both_backends! {
    python_sdk => the_python_sdk_lists_tools_and_calls_them_with_levels;
    protocol_edges => protocol_edges_answer_as_json_rpc;
}
