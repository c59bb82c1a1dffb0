//! Which roles may call each route of the panel (issue 19, D-054). One table: the panel's
//! middleware enforces it and the role-matrix test walks it. A route missing from the table
//! is Admin only, so a route added without a decision is closed, not open.
//!
//! Staff (Admin, Operador) manage the inventory, templates, tasks and wiki; only Admin
//! manages users; a Client user reads the records of its client (dashboard, alerts, state,
//! BMs, WABAs, numbers, its own client, the wiki).

use axum::http::Method;
use engine::panel::Role;

const ALL: &[Role] = &[Role::Admin, Role::Operador, Role::Client];
const STAFF: &[Role] = &[Role::Admin, Role::Operador];
const ADMIN: &[Role] = &[Role::Admin];
const CLIENT: &[Role] = &[Role::Client];

/// `(method, route as matched, roles)` for every route of `/api` behind a session.
pub const ROUTES: &[(&str, &str, &[Role])] = &[
    // Session
    ("GET", "/api/me", ALL),
    ("POST", "/api/logout", ALL),
    // Overview
    ("GET", "/api/state", ALL),
    ("GET", "/api/dashboard", ALL),
    ("GET", "/api/dashboard/envios-por-hora", ALL),
    ("GET", "/api/alertas", ALL),
    // BMs
    ("GET", "/api/business-managers", ALL),
    ("POST", "/api/business-managers", STAFF),
    ("GET", "/api/business-managers/{id}", ALL),
    ("PUT", "/api/business-managers/{id}", STAFF),
    ("DELETE", "/api/business-managers/{id}", STAFF),
    ("POST", "/api/business-managers/{id}/sync", STAFF),
    // WABAs
    ("GET", "/api/wabas", ALL),
    ("POST", "/api/wabas", STAFF),
    ("GET", "/api/wabas/{id}", ALL),
    ("PUT", "/api/wabas/{id}", STAFF),
    ("DELETE", "/api/wabas/{id}", STAFF),
    // Numbers
    ("GET", "/api/phone-numbers", ALL),
    ("POST", "/api/phone-numbers", STAFF),
    ("GET", "/api/phone-numbers/{id}", ALL),
    ("PUT", "/api/phone-numbers/{id}", STAFF),
    ("DELETE", "/api/phone-numbers/{id}", STAFF),
    ("POST", "/api/phone-numbers/{id}/foto", STAFF),
    // A number's guardrails (daily cap, cadence, warm-up): the account API's, within scope.
    ("GET", "/api/phone-numbers/{id}/guardrails", STAFF),
    ("PATCH", "/api/phone-numbers/{id}/guardrails", STAFF),
    // Clients
    ("GET", "/api/clientes", ALL),
    ("POST", "/api/clientes", STAFF),
    ("GET", "/api/clientes/{id}", ALL),
    ("PUT", "/api/clientes/{id}", STAFF),
    ("DELETE", "/api/clientes/{id}", STAFF),
    ("POST", "/api/clientes/{id}/webhook-secret", STAFF),
    // Campaigns (issue 20): staff create, validate, approve (the maker/checker rule is in
    // the runtime) and dispatch; only Admin flips the dispatch switch.
    ("GET", "/api/campaigns", STAFF),
    ("POST", "/api/campaigns", STAFF),
    ("POST", "/api/campaigns/import", STAFF),
    ("GET", "/api/campaigns/{id}", STAFF),
    ("PUT", "/api/campaigns/{id}", STAFF),
    ("DELETE", "/api/campaigns/{id}", STAFF),
    ("POST", "/api/campaigns/{id}/hygiene", STAFF),
    ("POST", "/api/campaigns/{id}/validate", STAFF),
    ("POST", "/api/campaigns/{id}/approve", STAFF),
    ("POST", "/api/campaigns/{id}/dispatch", STAFF),
    ("POST", "/api/campaigns/{id}/test-send", STAFF),
    ("GET", "/api/campaigns/{id}/preview", STAFF),
    ("GET", "/api/campaigns/{id}/contacts", STAFF),
    ("GET", "/api/campaigns/{id}/report", STAFF),
    ("GET", "/api/campaigns/{id}/sends", STAFF),
    ("GET", "/api/campaigns/{id}/sends/export", STAFF),
    ("GET", "/api/settings/dispatch", STAFF),
    ("PUT", "/api/settings/dispatch", ADMIN),
    // The provider webhook log (issue 21).
    ("GET", "/api/webhook-logs", STAFF),
    ("POST", "/api/webhook-logs/{id}/reforward", STAFF),
    // The account's audit log (the web panel's /auditoria): who wrote what, Admin only.
    ("GET", "/api/audit-log", ADMIN),
    // The cluster view (issue 52): nodes, their load and the account's cells, Admin only.
    ("GET", "/api/cluster", ADMIN),
    // Templates (the account's library)
    ("GET", "/api/templates", STAFF),
    ("POST", "/api/templates", STAFF),
    ("GET", "/api/templates/{id}", STAFF),
    ("PUT", "/api/templates/{id}", STAFF),
    ("DELETE", "/api/templates/{id}", STAFF),
    ("POST", "/api/templates/{id}/submit", STAFF),
    ("PUT", "/api/templates/{id}/header-example", STAFF),
    ("POST", "/api/templates/{id}/sync", STAFF),
    (
        "POST",
        "/api/templates/{id}/channels/{channel_id}/reactivate",
        STAFF,
    ),
    // Tasks
    ("GET", "/api/tasks", STAFF),
    ("POST", "/api/tasks", STAFF),
    ("GET", "/api/tasks/{id}", STAFF),
    ("PUT", "/api/tasks/{id}", STAFF),
    ("DELETE", "/api/tasks/{id}", STAFF),
    // Users
    ("GET", "/api/users", ADMIN),
    ("POST", "/api/users", ADMIN),
    ("GET", "/api/users/{id}", ADMIN),
    ("PUT", "/api/users/{id}", ADMIN),
    ("DELETE", "/api/users/{id}", ADMIN),
    // The public sender's token of a user (spec: only Admin generates API tokens).
    ("GET", "/api/users/{id}/api-token", ADMIN),
    ("POST", "/api/users/{id}/api-token", ADMIN),
    ("DELETE", "/api/users/{id}/api-token", ADMIN),
    // The Client role's own view (spec "Authentication" item 4)
    ("GET", "/api/client/context", CLIENT),
    ("GET", "/api/client/sends", CLIENT),
    // Wiki (the account's pages): `{key}` is the slug on GET, the id on PUT and DELETE.
    ("GET", "/api/wiki", ALL),
    ("POST", "/api/wiki", STAFF),
    ("GET", "/api/wiki/{key}", ALL),
    ("PUT", "/api/wiki/{key}", STAFF),
    ("DELETE", "/api/wiki/{key}", STAFF),
];

/// The roles that may call `method route`; Admin only for a route missing from [`ROUTES`].
pub fn allowed(method: &Method, route: &str) -> &'static [Role] {
    ROUTES
        .iter()
        .find(|(m, r, _)| *m == method.as_str() && *r == route)
        .map(|(_, _, roles)| *roles)
        .unwrap_or_else(|| {
            tracing::warn!(%method, route, "panel route without roles: Admin only");
            ADMIN
        })
}
