"""At a 1280-pixel laptop width the pickers of methods and seeds show every choice made: their
chips wrap onto more rows instead of scrolling sideways out of view."""

from __future__ import annotations

import pytest

from tests.app.test_browser import CHROMIUM, app_url  # noqa: F401  (the running app)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Chromium at /usr/bin/chromium"),
]

# every element inside a picker whose content is wider than itself and may scroll
HIDDEN = """() => [...document.querySelectorAll('[data-testid="stMultiSelect"]')].map(e => ({
    label: e.innerText.split('\\n')[0],
    scrolled: [...e.querySelectorAll('*')].filter(x => x.scrollWidth > x.clientWidth + 1
        && getComputedStyle(x).overflowX !== 'visible').length,
}))"""
METHODS = "naive,activation/perm,activation/signed-perm,activation/orth,weight/perm,weight/orth"


@pytest.mark.parametrize("path", [f"interpolation?methods={METHODS}",
                                  f"triangle?methods={METHODS}"])  # fmt: skip
def test_the_method_picker_shows_every_choice_at_1280_pixels(app_url, path):  # noqa: F811
    from playwright.sync_api import sync_playwright

    url, _ = app_url
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])  # fmt: skip
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{url}/{path}")
        page.wait_for_selector('[data-testid="stMultiSelect"]', timeout=60_000)
        page.wait_for_timeout(1500)
        pickers = page.evaluate(HIDDEN)
        browser.close()
    method = next(p for p in pickers if p["label"] == "Method / group")
    assert method["scrolled"] == 0, pickers
    assert all(p["scrolled"] == 0 for p in pickers), pickers


def test_enter_in_the_method_picker_adds_one_method(app_url):  # noqa: F811
    """Typing "activation/" matches four methods; Enter adds the first of them only (Streamlit
    put "Select all matches" first and Enter picked all four)."""
    from playwright.sync_api import sync_playwright

    url, _ = app_url
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])  # fmt: skip
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{url}/triangle?methods=naive")
        picker = page.locator('[data-testid="stMultiSelect"]', has_text="Method / group")
        picker.wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        picker.locator("input").click()
        picker.locator("input").press_sequentially("activation/")
        page.wait_for_timeout(500)
        picker.locator("input").press("Enter")
        page.wait_for_timeout(1500)
        chips = picker.locator('[data-testid="stMultiSelectTagsContainer"] [data-tag]')
        chosen = chips.all_inner_texts()
        browser.close()
    assert [c.strip() for c in chosen] == ["naive", "activation/perm"], chosen
