//! Which access level each route of `/api/v1` needs (decision D-027). One table: the auth
//! middleware enforces it and the tests walk it. A route missing from the table needs `admin`,
//! so a route added without a decision is closed, not open.

use axum::http::Method;
use engine::access::Level;

/// `(method, route as matched, level)` for every route of `/api/v1`.
pub const ROUTES: &[(&str, &str, Level)] = &[
    // Channels
    ("GET", "/api/v1/channels", Level::Read),
    ("POST", "/api/v1/channels/official", Level::Write),
    ("POST", "/api/v1/channels/embedded-signup", Level::Write),
    ("GET", "/api/v1/signup/config", Level::Read),
    ("POST", "/api/v1/channels/alternative", Level::Write),
    (
        "GET",
        "/api/v1/channels/alternative/notify-url",
        Level::Read,
    ),
    ("GET", "/api/v1/channels/{id}/official", Level::Read),
    ("PATCH", "/api/v1/channels/{id}/official", Level::Write),
    ("GET", "/api/v1/channels/{id}/health", Level::Read),
    ("POST", "/api/v1/channels/{id}/verify", Level::Write),
    ("POST", "/api/v1/channels/{id}/sync", Level::Write),
    ("GET", "/api/v1/channels/{id}/templates", Level::Read),
    ("POST", "/api/v1/channels/{id}/request-code", Level::Write),
    ("POST", "/api/v1/channels/{id}/verify-code", Level::Write),
    ("POST", "/api/v1/channels/{id}/register", Level::Write),
    ("POST", "/api/v1/channels/{id}/payment-check", Level::Write),
    ("GET", "/api/v1/channels/{id}/guardrails", Level::Read),
    // Lifting a cap is the owner's or an admin's (spec "Limits"; issue 15).
    ("PATCH", "/api/v1/channels/{id}/guardrails", Level::Admin),
    (
        "POST",
        "/api/v1/channels/{id}/guardrails/authorize",
        Level::Admin,
    ),
    // WABAs, BMs, overview
    ("GET", "/api/v1/overview", Level::Read),
    ("GET", "/api/v1/wabas", Level::Read),
    ("POST", "/api/v1/wabas/{waba}/numbers", Level::Write),
    ("GET", "/api/v1/bms/{id}", Level::Read),
    ("POST", "/api/v1/bms/{id}/sync", Level::Write),
    ("POST", "/api/v1/bms/{id}/payment-check", Level::Write),
    // Messages
    ("GET", "/api/v1/messages", Level::Read),
    ("POST", "/api/v1/messages", Level::Write),
    ("GET", "/api/v1/messages/{id}", Level::Read),
    ("GET", "/api/v1/messages/{id}/media", Level::Read),
    // Outbound webhooks
    ("GET", "/api/v1/channels/{id}/webhooks", Level::Read),
    ("POST", "/api/v1/channels/{id}/webhooks", Level::Write),
    ("GET", "/api/v1/webhooks/{id}/deliveries", Level::Read),
    ("POST", "/api/v1/webhooks/{id}/test", Level::Write),
    ("GET", "/api/v1/webhooks/{id}", Level::Read),
    ("PATCH", "/api/v1/webhooks/{id}", Level::Write),
    ("DELETE", "/api/v1/webhooks/{id}", Level::Write),
    ("POST", "/api/v1/webhooks/{id}/rotate-secret", Level::Write),
    (
        "POST",
        "/api/v1/webhooks/{id}/deliveries/{delivery_id}/retry",
        Level::Write,
    ),
    ("POST", "/api/v1/webhooks/{id}/recover", Level::Write),
    // Templates
    ("GET", "/api/v1/templates", Level::Read),
    ("POST", "/api/v1/templates", Level::Write),
    ("DELETE", "/api/v1/templates/{id}", Level::Admin),
    ("PATCH", "/api/v1/templates/{id}", Level::Write),
    ("POST", "/api/v1/templates/{id}/sync", Level::Write),
    ("POST", "/api/v1/templates/{id}/submit", Level::Write),
    ("PUT", "/api/v1/templates/{id}/header-example", Level::Write),
    ("POST", "/api/v1/templates/{id}/channels", Level::Write),
    (
        "POST",
        "/api/v1/templates/{id}/channels/{channel_id}/reactivate",
        Level::Write,
    ),
    // Campaigns
    ("GET", "/api/v1/campaigns", Level::Read),
    ("POST", "/api/v1/campaigns", Level::Write),
    ("GET", "/api/v1/campaigns/{id}", Level::Read),
    ("PATCH", "/api/v1/campaigns/{id}", Level::Write),
    ("POST", "/api/v1/campaigns/{id}/pause", Level::Write),
    ("POST", "/api/v1/campaigns/{id}/resume", Level::Write),
    ("POST", "/api/v1/campaigns/{id}/cancel", Level::Write),
    ("POST", "/api/v1/campaigns/{id}/recipients", Level::Write),
    ("POST", "/api/v1/campaigns/{id}/start", Level::Write),
    ("POST", "/api/v1/campaigns/{id}/resend", Level::Write),
    // Sending groups (D-037)
    ("GET", "/api/v1/groups", Level::Read),
    ("POST", "/api/v1/groups", Level::Write),
    ("GET", "/api/v1/groups/{id}", Level::Read),
    ("PATCH", "/api/v1/groups/{id}", Level::Write),
    ("DELETE", "/api/v1/groups/{id}", Level::Write),
    ("GET", "/api/v1/groups/{id}/templates", Level::Read),
    ("POST", "/api/v1/groups/{id}/numbers", Level::Write),
    (
        "DELETE",
        "/api/v1/groups/{id}/numbers/{channel_id}",
        Level::Write,
    ),
    ("POST", "/api/v1/groups/{id}/messages", Level::Write),
    ("POST", "/api/v1/groups/{id}/campaigns", Level::Write),
    // Reports
    ("GET", "/api/v1/reports/campaigns", Level::Read),
    ("GET", "/api/v1/reports/campaign-messages", Level::Read),
    // Wiki
    ("GET", "/api/v1/wiki", Level::Read),
    ("POST", "/api/v1/wiki", Level::Write),
    ("GET", "/api/v1/wiki/{id}", Level::Read),
    ("PUT", "/api/v1/wiki/{id}", Level::Write),
    ("DELETE", "/api/v1/wiki/{id}", Level::Write),
    ("GET", "/api/v1/wiki/categories", Level::Read),
    ("POST", "/api/v1/wiki/categories", Level::Write),
    ("PUT", "/api/v1/wiki/categories/{id}", Level::Write),
    ("DELETE", "/api/v1/wiki/categories/{id}", Level::Write),
    // MCP tools: each tool calls its route with the caller's token, so the route's own level
    // applies inside (D-033).
    ("POST", "/api/v1/mcp", Level::Read),
    // Tokens
    ("GET", "/api/v1/tokens", Level::Admin),
    ("POST", "/api/v1/tokens", Level::Admin),
    ("DELETE", "/api/v1/tokens/{id}", Level::Admin),
];

/// The routes a public sender token (`pub_…`, D-060) may call; on the shared paths the
/// handlers answer for the token's user. Any other route answers a sender token 403.
pub const SENDER_ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/numbers"),
    ("GET", "/api/v1/templates"),
    ("POST", "/api/v1/messages"),
    ("GET", "/api/v1/messages/{id}"),
];

/// The routes only a sender token may call (an account token gets 403 before its level is
/// looked at; they are not in [`ROUTES`] nor in the account API's document).
pub const SENDER_ONLY: &[(&str, &str)] = &[("GET", "/api/v1/numbers")];

/// The level a request needs; `admin` for a route missing from [`ROUTES`].
pub fn required(method: &Method, route: &str) -> Level {
    ROUTES
        .iter()
        .find(|(m, r, _)| *m == method.as_str() && *r == route)
        .map(|(_, _, l)| *l)
        .unwrap_or_else(|| {
            tracing::warn!(%method, route, "route without an access level: admin only");
            Level::Admin
        })
}
