//! Panel campaigns (issue 20): CSV → hygiene → validate → approve → dispatch → read acks,
//! through the real server, the provider simulator and its hygiene service; maker/checker;
//! the dispatch switch; pause, resume and cancel; slow and failing hygiene jobs; test send;
//! the export against the JSON; scope.

mod common;

use common::{eventually, Backend, TestApp};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// A number without cap or warm-up whose cadence is `cadence_ms` (0: as fast as the provider).
async fn number(app: &TestApp, cadence_ms: u64) -> (i64, provider::sim::CreatedNumber) {
    let (id, n) = app.connect_number("TIER_10K", Some(1000)).await;
    let (status, g) = app
        .patch(
            &format!("/api/v1/channels/{id}/guardrails"),
            json!({"daily_cap": null, "cadence_ms": cadence_ms, "warmup": false}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{g}");
    (id, n)
}

async fn template(app: &TestApp, channels: &[i64]) -> i64 {
    app.approved_template(
        json!({"name": "Aviso loja", "body": "Olá {{1}}, novidades em {{2}}.", "var_map": {"1": {"field": "nome"}, "2": {"field": "cidade"}}}),
        channels,
    )
    .await
}

async fn sim(app: &TestApp, method: Method, path: &str, body: Value) -> Value {
    let r = app
        .http
        .request(method, format!("http://{}{path}", app.sim_addr))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap_or(Value::Null)
}

/// Sends the ledger holds for a recipient (digits).
async fn received(app: &TestApp, phone: &str) -> u64 {
    app.sim_summary().await["per_recipient"][phone]
        .as_object()
        .map_or(0, |t| t.values().filter_map(Value::as_u64).sum())
}

/// Sends the ledger holds for a number.
async fn sent_by(app: &TestApp, n: &provider::sim::CreatedNumber) -> u64 {
    app.sim_summary().await["per_number"][&n.phone_number_id]
        .as_u64()
        .unwrap_or(0)
}

async fn call(
    app: &TestApp,
    m: Method,
    token: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    app.call(m, Some(token), path, body).await
}

/// Validates until the hygiene report is applied (by this call or by the service's signed
/// callback); the campaign.
async fn validated(app: &TestApp, token: &str, id: i64) -> Value {
    eventually(20, "hygiene done", || async {
        let (s, b) = call(
            app,
            Method::POST,
            token,
            &format!("/api/campaigns/{id}/validate"),
            None,
        )
        .await;
        match s {
            StatusCode::OK => Some(b["data"].clone()),
            StatusCode::CONFLICT if b["code"] == "higienizacao_em_andamento" => None,
            StatusCode::CONFLICT if b["code"] == "invalid_state" => {
                let c = campaign(app, token, id).await;
                assert_eq!(c["status"], "aguardando_aprovacao", "{c}");
                Some(c)
            }
            other => panic!("validate: {other} {b}"),
        }
    })
    .await
}

/// `POST /api/campaigns/{id}/approve` with `token`'s session: the answer.
async fn approve(app: &TestApp, token: &str, id: i64) -> (StatusCode, Value) {
    call(
        app,
        Method::POST,
        token,
        &format!("/api/campaigns/{id}/approve"),
        None,
    )
    .await
}

/// Turns the account's dispatch switch with `token`'s session: the answer.
async fn switch(app: &TestApp, token: &str, on: bool) -> (StatusCode, Value) {
    call(
        app,
        Method::PUT,
        token,
        "/api/settings/dispatch",
        Some(json!({"habilitado": on})),
    )
    .await
}

async fn campaign(app: &TestApp, token: &str, id: i64) -> Value {
    let (s, b) = call(
        app,
        Method::GET,
        token,
        &format!("/api/campaigns/{id}"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b["data"].clone()
}

/// Creates a campaign of `count` contacts `5511988800000+i` through `POST /api/campaigns`.
/// An Admin's session, one number and a template approved on it.
async fn admin_number_template(app: &TestApp) -> (String, i64, i64) {
    let (_, admin) = app
        .panel_user("admin@acme.test", "Admin", None, vec![])
        .await;
    let (c1, _) = number(app, 0).await;
    let tpl = template(app, &[c1]).await;
    (admin, c1, tpl)
}

async fn create(
    app: &TestApp,
    token: &str,
    template: i64,
    channels: &[i64],
    count: usize,
    volume: Option<usize>,
) -> i64 {
    let contacts: Vec<Value> = (0..count)
        .map(|i| json!({"numero": format!("+55 11 98880-{i:04}"), "nome": format!("Contato {i}"), "dados": {"cidade": "Recife"}}))
        .collect();
    let mut body = json!({"nome": "Campanha", "template_id": template, "numeros": channels, "contatos": contacts, "variaveis": ["nome", "cidade"]});
    if let Some(v) = volume {
        body["volume"] = json!(v);
    }
    let (s, b) = call(app, Method::POST, token, "/api/campaigns", Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    b["data"]["id"].as_i64().unwrap()
}

async fn whole_flow_from_csv_to_read(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.test", "Admin", None, vec![])
        .await;
    let (maker_id, maker) = app
        .panel_user("op1@acme.test", "Operador", None, vec![])
        .await;
    let (_, checker) = app
        .panel_user("op2@acme.test", "Operador", None, vec![])
        .await;
    let (c1, n1) = number(&app, 0).await;
    let (c2, n2) = number(&app, 0).await;
    let tpl = template(&app, &[c1, c2]).await;
    // The hygiene service knows this one has no WhatsApp.
    sim(
        &app,
        Method::POST,
        "/_sim/hygiene/invalid",
        json!({"numbers": ["5511977700009"]}),
    )
    .await;

    let csv = "telefone;nome;cidade\n\
               +55 11 97770-0001;Ana;Recife\n\
               5511977700002;Bruno;Natal\n\
               (55) 11 97770-0003;Carla;Olinda\n\
               5511977700004;Davi;Recife\n\
               5511977700005;=Eva;Natal\n\
               5511977700009;Zé;Recife\n\
               12345;Curto;Recife\n\
               ;;\n\
               +55 11 97770-0001;Ana de novo;Recife\n\
               ; ;\n";
    let form = reqwest::multipart::Form::new()
        .text("nome", "Natal 2026")
        .text("template_id", tpl.to_string())
        .text("numeros", format!("{c1},{c2}"))
        .text("volume", "4")
        .text("variaveis", "nome,cidade")
        .part(
            "arquivo",
            reqwest::multipart::Part::bytes(csv.as_bytes().to_vec()).file_name("contatos.csv"),
        );
    let r = app
        .http
        .post(app.url("/api/campaigns/import"))
        .bearer_auth(&maker)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let created: Value = r.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let c = &created["data"];
    let id = c["id"].as_i64().unwrap();
    assert_eq!(c["status"], "higienizando", "{c}");
    assert_eq!(c["criado_por"], maker_id);
    assert_eq!(
        c["contatos"]["total"], 7,
        "the repeated number is stored once: {c}"
    );
    // What the import dropped, said on the campaign (issue 47 item 10).
    assert_eq!(
        c["descartados"],
        json!({"duplicados": 1, "em_branco": 2}),
        "{c}"
    );
    assert!(c["higienizacao"]["job_id"]
        .as_str()
        .is_some_and(|j| j.starts_with("hyg_")));
    // Before approval the account API cannot start it or add recipients to it.
    let (s, b) = app
        .post(&format!("/api/v1/campaigns/{id}/start"), json!({}))
        .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("aprovacao_pendente")),
        "{b}"
    );
    let (s, b) = app
        .post(
            &format!("/api/v1/campaigns/{id}/recipients"),
            json!({"recipients": [{"phone": "5511900000001"}]}),
        )
        .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("campanha_do_painel")),
        "{b}"
    );

    let v = validated(&app, &maker, id).await;
    assert_eq!(v["status"], "aguardando_aprovacao", "{v}");
    assert_eq!(
        (
            v["contatos"]["validos"].as_i64(),
            v["contatos"]["invalidos"].as_i64()
        ),
        (Some(5), Some(2)),
        "{v}"
    );
    let (s, inv) = call(
        &app,
        Method::GET,
        &maker,
        &format!("/api/campaigns/{id}/contacts?status=invalid"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let reasons: Vec<(&str, &str)> = inv["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["numero"].as_str().unwrap(), c["motivo"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            ("5511977700009", "sem_whatsapp"),
            ("12345", "formato_invalido")
        ]
    );

    // Maker/checker: the maker (an Operador) cannot approve; a Client is refused by role.
    // The campaign says so to each reader (`pode_aprovar`), by the same rule.
    for (who, may) in [(&maker, false), (&checker, true), (&admin, true)] {
        let (s, v) = call(
            &app,
            Method::GET,
            who,
            &format!("/api/campaigns/{id}"),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["data"]["pode_aprovar"], may, "{v}");
    }
    let (s, b) = approve(&app, &maker, id).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("aprovacao_propria")),
        "{b}"
    );
    let (s, cl) = call(
        &app,
        Method::POST,
        &admin,
        "/api/clientes",
        Some(json!({"nome": "Loja X", "documento": "11.222.333/0001-81"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{cl}");
    let (_, client) = app
        .panel_user("cli@acme.test", "Client", cl["data"]["id"].as_i64(), vec![])
        .await;
    let (s, b) = approve(&app, &client, id).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("papel_insuficiente")),
        "{b}"
    );
    let (s, _) = call(&app, Method::GET, &client, "/api/campaigns", None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);

    let (s, b) = approve(&app, &checker, id).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["data"]["status"], "em_andamento", "{b}");
    let done = eventually(20, "read acks", || async {
        let c = campaign(&app, &maker, id).await;
        (c["status"] == "concluida" && c["stats"]["read"] == 4).then_some(c)
    })
    .await;
    assert_eq!(done["stats"]["sent"], 4, "volume 4: {done}");
    assert_eq!(done["contatos"]["liberados"], 4);
    // Invalid contacts never reached the provider; the fifth valid one waits beyond the volume.
    assert_eq!(received(&app, "5511977700009").await, 0);
    assert_eq!(received(&app, "12345").await, 0);
    assert_eq!(received(&app, "5511977700005").await, 0);
    assert_eq!(sent_by(&app, &n1).await + sent_by(&app, &n2).await, 4);
    // The rendered variables reached the provider.
    let ledger = sim(
        &app,
        Method::GET,
        &format!("/_sim/numbers/{}/sent", n1.phone_number_id),
        Value::Null,
    )
    .await;
    let text = ledger.to_string();
    assert!(
        text.contains("Recife") || text.contains("Natal") || text.contains("Olinda"),
        "{text}"
    );

    // More volume, dispatched again by hand: the fifth goes.
    let (s, b) = call(
        &app,
        Method::PUT,
        &checker,
        &format!("/api/campaigns/{id}"),
        Some(json!({"volume": 5, "nome": "Natal 2026 (todos)"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, b) = call(
        &app,
        Method::POST,
        &checker,
        &format!("/api/campaigns/{id}/dispatch"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    eventually(20, "fifth sent", || async {
        let c = campaign(&app, &maker, id).await;
        (c["stats"]["read"] == 5 && c["status"] == "concluida").then_some(())
    })
    .await;
    assert_eq!(received(&app, "5511977700005").await, 1);

    // Report, sends and the export agree.
    let (s, rep) = call(
        &app,
        Method::GET,
        &maker,
        &format!("/api/campaigns/{id}/report"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let r = &rep["data"];
    assert_eq!(
        (
            r["total"].as_i64(),
            r["validos"].as_i64(),
            r["invalidos"].as_i64(),
            r["enviados"].as_i64(),
            r["lidos"].as_i64(),
            r["falhas"].as_i64()
        ),
        (Some(7), Some(5), Some(2), Some(5), Some(5), Some(0)),
        "{r}"
    );
    let per: i64 = r["por_numero"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["sent"].as_i64().unwrap())
        .sum();
    assert_eq!(per, 5);
    let (s, page1) = call(
        &app,
        Method::GET,
        &maker,
        &format!("/api/campaigns/{id}/sends?limit=3"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(page1["has_more"], true);
    let cursor = page1["next_cursor"].as_str().unwrap();
    let (_, page2) = call(
        &app,
        Method::GET,
        &maker,
        &format!("/api/campaigns/{id}/sends?limit=3&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(page2["has_more"], false);
    let rows: Vec<Value> = page1["data"]
        .as_array()
        .unwrap()
        .iter()
        .chain(page2["data"].as_array().unwrap())
        .cloned()
        .collect();
    assert_eq!(rows.len(), 5);
    assert!(rows
        .iter()
        .all(|r| r["status"] == "read" && r["estado"] == "sent"));
    let r = app
        .http
        .get(app.url(&format!("/api/campaigns/{id}/sends/export")))
        .bearer_auth(&maker)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    let csv = r.text().await.unwrap();
    let csv = csv.strip_prefix('\u{FEFF}').expect("BOM");
    assert!(
        csv.contains(";'=Eva;"),
        "a cell starting with = is made inert: {csv}"
    );
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "id;numero;nome;channel_id;numero_envio;estado;status;wamid;erro;enviado_em;entregue_em;lido_em");
    assert_eq!(lines.len(), 6);
    for (line, row) in lines[1..].iter().zip(&rows) {
        let cols: Vec<&str> = line.split(';').collect();
        assert_eq!(cols[0], row["id"].to_string());
        assert_eq!(cols[1], row["numero"].as_str().unwrap());
        assert_eq!(cols[6], "read");
        assert_eq!(cols[7], row["wamid"].as_str().unwrap());
    }
    let (s, b) = call(
        &app,
        Method::GET,
        &maker,
        &format!("/api/campaigns/{id}/sends?status=bogus"),
        None,
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("status_invalido"))
    );

    // A test send: counted at the number, not in the campaign.
    let (s, m) = call(
        &app,
        Method::POST,
        &maker,
        &format!("/api/campaigns/{id}/test-send"),
        Some(json!({"destino": "+55 11 96660-0001"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    assert_eq!(m["data"]["to"], "5511966600001", "{m}");
    eventually(10, "test send at the provider", || async {
        (received(&app, "5511966600001").await == 1).then_some(())
    })
    .await;
    assert_eq!(campaign(&app, &maker, id).await["stats"]["sent"], 5);

    // After dispatch it cannot be removed; the list shows it.
    let (s, b) = call(
        &app,
        Method::DELETE,
        &admin,
        &format!("/api/campaigns/{id}"),
        None,
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("campanha_disparada")),
        "{b}"
    );
    let (s, list) = call(&app, Method::GET, &maker, "/api/campaigns", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["data"][0]["id"], id);
    assert_eq!(list["data"][0]["nome"], "Natal 2026 (todos)");
}

async fn slow_failing_and_unreachable_hygiene(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (admin, c1, tpl) = admin_number_template(&app).await;

    // A job that takes a minute: validate answers 409 with the progress, approval waits.
    sim(
        &app,
        Method::PUT,
        "/_sim/hygiene/faults",
        json!({"delay_ms": 60_000}),
    )
    .await;
    let id = create(&app, &admin, tpl, &[c1], 3, None).await;
    let (s, b) = call(
        &app,
        Method::POST,
        &admin,
        &format!("/api/campaigns/{id}/validate"),
        None,
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("higienizacao_em_andamento")),
        "{b}"
    );
    assert_eq!(b["total"], 3);
    let (s, b) = approve(&app, &admin, id).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("invalid_state")),
        "{b}"
    );
    assert_eq!(campaign(&app, &admin, id).await["status"], "higienizando");

    // A slow job ends; the service's signed callback validates the campaign by itself.
    sim(
        &app,
        Method::PUT,
        "/_sim/hygiene/faults",
        json!({"delay_ms": 800}),
    )
    .await;
    let id = create(&app, &admin, tpl, &[c1], 3, None).await;
    let c = eventually(20, "validated by the callback", || async {
        let c = campaign(&app, &admin, id).await;
        (c["status"] == "aguardando_aprovacao").then_some(c)
    })
    .await;
    assert_eq!(c["contatos"]["validos"], 3);
    // An instant job calls back before the gateway recorded it: the service's retry lands.
    sim(
        &app,
        Method::PUT,
        "/_sim/hygiene/faults",
        json!({"delay_ms": 0}),
    )
    .await;
    let id = create(&app, &admin, tpl, &[c1], 2, None).await;
    eventually(20, "validated by a retried callback", || async {
        (campaign(&app, &admin, id).await["status"] == "aguardando_aprovacao").then_some(())
    })
    .await;
    // A signed callback for a job no campaign waits for is 404 (the service may retry).
    let body = br#"{"job_id": "hyg_nenhum", "status": "done"}"#;
    let r = app
        .http
        .post(app.url("/api/hygiene/callback"))
        .header(
            "x-hygiene-signature",
            provider::hygiene::sign("hygiene-test-key", body),
        )
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // A callback not signed with the key is refused.
    let r = app
        .http
        .post(app.url("/api/hygiene/callback"))
        .header(
            "x-hygiene-signature",
            provider::hygiene::sign("outra-chave", b"{}"),
        )
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Failing: the campaign shows it with the reason and takes a resubmission.
    sim(
        &app,
        Method::PUT,
        "/_sim/hygiene/faults",
        json!({"delay_ms": 200, "fail_next": 1}),
    )
    .await;
    let id = create(&app, &admin, tpl, &[c1], 2, None).await;
    let failed = eventually(10, "hygiene failed", || async {
        let (s, b) = call(
            &app,
            Method::POST,
            &admin,
            &format!("/api/campaigns/{id}/validate"),
            None,
        )
        .await;
        (s == StatusCode::CONFLICT && b["code"] == "higienizacao_falhou").then_some(b)
    })
    .await;
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("falha simulada"),
        "{failed}"
    );
    let c = campaign(&app, &admin, id).await;
    assert_eq!(c["status"], "falha_higienizacao");
    assert!(c["higienizacao"]["erro"]
        .as_str()
        .unwrap()
        .contains("falha simulada"));
    let (s, b) = call(
        &app,
        Method::POST,
        &admin,
        &format!("/api/campaigns/{id}/hygiene"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["data"]["status"], "higienizando");
    assert_eq!(validated(&app, &admin, id).await["contatos"]["validos"], 2);

    // Unreachable at creation: the campaign is stored, shows why, and resubmits later.
    sim(
        &app,
        Method::PUT,
        "/_sim/hygiene/faults",
        json!({"unavailable": true}),
    )
    .await;
    let id = create(&app, &admin, tpl, &[c1], 2, None).await;
    let c = campaign(&app, &admin, id).await;
    assert_eq!(c["status"], "falha_higienizacao", "{c}");
    assert!(
        c["higienizacao"]["erro"]
            .as_str()
            .unwrap()
            .contains("indisponível"),
        "{c}"
    );
    sim(&app, Method::PUT, "/_sim/hygiene/faults", json!({})).await;
    let (s, _) = call(
        &app,
        Method::POST,
        &admin,
        &format!("/api/campaigns/{id}/hygiene"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        validated(&app, &admin, id).await["status"],
        "aguardando_aprovacao"
    );
    // Deleting before dispatch works.
    let (s, _) = call(
        &app,
        Method::DELETE,
        &admin,
        &format!("/api/campaigns/{id}"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(
        &app,
        Method::GET,
        &admin,
        &format!("/api/campaigns/{id}"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // Bad input gets the envelope.
    let (s, b) = call(
        &app,
        Method::POST,
        &admin,
        "/api/campaigns",
        Some(json!({"nome": "X", "template_id": tpl, "numeros": [c1], "contatos": []})),
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("contatos_invalidos")),
        "{b}"
    );
    let (s, b) = call(&app, Method::POST, &admin, "/api/campaigns", Some(json!({"nome": "X", "template_id": tpl, "numeros": [999999], "contatos": [{"numero": "5511900000001"}], "variaveis": ["nome", "cidade"]}))).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_channels")),
        "{b}"
    );
}

async fn the_switch_holds_and_stops_campaigns(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.test", "Admin", None, vec![])
        .await;
    let (_, op) = app
        .panel_user("op@acme.test", "Operador", None, vec![])
        .await;
    // 20 messages/s: 60 contacts take 3 s.
    let (c1, n1) = number(&app, 50).await;
    let tpl = template(&app, &[c1]).await;
    let running = create(&app, &admin, tpl, &[c1], 60, None).await;
    validated(&app, &admin, running).await;
    let (s, _) = call(
        &app,
        Method::POST,
        &admin,
        &format!("/api/campaigns/{running}/approve"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    eventually(10, "dispatch under way", || async {
        (sent_by(&app, &n1).await >= 5).then_some(())
    })
    .await;

    // Only an Admin flips it; turning it off stops the running campaign before the answer.
    let (s, _) = switch(&app, &op, false).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, b) = switch(&app, &admin, false).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["data"]["habilitado"], false);
    assert_eq!(b["data"]["retidas"], json!([running]));
    let at_switch = sent_by(&app, &n1).await;
    assert!(at_switch < 60, "stopped mid-run: {at_switch}");
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert_eq!(
        sent_by(&app, &n1).await,
        at_switch,
        "no send after the switch answered"
    );
    let c = campaign(&app, &admin, running).await;
    assert_eq!(
        (
            c["status"].as_str(),
            c["estado"].as_str(),
            c["retida"].as_bool()
        ),
        (Some("retida"), Some("paused"), Some(true)),
        "{c}"
    );

    // Approved while off: held, nothing sent; dispatch and resume are refused.
    let held = create(&app, &admin, tpl, &[c1], 3, None).await;
    validated(&app, &admin, held).await;
    let (s, b) = call(
        &app,
        Method::POST,
        &op,
        &format!("/api/campaigns/{held}/approve"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["data"]["status"], "retida", "{b}");
    let (s, b) = call(
        &app,
        Method::POST,
        &op,
        &format!("/api/campaigns/{held}/dispatch"),
        None,
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("disparo_desligado")),
        "{b}"
    );
    let (s, b) = call(
        &app,
        Method::PUT,
        &op,
        &format!("/api/campaigns/{running}"),
        Some(json!({"status": "em_andamento"})),
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("disparo_desligado")),
        "{b}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(sent_by(&app, &n1).await, at_switch);

    // On again: both go, each contact once.
    let (s, b) = switch(&app, &admin, true).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["data"]["retidas"], json!([]));
    eventually(20, "both completed", || async {
        let a = campaign(&app, &admin, running).await;
        let b = campaign(&app, &admin, held).await;
        (a["status"] == "concluida" && b["status"] == "concluida").then_some(())
    })
    .await;
    assert_eq!(sent_by(&app, &n1).await, 63);
    let per_recipient = app.sim_summary().await["per_recipient"].clone();
    assert!(per_recipient.as_object().unwrap().values().all(|t| t
        .as_object()
        .unwrap()
        .values()
        .all(|n| n == 1 || n == 2)));
    assert_eq!(campaign(&app, &admin, running).await["stats"]["sent"], 60);
}

/// The web panel's campaign page (`/campanhas/{id}` with `query`), as the browser of the
/// session `token` gets it: 200 and its HTML (issue 47: it answered 502 once sends were
/// queued or skipped).
async fn campaign_page(app: &TestApp, token: &str, id: i64, query: &str) -> String {
    let r = app
        .http
        .get(app.url(&format!("/campanhas/{id}{query}")))
        .header("cookie", format!("disparo_sessao={token}"))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body = r.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "/campanhas/{id}{query}: {body}");
    body
}

/// A campaign whose contacts are all invalid reaches validation but cannot be approved
/// (issue 47: a wrong column mapping made every contact invalid and it still went on).
async fn no_valid_contact_no_approval(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.test", "Admin", None, vec![])
        .await;
    let (c1, n1) = number(&app, 0).await;
    let tpl = template(&app, &[c1]).await;
    let contacts: Vec<Value> = (0..5)
        .map(|i| json!({"numero": format!("12{i}"), "nome": format!("Contato {i}"), "dados": {"cidade": "Recife"}}))
        .collect();
    let (s, b) = call(&app, Method::POST, &admin, "/api/campaigns", Some(json!({"nome": "Vazia", "template_id": tpl, "numeros": [c1], "contatos": contacts, "variaveis": ["nome", "cidade"]}))).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let id = b["data"]["id"].as_i64().unwrap();
    let v = validated(&app, &admin, id).await;
    assert_eq!(v["contatos"]["validos"], 0, "{v}");
    let (s, b) = approve(&app, &admin, id).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("sem_contatos_validos")
        ),
        "{b}"
    );
    assert_eq!(b["invalidos"], 5, "{b}");
    let c = campaign(&app, &admin, id).await;
    assert_eq!(c["status"], "aguardando_aprovacao", "{c}");
    assert_eq!(sent_by(&app, &n1).await, 0);
}

async fn pause_resume_and_cancel(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.test", "Admin", None, vec![])
        .await;
    let (c1, n1) = number(&app, 50).await;
    let tpl = template(&app, &[c1]).await;
    let id = create(&app, &admin, tpl, &[c1], 80, None).await;
    validated(&app, &admin, id).await;
    let (s, _) = approve(&app, &admin, id).await;
    assert_eq!(s, StatusCode::OK);
    eventually(10, "dispatch under way", || async {
        (sent_by(&app, &n1).await >= 5).then_some(())
    })
    .await;
    // The page reloaded while dispatching: its action, and sends still waiting listed.
    let html = campaign_page(&app, &admin, id, "").await;
    assert!(html.contains(">Pausar</button>"), "{html}");
    let html = campaign_page(&app, &admin, id, "?status=queued").await;
    assert!(html.contains("<td>na fila</td>"), "{html}");
    let (s, b) = call(
        &app,
        Method::PUT,
        &admin,
        &format!("/api/campaigns/{id}"),
        Some(json!({"status": "pausada"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["data"]["status"], "pausada");
    assert!(b["data"]["motivo_pausa"]
        .as_str()
        .unwrap()
        .contains("admin@acme.test"));
    let at_pause = sent_by(&app, &n1).await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(
        sent_by(&app, &n1).await,
        at_pause,
        "no send after the pause answered"
    );
    let html = campaign_page(&app, &admin, id, "").await;
    assert!(html.contains(">Retomar</button>"), "{html}");
    let (s, b) = call(
        &app,
        Method::PUT,
        &admin,
        &format!("/api/campaigns/{id}"),
        Some(json!({"status": "em_andamento"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    eventually(10, "resumed", || async {
        (sent_by(&app, &n1).await >= at_pause + 5).then_some(())
    })
    .await;
    let (s, b) = call(
        &app,
        Method::PUT,
        &admin,
        &format!("/api/campaigns/{id}"),
        Some(json!({"status": "cancelada"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["data"]["status"], "cancelada");
    let at_cancel = sent_by(&app, &n1).await;
    assert!(at_cancel < 80, "{at_cancel}");
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(sent_by(&app, &n1).await, at_cancel);
    let c = eventually(10, "settled", || async {
        let c = campaign(&app, &admin, id).await;
        (c["stats"]["queued"] == 0 && c["stats"]["sending"] == 0).then_some(c)
    })
    .await;
    assert_eq!(
        c["stats"]["sent"].as_u64().unwrap() + c["stats"]["skipped"].as_u64().unwrap(),
        80,
        "{c}"
    );
    assert_eq!(c["stats"]["sent"].as_u64().unwrap(), at_cancel);
    // After the cancel: a readable page, the skipped sends with their status.
    let html = campaign_page(&app, &admin, id, "?status=skipped").await;
    assert!(html.contains("<td>ignorada</td>"), "{html}");
    assert!(!html.contains("não puderam ser lidos"), "{html}");
    let (_, sends) = call(
        &app,
        Method::GET,
        &admin,
        &format!("/api/campaigns/{id}/sends?limit=1000"),
        None,
    )
    .await;
    let sends = sends["data"].as_array().unwrap();
    assert_eq!(sends.len(), 80);
    assert!(
        sends.iter().all(|s| s["status"].is_string()),
        "every send has a status"
    );
    let (s, b) = call(
        &app,
        Method::PUT,
        &admin,
        &format!("/api/campaigns/{id}"),
        Some(json!({"status": "em_andamento"})),
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("invalid_state")),
        "{b}"
    );
    let (s, b) = call(
        &app,
        Method::PUT,
        &admin,
        &format!("/api/campaigns/{id}"),
        Some(json!({"status": "voando"})),
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("status_invalido")),
        "{b}"
    );

    // Scope: an Operador limited to another BM does not see it (404), nor may they create a
    // campaign on its number (422 invalid_channels).
    let other = app
        .sim
        .create_number(provider::sim::CreateNumber::default())
        .unwrap();
    let other_bm = app
        .panel_bm(
            &admin,
            &other,
            json!({"nome": "Outra BM", "cliente": "Outro cliente"}),
        )
        .await;
    let (_, scoped) = app
        .panel_user("scoped@acme.test", "Operador", None, vec![other_bm])
        .await;
    let (s, _) = call(
        &app,
        Method::GET,
        &scoped,
        &format!("/api/campaigns/{id}"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, list) = call(&app, Method::GET, &scoped, "/api/campaigns", None).await;
    assert_eq!(
        (s, list["data"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0))
    );
    let (s, b) = call(&app, Method::POST, &scoped, "/api/campaigns", Some(json!({"nome": "X", "template_id": tpl, "numeros": [c1], "contatos": [{"numero": "5511900000001"}], "variaveis": ["nome", "cidade"]}))).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_channels")),
        "{b}"
    );
}

async fn switch_off_at_boot_holds(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| s.dispatch_enabled = Some(false)).await;
    let (_, admin) = app
        .panel_user("admin@acme.test", "Admin", None, vec![])
        .await;
    let (s, b) = call(&app, Method::GET, &admin, "/api/settings/dispatch", None).await;
    assert_eq!(
        (s, b["data"]["habilitado"].as_bool()),
        (StatusCode::OK, Some(false)),
        "{b}"
    );
    let (c1, n1) = number(&app, 0).await;
    let tpl = template(&app, &[c1]).await;
    // The account API's start is gated by the same switch.
    let (s, v1) = app
        .post(
            "/api/v1/campaigns",
            json!({"name": "API", "template_id": tpl, "channels": [{"channel_id": c1}]}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let v1_id = v1["data"]["id"].as_i64().unwrap();
    let (s, _) = app.post(&format!("/api/v1/campaigns/{v1_id}/recipients"), json!({"recipients": [{"phone": "5511955500001", "vars": {"nome": "A", "cidade": "B"}}]})).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, b) = app
        .post(&format!("/api/v1/campaigns/{v1_id}/start"), json!({}))
        .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("disparo_desligado")),
        "{b}"
    );
    let id = create(&app, &admin, tpl, &[c1], 2, None).await;
    validated(&app, &admin, id).await;
    let (s, b) = approve(&app, &admin, id).await;
    assert_eq!(
        (s, b["data"]["status"].as_str()),
        (StatusCode::OK, Some("retida")),
        "{b}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(sent_by(&app, &n1).await, 0);
    let (s, _) = switch(&app, &admin, true).await;
    assert_eq!(s, StatusCode::OK);
    eventually(10, "released", || async {
        (campaign(&app, &admin, id).await["status"] == "concluida").then_some(())
    })
    .await;
    assert_eq!(sent_by(&app, &n1).await, 2);
}

async fn a_job_past_its_timeout_fails_visibly(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| s.hygiene_job_timeout_ms = 1000).await;
    let (_, admin) = app
        .panel_user("admin@acme.test", "Admin", None, vec![])
        .await;
    let (c1, _) = number(&app, 0).await;
    let tpl = template(&app, &[c1]).await;
    sim(
        &app,
        Method::PUT,
        "/_sim/hygiene/faults",
        json!({"delay_ms": 60_000}),
    )
    .await;
    let id = create(&app, &admin, tpl, &[c1], 2, None).await;
    let b = eventually(10, "timed out", || async {
        let (s, b) = call(
            &app,
            Method::POST,
            &admin,
            &format!("/api/campaigns/{id}/validate"),
            None,
        )
        .await;
        (s == StatusCode::CONFLICT && b["code"] == "higienizacao_falhou").then_some(b)
    })
    .await;
    assert!(
        b["message"].as_str().unwrap().contains("tempo esgotado"),
        "{b}"
    );
    let c = campaign(&app, &admin, id).await;
    assert_eq!(c["status"], "falha_higienizacao");
    sim(&app, Method::PUT, "/_sim/hygiene/faults", json!({})).await;
    let (s, _) = call(
        &app,
        Method::POST,
        &admin,
        &format!("/api/campaigns/{id}/hygiene"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(validated(&app, &admin, id).await["contatos"]["validos"], 2);
}

/// The simulated hygiene service takes a job of 200,000 numbers of 15 digits (~3.6 MB of JSON,
/// above axum's default body limit).
#[tokio::test]
async fn the_simulated_hygiene_service_takes_the_largest_job() {
    let sim = provider::sim::Simulator::new(provider::sim::SimConfig::default());
    let addr = sim.spawn("127.0.0.1:0").await.unwrap();
    let numbers: Vec<String> = (0..200_000).map(|i| format!("5511{i:011}")).collect();
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/hygiene/v1/jobs"))
        .bearer_auth("k")
        .json(&json!({"numbers": numbers}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["total"], 200_000);
}

/// Issue 47, the name-column trap: a variable that names a column the contacts do not have
/// (here the CSV's name column, read as `nome`) is refused at submit with the columns there
/// are, and nothing is stored; the same campaign with `nome` goes through.
async fn unknown_variable_columns_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (admin, c1, tpl) = admin_number_template(&app).await;
    let csv = "Telefone;Nome completo;Cidade\n5511977700001;Ana Souza;Recife\n5511977700002;Bruno Ávila;São José\n";
    let import = |variables: &'static str| {
        let form = reqwest::multipart::Form::new()
            .text("nome", "Clientes")
            .text("template_id", tpl.to_string())
            .text("numeros", c1.to_string())
            .text("coluna_numero", "Telefone")
            .text("coluna_nome", "Nome completo")
            .text("variaveis", variables)
            .part(
                "arquivo",
                reqwest::multipart::Part::bytes(csv.as_bytes().to_vec()).file_name("c.csv"),
            );
        app.http
            .post(app.url("/api/campaigns/import"))
            .bearer_auth(&admin)
            .multipart(form)
            .send()
    };
    let r = import("Nome completo,Cidade").await.unwrap();
    let status = r.status();
    let b: Value = r.json().await.unwrap();
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    assert_eq!(b["code"], "coluna_desconhecida", "{b}");
    assert_eq!(b["field"], "variaveis", "{b}");
    let message = b["message"].as_str().unwrap();
    assert!(message.contains("não têm: Nome completo."), "{message}");
    assert!(
        message.contains("cidade") && message.contains("`nome`"),
        "{message}"
    );
    let (_, list) = call(&app, Method::GET, &admin, "/api/campaigns", None).await;
    assert_eq!(
        list["data"].as_array().map(Vec::len),
        Some(0),
        "nothing stored: {list}"
    );
    // The JSON body is held to the same rule.
    let (s, b) = call(&app, Method::POST, &admin, "/api/campaigns", Some(json!({"nome": "J", "template_id": tpl, "numeros": [c1], "contatos": [{"numero": "5511977700001", "dados": {"cidade": "Recife"}}], "variaveis": ["bairro"]}))).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("coluna_desconhecida")
        ),
        "{b}"
    );
    let r = import("nome,cidade").await.unwrap();
    let status = r.status();
    let b: Value = r.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(b["data"]["contatos"]["total"], 2, "{b}");
}

/// Issue 47 item 10: any contact's message as the campaign will send it, by its number as
/// typed in the CSV; a contact without a value says which column is missing; a number not in
/// the campaign is a 404; the page's fragment shows the same text.
async fn each_contact_previews_its_own_message(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (admin, c1, tpl) = admin_number_template(&app).await;
    let contacts = json!([
        {"numero": "+55 11 98880-0001", "nome": "Ângela", "dados": {"cidade": "Belém"}},
        {"numero": "5511988800002", "nome": "João", "dados": {"cidade": "Maceió"}},
        {"numero": "5511988800003", "nome": "Sem cidade", "dados": {}}
    ]);
    let (s, b) = call(&app, Method::POST, &admin, "/api/campaigns", Some(json!({"nome": "Prévias", "template_id": tpl, "numeros": [c1], "contatos": contacts, "variaveis": ["nome", "cidade"]}))).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let id = b["data"]["id"].as_i64().unwrap();
    let preview = |numero: &str| {
        let path = format!(
            "/api/campaigns/{id}/preview?numero={}",
            url::form_urlencoded::byte_serialize(numero.as_bytes()).collect::<String>()
        );
        let (app, admin) = (&app, &admin);
        async move { call(app, Method::GET, admin, &path, None).await }
    };
    let (s, p) = preview("(11) 98880-0002 ").await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "without the country code it is another number: {p}"
    );
    let (s, p) = preview("+55 (11) 98880-0002").await;
    assert_eq!(s, StatusCode::OK, "{p}");
    assert_eq!(p["data"]["numero"], "5511988800002", "{p}");
    assert_eq!(p["data"]["nome"], "João", "{p}");
    assert_eq!(p["data"]["texto"], "Olá João, novidades em Maceió.", "{p}");
    assert_eq!(p["data"]["faltam"], json!([]), "{p}");
    let (_, p) = preview("5511988800001").await;
    assert_eq!(p["data"]["texto"], "Olá Ângela, novidades em Belém.", "{p}");
    let (s, p) = preview("5511988800003").await;
    assert_eq!(s, StatusCode::OK, "{p}");
    assert_eq!(p["data"]["texto"], Value::Null, "{p}");
    assert_eq!(p["data"]["faltam"], json!(["cidade"]), "{p}");
    let (s, p) = preview("5511988809999").await;
    assert_eq!(
        (s, p["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found")),
        "{p}"
    );
    // The page's fragment.
    let html = campaign_page(&app, &admin, id, "/previa?numero=5511988800001").await;
    assert!(html.contains("Olá Ângela, novidades em Belém."), "{html}");
    let html = campaign_page(&app, &admin, id, "/previa?numero=5511988800003").await;
    assert!(html.contains("faltam valores para cidade"), "{html}");
}

on_both_backends! {
    previews => each_contact_previews_its_own_message;
    timeout => a_job_past_its_timeout_fails_visibly;
    unknown_columns => unknown_variable_columns_are_refused;
    flow => whole_flow_from_csv_to_read;
    hygiene => slow_failing_and_unreachable_hygiene;
    switch => the_switch_holds_and_stops_campaigns;
    pause => pause_resume_and_cancel;
    no_valid => no_valid_contact_no_approval;
    boot_switch => switch_off_at_boot_holds;
    test_sends => test_sends_are_limited_audited_and_follow_the_switch;
}

/// Issue 46 item 7: a test send waits for the dispatch switch, is limited per campaign and per
/// user in 24 h, and each destination is audited.
async fn test_sends_are_limited_audited_and_follow_the_switch(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.test", "Admin", None, vec![])
        .await;
    let (_, op) = app
        .panel_user("op1@acme.test", "Operador", None, vec![])
        .await;
    let (c1, _) = number(&app, 0).await;
    let tpl = template(&app, &[c1]).await;
    // Awaiting approval: not approved, not dispatched.
    let first = create(&app, &op, tpl, &[c1], 3, None).await;
    let second = create(&app, &op, tpl, &[c1], 3, None).await;
    let test = |id: i64, token: String, to: String| {
        let app = &app;
        async move {
            call(
                app,
                Method::POST,
                &token,
                &format!("/api/campaigns/{id}/test-send"),
                Some(json!({"destino": to})),
            )
            .await
        }
    };
    // The switch off: refused, nothing sent.
    let (s, _) = switch(&app, &admin, false).await;
    assert_eq!(s, StatusCode::OK);
    let (s, b) = test(first, op.clone(), "5511966600100".into()).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("disparo_desligado")),
        "{b}"
    );
    assert_eq!(received(&app, "5511966600100").await, 0);
    let (s, _) = switch(&app, &admin, true).await;
    assert_eq!(s, StatusCode::OK);
    // Five per campaign, then 429; another campaign still has its own.
    for i in 0..5 {
        let (s, b) = test(first, op.clone(), format!("55119666002{i:02}")).await;
        assert_eq!(s, StatusCode::CREATED, "{i}: {b}");
    }
    let (s, b) = test(first, op.clone(), "5511966600299".into()).await;
    assert_eq!(
        (s, b["code"].as_str(), b["por"].as_str()),
        (
            StatusCode::TOO_MANY_REQUESTS,
            Some("limite_de_testes"),
            Some("campanha")
        ),
        "{b}"
    );
    assert_eq!(received(&app, "5511966600299").await, 0, "not sent");
    let (s, b) = test(second, op.clone(), "5511966600300".into()).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    // Each destination is in the audit log under the user who sent it.
    let (_, audit) = call(&app, Method::GET, &admin, "/api/audit-log?limit=500", None).await;
    let lines: Vec<&Value> = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["target"].as_str().unwrap_or_default().contains("destino"))
        .collect();
    assert_eq!(lines.len(), 6, "{audit}");
    assert!(lines
        .iter()
        .all(|l| l["token_name"].as_str().unwrap().contains("op1@acme.test")));
    assert!(lines
        .iter()
        .any(|l| l["target"].as_str().unwrap().contains("5511966600300")));
    // Twenty per user over every campaign.
    let mut last = StatusCode::CREATED;
    for k in 0..4 {
        let id = create(&app, &op, tpl, &[c1], 1, None).await;
        for i in 0..5 {
            let (s, _) = test(id, op.clone(), format!("5511966604{k}{i:02}")).await;
            last = s;
        }
    }
    let (s, b) = test(second, op.clone(), "5511966600301".into()).await;
    assert_eq!(last, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        (s, b["por"].as_str()),
        (StatusCode::TOO_MANY_REQUESTS, Some("usuario")),
        "{b}"
    );
}
