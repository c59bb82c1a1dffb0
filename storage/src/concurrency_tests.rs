//! Two processes on one PostgreSQL database (issue 50, D-100): two stores with a session each
//! run claims, settlements, status batches, outbox leases and boots side by side, many rounds,
//! and nothing is claimed, sent, delivered or regressed twice. Skipped without
//! `DISPARO_TEST_POSTGRES_URL` (`.ci/run` sets it).

use crate::campaigns::{CampaignRecord, ClaimShare, SendResult, Settlement};
use crate::messages::StatusReport;
use crate::webhooks::{Attempt, AttemptOutcome, NewEvent};
use crate::Store;
use engine::message::ProviderStatus;
use engine::webhook::EventKind;
use sqlx::Row;
use std::collections::HashSet;

async fn campaign(store: &Store, account: i64, channel: i64, n: usize) -> CampaignRecord {
    crate::test_support::campaign_with_recipients_on(store, account, channel, n).await
}

/// Claims rounds of `per_round` until nothing is left, settling each claim as sent (wamid
/// `w<message id>`); returns the recipients claimed.
async fn claim_all(store: Store, account: i64, channel: i64, campaign: i64) -> Vec<i64> {
    let mut mine = Vec::new();
    loop {
        let share = ClaimShare {
            channel_id: channel,
            count: 37,
            template_name: "oferta".into(),
            lease: None,
        };
        let claimed = store
            .claim_recipients(account, campaign, false, &[share], "pt_BR")
            .await
            .unwrap()
            .remove(0);
        if claimed.is_empty() {
            return mine;
        }
        let settlements: Vec<Settlement> = claimed
            .iter()
            .map(|c| Settlement {
                channel_id: channel,
                recipient_id: c.recipient_id,
                message_id: c.message_id,
                result: SendResult::Sent {
                    provider_message_id: format!("w{}", c.message_id),
                },
            })
            .collect();
        store
            .settle_campaign_sends(&settlements, |_, _| Vec::new())
            .await
            .unwrap();
        mine.extend(claimed.iter().map(|c| c.recipient_id));
    }
}

async fn scalar(store: &Store, sql: &str, id: i64) -> i64 {
    sqlx::query(sql)
        .bind(id)
        .fetch_one(&store.pool)
        .await
        .unwrap()
        .try_get(0)
        .unwrap()
}

/// Two claimers on one campaign, each claiming and settling rounds as fast as it can: every
/// recipient is claimed by exactly one of them, has exactly one message, and ends `sent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_claimers_never_take_one_recipient() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: skipped");
        return;
    };
    const N: usize = 3000;
    let c = campaign(&a, account, channel, N).await;
    let (ra, rb) = tokio::join!(
        tokio::spawn(claim_all(a.clone(), account, channel, c.id)),
        tokio::spawn(claim_all(b.clone(), account, channel, c.id)),
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert!(
        !ra.is_empty() && !rb.is_empty(),
        "both claimed: {} / {}",
        ra.len(),
        rb.len()
    );
    let all: HashSet<i64> = ra.iter().chain(rb.iter()).copied().collect();
    assert_eq!(ra.len() + rb.len(), N, "no recipient claimed twice");
    assert_eq!(all.len(), N);
    let messages = scalar(
        &a,
        "SELECT COUNT(*) FROM messages WHERE campaign_id = $1",
        c.id,
    )
    .await;
    assert_eq!(messages, N as i64, "one message per recipient");
    let sent = scalar(
        &a,
        "SELECT COUNT(*) FROM campaign_recipients WHERE campaign_id = $1 AND state = 'sent'",
        c.id,
    )
    .await;
    assert_eq!(sent, N as i64);
    // A late outcome of a claim that is not the recipient's any more changes nothing: a
    // replan or failure naming another message leaves the sent recipient sent.
    let rid: i64 = sqlx::query(
        "SELECT id, message_id FROM campaign_recipients WHERE campaign_id = $1 ORDER BY id LIMIT 1",
    )
    .bind(c.id)
    .fetch_one(&a.pool)
    .await
    .unwrap()
    .try_get("id")
    .unwrap();
    for result in [
        SendResult::Replan,
        SendResult::InDoubt,
        SendResult::Failed {
            code: Some(131026),
            reason: "x".into(),
            skip: false,
        },
    ] {
        b.settle_campaign_sends(
            &[Settlement {
                channel_id: channel,
                recipient_id: rid,
                message_id: -1,
                result,
            }],
            |_, _| Vec::new(),
        )
        .await
        .unwrap();
    }
    let state: String = sqlx::query("SELECT state FROM campaign_recipients WHERE id = $1")
        .bind(rid)
        .fetch_one(&a.pool)
        .await
        .unwrap()
        .try_get("state")
        .unwrap();
    assert_eq!(
        state, "sent",
        "a stale settlement re-opened a sent recipient"
    );
    crate::test_support::drop_postgres(b, &name).await;
}

/// Status webhooks of one message applied by two processes at once, many rounds, in both
/// orders: a message ends `read`, never falls back to `delivered`, and each change is
/// reported once (a duplicate or stale status emits nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn statuses_move_forward_once_under_two_writers() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: skipped");
        return;
    };
    const N: usize = 400;
    let c = campaign(&a, account, channel, N).await;
    let ids = claim_all(a.clone(), account, channel, c.id).await;
    assert_eq!(ids.len(), N);
    let wamids: Vec<String> =
        sqlx::query("SELECT provider_message_id FROM messages WHERE campaign_id = $1 ORDER BY id")
            .bind(c.id)
            .fetch_all(&a.pool)
            .await
            .unwrap()
            .iter()
            .map(|r| r.try_get("provider_message_id").unwrap())
            .collect();
    let reports = |status: ProviderStatus, reverse: bool| -> Vec<StatusReport> {
        let mut v: Vec<StatusReport> = wamids
            .iter()
            .map(|w| StatusReport {
                provider_message_id: w.clone(),
                callback_message_id: None,
                status,
                at: 1_000,
                error: None,
            })
            .collect();
        if reverse {
            v.reverse();
        }
        v
    };
    let apply = |store: Store, reports: Vec<StatusReport>| async move {
        let mut reads = 0usize;
        let mut changes = 0usize;
        for chunk in reports.chunks(50) {
            let (outs, _) = loop {
                // A deadlock between the two writers refuses one batch; the provider sends
                // it again (here: at once).
                match store
                    .apply_status_batches(&[(channel, chunk)], |_, _| Vec::new())
                    .await
                {
                    Ok(r) => break r,
                    Err(e) => eprintln!("batch refused, sent again: {e}"),
                }
            };
            for o in outs {
                changes += o.applied.len();
                reads += o
                    .applied
                    .iter()
                    .filter(|s| s.message.status == engine::message::MessageStatus::Read)
                    .count();
            }
        }
        (reads, changes)
    };
    let (x, y, z) = tokio::join!(
        tokio::spawn(apply(a.clone(), reports(ProviderStatus::Delivered, false))),
        tokio::spawn(apply(b.clone(), reports(ProviderStatus::Read, true))),
        tokio::spawn(apply(b.clone(), reports(ProviderStatus::Read, false))),
    );
    let (x, y, z) = (x.unwrap(), y.unwrap(), z.unwrap());
    assert_eq!(y.0 + z.0, N, "each message became read exactly once");
    assert!(x.0 == 0, "a delivered report never made a message read");
    let not_read = scalar(
        &a,
        "SELECT COUNT(*) FROM messages WHERE campaign_id = $1 AND status <> 'read'",
        c.id,
    )
    .await;
    assert_eq!(not_read, 0, "a read message fell back");
    // Every change reported once: delivered (when it came first) and read.
    assert!(x.1 + y.1 + z.1 <= 2 * N, "a change was reported twice");
    crate::test_support::drop_postgres(b, &name).await;
}

/// The outbox: one process at a time holds a subscription's lease and only it reads and
/// attempts its deliveries; a graceful stop hands them over at once; an attempt recorded over
/// a delivery that is no longer pending changes nothing.
/// Status batches of 300 and of 1,100 reports (more than one lookup chunk) apply every report
/// once, found by provider id or, for a message the provider id is not yet on, by the
/// callback id (issue 54).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_batches_short_and_long_apply_every_report() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: skipped");
        return;
    };
    const N: usize = 1_100;
    let c = campaign(&a, account, channel, N).await;
    claim_all(a.clone(), account, channel, c.id).await;
    let rows = sqlx::query(
        "SELECT id, provider_message_id FROM messages WHERE campaign_id = $1 ORDER BY id",
    )
    .bind(c.id)
    .fetch_all(&a.pool)
    .await
    .unwrap();
    let messages: Vec<(i64, String)> = rows
        .iter()
        .map(|r| {
            (
                r.try_get("id").unwrap(),
                r.try_get("provider_message_id").unwrap(),
            )
        })
        .collect();
    // The first 50 as the provider reports a message it names by a new id: found by the
    // callback only (their stored provider id is removed first).
    let (first, rest) = messages.split_at(50);
    for (id, _) in first {
        sqlx::query("UPDATE messages SET provider_message_id = NULL WHERE id = $1")
            .bind(*id)
            .execute(&a.pool)
            .await
            .unwrap();
    }
    let report = |(id, w): &(i64, String), status, fresh: bool| StatusReport {
        provider_message_id: if fresh { format!("new.{w}") } else { w.clone() },
        callback_message_id: Some(*id),
        status,
        at: 1_000,
        error: None,
    };
    let apply = |reports: Vec<StatusReport>| {
        let a = a.clone();
        async move {
            let (outs, _) = a
                .apply_status_batches(&[(channel, &reports[..])], |_, _| Vec::new())
                .await
                .unwrap();
            outs.iter().map(|o| o.applied.len()).sum::<usize>()
        }
    };
    // Short: 300 reports in one statement.
    let short: Vec<StatusReport> = first
        .iter()
        .map(|m| report(m, ProviderStatus::Delivered, true))
        .chain(
            rest[..250]
                .iter()
                .map(|m| report(m, ProviderStatus::Delivered, false)),
        )
        .collect();
    assert_eq!(
        apply(short).await,
        300,
        "every report of the short batch applied"
    );
    // Long: all 1,100 read, past one statement.
    let long: Vec<StatusReport> = first
        .iter()
        .map(|m| report(m, ProviderStatus::Read, true))
        .chain(rest.iter().map(|m| report(m, ProviderStatus::Read, false)))
        .collect();
    assert_eq!(
        apply(long).await,
        N,
        "every report of the long batch applied"
    );
    let read = scalar(
        &a,
        "SELECT COUNT(*) FROM messages WHERE campaign_id = $1 AND status = 'read'",
        c.id,
    )
    .await;
    assert_eq!(read, N as i64);
    let renamed = scalar(
        &a,
        "SELECT COUNT(*) FROM messages WHERE campaign_id = $1 AND provider_message_id LIKE 'new.%'",
        c.id,
    )
    .await;
    assert_eq!(
        renamed, 50,
        "the callback's messages took the reported provider id"
    );
    crate::test_support::drop_postgres(b, &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_at_a_time_delivers_a_subscription() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: skipped");
        return;
    };
    let (sub, _) = a
        .create_subscription(
            account,
            channel,
            "https://example.com/h",
            &[EventKind::MessageAck],
        )
        .await
        .unwrap();
    let events: Vec<NewEvent> = (0..20)
        .map(|i| NewEvent {
            account_id: account,
            channel_id: channel,
            kind: EventKind::MessageAck,
            channel: serde_json::json!({"id": channel}),
            data: serde_json::json!({"message_id": i, "status": "delivered"}),
            created_at: 1,
        })
        .collect();
    assert_eq!(a.enqueue_events(&events).await.unwrap(), 20);
    let hold = 20_000;
    // Both try; the first holds it, the second gets nothing, however often it tries.
    assert_eq!(a.lease_subscriptions(hold).await.unwrap(), 1);
    for _ in 0..5 {
        assert_eq!(b.lease_subscriptions(hold).await.unwrap(), 0);
        assert!(
            b.pending_window().await.unwrap().is_empty(),
            "b reads a's subscription"
        );
    }
    let window = a.pending_window().await.unwrap();
    assert_eq!(window.len(), 20);
    let ids: Vec<i64> = window.iter().map(|d| d.id).collect();
    assert!(b.deliveries_to_attempt(0, &ids).await.unwrap().is_empty());
    assert_eq!(a.deliveries_to_attempt(0, &ids).await.unwrap().len(), 20);
    // a delivers the first one.
    a.record_attempts(&[Attempt {
        id: ids[0],
        subscription_id: sub.id,
        outcome: AttemptOutcome::Delivered { status_code: 200 },
    }])
    .await
    .unwrap();
    // a stops gracefully: b takes the subscription at once and sees the other 19.
    a.end_session().await.unwrap();
    assert_eq!(b.lease_subscriptions(hold).await.unwrap(), 1);
    assert_eq!(b.pending_window().await.unwrap().len(), 19);
    assert!(
        a.deliveries_to_attempt(0, &ids).await.unwrap().is_empty(),
        "a fenced"
    );
    // A late failure recorded for the delivered one leaves it delivered.
    b.record_attempts(&[Attempt {
        id: ids[0],
        subscription_id: sub.id,
        outcome: AttemptOutcome::Retry {
            status_code: Some(500),
            error: "late".into(),
            next_at: 5,
        },
    }])
    .await
    .unwrap();
    let status: String = sqlx::query("SELECT status FROM webhook_deliveries WHERE id = $1")
        .bind(ids[0])
        .fetch_one(&a.pool)
        .await
        .unwrap()
        .try_get("status")
        .unwrap();
    assert_eq!(status, "delivered");
    crate::test_support::drop_postgres(b, &name).await;
}

/// Ten of campaign `campaign_id`'s recipients claimed by `store` through `channel`.
async fn claim_ten(
    store: &Store,
    account: i64,
    channel: i64,
    campaign_id: i64,
) -> Vec<crate::campaigns::Claimed> {
    let share = ClaimShare {
        channel_id: channel,
        count: 10,
        template_name: "oferta".into(),
        lease: None,
    };
    let claimed = store
        .claim_recipients(account, campaign_id, false, &[share], "pt_BR")
        .await
        .unwrap()
        .remove(0);
    assert_eq!(claimed.len(), 10);
    claimed
}

/// A process's own claims whose outcome was lost (its batched writer gave up, or the number's
/// actor stopped with the batch unsent) do not hold the campaign open while it lives: untouched
/// for longer than the grace, they are in doubt, then planned again after another grace with
/// no sign of the provider. One that settles late is still recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_claims_left_unsettled_become_in_doubt_after_the_grace() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: skipped");
        return;
    };
    let c = campaign(&a, account, channel, 20).await;
    let claimed = claim_ten(&a, account, channel, c.id).await;
    let grace = 120_000;
    let now = crate::now_ms();
    let fresh = a.sweep_in_doubt(c.id, now - grace).await.unwrap();
    assert_eq!(
        fresh,
        crate::campaigns::SweepOutcome::default(),
        "fresh claims are in flight"
    );
    // Three minutes pass with no outcome recorded.
    sqlx::query(
        "UPDATE campaign_recipients SET updated_at = updated_at - 180000 WHERE campaign_id = $1",
    )
    .bind(c.id)
    .execute(&a.pool)
    .await
    .unwrap();
    assert_eq!(
        b.sweep_in_doubt(c.id, now - grace).await.unwrap(),
        crate::campaigns::SweepOutcome::default(),
        "a live peer's claims are its own"
    );
    let stale = a.sweep_in_doubt(c.id, now - grace).await.unwrap();
    assert_eq!((stale.stale, stale.replanned), (10, 0), "{stale:?}");
    // A late outcome still lands.
    a.settle_campaign_sends(
        &[Settlement {
            channel_id: channel,
            recipient_id: claimed[0].recipient_id,
            message_id: claimed[0].message_id,
            result: SendResult::Sent {
                provider_message_id: "wamid.late".into(),
            },
        }],
        |_, _| Vec::new(),
    )
    .await
    .unwrap();
    let later = a.sweep_in_doubt(c.id, i64::MAX).await.unwrap();
    assert_eq!(later.replanned, 9, "{later:?}");
    let states: Vec<(String, i64)> = sqlx::query_as(
        "SELECT state, COUNT(*) FROM campaign_recipients WHERE campaign_id = $1 GROUP BY state ORDER BY state",
    )
    .bind(c.id)
    .fetch_all(&a.pool)
    .await
    .unwrap();
    assert_eq!(
        states,
        vec![("planned".to_string(), 19), ("sent".to_string(), 1)]
    );
    crate::test_support::drop_postgres(b, &name).await;
}

/// A process booting beside a live one leaves its claims and idempotency keys alone; once
/// the first one's session is gone, they are recovered: its claimed sends in doubt, its keys
/// in doubt or released. Two campaign moves at once: one wins, and a cancel stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booting_process_leaves_a_live_peer_alone() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: skipped");
        return;
    };
    let c = campaign(&a, account, channel, 50).await;
    claim_ten(&a, account, channel, c.id).await;
    assert!(matches!(
        a.idempotency_begin(account, "k1", "h").await.unwrap(),
        crate::idempotency::IdempotencyBegin::New
    ));
    // b boots: it sees a live peer (DISPARO_ENABLED=true would not turn switches on), its
    // campaign actor's start and its recovery leave a's work alone.
    assert_eq!(b.other_live_sessions().await.unwrap(), 1);
    assert_eq!(b.mark_claimed_in_doubt(c.id).await.unwrap(), 0);
    assert_eq!(
        b.recover_gone_sessions().await.unwrap(),
        crate::sessions::Recovered::default()
    );
    let sweep = b.sweep_in_doubt(c.id, i64::MAX).await.unwrap();
    assert_eq!(
        sweep,
        crate::campaigns::SweepOutcome::default(),
        "a live peer's claims"
    );
    assert!(matches!(
        b.idempotency_begin(account, "k1", "h").await.unwrap(),
        crate::idempotency::IdempotencyBegin::InProgress
    ));
    // a dies (its heartbeat stops: made old here).
    sqlx::query("UPDATE node_sessions SET heartbeat_at = 0 WHERE id = $1")
        .bind(a.session_id())
        .execute(&a.pool)
        .await
        .unwrap();
    assert_eq!(b.other_live_sessions().await.unwrap(), 0);
    assert_eq!(b.recover_gone_sessions().await.unwrap().keys_released, 1);
    let sweep = b.sweep_in_doubt(c.id, 0).await.unwrap();
    assert_eq!(sweep.taken_over, 10, "{sweep:?}");
    let sweep = b.sweep_in_doubt(c.id, i64::MAX).await.unwrap();
    assert_eq!(sweep.replanned, 10, "{sweep:?}");
    // Campaign moves: a compare-and-set on the state each saw.
    assert!(a
        .set_campaign_state(c.id, "draft", "running", None)
        .await
        .unwrap());
    let (x, y) = tokio::join!(
        a.set_campaign_state(c.id, "running", "completed", None),
        b.set_campaign_state(c.id, "running", "cancelled", None),
    );
    assert!(x.unwrap() ^ y.unwrap(), "exactly one move wins");
    crate::test_support::drop_postgres(b, &name).await;
}

/// Cell leases between two sessions (issue 52): one holder at a time, an epoch bumped by every
/// acquisition, renewals only of unexpired leases, releases guarded by session and epoch.
#[tokio::test]
async fn a_lease_has_one_holder_and_every_acquisition_bumps_its_epoch() {
    let Some((a, b, _, channel, name)) = crate::test_support::postgres_pair().await else {
        return;
    };
    assert_eq!(a.live_nodes(10_000).await.unwrap(), ["a", "b"]);
    assert_eq!(a.acquire_lease("bm:1", "a", 10_000).await.unwrap(), Some(1));
    assert_eq!(b.acquire_lease("bm:1", "b", 10_000).await.unwrap(), None);
    // Both race for a free key: exactly one wins.
    let (x, y) = tokio::join!(
        a.acquire_lease("ch:9", "a", 10_000),
        b.acquire_lease("ch:9", "b", 10_000)
    );
    assert!(x.unwrap().is_some() ^ y.unwrap().is_some());
    let renewed = a.renew_leases(10_000).await.unwrap();
    assert!(renewed.contains(&("bm:1".to_string(), 1)), "{renewed:?}");
    // a's lease expires (a froze): it is not renewed, b takes it under epoch 2.
    sqlx::query("UPDATE leases SET expires_at = 0 WHERE key = 'bm:1'")
        .execute(&a.pool)
        .await
        .unwrap();
    assert!(!a
        .renew_leases(10_000)
        .await
        .unwrap()
        .iter()
        .any(|(k, _)| k == "bm:1"));
    assert_eq!(b.acquire_lease("bm:1", "b", 10_000).await.unwrap(), Some(2));
    // a's late release changes nothing; b's frees it for a, under epoch 3.
    assert!(!a.release_lease("bm:1", 1).await.unwrap());
    assert_eq!(a.acquire_lease("bm:1", "a", 10_000).await.unwrap(), None);
    assert!(b.release_lease("bm:1", 2).await.unwrap());
    assert_eq!(a.acquire_lease("bm:1", "a", 10_000).await.unwrap(), Some(3));
    let rows = b.leases().await.unwrap();
    let row = rows.iter().find(|r| r.key == "bm:1").unwrap();
    assert_eq!(
        (row.owner_node.as_deref(), row.owner_session, row.epoch),
        (Some("a"), Some(a.session_id()), 3)
    );
    assert!(row.expires_in_ms > 9_000 && row.held_for_ms >= 0, "{row:?}");
    // A graceful stop releases everything a holds and leaves the live nodes.
    a.end_session().await.unwrap();
    assert_eq!(b.live_nodes(10_000).await.unwrap(), ["b"]);
    assert!(b
        .leases()
        .await
        .unwrap()
        .iter()
        .all(|r| r.owner_node.as_deref() != Some("a")));
    assert_eq!(b.acquire_lease("bm:1", "b", 10_000).await.unwrap(), Some(4));
    let members = b.channel_memberships().await.unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].channel.get(), channel);
    crate::test_support::drop_postgres(b, &name).await;
}

/// Fencing at the data (issue 52, `CLUSTER.md` "Fencing"): a claim under a lease its process
/// no longer holds — taken over under a new epoch, expired, or never held — claims nothing
/// and answers `Fenced`; under the held epoch it claims; a takeover's epoch bump waits for a
/// claim transaction that holds the lease row `FOR SHARE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_under_a_lost_lease_are_refused() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        return;
    };
    let c = campaign(&a, account, channel, 30).await;
    let share = |lease: crate::leases::LeaseToken| ClaimShare {
        channel_id: channel,
        count: 5,
        template_name: "oferta".into(),
        lease: Some(lease),
    };
    let token = |epoch| crate::leases::LeaseToken {
        key: "bm:1".into(),
        epoch,
    };
    assert_eq!(a.acquire_lease("bm:1", "a", 10_000).await.unwrap(), Some(1));
    let got = a
        .claim_recipients(account, c.id, false, &[share(token(1))], "pt_BR")
        .await
        .unwrap();
    assert_eq!(got[0].len(), 5, "held: claimed");
    // b never held it: refused, nothing claimed.
    let refused = b
        .claim_recipients(account, c.id, false, &[share(token(1))], "pt_BR")
        .await;
    assert!(
        matches!(refused, Err(crate::StorageError::Fenced(ref k)) if k == "bm:1"),
        "{refused:?}"
    );
    // a's lease expires (a froze) and b takes the cell under epoch 2: a's late claim under
    // epoch 1 is refused; b's under epoch 2 claims.
    sqlx::query("UPDATE leases SET expires_at = 0 WHERE key = 'bm:1'")
        .execute(&a.pool)
        .await
        .unwrap();
    assert_eq!(b.acquire_lease("bm:1", "b", 10_000).await.unwrap(), Some(2));
    let late = a
        .claim_recipients(account, c.id, false, &[share(token(1))], "pt_BR")
        .await;
    assert!(
        matches!(late, Err(crate::StorageError::Fenced(_))),
        "{late:?}"
    );
    let got = b
        .claim_recipients(account, c.id, false, &[share(token(2))], "pt_BR")
        .await
        .unwrap();
    assert_eq!(got[0].len(), 5);
    assert_eq!(
        scalar(
            &a,
            "SELECT COUNT(*) FROM campaign_recipients WHERE campaign_id = $1 AND state = 'claimed'",
            c.id
        )
        .await,
        10,
        "only the two held claims"
    );
    // A transaction holding the row FOR SHARE (a claim in flight) keeps a takeover out, even
    // once the lease has expired: the takeover waits for the row a moment, then answers that
    // the cell is held (D-138: a keeper must not wait for a frozen peer) and bumps nothing;
    // the new epoch begins after that claim committed.
    sqlx::query(&format!(
        "UPDATE leases SET expires_at = {} + 400 WHERE key = 'bm:1'",
        a.now_sql()
    ))
    .execute(&a.pool)
    .await
    .unwrap();
    let mut tx = b.begin_write().await.unwrap();
    b.hold_leases(&mut tx, &[&token(2)]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        a.acquire_lease("bm:1", "a", 10_000).await.unwrap(),
        None,
        "no epoch bump while the claim holds the row"
    );
    let epoch: i64 = sqlx::query_scalar("SELECT epoch FROM leases WHERE key = 'bm:1'")
        .fetch_one(&a.pool)
        .await
        .unwrap();
    assert_eq!(epoch, 2);
    tx.commit().await.unwrap();
    assert_eq!(a.acquire_lease("bm:1", "a", 10_000).await.unwrap(), Some(3));
    crate::test_support::drop_postgres(b, &name).await;
}

/// A 1:1 send's row is written under its cell's lease (issue 52, `CLUSTER.md` "Fencing"):
/// under the held epoch it is written, under a lost one nothing is and the answer is `Fenced`,
/// and one fenced write in a batch leaves the others of the batch written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_to_one_writes_under_a_lost_lease_are_refused() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        return;
    };
    let new = |i: usize| crate::messages::NewOutbound {
        account_id: account,
        channel_id: channel,
        contact_phone: format!("5511977{i:06}"),
        kind: engine::message::MessageKind::Text,
        body: Some("oi".into()),
        template_name: None,
        template_language: None,
        params: None,
        preview_text: None,
        media: None,
        source: "api",
    };
    let token = |epoch| crate::leases::LeaseToken {
        key: "ch:1".into(),
        epoch,
    };
    let sending = engine::message::MessageStatus::Sending;
    assert_eq!(a.acquire_lease("ch:1", "a", 10_000).await.unwrap(), Some(1));
    a.insert_outbound_under(&new(1), sending, None, Some(&token(1)))
        .await
        .unwrap();
    // b never held it; a's epoch 1 after b took the cell over.
    let refused = b
        .insert_outbound_under(&new(2), sending, None, Some(&token(1)))
        .await;
    assert!(
        matches!(refused, Err(crate::StorageError::Fenced(_))),
        "{refused:?}"
    );
    sqlx::query("UPDATE leases SET expires_at = 0 WHERE key = 'ch:1'")
        .execute(&a.pool)
        .await
        .unwrap();
    assert_eq!(b.acquire_lease("ch:1", "b", 10_000).await.unwrap(), Some(2));
    let (m3, m4, m5, t1, t2) = (new(3), new(4), new(5), token(1), token(2));
    let (late, held, plain) = tokio::join!(
        a.insert_outbound_under(&m3, sending, None, Some(&t1)),
        a.insert_outbound_under(&m4, sending, None, None),
        b.insert_outbound_under(&m5, sending, None, Some(&t2)),
    );
    assert!(
        matches!(late, Err(crate::StorageError::Fenced(_))),
        "{late:?}"
    );
    held.unwrap();
    plain.unwrap();
    let phones: Vec<String> = sqlx::query_scalar(
        "SELECT contact_phone FROM messages WHERE channel_id = $1 ORDER BY contact_phone",
    )
    .bind(channel)
    .fetch_all(&a.pool)
    .await
    .unwrap();
    assert_eq!(phones, ["5511977000001", "5511977000004", "5511977000005"]);
    crate::test_support::drop_postgres(b, &name).await;
}

/// PostgreSQL keeps provider ids in their own table (D-135): an id written by a campaign's
/// settlement, by a status that named a message first, and by an inbound message is found by
/// every lookup by provider id, and a provider retry of an inbound message — also one racing
/// on another process — records nothing.
#[tokio::test]
async fn provider_ids_are_found_whoever_wrote_them() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: skipped");
        return;
    };
    let c = campaign(&a, account, channel, 20).await;
    claim_all(a.clone(), account, channel, c.id).await;
    let rows = sqlx::query(
        "SELECT id, provider_message_id FROM messages WHERE campaign_id = $1 ORDER BY id",
    )
    .bind(c.id)
    .fetch_all(&a.pool)
    .await
    .unwrap();
    let mut messages: Vec<(i64, String)> = rows
        .iter()
        .map(|r| {
            let wamid: Option<String> = r.try_get("provider_message_id").unwrap();
            (
                r.try_get("id").unwrap(),
                wamid.expect("settled with its id"),
            )
        })
        .collect();
    assert_eq!(messages.len(), 20);
    // Five whose send's answer was lost: a status names them first, by a new id.
    for (id, wamid) in messages.iter_mut().take(5) {
        sqlx::query("UPDATE messages SET provider_message_id = NULL WHERE id = $1")
            .bind(*id)
            .execute(&a.pool)
            .await
            .unwrap();
        *wamid = format!("late.{id}");
    }
    let reports: Vec<StatusReport> = messages[..5]
        .iter()
        .map(|(id, wamid)| StatusReport {
            provider_message_id: wamid.clone(),
            callback_message_id: Some(*id),
            status: ProviderStatus::Delivered,
            at: 1_000,
            error: None,
        })
        .collect();
    b.apply_status_batches(&[(channel, &reports[..])], |_, _| Vec::new())
        .await
        .unwrap();
    let wamids: Vec<String> = messages.iter().map(|(_, w)| w.clone()).collect();
    let found = a.message_ids_by_provider(account, &wamids).await.unwrap();
    for (id, wamid) in &messages {
        assert_eq!(found.get(wamid), Some(id), "{wamid} found");
    }
    // Another account's lookup finds none of them.
    assert!(a
        .message_ids_by_provider(account + 1_000_000, &wamids)
        .await
        .unwrap()
        .is_empty());
    // An inbound message, its retry on the other process, and both at once.
    let inbound = |wamid: &str| engine::provider_webhook::NewInbound {
        account_id: account,
        channel_id: channel,
        contact_phone: "5511988887777".into(),
        contact_name: None,
        provider_message_id: wamid.into(),
        kind: engine::message::MessageKind::Text,
        body: Some("oi".into()),
        media: None,
        content: serde_json::json!({"text": {"body": "oi"}}),
        at: 2_000,
    };
    let first = a
        .record_inbound(&inbound("wamid.in.1"), |_| Vec::new())
        .await
        .unwrap()
        .expect("recorded");
    assert!(b
        .record_inbound(&inbound("wamid.in.1"), |_| Vec::new())
        .await
        .unwrap()
        .is_none());
    let found = b
        .message_ids_by_provider(account, &["wamid.in.1".to_string()])
        .await
        .unwrap();
    assert_eq!(found.get("wamid.in.1"), Some(&first.0.id));
    let m = inbound("wamid.in.2");
    let (x, y) = tokio::join!(
        a.record_inbound(&m, |_| Vec::new()),
        b.record_inbound(&m, |_| Vec::new())
    );
    let recorded = [x.unwrap(), y.unwrap()]
        .iter()
        .filter(|r| r.is_some())
        .count();
    assert_eq!(recorded, 1, "one of two racing copies recorded");
    crate::test_support::drop_postgres(b, &name).await;
}

/// A status for a row another process's transaction is changing (issue 50; issue 54, D-140):
/// the status waits for it and applies the report to the new version — a `delivered` never
/// writes over a `read` committed meanwhile (a write computed from the row as read before,
/// without a lock or a comparison, would).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_whose_row_changed_before_its_write_is_applied_to_the_new_row() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: skipped");
        return;
    };
    let c = campaign(&a, account, channel, 1).await;
    claim_all(a.clone(), account, channel, c.id).await;
    let row = sqlx::query("SELECT id, provider_message_id FROM messages WHERE campaign_id = $1")
        .bind(c.id)
        .fetch_one(&a.pool)
        .await
        .unwrap();
    let id: i64 = row.try_get("id").unwrap();
    let wamid: String = row.try_get("provider_message_id").unwrap();
    // The other process moves the message to `read` and holds the row until told.
    let mut held = b.pool.begin().await.unwrap();
    sqlx::query(
        "UPDATE messages SET status = 'read', sent_at = 5, delivered_at = 5, read_at = 5 WHERE id = $1",
    )
    .bind(id)
    .execute(&mut *held)
    .await
    .unwrap();
    let apply = tokio::spawn({
        let a = a.clone();
        async move {
            let report = StatusReport {
                provider_message_id: wamid,
                callback_message_id: Some(id),
                status: ProviderStatus::Delivered,
                at: 1_000,
                error: None,
            };
            a.apply_status_batches(&[(channel, &[report][..])], |_, _| Vec::new())
                .await
                .unwrap()
                .0
        }
    });
    // The status transaction waits for the held row.
    let waiting =
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'";
    for _ in 0..200 {
        let n: i64 = sqlx::query(waiting)
            .bind(&name)
            .fetch_one(&b.pool)
            .await
            .unwrap()
            .try_get(0)
            .unwrap();
        if n > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    held.commit().await.unwrap();
    let outs = apply.await.unwrap();
    assert!(outs[0].applied.is_empty(), "{:?}", outs[0].applied);
    assert_eq!(outs[0].unchanged, 1);
    let status: String = sqlx::query("SELECT status FROM messages WHERE id = $1")
        .bind(id)
        .fetch_one(&a.pool)
        .await
        .unwrap()
        .try_get("status")
        .unwrap();
    assert_eq!(status, "read");
    assert_eq!(
        scalar(&a, "SELECT read_at FROM messages WHERE id = $1", id).await,
        5
    );
}

/// D-145: on PostgreSQL a status report that names our id in its callback data is matched to
/// that message by the id, and only reports without one are looked up by provider id. A
/// report whose callback data names one message and whose provider id is another's (callback
/// data that is not the provider's echo of ours) changes neither; a report without callback
/// data is still found by its provider id, and one naming a message whose answer was lost
/// gives it its provider id.
#[tokio::test]
async fn statuses_naming_our_id_are_found_by_it() {
    let Some((a, b, account, channel, name)) = crate::test_support::postgres_pair().await else {
        eprintln!("DISPARO_TEST_POSTGRES_URL unset: skipped");
        return;
    };
    let c = campaign(&a, account, channel, 4).await;
    claim_all(a.clone(), account, channel, c.id).await;
    let ids: Vec<i64> = sqlx::query("SELECT id FROM messages WHERE campaign_id = $1 ORDER BY id")
        .bind(c.id)
        .fetch_all(&a.pool)
        .await
        .unwrap()
        .iter()
        .map(|r| r.try_get("id").unwrap())
        .collect();
    assert_eq!(ids.len(), 4);
    // The third's answer was lost: no provider id on its row or in the lookup table.
    sqlx::query("UPDATE messages SET provider_message_id = NULL WHERE id = $1")
        .bind(ids[2])
        .execute(&a.pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM message_provider_ids WHERE message_id = $1")
        .bind(ids[2])
        .execute(&a.pool)
        .await
        .unwrap();
    let report = |wamid: String, callback: Option<i64>| StatusReport {
        provider_message_id: wamid,
        callback_message_id: callback,
        status: ProviderStatus::Delivered,
        at: 1_000,
        error: None,
    };
    let reports = [
        report(format!("w{}", ids[0]), Some(ids[0])),
        report(format!("w{}", ids[1]), None),
        report(format!("w{}", ids[3]), Some(ids[0])),
        report("late.2".into(), Some(ids[2])),
    ];
    let (outs, _) = b
        .apply_status_batches(&[(channel, &reports[..])], |_, _| Vec::new())
        .await
        .unwrap();
    let applied: Vec<i64> = outs[0].applied.iter().map(|s| s.message.id).collect();
    assert_eq!(applied, vec![ids[0], ids[1], ids[2]]);
    assert_eq!(outs[0].unknown, 1, "the mixed report matched nothing");
    let status = |id| {
        let a = a.clone();
        async move {
            let r = sqlx::query("SELECT status, provider_message_id FROM messages WHERE id = $1")
                .bind(id)
                .fetch_one(&a.pool)
                .await
                .unwrap();
            let s: String = r.try_get("status").unwrap();
            let w: Option<String> = r.try_get("provider_message_id").unwrap();
            (s, w)
        }
    };
    assert_eq!(
        status(ids[3]).await.0,
        "sent",
        "not moved by another's report"
    );
    assert_eq!(
        status(ids[2]).await,
        ("delivered".to_string(), Some("late.2".to_string()))
    );
    let found = a
        .message_ids_by_provider(account, &["late.2".to_string()])
        .await
        .unwrap();
    assert_eq!(found.get("late.2"), Some(&ids[2]));
    drop(a);
    crate::test_support::drop_postgres(b, &name).await;
}
