//! Issue 46, "Trust, second round", through the real server against the simulator: a forged
//! provider event reaches no client and changes nothing whichever ids it names; a BM-scoped
//! Operador neither sees nor changes another BM's client and reads none of its log lines.

mod common;

use common::{eventually, Backend, Receiver, TestApp};
use provider::sim::CreateNumber;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Duration;

on_both_backends! {
    forged_events => forged_events_scenario;
    bm_scope => bm_scope_scenario;
    sessions_and_wiki => sessions_and_wiki_scenario;
}

/// Item 5: unknown methods and paths do not grow `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invented_methods_leave_metrics_the_same_size() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let series = |text: &str| {
        text.lines()
            .filter(|l| {
                l.starts_with("disparo_http_request")
                    && (l.contains("route=\"/health\"") || l.contains("route=\"unmatched\""))
            })
            .count()
    };
    let send = |method: String, path: String| {
        let req = app.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            app.url(&path),
        );
        async move { req.send().await.unwrap().status() }
    };
    // One of each first, so that the `other` and `unmatched` series exist.
    send("FOO0".into(), "/health".into()).await;
    send("BAR0".into(), "/nada/0".into()).await;
    let before = app.metrics().await;
    for i in 1..=300 {
        send(format!("FOO{i}"), "/health".into()).await;
        send(format!("BAR{i}"), format!("/nada/{i}")).await;
    }
    let after = app.metrics().await;
    assert_eq!(series(&before), series(&after), "{after}");
    assert!(after.contains("method=\"other\""), "{after}");
    assert!(!after.contains("FOO17"));
}

/// An inbound text of `pnid` in an entry of `waba`, as the provider writes it.
fn inbound_body(waba: &str, pnid: &str, wamid: &str, text: &str) -> String {
    json!({"object": "whatsapp_business_account", "entry": [{"id": waba, "time": 1_700_000_000, "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "5511999990000", "phone_number_id": pnid},
        "contacts": [{"profile": {"name": "Banco"}, "wa_id": "5511988887777"}],
        "messages": [{"from": "5511988887777", "id": wamid, "timestamp": "1700000000", "type": "text", "text": {"body": text}}]
    }}]}]})
    .to_string()
}

/// Posts `body` to the panel's receiver, signed with `secret` (unsigned with `None`).
async fn post_panel(app: &TestApp, body: &str, secret: Option<&str>) -> u16 {
    let mut req = app
        .http
        .post(app.url("/api/webhooks/provider"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(s) = secret {
        req = req.header(
            "x-hub-signature-256",
            engine::webhook::signature_header(s, body.as_bytes()),
        );
    }
    req.send().await.unwrap().status().as_u16()
}

/// The inbound messages the account API shows for a number.
async fn inbound_count(app: &TestApp, channel: i64) -> usize {
    let (s, b) = app
        .get(&format!(
            "/api/v1/messages?direction=in&channel_id={channel}"
        ))
        .await;
    assert_eq!(s, 200, "{b}");
    b["data"].as_array().unwrap().len()
}

async fn event_lines(app: &TestApp, token: &str) -> Vec<Value> {
    let (s, b) = app
        .call(
            Method::GET,
            Some(token),
            "/api/webhook-logs?tipo=evento&limit=200",
            None,
        )
        .await;
    assert_eq!(s, 200, "{b}");
    b["data"].as_array().unwrap().clone()
}

async fn forged_events_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let (ra, rc) = (Receiver::start().await, Receiver::start().await);
    let client_a = app.panel_client(&admin, "Cliente A", &ra.url()).await.0;
    let client_c = app.panel_client(&admin, "Cliente C", &rc.url()).await.0;
    // n1: a BM with its app secret, serving A. n3: a BM without one, serving C.
    let n1 = app.sim.create_number(CreateNumber::default()).unwrap();
    app.panel_bm(
        &admin,
        &n1,
        json!({"nome": "BM Um", "cliente_id": client_a}),
    )
    .await;
    let n3 = app.sim.create_number(CreateNumber::default()).unwrap();
    app.panel_bm(
        &admin,
        &n3,
        json!({"nome": "BM Três", "cliente_id": client_c, "app_secret": null}),
    )
    .await;
    let (c1, c3) = (
        app.panel_number_id(&admin, &n1.phone_number_id).await,
        app.panel_number_id(&admin, &n3.phone_number_id).await,
    );
    let boleto = "Pague este boleto hoje: 34191.79001 01043.510047 91020.150008 1 96610000012345";

    // The attack of issue 46: unsigned, an unknown WABA, a client's number. And its variants:
    // signed by the right BM but for a WABA that is not the number's; signed by another
    // secret; signed by the deployment's app secret while the BM has its own.
    let attempts: Vec<(String, Option<&str>)> = vec![
        (
            inbound_body("999999999999", &n1.phone_number_id, "wamid.f1", boleto),
            None,
        ),
        (
            inbound_body("999999999999", &n1.phone_number_id, "wamid.f2", boleto),
            Some(n1.app_secret.as_str()),
        ),
        (
            inbound_body(&n1.waba_id, &n1.phone_number_id, "wamid.f3", boleto),
            Some("outro-segredo"),
        ),
        (
            inbound_body(&n1.waba_id, &n1.phone_number_id, "wamid.f4", boleto),
            Some(app.app_secret_fallback.as_str()),
        ),
        (
            inbound_body(&n1.waba_id, &n1.phone_number_id, "wamid.f5", boleto),
            None,
        ),
        (
            inbound_body(&n3.waba_id, &n3.phone_number_id, "wamid.f6", boleto),
            None,
        ),
        (
            inbound_body(&n3.waba_id, &n3.phone_number_id, "wamid.f7", boleto),
            Some(n1.app_secret.as_str()),
        ),
    ];
    for (i, (body, secret)) in attempts.iter().enumerate() {
        assert_eq!(
            post_panel(&app, body, *secret).await,
            401,
            "attempt {i} refused"
        );
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(ra.events().is_empty(), "A received no forged event");
    assert!(rc.events().is_empty(), "C received no forged event");
    assert_eq!(inbound_count(&app, c1).await, 0, "nothing applied to n1");
    assert_eq!(inbound_count(&app, c3).await, 0, "nothing applied to n3");
    let lines = event_lines(&app, &admin).await;
    assert!(!lines.is_empty());
    for l in &lines {
        assert_eq!(l["assinatura"], "invalida", "{l}");
        assert_eq!(l["aplicado"], false);
        assert_eq!(l["encaminhamento"], "nao_encaminhado");
        assert!(
            l["corpo"].as_str().unwrap_or_default().len() <= 512,
            "an excerpt only"
        );
    }

    // The real thing: n1 signed by its BM's secret, n3 (no BM secret) by the deployment's.
    let good1 = inbound_body(&n1.waba_id, &n1.phone_number_id, "wamid.ok1", "oi do n1");
    assert_eq!(post_panel(&app, &good1, Some(&n1.app_secret)).await, 200);
    let good3 = inbound_body(&n3.waba_id, &n3.phone_number_id, "wamid.ok3", "oi do n3");
    assert_eq!(
        post_panel(&app, &good3, Some(&app.app_secret_fallback)).await,
        200
    );
    let got_a = eventually(10, "A received the signed event", || async {
        (!ra.events().is_empty()).then(|| ra.events())
    })
    .await;
    let got_c = eventually(10, "C received the signed event", || async {
        (!rc.events().is_empty()).then(|| rc.events())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ra.events().len(), 1, "only the signed event reached A");
    assert_eq!(rc.events().len(), 1, "only the signed event reached C");
    assert_eq!(got_a[0].json()["client_id"], client_a);
    assert_eq!(got_c[0].json()["client_id"], client_c);
    assert!(!String::from_utf8_lossy(&got_a[0].body).contains("boleto"));
    eventually(10, "n1's message applied", || async {
        (inbound_count(&app, c1).await == 1).then_some(())
    })
    .await;
    let valid: Vec<Value> = event_lines(&app, &admin)
        .await
        .into_iter()
        .filter(|l| l["assinatura"] == "valida")
        .collect();
    assert_eq!(valid.len(), 2, "{valid:?}");
}

async fn bm_scope_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let (ra, rb) = (Receiver::start().await, Receiver::start().await);
    let client_a = app.panel_client(&admin, "Cliente A", &ra.url()).await.0;
    let client_b = app.panel_client(&admin, "Cliente B", &rb.url()).await.0;
    let n1 = app.sim.create_number(CreateNumber::default()).unwrap();
    let bm1 = app
        .panel_bm(
            &admin,
            &n1,
            json!({"nome": "BM Um", "cliente_id": client_a}),
        )
        .await;
    let n2 = app.sim.create_number(CreateNumber::default()).unwrap();
    app.panel_bm(
        &admin,
        &n2,
        json!({"nome": "BM Dois", "cliente_id": client_b}),
    )
    .await;
    let c1 = app.panel_number_id(&admin, &n1.phone_number_id).await;
    // Events of both BMs through the panel's receiver, forwarded to both clients.
    app.sim
        .set_webhook_url(Some(app.url("/api/webhooks/provider")))
        .await;
    app.inbound(&n1.phone_number_id, "5511933330000", "para A")
        .await;
    app.inbound(&n2.phone_number_id, "5511944440000", "segredo de B")
        .await;
    eventually(10, "both forwarded", || async {
        (!ra.events().is_empty() && !rb.events().is_empty()).then_some(())
    })
    .await;
    let (_, op) = app
        .panel_user("op@acme.com.br", "Operador", None, vec![bm1])
        .await;

    // Clients: only A is in reach.
    let (s, list) = app
        .call(Method::GET, Some(&op), "/api/clientes", None)
        .await;
    assert_eq!(s, 200);
    let ids: Vec<i64> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![client_a]);
    let evil = json!({"nome": "Cliente B", "webhook_url": "https://atacante.example.com/hook"});
    for (method, path, body) in [
        (Method::GET, format!("/api/clientes/{client_b}"), None),
        (
            Method::PUT,
            format!("/api/clientes/{client_b}"),
            Some(evil.clone()),
        ),
        (
            Method::POST,
            format!("/api/clientes/{client_b}/webhook-secret"),
            None,
        ),
        (Method::DELETE, format!("/api/clientes/{client_b}"), None),
    ] {
        let (s, b) = app.call(method.clone(), Some(&op), &path, body).await;
        assert_eq!(s, 404, "{method} {path}: {b}");
    }
    let (s, b) = app
        .call(
            Method::POST,
            Some(&op),
            "/api/clientes",
            Some(json!({"nome": "Novo"})),
        )
        .await;
    assert_eq!(s, 403, "{b}");
    // Linking one's own number to B does not open B either.
    let (s, b) = app
        .call(
            Method::PUT,
            Some(&op),
            &format!("/api/phone-numbers/{c1}"),
            Some(json!({"cliente_id": client_b})),
        )
        .await;
    assert_eq!(
        (s.as_u16(), b["code"].as_str()),
        (422, Some("cliente_invalido")),
        "{b}"
    );
    let (_, b_after) = app
        .call(
            Method::GET,
            Some(&admin),
            &format!("/api/clientes/{client_b}"),
            None,
        )
        .await;
    assert_eq!(
        b_after["data"]["webhook_url"],
        rb.url().as_str(),
        "B untouched"
    );
    // A stays the Operador's to change.
    let (s, b) = app
        .call(
            Method::PUT,
            Some(&op),
            &format!("/api/clientes/{client_a}"),
            Some(json!({"nome": "Cliente A Ltda", "webhook_url": ra.url()})),
        )
        .await;
    assert_eq!(s, 200, "{b}");

    // The log: the Operador sees n1's lines and none of n2's; the Admin sees both.
    let mine = event_lines(&app, &op).await;
    assert!(!mine.is_empty());
    for l in &mine {
        let named = l["numeros"].to_string();
        assert!(named.contains(&n1.phone_number_id), "{l}");
        assert!(!named.contains(&n2.phone_number_id), "{l}");
        assert!(!l["corpo"]
            .as_str()
            .unwrap_or_default()
            .contains("segredo de B"));
    }
    let all = event_lines(&app, &admin).await;
    let of_b = all
        .iter()
        .find(|l| l["numeros"].to_string().contains(&n2.phone_number_id))
        .expect("the Admin sees B's line");
    let (s, _) = app
        .call(
            Method::POST,
            Some(&op),
            &format!("/api/webhook-logs/{}/reforward", of_b["id"]),
            None,
        )
        .await;
    assert_eq!(s, 404, "another BM's line cannot be reforwarded");
    let (s, b) = app
        .call(
            Method::POST,
            Some(&op),
            &format!("/api/webhook-logs/{}/reforward", mine[0]["id"]),
            None,
        )
        .await;
    assert_eq!(s, 200, "{b}");
}

/// Items 9 and 12: a new password ends the user's other sessions (the one that changed it
/// stays); a Client user reads only public wiki pages.
async fn sessions_and_wiki_scenario(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let (op_id, op1) = app
        .panel_user("op@acme.com.br", "Operador", None, vec![])
        .await;
    let op2 = app
        .panel_login("op@acme.com.br", common::PANEL_PASSWORD)
        .await;
    let admin2 = app
        .panel_login("admin@acme.com.br", common::PANEL_PASSWORD)
        .await;
    let me = |t: String| {
        let app = &app;
        async move { app.call(Method::GET, Some(&t), "/api/me", None).await.0 }
    };
    assert_eq!(me(op1.clone()).await, 200);
    let (s, b) = app
        .call(
            Method::PUT,
            Some(&admin),
            &format!("/api/users/{op_id}"),
            Some(json!({"password": "uma senha nova e longa 42"})),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        me(op1).await,
        401,
        "a session opened before the change ends"
    );
    assert_eq!(me(op2).await, 401);
    app.panel_login("op@acme.com.br", "uma senha nova e longa 42")
        .await;
    // The Admin changes its own password: the session that did it stays, the other ends.
    let (admin_id, _) = {
        let (_, m) = app.call(Method::GET, Some(&admin), "/api/me", None).await;
        (m["data"]["id"].as_i64().unwrap(), ())
    };
    let (s, _) = app
        .call(
            Method::PUT,
            Some(&admin),
            &format!("/api/users/{admin_id}"),
            Some(json!({"password": "outra senha nova e longa 43"})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(me(admin.clone()).await, 200);
    assert_eq!(me(admin2).await, 401);

    // The wiki: a private and a public page; the Client user reads the public one only.
    let mut slugs = Vec::new();
    for (title, visibility) in [
        ("Procedimentos internos", "private"),
        ("Perguntas frequentes", "public"),
    ] {
        let (s, b) = app
            .call(
                Method::POST,
                Some(&admin),
                "/api/wiki",
                Some(json!({"title": title, "content": "# conteúdo", "visibility": visibility})),
            )
            .await;
        assert_eq!(s, 201, "{b}");
        slugs.push(b["data"]["slug"].as_str().unwrap().to_string());
    }
    let rc = Receiver::start().await;
    let c = app.panel_client(&admin, "Cliente W", &rc.url()).await.0;
    let (_, cli) = app
        .panel_user("cli@acme.com.br", "Client", Some(c), vec![])
        .await;
    let (s, list) = app.call(Method::GET, Some(&cli), "/api/wiki", None).await;
    assert_eq!(s, 200);
    let titles: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, vec!["Perguntas frequentes"]);
    let (s, private) = app
        .call(
            Method::GET,
            Some(&cli),
            "/api/wiki?visibility=private",
            None,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(private["data"].as_array().unwrap().len(), 1, "{private}");
    assert_eq!(private["data"][0]["visibility"], "public");
    assert_eq!(
        app.call(
            Method::GET,
            Some(&cli),
            &format!("/api/wiki/{}", slugs[0]),
            None
        )
        .await
        .0,
        404
    );
    assert_eq!(
        app.call(
            Method::GET,
            Some(&cli),
            &format!("/api/wiki/{}", slugs[1]),
            None
        )
        .await
        .0,
        200
    );
    let (_, staff) = app.call(Method::GET, Some(&admin), "/api/wiki", None).await;
    assert_eq!(staff["data"].as_array().unwrap().len(), 2);
}

/// Item 4: one request limit for the whole server, a cap on one address's connections, and a
/// body that stops arriving fails long before the request timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_hold_little_and_the_limit_is_the_servers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::spawn_with(Backend::Sqlite, |s| {
        s.max_concurrent_requests = 2;
        s.body_idle_timeout_ms = 400;
        s.max_connections_per_address = 6;
    })
    .await;
    let addr = app.addr;
    // Two uploads that stop after a few bytes, on two routes.
    let mut slow = Vec::new();
    for path in ["/api/login", "/webhooks/messaging"] {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!("POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"email\"");
        s.write_all(head.as_bytes()).await.unwrap();
        slow.push(s);
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    // Both slots are taken: a third route is shed too (one limit, not one per route).
    let (s, b) = app.get("/api/v1/channels").await;
    assert_eq!(
        (s.as_u16(), b["code"].as_str()),
        (503, Some("sobrecarregado")),
        "{b}"
    );
    // The stalled bodies fail within the idle timeout and give their slots back.
    let started = std::time::Instant::now();
    for mut s in slow {
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer)).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 4"), "a client error: {text}");
    }
    assert!(started.elapsed() < Duration::from_secs(4));
    let (s, _) = app.get("/api/v1/channels").await;
    assert_eq!(s, 200);

    // Connections from one address past the cap are closed at once; the reqwest client
    // keeps its own pool, so the raw connections are what count here.
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut closed = 0;
    for s in &mut held {
        let mut buf = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await
        {
            closed += 1;
        }
    }
    assert!(
        closed >= 2,
        "connections past the cap are closed ({closed})"
    );
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(app.get("/api/v1/channels").await.0, 200);
}

/// Item 13: every answer says `nosniff`; the documentation and public wiki pages carry a
/// content security policy and refuse framing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_outside_the_panel_send_security_headers() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (s, page) = app
        .post(
            "/api/v1/wiki",
            json!({"title": "Ajuda pública", "content": "texto", "visibility": "public"}),
        )
        .await;
    assert_eq!(s, 201, "{page}");
    let public = page["data"]["public_url"].as_str().unwrap();
    let public_path = &public[public.find("/w/").unwrap()..];
    for path in ["/docs", "/docs/painel", "/docs/remetente", public_path] {
        let r = app.http.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let h = r.headers();
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
            "{path}: {csp}"
        );
        let body = r.text().await.unwrap();
        assert!(!body.contains("<script>"), "{path}: no inline script");
    }
    for path in ["/health", "/api/v1/openapi.json", "/nada", "/login"] {
        let r = app.http.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
    }
}

/// Issue 49 item 6: every answer carries `X-Request-Id` — the caller's when it is a plain
/// identifier (echoed), else a new 32-hex id — on the account API, the panel API, pages,
/// errors and the provider receivers alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_a_request_id() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let id_of = |r: &reqwest::Response| {
        r.headers()
            .get("x-request-id")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let made = |id: &str| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit());
    let get = |path: &str, id: Option<&str>| {
        let mut req = app.http.get(app.url(path)).bearer_auth(&app.token);
        if let Some(id) = id {
            req = req.header("x-request-id", id);
        }
        req.send()
    };
    let (a, b) = (
        get("/api/v1/channels", None).await.unwrap(),
        get("/api/v1/channels", None).await.unwrap(),
    );
    assert_eq!(a.status(), 200);
    assert!(made(&id_of(&a)), "{}", id_of(&a));
    assert_ne!(id_of(&a), id_of(&b), "one id per request");
    let theirs = "0f8e2c1a-7d4b-4e5a-9c3f-2b1d6e8a9f00:retry.1";
    let r = get("/api/v1/channels", Some(theirs)).await.unwrap();
    assert_eq!(id_of(&r), theirs, "the caller's id is echoed");
    let long = "a".repeat(129);
    for bad in ["com espaço", "<script>", long.as_str()] {
        let r = get("/api/v1/channels", Some(bad)).await.unwrap();
        assert!(made(&id_of(&r)), "{bad:?} replaced: {}", id_of(&r));
    }
    for path in ["/nada", "/health", "/login", "/api/campaigns", "/docs"] {
        let r = get(path, None).await.unwrap();
        assert!(made(&id_of(&r)), "{path}: {}", id_of(&r));
    }
    let r = app
        .http
        .post(app.url("/webhooks/messaging"))
        .header("x-request-id", "prov-1")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(id_of(&r), "prov-1");
}

/// Item 3: what nobody signed is kept as a short excerpt, and an address refused too often
/// is not heard for the rest of the minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_bodies_are_kept_short_and_their_senders_slowed() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let n = app.sim.create_number(CreateNumber::default()).unwrap();
    app.panel_bm(&admin, &n, json!({"nome": "BM", "cliente": "Cliente"}))
        .await;
    let big = inbound_body(
        &n.waba_id,
        &n.phone_number_id,
        "wamid.big",
        &"x".repeat(1_900_000),
    );
    // 60 refusals, refilled at one a second: the calls until the first 429 are 60 and what
    // the seconds they took refilled.
    let started = std::time::Instant::now();
    let mut refused = 0;
    loop {
        let sent = app
            .http
            .post(app.url("/api/webhooks/provider"))
            .header("content-type", "application/json")
            .body(big.clone())
            .send()
            .await;
        // A refusal that does not read the body closes the connection under a client still
        // writing 1.9 MB, which may then see a broken pipe instead of the 429: asked again
        // with a small body, which always reads the answer.
        let s = match sent {
            Ok(r) => r.status().as_u16(),
            Err(_) => post_panel(&app, "{}", None).await,
        };
        if s == 429 {
            break;
        }
        assert_eq!(s, 401);
        refused += 1;
        assert!(refused < 200, "never limited");
    }
    let took = started.elapsed().as_secs() as usize;
    assert!((60..=62 + took).contains(&refused), "{refused} in {took} s");
    // Every receiver hears the address no more (a refusal refilled meanwhile is spent by
    // the first call at most). A small body: its answer is read even when the body is not.
    let mut r = None;
    for _ in 0..2 {
        let answer = app
            .http
            .post(app.url("/webhooks/messaging"))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        if answer.status() == 429 {
            r = Some(answer);
            break;
        }
    }
    let r = r.expect("the address is over its refusals on every receiver");
    assert!(r.headers().contains_key("retry-after"));
    assert_eq!(r.headers()["connection"], "close", "its body was not read");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "muitas_recusas");
    let lines = event_lines(&app, &admin).await;
    assert_eq!(lines.len(), refused, "what got 429 was not even read");
    assert!(lines
        .iter()
        .all(|l| l["corpo"].as_str().unwrap_or_default().len() <= 512));
}

/// Item 10: wrong passwords from one address do not lock the user out of another; the
/// forwarded address counts only from a configured proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_passwords_from_one_address_do_not_lock_the_user_out() {
    let login = |app: &TestApp, from: &'static str, password: &'static str| {
        let req = app
            .http
            .post(app.url("/api/login"))
            .header("x-forwarded-for", from)
            .json(&json!({"email": "admin@acme.com.br", "password": password}));
        async move { req.send().await.unwrap().status().as_u16() }
    };
    let app = TestApp::spawn_with(Backend::Sqlite, |s| {
        s.trusted_proxies = vec![engine::net::Subnet::parse("127.0.0.1").unwrap()];
    })
    .await;
    app.panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let mut wrong = Vec::new();
    for _ in 0..12 {
        wrong.push(login(&app, "203.0.113.7", "errada-errada").await);
    }
    assert_eq!(&wrong[..10], &[401; 10]);
    assert_eq!(wrong[11], 429, "the attacker's address backs off");
    assert_eq!(
        login(&app, "203.0.113.7", common::PANEL_PASSWORD).await,
        429,
        "even with the right password from there"
    );
    assert_eq!(
        login(&app, "198.51.100.9", common::PANEL_PASSWORD).await,
        200,
        "the real user, from its own address, gets in"
    );

    // Without a trusted proxy the header is the client's own word: ignored.
    let app = TestApp::spawn(Backend::Sqlite).await;
    app.panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let froms = [
        "192.0.2.1",
        "192.0.2.2",
        "192.0.2.3",
        "192.0.2.4",
        "192.0.2.5",
        "192.0.2.6",
    ];
    let mut last = 0;
    for i in 0..12 {
        last = login(&app, froms[i % froms.len()], "errada-errada").await;
    }
    assert_eq!(
        last, 429,
        "rotating X-Forwarded-For does not escape the limit"
    );
}

/// Item 11: an e-mail is unique within an account, so another tenant learns nothing from
/// using it; each user logs in with its own password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_in_use_in_another_account_tells_nothing() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let store = app.runtime.store();
    let other = store.ensure_account("outra").await.unwrap();
    let other_admin = services::panel::create_user(
        store,
        other.id,
        services::panel::UserInput {
            email: "chefe@outra.com.br".into(),
            name: "Chefe".into(),
            role: "Admin".into(),
            status: None,
            password: "senha da outra conta 1".into(),
            client_id: None,
            bm_ids: vec![],
        },
    )
    .await
    .unwrap();
    let other_session = app
        .panel_login("chefe@outra.com.br", "senha da outra conta 1")
        .await;
    // The other tenant creates a user with our Admin's e-mail: accepted like any new one.
    let (s, b) = app
        .call(
            Method::POST,
            Some(&other_session),
            "/api/users",
            Some(json!({"email": "admin@acme.com.br", "name": "Homônimo", "role": "Operador", "password": "senha do homonimo 22"})),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    // Within one account the e-mail stays unique.
    let (s, b) = app
        .call(
            Method::POST,
            Some(&other_session),
            "/api/users",
            Some(json!({"email": "ADMIN@acme.com.br", "name": "Outro", "role": "Operador", "password": "senha do homonimo 22"})),
        )
        .await;
    assert_eq!(
        (s.as_u16(), b["code"].as_str()),
        (422, Some("email_em_uso")),
        "{b}"
    );
    // Each logs in to its own account.
    let ours = app
        .panel_login("admin@acme.com.br", common::PANEL_PASSWORD)
        .await;
    let theirs = app
        .panel_login("admin@acme.com.br", "senha do homonimo 22")
        .await;
    let (_, me1) = app.call(Method::GET, Some(&ours), "/api/me", None).await;
    let (_, me2) = app.call(Method::GET, Some(&theirs), "/api/me", None).await;
    assert_ne!(me1["data"]["id"], me2["data"]["id"]);
    assert_eq!(me2["data"]["name"], "Homônimo");
    let _ = (admin, other_admin);
}

/// Items 6 and 8: imports are capped in columns, cell and name length; nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_imports_are_refused_before_anything_is_stored() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, admin) = app
        .panel_user("admin@acme.com.br", "Admin", None, vec![])
        .await;
    let import = |csv: String| {
        let form = reqwest::multipart::Form::new()
            .text("nome", "Grande")
            .text("template_id", "1")
            .text("numeros", "1")
            .part(
                "arquivo",
                reqwest::multipart::Part::bytes(csv.into_bytes()).file_name("contatos.csv"),
            );
        let req = app
            .http
            .post(app.url("/api/campaigns/import"))
            .bearer_auth(&admin)
            .multipart(form);
        async move {
            let r = req.send().await.unwrap();
            let s = r.status().as_u16();
            (s, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    // 640 columns × 200 rows (the amplification of issue 46, smaller).
    let header: Vec<String> = std::iter::once("telefone".to_string())
        .chain((1..640).map(|i| format!("coluna_{i}")))
        .collect();
    let mut wide = header.join(";");
    for r in 0..200 {
        wide.push('\n');
        wide.push_str(&format!("55119{r:08}"));
        wide.push_str(&";x".repeat(639));
    }
    let (s, b) = import(wide).await;
    assert_eq!(
        (s, b["code"].as_str()),
        (422, Some("colunas_demais")),
        "{b}"
    );
    // A 20,000-character name, and a 5,000-character cell.
    let long_name = format!("telefone;nome\n5511999990001;{}\n", "N".repeat(20_000));
    let (s, b) = import(long_name).await;
    assert_eq!((s, b["code"].as_str()), (422, Some("nome_longo")), "{b}");
    let long_cell = format!(
        "telefone;nome;obs\n5511999990001;Ana;{}\n",
        "o".repeat(5_000)
    );
    let (s, b) = import(long_cell).await;
    assert_eq!((s, b["code"].as_str()), (422, Some("celula_longa")), "{b}");
    assert!(b["message"].as_str().unwrap().contains("Linha 2"), "{b}");
    // The JSON path checks the same.
    let (s, b) = app
        .call(
            Method::POST,
            Some(&admin),
            "/api/campaigns",
            Some(
                json!({"nome": "Grande", "template_id": 1, "numeros": [1], "contatos": [
                    {"numero": "5511999990001", "nome": "Ana"},
                    {"numero": "5511999990002", "nome": "N".repeat(1_000_000)}
                ]}),
            ),
        )
        .await;
    assert_eq!(
        (s.as_u16(), b["code"].as_str()),
        (422, Some("nome_longo")),
        "{b}"
    );
    assert!(
        b["message"].as_str().unwrap().contains("contatos[1]"),
        "{b}"
    );
    let (_, list) = app
        .call(Method::GET, Some(&admin), "/api/campaigns", None)
        .await;
    assert_eq!(list["data"].as_array().unwrap().len(), 0, "nothing stored");
}

/// Item 14: an older signed quality update that arrives late does not override a newer one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_older_quality_update_does_not_override_a_newer_one() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (channel, n) = app.connect_channel().await;
    let post = |rating: &'static str, time: i64| {
        let body = json!({"object": "whatsapp_business_account", "entry": [{"id": n.waba_id, "time": time, "changes": [{"field": "phone_number_quality_update", "value": {
            "display_phone_number": n.display_phone_number, "event": "UPGRADE", "current_limit": "TIER_1K", "quality_rating": rating
        }}]}]})
        .to_string();
        let sig = engine::webhook::signature_header(&n.app_secret, body.as_bytes());
        let app = &app;
        async move { app.provider_post(&body, &sig).await }
    };
    let quality = || async {
        let (_, ch) = app.get("/api/v1/channels").await;
        ch["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == channel)
            .unwrap()["quality"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(post("RED", 1_800_000_200).await, 200);
    eventually(10, "RED applied", || async {
        (quality().await == "RED").then_some(())
    })
    .await;
    // Sent earlier, delivered later: ignored.
    assert_eq!(post("GREEN", 1_800_000_100).await, 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        quality().await,
        "RED",
        "the late, older GREEN does not reopen sends"
    );
    let (s, b) = app
        .post(
            "/api/v1/messages",
            json!({"to": "5511955550000", "channel_id": channel, "template": {"name": "hello_world", "language": "en_US"}}),
        )
        .await;
    assert_ne!(s, 201, "still RED: {b}");
    // A newer one is applied.
    assert_eq!(post("GREEN", 1_800_000_300).await, 200);
    eventually(10, "GREEN applied", || async {
        (quality().await == "GREEN").then_some(())
    })
    .await;
}

/// Item 14: a read-level token does not see a number's verify token; a channel takes at most
/// 20 subscriptions; the account API's default rate is 6,000 requests a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_tokens_see_no_verify_token_and_subscriptions_are_capped() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    assert_eq!(disparo::Settings::defaults().rate_limit_per_min, 6_000);
    let (channel, _) = app.connect_channel().await;
    let reader = app
        .runtime
        .store()
        .create_token(app.account_id, "leitura", "read")
        .await
        .unwrap()
        .value
        .expose()
        .to_string();
    let path = format!("/api/v1/channels/{channel}/official");
    let (s, as_reader) = app.get_as(&reader, &path).await;
    assert_eq!(s, 200, "{as_reader}");
    assert!(
        as_reader["data"]["webhook"]["verify_token"].is_null(),
        "{as_reader}"
    );
    assert!(as_reader["data"]["webhook"]["url"].is_string());
    let (_, as_admin) = app.get(&path).await;
    assert!(as_admin["data"]["webhook"]["verify_token"].is_string());

    let receiver = Receiver::start().await;
    for i in 0..20 {
        let (s, b) = app
            .post(
                &format!("/api/v1/channels/{channel}/webhooks"),
                json!({"url": format!("{}/{i}", receiver.url()), "events": ["message.received"]}),
            )
            .await;
        assert_eq!(s, 201, "{i}: {b}");
    }
    let (s, b) = app
        .post(
            &format!("/api/v1/channels/{channel}/webhooks"),
            json!({"url": receiver.url(), "events": ["message.received"]}),
        )
        .await;
    assert_eq!(
        (s.as_u16(), b["code"].as_str()),
        (422, Some("assinaturas_demais")),
        "{b}"
    );
}

/// Item 14: the same order for a WABA's standing and a template's status on a number: a late,
/// older `account_update` or `message_template_status_update` changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_older_standing_and_template_events_change_nothing() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (channel, n) = app.connect_channel().await;
    let template = app
        .approved_template(json!({"name": "Aviso ordem", "body": "Olá."}), &[channel])
        .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let post = |field: &'static str, value: Value, time: i64| {
        let body = json!({"object": "whatsapp_business_account", "entry": [{"id": n.waba_id, "time": time, "changes": [{"field": field, "value": value}]}]})
            .to_string();
        let sig = engine::webhook::signature_header(&n.app_secret, body.as_bytes());
        let app = &app;
        async move { app.provider_post(&body, &sig).await }
    };
    let health = || async {
        let (_, h) = app.get(&format!("/api/v1/channels/{channel}/health")).await;
        h["data"]["code"].as_str().unwrap_or_default().to_string()
    };
    let ban = |state: &'static str| json!({"event": "DISABLED_UPDATE", "ban_info": {"waba_ban_state": state, "waba_ban_date": "2026-11-28"}});
    assert_eq!(post("account_update", ban("DISABLE"), now + 200).await, 200);
    eventually(10, "banned", || async {
        (health().await == "waba_banida").then_some(())
    })
    .await;
    assert_eq!(
        post("account_update", ban("REINSTATE"), now + 100).await,
        200
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        health().await,
        "waba_banida",
        "a late, older reinstatement is ignored"
    );
    assert_eq!(
        post("account_update", ban("REINSTATE"), now + 300).await,
        200
    );
    eventually(10, "reinstated", || async {
        (health().await != "waba_banida").then_some(())
    })
    .await;

    let library = || async {
        let (_, list) = app.get("/api/v1/templates").await;
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == template)
            .cloned()
            .unwrap()
    };
    let provider_name = library().await["provider_name"]
        .as_str()
        .unwrap()
        .to_string();
    let status = || async {
        library().await["channels"][0]["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let event = |e: &'static str| json!({"event": e, "message_template_id": 999_000_111, "message_template_name": provider_name, "message_template_language": "pt_BR", "reason": "NONE"});
    assert_eq!(
        post("message_template_status_update", event("PAUSED"), now + 200).await,
        200
    );
    eventually(10, "paused", || async {
        (status().await == "paused").then_some(())
    })
    .await;
    assert_eq!(
        post(
            "message_template_status_update",
            event("APPROVED"),
            now + 100
        )
        .await,
        200
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        status().await,
        "paused",
        "a late, older approval is ignored"
    );
    assert_eq!(
        post(
            "message_template_status_update",
            event("UNPAUSED"),
            now + 300
        )
        .await,
        200
    );
    eventually(10, "approved again", || async {
        (status().await == "approved").then_some(())
    })
    .await;
}

/// Item 4: behind a trusted reverse proxy every client shares its address: the proxy's
/// connections are not capped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_is_not_capped_per_address() {
    use tokio::io::AsyncReadExt;
    let app = TestApp::spawn_with(Backend::Sqlite, |s| {
        s.max_connections_per_address = 2;
        s.trusted_proxies = vec![engine::net::Subnet::parse("127.0.0.1").unwrap()];
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..6 {
        held.push(tokio::net::TcpStream::connect(app.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for s in &mut held {
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(100), s.read(&mut buf)).await;
        assert!(read.is_err(), "still open, nothing to read: {read:?}");
    }
    assert_eq!(app.get("/api/v1/channels").await.0, 200);
}

/// The log lines written into: every test of this binary logs here once the first test that
/// asks for it installed the subscriber (only the request-id test reads it).
fn captured_logs() -> std::sync::Arc<std::sync::Mutex<Vec<u8>>> {
    static LOGS: std::sync::OnceLock<std::sync::Arc<std::sync::Mutex<Vec<u8>>>> =
        std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Into(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Into {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = buffer.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_ansi(false)
            .with_writer(move || Into(sink.clone()))
            .try_init();
        buffer
    })
    .clone()
}

/// Issue 49 item 6: the request id is on the log lines the number's actor writes for that
/// request, not only on the HTTP layer's: a template to a RED number is refused by the
/// number's rules, and the actor's line saying so carries the caller's `X-Request-Id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_id_is_on_the_number_actors_lines() {
    let logs = captured_logs();
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (channel_id, number) = app.connect_channel().await;
    let r = app
        .http
        .post(format!(
            "http://{}/_sim/numbers/{}/quality",
            app.sim_addr, number.phone_number_id
        ))
        .json(&json!({"quality": "RED"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    eventually(10, "RED", || async {
        let (_, h) = app
            .get(&format!("/api/v1/channels/{channel_id}/health"))
            .await;
        (h["data"]["code"] == "qualidade_red").then_some(())
    })
    .await;
    let r = app
        .http
        .post(app.url("/api/v1/messages"))
        .bearer_auth(&app.token)
        .header("x-request-id", "pedido-log-49")
        .json(&json!({"to": "5511911112222", "channel_id": channel_id, "template": {"name": "hello_world", "language": "en_US"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let text = String::from_utf8_lossy(&logs.lock().unwrap()).to_string();
    let line = text
        .lines()
        .find(|l| l.contains("send not admitted") && l.contains("pedido-log-49"));
    assert!(
        line.is_some_and(|l| l.contains("send{channel_id=")),
        "no actor line with the request id:\n{}",
        text.lines()
            .filter(|l| l.contains("send not admitted") || l.contains("pedido-log-49"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
