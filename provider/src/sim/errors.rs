//! The simulator's Graph errors: HTTP status, message and details per code (PROVIDER.md §7.1;
//! statuses marked † there are Meta's table as recalled; throttling answers 429, D-017).

use axum::http::StatusCode;

/// `(HTTP status, message, details)` for a Graph error code.
pub(crate) fn canned(code: i64) -> (StatusCode, String, Option<&'static str>) {
    let (status, title, details): (StatusCode, &str, Option<&'static str>) = match code {
        0 => (StatusCode::UNAUTHORIZED, "AuthException", None),
        1 => (StatusCode::BAD_REQUEST, "An unknown error occurred", None),
        2 => (StatusCode::SERVICE_UNAVAILABLE, "Service temporarily unavailable", None),
        3 => (StatusCode::INTERNAL_SERVER_ERROR, "Application does not have the capability to make this API call.", None),
        4 => (StatusCode::TOO_MANY_REQUESTS, "Application request limit reached", None),
        10 => (StatusCode::FORBIDDEN, "Application does not have permission for this action", None),
        17 => (StatusCode::TOO_MANY_REQUESTS, "User request limit reached", None),
        33 => (StatusCode::BAD_REQUEST, "Invalid ID", None),
        100 => (StatusCode::BAD_REQUEST, "Invalid parameter", None),
        190 => (StatusCode::UNAUTHORIZED, "Invalid OAuth access token - Cannot parse access token", None),
        200..=299 => (StatusCode::FORBIDDEN, "Permissions error", None),
        368 => (StatusCode::FORBIDDEN, "Temporarily blocked for policies violations", None),
        80007 => (StatusCode::TOO_MANY_REQUESTS, "Rate limit issues", Some("The WhatsApp Business Account has reached its rate limit.")),
        130429 => (StatusCode::TOO_MANY_REQUESTS, "Rate limit hit", Some("Message failed to send because there were too many messages sent from this phone number in a short period of time")),
        131000 => (StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong", Some("Message failed to send due to an unknown error.")),
        131005 => (StatusCode::FORBIDDEN, "Access denied", Some("Permission is either not granted or has been removed.")),
        131008 => (StatusCode::BAD_REQUEST, "Required parameter is missing", None),
        131009 => (StatusCode::BAD_REQUEST, "Parameter value is not valid", None),
        131016 => (StatusCode::SERVICE_UNAVAILABLE, "Service unavailable", Some("A service is temporarily unavailable.")),
        131021 => (StatusCode::BAD_REQUEST, "Recipient cannot be sender", None),
        131026 => (StatusCode::BAD_REQUEST, "Message undeliverable", None),
        131031 => (StatusCode::FORBIDDEN, "Account has been locked", Some("The WhatsApp Business Account is restricted or disabled for violating a platform policy.")),
        131042 => (StatusCode::BAD_REQUEST, "Business eligibility payment issue", Some("Message failed to send because there were one or more errors related to your payment method.")),
        131047 => (StatusCode::BAD_REQUEST, "Re-engagement message", Some("Message failed to send because more than 24 hours have passed since the customer last replied to this number.")),
        131048 => (StatusCode::BAD_REQUEST, "Spam rate limit hit", Some("Message failed to send because there are restrictions on how many messages can be sent from this phone number.")),
        131049 => (StatusCode::BAD_REQUEST, "This message was not delivered to maintain healthy ecosystem engagement.", None),
        131050 => (StatusCode::BAD_REQUEST, "User has stopped marketing messages", None),
        131053 => (StatusCode::BAD_REQUEST, "Media upload error", None),
        131056 => (StatusCode::TOO_MANY_REQUESTS, "(Business Account, Consumer Account) pair rate limit hit", Some("Message failed to send because there were too many messages sent from this phone number to the same phone number in a short period of time.")),
        131057 => (StatusCode::INTERNAL_SERVER_ERROR, "Account in maintenance mode", None),
        132000 => (StatusCode::BAD_REQUEST, "Number of parameters does not match the expected number of params", None),
        132001 => (StatusCode::NOT_FOUND, "Template name does not exist in the translation", None),
        132015 => (StatusCode::BAD_REQUEST, "Template is Paused", None),
        132016 => (StatusCode::BAD_REQUEST, "Template is disabled", None),
        133004 => (StatusCode::SERVICE_UNAVAILABLE, "Server temporarily unavailable", None),
        133005 => (StatusCode::BAD_REQUEST, "Two step verification PIN Mismatch", None),
        133006 => (StatusCode::BAD_REQUEST, "Phone number re-verification needed", None),
        133010 => (StatusCode::BAD_REQUEST, "Account not registered", None),
        133016 => (StatusCode::BAD_REQUEST, "Account register deregister rate limit exceeded", None),
        136025 => (StatusCode::BAD_REQUEST, "Verification code mismatch", None),
        _ => (StatusCode::BAD_REQUEST, "An error occurred", None),
    };
    let message = if (0..1000).contains(&code)
        && code != 100
        && code != 4
        && code != 10
        && code != 17
        && code != 200
    {
        title.to_string()
    } else {
        format!("(#{code}) {title}")
    };
    (status, message, details)
}
