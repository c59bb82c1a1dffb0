//! The wiki: slugs, excerpts, partial updates, categories, bot knowledge, public pages.

mod common;

use common::{Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{json, Value};

fn is_stamp(v: &Value) -> bool {
    let s = v.as_str().unwrap_or_default();
    s.len() == 19 && s.as_bytes()[4] == b'-' && s.as_bytes()[10] == b' ' && s.as_bytes()[13] == b':'
}

async fn put(app: &TestApp, path: &str, body: Value) -> (StatusCode, Value) {
    let r = app
        .http
        .put(app.url(path))
        .bearer_auth(&app.token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let s = r.status();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn delete(app: &TestApp, path: &str) -> StatusCode {
    app.http
        .delete(app.url(path))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap()
        .status()
}

async fn the_wiki_keeps_pages_and_serves_public_ones_as_html(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let content =
        "# Regras\n\nUse **sempre** o cupom `NATAL10`.\n\n<script>alert('x')</script>\n\n- item";
    let (status, page) = app
        .post(
            "/api/v1/wiki",
            json!({"title": "Promoção de Natal", "content": content}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{page}");
    let p = &page["data"];
    assert_eq!(
        (
            p["slug"].as_str(),
            p["visibility"].as_str(),
            p["bot_knowledge"].as_bool()
        ),
        (Some("promocao-de-natal"), Some("private"), Some(false))
    );
    assert_eq!(p["public_url"], Value::Null);
    assert!(
        p["excerpt"]
            .as_str()
            .unwrap()
            .starts_with("Regras Use sempre o cupom NATAL10."),
        "{p}"
    );
    assert!(
        is_stamp(&p["created_at"]) && is_stamp(&p["updated_at"]),
        "{p}"
    );
    assert_eq!(p["content"], content);
    let id = p["id"].as_i64().unwrap();
    let (_, again) = app
        .post("/api/v1/wiki", json!({"title": "Promoção de Natal!"}))
        .await;
    assert_eq!(again["data"]["slug"], "promocao-de-natal-2");

    // Private: not served.
    let r = app
        .http
        .get(app.url("/w/acme/promocao-de-natal"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // PUT changes only what is sent.
    let (status, updated) = put(
        &app,
        &format!("/api/v1/wiki/{id}"),
        json!({"visibility": "public"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(
        (
            updated["data"]["title"].as_str(),
            updated["data"]["content"].as_str()
        ),
        (Some("Promoção de Natal"), Some(content))
    );
    // Absolute, under the public URL (issue 17): a link an integrator can hand out.
    assert_eq!(
        updated["data"]["public_url"],
        app.url("/w/acme/promocao-de-natal")
    );
    let r = app
        .http
        .get(app.url("/w/acme/promocao-de-natal"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = r.text().await.unwrap();
    assert!(
        html.contains("<title>Promoção de Natal</title>")
            && html.contains("<strong>sempre</strong>")
            && html.contains("<li>item</li>"),
        "{html}"
    );
    assert!(!html.contains("<script>"), "sanitized");
    let r = app
        .http
        .get(app.url("/w/outra-conta/promocao-de-natal"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // Categories: create, conflict, rename, filter, remove (pages stay).
    let (status, cat) = app
        .post("/api/v1/wiki/categories", json!({"name": "Campanhas"}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let cat_id = cat["data"]["id"].as_i64().unwrap();
    let (status, _) = app
        .post("/api/v1/wiki/categories", json!({"name": "Campanhas"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, renamed) = put(
        &app,
        &format!("/api/v1/wiki/categories/{cat_id}"),
        json!({"name": "Promoções"}),
    )
    .await;
    assert_eq!(
        (status, renamed["data"]["name"].as_str()),
        (StatusCode::OK, Some("Promoções"))
    );
    let (_, bot) = app.post("/api/v1/wiki", json!({"title": "FAQ do bot", "content": "Horário: 9h–18h.", "category_id": cat_id, "bot_knowledge": true})).await;
    let (_, list) = app.get(&format!("/api/v1/wiki?category_id={cat_id}")).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    assert!(
        list["data"][0].get("content").is_none(),
        "the list has no content"
    );
    let (_, list) = app.get("/api/v1/wiki?bot_knowledge=true").await;
    assert_eq!(list["data"][0]["id"], bot["data"]["id"]);
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    let (_, cats) = app.get("/api/v1/wiki/categories").await;
    assert_eq!(cats["data"][0]["name"], "Promoções");
    assert_eq!(
        delete(&app, &format!("/api/v1/wiki/categories/{cat_id}")).await,
        StatusCode::OK
    );
    let (_, page) = app
        .get(&format!("/api/v1/wiki/{}", bot["data"]["id"]))
        .await;
    assert_eq!(page["data"]["category_id"], Value::Null);

    // Renaming changes the slug; validation; delete.
    let (_, renamed) = put(
        &app,
        &format!("/api/v1/wiki/{id}"),
        json!({"title": "Natal 2026", "category_id": null}),
    )
    .await;
    assert_eq!(renamed["data"]["slug"], "natal-2026");
    for (body, field) in [
        (json!({"content": "x"}), Value::Null),
        (json!({"title": " "}), json!("title")),
        (
            json!({"title": "x", "visibility": "secret"}),
            json!("visibility"),
        ),
        (
            json!({"title": "x", "category_id": 999}),
            json!("category_id"),
        ),
    ] {
        let (status, err) = app.post("/api/v1/wiki", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {err}");
        if !field.is_null() {
            assert_eq!(err["field"], field, "{err}");
        }
    }
    assert_eq!(
        delete(&app, &format!("/api/v1/wiki/{id}")).await,
        StatusCode::OK
    );
    let (status, _) = app.get(&format!("/api/v1/wiki/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let r = app
        .http
        .get(app.url("/w/acme/natal-2026"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

on_both_backends! {
    wiki => the_wiki_keeps_pages_and_serves_public_ones_as_html;
}
