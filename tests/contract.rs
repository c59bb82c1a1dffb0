//! The OpenAPI documents are a contract (issue 18): schemathesis (PyPI, pinned in
//! `tests/requirements.txt`) generates requests from each document against a gateway seeded
//! with data and checks every answer: no 5xx (`not_a_server_error`), only documented statuses
//! (`status_code_conformance`) and content types (`content_type_conformance`), bodies that
//! match their schema (`response_schema_conformance`). Any finding fails the test. The seed is
//! fixed, so a run is reproducible; `DISPARO_CONTRACT_SEED=<n>` explores another,
//! `DISPARO_CONTRACT_ARGS` passes more options to schemathesis and `DISPARO_CONTRACT_REPORT=1`
//! prints each report.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

/// The checks every run applies.
const CHECKS: &str =
    "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance";

/// Runs schemathesis over `document` (a path of `app`) with `token`, skipping the operations
/// in `exclude` (operation ids that would end the run's own credential); panics with its
/// report on any finding.
async fn schemathesis(app: &TestApp, document: &str, base: &str, token: &str, exclude: &[&str]) {
    let mut args: Vec<String> = vec![
        "-c".into(),
        "import sys; from schemathesis.cli import schemathesis; sys.argv[0] = 'schemathesis'; schemathesis()".into(),
        "run".into(),
        app.url(document),
        "--url".into(),
        app.url(base),
        "-H".into(),
        format!("Authorization: Bearer {token}"),
        "--checks".into(),
        CHECKS.into(),
        "--max-examples".into(),
        "10".into(),
        "--seed".into(),
        std::env::var("DISPARO_CONTRACT_SEED").unwrap_or_else(|_| "20261125".into()),
        "--no-color".into(),
    ];
    for id in exclude {
        args.push("--exclude-operation-id".into());
        args.push((*id).into());
    }
    // More schemathesis options by hand (`--include-operation-id campaigns_create
    // --max-examples 200`…), to chase one finding.
    if let Ok(more) = std::env::var("DISPARO_CONTRACT_ARGS") {
        args.extend(more.split_whitespace().map(str::to_string));
    }
    let hooks_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/contract");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args(&args)
            // A drawn `Idempotency-Key` unique per request (tests/contract/idempotency_hooks.py).
            .env("SCHEMATHESIS_HOOKS", "idempotency_hooks")
            .env("PYTHONPATH", hooks_dir)
            .output()
    })
    .await
    .unwrap()
    .expect("python3 runs (run tests/setup.sh)");
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // `DISPARO_CONTRACT_REPORT=1` prints the whole report (warnings included) of a passing run.
    if std::env::var_os("DISPARO_CONTRACT_REPORT").is_some() {
        eprintln!("{document}:\n{report}");
    }
    assert!(
        out.status.success(),
        "schemathesis found problems in {document}:\n{report}"
    );
    assert!(report.contains("Tested:"), "{report}");
}

/// A gateway with a bit of everything: two numbers, approved templates, a finished campaign
/// with messages, a group, a webhook subscription, wiki pages, a 1:1 message.
async fn seeded(app: &TestApp) {
    let receiver = Receiver::start().await;
    let (c1, _) = app.fast_channel().await;
    let (c2, _) = app.fast_channel().await;
    let tpl = app
        .approved_template(
            json!({"name": "Aviso contrato", "body": "Olá {{1}}.", "var_map": {"1": {"field": "nome"}}}),
            &[c1, c2],
        )
        .await;
    let reminder = app
        .approved_template(json!({"name": "Lembrete", "body": "Tudo certo."}), &[c1])
        .await;
    let (s, c) = app
        .post(
            "/api/v1/campaigns",
            json!({"name": "Contrato", "template_id": tpl, "channels": [{"channel_id": c1}, {"channel_id": c2}]}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    let campaign = c["data"]["id"].as_i64().unwrap();
    let (s, r) = app
        .post(
            &format!("/api/v1/campaigns/{campaign}/recipients"),
            json!({"recipients": [
                {"phone": "5511988880001", "vars": {"nome": "Ana"}},
                {"phone": "5511988880002", "vars": {"nome": "Bia"}},
                {"phone": "5511988880003", "vars": {"nome": "Caio"}},
            ]}),
        )
        .await;
    assert_eq!(s, 201, "{r}");
    let (s, r) = app
        .post(&format!("/api/v1/campaigns/{campaign}/start"), json!({}))
        .await;
    assert_eq!(s, 200, "{r}");
    eventually(20, "campaign done", || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{campaign}")).await;
        (c["data"]["state"] == "completed").then_some(())
    })
    .await;
    let (s, g) = app
        .post(
            "/api/v1/groups",
            json!({"name": "Varejo", "channel_ids": [c1, c2]}),
        )
        .await;
    assert_eq!(s, 201, "{g}");
    app.subscribe(c1, &receiver, &["message.ack"]).await;
    for (title, content) in [
        ("Boas práticas", "# Boas práticas\n\nUm **passo** por dia."),
        ("Aquecimento", "Suba o volume devagar."),
    ] {
        let (s, w) = app
            .post("/api/v1/wiki", json!({"title": title, "content": content}))
            .await;
        assert_eq!(s, 201, "{w}");
    }
    let (s, m) = app
        .post(
            "/api/v1/messages",
            json!({"channel_id": c1, "to": "5511977770000", "template": {"id": reminder}}),
        )
        .await;
    assert!(s.is_success(), "{m}");
    // The receiver lives as long as the process: the subscription keeps a live target.
    std::mem::forget(receiver);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_api_keeps_its_document() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    seeded(&app).await;
    // Revoking a token could revoke the run's own. Connecting an alternative number without
    // `provider_url` calls the real 360dialog host (unreachable here: a correct 502); its
    // answers are tested against the simulator in tests/alternative.rs.
    schemathesis(
        &app,
        "/api/v1/openapi.json",
        "/api/v1",
        &app.token,
        &["tokens_revoke", "alternative_connect"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_api_keeps_its_document() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    seeded(&app).await;
    let (_, session) = app
        .panel_user("admin@contrato.test", "Admin", None, vec![])
        .await;
    let (s, t) = app
        .call(
            Method::POST,
            Some(&session),
            "/api/tasks",
            Some(json!({"titulo": "Conferir"})),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    // Logging out, or disabling or removing the run's own user, would end the run's session.
    schemathesis(
        &app,
        "/api/openapi.json",
        "/api",
        &session,
        &["panel_logout", "panel_users_update", "panel_users_delete"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_sender_keeps_its_document() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    seeded(&app).await;
    let (user, session) = app
        .panel_user("remetente@contrato.test", "Admin", None, vec![])
        .await;
    let (s, t): (_, Value) = app
        .call(
            Method::POST,
            Some(&session),
            &format!("/api/users/{user}/api-token"),
            None,
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let token = t["data"]["token"].as_str().unwrap().to_string();
    schemathesis(&app, "/api/v1/sender/openapi.json", "/api/v1", &token, &[]).await;
}

/// A client generated from the document by openapi-python-client (no one here wrote it) runs
/// the integrator's flow: connect a number, create and submit a template, create a campaign,
/// add recipients, start it, read its stats and the report
/// (`tests/contract/client_flow.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_client_runs_the_integrators_flow() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let n = app
        .sim
        .create_number(provider::sim::CreateNumber {
            tier: Some("TIER_10K".into()),
            throughput_mps: Some(1000),
            ..Default::default()
        })
        .unwrap();
    let out_dir = format!("{}/contract/client", env!("CARGO_TARGET_TMPDIR"));
    let _ = std::fs::remove_dir_all(&out_dir);
    let arg = json!({
        "base": app.url(""),
        "token": app.token,
        "out_dir": out_dir,
        "phone_number_id": n.phone_number_id,
        "waba_id": n.waba_id,
        "access_token": n.access_token,
        "app_secret": n.app_secret,
    })
    .to_string();
    let seen = common::python_json("contract/client_flow.py", arg).await;
    // What the client read is what the gateway did.
    let campaign = seen["report"]["campaign_id"].as_i64().unwrap();
    let (_, c) = app.get(&format!("/api/v1/campaigns/{campaign}")).await;
    assert_eq!(c["data"]["state"], "completed", "{c}");
    // (Statuses keep arriving after the client's read: only what is settled is compared.)
    for k in ["sent", "total", "failed", "skipped"] {
        assert_eq!(seen["stats"][k], c["data"]["stats"][k], "{k}: {seen}");
    }
    assert_eq!(seen["stats"]["sent"], 2, "{seen}");
    assert_eq!(seen["report"]["name"], "Oferta de dezembro", "{seen}");
    let sent = app.sim_summary().await["per_number"][&n.phone_number_id]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(sent, 2, "two valid recipients reached the provider");
}
