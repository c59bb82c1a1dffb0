"""Clicks through the three API documents in a real browser (Debian's Chromium driven by
Playwright): each page renders its operations from its own document, an operation opens with
its "Try it out" button, and the links between the pages lead to the other documents.

Usage: python3 docs.py <base URL>. Prints one JSON line with what it saw; exits non-zero on a
failed expectation."""

import json
import sys

from chromium import launch
from playwright.sync_api import sync_playwright

BASE = sys.argv[1]

# Page → (an operation path it must show, the link text that leads to the next page).
PAGES = {
    "/docs": ("/channels/official", "API do painel (/api)"),
    "/docs/painel": ("/business-managers/{id}/sync", "Remetente público (/api/v1, token de usuário)"),
    "/docs/remetente": ("/numbers", "API da conta (/api/v1)"),
}
NEXT = {"/docs": "/docs/painel", "/docs/painel": "/docs/remetente", "/docs/remetente": "/docs"}


def main():
    seen = {}
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        for path, (operation, link) in PAGES.items():
            page.goto(BASE + path)
            page.wait_for_selector(".opblock", timeout=20000)
            ops = page.locator(".opblock").count()
            paths = page.locator(".opblock-summary-path").all_inner_texts()
            paths = [t.replace("\u200b", "").strip() for t in paths]
            assert operation in paths, f"{path}: {operation} not in {paths}"
            # Open the operation: its "Try it out" button appears.
            index = paths.index(operation)
            page.locator(".opblock-summary").nth(index).click()
            page.wait_for_selector(".try-out__btn", timeout=10000)
            # Follow the link to the next document.
            page.get_by_role("link", name=link).click()
            page.wait_for_url(BASE + NEXT[path], timeout=10000)
            seen[path] = ops
        browser.close()
        assert not errors, f"page errors: {errors}"
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
