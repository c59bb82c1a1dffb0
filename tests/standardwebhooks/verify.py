"""Verifies disparo's webhook deliveries with the official Standard Webhooks package
(`standardwebhooks`, PyPI, pinned in tests/requirements.txt) — code no one here wrote.

Reads a JSON file (argv[1]): {"deliveries": [{"headers": {...}, "body": "<raw body>"}],
"secrets": {"<label>": "whsec_..."}}. Prints one JSON object: for each delivery, for each
secret label, "ok" or the library's error; and, with the first secret, the same delivery with
one byte of the body changed ("tampered") and checked six minutes later ("late", past the
library's five-minute tolerance), both with the first secret that verified it ("n/a" when
none did).
"""

import json
import sys
from datetime import datetime, timedelta, timezone

import standardwebhooks.webhooks as sw


def check(secret, body, headers):
    try:
        sw.Webhook(secret).verify(body, headers)
        return "ok"
    except Exception as e:  # the library's own refusal, reported as text
        return f"{type(e).__name__}: {e}"


class Later(datetime):
    """`datetime` whose `now` is six minutes ahead: a delivery replayed after the tolerance."""

    @classmethod
    def now(cls, tz=None):
        return datetime.now(tz=tz) + timedelta(minutes=6)


def main():
    spec = json.load(open(sys.argv[1]))
    secrets = spec["secrets"]
    out = []
    for d in spec["deliveries"]:
        body, headers = d["body"], d["headers"]
        result = {label: check(s, body, headers) for label, s in secrets.items()}
        good = next((secrets[k] for k, v in result.items() if v == "ok"), None)
        if good is None:
            result["tampered"] = result["late"] = "n/a"
        else:
            result["tampered"] = check(good, body.replace('"', "'", 1), headers)
            real = sw.datetime
            sw.datetime = Later
            try:
                result["late"] = check(good, body, headers)
            finally:
                sw.datetime = real
        out.append(result)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
