//! The template library end to end: problems, one provider template per WABA, status
//! webhooks, sends rendered from the var_map, rejection, reactivation as `_v2`, sync, and a
//! deletion the provider refuses.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use provider::sim::CreateNumber;
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn connect(app: &TestApp, n: &provider::sim::CreatedNumber) -> i64 {
    let (status, body) = app
        .post("/api/v1/channels/official", json!({"phone_number_id": n.phone_number_id, "waba_id": n.waba_id, "access_token": n.access_token, "app_secret": n.app_secret}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["data"]["id"].as_i64().unwrap()
}

async fn sim_templates(
    app: &TestApp,
    n: &provider::sim::CreatedNumber,
) -> Vec<provider::wire::TemplateInfo> {
    let client = provider::GraphClient::new(provider::GraphConfig {
        base_url: format!("http://{}", app.sim_addr),
        ..Default::default()
    });
    client
        .list_templates(&n.access_token, &n.waba_id)
        .await
        .unwrap()
}

async fn template_of(app: &TestApp, id: i64) -> Value {
    let (_, list) = app.get("/api/v1/templates").await;
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

async fn ledger_last(app: &TestApp, n: &provider::sim::CreatedNumber) -> Value {
    let v: Value = app
        .http
        .get(format!(
            "http://{}/_sim/numbers/{}/sent?limit=1",
            app.sim_addr, n.phone_number_id
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["data"]["messages"][0]["payload"].clone()
}

async fn the_library_follows_the_provider_from_submission_to_deletion(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let a1 = app
        .sim
        .create_number(CreateNumber {
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let a2 = app
        .sim
        .create_number(CreateNumber {
            waba_id: Some(a1.waba_id.clone()),
            ..Default::default()
        })
        .unwrap();
    let b1 = app.sim.create_number(CreateNumber::default()).unwrap();
    let (c1, c2, c3) = (
        connect(&app, &a1).await,
        connect(&app, &a2).await,
        connect(&app, &b1).await,
    );
    let receiver = Receiver::start().await;
    app.subscribe(c1, &receiver, &["template.status"]).await;
    app.subscribe(c3, &receiver, &["template.status"]).await;

    // A template with problems is stored, listed with them, and not submitted.
    let (status, bad) = app
        .post("/api/v1/templates", json!({"name": "Ruim", "body": "{{1}} {{2}}", "var_map": {"3": {"field": "x"}}, "submit_channels": [c1]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{bad}");
    let codes: Vec<&str> = bad["data"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["code"].as_str().unwrap())
        .collect();
    for c in [
        "variable_at_edge",
        "adjacent_variables",
        "var_map_unknown_variable",
    ] {
        assert!(codes.contains(&c), "{c} in {codes:?}");
    }
    assert_eq!(bad["data"]["channels"], json!([]));
    let (status, err) = app
        .post(
            &format!("/api/v1/templates/{}/submit", bad["data"]["id"]),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("template_has_problems")
        )
    );
    assert!(err["problems"].as_array().is_some_and(|p| !p.is_empty()));

    // A good one, submitted to three numbers in two WABAs.
    let (status, created) = app
        .post(
            "/api/v1/templates",
            json!({
                "name": "Promoção de Natal",
                "body": "Olá {{1}}, seu cupom é {{2}}. Aproveite!",
                "footer_text": "Loja Teste",
                "buttons": [{"type": "url", "text": "Ver oferta", "url": "https://loja.example/o/{{1}}", "example": "abc"}],
                "var_map": {"1": {"field": "nome"}, "2": {"field": "cupom", "default": "NATAL10"}, "btn:0": {"field": "pedido"}},
                "submit_channels": [c1, c2, c3],
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let t = &created["data"];
    let id = t["id"].as_i64().unwrap();
    assert_eq!(
        (
            t["provider_name"].as_str(),
            t["category"].as_str(),
            t["language"].as_str()
        ),
        (Some("promocao_de_natal"), Some("marketing"), Some("pt_BR"))
    );
    assert_eq!(t["problems"], json!([]));
    assert_eq!(t["channels"].as_array().unwrap().len(), 3);
    assert_eq!(
        sim_templates(&app, &a1)
            .await
            .iter()
            .filter(|x| x.name == "promocao_de_natal")
            .count(),
        1,
        "one provider template per WABA"
    );
    assert_eq!(
        sim_templates(&app, &b1)
            .await
            .iter()
            .filter(|x| x.name == "promocao_de_natal")
            .count(),
        1
    );

    let t = eventually(10, "approved everywhere", || async {
        let t = template_of(&app, id).await;
        (t["channels_by_status"] == json!({"approved": 3})).then_some(t)
    })
    .await;
    let events = eventually(10, "template.status for c1 and c3", || async {
        let e: Vec<Value> = receiver
            .events()
            .iter()
            .map(|c| c.json())
            .filter(|e| e["data"]["status"] == "approved")
            .collect();
        (e.len() >= 2).then_some(e)
    })
    .await;
    assert!(events
        .iter()
        .all(|e| e["event"] == "template.status" && e["data"]["name"] == "Promoção de Natal"));

    // Sends render the var_map; a missing column without default is refused.
    let (status, sent) = app
        .post("/api/v1/messages", json!({"to": "5511911110000", "channel_id": c1, "template": {"id": id, "vars": {"nome": "Ana", "pedido": "A-77"}}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(
        sent["data"]["preview_text"],
        "Olá Ana, seu cupom é NATAL10. Aproveite!"
    );
    let payload = ledger_last(&app, &a1).await;
    assert_eq!(payload["template"]["name"], "promocao_de_natal");
    assert_eq!(
        payload["template"]["components"][0]["parameters"],
        json!([{"type": "text", "text": "Ana"}, {"type": "text", "text": "NATAL10"}])
    );
    assert_eq!(
        payload["template"]["components"][1]["parameters"][0]["text"],
        "A-77"
    );
    let (status, err) = app.post("/api/v1/messages", json!({"to": "5511911110000", "channel_id": c1, "template": {"id": id, "vars": {"pedido": "A-1"}}})).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("missing_vars")),
        "{err}"
    );

    // Paused on WABA B: sends there fail at the provider; reactivation submits _v2, used once approved.
    let b_row = t["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel_id"] == c3)
        .unwrap()
        .clone();
    let provider_id = b_row["provider_template_id"].as_str().unwrap().to_string();
    let r = app
        .http
        .post(format!(
            "http://{}/_sim/templates/{provider_id}/status",
            app.sim_addr
        ))
        .json(&json!({"status": "PAUSED"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    eventually(10, "paused on c3", || async {
        let t = template_of(&app, id).await;
        t["channels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["channel_id"] == c3 && c["status"] == "paused")
            .then_some(())
    })
    .await;
    let vars = json!({"nome": "Bia", "pedido": "B-1"});
    let (status, err) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511922220000", "channel_id": c3, "template": {"id": id, "vars": vars}}),
        )
        .await;
    assert_eq!(
        (status, err["provider_code"].as_i64()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some(132015)),
        "{err}"
    );
    let (status, err) = app
        .post(
            &format!("/api/v1/templates/{id}/channels/{c1}/reactivate"),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("not_paused"))
    );
    let (status, re) = app
        .post(
            &format!("/api/v1/templates/{id}/channels/{c3}/reactivate"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{re}");
    assert_eq!(re["data"]["nome"], "promocao_de_natal_v2");
    eventually(10, "v2 approved", || async {
        let t = template_of(&app, id).await;
        t["channels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| {
                c["channel_id"] == c3
                    && c["status"] == "approved"
                    && c["provider_name"] == "promocao_de_natal_v2"
            })
            .then_some(())
    })
    .await;
    let (status, sent) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511922220000", "channel_id": c3, "template": {"id": id, "vars": vars}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(
        ledger_last(&app, &b1).await["template"]["name"],
        "promocao_de_natal_v2"
    );
    let (status, _) = app
        .post("/api/v1/messages", json!({"to": "5511922220001", "channel_id": c3, "template": {"name": "promocao_de_natal", "language": "pt_BR", "params": ["Caio", "X"], "button_param": "C-1"}}))
        .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "sending by the base name uses the approved version"
    );
    assert_eq!(
        ledger_last(&app, &b1).await["template"]["name"],
        "promocao_de_natal_v2"
    );

    // Sync reads a change made at the provider without a webhook.
    app.http
        .put(format!("http://{}/_sim/config", app.sim_addr))
        .json(&json!({"webhook_url": null}))
        .send()
        .await
        .unwrap();
    let a_id = t["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel_id"] == c1)
        .unwrap()["provider_template_id"]
        .as_str()
        .unwrap()
        .to_string();
    app.http
        .post(format!(
            "http://{}/_sim/templates/{a_id}/status",
            app.sim_addr
        ))
        .json(&json!({"status": "REJECTED", "reason": "INCORRECT_CATEGORY"}))
        .send()
        .await
        .unwrap();
    let (_, synced) = app
        .post(&format!("/api/v1/templates/{id}/sync"), json!({}))
        .await;
    assert_eq!(synced["data"]["synced_channels"], 3);
    let t = template_of(&app, id).await;
    assert_eq!(
        t["channels_by_status"],
        json!({"approved": 1, "rejected": 2}),
        "{t}"
    );

    // A deletion refused in one WABA removes nothing from the library.
    let (first, second) = if a1.waba_id < b1.waba_id {
        (&a1, &b1)
    } else {
        (&b1, &a1)
    };
    let r = app
        .http
        .put(format!("http://{}/_sim/faults", app.sim_addr))
        .json(&json!({"next_errors": [{"waba_id": second.waba_id, "code": 200, "count": 1}]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let (status, err) = app
        .http
        .delete(app.url(&format!("/api/v1/templates/{id}")))
        .bearer_auth(&app.token)
        .send()
        .await
        .map(|r| (r.status(), r))
        .unwrap();
    // A permission error (code 200) is the request's fault at the provider: 422 (D-107).
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: Value = err.json().await.unwrap();
    assert_eq!(
        (err["code"].as_str(), err["retryable"].as_bool()),
        (Some("provider_refused"), Some(false)),
        "{err}"
    );
    assert_eq!(err["failed_waba"], second.waba_id.as_str(), "{err}");
    assert_eq!(err["deleted_wabas"], json!([first.waba_id]));
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("Permissions error"),
        "{err}"
    );
    assert!(
        !template_of(&app, id).await.is_null(),
        "the library keeps it"
    );
    let r = app
        .http
        .delete(app.url(&format!("/api/v1/templates/{id}")))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(template_of(&app, id).await.is_null());
    for n in [&a1, &b1] {
        assert!(
            !sim_templates(&app, n)
                .await
                .iter()
                .any(|x| x.name.starts_with("promocao_de_natal")),
            "every version deleted in every WABA"
        );
    }
    let other = app.other_account_token().await;
    let (status, _) = app
        .post_as(
            &other,
            &format!("/api/v1/templates/{}/sync", bad["data"]["id"]),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The number's row of template `id` once `ready` holds for it.
async fn row_when(app: &TestApp, id: i64, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    eventually(10, what, || async {
        let t = template_of(app, id).await;
        t["channels"]
            .as_array()
            .and_then(|c| c.first().cloned())
            .filter(&ready)
    })
    .await
}

/// The provider can send a template's review webhook before its answer to the creation
/// arrives: the review still lands, for a submission and for a reactivation (`_v2`), and the
/// answer then adds the provider's id without undoing it.
async fn a_review_webhook_before_the_answer_is_not_lost(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let n = app.sim.create_number(CreateNumber::default()).unwrap();
    let c = connect(&app, &n).await;

    // The simulator reviews after 50 ms; its answer comes 600 ms after the creation.
    app.hold_answers(Some(600)).await;
    let started = std::time::Instant::now();
    let (status, body) = app
        .post("/api/v1/templates", json!({"name": "Aviso", "body": "Olá {{1}}, tudo certo.", "var_map": {"1": {"field": "nome"}}, "submit_channels": [c]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(600));
    app.hold_answers(None).await;
    let id = body["data"]["id"].as_i64().unwrap();
    let row = row_when(&app, id, "approved with the provider's id", |r| {
        r["status"] == "approved" && r["provider_template_id"].is_string()
    })
    .await;
    let provider_id = row["provider_template_id"].as_str().unwrap().to_string();
    assert_eq!(
        sim_templates(&app, &n)
            .await
            .iter()
            .find(|t| t.id == provider_id)
            .map(|t| t.status.clone()),
        Some("APPROVED".into())
    );

    // Paused, then reactivated while answers are held: `_v2` ends approved.
    let r = app
        .http
        .post(format!(
            "http://{}/_sim/templates/{provider_id}/status",
            app.sim_addr
        ))
        .json(&json!({"status": "PAUSED"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    row_when(&app, id, "paused", |r| r["status"] == "paused").await;
    app.hold_answers(Some(600)).await;
    let (status, re) = app
        .post(
            &format!("/api/v1/templates/{id}/channels/{c}/reactivate"),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{re}");
    app.hold_answers(None).await;
    row_when(&app, id, "v2 approved with its id", |r| {
        r["status"] == "approved"
            && r["provider_name"] == "aviso_v2"
            && r["provider_template_id"].is_string()
            && r["provider_template_id"] != provider_id.as_str()
    })
    .await;
}

/// The health code of a number.
async fn health_code(app: &TestApp, channel_id: i64) -> String {
    let (_, h) = app
        .get(&format!("/api/v1/channels/{channel_id}/health"))
        .await;
    h["data"]["code"].as_str().unwrap_or_default().to_string()
}

/// The state of a template on a number (`null` when it has none).
async fn state_on(app: &TestApp, id: i64, channel_id: i64) -> Value {
    template_of(app, id).await["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel_id"] == channel_id)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Issue 17: templates follow the numbers (`auto_replicate`, `template_ausente`), are edited
/// as the provider allows (in place, else a new version), and are deleted by their provider
/// id, never every language of the name.
async fn templates_follow_the_numbers_and_are_edited_and_deleted_by_id(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let a = app
        .sim
        .create_number(CreateNumber {
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let ca = connect(&app, &a).await;
    let t1 = app
        .approved_template(
            json!({"name": "Segue os números", "body": "Olá {{1}}, tudo certo com seu pedido?", "var_map": {"1": {"field": "nome"}}}),
            &[ca],
        )
        .await;
    let t2 = app
        .approved_template(
            json!({"name": "Só deste número", "body": "Oi {{1}}, até logo.", "auto_replicate": false}),
            &[ca],
        )
        .await;
    assert_eq!(template_of(&app, t1).await["auto_replicate"], true);
    assert_eq!(template_of(&app, t2).await["auto_replicate"], false);

    // A number added to the WABA inherits the library's T1 (the WABA has it: linked).
    let (status, added) = app
        .post(
            &format!("/api/v1/wabas/{}/numbers", a.waba_id),
            json!({"phone": "11987650001", "verified_name": "Loja Filial", "method": "NONE"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{added}");
    let cb = added["data"]["channel_id"].as_i64().unwrap();
    eventually(10, "T1 on the added number", || async {
        (state_on(&app, t1, cb).await["status"] == "approved").then_some(())
    })
    .await;
    assert_eq!(state_on(&app, t2, cb).await, Value::Null, "T2 stays put");

    // A number connected in another WABA gets T1 submitted there.
    let c = app
        .sim
        .create_number(CreateNumber {
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    assert_ne!(c.waba_id, a.waba_id);
    let cc = connect(&app, &c).await;
    let on_c = eventually(10, "T1 approved on the connected number", || async {
        let s = state_on(&app, t1, cc).await;
        (s["status"] == "approved").then_some(s)
    })
    .await;
    let provider_name = template_of(&app, t1).await["provider_name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(sim_templates(&app, &c)
        .await
        .iter()
        .any(|x| x.name == provider_name && x.status == "APPROVED"));
    assert_eq!(state_on(&app, t2, cc).await, Value::Null);
    assert_eq!(health_code(&app, cc).await, "ok");

    // T1 paused on the new number's WABA: the number misses a library template.
    let c_template = on_c["provider_template_id"].as_str().unwrap().to_string();
    app.sim_template_status(&c_template, "PAUSED").await;
    eventually(10, "template_ausente", || async {
        (health_code(&app, cc).await == "template_ausente").then_some(())
    })
    .await;
    assert_eq!(health_code(&app, ca).await, "ok", "A still has it");
    app.sim_template_status(&c_template, "UNPAUSED").await;
    eventually(10, "ok again", || async {
        (health_code(&app, cc).await == "ok").then_some(())
    })
    .await;

    // Edit: approved in both WABAs, so edited in place and reviewed again.
    let (status, edited) = app
        .patch(
            &format!("/api/v1/templates/{t1}"),
            json!({"body": "Olá {{1}}, seu pedido saiu para entrega!", "footer_text": "Loja Teste"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    let edits = edited["data"]["edits"].as_array().unwrap();
    assert_eq!(edits.len(), 2, "{edited}");
    assert!(edits.iter().all(|e| e["mode"] == "edited"), "{edited}");
    assert_eq!(
        edited["data"]["body"],
        "Olá {{1}}, seu pedido saiu para entrega!"
    );
    app.wait_approved(t1, 3).await;
    let at_a = sim_templates(&app, &a).await;
    let body_at_a = at_a
        .iter()
        .find(|x| x.name == provider_name)
        .map(|x| serde_json::to_string(&x.components).unwrap())
        .unwrap();
    assert!(body_at_a.contains("saiu para entrega"), "{body_at_a}");
    assert!(body_at_a.contains("FOOTER"), "{body_at_a}");

    // Again the same day: the provider refuses a second edit of an approved template within
    // 24 h, so each WABA gets the next version.
    let (status, again) = app
        .patch(
            &format!("/api/v1/templates/{t1}"),
            json!({"body": "Olá {{1}}, seu pedido chegou!"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    for e in again["data"]["edits"].as_array().unwrap() {
        assert_eq!(e["mode"], "new_version", "{again}");
        assert_eq!(e["provider_name"], format!("{provider_name}_v2"), "{again}");
        assert!(
            e["reason"].as_str().is_some_and(|r| r.contains("24")),
            "{again}"
        );
    }
    app.wait_approved(t1, 3).await;
    assert!(sim_templates(&app, &c)
        .await
        .iter()
        .any(|x| x.name == format!("{provider_name}_v2") && x.status == "APPROVED"));

    // Only the variables: nothing at the provider.
    let (status, vars) = app
        .patch(
            &format!("/api/v1/templates/{t1}"),
            json!({"var_map": {"1": {"field": "primeiro_nome"}}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{vars}");
    assert_eq!(vars["data"]["edits"], json!([]));
    assert_eq!(vars["data"]["var_map"]["1"]["field"], "primeiro_nome");
    // A submitted template cannot be saved with problems; nothing changes.
    let (status, err) = app
        .patch(&format!("/api/v1/templates/{t1}"), json!({"body": "{{1}}"}))
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("template_has_problems")
        ),
        "{err}"
    );
    assert_eq!(
        template_of(&app, t1).await["body"],
        "Olá {{1}}, seu pedido chegou!"
    );
    // Unknown fields, another account's template.
    let (status, err) = app
        .patch(&format!("/api/v1/templates/{t1}"), json!({"corpo": "x"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    let other = app.other_account_token().await;
    let r = app
        .http
        .patch(app.url(&format!("/api/v1/templates/{t1}")))
        .bearer_auth(&other)
        .json(&json!({"body": "Olá {{1}}, outro texto aqui."}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // Deletion by id: the same name in another language at the provider stays.
    let client = provider::GraphClient::new(provider::GraphConfig {
        base_url: format!("http://{}", app.sim_addr),
        ..Default::default()
    });
    client
        .create_template(
            &a.access_token,
            &a.waba_id,
            &provider::wire::CreateTemplate {
                name: provider_name.clone(),
                language: "en_US".into(),
                category: "MARKETING".into(),
                parameter_format: None,
                components: vec![
                    json!({"type": "BODY", "text": "Hello there, your order is on its way."}),
                ],
            },
        )
        .await
        .unwrap();
    let (status, body) = app.delete(&format!("/api/v1/templates/{t1}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let left = sim_templates(&app, &a).await;
    assert!(
        left.iter()
            .any(|x| x.name == provider_name && x.language == "en_US"),
        "the other language stays: {left:?}"
    );
    assert!(
        !left
            .iter()
            .any(|x| x.name.starts_with(&provider_name) && x.language == "pt_BR"),
        "every version of this language is gone: {left:?}"
    );
    assert!(!sim_templates(&app, &c)
        .await
        .iter()
        .any(|x| x.name.starts_with(&provider_name)));
    assert_eq!(template_of(&app, t1).await, Value::Null);
}

/// Every component a template needs reaches the provider, on 1:1 (library and by name), group
/// and campaign sends: the header variable, the body, a dynamic URL suffix (from the var_map,
/// else the layout's example), the quick reply's payload and the copy code; a template the
/// library does not hold is sent as given and the provider's refusal reaches the caller
/// (issue 16; D-071).
async fn template_sends_carry_every_component(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, n) = app.connect_channel().await;
    let t = app
        .approved_template(
            json!({
                "name": "Pedido completo", "category": "utility",
                "header_text": "Pedido {{1}}",
                "body": "Olá {{1}}, seu pedido {{2}} saiu.",
                "buttons": [
                    {"type": "url", "text": "Ver", "url": "https://loja.example/p/{{1}}", "example": "A1"},
                    {"type": "quick_reply", "text": "Parar"},
                    {"type": "copy_code", "text": "", "example": "PROMO10"}
                ],
                "var_map": {"1": {"field": "nome"}, "2": {"field": "pedido"}, "header:1": {"field": "pedido"}}
            }),
            &[channel],
        )
        .await;
    let provider_name = template_of(&app, t).await["provider_name"]
        .as_str()
        .unwrap()
        .to_string();
    let components = |payload: &Value| payload["template"]["components"].clone();

    // A library send: the var_map fills header and body; no btn:0, so the layout's example.
    let (status, body) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511911110001", "template": {"id": t, "vars": {"nome": "Ana", "pedido": "B7"}}}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    assert_eq!(
        components(&ledger_last(&app, &n).await),
        json!([
            {"type": "header", "parameters": [{"type": "text", "text": "B7"}]},
            {"type": "body", "parameters": [{"type": "text", "text": "Ana"}, {"type": "text", "text": "B7"}]},
            {"type": "button", "sub_type": "url", "index": "0", "parameters": [{"type": "text", "text": "A1"}]},
            {"type": "button", "sub_type": "quick_reply", "index": "1", "parameters": [{"type": "payload", "payload": "Parar"}]},
            {"type": "button", "sub_type": "copy_code", "index": "2", "parameters": [{"type": "coupon_code", "coupon_code": "PROMO10"}]}
        ])
    );

    // By name: what the caller gives wins over the examples.
    let (status, body) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511911110002", "template": {"name": provider_name, "language": "pt_BR", "params": ["Bia", "C8"], "button_param": "C8", "header_param": "Nº C8", "coupon_code": "NATAL"}}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let sent = components(&ledger_last(&app, &n).await);
    assert_eq!(sent[0]["parameters"][0]["text"], "Nº C8");
    assert_eq!(sent[2]["parameters"][0]["text"], "C8");
    assert_eq!(sent[4]["parameters"][0]["coupon_code"], "NATAL");

    // A group send: body parameters given, the rest from the layout.
    let (status, g) = app
        .post(
            "/api/v1/groups",
            json!({"name": "Todos", "channel_ids": [channel]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{g}");
    let (status, body) = app
        .post(
            &format!("/api/v1/groups/{}/messages", g["data"]["id"]),
            json!({"to": "5511911110003", "template_id": t, "params": ["Caio", "D9"]}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let sent = components(&ledger_last(&app, &n).await);
    assert_eq!(sent.as_array().unwrap().len(), 5, "{sent}");
    assert_eq!(sent[0]["parameters"][0]["text"], "exemplo");
    assert_eq!(sent[2]["parameters"][0]["text"], "A1");

    // A campaign: each recipient's row fills the header.
    let (status, c) = app
        .post(
            "/api/v1/campaigns",
            json!({"name": "Pedidos", "template_id": t, "channels": [{"channel_id": channel, "weight": 1}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["data"]["id"].as_i64().unwrap();
    let (status, body) = app
        .post(
            &format!("/api/v1/campaigns/{id}/recipients"),
            json!({"recipients": [{"phone": "5511911110004", "vars": {"nome": "Duda", "pedido": "E1"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    app.post(&format!("/api/v1/campaigns/{id}/start"), json!({}))
        .await;
    let sent = eventually(20, "the campaign's send", || async {
        let p = ledger_last(&app, &n).await;
        (p["to"] == "5511911110004").then(|| components(&p))
    })
    .await;
    assert_eq!(sent[0]["parameters"][0]["text"], "E1");
    assert_eq!(sent[1]["parameters"][0]["text"], "Duda");
    assert_eq!(sent[3]["sub_type"], "quick_reply");

    // A template the library does not hold, sent by name without its URL suffix: the
    // provider refuses it with its code (v25.0: 132018), and the caller learns it.
    let graph = provider::GraphClient::new(provider::GraphConfig {
        base_url: format!("http://{}", app.sim_addr),
        ..Default::default()
    });
    let tid = graph
        .create_template(
            &n.access_token,
            &n.waba_id,
            &provider::wire::CreateTemplate {
                name: "fora_da_biblioteca".into(),
                language: "pt_BR".into(),
                category: "UTILITY".into(),
                parameter_format: None,
                components: vec![
                    json!({"type": "BODY", "text": "Seu pedido saiu."}),
                    json!({"type": "BUTTONS", "buttons": [{"type": "URL", "text": "Ver", "url": "https://loja.example/p/{{1}}", "example": ["A1"]}]}),
                ],
            },
        )
        .await
        .unwrap()
        .id;
    app.http
        .post(format!(
            "http://{}/_sim/templates/{tid}/status",
            app.sim_addr
        ))
        .json(&json!({"status": "APPROVED"}))
        .send()
        .await
        .unwrap();
    let (status, body) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511911110005", "template": {"name": "fora_da_biblioteca", "language": "pt_BR"}}),
        )
        .await;
    assert!(
        status.is_client_error() || status.is_server_error(),
        "{body}"
    );
    assert_eq!(body["provider_code"], 132018, "{body}");
    let (status, body) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511911110005", "template": {"name": "fora_da_biblioteca", "language": "pt_BR", "button_param": "F2"}}),
        )
        .await;
    assert!(status.is_success(), "{body}");
    // Header media given wrong is refused before the provider is called.
    let (status, body) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511911110006", "template": {"name": "fora_da_biblioteca", "language": "pt_BR", "header_media": {"type": "gif", "link": "https://x.example/a.gif"}}}),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_media_type")),
        "{body}"
    );
}

/// Issue 55 (D-126): a template created for one number leaves the account's other numbers
/// `ok`; a template submitted to a number and paused there flags that number only.
async fn a_template_flags_only_the_numbers_it_is_meant_for(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        let n = app
            .sim
            .create_number(CreateNumber {
                throughput_mps: Some(1000),
                ..Default::default()
            })
            .unwrap();
        ids.push(connect(&app, &n).await);
    }
    let (a, d) = (ids[0], ids[3]);
    let t = app
        .approved_template(
            json!({"name": "Só para a loja A", "body": "Olá {{1}}, seu pedido chegou.", "var_map": {"1": {"field": "nome"}}}),
            &[a],
        )
        .await;
    assert_eq!(template_of(&app, t).await["auto_replicate"], true);
    let t2 = app
        .approved_template(
            json!({"name": "Só para a loja D", "body": "Oi, tudo bem?"}),
            &[d],
        )
        .await;
    let on_d = state_on(&app, t2, d).await["provider_template_id"]
        .as_str()
        .unwrap()
        .to_string();
    app.sim_template_status(&on_d, "PAUSED").await;
    eventually(10, "template_ausente on D", || async {
        (health_code(&app, d).await == "template_ausente").then_some(())
    })
    .await;
    // The pass that told D told the numbers before it too (in id order): no noise there,
    // though T (auto_replicate) is approved on A only.
    for (i, id) in ids.iter().take(3).enumerate() {
        assert_eq!(health_code(&app, *id).await, "ok", "number {i}");
    }
    app.sim_template_status(&on_d, "UNPAUSED").await;
    eventually(10, "D ok again", || async {
        (health_code(&app, d).await == "ok").then_some(())
    })
    .await;
}

/// `PUT /api/v1/templates/{id}/header-example` with the file `bytes`.
async fn put_example(app: &TestApp, id: i64, bytes: Vec<u8>) -> (StatusCode, Value) {
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(bytes).file_name("exemplo.png"),
    );
    let r = app
        .http
        .put(app.url(&format!("/api/v1/templates/{id}/header-example")))
        .bearer_auth(&app.token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

/// Issue 47 item 6: a template with an image header is kept with the problem
/// `header_example_missing` (and not submitted) until its example image comes; then each
/// submission uploads the example to the provider (resumable upload) and names its handle,
/// which the simulator checks as the provider does; a send gives its own image.
async fn an_image_header_goes_to_the_provider_with_its_example(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (channel, n) = app.connect_channel().await;
    let (status, t) = app
        .post(
            "/api/v1/templates",
            json!({"name": "Oferta com foto", "category": "marketing", "header_type": "image",
                   "body": "Oferta de hoje: {{1}}.", "var_map": {"1": {"field": "produto"}},
                   "submit_channels": [channel]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    let id = t["data"]["id"].as_i64().unwrap();
    assert_eq!(t["data"]["header_type"], "image", "{t}");
    assert_eq!(
        t["data"]["problems"][0]["code"], "header_example_missing",
        "{t}"
    );
    assert_eq!(t["data"]["problems"][0]["field"], "header_example", "{t}");
    let at_provider = |list: Vec<provider::wire::TemplateInfo>| {
        list.into_iter().find(|t| t.name == "oferta_com_foto")
    };
    assert!(
        at_provider(sim_templates(&app, &n).await).is_none(),
        "not submitted without its example"
    );
    let (status, e) = app
        .post(
            &format!("/api/v1/templates/{id}/submit"),
            json!({"channels": [channel]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{e}");

    // Not an image; a template without an image header.
    let (status, e) = put_example(&app, id, b"nome;telefone\n".to_vec()).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("invalid_header_example")
        ),
        "{e}"
    );
    let (_, plain) = app
        .post(
            "/api/v1/templates",
            json!({"name": "Sem foto", "body": "Oi."}),
        )
        .await;
    let plain = plain["data"]["id"].as_i64().unwrap();
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &[7u8; 2048]].concat();
    let (status, e) = put_example(&app, plain, png.clone()).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("header_not_media")),
        "{e}"
    );

    let (status, t) = put_example(&app, id, png).await;
    assert_eq!(status, StatusCode::OK, "{t}");
    assert_eq!(t["data"]["problems"], json!([]), "{t}");
    let (status, t) = app
        .post(
            &format!("/api/v1/templates/{id}/submit"),
            json!({"channels": [channel]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{t}");
    app.wait_approved(id, 1).await;
    let header = at_provider(sim_templates(&app, &n).await)
        .expect("submitted")
        .components
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "HEADER")
        .cloned()
        .unwrap();
    assert_eq!(header["format"], "IMAGE", "{header}");
    let handle = header["example"]["header_handle"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(handle.starts_with("4::"), "an upload handle: {handle}");

    // The provider refuses a handle it did not issue.
    let client = provider::GraphClient::new(provider::GraphConfig {
        base_url: format!("http://{}", app.sim_addr),
        ..Default::default()
    });
    let forged = provider::wire::CreateTemplate {
        name: "forjado".into(),
        language: "pt_BR".into(),
        category: "MARKETING".into(),
        parameter_format: Some("POSITIONAL".into()),
        components: vec![
            json!({"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::imported"]}}),
            json!({"type": "BODY", "text": "Oi."}),
        ],
    };
    let refused = client
        .create_template(&n.access_token, &n.waba_id, &forged)
        .await;
    assert!(refused.is_err(), "a forged handle is refused: {refused:?}");

    // A send gives its own image.
    let (status, sent) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511911110009", "template": {"id": id, "params": ["café"],
                   "header_media": {"type": "image", "link": "https://loja.example/cafe.png"}}}),
        )
        .await;
    assert!(status.is_success(), "{status} {sent}");
    let payload = eventually(10, "the send at the provider", || async {
        let p = ledger_last(&app, &n).await;
        (!p.is_null()).then_some(p)
    })
    .await;
    let components = payload["template"]["components"].to_string();
    assert!(
        components.contains("https://loja.example/cafe.png"),
        "{payload}"
    );
}

on_both_backends! {
    image_header => an_image_header_goes_to_the_provider_with_its_example;
    meant_for => a_template_flags_only_the_numbers_it_is_meant_for;
    components => template_sends_carry_every_component;
    library => the_library_follows_the_provider_from_submission_to_deletion;
    review_before_answer => a_review_webhook_before_the_answer_is_not_lost;
    follow_edit_delete => templates_follow_the_numbers_and_are_edited_and_deleted_by_id;
}
