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

async fn fast_channel(app: &TestApp) -> (i64, provider::sim::CreatedNumber) {
    let n = app
        .sim
        .create_number(provider::sim::CreateNumber {
            tier: Some("TIER_10K".into()),
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let (status, body) = app
        .post("/api/v1/channels/official", json!({"phone_number_id": n.phone_number_id, "waba_id": n.waba_id, "access_token": n.access_token, "app_secret": n.app_secret}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["data"]["id"].as_i64().unwrap();
    // A number already warmed up, without a daily cap or cadence: only the provider bounds it.
    let (status, g) = app
        .patch(
            &format!("/api/v1/channels/{id}/guardrails"),
            json!({"daily_cap": null, "cadence_ms": 0, "warmup": false}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{g}");
    assert_eq!(g["data"]["today"]["cap"], Value::Null);
    (id, n)
}

async fn campaign_with_audience(
    app: &TestApp,
    channels: &[(i64, i64)],
    n: usize,
    prefix: &str,
) -> i64 {
    let ids: Vec<i64> = channels.iter().map(|(c, _)| *c).collect();
    let template = approved_template(app, &ids).await;
    let chans: Vec<Value> = channels
        .iter()
        .map(|(c, w)| json!({"channel_id": c, "weight": w}))
        .collect();
    let (status, c) = app
        .post(
            "/api/v1/campaigns",
            json!({"name": "Lote", "template_id": template, "channels": chans}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["data"]["id"].as_i64().unwrap();
    let rows: Vec<Value> = (0..n)
        .map(|i| json!({"phone": format!("{prefix}{i:06}"), "vars": {"nome": format!("P{i}")}}))
        .collect();
    let (status, _) = app
        .post(
            &format!("/api/v1/campaigns/{id}/recipients"),
            json!({"recipients": rows}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    id
}

async fn summary(app: &TestApp) -> Value {
    app.http
        .get(format!("http://{}/_sim/sent/summary", app.sim_addr))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["data"]
        .clone()
}

async fn wait_state(app: &TestApp, id: i64, state: &str) -> Value {
    eventually(30, state, || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{id}")).await;
        (c["data"]["state"] == state).then_some(c["data"].clone())
    })
    .await
}

async fn a_campaign_spreads_by_weight_and_reaches_everyone_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (a, na) = fast_channel(&app).await;
    let (b, nb) = fast_channel(&app).await;
    let id = campaign_with_audience(&app, &[(a, 3), (b, 1)], 400, "5511970").await;
    let (status, started) = app
        .post(&format!("/api/v1/campaigns/{id}/start"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let done = wait_state(&app, id, "completed").await;
    assert_eq!(done["stats"]["total"], 400);
    assert_eq!(done["stats"]["queued"], 0);
    assert_eq!(done["stats"]["sending"], 0);
    assert_eq!(done["stats"]["sent"], 400, "{done}");
    let s = summary(&app).await;
    let (sa, sb) = (
        s["per_number"][&na.phone_number_id].as_f64().unwrap(),
        s["per_number"][&nb.phone_number_id].as_f64().unwrap(),
    );
    assert_eq!(sa + sb, 400.0);
    assert!(
        (2.4..=3.6).contains(&(sa / sb)),
        "3:1 weights gave {sa}:{sb}"
    );
    let per_recipient = s["per_recipient"].as_object().unwrap();
    assert_eq!(per_recipient.len(), 400);
    assert!(
        per_recipient.values().all(|t| t["oferta"] == 1),
        "everyone exactly once"
    );
    // Statuses reach the campaign's counters.
    eventually(10, "read counted", || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{id}")).await;
        (c["data"]["stats"]["read"] == 400).then_some(())
    })
    .await;
    let (status, err) = app
        .post(&format!("/api/v1/campaigns/{id}/start"), json!({}))
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_state"))
    );
}

async fn red_stops_a_number_at_once_and_the_others_finish(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (a, na) = fast_channel(&app).await;
    let (b, nb) = fast_channel(&app).await;
    // Slow A and B down so the campaign is still running when B turns RED.
    for n in [&na, &nb] {
        let r = app
            .http
            .put(format!("http://{}/_sim/faults", app.sim_addr))
            .json(&json!({"latency_ms": {"p50": 20, "p99": 30}}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", n.phone_number_id);
    }
    let id = campaign_with_audience(&app, &[(a, 1), (b, 1)], 600, "5511960").await;
    app.post(&format!("/api/v1/campaigns/{id}/start"), json!({}))
        .await;
    eventually(10, "some sends", || async {
        let s = summary(&app).await;
        (s["per_number"][&nb.phone_number_id].as_u64() >= Some(20)).then_some(())
    })
    .await;
    app.http
        .post(format!(
            "http://{}/_sim/numbers/{}/quality",
            app.sim_addr, nb.phone_number_id
        ))
        .json(&json!({"quality": "RED"}))
        .send()
        .await
        .unwrap();
    eventually(10, "RED seen", || async {
        let (_, h) = app.get(&format!("/api/v1/channels/{b}/health")).await;
        (h["data"]["code"] == "qualidade_red").then_some(())
    })
    .await;
    // In-flight sends admitted before the event may still land; nothing new after them.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let frozen = summary(&app).await["per_number"][&nb.phone_number_id]
        .as_u64()
        .unwrap();
    let done = wait_state(&app, id, "completed").await;
    let s = summary(&app).await;
    assert_eq!(
        s["per_number"][&nb.phone_number_id].as_u64().unwrap(),
        frozen,
        "no send from the RED number after the event"
    );
    assert_eq!(done["stats"]["sent"], 600);
    assert_eq!(s["per_recipient"].as_object().unwrap().len(), 600);
    assert!(s["per_recipient"]
        .as_object()
        .unwrap()
        .values()
        .all(|t| t["oferta"] == 1));
}

async fn with_no_number_left_a_campaign_pauses_and_resumes_on_recovery(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (a, na) = fast_channel(&app).await;
    let id = campaign_with_audience(&app, &[(a, 1)], 50, "5511950").await;
    app.http
        .post(format!(
            "http://{}/_sim/numbers/{}/quality",
            app.sim_addr, na.phone_number_id
        ))
        .json(&json!({"quality": "RED"}))
        .send()
        .await
        .unwrap();
    eventually(10, "RED seen", || async {
        let (_, h) = app.get(&format!("/api/v1/channels/{a}/health")).await;
        (h["data"]["code"] == "qualidade_red").then_some(())
    })
    .await;
    app.post(&format!("/api/v1/campaigns/{id}/start"), json!({}))
        .await;
    let paused = wait_state(&app, id, "paused").await;
    assert!(
        paused["pause_reason"]
            .as_str()
            .unwrap()
            .contains("qualidade_red"),
        "{paused}"
    );
    assert_eq!(paused["stats"]["sent"], 0);
    app.http
        .post(format!(
            "http://{}/_sim/numbers/{}/quality",
            app.sim_addr, na.phone_number_id
        ))
        .json(&json!({"quality": "GREEN"}))
        .send()
        .await
        .unwrap();
    let done = wait_state(&app, id, "completed").await;
    assert_eq!(done["stats"]["sent"], 50);
}

on_both_backends! {
    weighted => a_campaign_spreads_by_weight_and_reaches_everyone_once;
    red_breaker => red_stops_a_number_at_once_and_the_others_finish;
    pause_resume => with_no_number_left_a_campaign_pauses_and_resumes_on_recovery;
}
