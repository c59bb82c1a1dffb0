"""Validates webhook deliveries against the `webhooks` section of a served OpenAPI 3.1
document, with `jsonschema` (PyPI, pinned in tests/requirements.txt) — the schema as a client
generator reads it, not as disparo's code meant it.

argv[1]: the document (JSON file); argv[2]: a JSON file with a list of delivery bodies, each
keyed by the webhook it is an instance of: [{"webhook": "message.received", "body": {...}}].
Prints a JSON list: for each delivery, {"webhook", "errors": [messages]}; a webhook the document
does not list is an error too.
"""

import json
import sys

from jsonschema import Draft202012Validator


def main():
    doc = json.load(open(sys.argv[1]))
    deliveries = json.load(open(sys.argv[2]))
    hooks = doc.get("webhooks", {})
    out = []
    for d in deliveries:
        name = d["webhook"]
        hook = hooks.get(name)
        if hook is None:
            out.append({"webhook": name, "errors": [f"the document has no webhook {name}"]})
            continue
        ref = hook["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        validator = Draft202012Validator({"$ref": ref, "components": doc["components"]})
        errors = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(d["body"])
        ]
        out.append({"webhook": name, "errors": errors})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
