//! Sending groups (spec "Sending groups"; decision D-037) through the real server and the
//! simulator: management, the shared limit, templates in common, and the group send through
//! the number with most headroom.

mod common;

use common::{eventually, Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn number(app: &TestApp, tier: &str) -> (i64, String, String) {
    let n = app
        .sim
        .create_number(provider::sim::CreateNumber {
            tier: Some(tier.into()),
            ..Default::default()
        })
        .unwrap();
    let (status, body) = app
        .post("/api/v1/channels/official", json!({"phone_number_id": n.phone_number_id, "waba_id": n.waba_id, "access_token": n.access_token, "app_secret": n.app_secret}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    (
        body["data"]["id"].as_i64().unwrap(),
        n.phone_number_id,
        n.waba_id,
    )
}

async fn approved_template(app: &TestApp, name: &str, channels: &[i64]) -> i64 {
    let (status, t) = app
        .post("/api/v1/templates", json!({"name": name, "body": "Olá {{1}}, seu pedido {{2}} saiu.", "var_map": {"1": {"field": "nome"}, "2": {"field": "pedido"}}, "submit_channels": channels}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    let id = t["data"]["id"].as_i64().unwrap();
    eventually(10, "template approved", || async {
        let (_, list) = app.get("/api/v1/templates").await;
        let t = list["data"]
            .as_array()?
            .iter()
            .find(|t| t["id"] == id)
            .cloned()?;
        (t["channels_by_status"]["approved"].as_u64() == Some(channels.len() as u64)).then_some(())
    })
    .await;
    id
}

async fn group_send(app: &TestApp, group: i64, to: &str, template: i64) -> (StatusCode, Value) {
    app.post(
        &format!("/api/v1/groups/{group}/messages"),
        json!({"to": to, "template_id": template, "params": ["Ana", "123"]}),
    )
    .await
}

async fn groups_pool_numbers_under_a_shared_limit(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (small, _, small_waba) = number(&app, "TIER_250").await;
    let (big, big_pnid, _) = number(&app, "TIER_1K").await;
    let (other, _, _) = number(&app, "TIER_250").await;
    let both = approved_template(&app, "Pedido", &[small, big]).await;
    let only_small = approved_template(&app, "Só um", &[small]).await;

    // Management: create, name in use, numbers checked.
    let (status, g) = app
        .post(
            "/api/v1/groups",
            json!({"name": "Varejo", "channel_ids": [small, big]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{g}");
    let id = g["data"]["id"].as_i64().unwrap();
    assert_eq!(
        g["data"]["limit_24h"], 1250,
        "the sum of its numbers' limits: {g}"
    );
    assert_eq!(g["data"]["limit_source"], "sum");
    assert_eq!(g["data"]["numbers"].as_array().unwrap().len(), 2);
    assert_eq!(g["data"]["numbers"][0]["health"]["group"], "Varejo");
    for (body, code) in [
        (json!({"name": "Varejo"}), "conflict"),
        (
            json!({"name": "Outro", "channel_ids": [big]}),
            "in_other_group",
        ),
        (
            json!({"name": "Outro", "channel_ids": [999999]}),
            "invalid_channels",
        ),
        (json!({"name": " "}), "required"),
        (json!({"name": "Outro", "limit_24h": 0}), "invalid_limit"),
    ] {
        let (status, err) = app.post("/api/v1/groups", body.clone()).await;
        assert_eq!(
            (status, err["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(code)),
            "{body}: {err}"
        );
    }

    // Templates in common: approved on ALL numbers, with the spec's fields.
    let (_, common) = app.get(&format!("/api/v1/groups/{id}/templates")).await;
    let t = &common["data"].as_array().unwrap()[..];
    assert_eq!(t.len(), 1, "{common}");
    assert_eq!(t[0]["id"], both);
    assert_eq!(t[0]["variables"], 2);
    for k in [
        "name",
        "provider_name",
        "category",
        "language",
        "body",
        "header_type",
        "has_media_header",
        "buttons",
        "var_map",
    ] {
        assert!(t[0].get(k).is_some(), "{k}");
    }
    // Not approved everywhere: 422 with `missing`.
    let (status, err) = group_send(&app, id, "5511977770000", only_small).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("template_missing")),
        "{err}"
    );
    assert_eq!(
        err["missing"],
        json!([{"channel_id": big, "status": "not_submitted"}])
    );

    // Most headroom: the TIER_1K number…
    let (status, sent) = group_send(&app, id, "5511977770001", both).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["data"]["channel_id"], big, "{sent}");
    let (_, m) = app
        .get(&format!("/api/v1/messages/{}", sent["data"]["id"]))
        .await;
    assert_eq!(m["data"]["channel_id"], big, "{m}");
    // …until it turns RED: then the other one.
    let r = app
        .http
        .post(format!(
            "http://{}/_sim/numbers/{big_pnid}/quality",
            app.sim_addr
        ))
        .json(&json!({"quality": "RED"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    eventually(10, "RED seen", || async {
        let (_, h) = app.get(&format!("/api/v1/channels/{big}/health")).await;
        (h["data"]["code"] == "qualidade_red").then_some(())
    })
    .await;
    let (status, sent) = group_send(&app, id, "5511977770002", both).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["data"]["channel_id"], small, "{sent}");

    // The shared counter: two unique recipients in 24 h.
    let (_, g) = app.get(&format!("/api/v1/groups/{id}")).await;
    assert_eq!(g["data"]["sent_24h"], 2, "{g}");
    assert_eq!(g["data"]["available"], 1248);
    // An own limit, lower: exhausted → 429; a recipient already counted still goes.
    let (status, g) = app
        .patch(&format!("/api/v1/groups/{id}"), json!({"limit_24h": 3}))
        .await;
    assert_eq!(status, StatusCode::OK, "{g}");
    assert_eq!(
        (
            g["data"]["limit_24h"].clone(),
            g["data"]["limit_source"].clone()
        ),
        (json!(3), json!("own"))
    );
    let (status, _) = group_send(&app, id, "5511977770003", both).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, err) = group_send(&app, id, "5511977770004", both).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("limite_24h_esgotado")),
        "{err}"
    );
    let (status, _) = group_send(&app, id, "5511977770003", both).await;
    assert_eq!(status, StatusCode::CREATED, "already counted in the window");
    // Back to the sum; rename.
    let (_, g) = app
        .patch(
            &format!("/api/v1/groups/{id}"),
            json!({"limit_24h": null, "name": "Varejo SP"}),
        )
        .await;
    assert_eq!(
        (g["data"]["limit_24h"].clone(), g["data"]["name"].clone()),
        (json!(1250), json!("Varejo SP"))
    );

    // The list shows limit, use, headroom and templates in common.
    let (_, list) = app.get("/api/v1/groups").await;
    let row = &list["data"][0];
    assert_eq!(
        (
            row["sent_24h"].clone(),
            row["available"].clone(),
            row["numbers"].clone()
        ),
        (json!(3), json!(1247), json!(2))
    );
    assert_eq!(
        row["templates_in_common"],
        json!([{"id": both, "name": "Pedido"}])
    );

    // Numbers join and leave; the counter keeps the group's recipients.
    let (status, g) = app
        .post(
            &format!("/api/v1/groups/{id}/numbers"),
            json!({"channel_ids": [other]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{g}");
    assert_eq!(g["data"]["limit_24h"], 1500);
    let (_, h) = app.get(&format!("/api/v1/channels/{other}/health")).await;
    assert_eq!(h["data"]["group"], "Varejo SP");
    let (status, g) = app
        .delete(&format!("/api/v1/groups/{id}/numbers/{other}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{g}");
    assert_eq!(g["data"]["limit_24h"], 1250);
    let (_, h) = app.get(&format!("/api/v1/channels/{other}/health")).await;
    assert_eq!(h["data"]["group"], "");
    let (status, _) = app
        .delete(&format!("/api/v1/groups/{id}/numbers/{other}"))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "not in the group");

    // A number linked with `same_group` joins the lender's group.
    let (status, linked) = app
        .post(
            &format!("/api/v1/wabas/{small_waba}/numbers"),
            json!({"phone": "11977001100", "verified_name": "Loja Filial", "method": "NONE", "same_group": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{linked}");
    let new_id = linked["data"]["channel_id"].as_i64().unwrap();
    let (_, g) = app.get(&format!("/api/v1/groups/{id}")).await;
    let members: Vec<i64> = g["data"]["numbers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_i64().unwrap())
        .collect();
    assert_eq!(members, vec![small, big, new_id]);
    let (_, h) = app.get(&format!("/api/v1/channels/{new_id}/health")).await;
    assert_eq!(h["data"]["group"], "Varejo SP");
    let (status, _) = app
        .delete(&format!("/api/v1/groups/{id}/numbers/{new_id}"))
        .await;
    assert_eq!(status, StatusCode::OK);

    // Another account sees no group.
    let intruder = app.other_account_token().await;
    let (status, _) = app.get_as(&intruder, &format!("/api/v1/groups/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Deleting the group frees its numbers.
    let (status, _) = app.delete(&format!("/api/v1/groups/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    let (_, h) = app.get(&format!("/api/v1/channels/{small}/health")).await;
    assert_eq!(h["data"]["group"], "");
    let (status, _) = app.get(&format!("/api/v1/groups/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, g) = app
        .post(
            "/api/v1/groups",
            json!({"name": "Novo", "channel_ids": [small, big]}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "free to join another group: {g}"
    );
}

on_both_backends! {
    groups => groups_pool_numbers_under_a_shared_limit;
}
