//! Campaigns, first slice: creation with the checks of its numbers, template and var_map, the
//! audience added in batches, and the counters.

mod common;

use common::{eventually, Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn approved_template(app: &TestApp, channels: &[i64]) -> i64 {
    let (status, t) = app
        .post("/api/v1/templates", json!({"name": "Oferta", "body": "Olá {{1}}, seu cupom é {{2}}.", "var_map": {"1": {"field": "nome"}, "2": {"field": "cupom", "default": "BEMVINDO"}}, "submit_channels": channels}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    let id = t["data"]["id"].as_i64().unwrap();
    wait_approved(app, id, channels.len()).await;
    id
}

async fn wait_approved(app: &TestApp, id: i64, n: usize) {
    eventually(10, "template approved", || async {
        let (_, list) = app.get("/api/v1/templates").await;
        let t = list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .cloned()?;
        (t["channels_by_status"]["approved"].as_u64() == Some(n as u64)).then_some(())
    })
    .await;
}

async fn campaigns_check_their_numbers_and_take_their_audience_in_batches(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (c1, _) = app.connect_channel().await;
    let (c2, _) = app.connect_channel().await;
    let template = approved_template(&app, &[c1]).await;

    // The template is not approved on c2 yet: 422 with `missing`.
    let body = json!({"name": "Black Friday", "template_id": template, "channels": [{"channel_id": c1, "weight": 3}, {"channel_id": c2, "weight": 1}]});
    let (status, err) = app.post("/api/v1/campaigns", body.clone()).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("template_missing")),
        "{err}"
    );
    assert_eq!(
        err["missing"],
        json!([{"channel_id": c2, "status": "not_submitted"}])
    );
    let (status, err) = app.post("/api/v1/campaigns", json!({"name": "X", "template_id": template, "channels": [{"channel_id": 999999, "weight": 1}]})).await;
    assert_eq!(
        (status, err["invalid_channels"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!([999999]))
    );
    let (status, err) = app.post("/api/v1/campaigns", json!({"name": "X", "template_id": template, "var_map": {"7": {"field": "x"}}, "channels": [{"channel_id": c1}]})).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_var_map")),
        "{err}"
    );
    for (b, code) in [
        (
            json!({"name": "X", "template_id": 999, "channels": [{"channel_id": c1}]}),
            "unknown_template",
        ),
        (
            json!({"name": "X", "template_id": template, "channels": []}),
            "required",
        ),
        (
            json!({"name": "X", "template_id": template, "channels": [{"channel_id": c1, "weight": 0}]}),
            "invalid_weight",
        ),
        (
            json!({"name": "X", "template_id": template, "channels": [{"channel_id": c1}, {"channel_id": c1}]}),
            "duplicate_channel",
        ),
    ] {
        let (status, err) = app.post("/api/v1/campaigns", b.clone()).await;
        assert_eq!(
            (status, err["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(code)),
            "{b}: {err}"
        );
    }

    let (_, _) = app
        .post(
            &format!("/api/v1/templates/{template}/channels"),
            json!({"channels": [c2]}),
        )
        .await;
    wait_approved(&app, template, 2).await;
    let (status, created) = app.post("/api/v1/campaigns", body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let c = &created["data"];
    assert_eq!(
        (c["state"].as_str(), c["category"].as_str()),
        (Some("draft"), Some("marketing"))
    );
    assert_eq!(
        c["channels"],
        json!([{"channel_id": c1, "weight": 3}, {"channel_id": c2, "weight": 1}])
    );
    let id = c["id"].as_i64().unwrap();

    // A batch: normalised phones, duplicates dropped, invalid rows reported by index.
    let (status, out) = app
        .post(
            &format!("/api/v1/campaigns/{id}/recipients"),
            json!({"recipients": [
                {"phone": "+55 (11) 98888-0001", "vars": {"nome": "Ana"}},
                {"phone": "5511988880001", "vars": {"nome": "Ana de novo"}},
                {"phone": "123", "vars": {"nome": "Curto"}},
                {"phone": "5511988880002", "vars": {"cupom": "X"}},
                {"phone": "5511988880003", "vars": {"nome": "Bia", "cupom": "VIP"}},
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let d = &out["data"];
    assert_eq!(
        (
            d["added"].as_u64(),
            d["duplicates"].as_u64(),
            d["total"].as_i64()
        ),
        (Some(2), Some(1), Some(2)),
        "{d}"
    );
    let invalid: Vec<i64> = d["invalid"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["index"].as_i64().unwrap())
        .collect();
    assert_eq!(invalid, vec![2, 3]);
    assert!(
        d["invalid"][1]["reason"].as_str().unwrap().contains("nome"),
        "{d}"
    );
    let (_, again) = app
        .post(
            &format!("/api/v1/campaigns/{id}/recipients"),
            json!({"recipients": [{"phone": "5511988880003", "vars": {"nome": "Bia"}}]}),
        )
        .await;
    assert_eq!(
        (
            again["data"]["added"].as_u64(),
            again["data"]["duplicates"].as_u64()
        ),
        (Some(0), Some(1))
    );

    // A full batch of 10,000 goes in one call; one more row is refused.
    let rows: Vec<Value> = (0..10_000)
        .map(|i| json!({"phone": format!("55219{i:08}"), "vars": {"nome": format!("Pessoa {i}")}}))
        .collect();
    let (status, big) = app
        .post(
            &format!("/api/v1/campaigns/{id}/recipients"),
            json!({"recipients": rows}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{big}");
    assert_eq!(big["data"]["added"], 10_000);
    let rows: Vec<Value> = (0..10_001)
        .map(|i| json!({"phone": format!("55319{i:08}"), "vars": {}}))
        .collect();
    let (status, err) = app
        .post(
            &format!("/api/v1/campaigns/{id}/recipients"),
            json!({"recipients": rows}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_batch"))
    );

    let (status, progress) = app.get(&format!("/api/v1/campaigns/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        progress["data"]["stats"],
        json!({"total": 10_002, "queued": 10_002, "sending": 0, "sent": 0, "delivered": 0, "read": 0, "failed": 0, "skipped": 0})
    );
}

on_both_backends! {
    campaigns => campaigns_check_their_numbers_and_take_their_audience_in_batches;
}
