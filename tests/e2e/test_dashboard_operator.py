"""An operator's day with the dashboard, in a real browser against a real `ticklock serve` (issue 46): a
hold shown as held with Resume beside it, ended from the page; a timezone changed from the command line and
seen on the page; the fires to come as the engine will run them; the end of 10,000 jobs reached with an
address that does not grow; sorting by next fire with paused jobs last; the failing filter's badges; and
the small things an operator trips on (a name's rule in words, a taken name by its field, a trigger's run
shown at once, no refused request before the login form, a chart's labels readable on a phone); the overview's
first alerts with a link to the rest."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import Tab
from tests.e2e.conftest import Serve, run_cli, wait_for

pytestmark = [pytest.mark.e2e]
EVERY_MINUTE = {"kind": "cron", "expr": "0 * * * * *", "timezone": "Europe/Berlin"}


def test_a_hold_is_shown_as_held_and_ended_from_the_page_and_a_cli_edit_shows(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start()
    job = serve.create(name="nightly-export", handler="test.record", schedule=EVERY_MINUTE)
    until = (datetime.now(UTC) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    t = tab(serve)
    page = t.open(f"/jobs/{job['id']}")
    page.locator("#pause").click()
    dialog = page.locator("dialog[open]")
    dialog.locator("#ask-note").fill("storage migration")
    dialog.locator("#ask-until").fill(until)
    dialog.locator("#ask-ok").click()
    expect(page.locator("h1 .badge").first).to_have_text("held")
    expect(page.locator("#hold")).to_contain_text("Held until")
    expect(page.locator("#hold")).to_contain_text("storage migration")
    expect(page.locator("#resume")).to_be_visible()  # a hold can be ended here
    # the fires it keeps back are marked, and the first that runs is the one it resumes at
    held = serve.client.get(f"/jobs/{job['id']}").json()
    expect(page.locator('#upcoming tr[data-status="held"]').first).to_be_attached()
    first_due = page.locator('#upcoming tr[data-status="due"]').first
    expect(first_due).to_contain_text(held["next_run_at"][11:19])
    expect(page.locator("#next-fire")).to_contain_text(held["next_run_at"][11:19])

    t.open("/jobs?state=held")
    expect(page.locator("#jobs tbody tr")).to_have_count(1)
    expect(page.locator("#jobs tbody tr")).to_contain_text("held")
    page.locator("#jobs a", has_text="nightly-export").click()
    page.locator("#resume").click()
    expect(page.locator("h1 .badge").first).to_have_text("enabled")
    expect(page.locator("#pause")).to_be_visible()
    assert serve.client.get(f"/jobs/{job['id']}").json()["state"] == "enabled"

    # only the zone changes, from the command line; the page shows the new zone and the same expression
    edited = run_cli("jobs", "edit", "nightly-export", "--tz", "Asia/Tokyo", "--api", serve.url)
    assert edited.returncode == 0, edited.stderr
    page.reload()
    expect(page.locator("main")).to_contain_text("Asia/Tokyo")
    expect(page.locator("#upcoming thead")).to_contain_text("Asia/Tokyo")
    expect(page.locator("main")).to_contain_text("0 * * * * *")
    assert serve.client.get(f"/jobs/{job['id']}").json()["schedule"]["expr"] == "0 * * * * *"
    assert t.errors == []


def test_the_end_of_ten_thousand_jobs_with_an_address_that_does_not_grow(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start()
    for batch in range(10):
        jobs = [{"name": f"bulk-{batch:02d}-{i:04d}", "handler": "test.record",
                 "schedule": {"kind": "interval", "seconds": 86_400}} for i in range(1000)]  # fmt: skip
        assert serve.client.post("/jobs:batch", json={"jobs": jobs}).status_code == 201
    total = serve.client.get("/overview").json()["jobs"]["total"]
    t = tab(serve)
    page = t.open("/jobs?limit=500")
    expect(page.locator("#jobs tbody tr")).to_have_count(500)
    rows = page.locator("#jobs tbody tr")
    first = page.locator("#jobs tbody tr a").first  # the first job's name: each page's is another
    lengths, seen = [], 500
    while page.locator("#next").is_enabled():
        shown = first.inner_text()
        page.locator("#next").click()
        expect(first).not_to_have_text(shown)  # the next page is drawn
        seen += rows.count()
        lengths.append(len(page.url))
    assert seen == total and len(lengths) >= 19, (seen, total, len(lengths))
    assert max(lengths) - min(lengths) <= 16, lengths  # one cursor, not the trail of every page
    page.reload()  # the address alone reloads the page it names
    expect(rows.last).to_contain_text("bulk-09-0999")
    last_first = first.inner_text()
    page.locator("#prev").click()  # the way back comes from the tab's history, not the address
    expect(first).not_to_have_text(last_first)
    expect(rows).to_have_count(500)
    assert t.errors == []


def test_sorting_by_next_fire_puts_paused_jobs_last_and_failing_rows_say_so(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start()
    for i in range(6):
        made = serve.create(
            name=f"sorted-{i}", handler="test.record", schedule={"kind": "interval", "seconds": 600 + i}
        )
        if i % 2:
            serve.client.post(f"/jobs/{made['id']}/pause")
    failing = serve.create(name="sorted-fails", handler="test.fail", schedule={"kind": "interval", "seconds": 1})
    wait_for(lambda: serve.client.get(f"/jobs/{failing['id']}").json()["conditions"] == ["failing"])
    serve.client.post(f"/jobs/{failing['id']}/pause")
    t = tab(serve)
    page = t.open("/jobs?q=sorted")
    page.locator('[data-sort="next_run_at"]').click()
    expect(page.locator('th[aria-sort="ascending"] [data-sort="next_run_at"]')).to_be_visible()  # drawn so
    rows = page.locator("#jobs tbody tr")
    expect(rows).to_have_count(7)
    states = [rows.nth(i).locator("[data-state]").get_attribute("data-state") for i in range(7)]
    assert states == ["enabled"] * 3 + ["paused"] * 4, states

    t.open("/jobs?state=failing")
    row = page.locator("#jobs tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator(".states .badge")).to_have_text(["paused", "failing"])  # its state, then the condition
    assert t.errors == []


def test_the_small_things_an_operator_trips_on(start: Callable[..., Serve], tab: Callable[..., Tab]) -> None:
    serve = start()
    taken = serve.create(name="taken", handler="test.record", schedule={"kind": "interval", "seconds": 3600})
    t = tab(serve)
    page = t.open("/new")
    assert page.locator("#f-handler").input_value() == ""  # no handler chosen for the user
    assert page.locator("#f-timeout").input_value() == "60"  # the API's default
    page.locator("#f-name").fill("-starts-badly")
    page.locator("#f-handler").select_option("test.record")
    page.locator("#save").click()
    expect(page.locator("#err-name")).to_contain_text("must start with a letter or a digit")
    expect(page.locator("#err-name")).not_to_contain_text("^")
    page.locator("#f-name").fill("taken")
    page.locator("#save").click()
    expect(page.locator("#err-name")).to_contain_text("already exists")  # beside Name, not at the foot
    expect(page.locator("#form-error")).to_have_text("")

    # a trigger's run shows at the page's next second, not at its next 5 s refresh (the page's clock is the
    # test's: the run is waited for on the server, then the page is given one second)
    page.clock.install()
    page = t.open(f"/jobs/{taken['id']}")
    expect(page.locator("#no-runs")).to_be_visible()
    page.locator("#trigger").click()
    expect(page.locator(".toast")).to_contain_text("a run is due now")
    wait_for(lambda: [e for e in serve.executions(taken["id"]) if e["status"] == "success"])
    page.clock.run_for(1_100)
    expect(page.locator("#executions tbody tr").first).to_contain_text("manual")
    expect(page.locator("section h2", has_text=re.compile(r"^The last 1 fire$"))).to_have_count(1)
    assert t.errors == []


def test_a_token_service_asks_for_the_token_without_a_refused_request(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start(TICKLOCK_API_TOKEN="s3cret-token")
    t = tab(serve)
    refused: list[str] = []
    t.page.on("response", lambda r: refused.append(r.url) if r.status == 401 else None)
    page = t.open("/jobs")
    expect(page.locator("h1")).to_have_text("Log in")
    page.locator("#token").fill("wrong")
    page.locator("button[type=submit]").click()
    expect(page.locator(".form-error")).to_contain_text("refused")
    expect(page.locator("#logout")).to_be_hidden()  # nobody is logged in
    page.locator("#token").fill("s3cret-token")
    page.locator("button[type=submit]").click()
    expect(page.locator("h1")).to_have_text("Jobs")
    expect(page.locator("#logout")).to_be_visible()
    assert refused == []
    assert t.errors == []


def test_a_charts_labels_are_readable_on_a_phone(start: Callable[..., Serve], tab: Callable[..., Tab]) -> None:
    serve = start()
    serve.create(name="ticking", handler="test.record", schedule={"kind": "interval", "seconds": 1})
    t = tab(serve, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = t.open("/")
    expect(page.locator("#activity text").first).to_be_attached()
    heights = page.evaluate(
        "[...document.querySelectorAll('#activity text')].map(e => e.getBoundingClientRect().height)"
    )
    assert heights and min(heights) >= 9, heights
    assert t.errors == []


def test_the_overview_lists_the_first_alerts_and_links_to_the_rest(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start()
    second = {"kind": "interval", "seconds": 1}
    alarm = {"failures_in_a_row": 1}
    made = [serve.create(name=f"alarm-{i:02}", handler="test.fail", schedule=second, alerts=alarm) for i in range(23)]
    for job in made:
        url = f"/jobs/{job['id']}"

        def raised(url: str = url) -> bool:
            return bool(serve.client.get(url).json()["open_alerts"])

        wait_for(raised)
        serve.client.post(f"{url}/pause")  # the alert stays raised
    t = tab(serve)
    page = t.open("/")
    expect(page.locator("#alerts li")).to_have_count(20)  # the overview's default
    expect(page.locator("#alerts li a").first).to_have_text("alarm-00")
    more = page.locator("#alerts-more a")
    expect(more).to_have_text("3 more jobs alerting")
    more.click()
    expect(page.locator("#jobs tbody tr")).to_have_count(23)
    assert t.errors == []


def test_a_jittered_jobs_next_fire_is_its_slot_on_both_pages_with_the_jitter_said(
    start: Callable[..., Serve], tab: Callable[..., Tab]
) -> None:
    serve = start()
    job = serve.create(name="jittered", handler="test.record", schedule={"kind": "interval", "seconds": 3600},
                       policy={"max_jitter": 600.0})  # fmt: skip
    first = serve.client.get(f"/jobs/{job['id']}/upcoming").json()["fires"][0]
    jitter = (datetime.fromisoformat(first["starts_at"]) - datetime.fromisoformat(first["at"])).total_seconds()
    assert jitter > 0, first
    t = tab(serve)
    page = t.open("/jobs?q=jittered")
    slot = job["next_run_at"][11:19]
    expect(page.locator("#jobs tbody tr time").first).to_have_attribute("title", re.compile(slot))
    page = t.open(f"/jobs/{job['id']}")
    expect(page.locator("#next-fire")).to_contain_text(slot)
    expect(page.locator("#next-fire")).to_contain_text(f"starts {jitter:.3f} s later: jitter")
    assert t.errors == []
