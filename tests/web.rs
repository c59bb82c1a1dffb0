//! The web panel's HTTP contract (issue 23), through the real server: the login sets an
//! HttpOnly, SameSite=Lax session cookie; a write from another site is refused (CSRF) and
//! changes nothing; a revoked session goes back to the login page (htmx: `HX-Redirect`);
//! pages carry a CSP and are never framed; the vendored assets are served; another account's
//! records stay out of reach; the export is the API's CSV. The browser run is
//! `tests/browser.rs`.

mod common;

use common::{Backend, TestApp, PANEL_PASSWORD};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::json;

on_both_backends! {
    cookie_session_and_csrf => cookie_session_and_csrf_scenario;
    tenant_and_roles => tenant_and_roles_scenario;
}

/// A client that shows redirects instead of following them.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `POST /login` as a browser on this origin; the session cookie (`disparo_sessao=ses_…`).
async fn web_login(app: &TestApp, email: &str) -> String {
    let r = browser()
        .post(app.url("/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("email", email), ("password", PANEL_PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("disparo_sessao=ses_"), "{cookie}");
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(flag), "{flag} missing: {cookie}");
    }
    // The test gateway's public URL is http: no Secure flag, or the browser would drop it.
    assert!(!cookie.contains("Secure"), "{cookie}");
    cookie.split(';').next().unwrap().to_string()
}

fn with(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

async fn open_tasks(app: &TestApp, admin: &str) -> usize {
    let (_, b) = app.call(Method::GET, Some(admin), "/api/tasks", None).await;
    b["data"]["tarefas"].as_array().unwrap().len()
}

async fn cookie_session_and_csrf_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@web.test", "Admin", None, vec![])
        .await;
    let web = browser();

    // No session: the login page.
    let r = web.get(app.url("/")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/login");
    let r = web.get(app.url("/login")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    let page = r.text().await.unwrap();
    assert!(
        page.contains("<label for=\"email\">E-mail</label>"),
        "{page}"
    );

    // A wrong password: the API's message, 401, no cookie.
    let r = web
        .post(app.url("/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("email", "admin@web.test"), ("password", "errada-123456")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get("set-cookie").is_none());
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("E-mail ou senha incorretos."));

    let cookie = web_login(&app, "admin@web.test").await;
    let r = web
        .get(app.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(
        page.contains("Indicadores") && page.contains("admin@web.test"),
        "{page}"
    );

    // Writes from another site are refused and change nothing; from this origin they work.
    let before = open_tasks(&app, &admin).await;
    for headers in [
        with(&[("sec-fetch-site", "cross-site")]),
        with(&[("sec-fetch-site", "same-site")]),
        with(&[("origin", "http://evil.example")]),
        with(&[("origin", "null")]),
        with(&[]),
    ] {
        let r = web
            .post(app.url("/tarefas"))
            .header("cookie", &cookie)
            .headers(headers.clone())
            .form(&[("titulo", "Forjada"), ("prioridade", "alta")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{headers:?}");
        assert!(r.text().await.unwrap().contains("outra origem"));
    }
    // A login forced from another site is refused too (login CSRF).
    let r = web
        .post(app.url("/login"))
        .header("sec-fetch-site", "cross-site")
        .form(&[("email", "admin@web.test"), ("password", PANEL_PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(open_tasks(&app, &admin).await, before);
    let origin = app.url("").trim_end_matches('/').to_string();
    let r = web
        .post(app.url("/tarefas"))
        .header("cookie", &cookie)
        .header("origin", &origin)
        .form(&[("titulo", "Legítima"), ("prioridade", "alta")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(open_tasks(&app, &admin).await, before + 1);
    // An htmx write answers the board fragment.
    let r = web
        .post(app.url("/tarefas"))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .header("hx-request", "true")
        .form(&[("titulo", "Pelo htmx"), ("prioridade", "baixa")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let board = r.text().await.unwrap();
    assert!(
        board.starts_with("<div id=\"quadro\"") && board.contains("Pelo htmx"),
        "{board}"
    );
    // A refused htmx write is an alert aimed at #avisos, in the API's words.
    let r = web
        .post(app.url("/tarefas"))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .header("hx-request", "true")
        .form(&[("titulo", ""), ("prioridade", "alta")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.headers()["hx-retarget"], "#avisos");
    assert!(r.text().await.unwrap().contains("role=\"alert\""));

    // A form without its fields, a path that is not an id: clear pages, not plain text.
    let r = web
        .post(app.url("/tarefas"))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .form(&[("prioridade", "alta")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.text().await.unwrap().contains("Formulário incompleto"));
    let r = web
        .get(app.url("/campanhas/abc"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(r.text().await.unwrap().contains("role=\"alert\""));
    // Without a cookie a page sends to the login page, which says nothing of an expiry.
    let r = web.get(app.url("/inventario")).send().await.unwrap();
    assert_eq!(r.headers()["location"], "/login");

    // The vendored assets.
    for (file, ct) in [
        ("htmx.min.js", "text/javascript"),
        ("htmx-ext-sse.min.js", "text/javascript"),
        ("pico.min.css", "text/css"),
        ("app.js", "text/javascript"),
    ] {
        let r = web
            .get(app.url(&format!("/static/{file}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{file}");
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with(ct));
    }
    assert_eq!(
        web.get(app.url("/static/../Cargo.toml"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    // Revoked elsewhere: back to the login page, the cookie forgotten.
    let token = cookie.trim_start_matches("disparo_sessao=").to_string();
    let (s, _) = app
        .call(Method::POST, Some(&token), "/api/logout", None)
        .await;
    assert_eq!(s, 200);
    // A live stream of the ended session stops (204) and leaves the cookie to the page…
    let r = web
        .get(app.url("/eventos/dashboard"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert!(r.headers().get("set-cookie").is_none());
    // …whose next navigation says the session expired.
    let r = web
        .get(app.url("/inventario"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/login?expirada=1");
    assert!(r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    let r = web
        .post(app.url("/tarefas/1/mover"))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .header("hx-request", "true")
        .form(&[("status", "resolvido")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["hx-redirect"], "/login?expirada=1");

    // Logout revokes the session it holds.
    let cookie = web_login(&app, "admin@web.test").await;
    let r = web
        .post(app.url("/logout"))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["location"], "/login");
    let token = cookie.trim_start_matches("disparo_sessao=");
    let (s, _) = app.call(Method::GET, Some(token), "/api/me", None).await;
    assert_eq!(s, 401);
}

async fn tenant_and_roles_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@web.test", "Admin", None, vec![])
        .await;
    let (c1, _) = app.fast_channel().await;
    let tpl = app
        .approved_template(
            json!({"name": "Aviso web", "body": "Olá {{1}}.", "var_map": {"1": {"field": "nome"}}}),
            &[c1],
        )
        .await;
    let web = browser();
    let cookie = web_login(&app, "admin@web.test").await;
    // A campaign uploaded through the page: the same multipart form the API takes.
    let form = reqwest::multipart::Form::new()
        .text("nome", "Pela página")
        .text("template_id", tpl.to_string())
        .text("numeros", c1.to_string())
        .text("variaveis", "nome")
        .part(
            "arquivo",
            reqwest::multipart::Part::bytes(b"telefone;nome\n5511977700001;Ana\n".to_vec())
                .file_name("c.csv"),
        );
    let r = web
        .post(app.url("/campanhas"))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let id: i64 = location.trim_start_matches("/campanhas/").parse().unwrap();
    let (_, c) = app
        .call(
            Method::GET,
            Some(&admin),
            &format!("/api/campaigns/{id}"),
            None,
        )
        .await;
    assert_eq!(c["data"]["nome"], "Pela página", "{c}");
    assert_eq!(c["data"]["numeros"], json!([c1]));
    // The export is the API's CSV.
    let r = web
        .get(app.url(&format!("/campanhas/{id}/export")))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains("attachment"));

    // Another account's Admin: the campaign and the export are not found, the inventory empty.
    let other = app.runtime.store().ensure_account("outra").await.unwrap();
    services::panel::create_user(
        app.runtime.store(),
        other.id,
        services::panel::UserInput {
            email: "intruso@outra.test".into(),
            name: "Intruso".into(),
            role: "Admin".into(),
            status: None,
            password: PANEL_PASSWORD.into(),
            client_id: None,
            bm_ids: vec![],
        },
    )
    .await
    .unwrap();
    let intruder = web_login(&app, "intruso@outra.test").await;
    for path in [
        format!("/campanhas/{id}"),
        format!("/campanhas/{id}/export"),
        format!("/campanhas/{id}/eventos"),
    ] {
        let r = web
            .get(app.url(&path))
            .header("cookie", &intruder)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
    let r = web
        .post(app.url(&format!("/campanhas/{id}/cancelar")))
        .header("cookie", &intruder)
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let page = web
        .get(app.url("/inventario"))
        .header("cookie", &intruder)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Nenhuma BM ainda."), "{page}");

    // An Operador may not flip the dispatch switch (Admin only): the API's refusal, nothing
    // changed.
    app.panel_user("op@web.test", "Operador", None, vec![])
        .await;
    let op = web_login(&app, "op@web.test").await;
    let r = web
        .post(app.url("/configuracoes/disparo"))
        .header("cookie", &op)
        .header("sec-fetch-site", "same-origin")
        .form(&[("habilitado", "false")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (_, d) = app
        .call(Method::GET, Some(&admin), "/api/settings/dispatch", None)
        .await;
    assert_eq!(d["data"]["habilitado"], true);
    // The Admin disables the Operador from the users page: its session stops at once.
    let (_, users) = app
        .call(Method::GET, Some(&admin), "/api/users", None)
        .await;
    let op_id = users["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["email"] == "op@web.test")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let r = web
        .post(app.url(&format!("/usuarios/{op_id}")))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .header("hx-request", "true")
        .form(&[("role", "Operador"), ("status", "disabled")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("Usuário alterado."));
    let r = web
        .get(app.url("/campanhas"))
        .header("cookie", &op)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["location"], "/login?expirada=1");
    // The last Admin cannot demote itself: the API's refusal, shown as an alert.
    let (_, me) = app.call(Method::GET, Some(&admin), "/api/me", None).await;
    let r = web
        .post(app.url(&format!("/usuarios/{}", me["data"]["id"])))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "same-origin")
        .header("hx-request", "true")
        .form(&[("role", "Operador"), ("status", "active")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.headers()["hx-retarget"], "#avisos");
    // The campaign's own state did not move either.
    let (_, c) = app
        .call(
            Method::GET,
            Some(&admin),
            &format!("/api/campaigns/{id}"),
            None,
        )
        .await;
    assert_ne!(c["data"]["status"], "cancelada");
}
