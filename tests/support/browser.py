"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by selenium, for UI tests.

The Dagster UI re-renders as its queries answer, so an element found a moment ago may be gone: every action
here finds its element again until it works or the time is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import (
    ElementClickInterceptedException,
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

T = TypeVar("T")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# A busy CI machine has been seen 5× slower than a quiet one; the UI's first load of a page takes seconds there.
WAIT_S = 180.0
RELOAD_EVERY_S = 10.0
RETRYABLE = (NoSuchElementException, StaleElementReferenceException, ElementClickInterceptedException)


def browser_available() -> bool:
    return Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()


class Page:
    def __init__(self, driver: webdriver.Chrome, base_url: str, shots: Path) -> None:
        self.driver, self.base_url, self.shots = driver, base_url, shots
        self._shot = 0

    def open(self, path: str) -> None:
        self.driver.get(f"{self.base_url}{path}")

    def until(self, condition: Callable[[], T | None], what: str, timeout: float = WAIT_S) -> T:
        """``condition``'s first truthy value; its failures to find an element count as not yet."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if result := condition():
                    return result
            except RETRYABLE:
                pass
            if time.monotonic() > deadline:
                self.screenshot(f"timeout-{what}")
                raise AssertionError(f"the page never showed {what} within {timeout:.0f} s ({self.driver.current_url})")
            time.sleep(0.5)

    def visible(self, xpath: str) -> WebElement | None:
        shown = [element for element in self.driver.find_elements(By.XPATH, xpath) if element.is_displayed()]
        return shown[0] if shown else None

    def wait_for(self, xpath: str, what: str, timeout: float = WAIT_S) -> WebElement:
        return self.until(lambda: self.visible(xpath), what, timeout)

    def wait_for_on_reload(self, path: str, xpath: str, what: str, timeout: float = WAIT_S) -> WebElement:
        """``wait_for`` on a page opened again every few seconds: for what shows only once the server knows it."""
        reopened = [0.0]

        def shown() -> WebElement | None:
            if time.monotonic() - reopened[0] > RELOAD_EVERY_S:
                self.open(path)
                reopened[0] = time.monotonic()
            return self.visible(xpath)

        return self.until(shown, what, timeout)

    def click(self, xpath: str, what: str, timeout: float = WAIT_S) -> None:
        def clicked() -> bool:
            element = self.visible(xpath)
            if element is None or not element.is_enabled():
                return False
            element.click()
            return True

        self.until(clicked, what, timeout)

    def scroll_to(self, element: WebElement) -> None:
        """``element`` at the top of its scrolling pane: what the next screenshot shows."""
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)

    def overflowing_tables(self, selector: str = ".dagster-markdown table") -> list[str]:
        """Each shown table matching ``selector`` that runs past the visible width of the box clipping it (its
        nearest ancestor whose ``overflow-x`` is not ``visible``, else the window): what a reader finds cut off.
        Empty when all fit. By default the tables of markdown metadata values, which we write; Dagster's own
        metadata table around them also runs past when a value holds a long unbreakable file path."""
        script = """
            const found = [], viewport = document.documentElement.clientWidth;
            for (const table of document.querySelectorAll(arguments[0])) {
                const box = table.getBoundingClientRect();
                if (box.width === 0 && box.height === 0) continue;  // not displayed
                let clip = table.parentElement;
                while (clip && getComputedStyle(clip).overflowX === 'visible') clip = clip.parentElement;
                const left = clip ? clip.getBoundingClientRect().left + clip.clientLeft : 0;
                const right = Math.min(clip ? left + clip.clientWidth : viewport, viewport);
                if (box.right > right + 1 || box.left < left - 1) {
                    const head = table.innerText.trim().split('\\n')[0].replace(/\\s+/g, ' ').slice(0, 60);
                    found.push(`table "${head}": ${Math.round(box.width)} px wide at x ${Math.round(box.left)}`
                        + `-${Math.round(box.right)}, its container ${Math.round(right - left)} px at x `
                        + `${Math.round(left)}-${Math.round(right)}`);
                }
            }
            return found;
        """
        return self.driver.execute_script(script, selector)

    def text(self) -> str:
        return self.driver.find_element(By.TAG_NAME, "body").text

    def screenshot(self, name: str) -> Path:
        self._shot += 1
        path = self.shots / f"{self._shot:02d}-{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.driver.save_screenshot(str(path))
        except WebDriverException:
            pass
        return path


@contextmanager
def chromium(base_url: str, shots: Path) -> Iterator[Page]:
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield Page(driver, base_url, shots)
    finally:
        driver.quit()
