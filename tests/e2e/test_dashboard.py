"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright, against a real
`ticklock serve` with jobs and history. Each page is loaded and used as a person would (search, filter,
sort, page, bulk-pause, a bad cron then a good one, trigger, log in), and no page may log an error (a
CSP violation, a script error, a failed request). The main pages' screenshots are saved where
``TICKLOCK_SCREENSHOTS`` says (``make screenshots`` writes the README's), else in the test's directory."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import Tab
from tests.e2e.conftest import Serve, wait_for

pytestmark = [pytest.mark.e2e]


def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TICKLOCK_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def history(serve: Serve) -> dict[str, dict[str, Any]]:
    """Jobs that run, fail and get paused, and enough runs of each to draw."""
    jobs = {
        "backup-db": serve.create(name="backup-db", handler="test.record",
                                  schedule={"kind": "cron", "expr": "*/2 * * * * *"}),
        "always-fails": serve.create(name="always-fails", handler="test.fail",
                                     schedule={"kind": "cron", "expr": "*/3 * * * * *"}),
        "report-weekdays": serve.create(name="report-weekdays", handler="test.record",
                                        schedule={"kind": "cron", "expr": "0 30 1 * * MON-FRI",
                                                  "timezone": "Europe/London"}),
        "hourly": serve.create(name="hourly", handler="test.record", schedule={"kind": "interval", "seconds": 3600}),
    }  # fmt: skip
    serve.client.post(f"/jobs/{jobs['hourly']['id']}/pause", json={"note": "until the vendor fixes their API"})
    # the README's screenshots get a minute of history; the test needs only a few runs
    wanted = 30 if os.environ.get("TICKLOCK_SCREENSHOTS") else 3
    wait_for(lambda: len(serve.executions(jobs["backup-db"]["id"])) >= wanted, timeout=wanted * 2 + 30)
    wait_for(lambda: serve.executions(jobs["always-fails"]["id"]))
    return jobs


def test_every_page_loads_and_shows_the_service(
    start: Callable[..., Serve], tab: Callable[..., Tab], tmp_path: Path
) -> None:
    serve = start()
    jobs = history(serve)
    t = tab(serve)
    folder = shots(tmp_path)

    page = t.open("/")
    expect(page.locator("h1")).to_have_text("Overview")
    counts = serve.client.get("/overview").json()["jobs"]
    expect(page.locator('[data-state="paused"] .n')).to_have_text(str(counts["paused"]))
    expect(page.locator('[data-state="failing"] .n')).to_have_text("1")
    expect(page.locator("#activity rect").first).to_be_attached()
    expect(page.locator("#failures tbody tr").first).to_contain_text("always-fails")
    expect(page.locator("#lag-p50")).not_to_have_text("—")
    page.screenshot(path=str(folder / "overview.png"), full_page=True)

    page.locator('[data-state="failing"]').click()  # a card is a link to the jobs it counts
    expect(page.locator("#jobs tbody tr")).to_have_count(1)
    expect(page.locator("#jobs tbody tr")).to_contain_text("always-fails")

    page = t.open("/jobs")
    expect(page.locator("#jobs tbody tr")).to_have_count(len(serve.client.get("/jobs").json()["items"]))
    row = page.locator("#jobs tbody tr", has_text="report-weekdays")
    expect(row).to_contain_text("at 01:30:00 on Monday to Friday, Europe/London time")
    expect(row).to_contain_text("0 30 1 * * MON-FRI")
    expect(page.locator("#jobs tbody tr", has_text="hourly")).to_contain_text("paused")
    expect(page.locator("#jobs tbody tr", has_text="backup-db")).to_contain_text("100%")
    page.screenshot(path=str(folder / "jobs.png"), full_page=True)

    page.locator("#jobs a", has_text="always-fails").click()
    expect(page.locator("h1")).to_contain_text("always-fails")
    expect(page.locator("#words")).to_have_text("every 3 seconds")
    expect(page.locator("#upcoming tbody tr")).to_have_count(20)
    expect(page.locator('#strip [data-status="failed"]').first).to_be_attached()
    expect(page.locator("#executions tbody tr").first).to_contain_text("RuntimeError")
    expect(page.locator("#lag-chart circle").first).to_be_attached()
    page.screenshot(path=str(folder / "job.png"), full_page=True)

    # a zoned job's fires in UTC and on its wall clock, with the clock change marked
    page = t.open(f"/jobs/{jobs['report-weekdays']['id']}")
    expect(page.locator("#upcoming thead")).to_contain_text("Europe/London")
    page = t.open("/new")
    expect(page.locator("#preview-words")).to_have_text("every 5 minutes")
    assert t.errors == []


def test_search_filter_sort_and_page(start: Callable[..., Serve], tab: Callable[..., Tab]) -> None:
    serve = start()
    for i in range(57):
        serve.create(name=f"{'alpha' if i % 3 == 0 else 'beta'}-{i:02d}", handler="test.record",
                     schedule={"kind": "interval", "seconds": 3600}, enabled=i % 5 != 0)  # fmt: skip
    total = len(serve.client.get("/jobs", params={"limit": 500}).json()["items"])  # and the plug-ins' system jobs
    t = tab(serve)
    page = t.open("/jobs")
    expect(page.locator("#jobs tbody tr")).to_have_count(50)
    page.locator("#next").click()
    expect(page.locator("#jobs tbody tr")).to_have_count(total - 50)
    page.locator("#prev").click()
    expect(page.locator("#jobs tbody tr")).to_have_count(50)
    expect(page.locator("#jobs tbody tr").first).to_contain_text("alpha-00")

    page.locator("#search").fill("ALPHA")
    expect(page.locator("#jobs tbody tr")).to_have_count(19)
    page.locator("#filter-state").select_option("paused")
    expect(page.locator("#jobs tbody tr")).to_have_count(len([i for i in range(0, 57, 3) if i % 5 == 0]))
    page.locator('[data-sort="name"]').click()  # ascending already: now descending
    expect(page.locator("#jobs tbody tr").first).to_contain_text("alpha-45")
    assert "q=ALPHA" in page.url and "state=paused" in page.url and "sort=-name" in page.url
    page.reload()  # the view is in the address: it survives a reload and can be shared
    expect(page.locator("#jobs tbody tr").first).to_contain_text("alpha-45")
    page.locator("#search").fill("no-such-job")
    expect(page.locator(".empty")).to_contain_text("No job matches")
    assert t.errors == []


def test_bulk_pause_asks_with_the_count_then_pauses_the_selection(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start()
    made = [serve.create(name=f"bulk-{i}", handler="test.record", schedule={"kind": "interval", "seconds": 3600})
            for i in range(5)]  # fmt: skip
    t = tab(serve)
    page = t.open("/jobs?q=bulk")
    expect(page.locator("#jobs tbody tr")).to_have_count(5)
    for job in made[:3]:
        page.locator(f'input[data-job="{job["id"]}"]').check()
    expect(page.locator("#selected-count")).to_have_text("3 selected")
    page.locator('[data-bulk="pause"]').click()
    dialog = page.locator("dialog[open]")
    expect(dialog).to_contain_text("Pause 3 jobs?")
    dialog.locator("#ask-ok").click()
    expect(page.locator(".toast")).to_contain_text("3 jobs done")
    states = {j["name"]: j["enabled"] for j in serve.client.get("/jobs", params={"q": "bulk"}).json()["items"]}
    assert states == {"bulk-0": False, "bulk-1": False, "bulk-2": False, "bulk-3": True, "bulk-4": True}
    expect(page.locator("#jobs tbody tr", has_text="bulk-0")).to_contain_text("paused")

    # cancelling changes nothing
    page.locator(f'input[data-job="{made[3]["id"]}"]').check()
    page.locator('[data-bulk="delete"]').click()
    expect(page.locator("dialog[open]")).to_contain_text("Delete 1 job?")
    page.locator("dialog[open] button[value=cancel]").click()
    assert len(serve.client.get("/jobs", params={"q": "bulk"}).json()["items"]) == 5
    assert t.errors == []


def test_create_shows_the_apis_message_by_the_field_then_previews_runs_and_triggers(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start()
    t = tab(serve)
    page = t.open("/new")
    page.locator("#f-name").fill("made-in-the-browser")
    page.locator("#f-handler").select_option("test.record")
    page.locator("[id='f-schedule.expr']").fill("0 0 25 * * *")
    error = page.locator("#err-schedule\\.expr")
    expect(error).to_contain_text("hour")  # the API's message, beside the field it names, as you type
    expect(page.locator("#preview")).to_contain_text("not valid")
    page.locator("#save").click()
    expect(error).to_contain_text("hour")
    assert serve.client.get("/jobs", params={"q": "made-in"}).json()["items"] == []

    page.locator("[id='f-schedule.expr']").fill("0 0 */6 * * *")
    expect(page.locator("#preview-words")).to_have_text("every 6 hours")
    expect(page.locator("#preview li")).to_have_count(5)
    expect(error).to_have_text("")
    page.locator("#f-payload").fill("{not json")
    page.locator("#save").click()
    expect(page.locator("#err-payload")).to_contain_text("not JSON")
    page.locator("#f-payload").fill('{"who": "browser"}')
    page.locator("#save").click()
    expect(page.locator("h1")).to_contain_text("made-in-the-browser")
    expect(page.locator("#no-runs")).to_be_visible()
    page.locator("#trigger").click()
    expect(page.locator("#executions tbody tr").first).to_contain_text("manual", timeout=20_000)
    [job] = serve.client.get("/jobs", params={"q": "made-in"}).json()["items"]
    assert (job["payload"], job["schedule"]["expr"]) == ({"who": "browser"}, "0 0 */6 * * *")

    page.locator("#edit").click()  # edit: the same form, the API's refusal by the field again
    page.locator("#f-timeout").fill("0")
    page.locator("#save").click()
    expect(page.locator("#err-timeout")).not_to_have_text("")
    page.locator("#f-timeout").fill("12")
    page.locator("#save").click()
    expect(page.locator("h1")).to_contain_text("made-in-the-browser")
    assert serve.client.get(f"/jobs/{job['id']}").json()["timeout"] == 12
    assert t.errors == []


def test_the_token_login_keeps_the_token_in_session_storage_only(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start(TICKLOCK_API_TOKEN="s3cret-token")
    t = tab(serve)
    page = t.open("/jobs")
    expect(page.locator("h1")).to_have_text("Log in")
    page.locator("#token").fill("wrong")
    page.locator("button[type=submit]").click()
    expect(page.locator(".form-error")).to_contain_text("refused")
    page.locator("#token").fill("s3cret-token")
    page.locator("button[type=submit]").click()
    expect(page.locator("h1")).to_have_text("Jobs")
    assert "s3cret" not in page.url
    assert page.evaluate("sessionStorage.getItem('ticklock.token')") == "s3cret-token"
    assert page.evaluate("localStorage.length") == 0 and "s3cret" not in page.evaluate("document.cookie")
    page.locator("#logout").click()
    expect(page.locator("h1")).to_have_text("Log in")
    assert page.evaluate("sessionStorage.getItem('ticklock.token')") is None
    assert t.errors == []


def test_a_phone_screen_and_the_keyboard(start: Callable[..., Serve], tab: Callable[..., Tab]) -> None:
    serve = start()
    job = serve.create(name="pocket", handler="test.record", schedule={"kind": "interval", "seconds": 60})
    t = tab(serve, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    for route in ("/", "/jobs", f"/jobs/{job['id']}", "/new"):
        page = t.open(route)
        expect(page.locator("h1")).not_to_have_text("Loading…")
        page.wait_for_load_state("networkidle")
        wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert wide <= 1, f"{route} scrolls sideways by {wide}px on a phone"
    page = t.open("/jobs")
    page.reload()  # a fresh load (the routes above changed only the hash, which moves focus to the content)
    expect(page.locator("#jobs")).to_be_visible()
    page.keyboard.press("Tab")  # the skip link first, then the navigation, all reachable by keyboard
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent").endswith("ticklock")
    page.locator("#search").focus()
    page.keyboard.type("pock")
    expect(page.locator("#jobs tbody tr")).to_have_count(1)
    page.locator("#jobs a", has_text="pocket").focus()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("pocket")
    assert t.errors == []


def test_a_page_left_stops_refreshing_and_one_kept_refreshes_once_a_period(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start()
    t = tab(serve)
    t.page.clock.install()  # the page's timers on a clock the test moves
    calls: list[str] = []
    t.page.on("request", lambda r: calls.append(r.url.split("?")[0].rsplit("/", 1)[-1]))
    page = t.open("/")
    expect(page.locator("h1")).to_have_text("Overview")

    def refreshed(times: int) -> bool:
        page.evaluate("1")  # lets Playwright deliver the page's events (its request events among them)
        return calls.count("overview") >= 1 + times

    for period in range(1, 4):  # each 10 s period refreshes once (not 1, 2, 4... timers piling up)
        page.clock.run_for(10_000)
        wait_for(lambda: refreshed(period))  # noqa: B023 - called at once, in this iteration
        page.wait_for_load_state("networkidle")
        assert calls.count("overview") == 1 + period, calls
    expect(page.locator("h1")).to_have_text("Overview")
    page.locator("nav a", has_text="Jobs").click()
    expect(page.locator("h1")).to_have_text("Jobs")
    calls.clear()
    page.clock.run_for(60_000)
    page.wait_for_load_state("networkidle")
    expect(page.locator("h1")).to_have_text("Jobs")  # nothing painted the overview back over it
    assert "overview" not in calls, calls
    assert t.errors == []


def test_a_jobs_actions_pause_with_a_note_resume_backfill_delete_and_a_refusal(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start()
    job = serve.create(name="act-on-me", handler="test.record", schedule={"kind": "cron", "expr": "0 * * * * *"})
    t = tab(serve)
    page = t.open(f"/jobs/{job['id']}")
    expect(page.locator("h1")).to_contain_text("act-on-me")

    page.locator("#pause").click()
    dialog = page.locator("dialog[open]")
    dialog.locator("#ask-note").fill("waiting for the vendor")
    dialog.locator("#ask-ok").click()
    expect(page.locator(".toast")).to_contain_text("Paused")
    expect(page.locator("main")).to_contain_text("waiting for the vendor")
    held = serve.client.get(f"/jobs/{job['id']}").json()
    assert (held["enabled"], held["hold"]["note"]) == (False, "waiting for the vendor")
    page.locator("#resume").click()
    expect(page.locator("#pause")).to_be_visible()
    assert serve.client.get(f"/jobs/{job['id']}").json()["enabled"] is True

    # backfill: the dry run lists the fires first; nothing runs until it is confirmed
    page.locator("#backfill").click()
    dialog = page.locator("dialog[open]")
    ten_ago = (datetime.now(UTC) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    dialog.locator("#ask-from").fill(ten_ago)  # a minutely schedule: ten past slots in the window
    dialog.locator("#ask-ok").click()
    preview = page.locator("dialog[open]")
    expect(preview.locator("h2")).to_have_text(re.compile(r"Backfill (9|10|11) fires of act-on-me\?"))
    assert serve.client.get(f"/jobs/{job['id']}").json()["backfill"] is None  # the dry run changed nothing
    count = int(preview.locator("h2").inner_text().split()[1])
    preview.locator("#ask-ok").click()
    expect(page.locator(".toast").last).to_contain_text(f"Backfill queued: {count} fires")
    wait_for(lambda: any(e["trigger"] == "backfill" for e in serve.executions(job["id"])))  # and it runs

    # a refused call shows the API's message: the job is deleted behind the page's back
    serve.client.delete(f"/jobs/{job['id']}")
    page.locator("#trigger").click()
    expect(page.locator(".toast.bad")).to_contain_text(job["id"])

    other = serve.create(name="delete-me", handler="test.record", schedule={"kind": "interval", "seconds": 60})
    page = t.open(f"/jobs/{other['id']}")
    page.locator("#delete").click()
    expect(page.locator("dialog[open]")).to_contain_text("Delete delete-me?")
    page.locator("dialog[open] #ask-ok").click()
    expect(page.locator("h1")).to_have_text("Jobs")
    assert serve.client.get(f"/jobs/{other['id']}").status_code == 404
    assert t.errors == []


def test_the_form_takes_an_interval_and_a_one_shot(start: Callable[..., Serve], tab: Callable[..., Tab]) -> None:
    serve = start()
    t = tab(serve)
    page = t.open("/new")
    page.locator("#f-name").fill("every-ninety")
    page.locator("#f-handler").select_option("test.record")
    page.locator("input[name=kind][value=interval]").check()
    page.locator("[id='f-schedule.seconds']").fill("90")
    expect(page.locator("#preview-words")).to_have_text("every 1 minute 30 seconds, from the end of the previous run")
    page.locator("#save").click()
    expect(page.locator("h1")).to_contain_text("every-ninety")

    page = t.open("/new")
    page.locator("#f-name").fill("just-once")
    page.locator("#f-handler").select_option("test.record")
    page.locator("input[name=kind][value=once]").check()
    page.locator("[id='f-schedule.at']").fill("yesterday")
    expect(page.locator("#err-schedule\\.at")).not_to_have_text("")  # the API's message, by the field
    page.locator("[id='f-schedule.at']").fill("2030-01-02T03:04:05Z")
    expect(page.locator("#preview-words")).to_have_text("once, at 2030-01-02 03:04:05 UTC")
    page.locator("#save").click()
    expect(page.locator("h1")).to_contain_text("just-once")
    kinds = {j["name"]: j["schedule"]["kind"] for j in serve.client.get("/jobs").json()["items"]}
    assert (kinds["every-ninety"], kinds["just-once"]) == ("interval", "once")
    assert t.errors == []
