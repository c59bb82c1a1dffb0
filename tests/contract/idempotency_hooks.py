"""schemathesis hooks for `tests/contract.rs` (issue 49 item 8).

A valid `Idempotency-Key` the fuzzer drew is made unique per request: schemathesis draws the
same few header values ("0", "00"…) for many different bodies, and a key reused with another
body is refused (422 `idempotency_key_reused`, as it must be), so most generated requests
never reached the operation's own checks. Invalid keys are left as drawn, to be refused as
invalid.
"""

import re
import uuid

import schemathesis

VALID = re.compile(r"^[!-~]{1,255}$")


@schemathesis.hook
def before_call(ctx, case, kwargs):
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "idempotency-key" and VALID.match(str(headers[name])):
            headers[name] = "contract-" + uuid.uuid4().hex
