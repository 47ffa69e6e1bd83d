#!/usr/bin/env python3
"""Drives `tickbox inspect`'s page in headless Chromium (Debian's chromium
and chromedriver, through Selenium) and prints what it saw as one JSON
object on stdout; tickbox-app's tests/it/inspect.rs (and the binary's, for
`--open`) make the assertions.

    inspect_page.py counter URL SCREENSHOT.png
    inspect_page.py hostile URL
    inspect_page.py trimmed URL CONTROL_URL
    inspect_page.py live URL STOP_FILE NAME
    inspect_page.py crossport OPEN_FILE WITNESS_URL CONTROL_COOKIE

`crossport` opens the page through the file `tickbox inspect --open` wrote
(as the default browser would), uses the token (the event stream, a key, a
reload), sets the harmless CONTROL_COOKIE (`name=value`) on the page's
origin, then visits WITNESS_URL (another user's server on another loopback
port) twice: once navigated to by the page itself, once as if typed.

`live` inspects the live instance NAME and, at the end, creates STOP_FILE,
on which the test stops the instance from outside, to see the page say how
it ended.

Every wait is for something to appear, with a generous deadline (the
machine may be loaded); chromedriver and chromium end with the script
(driver.quit() in a finally, and the test kills the process group).
"""
import json, os, shutil, sys, tempfile
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

PATIENCE = 90
# One scratch folder for the browser's profile and its downloads, removed
# at the end whatever happens: Chromium writes megabytes into a profile.
SCRATCH = tempfile.mkdtemp(prefix="tickbox-inspect-")
DOWNLOADS = os.path.join(SCRATCH, "downloads")
PROFILE = os.path.join(SCRATCH, "profile")


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    # The exports are saved here, without asking.
    opts.add_experimental_option("prefs", {"download.default_directory": DOWNLOADS,
                                           "download.prompt_for_download": False})
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--disable-extensions", "--window-size=1400,1000",
              "--user-data-dir=" + PROFILE]:
        opts.add_argument(a)
    # The driver Debian installs: Selenium Manager downloads nothing.
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=opts)


def wait(d, what, cond):
    try:
        return WebDriverWait(d, PATIENCE, poll_frequency=0.1).until(lambda _: cond())
    except Exception as e:
        raise SystemExit(f"timed out waiting for {what}: {e!r}; screen: {text(d, '#screen')!r}; "
                         f"state: {text(d, '#state')!r}; status: {text(d, '#status')!r}")


def text(d, css):
    try:
        return d.find_element(By.CSS_SELECTOR, css).text
    except Exception:
        return ""


def wait_text(d, css, needle):
    """The text of `css` once it contains `needle` (a screen may be read
    between a Tick's clear and its redraw: the text that matched is kept)."""
    def seen():
        t = text(d, css)
        return t if needle in t else None
    return wait(d, f"{needle!r} in {css}", seen)


def outcome(d, tool):
    return text(d, f'form[data-tool="{tool}"] .outcome')


def increment_by_three(d, seen):
    """Adds 3 through the increment form: a mutating tool asks to confirm
    first; records the confirmation's text and the outcome, and waits for
    the screen to show it. Returns the form's amount field."""
    amount = d.find_element(By.CSS_SELECTOR, 'form[data-tool="increment"] input[name="amount"]')
    amount.send_keys("3")
    call(d, "increment")
    wait(d, "the confirmation", lambda: d.find_element(By.ID, "confirm").is_displayed())
    seen["confirm_text"] = text(d, "#confirm-text")
    d.find_element(By.ID, "confirm-yes").click()
    wait(d, "the result", lambda: "ok in" in outcome(d, "increment"))
    seen["increment_outcome"] = outcome(d, "increment")
    wait(d, "the screen to show 3", lambda: "Counter: 3" in text(d, "#screen"))
    return amount


def downloaded(name):
    """The text of a finished download, or None yet."""
    try:
        with open(os.path.join(DOWNLOADS, name), encoding="utf-8") as f:
            return f.read() or None
    except FileNotFoundError:
        return None


def call(d, tool):
    d.find_element(By.CSS_SELECTOR, f'form[data-tool="{tool}"] button.call').click()


def counter(d, url, shot):
    seen = {}
    d.get(url)
    seen["first_screen"] = wait_text(d, "#screen", "Counter: 0")
    seen["address_bar"] = d.current_url
    amount = increment_by_three(d, seen)
    wait(d, "the state to show 3", lambda: '"value": 3' in text(d, "#state"))
    seen["state_after_call"] = text(d, "#state")
    seen["state_meta_after_call"] = text(d, "#state-meta")
    seen["changed_after_call"] = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#state li.changed")]
    # A key typed into the screen panel goes to the Tick.
    d.find_element(By.ID, "screen").click()
    d.find_element(By.ID, "screen").send_keys("+")
    seen["screen_after_key"] = wait_text(d, "#screen", "Counter: 4")
    wait(d, "the state to show 4", lambda: '"value": 4' in text(d, "#state"))
    # Bad args: the host refuses them and the form shows its message.
    amount.clear()
    d.find_element(By.CSS_SELECTOR, 'form[data-tool="increment"] input.as-json').click()
    area = d.find_element(By.CSS_SELECTOR, 'form[data-tool="increment"] textarea.args-json')
    area.clear()
    area.send_keys('{"amount": "many"}')
    call(d, "increment")
    wait(d, "the host's refusal", lambda: "refused" in outcome(d, "increment"))
    seen["bad_args_outcome"] = outcome(d, "increment")
    seen["confirm_shown_for_bad_args"] = d.find_element(By.ID, "confirm").is_displayed()
    wait(d, "the call in the timeline", lambda: "tick/call" in text(d, "#frames"))
    seen["timeline"] = text(d, "#frames")
    seen["title"] = d.title
    # The scenario export, fetched with the token and saved.
    d.find_element(By.ID, "export-scenario").click()
    seen["scenario_export"] = wait(d, "the scenario's download", lambda: downloaded("inspect.scenario.toml"))
    d.save_screenshot(shot)
    return seen


def hostile(d, url):
    seen = {}
    d.get(url)
    wait(d, "the hostile Tick's tools", lambda: d.find_elements(By.CSS_SELECTOR, 'form[data-tool="echo"]'))
    wait(d, "the hostile screen", lambda: "SCREEN" in text(d, "#screen"))
    d.find_element(By.CSS_SELECTOR, 'form[data-tool="echo"] input[name="x"]').send_keys("hi")
    call(d, "echo")
    wait(d, "echo's result", lambda: "ok in" in outcome(d, "echo"))
    call(d, "fail")
    wait(d, "fail's error", lambda: "error -32000" in outcome(d, "fail"))
    seen["title_shown"] = text(d, "#tick-title")
    seen["tools_text"] = text(d, "#tools")
    seen["state_text"] = text(d, "#state")
    seen["screen_text"] = text(d, "#screen")
    seen["fail_outcome"] = outcome(d, "fail")
    seen["pwned"] = d.execute_script("return window.__pwned === undefined ? null : String(window.__pwned)")
    seen["document_title"] = d.title
    seen["scripts"] = d.execute_script("return document.scripts.length")
    seen["imgs"] = d.execute_script("return document.images.length")
    seen["svgs"] = d.execute_script("return document.getElementsByTagName('svg').length")
    return seen


def trimmed(d, url, control):
    seen = {}
    d.get(url)
    seen["trimmed_note"] = wait_text(d, "#state-trimmed", "/log")
    seen["trimmed_marks"] = len(d.find_elements(By.CSS_SELECTOR, "#state li.trimmed"))
    # The counter's whole state: its panel shows no note.
    d.get(control)
    wait(d, "the counter's state", lambda: '"value": 0' in text(d, "#state"))
    seen["control_note_shown"] = d.find_element(By.ID, "state-trimmed").is_displayed()
    return seen


def live(d, url, stop_file, name):
    seen = {}
    d.get(url)
    seen["first_screen"] = wait_text(d, "#screen", "Counter: 0")
    seen["target"] = wait_text(d, "#target", "@" + name)
    seen["timeline_title"] = text(d, "#timeline-title")
    seen["timeline_note"] = text(d, "#timeline-note")
    seen["audit_link_shown"] = d.find_element(By.ID, "export-audit").is_displayed()
    seen["no_audit"] = text(d, "#no-audit")
    increment_by_three(d, seen)
    seen["state_after_call"] = wait_text(d, "#state", '"value": 3')
    # A key typed into the screen panel goes to the live Tick.
    d.find_element(By.ID, "screen").click()
    d.find_element(By.ID, "screen").send_keys("+")
    seen["screen_after_key"] = wait_text(d, "#screen", "Counter: 4")
    seen["state_after_key"] = wait_text(d, "#state", '"value": 4')
    wait(d, "the call in the timeline", lambda: "call" in text(d, "#frames"))
    seen["timeline"] = text(d, "#frames")
    # The end: the instance is stopped from outside, the page says so.
    open(stop_file, "w").close()
    seen["ended"] = wait_text(d, "#status", "ended")
    return seen


def crossport(d, opened, witness, control):
    seen = {}
    # The --open file forwards to the printed URL, token in its fragment.
    d.get("file://" + opened)
    seen["first_screen"] = wait_text(d, "#screen", "Counter: 0")
    seen["address_bar"] = d.current_url
    # The token used for an action (a POST), not only the event stream.
    d.find_element(By.ID, "screen").click()
    d.find_element(By.ID, "screen").send_keys("+")
    seen["screen_after_key"] = wait_text(d, "#screen", "Counter: 1")
    # A reload: the address bar has no token left; the tab's storage of
    # this origin has it, and the page works on.
    d.refresh()
    seen["screen_after_reload"] = wait_text(d, "#screen", "Counter: 1")
    d.find_element(By.ID, "screen").click()
    d.find_element(By.ID, "screen").send_keys("+")
    seen["screen_after_reload_and_key"] = wait_text(d, "#screen", "Counter: 2")
    seen["page_cookies"] = d.execute_script("return document.cookie")
    # The control: a cookie on the inspector's origin, SameSite=Strict as
    # the token's cookie was, which the witness must receive.
    d.execute_script("document.cookie = arguments[0] + '; Path=/; SameSite=Strict'", control)
    seen["page_cookies_with_control"] = d.execute_script("return document.cookie")
    # Another port, navigated to by the page, then as if typed.
    d.execute_script("location.assign(arguments[0])", witness + "/from-the-page")
    wait(d, "the witness (from the page)", lambda: d.title == "witness")
    d.get(witness + "/typed")
    wait(d, "the witness (typed)", lambda: d.title == "witness" and d.current_url.endswith("/typed"))
    return seen


def main():
    mode, url = sys.argv[1], sys.argv[2]
    try:
        d = browser()
    except BaseException:
        shutil.rmtree(SCRATCH, ignore_errors=True)
        raise
    try:
        if mode == "counter":
            seen = counter(d, url, sys.argv[3])
        elif mode == "trimmed":
            seen = trimmed(d, url, sys.argv[3])
        elif mode == "live":
            seen = live(d, url, sys.argv[3], sys.argv[4])
        elif mode == "crossport":
            seen = crossport(d, url, sys.argv[3], sys.argv[4])
        else:
            seen = hostile(d, url)
    finally:
        d.quit()
        shutil.rmtree(SCRATCH, ignore_errors=True)
    print(json.dumps(seen))


main()
