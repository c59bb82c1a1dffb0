//! A gateway process killed with SIGKILL in the middle of a campaign and started again resumes
//! it: every recipient receives the campaign exactly once, as the simulator's sent log counts
//! (issue 6, D-032). The gateway runs as a real child process (the `disparo` binary), so the
//! kill loses everything in memory: in-flight provider calls, unsent outcomes, the batched
//! writer's queue.

mod common;

use common::gateway::{assert_each_once, campaign_over_two_numbers, sent_log, Api, Gateway};
use common::{eventually, Backend, TestDb};
use serde_json::json;
use std::time::Duration;

async fn killed_mid_campaign_it_resumes_and_everyone_gets_it_once(backend: Backend) {
    let db = TestDb::create(&backend).await;
    let mut gw = Gateway::on_free_port(vec![
        ("DATABASE_URL", db.url.clone()),
        ("DISPARO_MASTER_KEY", storage::Cipher::generate_key_base64()),
        ("DISPARO_IN_DOUBT_GRACE_MS", "10000".into()),
        ("DISPARO_WEBHOOK_RETRY_MS", "100,200".into()),
    ]);
    // The provider keeps retrying webhooks the dead gateway did not take; the in-doubt grace
    // (10 s from the restart) is longer than the gap between two retries (≤ 5 s), so every
    // status reaches the restarted gateway within it. Retries go on past a slow restart (a
    // loaded CI machine, PostgreSQL): a status dropped before the gateway is back would make
    // its send look unsent after the grace.
    let sim = common::gateway::patient_simulator(format!("http://{}/webhooks/messaging", gw.addr));
    let sim_addr = sim.clone().spawn("127.0.0.1:0").await.unwrap();
    gw.env
        .push(("PROVIDER_BASE_URL", format!("http://{sim_addr}")));
    gw.start().await;
    let api = Api::new(&gw.addr, &gw.token());
    const N: usize = 3000;
    let (id, _) = campaign_over_two_numbers(&api, &sim, N).await;
    // A little provider latency keeps many sends in flight when the kill comes.
    api.http
        .put(format!("http://{sim_addr}/_sim/faults"))
        .json(&json!({"latency_ms": {"p50": 5, "p99": 15}}))
        .send()
        .await
        .unwrap();
    api.call(
        reqwest::Method::POST,
        &format!("/api/v1/campaigns/{id}/start"),
        None,
    )
    .await;
    eventually(60, "a third sent", || async {
        (sent_log(sim_addr).await["total"].as_u64()? >= (N / 3) as u64).then_some(())
    })
    .await;
    gw.kill();
    let at_kill = sent_log(sim_addr).await["total"].as_u64().unwrap();
    assert!(at_kill < N as u64, "killed mid-campaign ({at_kill} of {N})");
    tokio::time::sleep(Duration::from_millis(300)).await;
    gw.start().await;

    let done = eventually(90, "campaign completed after the restart", || async {
        let (_, c) = api
            .call(
                reqwest::Method::GET,
                &format!("/api/v1/campaigns/{id}"),
                None,
            )
            .await;
        (c["data"]["state"] == "completed").then_some(c["data"].clone())
    })
    .await;
    assert_each_once(&sent_log(sim_addr).await, N);
    assert_eq!(done["stats"]["sent"], N, "{done}");
    assert_eq!(done["stats"]["failed"], 0);
    gw.kill();
}

on_both_backends! {
    kill_restart => killed_mid_campaign_it_resumes_and_everyone_gets_it_once;
}
