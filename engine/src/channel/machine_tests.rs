//! Table and property tests of the channel aggregate (issue 51).

use super::*;
use crate::limits::SharedLimit;
use proptest::prelude::*;

/// 2026-11-22 12:00 in Brasília.
const NOON: i64 = 1_795_359_600_000;

fn no_guardrails() -> Guardrails {
    Guardrails {
        daily_cap: None,
        cadence_ms: 0,
        warmup: false,
        warmup_started_at: 0,
        warmup_initial_cap: 50,
    }
}

fn channel(id: i64, tier: Option<&str>, guardrails: Guardrails, mps: u32) -> Channel {
    let tier = tier.and_then(Tier::parse);
    let recipients = if tier.as_ref().and_then(Tier::limit_24h).is_some() {
        RollingUnique::new(crate::DAY_MS)
    } else {
        RollingUnique::estimated(crate::DAY_MS)
    };
    Channel::new(ChannelInit {
        id,
        stored: Stored {
            status: ChannelStatus::Working,
            quality: Quality::Green,
            tier,
            credential_valid: true,
            payment_locked_until: None,
            waba: WabaStanding::Ok,
            recipients,
        },
        guardrails,
        cap_day: guardrail::local_day(NOON),
        cap_sent: 0,
        cap_authorized: 0,
        throughput_mps: mps,
        quality_event_at: None,
        template_missing: false,
        template_quality_red: false,
    })
}

fn template() -> OneToOne {
    OneToOne::Template {
        group_limited: false,
    }
}

#[test]
fn red_stops_business_initiated_sends_and_replies_go_on() {
    let mut c = channel(1, Some("TIER_250"), no_guardrails(), 80);
    let none = &mut Limits::none();
    assert_eq!(
        c.admit_one_to_one("5511999990001", template(), NOON, none),
        Ok(NOON)
    );
    let effects = c.apply(
        Input::QualityEvent {
            quality: Some(Quality::Red),
            tier: None,
            at: NOON,
        },
        NOON,
    );
    assert_eq!(
        effects,
        vec![Effect::StoreQuality {
            quality: Quality::Red,
            tier: Tier::parse("TIER_250"),
            at: NOON
        }]
    );
    assert!(c.blocked(NOON, none));
    assert_eq!(
        c.admit_one_to_one("5511999990002", template(), NOON, none),
        Err(Refusal::Health(HealthCode::QualityRed))
    );
    assert_eq!(
        c.admit_campaign("5511999990002", false, NOON, none),
        Err(HealthCode::QualityRed)
    );
    assert_eq!(
        c.campaign_credits(NOON, none),
        (0, Some(HealthCode::QualityRed))
    );
    // A reply inside the contact's window still goes.
    let session = OneToOne::Session {
        last_inbound_at: Some(NOON - 1000),
    };
    assert_eq!(
        c.admit_one_to_one("5511999990002", session, NOON, none)
            .map(drop),
        Ok(())
    );
    let closed = OneToOne::Session {
        last_inbound_at: Some(NOON - crate::DAY_MS - 1),
    };
    assert_eq!(
        c.admit_one_to_one("5511999990002", closed, NOON, none),
        Err(Refusal::WindowClosed)
    );
}

#[test]
fn an_older_quality_event_is_ignored_and_one_without_a_rating_reads_the_number() {
    let mut c = channel(1, Some("TIER_250"), no_guardrails(), 80);
    let at = NOON;
    c.apply(
        Input::QualityEvent {
            quality: Some(Quality::Yellow),
            tier: None,
            at,
        },
        at,
    );
    let late = c.apply(
        Input::QualityEvent {
            quality: Some(Quality::Green),
            tier: None,
            at: at - 1,
        },
        at,
    );
    assert_eq!(late, vec![Effect::StaleQualityIgnored]);
    assert_eq!(c.quality(), Quality::Yellow);
    let unrated = c.apply(
        Input::QualityEvent {
            quality: None,
            tier: Tier::parse("TIER_2K"),
            at: at + 1,
        },
        at,
    );
    assert_eq!(unrated[0], Effect::ReadAtProvider);
    assert_eq!(unrated[1], Effect::MemberLimit(Some(2000)));
    assert_eq!(c.tier_limit(), Some(2000));
}

#[test]
fn a_tier_that_loses_its_limit_keeps_an_estimate_and_one_that_gains_it_rebuilds() {
    let mut c = channel(1, Some("TIER_250"), no_guardrails(), 80);
    let e = c.apply(
        Input::QualityEvent {
            quality: Some(Quality::Green),
            tier: Tier::parse("TIER_UNLIMITED"),
            at: NOON,
        },
        NOON,
    );
    assert!(!e.contains(&Effect::RebuildRecipients));
    let e = c.apply(
        Input::QualityEvent {
            quality: Some(Quality::Green),
            tier: Tier::parse("TIER_1K"),
            at: NOON + 1,
        },
        NOON,
    );
    assert!(e.contains(&Effect::RebuildRecipients));
}

#[test]
fn provider_answers_change_the_state_they_concern() {
    let mut c = channel(1, Some("TIER_250"), no_guardrails(), 80);
    let none = &mut Limits::none();
    assert_eq!(
        c.apply(Input::Answer(Answer::CredentialRefused), NOON),
        vec![Effect::StoreCredential(false)]
    );
    assert_eq!(
        c.health(NOON, none).code,
        HealthCode::CredentialInvalid.as_str()
    );
    assert_eq!(
        c.apply(Input::Answer(Answer::Accepted), NOON),
        vec![Effect::StoreCredential(true)]
    );
    assert_eq!(c.apply(Input::Answer(Answer::Accepted), NOON), vec![]);
    assert_eq!(
        c.apply(Input::Answer(Answer::PaymentProblem), NOON),
        vec![Effect::StorePaymentLock(Some(NOON + PAYMENT_LOCK_MS))]
    );
    assert!(c.blocked(NOON, none));
    assert!(
        !c.blocked(NOON + PAYMENT_LOCK_MS + 1, none),
        "the lock expires"
    );
    c.apply(Input::PaymentReleased, NOON);
    assert!(!c.blocked(NOON, none));
    // A throttle pauses campaign work: busy, not blocked.
    let e = c.apply(
        Input::Answer(Answer::Throttled {
            retry_after_ms: Some(2000),
        }),
        NOON,
    );
    assert_eq!(e, vec![Effect::BackedOff { until: NOON + 2000 }]);
    assert_eq!(c.campaign_credits(NOON + 10, none), (0, None));
    assert!(c.campaign_credits(NOON + 2000, none).0 > 0);
}

#[test]
fn a_provider_outage_backs_campaign_work_off_and_probes_with_one_send() {
    let none = &mut Limits::none();
    let mut c = channel(1, Some("TIER_10K"), no_guardrails(), 1000);
    let full = c.campaign_credits(NOON, none).0;
    assert!(full > 1);
    // The sends in flight fail together: one back-off of 1 s, not one per failure.
    let e = c.apply(Input::Answer(Answer::Unavailable), NOON);
    assert_eq!(
        e,
        vec![Effect::BackedOff {
            until: NOON + 1_000
        }]
    );
    assert_eq!(
        c.apply(Input::Answer(Answer::Unavailable), NOON + 10),
        vec![]
    );
    assert_eq!(c.campaign_credits(NOON + 500, none), (0, None));
    assert_eq!(c.outage_until(), Some(NOON + 1_000));
    // After it, one probe at a time; each failure in a row doubles the wait, up to 60 s.
    assert_eq!(c.campaign_credits(NOON + 1_000, none), (1, None));
    let e = c.apply(Input::Answer(Answer::Unavailable), NOON + 1_000);
    assert_eq!(
        e,
        vec![Effect::BackedOff {
            until: NOON + 3_000
        }]
    );
    let mut at = NOON + 3_000;
    for _ in 0..10 {
        c.apply(Input::Answer(Answer::Unavailable), at);
        at += 60_000;
    }
    assert_eq!(unavailable_backoff_ms(12), UNAVAILABLE_BACKOFF_MAX_MS);
    assert_eq!(c.campaign_credits(at - 1, none), (0, None));
    // An accepted send ends the outage: the full window again.
    c.apply(Input::Answer(Answer::Accepted), at);
    assert_eq!(c.campaign_credits(at, none).0, full);
    assert_eq!(c.outage_until(), None);
    // Business-initiated 1:1 sends are not held by the back-off (the caller gets the
    // provider's answer).
    assert!(!c.blocked(at, none));
}

#[test]
fn a_provider_read_stores_what_it_found_and_says_when_the_status_changed() {
    let mut c = channel(1, Some("TIER_250"), no_guardrails(), 80);
    let e = c.apply(
        Input::Read(ProviderRead {
            status: ChannelStatus::Disconnected,
            banned: false,
            quality: Some(Quality::Yellow),
            tier: None,
            throughput_mps: 1000,
            name: Some("Loja".into()),
        }),
        NOON,
    );
    assert_eq!(
        e,
        vec![
            Effect::StoreThroughput(1000),
            Effect::StoreRead {
                status: ChannelStatus::Disconnected,
                quality: Quality::Yellow,
                tier: Tier::parse("TIER_250"),
                name: Some("Loja".into()),
            },
            Effect::StatusChanged {
                status: ChannelStatus::Disconnected,
                previous: ChannelStatus::Working,
            },
        ]
    );
    assert!(c.blocked(NOON, &mut Limits::none()));
}

#[test]
fn a_violation_never_hides_a_ban() {
    let mut c = channel(1, None, no_guardrails(), 80);
    c.apply(Input::WabaStanding(WabaStanding::Banned), NOON);
    c.apply(Input::WabaStanding(WabaStanding::Violation), NOON);
    assert_eq!(
        c.health(NOON, &mut Limits::none()).code,
        HealthCode::WabaBanned.as_str()
    );
}

#[test]
fn the_daily_cap_stops_campaign_sends_not_api_sends_and_an_authorization_lifts_it() {
    let g = Guardrails {
        daily_cap: Some(2),
        ..no_guardrails()
    };
    let mut c = channel(1, None, g, 80);
    let none = &mut Limits::none();
    assert!(c.admit_campaign("1", false, NOON, none).is_ok());
    assert!(c.admit_campaign("2", false, NOON, none).is_ok());
    assert_eq!(
        c.admit_campaign("3", false, NOON, none),
        Err(HealthCode::DailyCapReached)
    );
    assert_eq!(
        c.campaign_credits(NOON, none),
        (0, Some(HealthCode::DailyCapReached))
    );
    assert_eq!(
        c.admit_one_to_one("3", template(), NOON, none).map(drop),
        Ok(())
    );
    // A send the provider did not take gives its place back.
    c.apply(Input::CampaignSettled { sent: false }, NOON);
    assert!(c.admit_campaign("4", false, NOON, none).is_ok());
    c.apply(Input::Authorized(1), NOON);
    assert!(c.admit_campaign("5", false, NOON, none).is_ok());
    assert_eq!(c.guardrail_view(NOON).sent_today, 3);
    // The next local day starts again.
    let tomorrow = NOON + crate::DAY_MS;
    assert!(c.admit_campaign("6", false, tomorrow, none).is_ok());
    assert_eq!(c.guardrail_view(tomorrow).sent_today, 1);
}

#[test]
fn a_group_send_needs_the_groups_headroom_and_every_send_counts_in_it() {
    let mut group = SharedLimit::group("g".into(), Some(1), RollingUnique::new(crate::DAY_MS));
    // Its member (this number, 80 a day): the group's own 1 is the limit.
    group.set_member_limit(1, Some(80));
    let mut c = channel(1, None, no_guardrails(), 80);
    let mut limits = Limits {
        group: Some(&mut group),
        bm: None,
    };
    // A direct send is not held by the group's limit, but counts in it.
    assert_eq!(
        c.admit_one_to_one("1", template(), NOON, &mut limits)
            .map(drop),
        Ok(())
    );
    let grouped = OneToOne::Template {
        group_limited: true,
    };
    let refused = c.admit_one_to_one("2", grouped, NOON, &mut limits);
    let Err(Refusal::Quota(q)) = refused else {
        panic!("a quota refusal: {refused:?}");
    };
    assert_eq!(
        (q.scope, q.limit, q.used),
        (crate::limits::QuotaScope::Group, 1, 1)
    );
    assert_eq!(q.retry_after_ms, q.reset_at.map(|t| t - NOON));
    assert_eq!(
        c.admit_one_to_one("1", grouped, NOON, &mut limits)
            .map(drop),
        Ok(()),
        "already counted"
    );
    assert_eq!(c.health(NOON, &mut limits).group, "g");
}

/// One step of a property run: a number (by index) sends a template or a campaign send to a
/// recipient (from a small pool, so recipients repeat) some time after the previous step.
#[derive(Debug, Clone)]
struct Step {
    number: usize,
    recipient: u8,
    after_ms: i64,
    campaign: bool,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        (
            0usize..3,
            0u8..16,
            0i64..(6 * crate::HOUR_MS),
            any::<bool>(),
        )
            .prop_map(|(number, recipient, after_ms, campaign)| Step {
                number,
                recipient,
                after_ms,
                campaign,
            }),
        1..200,
    )
}

/// Distinct recipients admitted in the 24 h before `now` (inclusive of `now`).
fn in_window(admitted: &[(usize, u8, i64)], now: i64, number: Option<usize>) -> usize {
    admitted
        .iter()
        .filter(|(n, _, at)| number.is_none_or(|x| x == *n) && now - at < crate::DAY_MS)
        .map(|(_, r, _)| *r)
        .collect::<std::collections::HashSet<_>>()
        .len()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The rolling 24 h limits never admit over themselves, under any interleaving of three
    /// numbers of one BM: each number's own tier limit and the BM's shared one (PROVIDER.md
    /// §10.2).
    #[test]
    fn the_24h_limits_never_admit_over_themselves(steps in steps(), own in 1i64..6, bm_limit in 1i64..10) {
        let tier = format!("TIER_{own}");
        let mut numbers: Vec<Channel> = (0..3).map(|i| channel(i, Some(&tier), no_guardrails(), 1000)).collect();
        let mut bm = SharedLimit::bm(Some(bm_limit), RollingUnique::new(crate::DAY_MS));
        let mut now = NOON;
        let mut admitted = Vec::new();
        for s in steps {
            now += s.after_ms;
            let to = format!("55119{:08}", s.recipient);
            let mut limits = Limits { group: None, bm: Some(&mut bm) };
            let c = &mut numbers[s.number];
            let ok = if s.campaign {
                c.admit_campaign(&to, false, now, &mut limits).is_ok()
            } else {
                c.admit_one_to_one(&to, template(), now, &mut limits).is_ok()
            };
            if ok {
                admitted.push((s.number, s.recipient, now));
            }
            prop_assert!(in_window(&admitted, now, Some(s.number)) as i64 <= own);
            prop_assert!(in_window(&admitted, now, None) as i64 <= bm_limit);
        }
    }

    /// RED (and every blocking state) admits no business-initiated send, whatever came before.
    #[test]
    fn red_admits_no_business_initiated_send(
        events in proptest::collection::vec((0u8..4, 0i64..1000, any::<bool>()), 1..40),
    ) {
        let mut c = channel(1, None, no_guardrails(), 80);
        let mut held: Option<i64> = None;
        let mut expected = Quality::Green;
        for (i, (q, at, answer)) in events.into_iter().enumerate() {
            let quality = [Quality::Green, Quality::Yellow, Quality::Red, Quality::Unknown][q as usize];
            let at = NOON + at;
            c.apply(Input::QualityEvent { quality: Some(quality), tier: None, at }, NOON);
            if held.is_none_or(|h| at >= h) {
                held = Some(at);
                expected = quality;
            }
            if answer {
                c.apply(Input::Answer(Answer::Accepted), NOON);
            }
            prop_assert_eq!(c.quality(), expected);
            let to = format!("5511{i:09}");
            let none = &mut Limits::none();
            let template_ok = c.admit_one_to_one(&to, template(), NOON, none).is_ok();
            let campaign_ok = c.admit_campaign(&to, false, NOON, none).is_ok();
            if expected == Quality::Red {
                prop_assert!(!template_ok && !campaign_ok);
                prop_assert_eq!(c.campaign_credits(NOON, none), (0, Some(HealthCode::QualityRed)));
                prop_assert!(c.blocked(NOON, none));
            } else {
                prop_assert!(template_ok && campaign_ok);
            }
        }
    }

    /// Campaign sends are paced at or below the provider's throughput: in any second, at most
    /// `mps` (+1 for the second's edge) slots, whatever the provider's answers and the 1:1
    /// sends in between.
    #[test]
    fn pacing_never_exceeds_the_providers_throughput(
        mps in 1u32..100,
        cadence in 0i64..50,
        // Mostly bursts (no time between steps), so the pacer is what spaces the sends.
        steps in proptest::collection::vec((prop_oneof![3 => Just(0i64), 1 => 0i64..40], 0u8..10), 1..400),
    ) {
        let g = Guardrails { cadence_ms: cadence, ..no_guardrails() };
        let mut c = channel(1, None, g, mps);
        let none = &mut Limits::none();
        let mut now = NOON;
        let mut slots = Vec::new();
        for (i, (after, what)) in steps.into_iter().enumerate() {
            now += after;
            match what {
                0 => { c.apply(Input::Answer(Answer::Throttled { retry_after_ms: None }), now); }
                1 => { c.admit_one_to_one("5511900000000", template(), now, none).ok(); }
                2..=4 => { c.apply(Input::Answer(Answer::Accepted), now); }
                _ => {
                    let at = c.admit_campaign(&format!("5511{i:09}"), false, now, none)
                        .expect("an unlimited number admits");
                    prop_assert!(at >= now);
                    slots.push(at);
                }
            }
        }
        slots.sort_unstable();
        let max_in_second = slots
            .iter()
            .enumerate()
            .map(|(i, s)| slots[i..].iter().take_while(|t| **t < s + 1000).count())
            .max()
            .unwrap_or(0);
        prop_assert!(max_in_second as u32 <= mps + 1, "{} in one second at {} msg/s", max_in_second, mps);
        if cadence > 0 {
            for w in slots.windows(2) {
                prop_assert!(w[1] - w[0] >= cadence - 1, "cadence {}: {:?}", cadence, w);
            }
        }
    }
}
