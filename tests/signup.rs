//! Embedded signup through the real server against the simulator (spec "Authentication" 6–8,
//! decision D-072): the code exchanged with the app id and secret, the WABA subscribed to the
//! app, the number registered and stored with its token sealed; the popup's configuration;
//! refusals.

mod common;

use common::{Backend, TestApp};
use provider::sim::{CreateNumber, SIM_APP_ID};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn signup_code(app: &TestApp, waba_id: &str) -> String {
    let r: Value = app
        .http
        .post(format!("http://{}/_sim/embedded-signup", app.sim_addr))
        .json(&json!({"waba_id": waba_id}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["data"]["code"].as_str().unwrap().to_string()
}

async fn subscribed(app: &TestApp, n: &provider::sim::CreatedNumber) -> Vec<Value> {
    let r: Value = app
        .http
        .get(format!(
            "http://{}/v25.0/{}/subscribed_apps",
            app.sim_addr, n.waba_id
        ))
        .bearer_auth(&n.access_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["data"].as_array().cloned().unwrap_or_default()
}

async fn embedded_signup_connects_subscribes_and_registers(backend: Backend) {
    let app = TestApp::spawn_with(backend, |s| {
        s.provider_app_id = Some(SIM_APP_ID.into());
        s.provider_config_id = Some("cfg-123".into());
    })
    .await;
    let (status, config) = app.get("/api/v1/signup/config").await;
    assert_eq!(status, StatusCode::OK, "{config}");
    assert_eq!(
        config["data"],
        json!({"app_id": SIM_APP_ID, "config_id": "cfg-123", "available": true})
    );

    // A customer's number, not registered yet, in a WABA of a business of this app.
    let n = app
        .sim
        .create_number(CreateNumber {
            verified_name: Some("Cliente Novo".into()),
            app_secret: Some(app.app_secret_fallback.clone()),
            registered: Some(false),
            ..CreateNumber::default()
        })
        .unwrap();
    assert!(subscribed(&app, &n).await.is_empty());
    let code = signup_code(&app, &n.waba_id).await;
    let (status, body) = app
        .post(
            "/api/v1/channels/embedded-signup",
            json!({"code": code, "waba_id": n.waba_id, "phone_number_id": n.phone_number_id, "pin": "123456"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["registration"]["ok"], true, "{body}");
    assert_eq!(body["verification"]["subscribed"], true, "{body}");
    assert_eq!(body["data"]["name"], "Cliente Novo");
    let channel = body["data"]["id"].as_i64().unwrap();
    let apps = subscribed(&app, &n).await;
    assert_eq!(apps.len(), 1);
    assert_eq!(apps[0]["whatsapp_business_api_data"]["id"], SIM_APP_ID);
    // The token is the business token, stored sealed: the number sends.
    let (status, sent) = app
        .post(
            "/api/v1/messages",
            json!({"channel_id": channel, "to": "5511933334444", "template": {"name": "hello_world", "language": "en_US"}}),
        )
        .await;
    assert!(status.is_success(), "{sent}");
    let (status, read) = app
        .get(&format!("/api/v1/channels/{channel}/official"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !read.to_string().contains(&n.access_token),
        "no token in answers"
    );

    // A code is single use; a forged one is refused; the same number twice is a conflict.
    let (status, err) = app
        .post(
            "/api/v1/channels/embedded-signup",
            json!({"code": code, "waba_id": n.waba_id, "phone_number_id": n.phone_number_id}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_code")),
        "{err}"
    );
    let code = signup_code(&app, &n.waba_id).await;
    let (status, err) = app
        .post(
            "/api/v1/channels/embedded-signup",
            json!({"code": code, "waba_id": n.waba_id, "phone_number_id": n.phone_number_id}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("conflict")),
        "{err}"
    );
    // A WABA the code's token does not reach is not claimed.
    let other = app.sim.create_number(CreateNumber::default()).unwrap();
    let mine = app
        .sim
        .create_number(CreateNumber {
            app_secret: Some(app.app_secret_fallback.clone()),
            ..CreateNumber::default()
        })
        .unwrap();
    let code = signup_code(&app, &mine.waba_id).await;
    let (status, err) = app
        .post(
            "/api/v1/channels/embedded-signup",
            json!({"code": code, "waba_id": other.waba_id, "phone_number_id": other.phone_number_id}),
        )
        .await;
    assert!(status.is_client_error(), "{err}");
    for (body, field) in [
        (
            json!({"code": "", "waba_id": "1", "phone_number_id": "2"}),
            "code",
        ),
        (
            json!({"code": "x", "waba_id": "abc", "phone_number_id": "2"}),
            "waba_id",
        ),
        (
            json!({"code": "x", "waba_id": "1", "phone_number_id": "2", "pin": "12"}),
            "pin",
        ),
    ] {
        let (status, err) = app.post("/api/v1/channels/embedded-signup", body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
        assert_eq!(err["field"], field, "{err}");
    }
    // A read token may read the configuration but not sign up.
    let (_, t) = app
        .post(
            "/api/v1/tokens",
            json!({"name": "leitura", "level": "read"}),
        )
        .await;
    let read_token = t["data"]["token"].as_str().unwrap();
    let (status, _) = app.get_as(read_token, "/api/v1/signup/config").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .post_as(
            read_token,
            "/api/v1/channels/embedded-signup",
            json!({"code": "x", "waba_id": "1", "phone_number_id": "2"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

async fn without_an_app_id_signup_is_unavailable(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, config) = app.get("/api/v1/signup/config").await;
    assert_eq!(config["data"]["available"], false, "{config}");
    let (status, err) = app
        .post(
            "/api/v1/channels/embedded-signup",
            json!({"code": "AQxyz", "waba_id": "1", "phone_number_id": "2"}),
        )
        .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("cadastro_indisponivel")
        ),
        "{err}"
    );
}

on_both_backends! {
    signup => embedded_signup_connects_subscribes_and_registers;
    unavailable => without_an_app_id_signup_is_unavailable;
}
