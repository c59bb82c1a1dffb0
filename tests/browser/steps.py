"""Steps of the web panel the browser scripts share."""

import re

from playwright.sync_api import expect


def await_approval_stage(page, rounds=60):
    """On a campaign page sent to hygiene, waits until it reads "Aguardando aprovação" without
    reloading it (the page follows its status by itself, issue 47 item 8), asking the API to
    read the hygiene result ("Validar") while the button is there; a "Validar" the page lost
    to a redraw meanwhile is fine."""
    for _ in range(rounds):
        if "Aguardando aprovação" in page.locator("#status").inner_text():
            break
        validate = page.get_by_role("button", name=re.compile("^Validar"))
        if validate.count():
            try:
                validate.click(timeout=2000)
            except Exception:
                pass
        page.wait_for_timeout(500)
    expect(page.locator("#status")).to_have_text("Aguardando aprovação")


def expect_toast(page, text):
    """The toast of an action's result (issue 47 item 8) says `text`."""
    expect(page.locator("#toasts .toast")).to_contain_text(text, timeout=10000)
