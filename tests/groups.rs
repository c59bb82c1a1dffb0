//! Sending groups (spec "Sending groups"; decision D-037) through the real server and the
//! simulator: management, the shared limit, templates in common, and the group send through
//! the number with most headroom.

mod common;

use common::{eventually, Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn number(app: &TestApp, tier: &str) -> (i64, String, String) {
    let (id, n) = app.connect_number(tier, None).await;
    (id, n.phone_number_id, n.waba_id)
}

async fn approved_template(app: &TestApp, name: &str, channels: &[i64]) -> i64 {
    app.approved_template(json!({"name": name, "body": "Olá {{1}}, seu pedido {{2}} saiu.", "var_map": {"1": {"field": "nome"}, "2": {"field": "pedido"}}}), channels).await
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
    // The group's quota (issue 49): its figures, and room again when its first recipient's
    // 24 h end; the header says the same.
    assert_eq!(
        (&err["scope"], &err["limit"], &err["remaining"]),
        (&json!("group"), &json!(3), &json!(0)),
        "{err}"
    );
    let r = app
        .http
        .post(app.url(&format!("/api/v1/groups/{id}/messages")))
        .bearer_auth(&app.token)
        .json(&json!({"to": "5511977770005", "template_id": both, "params": ["Ana", "123"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let header: i64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["retry_after"], header, "{body}");
    assert!((86_000..=86_400).contains(&header), "{body}");
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

async fn fast_number(app: &TestApp) -> (i64, String) {
    let (id, n) = app.fast_channel().await;
    (id, n.phone_number_id)
}

fn audience(prefix: &str, n: usize) -> Value {
    (0..n)
        .map(|i| json!({"phone": format!("{prefix}{i:04}"), "vars": {"nome": format!("C{i}"), "pedido": format!("P{i}")}}))
        .collect()
}

async fn per_number(app: &TestApp) -> Value {
    app.sim_summary().await["per_number"].clone()
}

async fn wait_campaign(app: &TestApp, id: i64, state: &str) -> Value {
    eventually(30, state, || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{id}")).await;
        (c["data"]["state"] == state && c["data"]["stats"]["sending"] == 0)
            .then_some(c["data"].clone())
    })
    .await
}

async fn group_campaigns_run_over_the_groups_numbers(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (a, pa) = fast_number(&app).await;
    let (b, pb) = fast_number(&app).await;
    let (c, pc) = fast_number(&app).await;
    let (d, pd) = fast_number(&app).await;
    let t = approved_template(&app, "Pedido", &[a, b, c, d]).await;
    let only_a = approved_template(&app, "Só A", &[a]).await;
    let (_, g1) = app
        .post(
            "/api/v1/groups",
            json!({"name": "Juntos", "channel_ids": [a, b]}),
        )
        .await;
    let all_group = g1["data"]["id"].as_i64().unwrap();
    let (_, g2) = app
        .post(
            "/api/v1/groups",
            json!({"name": "Um por vez", "channel_ids": [c, d]}),
        )
        .await;
    let seq_group = g2["data"]["id"].as_i64().unwrap();
    let path = |g: i64| format!("/api/v1/groups/{g}/campaigns");

    // Bad requests.
    for (body, code) in [
        (
            json!({"name": "X", "template_id": only_a}),
            "template_missing",
        ),
        (
            json!({"name": "X", "template_id": t, "mode": "aleatorio"}),
            "invalid_mode",
        ),
        (
            json!({"name": "X", "template_id": t, "start": false, "scheduled_at": "2030-01-01T09:00"}),
            "schedule_needs_start",
        ),
        (
            json!({"name": "X", "template_id": t, "scheduled_at": "amanhã"}),
            "invalid_date",
        ),
    ] {
        let (status, err) = app.post(&path(all_group), body.clone()).await;
        assert_eq!(
            (status, err["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some(code)),
            "{body}: {err}"
        );
    }

    // `start: false` only creates.
    let (status, draft) = app
        .post(&path(all_group), json!({"name": "Rascunho", "template_id": t, "start": false, "recipients": audience("55119100", 3)}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{draft}");
    assert_eq!(
        (
            draft["data"]["state"].clone(),
            draft["data"]["group_id"].clone()
        ),
        (json!("draft"), json!(all_group))
    );
    assert_eq!(draft["recipients"]["added"], 3);

    // `all`: every number together.
    let (status, cam) = app
        .post(
            &path(all_group),
            json!({"name": "Todos", "template_id": t, "recipients": audience("55119200", 20)}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{cam}");
    assert_eq!(cam["data"]["mode"], "all");
    let done = wait_campaign(&app, cam["data"]["id"].as_i64().unwrap(), "completed").await;
    assert_eq!(done["stats"]["sent"], 20);
    let sent = per_number(&app).await;
    let (na, nb) = (
        sent[&pa].as_u64().unwrap_or(0),
        sent[&pb].as_u64().unwrap_or(0),
    );
    assert_eq!(na + nb, 20);
    assert!(na > 0 && nb > 0, "both numbers sent: {sent}");

    // `sequential`: c alone until its daily cap (5) runs out, then d by itself.
    let (status, _) = app
        .patch(
            &format!("/api/v1/channels/{c}/guardrails"),
            json!({"daily_cap": 5}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, cam) = app
        .post(&path(seq_group), json!({"name": "Em fila", "template_id": t, "mode": "sequential", "recipients": audience("55119300", 12)}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{cam}");
    let done = wait_campaign(&app, cam["data"]["id"].as_i64().unwrap(), "completed").await;
    assert_eq!(done["stats"]["sent"], 12, "{done}");
    let sent = per_number(&app).await;
    assert_eq!(
        (sent[&pc].as_u64(), sent[&pd].as_u64()),
        (Some(5), Some(7)),
        "{sent}"
    );

    // Scheduled (Brasília time, no zone): waits, then starts by itself.
    let at_ms = storage::now_ms() + 2_500;
    // The local (UTC−03:00) wall clock of `at_ms`, written without a zone.
    let local = actors::time::iso(at_ms + engine::guardrail::LOCAL_OFFSET_MS)[..19].to_string();
    let (status, cam) = app
        .post(&path(all_group), json!({"name": "Agendada", "template_id": t, "scheduled_at": local, "recipients": audience("55119400", 4)}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{cam}");
    assert_eq!(cam["data"]["state"], "scheduled", "{cam}");
    assert!(cam["data"]["scheduled_at"].is_string());
    let id = cam["data"]["id"].as_i64().unwrap();
    let (_, now) = app.get(&format!("/api/v1/campaigns/{id}")).await;
    assert_eq!(now["data"]["stats"]["sent"], 0, "nothing before its time");
    let done = wait_campaign(&app, id, "completed").await;
    assert_eq!(done["stats"]["sent"], 4);

    // The group's limit bounds its campaigns: 24 recipients so far; limit 27 → 3 more, then
    // the campaign pauses with the group's reason.
    let (status, _) = app
        .patch(
            &format!("/api/v1/groups/{all_group}"),
            json!({"limit_24h": 27}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, cam) = app
        .post(&path(all_group), json!({"name": "Além do limite", "template_id": t, "recipients": audience("55119500", 6)}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{cam}");
    let paused = wait_campaign(&app, cam["data"]["id"].as_i64().unwrap(), "paused").await;
    assert_eq!(paused["stats"]["sent"], 3, "{paused}");
    assert!(
        paused["pause_reason"]
            .as_str()
            .unwrap()
            .contains("limite_24h_esgotado"),
        "{paused}"
    );
    // The group send route is refused too.
    let (status, _) = group_send(&app, all_group, "5511955550000", t).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);

    // A group with a campaign that is not over is kept (D-080): 409 naming it, nothing changed.
    let paused_id = paused["id"].as_i64().unwrap();
    let (status, refused) = app.delete(&format!("/api/v1/groups/{all_group}")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["code"], "grupo_com_campanhas", "{refused}");
    let open: Vec<i64> = refused["campanhas"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    assert!(open.contains(&paused_id), "{refused}");
    assert!(
        !open.contains(&id),
        "a completed campaign does not hold the group: {refused}"
    );
    let (status, _) = app.get(&format!("/api/v1/groups/{all_group}")).await;
    assert_eq!(status, StatusCode::OK);
    // Once they are over, the group goes; its finished campaigns keep their history.
    for c in &open {
        let (status, _) = app
            .post(&format!("/api/v1/campaigns/{c}/cancel"), json!({}))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, gone) = app.delete(&format!("/api/v1/groups/{all_group}")).await;
    assert_eq!(status, StatusCode::OK, "{gone}");
    let (status, _) = app.get(&format!("/api/v1/groups/{all_group}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, kept) = app.get(&format!("/api/v1/campaigns/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{kept}");
    assert_eq!(kept["data"]["state"], "completed", "{kept}");
    assert_eq!(kept["data"]["group_id"], Value::Null, "{kept}");
}

async fn concurrent_group_sends_never_pass_the_groups_limit(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (a, _, _) = number(&app, "TIER_250").await;
    let (b, _, _) = number(&app, "TIER_250").await;
    let template = approved_template(&app, "Pedido", &[a, b]).await;
    let (status, g) = app
        .post(
            "/api/v1/groups",
            json!({"name": "Balcão", "channel_ids": [a, b], "limit_24h": 3}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{g}");
    let id = g["data"]["id"].as_i64().unwrap();
    // Limit 3, four sends at once to four new recipients (N + 1), several rounds: never more
    // than 3 get through, whatever the interleaving.
    let recipients: Vec<String> = (0..4).map(|i| format!("551196666000{i}")).collect();
    let results = futures::future::join_all(
        recipients
            .iter()
            .map(|to| group_send(&app, id, to, template)),
    )
    .await;
    let created = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    let refused: Vec<&Value> = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::TOO_MANY_REQUESTS)
        .map(|(_, b)| b)
        .collect();
    assert_eq!((created, refused.len()), (3, 1), "{results:?}");
    let summary = app.sim_summary().await;
    let reached = recipients
        .iter()
        .filter(|r| summary["per_recipient"].get(r.as_str()).is_some())
        .count();
    assert_eq!(reached, 3, "the simulator got exactly the limit: {summary}");
    let (_, g) = app.get(&format!("/api/v1/groups/{id}")).await;
    assert_eq!(g["data"]["sent_24h"], 3, "{g}");
    assert_eq!(g["data"]["available"], 0, "{g}");
}

on_both_backends! {
    concurrent_limit => concurrent_group_sends_never_pass_the_groups_limit;
    groups => groups_pool_numbers_under_a_shared_limit;
    group_campaigns => group_campaigns_run_over_the_groups_numbers;
}
