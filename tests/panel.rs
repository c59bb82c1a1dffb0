//! The operator panel API (`/api`, issue 19) through the real server against the simulator:
//! bootstrap and sessions, the role and scope matrices, BMs created and synced into the
//! account API's channels, provider-owned fields, a ban in `health_status` and the alerts,
//! profile photos, tasks, clients, templates and wiki, and the dashboard's counts.

mod common;

use common::{eventually, Backend, TestApp};
use provider::sim::{CreateNumber, CreatedNumber, SIM_APP_ID};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

/// The panel API's inventory edges no other scenario reaches: a WABA registered by hand under
/// a BM (the provider confirms it is the BM's) and removed while it has no number, a user
/// removed, and a paused template reactivated on its number.
async fn inventory_edges_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.test", "Admin", None, vec![])
        .await;
    let call = |m: Method, path: String, body: Option<Value>| {
        let (app, admin) = (&app, &admin);
        async move { app.call(m, Some(admin), &path, body).await }
    };
    // A BM registered without a sync, then its WABA by hand.
    let n = app.sim.create_number(CreateNumber::default()).unwrap();
    let (s, bm) = call(
        Method::POST,
        "/api/business-managers".into(),
        Some(json!({"nome": "BM manual", "cliente": "Cliente manual", "id_provider": n.business_id, "access_token": n.access_token, "app_id": provider::sim::SIM_APP_ID, "app_secret": n.app_secret})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{bm}");
    let bm_id = bm["data"]["id"].as_i64().unwrap();
    let (s, w) = call(
        Method::POST,
        "/api/wabas".into(),
        Some(json!({"id_provider": n.waba_id, "bm_id": bm_id, "nome": "WABA manual"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{w}");
    let waba = w["data"]["id"].as_i64().unwrap();
    // A number id that is not the provider's digits is refused before any provider call (an
    // empty one would name another Graph node; found by the contract fuzzer: it was a 502).
    for bad in ["", "  ", "../me", "12a"] {
        let (s, e) = call(
            Method::POST,
            "/api/phone-numbers".into(),
            Some(json!({"phone_number_id": bad, "waba_id": waba})),
        )
        .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{bad:?}: {e}");
        assert_eq!(e["field"], "phone_number_id", "{e}");
    }
    let (s, d) = call(Method::DELETE, format!("/api/wabas/{waba}"), None).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    let (s, _) = call(Method::GET, format!("/api/wabas/{waba}"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // A user removed.
    let (user, _) = app
        .panel_user("temporario@acme.test", "Operador", None, vec![])
        .await;
    let (s, d) = call(Method::DELETE, format!("/api/users/{user}"), None).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    // A paused template reactivated from the panel API: a new version goes for review.
    let (channel, _) = app.connect_channel().await;
    let tpl = app
        .approved_template(
            json!({"name": "Aviso painel", "body": "Olá, novidades na loja."}),
            &[channel],
        )
        .await;
    let (_, t) = call(Method::GET, format!("/api/templates/{tpl}"), None).await;
    let pid = t["data"]["channels"][0]["provider_template_id"]
        .as_str()
        .unwrap()
        .to_string();
    app.sim_template_status(&pid, "PAUSED").await;
    eventually(10, "paused in the library", || async {
        let (_, t) = call(Method::GET, format!("/api/templates/{tpl}"), None).await;
        (t["data"]["channels"][0]["status"] == "paused").then_some(())
    })
    .await;
    let (s, r) = call(
        Method::POST,
        format!("/api/templates/{tpl}/channels/{channel}/reactivate"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert!(r["data"]["nome"].as_str().unwrap().ends_with("_v2"), "{r}");
}

on_both_backends! {
    inventory_edges => inventory_edges_scenario;
    sessions => sessions_scenario;
    role_matrix => role_matrix_scenario;
    scope_matrix => scope_matrix_scenario;
    bm_sync => bm_sync_scenario;
    ban_alerts_dashboard => ban_alerts_dashboard_scenario;
    photo => photo_scenario;
    tasks_clients_content => tasks_clients_content_scenario;
}

const PASSWORD: &str = common::PANEL_PASSWORD;

async fn user(
    app: &TestApp,
    email: &str,
    role: &str,
    client: Option<i64>,
    bms: Vec<i64>,
) -> (i64, String) {
    app.panel_user(email, role, client, bms).await
}

async fn login(app: &TestApp, email: &str, password: &str) -> String {
    app.panel_login(email, password).await
}

async fn as_user(
    app: &TestApp,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let (s, b) = app.call(method, Some(token), path, body).await;
    (s.as_u16(), b)
}

/// A simulator business with one number; a second number in the same WABA when `two`.
fn business(app: &TestApp, two: bool) -> (CreatedNumber, Option<CreatedNumber>) {
    let a = app
        .sim
        .create_number(CreateNumber {
            verified_name: Some("Loja Panel".into()),
            ..CreateNumber::default()
        })
        .unwrap();
    let b = two.then(|| {
        app.sim
            .create_number(CreateNumber {
                waba_id: Some(a.waba_id.clone()),
                quality: Some("YELLOW".into()),
                ..CreateNumber::default()
            })
            .unwrap()
    });
    (a, b)
}

/// Creates a BM for `n`'s business through the panel and syncs it; returns the BM's id.
async fn bm_synced(app: &TestApp, admin: &str, n: &CreatedNumber, name: &str, client: &str) -> i64 {
    app.panel_bm(admin, n, json!({"nome": name, "cliente": client}))
        .await
}

fn disparo_cli(app: &TestApp, args: &[&str], stdin: &str) -> std::process::Output {
    let settings = app.settings();
    let mut child = Command::new(env!("CARGO_BIN_EXE_disparo"))
        .args(args)
        .env("DATABASE_URL", &settings.database_url)
        .env(
            "DISPARO_MASTER_KEY",
            settings.master_key.as_ref().unwrap().expose(),
        )
        .env("DISPARO_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("disparo runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

async fn sessions_scenario(backend: Backend) {
    let app = TestApp::spawn(backend.clone()).await;
    // Bootstrap: the first Admin from the command line, the password on stdin.
    let out = disparo_cli(
        &app,
        &[
            "user",
            "create",
            "--account",
            "acme",
            "--email",
            "Ana@Acme.com.br",
            "--name",
            "Ana Admin",
            "--role",
            "Admin",
            "--password-stdin",
        ],
        "senha-da-ana-123\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let weak = disparo_cli(
        &app,
        &[
            "user",
            "create",
            "--account",
            "acme",
            "--email",
            "b@acme.com.br",
            "--name",
            "B",
            "--role",
            "Admin",
            "--password-stdin",
        ],
        "curta\n",
    );
    assert!(!weak.status.success(), "a weak password is refused");

    // Wrong pairs: one answer for an unknown e-mail and a wrong password.
    let (s1, wrong) = app
        .call(
            Method::POST,
            None,
            "/api/login",
            Some(json!({"email": "ana@acme.com.br", "password": "errada-errada"})),
        )
        .await;
    let (s2, unknown) = app
        .call(
            Method::POST,
            None,
            "/api/login",
            Some(json!({"email": "ninguem@acme.com.br", "password": "errada-errada"})),
        )
        .await;
    assert_eq!((s1.as_u16(), s2.as_u16()), (401, 401));
    assert_eq!(wrong, unknown, "the same body for both");
    assert_eq!(wrong["code"], "login_invalido");

    let (s, logged) = app
        .call(
            Method::POST,
            None,
            "/api/login",
            Some(json!({"email": "ana@acme.com.br", "password": "senha-da-ana-123"})),
        )
        .await;
    assert_eq!(s, 200, "{logged}");
    let admin = logged["data"]["token"].as_str().unwrap().to_string();
    assert!(admin.starts_with("ses_"));
    assert!(logged["data"]["expires_at"].as_str().is_some());
    assert_eq!(logged["data"]["user"]["role"], "Admin");
    assert_eq!(logged["data"]["user"]["email"], "ana@acme.com.br");
    assert!(logged["data"]["user"].get("password").is_none());
    let (s, me) = as_user(&app, &admin, Method::GET, "/api/me", None).await;
    assert_eq!((s, me["data"]["name"].as_str()), (200, Some("Ana Admin")));
    // No session, an account token, garbage: 401 in the envelope.
    for token in [None, Some(app.token.as_str()), Some("ses_nope")] {
        let (s, b) = app.call(Method::GET, token, "/api/me", None).await;
        assert_eq!(
            (s.as_u16(), b["code"].as_str()),
            (401, Some("sessao_invalida")),
            "{token:?}"
        );
    }
    // The session is stored as a hash only.
    let stored: Vec<String> = app
        .runtime
        .store()
        .list_users(app.account_id)
        .await
        .unwrap()
        .iter()
        .map(|u| u.email.clone())
        .collect();
    assert_eq!(stored, vec!["ana@acme.com.br"]);

    // An Operador, disabled by the Admin: cut off at once, and no new login.
    let (s, op) = as_user(
        &app,
        &admin,
        Method::POST,
        "/api/users",
        Some(json!({"email": "op@acme.com.br", "name": "Otto", "role": "Operador", "password": PASSWORD})),
    )
    .await;
    assert_eq!(s, 201, "{op}");
    let op_id = op["data"]["id"].as_i64().unwrap();
    let op_token = login(&app, "op@acme.com.br", PASSWORD).await;
    assert_eq!(
        as_user(&app, &op_token, Method::GET, "/api/me", None)
            .await
            .0,
        200
    );
    let (s, b) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/users/{op_id}"),
        Some(json!({"status": "disabled"})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        as_user(&app, &op_token, Method::GET, "/api/me", None)
            .await
            .0,
        401
    );
    let (s, _) = app
        .call(
            Method::POST,
            None,
            "/api/login",
            Some(json!({"email": "op@acme.com.br", "password": PASSWORD})),
        )
        .await;
    assert_eq!(s, 401, "a disabled user cannot log in");
    // Duplicate e-mail, bad role, weak password.
    for (body, code) in [
        (
            json!({"email": "OP@acme.com.br", "name": "X", "role": "Operador", "password": PASSWORD}),
            "email_em_uso",
        ),
        (
            json!({"email": "x@acme.com.br", "name": "X", "role": "admin", "password": PASSWORD}),
            "papel_invalido",
        ),
        (
            json!({"email": "x@acme.com.br", "name": "X", "role": "Operador", "password": "curta"}),
            "senha_fraca",
        ),
        (
            json!({"email": "x@acme.com.br", "name": "X", "role": "Client", "password": PASSWORD}),
            "cliente_obrigatorio",
        ),
    ] {
        let (s, b) = as_user(&app, &admin, Method::POST, "/api/users", Some(body)).await;
        assert_eq!((s, b["code"].as_str()), (422, Some(code)), "{b}");
    }
    // The last Admin can neither step down nor be removed.
    let me_id = me["data"]["id"].as_i64().unwrap();
    let (s, b) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/users/{me_id}"),
        Some(json!({"role": "Operador"})),
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("ultimo_admin")));
    let (s, b) = as_user(
        &app,
        &admin,
        Method::DELETE,
        &format!("/api/users/{me_id}"),
        None,
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("ultimo_admin")));
    // The audit log names the panel user.
    let audit = app
        .runtime
        .store()
        .list_audit(app.account_id, 50)
        .await
        .unwrap();
    assert!(
        audit
            .iter()
            .any(|a| a.token_name == "Ana Admin <ana@acme.com.br> (painel)"
                && a.action == "PUT /api/users/{id}"),
        "{audit:?}"
    );
    // Through the API, narrowed by author and by kind of record, a page at a time
    // (issue 47 item 10).
    let (s, b) = as_user(
        &app,
        &admin,
        Method::GET,
        "/api/audit-log?autor=ANA%20admin&recurso=users&limit=1",
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["data"].as_array().unwrap().len(), 1, "{b}");
    assert_eq!(b["has_more"], true, "{b}");
    let first = b["data"][0].clone();
    assert!(
        first["action"].as_str().unwrap().contains(" /api/users"),
        "{b}"
    );
    assert!(
        first["token_name"]
            .as_str()
            .unwrap()
            .starts_with("Ana Admin"),
        "{b}"
    );
    let cursor = b["next_cursor"].as_str().unwrap().to_string();
    let (s, next) = as_user(
        &app,
        &admin,
        Method::GET,
        &format!("/api/audit-log?autor=ana&recurso=users&limit=100&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{next}");
    let rest = next["data"].as_array().unwrap();
    assert!(!rest.is_empty(), "{next}");
    assert!(
        rest.iter().all(|l| l["id"].as_i64() < first["id"].as_i64()
            && l["action"].as_str().unwrap().contains(" /api/users")),
        "{next}"
    );
    assert_eq!(next["has_more"], false, "{next}");
    // Another author, or a resource nobody wrote: nothing; LIKE's wildcards are literal.
    for q in ["autor=Otto", "recurso=wiki", "autor=%25", "autor=_"] {
        let (s, b) = as_user(
            &app,
            &admin,
            Method::GET,
            &format!("/api/audit-log?{q}"),
            None,
        )
        .await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["data"].as_array().unwrap().len(), 0, "{q}: {b}");
    }
    let (s, b) = as_user(
        &app,
        &admin,
        Method::GET,
        "/api/audit-log?recurso=..%2Fx",
        None,
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str(), b["field"].as_str()),
        (422, Some("invalid_field"), Some("recurso")),
        "{b}"
    );

    // Logout revokes the token.
    assert_eq!(
        as_user(&app, &admin, Method::POST, "/api/logout", None)
            .await
            .0,
        200
    );
    assert_eq!(
        as_user(&app, &admin, Method::GET, "/api/me", None).await.0,
        401
    );

    // Attempts per e-mail are limited: the 11th in a burst is 429 with Retry-After.
    let mut last = None;
    for _ in 0..11 {
        let r = app
            .http
            .post(app.url("/api/login"))
            .json(&json!({"email": "ana@acme.com.br", "password": "errada-errada"}))
            .send()
            .await
            .unwrap();
        last = Some((
            r.status().as_u16(),
            r.headers().get("retry-after").is_some(),
        ));
    }
    assert_eq!(last, Some((429, true)));
    drop(app);

    // Expiry: a session unused for longer than its lifetime is over; one in use slides.
    let app = TestApp::spawn_with(backend, |s| s.session_ttl_ms = 1500).await;
    let (_, short) = user(&app, "curto@acme.com.br", "Admin", None, vec![]).await;
    for _ in 0..5 {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert_eq!(
            as_user(&app, &short, Method::GET, "/api/me", None).await.0,
            200,
            "in use: slides"
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(2000)).await;
    let (s, b) = as_user(&app, &short, Method::GET, "/api/me", None).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (401, Some("sessao_invalida")),
        "expired"
    );
}

/// Every route of the role table × Admin, Operador, Client and no session: without a session
/// 401 (which also proves the route is served), a role the table does not list 403, a listed
/// role never 401/403. And every route of the panel's document is in the table.
async fn role_matrix_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = user(&app, "admin@acme.com.br", "Admin", None, vec![]).await;
    let (s, client) = as_user(
        &app,
        &admin,
        Method::POST,
        "/api/clientes",
        Some(json!({"nome": "Cliente Matriz"})),
    )
    .await;
    assert_eq!(s, 201, "{client}");
    let client_id = client["data"]["id"].as_i64().unwrap();
    let (_, operador) = user(&app, "op@acme.com.br", "Operador", None, vec![]).await;
    let (_, client_user) = user(&app, "cli@acme.com.br", "Client", Some(client_id), vec![]).await;
    let tokens = [
        ("Admin", admin.clone()),
        ("Operador", operador),
        ("Client", client_user),
    ];
    for (method, route, roles) in http::panel::access::ROUTES {
        if *route == "/api/logout" {
            continue; // below: it ends the session it is called with
        }
        // An id no record has: allowed roles reach the handler (404/422), nothing is changed.
        let path = route.replace("{id}", "987654").replace("{key}", "987654");
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let body = (method != Method::GET && method != Method::DELETE).then(|| json!({}));
        let (s, b) = app.call(method.clone(), None, &path, body.clone()).await;
        assert_eq!(s.as_u16(), 401, "{method} {route} without a session: {b}");
        for (role, token) in &tokens {
            let (s, b) = app
                .call(method.clone(), Some(token), &path, body.clone())
                .await;
            let allowed = roles.iter().any(|r| r.as_str() == *role);
            if allowed {
                assert!(
                    ![401, 403, 405].contains(&s.as_u16()),
                    "{method} {route} as {role}: {s} {b}"
                );
            } else {
                assert_eq!(
                    (s.as_u16(), b["code"].as_str()),
                    (403, Some("papel_insuficiente")),
                    "{method} {route} as {role}: {b}"
                );
            }
        }
    }
    for email in ["admin@acme.com.br", "op@acme.com.br", "cli@acme.com.br"] {
        let t = login(&app, email, PASSWORD).await;
        assert_eq!(
            as_user(&app, &t, Method::POST, "/api/logout", None).await.0,
            200
        );
        assert_eq!(as_user(&app, &t, Method::GET, "/api/me", None).await.0, 401);
    }
    // The document and the table agree.
    let doc: Value = app
        .http
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut documented = 0;
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            if path == "/login" {
                continue;
            }
            documented += 1;
            let route = format!("/api{path}");
            assert!(
                http::panel::access::ROUTES
                    .iter()
                    .any(|(m, r, _)| m.eq_ignore_ascii_case(method) && *r == route),
                "{method} {route} is documented but has no line in the role table"
            );
        }
    }
    assert_eq!(
        documented,
        http::panel::access::ROUTES.len(),
        "every line of the table is documented"
    );
}

async fn scope_matrix_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = user(&app, "admin@acme.com.br", "Admin", None, vec![]).await;
    let (n1, n1b) = business(&app, true);
    let (n2, _) = business(&app, false);
    let bm1 = bm_synced(&app, &admin, &n1, "BM Um", "Cliente A").await;
    let bm2 = bm_synced(&app, &admin, &n2, "BM Dois", "Cliente B").await;
    let (_, clients) = as_user(&app, &admin, Method::GET, "/api/clientes", None).await;
    let id_of = |name: &str| {
        clients["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["nome"] == name)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let (client_a, client_b) = (id_of("Cliente A"), id_of("Cliente B"));
    let (_, numbers) = as_user(&app, &admin, Method::GET, "/api/phone-numbers", None).await;
    let number = |pnid: &str| {
        numbers["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["phone_number_id"] == pnid)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let (c1, c1b, c2) = (
        number(&n1.phone_number_id),
        number(&n1b.unwrap().phone_number_id),
        number(&n2.phone_number_id),
    );
    // A number's own client wins over its BM's: BM1's second number serves client B, BM2's
    // number serves client A.
    for (id, client) in [(c1b, client_b), (c2, client_a)] {
        let (s, b) = as_user(
            &app,
            &admin,
            Method::PUT,
            &format!("/api/phone-numbers/{id}"),
            Some(json!({"cliente_id": client})),
        )
        .await;
        assert_eq!(s, 200, "{b}");
    }

    // A staff user scoped to BM1.
    let (_, scoped) = user(&app, "op1@acme.com.br", "Operador", None, vec![bm1]).await;
    let (_, bms) = as_user(&app, &scoped, Method::GET, "/api/business-managers", None).await;
    let ids: Vec<i64> = bms["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![bm1]);
    let (_, nums) = as_user(&app, &scoped, Method::GET, "/api/phone-numbers", None).await;
    let mut seen: Vec<i64> = nums["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_i64().unwrap())
        .collect();
    seen.sort();
    assert_eq!(seen, vec![c1.min(c1b), c1.max(c1b)]);
    for (method, path, body) in [
        (Method::GET, format!("/api/business-managers/{bm2}"), None),
        (
            Method::PUT,
            format!("/api/business-managers/{bm2}"),
            Some(json!({"nome": "x"})),
        ),
        (
            Method::POST,
            format!("/api/business-managers/{bm2}/sync"),
            None,
        ),
        (
            Method::DELETE,
            format!("/api/business-managers/{bm2}"),
            None,
        ),
        (Method::GET, format!("/api/phone-numbers/{c2}"), None),
        (
            Method::PUT,
            format!("/api/phone-numbers/{c2}"),
            Some(json!({"nome_exibicao": "x"})),
        ),
    ] {
        let (s, b) = as_user(&app, &scoped, method.clone(), &path, body).await;
        assert_eq!(
            (s, b["code"].as_str()),
            (404, Some("not_found")),
            "{method} {path}"
        );
    }
    let (s, _) = as_user(
        &app,
        &scoped,
        Method::POST,
        "/api/business-managers",
        Some(json!({"nome": "Novo", "cliente": "C"})),
    )
    .await;
    assert_eq!(s, 403, "a scoped Operador does not create BMs");

    // A Client user of client A: BM1 (its client), BM1's first number (not the second, which
    // serves B), BM2's number (its own client is A), and BM2 itself because it holds it.
    let (_, cli) = user(&app, "cli@acme.com.br", "Client", Some(client_a), vec![]).await;
    let (_, nums) = as_user(&app, &cli, Method::GET, "/api/phone-numbers", None).await;
    let mut seen: Vec<i64> = nums["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_i64().unwrap())
        .collect();
    seen.sort();
    let mut want = vec![c1, c2];
    want.sort();
    assert_eq!(seen, want);
    assert_eq!(
        as_user(
            &app,
            &cli,
            Method::GET,
            &format!("/api/phone-numbers/{c1b}"),
            None
        )
        .await
        .0,
        404
    );
    let (_, st) = as_user(&app, &cli, Method::GET, "/api/clientes", None).await;
    assert_eq!(st["data"].as_array().unwrap().len(), 1);
    assert_eq!(st["data"][0]["id"], client_a);
    let (_, state) = as_user(&app, &cli, Method::GET, "/api/state", None).await;
    assert_eq!(state["data"]["tarefas"], json!([]));
    assert_eq!(
        state["data"]["usuarios"].as_array().unwrap().len(),
        1,
        "a Client sees itself only"
    );
    // A Client user of client B sees BM1's second number, and BM2 (its client) without
    // BM2's number (that one serves A).
    let (_, cli_b) = user(&app, "clib@acme.com.br", "Client", Some(client_b), vec![]).await;
    let (_, nums) = as_user(&app, &cli_b, Method::GET, "/api/phone-numbers", None).await;
    let seen: Vec<i64> = nums["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_i64().unwrap())
        .collect();
    assert_eq!(seen, vec![c1b]);
    let (s, b) = as_user(
        &app,
        &cli_b,
        Method::GET,
        &format!("/api/business-managers/{bm2}"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["data"]["wabas"][0]["numeros"], json!([]));
    assert_eq!(
        as_user(
            &app,
            &cli_b,
            Method::GET,
            &format!("/api/phone-numbers/{c2}"),
            None
        )
        .await
        .0,
        404
    );
    // Another account's Admin sees none of it.
    let other = app.runtime.store().ensure_account("other").await.unwrap();
    services::panel::create_user(
        app.runtime.store(),
        other.id,
        services::panel::UserInput {
            email: "intruso@outra.com.br".into(),
            name: "Intruso".into(),
            role: "Admin".into(),
            status: None,
            password: PASSWORD.into(),
            client_id: None,
            bm_ids: vec![],
        },
    )
    .await
    .unwrap();
    let intruder = login(&app, "intruso@outra.com.br", PASSWORD).await;
    let (_, bms) = as_user(&app, &intruder, Method::GET, "/api/business-managers", None).await;
    assert_eq!(bms["data"], json!([]));
    for path in [
        format!("/api/business-managers/{bm1}"),
        format!("/api/phone-numbers/{c1}"),
        format!("/api/clientes/{client_a}"),
    ] {
        assert_eq!(
            as_user(&app, &intruder, Method::GET, &path, None).await.0,
            404,
            "{path}"
        );
    }
    // A staff scope naming another account's BM is refused.
    let (s, b) = as_user(&app, &intruder, Method::POST, "/api/users", Some(json!({"email": "z@outra.com.br", "name": "Z", "role": "Operador", "password": PASSWORD, "bms": [bm1]}))).await;
    assert_eq!((s, b["code"].as_str()), (422, Some("bm_invalido")));
}

async fn bm_sync_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = user(&app, "admin@acme.com.br", "Admin", None, vec![]).await;
    let (n, n2) = business(&app, true);
    let n2 = n2.unwrap();
    let (intruder, _) = business(&app, false);

    // Another business's token does not prove this Business ID: nothing stored.
    let (s, b) = as_user(
        &app,
        &admin,
        Method::POST,
        "/api/business-managers",
        Some(json!({"nome": "BM Loja", "cliente": "Loja", "id_provider": n.business_id, "access_token": intruder.access_token})),
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("bm_invalido")), "{b}");
    let (_, listed) = as_user(&app, &admin, Method::GET, "/api/business-managers", None).await;
    assert_eq!(listed["data"], json!([]));
    // Provider-owned fields are refused.
    let (s, b) = as_user(
        &app,
        &admin,
        Method::POST,
        "/api/business-managers",
        Some(json!({"nome": "X", "cliente": "Loja", "tier": "TIER_1K"})),
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("campo_do_provedor")));

    let (s, created) = as_user(
        &app,
        &admin,
        Method::POST,
        "/api/business-managers",
        Some(json!({"nome": "BM Loja", "cliente": "Loja", "id_provider": n.business_id, "access_token": n.access_token, "app_id": SIM_APP_ID, "app_secret": n.app_secret})),
    )
    .await;
    assert_eq!(s, 201, "{created}");
    let bm = created["data"]["id"].as_i64().unwrap();
    assert_eq!(created["data"]["has_access_token"], true);
    assert_eq!(created["data"]["health_status"], "nao_sincronizado");
    assert!(
        created["data"].get("access_token").is_none(),
        "tokens never come back"
    );
    assert!(!created.to_string().contains(&n.access_token));

    let (s, synced) = as_user(
        &app,
        &admin,
        Method::POST,
        &format!("/api/business-managers/{bm}/sync"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{synced}");
    assert_eq!(
        synced["data"]["sync"]["created_numbers"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(
        synced["data"]["sync"]["templates_imported"]
            .as_u64()
            .unwrap()
            >= 1,
        "hello_world at the provider"
    );
    assert_eq!(synced["data"]["bm"]["health_status"], "ok");
    let waba = &synced["data"]["bm"]["wabas"][0];
    assert_eq!(waba["id_provider"], n.waba_id.as_str());
    assert_eq!(waba["numeros"].as_array().unwrap().len(), 2);
    let number = waba["numeros"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["phone_number_id"] == n.phone_number_id.as_str())
        .unwrap()
        .clone();
    let channel_id = number["id"].as_i64().unwrap();
    assert_eq!(number["qualidade"], "GREEN");
    let yellow = waba["numeros"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["phone_number_id"] == n2.phone_number_id.as_str())
        .unwrap()
        .clone();
    assert_eq!(yellow["qualidade"], "YELLOW");

    // The very same record in the account API, and it sends.
    let (_, channels) = app.get("/api/v1/channels").await;
    assert!(
        channels["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == channel_id),
        "{channels}"
    );
    let (_, lib) = app.get("/api/v1/templates").await;
    let hello = lib["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["provider_name"] == "hello_world")
        .expect("imported into the library")
        .clone();
    assert!(
        hello["channels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["channel_id"] == channel_id && c["status"] == "approved"),
        "{hello}"
    );
    let (s, sent) = app
        .post("/api/v1/messages", json!({"to": "5511977770000", "channel_id": channel_id, "template": {"name": "hello_world", "language": "en_US"}}))
        .await;
    assert_eq!(s, 201, "{sent}");
    let ledger: Value = app
        .http
        .get(format!(
            "http://{}/_sim/numbers/{}/sent",
            app.sim_addr, n.phone_number_id
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ledger["data"]["count"], 1, "{ledger}");

    // A blank token and secret keep the stored ones: the next sync still works.
    let (s, b) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/business-managers/{bm}"),
        Some(json!({"nome": "BM Loja Renomeado", "access_token": "", "app_secret": ""})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["data"]["nome"], "BM Loja Renomeado");
    assert_eq!(b["data"]["has_access_token"], true);
    assert_eq!(b["data"]["cliente"], "Loja");
    let (s, again) = as_user(
        &app,
        &admin,
        Method::POST,
        &format!("/api/business-managers/{bm}/sync"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["data"]["sync"]["created_numbers"], json!([]));
    // Number and WABA: provider fields refused, operator fields kept.
    let (s, b) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/phone-numbers/{channel_id}"),
        Some(json!({"qualidade": "GREEN"})),
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("campo_do_provedor")));
    let (s, b) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/phone-numbers/{channel_id}"),
        Some(json!({"nome_exibicao": "Atendimento"})),
    )
    .await;
    assert_eq!(
        (s, b["data"]["nome_exibicao"].as_str()),
        (200, Some("Atendimento"))
    );
    let (_, ch) = app
        .get(&format!("/api/v1/channels/{channel_id}/official"))
        .await;
    assert_eq!(ch["data"]["name"], "Atendimento", "one record: {ch}");
    let waba_id = waba["id"].as_i64().unwrap();
    let (s, b) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/wabas/{waba_id}"),
        Some(json!({"status": "inativa"})),
    )
    .await;
    assert_eq!((s, b["data"]["status"].as_str()), (200, Some("inativa")));
    let (s, b) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/wabas/{waba_id}"),
        Some(json!({"status": "banida"})),
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("status_invalido")));
    let (s, b) = as_user(
        &app,
        &admin,
        Method::DELETE,
        &format!("/api/wabas/{waba_id}"),
        None,
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("waba_com_numeros")));
    // A number with history stays; one without goes (and its actor with it).
    let (s, b) = as_user(
        &app,
        &admin,
        Method::DELETE,
        &format!("/api/phone-numbers/{channel_id}"),
        None,
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("numero_com_historico")));
    let yellow_id = yellow["id"].as_i64().unwrap();
    assert_eq!(
        as_user(
            &app,
            &admin,
            Method::DELETE,
            &format!("/api/phone-numbers/{yellow_id}"),
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        app.get(&format!("/api/v1/channels/{yellow_id}/health"))
            .await
            .0,
        404
    );
    // Connected again through the panel: the provider proves it is in the WABA.
    let (s, b) = as_user(
        &app,
        &admin,
        Method::POST,
        "/api/phone-numbers",
        Some(json!({"phone_number_id": intruder.phone_number_id, "waba_id": waba_id})),
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("waba_invalida")), "{b}");
    let (s, b) = as_user(&app, &admin, Method::POST, "/api/phone-numbers", Some(json!({"phone_number_id": n2.phone_number_id, "waba_id": waba_id, "nome_exibicao": "Volta"}))).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["data"]["nome_exibicao"], "Volta");

    // A number connected through the account API shows in the panel, under its BM.
    let (v1_channel, _) = app.connect_channel().await;
    let (_, nums) = as_user(&app, &admin, Method::GET, "/api/phone-numbers", None).await;
    assert!(
        nums["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == v1_channel),
        "{nums}"
    );
}

async fn ban_alerts_dashboard_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = user(&app, "admin@acme.com.br", "Admin", None, vec![]).await;
    let (a, _) = business(&app, true);
    let (b, _) = business(&app, false);
    let bm_a = bm_synced(&app, &admin, &a, "BM A", "Cliente A").await;
    let bm_b = bm_synced(&app, &admin, &b, "BM B", "Cliente B").await;
    // Tickets: two open (one urgent), one resolved.
    for (title, prio, status) in [
        ("Revisar BM", "urgente", "aberto"),
        ("Trocar foto", "baixa", "em_andamento"),
        ("Feito", "alta", "resolvido"),
    ] {
        let (s, t) = as_user(
            &app,
            &admin,
            Method::POST,
            "/api/tasks",
            Some(json!({"titulo": title, "prioridade": prio, "status": status, "bm_id": bm_a})),
        )
        .await;
        assert_eq!(s, 201, "{t}");
    }
    let (_, d) = as_user(&app, &admin, Method::GET, "/api/dashboard", None).await;
    let d = &d["data"];
    assert_eq!(d["bms"]["total"], 2);
    assert_eq!(d["bms"]["por_saude"]["ok"], 2);
    assert_eq!(d["wabas"]["total"], 2);
    assert_eq!(d["numeros"]["total"], 3);
    assert_eq!(d["numeros"]["por_qualidade"]["GREEN"], 2);
    assert_eq!(d["numeros"]["por_qualidade"]["YELLOW"], 1);
    assert_eq!(d["numeros"]["por_tier"]["TIER_250"], 3);
    assert_eq!(d["tarefas_abertas"]["total"], 2);
    assert_eq!(d["tarefas_abertas"]["por_prioridade"]["urgente"], 1);

    // The provider bans BM B's WABA and its webhook never arrives: the sync finds out.
    app.sim.set_webhook_url(None).await;
    let r = app
        .http
        .post(format!(
            "http://{}/_sim/wabas/{}/account-update",
            app.sim_addr, b.waba_id
        ))
        .json(&json!({"event": "DISABLED_UPDATE", "ban_state": "DISABLE"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let (_, before) = as_user(
        &app,
        &admin,
        Method::GET,
        &format!("/api/business-managers/{bm_b}"),
        None,
    )
    .await;
    assert_eq!(
        before["data"]["health_status"], "ok",
        "nothing known before the sync"
    );
    let (s, synced) = as_user(
        &app,
        &admin,
        Method::POST,
        &format!("/api/business-managers/{bm_b}/sync"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{synced}");
    assert_eq!(synced["data"]["bm"]["health_status"], "banido");
    assert_eq!(synced["data"]["bm"]["wabas"][0]["standing"], "banned");
    let (_, alerts) = as_user(&app, &admin, Method::GET, "/api/alertas", None).await;
    let alerts = alerts["data"].as_array().unwrap().clone();
    assert_eq!(alerts[0]["severidade"], "critica");
    assert!(
        alerts
            .iter()
            .any(|x| x["tipo"] == "bm" && x["id"] == bm_b && x["codigo"] == "banido"),
        "{alerts:?}"
    );
    assert!(alerts
        .iter()
        .any(|x| x["tipo"] == "waba" && x["codigo"] == "waba_banida"));
    let banned_number = synced["data"]["bm"]["wabas"][0]["numeros"][0]["id"].clone();
    assert!(
        alerts.iter().any(|x| x["tipo"] == "numero"
            && x["id"] == banned_number
            && x["severidade"] == "critica"),
        "{alerts:?}"
    );
    // The account API's channel refuses business-initiated sends now.
    let (_, health) = app
        .get(&format!("/api/v1/channels/{banned_number}/health"))
        .await;
    assert_eq!(health["data"]["code"], "waba_banida", "{health}");
    let (_, d) = as_user(&app, &admin, Method::GET, "/api/dashboard", None).await;
    assert_eq!(d["data"]["bms"]["por_saude"]["banido"], 1);
    assert_eq!(d["data"]["wabas"]["por_situacao"]["banned"], 1);
    assert!(d["data"]["alertas"]["critica"].as_u64().unwrap() >= 3);
    // Filters of the BM list.
    let (_, f) = as_user(
        &app,
        &admin,
        Method::GET,
        "/api/business-managers?status=banido",
        None,
    )
    .await;
    assert_eq!(f["data"].as_array().unwrap().len(), 1);
    assert_eq!(f["data"][0]["id"], bm_b);
    let (_, f) = as_user(
        &app,
        &admin,
        Method::GET,
        "/api/business-managers?qualidade=YELLOW",
        None,
    )
    .await;
    assert_eq!(
        f["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![bm_a]
    );
    let (_, f) = as_user(
        &app,
        &admin,
        Method::GET,
        "/api/business-managers?busca=cliente%20b",
        None,
    )
    .await;
    assert_eq!(f["data"].as_array().unwrap().len(), 1);
    // A BM with a running campaign is not removed.
    let (_, bmv) = as_user(
        &app,
        &admin,
        Method::GET,
        &format!("/api/business-managers/{bm_a}"),
        None,
    )
    .await;
    let green = bmv["data"]["wabas"][0]["numeros"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["qualidade"] == "GREEN")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let (_, lib) = app.get("/api/v1/templates").await;
    let hello = lib["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["provider_name"] == "hello_world")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let (s, camp) = app
        .post(
            "/api/v1/campaigns",
            json!({"name": "Em curso", "template_id": hello, "channels": [{"channel_id": green}]}),
        )
        .await;
    assert_eq!(s, 201, "{camp}");
    let camp = camp["data"]["id"].as_i64().unwrap();
    let recipients: Vec<Value> = (0..40)
        .map(|i| json!({"phone": format!("55119700{i:05}")}))
        .collect();
    let (s, r) = app
        .post(
            &format!("/api/v1/campaigns/{camp}/recipients"),
            json!({"recipients": recipients}),
        )
        .await;
    assert_eq!(s, 201, "{r}");
    app.hold_answers(Some(3000)).await;
    let (s, r) = app
        .post(&format!("/api/v1/campaigns/{camp}/start"), json!({}))
        .await;
    assert!(s.is_success(), "{r}");
    let (s, b) = as_user(
        &app,
        &admin,
        Method::DELETE,
        &format!("/api/business-managers/{bm_a}"),
        None,
    )
    .await;
    assert_eq!(
        (s, b["code"].as_str()),
        (422, Some("campanha_em_andamento")),
        "{b}"
    );
    app.hold_answers(None).await;
    // Without one it is removed, and its numbers stay in the account.
    let (s, _) = as_user(
        &app,
        &admin,
        Method::DELETE,
        &format!("/api/business-managers/{bm_b}"),
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        app.get(&format!("/api/v1/channels/{banned_number}/health"))
            .await
            .0,
        200
    );
}

async fn photo_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = user(&app, "admin@acme.com.br", "Admin", None, vec![]).await;
    let (n, _) = business(&app, false);
    let bm = bm_synced(&app, &admin, &n, "BM Foto", "Cliente Foto").await;
    let (_, bmv) = as_user(
        &app,
        &admin,
        Method::GET,
        &format!("/api/business-managers/{bm}"),
        None,
    )
    .await;
    let id = bmv["data"]["wabas"][0]["numeros"][0]["id"]
        .as_i64()
        .unwrap();
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend((0..2048u32).map(|i| (i % 251) as u8));
    let send = |bytes: Vec<u8>, name: &'static str| {
        let form = reqwest::multipart::Form::new().part(
            name,
            reqwest::multipart::Part::bytes(bytes).file_name("foto.png"),
        );
        app.http
            .post(app.url(&format!("/api/phone-numbers/{id}/foto")))
            .bearer_auth(&admin)
            .multipart(form)
            .send()
    };
    let r = send(png.clone(), "foto").await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let url = body["data"]["foto_url"]
        .as_str()
        .unwrap_or_else(|| panic!("photo URL from the provider: {body}"))
        .to_string();
    let served = app
        .http
        .get(&url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        served.as_ref(),
        png.as_slice(),
        "the provider has our bytes"
    );
    // Not an image, no field, too large.
    let r = send(b"GIF89a not allowed".to_vec(), "foto").await.unwrap();
    assert_eq!(r.status(), 422);
    let r = send(png.clone(), "outro").await.unwrap();
    assert_eq!(r.status(), 422);
    let mut huge = b"\x89PNG\r\n\x1a\n".to_vec();
    huge.resize(6 * 1024 * 1024, 0);
    // Its own connection: the server answers before reading the rest and closes it.
    let form = reqwest::multipart::Form::new().part(
        "foto",
        reqwest::multipart::Part::bytes(huge).file_name("foto.png"),
    );
    let r = reqwest::Client::new()
        .post(app.url(&format!("/api/phone-numbers/{id}/foto")))
        .bearer_auth(&admin)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert!([413, 422].contains(&r.status().as_u16()), "{}", r.status());
    // A sync reads the picture back from the profile.
    let (_, synced) = as_user(
        &app,
        &admin,
        Method::POST,
        &format!("/api/business-managers/{bm}/sync"),
        None,
    )
    .await;
    assert_eq!(synced["data"]["sync"]["photos"], 1);
    assert_eq!(
        synced["data"]["bm"]["wabas"][0]["numeros"][0]["foto_url"],
        url.as_str()
    );
}

async fn tasks_clients_content_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = user(&app, "admin@acme.com.br", "Admin", None, vec![]).await;
    // Clients: CNPJ check digits, unique names, the guarded webhook URL, link counts.
    for (body, code) in [
        (
            json!({"nome": "Ruim", "documento": "11.222.333/0001-82"}),
            "cnpj_invalido",
        ),
        (
            json!({"nome": "Ruim", "documento": "00000000000000"}),
            "cnpj_invalido",
        ),
        (
            json!({"nome": "Ruim", "webhook_url": "http://10.0.0.7/hook"}),
            "private_url",
        ),
        (json!({"nome": ""}), "nome_obrigatorio"),
    ] {
        let (s, b) = as_user(&app, &admin, Method::POST, "/api/clientes", Some(body)).await;
        assert_eq!((s, b["code"].as_str()), (422, Some(code)), "{b}");
    }
    let (s, c) = as_user(&app, &admin, Method::POST, "/api/clientes", Some(json!({"nome": "Padaria", "documento": "11.222.333/0001-81", "webhook_url": "http://127.0.0.1:9/hook"}))).await;
    assert_eq!(s, 201, "{c}");
    assert_eq!(c["data"]["documento"], "11222333000181");
    let client = c["data"]["id"].as_i64().unwrap();
    let (s, b) = as_user(
        &app,
        &admin,
        Method::POST,
        "/api/clientes",
        Some(json!({"nome": "Padaria"})),
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("cliente_existente")));
    let (n, _) = business(&app, false);
    let (s, bm) = as_user(&app, &admin, Method::POST, "/api/business-managers", Some(json!({"nome": "BM P", "cliente_id": client, "id_provider": n.business_id, "access_token": n.access_token}))).await;
    assert_eq!(s, 201, "{bm}");
    let bm_id = bm["data"]["id"].as_i64().unwrap();
    let (_, list) = as_user(&app, &admin, Method::GET, "/api/clientes", None).await;
    assert_eq!(list["data"][0]["vinculos"]["bms"], 1);

    // Tasks move between columns; each column is renumbered from 0.
    let mut ids = Vec::new();
    for t in ["Um", "Dois", "Tres"] {
        let (s, b) = as_user(
            &app,
            &admin,
            Method::POST,
            "/api/tasks",
            Some(json!({"titulo": t, "bm_id": bm_id})),
        )
        .await;
        assert_eq!(s, 201, "{b}");
        assert_eq!(b["data"]["status"], "aberto");
        ids.push(b["data"]["id"].as_i64().unwrap());
    }
    let (s, moved) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/tasks/{}", ids[2]),
        Some(
            json!({"titulo": "Tres", "status": "em_andamento", "posicao": 0, "prioridade": "alta"}),
        ),
    )
    .await;
    assert_eq!(s, 200, "{moved}");
    assert_eq!(
        (
            moved["data"]["status"].as_str(),
            moved["data"]["posicao"].as_i64()
        ),
        (Some("em_andamento"), Some(0))
    );
    let (_, first) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/tasks/{}", ids[1]),
        Some(json!({"titulo": "Dois", "posicao": 0})),
    )
    .await;
    assert_eq!(first["data"]["posicao"], 0);
    let (_, board) = as_user(&app, &admin, Method::GET, "/api/tasks", None).await;
    let column: Vec<(i64, i64)> = board["data"]["colunas"]["aberto"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_i64().unwrap(), t["posicao"].as_i64().unwrap()))
        .collect();
    assert_eq!(column, vec![(ids[1], 0), (ids[0], 1)]);
    assert_eq!(
        board["data"]["colunas"]["em_andamento"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    for (body, code) in [
        (json!({"titulo": "X", "status": "feito"}), "status_invalido"),
        (
            json!({"titulo": "X", "prioridade": "maxima"}),
            "prioridade_invalida",
        ),
        (json!({"titulo": "X", "bm_id": 999}), "vinculo_invalido"),
        (json!({"titulo": " "}), "titulo_obrigatorio"),
    ] {
        let (s, b) = as_user(&app, &admin, Method::POST, "/api/tasks", Some(body)).await;
        assert_eq!((s, b["code"].as_str()), (422, Some(code)), "{b}");
    }
    assert_eq!(
        as_user(
            &app,
            &admin,
            Method::DELETE,
            &format!("/api/tasks/{}", ids[0]),
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        as_user(
            &app,
            &admin,
            Method::GET,
            &format!("/api/tasks/{}", ids[0]),
            None
        )
        .await
        .0,
        404
    );

    // Templates: the account's library, edited before it is submitted.
    let (s, t) = as_user(
        &app,
        &admin,
        Method::POST,
        "/api/templates",
        Some(json!({"name": "Boas vindas", "body": "Olá, tudo bem?", "category": "utility"})),
    )
    .await;
    assert_eq!(s, 201, "{t}");
    let tid = t["data"]["id"].as_i64().unwrap();
    let (s, t) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/templates/{tid}"),
        Some(json!({"body": "Olá! Como podemos ajudar?"})),
    )
    .await;
    assert_eq!(
        (s, t["data"]["body"].as_str()),
        (200, Some("Olá! Como podemos ajudar?"))
    );
    let (s, b) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/templates/{tid}"),
        Some(json!({"status": "APPROVED"})),
    )
    .await;
    assert_eq!((s, b["code"].as_str()), (422, Some("campo_do_provedor")));
    let (_, lib) = app.get("/api/v1/templates").await;
    assert!(lib["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["id"] == tid && x["body"] == "Olá! Como podemos ajudar?"));
    let (s, _) = as_user(
        &app,
        &admin,
        Method::GET,
        &format!("/api/templates/{tid}"),
        None,
    )
    .await;
    assert_eq!(s, 200);

    // Wiki: the account's pages, read by slug.
    let (s, p) = as_user(
        &app,
        &admin,
        Method::POST,
        "/api/wiki",
        Some(json!({"title": "Como trocar a foto", "content": "Use **Inventário**."})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let slug = p["data"]["slug"].as_str().unwrap().to_string();
    let pid = p["data"]["id"].as_i64().unwrap();
    let (s, page) = as_user(
        &app,
        &admin,
        Method::GET,
        &format!("/api/wiki/{slug}"),
        None,
    )
    .await;
    assert_eq!(
        (s, page["data"]["content"].as_str()),
        (200, Some("Use **Inventário**."))
    );
    let (_, v1) = app.get(&format!("/api/v1/wiki/{pid}")).await;
    assert_eq!(v1["data"]["slug"], slug.as_str());
    let (s, _) = as_user(
        &app,
        &admin,
        Method::PUT,
        &format!("/api/wiki/{pid}"),
        Some(json!({"content": "Atualizado"})),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        as_user(
            &app,
            &admin,
            Method::DELETE,
            &format!("/api/wiki/{pid}"),
            None
        )
        .await
        .0,
        200
    );
    eventually(2, "page gone", || async {
        (app.get(&format!("/api/v1/wiki/{pid}")).await.0 == 404).then_some(())
    })
    .await;
}
