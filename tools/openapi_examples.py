"""Picks the examples of the three API documents from recorded exchanges (issue 49 item 7).

Every example in the documents is an answer disparo really gave, to a request a test really
made, scrubbed of secrets and checked against the schema the document declares:

    DISPARO_RECORD_EXAMPLES=/tmp/exchanges.jsonl cargo test --workspace
    cargo run -- serve --simulator          # any gateway of the same commit, for its documents
    python3 tools/openapi_examples.py /tmp/exchanges.jsonl http://127.0.0.1:8080

writes `http/openapi-examples.json` (`{document: {"METHOD /path": {"request": …, "responses":
{status: …}}}}`), which the gateway places in each served document (`http::examples`). It
prints the operations still without an example and the recorded bodies that did not fit their
schema (a test's deliberate bad input, or a document to fix).

    python3 tools/openapi_examples.py --check http://127.0.0.1:8080

reads the served documents and prints the bodies without an example and the examples that do
not fit their schema (`tests/openapi.rs` runs it).
"""

import copy
import json
import re
import sys
import urllib.request

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

OUT = "http/openapi-examples.json"
DOCUMENTS = {
    "account": ("/api/v1/openapi.json", "/api/v1"),
    "sender": ("/api/v1/sender/openapi.json", "/api/v1"),
    "panel": ("/api/openapi.json", "/api"),
}
# Keys whose values are secrets, whatever the test put there.
SECRET_KEY = re.compile(
    r"token|secret|password|senha|segredo|signature|assinatura|pin$|chave|api_key", re.I
)
# A URL whose last segment is its secret (an alternative channel's notification address).
SECRET_PATH = re.compile(r"(/webhooks/alternative/)[A-Za-z0-9_-]+")
SECRET_VALUE = re.compile(r"^((svc|pub|whsec|tok|sk)_|EAA[A-Za-z0-9]{20})")
FILL = "0123456789abcdef"
LOCAL_URL = re.compile(r"https?://(127\.0\.0\.1|localhost)(:\d+)?")
MAX_ITEMS = 3
# Control characters (a test's deliberately broken text): YAML readers of the document refuse
# them, and they teach nothing.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
MAX_CHARS = 6000


def masked(value):
    """A secret's placeholder: its prefix (`svc_`, `whsec_`…) kept, the rest `0123…`, the
    same length, so patterns on it still hold."""
    m = re.match(r"^[A-Za-z]{2,6}_", value)
    keep = m.group(0) if m else ""
    rest = len(value) - len(keep)
    return keep + (FILL * (rest // len(FILL) + 1))[:rest]


def scrub(v, key=""):
    if isinstance(v, dict):
        return {k: scrub(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [scrub(x, key) for x in v[:MAX_ITEMS]]
    if isinstance(v, str):
        # An Embedded Signup `code` is a credential; a short `code` is an enum value.
        one_time_code = key == "code" and len(v) >= 20 and not re.fullmatch(r"[a-z0-9_]+", v)
        if SECRET_KEY.search(key) or SECRET_VALUE.match(v) or one_time_code:
            return masked(v)
        v = SECRET_PATH.sub(lambda m: m.group(1) + masked(m.group(0)[len(m.group(1)):]), v)
        return LOCAL_URL.sub("https://cliente.example", v)
    return v


def richness(v):
    """Filled leaves: the example that says most is preferred."""
    if isinstance(v, dict):
        return sum(richness(x) for x in v.values())
    if isinstance(v, list):
        return sum(richness(x) for x in v)
    return 0 if v is None or v == "" else 1


def validator(doc, schema):
    registry = Registry().with_resource("urn:doc", Resource.from_contents(doc, DRAFT202012))

    def rebase(s):
        if isinstance(s, dict):
            return {
                k: ("urn:doc" + x if k == "$ref" and isinstance(x, str) and x.startswith("#") else rebase(x))
                for k, x in s.items()
            }
        if isinstance(s, list):
            return [rebase(x) for x in s]
        return s

    return Draft202012Validator(rebase(schema), registry=registry)


def json_schema(node, doc):
    """The JSON schema of a request body or answer (following a `$ref` to components)."""
    if node is None:
        return None
    ref = node.get("$ref")
    if ref:
        node = doc
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
    media = node.get("content", {}).get("application/json")
    return media.get("schema") if media else None


def check(base):
    """`--check <base>`: the served documents' bodies without an example, and examples that do
    not fit their schema (one JSON object on stdout)."""
    missing, invalid = [], []
    for name, (url, _) in DOCUMENTS.items():
        doc = json.load(urllib.request.urlopen(base + url))
        for path, item in doc["paths"].items():
            for method, op in item.items():
                key = f"{name} {method.upper()} {path}"
                bodies = [("request", op.get("requestBody"))] + [
                    (status, r) for status, r in op.get("responses", {}).items() if status.startswith("2")
                ]
                for what, node in bodies:
                    schema = json_schema(node, doc)
                    if not schema:
                        continue
                    example = node.get("content", {}).get("application/json", {}).get("example")
                    if example is None:
                        missing.append(f"{key} {what}")
                        continue
                    errors = list(validator(doc, schema).iter_errors(example))
                    if errors:
                        invalid.append(f"{key} {what}: {errors[0].message[:160]}")
    print(json.dumps({"missing": missing, "invalid": invalid}, ensure_ascii=False))


def main():
    if sys.argv[1] == "--check":
        return check(sys.argv[2].rstrip("/"))
    recorded, base = sys.argv[1], sys.argv[2].rstrip("/")
    docs = {name: json.load(urllib.request.urlopen(base + url)) for name, (url, _) in DOCUMENTS.items()}
    candidates = {}
    for line in open(recorded, encoding="utf-8"):
        x = json.loads(line)
        name = x["document"]
        prefix = DOCUMENTS[name][1]
        path = x["path"][len(prefix):] if x["path"].startswith(prefix) else None
        if not path or path not in docs[name]["paths"]:
            continue
        key = f"{x['method']} {path}"
        candidates.setdefault((name, key), []).append(x)
    chosen, unfit = {}, []
    for (name, key), xs in sorted(candidates.items()):
        doc = docs[name]
        method, path = key.split(" ", 1)
        op = doc["paths"][path].get(method.lower())
        if not op:
            continue
        entry = {"responses": {}}
        req_schema = json_schema(op.get("requestBody"), doc)
        ok_requests = []
        for x in sorted(xs, key=lambda x: -richness(x["request"])):
            status = str(x["status"])
            answer_schema = json_schema(op.get("responses", {}).get(status), doc)
            if x["response"] is not None and answer_schema and status not in entry["responses"]:
                body = scrub(copy.deepcopy(x["response"]))
                errors = list(validator(doc, answer_schema).iter_errors(body))
                text = json.dumps(body, ensure_ascii=False)
                if not errors and len(text) <= MAX_CHARS and not CONTROL.search(text):
                    entry["responses"][status] = body
                elif errors and x["status"] < 300:
                    unfit.append(f"{name} {key} {status}: {errors[0].message[:160]}")
            if req_schema and x["request"] is not None and 200 <= x["status"] < 300:
                body = scrub(copy.deepcopy(x["request"]))
                clean = not CONTROL.search(json.dumps(body, ensure_ascii=False))
                if clean and not list(validator(doc, req_schema).iter_errors(body)):
                    ok_requests.append(body)
        if ok_requests:
            entry["request"] = ok_requests[0]
        if entry["responses"] or "request" in entry:
            chosen.setdefault(name, {})[key] = entry
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(chosen, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    missing = []
    for name, doc in docs.items():
        for path, item in doc["paths"].items():
            for method, op in item.items():
                key = f"{method.upper()} {path}"
                got = chosen.get(name, {}).get(key, {})
                if json_schema(op.get("requestBody"), doc) and "request" not in got:
                    missing.append(f"{name} {key} request")
                for status, r in op.get("responses", {}).items():
                    if status.startswith("2") and json_schema(r, doc) and status not in got.get("responses", {}):
                        missing.append(f"{name} {key} {status}")
    print(json.dumps({"written": OUT, "missing": missing, "unfit": sorted(set(unfit))}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
