//! The pages the binary serves, clicked through in a real browser: the Swagger UI of the
//! account API (`/docs`), the panel (`/docs/painel`) and the public sender
//! (`/docs/remetente`) (script `tests/browser/docs.py`), the operators' web panel
//! (`tests/browser/panel.py`) and a 330-contact campaign followed through reloads
//! (`tests/browser/campaign_day.py`), driven by Playwright for Python on Debian's Chromium
//! with axe-core injected (all installed by `tests/setup.sh`).

mod common;

use common::{Backend, TestApp, PANEL_PASSWORD};
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_api_documents_render_open_and_link() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let seen = common::python_json("browser/docs.py", app.url("")).await;
    // Each page shows its own document's operations, not another's.
    let count = |p: &str| seen[p].as_u64().unwrap();
    let panel_ops: usize = http::panel::document()
        .paths
        .paths
        .values()
        .map(|item| {
            let v = serde_json::to_value(item).unwrap();
            v.as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "post", "put", "delete", "patch"].contains(&k.as_str()))
                .count()
        })
        .sum();
    // Swagger UI shows the document's webhooks (the forwarded provider event) as operations too.
    let served: serde_json::Value = app
        .http
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let hooks = served["webhooks"].as_object().map_or(0, |w| w.len());
    assert_eq!(hooks, 1, "the panel's document lists its forwarded event");
    assert_eq!(count("/docs/painel") as usize, panel_ops + hooks);
    assert_eq!(count("/docs/remetente"), 4);
    assert!(count("/docs") > 50, "{seen}");
}

/// The item of the panel API's list at `path` whose `key` is `value` (panics, showing the
/// list, when there is none).
async fn listed(
    app: &TestApp,
    admin: &str,
    path: &str,
    key: &str,
    value: &str,
) -> serde_json::Value {
    let (_, list) = app.call(Method::GET, Some(admin), path, None).await;
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item[key] == value)
        .cloned()
        .unwrap_or_else(|| panic!("no {key} = {value} in {list}"))
}

/// A JSON array of strings (what the browser script saw) as `&str`s.
fn strings(v: &serde_json::Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect()
}

/// A library template as the campaign form's select names it: `name (language)`.
async fn template_label(app: &TestApp, admin: &str, tpl: i64) -> String {
    let (_, t) = app
        .call(
            Method::GET,
            Some(admin),
            &format!("/api/templates/{tpl}"),
            None,
        )
        .await;
    format!(
        "{} ({})",
        t["data"]["name"].as_str().unwrap(),
        t["data"]["language"].as_str().unwrap()
    )
}

/// The operators' web panel (issue 23), clicked through as operators would: login, the
/// dashboard's live KPIs, a BM sync, a client and users, a CSV campaign from upload through
/// hygiene, approval by the Operador (a Client refused), live progress to 100 % and the
/// export, a task dragged on the kanban, the webhook logs, logout and an expired session;
/// every page passes axe-core and fits a phone's width (`tests/browser/panel.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_work_the_panel_in_a_browser() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, admin) = app
        .panel_user("admin@painel.test", "Admin", None, vec![])
        .await;
    let (c1, n1) = app.fast_channel().await;
    let (c2, n2) = app.fast_channel().await;
    // The BMs the numbers brought get their app secret, so the provider's webhooks are
    // verified and applied (the inventory page shows credentials, it does not edit them).
    let (_, bms) = app
        .call(Method::GET, Some(&admin), "/api/business-managers", None)
        .await;
    for n in [&n1, &n2] {
        let bm = bms["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id_provider"] == n.business_id.as_str())
            .expect("the number's BM");
        let (s, b) = app
            .call(
                Method::PUT,
                Some(&admin),
                &format!("/api/business-managers/{}", bm["id"]),
                Some(json!({"nome": bm["nome"], "app_id": provider::sim::SIM_APP_ID, "app_secret": n.app_secret, "access_token": n.access_token})),
            )
            .await;
        assert_eq!(s, 200, "{b}");
    }
    let tpl = app
        .approved_template(
            json!({"name": "Aviso loja", "body": "Olá {{1}}, chegaram novidades.", "var_map": {"1": {"field": "nome"}}}),
            &[c1, c2],
        )
        .await;
    let label = template_label(&app, &admin, tpl).await;
    let (s, w) = app
        .call(
            Method::POST,
            Some(&admin),
            "/api/wiki",
            Some(json!({"title": "Como aquecer um número", "content": "# Aquecimento\n\nSuba o volume **um passo por dia**.\n\n<script>alert(1)</script>"})),
        )
        .await;
    assert_eq!(s, 201, "{w}");
    // The provider calls the account API's receiver, as in the demo (`serve --simulator`):
    // its events still show in /webhook-logs and reach the number's client (issue 47 item 2).
    app.sim
        .set_webhook_url(Some(app.url("/webhooks/messaging")))
        .await;
    let receiver = common::Receiver::start().await;
    // Another business at the provider, whose BM the operator creates in the panel with its
    // ids and token at the end of the day.
    let third = app
        .sim
        .create_number(provider::sim::CreateNumber {
            verified_name: Some("Filial Norte".into()),
            ..Default::default()
        })
        .unwrap();
    let out_dir = format!("{}/browser-output/panel", env!("CARGO_TARGET_TMPDIR"));
    let seen = common::python_json(
        "browser/panel.py",
        json!({
            "base": app.url(""),
            "admin_email": "admin@painel.test",
            "password": PANEL_PASSWORD,
            "out_dir": out_dir,
            "template_label": label,
            "variables": "Nome completo",
            "client_webhook": receiver.url(),
            "third_bm": {
                "business_id": third.business_id,
                "app_id": provider::sim::SIM_APP_ID,
                "access_token": third.access_token,
                "app_secret": third.app_secret,
                "display_phone": third.display_phone_number.chars().filter(char::is_ascii_digit).collect::<String>(),
            },
        })
        .to_string(),
    )
    .await;

    // What the browser saw…
    assert_eq!(
        seen["wrong_password"], "E-mail ou senha incorretos.",
        "{seen}"
    );
    assert_eq!(seen["dashboard_live"], true, "{seen}");
    assert!(
        seen["synced"].as_str().unwrap().starts_with("Sincronizado"),
        "{seen}"
    );
    assert_eq!(seen["preview_rows"], 5, "{seen}");
    assert_eq!(
        seen["refused_in_place"], "O campo «números» é obrigatório.",
        "{seen}"
    );
    assert!(
        seen["hygiene"]
            .as_str()
            .unwrap()
            .starts_with("4 válidos · 1 inválidos"),
        "{seen}"
    );
    assert!(
        seen["progress"].as_str().unwrap().contains("4 enviados"),
        "{seen}"
    );
    assert_eq!(seen["export_rows"], 4, "{seen}");
    // The test send carried the first contact's message, rendered.
    assert_eq!(
        seen["test_send"], "Teste enviado para 5511977700099: “Olá Ana, chegaram novidades.”",
        "{seen}"
    );
    assert_eq!(
        seen["dropped"],
        "3 linha(s) do CSV descartada(s) na importação: 2 com número repetido (fica a primeira), 1 em branco.",
        "{seen}"
    );
    assert_eq!(seen["task_moved"], true, "{seen}");
    assert!(seen["webhook_log_rows"].as_u64().unwrap() >= 1, "{seen}");
    assert!(
        seen["client_refused"].as_str().unwrap().contains("Client"),
        "{seen}"
    );
    assert_eq!(seen["expired"], true, "{seen}");
    // The Client's own sends: only through its client's number (the one linked to Loja
    // Centro), each read ("lida") when filtered so; its inventory that one number.
    let via = strings(&seen["client_sends"]);
    assert!(!via.is_empty(), "{seen}");
    assert!(via.iter().all(|p| *p == via[0]), "{via:?}");
    let read = strings(&seen["client_sends_read"]);
    assert!(
        !read.is_empty() && read.iter().all(|s| *s == "lida"),
        "{read:?}"
    );
    assert_eq!(seen["client_inventory_numbers"], 1, "{seen}");
    assert!(seen["chart_bars"].as_u64().unwrap() >= 1, "{seen}");
    let pages = seen["axe"].as_object().unwrap();
    for page in [
        "login",
        "dashboard",
        "inventario",
        "clientes",
        "usuarios",
        "templates",
        "campanhas",
        "campanha",
        "tarefas",
        "webhook-logs",
        "auditoria",
        "cluster",
    ] {
        assert!(pages.contains_key(page), "{page} was not checked: {seen}");
        assert_eq!(seen["phone_width"][page], true, "{seen}");
        // Its words too (issue 47 item 9): no code, ISO time or API route shown.
        let checked = seen["words_checked"].as_array().unwrap();
        assert!(
            checked.iter().any(|p| p == page),
            "{page}: words not checked"
        );
    }
    // The webhook log names numbers by phone, not by the provider's id (item 10).
    let (_, numbers) = app
        .call(Method::GET, Some(&admin), "/api/phone-numbers", None)
        .await;
    let logged = seen["webhook_numbers"].to_string();
    let numbers = numbers["data"].as_array().unwrap();
    assert!(
        numbers
            .iter()
            .any(|n| logged.contains(n["telefone"].as_str().unwrap())),
        "{logged}"
    );
    for n in numbers {
        let pnid = n["phone_number_id"].as_str().unwrap();
        assert!(!logged.contains(pnid), "{pnid} in {logged}");
    }
    // On a phone: the menu behind its button on every page with one, and the numbers as
    // cards with quality, health and next step in view (item 11).
    assert_eq!(seen["phone_cards"], true, "{seen}");
    assert!(seen["phone_menu"].as_array().unwrap().len() >= 10, "{seen}");
    // A forward shows whom it went to (the Operador reading it sees two of the three BMs, and
    // Loja Centro is also linked to the third: not hers to name) and how it went; the payload
    // while it is retained.
    assert!(
        seen["forward_line"]
            .as_str()
            .unwrap()
            .starts_with("um cliente fora do seu escopo: "),
        "{seen}"
    );
    assert_eq!(seen["payload_shown"], 1, "{seen}");
    // The audit log filtered to the Operador's campaign lines, each an action (item 10).
    let filtered = strings(&seen["audit_filtered"]);
    assert!(
        filtered
            .iter()
            .any(|a| a.starts_with("aprovou a campanha ")),
        "{filtered:?}"
    );
    assert!(
        filtered.iter().all(|a| a.contains("campanha")),
        "{filtered:?}"
    );

    // The template built in the panel: its fields as typed; the second one's problem shown
    // before any submit.
    let built = listed(
        &app,
        &admin,
        "/api/templates?limit=200",
        "name",
        "aviso_entrega",
    )
    .await;
    assert_eq!(built["category"], "utility", "{built}");
    assert_eq!(built["header_text"], "Pedido a caminho", "{built}");
    assert_eq!(built["var_map"]["2"]["field"], "cidade", "{built}");
    assert_eq!(
        built["buttons"][0]["url"], "https://loja.example/rastreio",
        "{built}"
    );
    // Submitted to the first number at creation, then to both from its card; the number the
    // BM synced at the end of the day got it by replication (`auto_replicate`).
    let channels = built["channels"].as_array().unwrap();
    assert_eq!(channels.len(), 3, "{built}");
    assert!(channels.iter().all(|c| c["status"] != "failed"), "{built}");
    assert_eq!(
        seen["template_submitted_everywhere"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{seen}"
    );
    assert!(
        !seen["template_problems"].as_array().unwrap().is_empty(),
        "{seen}"
    );
    // The image-header template: its example went with the submission (the simulator, as
    // the provider, refuses a media header without a handle it issued).
    let photo = listed(
        &app,
        &admin,
        "/api/templates?limit=200",
        "name",
        "oferta_com_foto",
    )
    .await;
    assert_eq!(photo["header_type"], "image", "{photo}");
    assert_eq!(photo["problems"], json!([]), "{photo}");
    // Submitted to the number ticked in the builder, then replicated (`auto_replicate`) to
    // the number synced at the end of the day: a second upload, under that BM's app.
    let channels = photo["channels"].as_array().unwrap();
    assert_eq!(channels.len(), 2, "{photo}");
    assert!(
        channels.iter().all(|c| c["status"] == "approved"),
        "{photo}"
    );
    // The BM created with the provider's ids and token: confirmed with the provider and
    // synced, its number in the account.
    let bm = listed(
        &app,
        &admin,
        "/api/business-managers",
        "nome",
        "BM Filial Norte",
    )
    .await;
    assert_eq!(bm["id_provider"], third.business_id.as_str(), "{bm}");
    let number = listed(
        &app,
        &admin,
        "/api/phone-numbers",
        "phone_number_id",
        &third.phone_number_id,
    )
    .await;
    assert_eq!(number["bm_id"], bm["id"], "{number}");
    // The wiki page written in the panel, public, with its edited content.
    let (s, w) = app
        .call(
            Method::GET,
            Some(&admin),
            "/api/wiki/roteiro-do-plantao",
            None,
        )
        .await;
    assert_eq!(s, 200, "{w}");
    assert_eq!(w["data"]["visibility"], "public", "{w}");
    assert_eq!(
        w["data"]["content"], "# Plantão\n\n- **Conferir** os alertas",
        "{w}"
    );
    // The Operador's scope set in the panel: the provider's two BMs, not the panel-made one
    // (and her new password worked: she logged in with it to approve).
    let olga = listed(&app, &admin, "/api/users", "email", "olga@painel.test").await;
    assert_eq!(
        olga["scope"]["bms"].as_array().map(Vec::len),
        Some(2),
        "{olga}"
    );
    // The client edited in the panel; the temporary one removed.
    assert_eq!(seen["client_edited"], true, "{seen}");
    let (_, clients) = app
        .call(Method::GET, Some(&admin), "/api/clientes", None)
        .await;
    let names: Vec<&str> = clients["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["nome"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Loja Centro"], "{clients}");
    assert_eq!(clients["data"][0]["webhook_url"], receiver.url());
    // The client's webhook got the events of its number, from the demo's receiver, signed
    // with the secret the page showed after the rotation.
    let secret = seen["client_secret"].as_str().unwrap().to_string();
    let got = common::eventually(20, "Loja Centro's webhook got statuses", || async {
        let e = receiver.events();
        e.iter()
            .any(|c| c.json()["payload"]["entry"][0]["changes"][0]["value"]["statuses"].is_array())
            .then_some(e)
    })
    .await;
    for c in &got {
        let sig = c.headers["x-svc-signature"].to_str().unwrap();
        assert!(
            engine::webhook::verify_signature(&secret, &c.body, sig),
            "signed with the page's secret"
        );
        assert_eq!(c.json()["client_id"], clients["data"][0]["id"]);
    }
    // The BM made and renamed in the panel, its app secret kept (never shown).
    let made = listed(
        &app,
        &admin,
        "/api/business-managers",
        "nome",
        "BM Loja Centro (matriz)",
    )
    .await;
    assert_eq!(made["cliente"], "Loja Centro", "{made}");
    assert_eq!(made["has_app_secret"], true, "{made}");
    assert!(
        seen["bm_created"]
            .as_str()
            .unwrap()
            .ends_with(&format!("#bm-{}", made["id"])),
        "{seen}"
    );

    // …is what the API holds: the campaign finished with four sends, approved by the
    // Operador; the task moved; the panel's writes are in the audit log under each user.
    let (_, list) = app
        .call(Method::GET, Some(&admin), "/api/campaigns", None)
        .await;
    let c = &list["data"][0];
    assert_eq!(c["nome"], "Natal no navegador", "{list}");
    assert_eq!(c["status"], "concluida", "{c}");
    assert_eq!(c["stats"]["sent"], 4, "{c}");
    assert_ne!(c["aprovado_por"], c["criado_por"], "{c}");
    let (_, tasks) = app
        .call(Method::GET, Some(&admin), "/api/tasks", None)
        .await;
    let moved = tasks["data"]["colunas"]["em_andamento"].as_array().unwrap();
    assert!(
        moved.iter().any(|t| t["titulo"] == "Trocar foto do número"),
        "{tasks}"
    );
    let (_, audit) = app
        .call(Method::GET, Some(&admin), "/api/audit-log?limit=500", None)
        .await;
    let lines = audit["data"].as_array().unwrap();
    let by = |who: &str, action: &str| {
        lines
            .iter()
            .any(|l| l["token_name"].as_str().unwrap().contains(who) && l["action"] == action)
    };
    assert!(
        by("admin@painel.test", "POST /api/campaigns/import"),
        "{audit}"
    );
    assert!(
        by("olga@painel.test", "POST /api/campaigns/{id}/approve"),
        "{audit}"
    );
    assert!(
        by("admin@painel.test", "POST /api/business-managers/{id}/sync"),
        "{audit}"
    );
}

/// A big campaign followed through reloads (issue 47, "Done when"; `tests/browser/
/// campaign_day.py`): 330 rows of Excel's Windows-1252 CSV with repeats and blank rows, made
/// by an Operador, approved by an Admin, dispatched at a pace that leaves time to act (each
/// number 5 sends/s by its cadence), reloaded while dispatching, paused, resumed and cancelled:
/// each time a whole page with its status's actions. What the API holds afterwards agrees:
/// cancelled, some sent and not all, no recipient sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_campaign_reads_whole_through_reloads() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, admin) = app
        .panel_user("admin@dia.test", "Admin", None, vec![])
        .await;
    app.panel_user("op@dia.test", "Operador", None, vec![])
        .await;
    let (c1, _) = app.fast_channel().await;
    let (c2, _) = app.fast_channel().await;
    for c in [c1, c2] {
        let (s, g) = app
            .patch(
                &format!("/api/v1/channels/{c}/guardrails"),
                json!({"cadence_ms": 200}),
            )
            .await;
        assert_eq!(s, 200, "{g}");
    }
    let tpl = app
        .approved_template(
            json!({"name": "Natal", "body": "Olá {{1}}, o Natal chegou em {{2}}.", "var_map": {"1": {"field": "nome"}, "2": {"field": "cidade"}}}),
            &[c1, c2],
        )
        .await;
    let label = template_label(&app, &admin, tpl).await;
    let out_dir = format!(
        "{}/browser-output/campaign-day",
        env!("CARGO_TARGET_TMPDIR")
    );
    let seen = common::python_json(
        "browser/campaign_day.py",
        json!({
            "base": app.url(""),
            "maker": "op@dia.test",
            "checker": "admin@dia.test",
            "password": PANEL_PASSWORD,
            "template_label": label,
            "out_dir": out_dir,
        })
        .to_string(),
    )
    .await;
    assert!(
        seen["hygiene"]
            .as_str()
            .unwrap()
            .starts_with("300 válidos · 0 inválidos"),
        "{seen}"
    );
    assert_eq!(
        seen["dropped"],
        "30 linha(s) do CSV descartada(s) na importação: 20 com número repetido (fica a primeira), 10 em branco.",
        "{seen}"
    );
    for step in ["disparando", "pausada", "retomada", "cancelada"] {
        assert!(seen["reloads"][step].is_object(), "{step}: {seen}");
    }
    // Any contact's message, typed as the CSV has the number or opened from a sends row.
    assert_eq!(
        seen["preview_typed"], "Olá Sebastião 5, o Natal chegou em Ribeirão Preto.",
        "{seen}"
    );
    let row = strings(&seen["preview_row"]);
    assert!(row[1].contains(row[0]), "the row's own contact: {row:?}");
    let (_, list) = app
        .call(Method::GET, Some(&admin), "/api/campaigns", None)
        .await;
    let c = &list["data"][0];
    assert_eq!(c["status"], "cancelada", "{c}");
    let sent = c["stats"]["sent"].as_i64().unwrap();
    assert!(sent > 0 && sent < 300, "cancelled mid-way: {c}");
    let log = common::gateway::sent_log(app.sim_addr).await;
    let per_recipient = log["per_recipient"].as_object().unwrap();
    assert!(
        per_recipient
            .values()
            .all(|t| t.as_object().is_some_and(|o| o.values().all(|n| n == 1))),
        "no recipient twice: {log}"
    );
}
