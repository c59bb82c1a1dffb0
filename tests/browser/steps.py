"""Steps of the web panel the browser scripts share."""

import re

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect


def await_approval_stage(page, rounds=60):
    """On a campaign page sent to hygiene, waits until it reads "Aguardando aprovação" without
    reloading it (the page follows its status by itself, issue 47 item 8), asking the API to
    read the hygiene result ("Validar") while the button is there; a "Validar" the page lost
    to a redraw meanwhile is fine. The page reloads itself when the pushed status changes
    (`app.js` `followStatus`), so any read here may meet that reload: it is read again once
    the new page has loaded."""
    for _ in range(rounds):
        try:
            if "Aguardando aprovação" in page.locator("#status").inner_text(timeout=5000):
                break
            validate = page.get_by_role("button", name=re.compile("^Validar"))
            if validate.count():
                validate.click(timeout=2000)
        except PlaywrightError:
            page.wait_for_load_state()
        page.wait_for_timeout(500)
    expect(page.locator("#status")).to_have_text("Aguardando aprovação")


def reload(page, tries=3):
    """Reloads the page. A campaign page reloads itself when its pushed status changes
    (`app.js` `followStatus`); a reload asked at that moment is aborted (`net::ERR_ABORTED`):
    the page's own load is waited for and the reload asked again."""
    for attempt in range(tries):
        try:
            page.reload()
            return
        except PlaywrightError:
            if attempt == tries - 1:
                raise
            page.wait_for_load_state()


def expect_toast(page, text):
    """The toast of an action's result (issue 47 item 8) says `text`."""
    expect(page.locator("#toasts .toast")).to_contain_text(text, timeout=10000)
