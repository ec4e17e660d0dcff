"""The Python client against the real executable and a managed headless Chromium: a full agent
loop, a Broker or a bridge killed mid-click, Lease heartbeats through 10 s idle, Artifacts
released."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest

from browser_pilot_client import (BrokerError, Client, ClientOptions, JSON, SyncClient,
                                  UnknownOutcome)
from conftest import EXECUTABLE, Pages, alive, broker_pid


def options(home: str, scope: str, **overrides: Any) -> ClientOptions:
    return ClientOptions(executable=EXECUTABLE, client_id="com.example.python-client",
                         instance_id="install:" + scope, work_scope=scope, home=home,
                         **overrides)


def ref(observation: JSON, role: str, name: str) -> int:
    return int(next(e["ref"] for e in observation["elements"]
                    if e["role"] == role and name in e.get("name", "")))


async def assert_released(client: Client, artifact: JSON) -> None:
    with pytest.raises(BrokerError) as gone:
        await client.request("artifacts/get", {"workspaceId": client.workspace_id,
                                               "leaseId": client.lease_id,
                                               "artifactId": artifact["id"]})
    assert gone.value.code == "artifact_not_found"


def test_agent_loop_observes_clicks_types_captures_and_releases_artifacts(
        browser: str, pages: Pages, tmp_path: Any) -> None:
    async def scenario() -> None:
        client = await Client.start(options(browser, "agent-loop", env=dict(
            os.environ, BROWSER_PILOT_EVENT_JOURNAL_SIZE="16")))  # the smallest: it wraps soon
        try:
            assert client.initialized["protocol"] == {"major": 1, "minor": 1}
            assert {"browser.click", "browser.type", "browser.capture"} <= set(client.tools)
            assert "browser.eval" not in client.tools  # an extra capability, not requested
            await client.call("toolu_01", "browser.connect")
            opened = await client.call("toolu_02", "browser.open", {"url": pages.url("/form")})
            assert client.target_id == opened.result["targetId"]
            seen = (await client.call("toolu_03", "browser.observe")).result

            click = {"observationId": seen["observationId"],
                     "ref": ref(seen, "checkbox", "Agree")}
            clicked = await client.call("toolu_04", "browser.click", click)
            assert clicked.command["id"] == client.command_identity("toolu_04")[0]
            assert clicked.result["evidence"]["status"] == "verified"
            # The host repeats its call: the recorded outcome, not a second click.
            again = await client.call("toolu_04", "browser.click", click)
            assert again.command == clicked.command
            typed = await client.call("toolu_05", "browser.type", {
                "observationId": clicked.result["observationId"],
                "ref": ref(clicked.result, "textbox", "Name"), "text": "Ada"})
            assert typed.result["evidence"]["status"] == "verified"
            now = (await client.call("toolu_06", "browser.observe")).result
            agree = next(e for e in now["elements"] if e["role"] == "checkbox")
            assert agree.get("checked") is True, agree

            shot = (await client.call("toolu_07", "browser.capture")).result["artifact"]
            assert (await client.read_image(shot))[:8] == b"\x89PNG\r\n\x1a\n"
            await assert_released(client, shot)
            pdf = (await client.call("toolu_08", "browser.pdf")).result["artifact"]
            path = await client.export_file(pdf, str(tmp_path / "exports"))
            with open(path, "rb") as exported:
                assert exported.read(5) == b"%PDF-"
            await assert_released(client, pdf)

            with pytest.raises(BrokerError) as missing:
                await client.call("toolu_09", "browser.click", {"observationId": "observation:0",
                                                                "ref": 1})
            assert missing.value.code == "observation_not_found" and not missing.value.retryable

            # Events: a poll does not move the cursor; acknowledging does.
            first = await client.poll_events()
            assert first.events[0]["sequence"] == 1 and not first.has_more
            assert "target.attached" in {e["type"] for e in first.events}
            assert (await client.poll_events()).events == first.events
            client.acknowledge_events(first.next_cursor)
            assert (await client.poll_events()).events == []

            # More than the journal holds past the cursor: cursor_expired, then a new baseline.
            for n in range(17):
                await client.call(f"toolu_list_{n}", "browser.tabs.list")
            with pytest.raises(BrokerError) as expired:
                await client.poll_events()
            assert expired.value.code == "cursor_expired"
            assert client.target_id is None  # rebuilt from browser.tabs.list
            tabs = (await client.call("toolu_10", "browser.tabs.list")).result["tabs"]
            assert any(tab["targetId"] == opened.result["targetId"] for tab in tabs)
            baseline = await client.reset_event_cursor()
            assert client.event_cursor == baseline
            assert (await client.poll_events()).events == []
        finally:
            assert await client.close() is None
        with pytest.raises(BrokerError) as closed:
            await client.call("toolu_11", "browser.tabs.list")
        assert closed.value.code == "workspace_not_found"

    asyncio.run(scenario())


def test_broker_killed_mid_click_is_unknown_outcome_and_recovery_starts_a_new_workspace(
        browser: str, pages: Pages) -> None:
    async def scenario() -> None:
        client = await Client.start(options(browser, "broker-loss"))
        try:
            await client.call("call-1", "browser.connect")
            await client.call("call-2", "browser.open", {"url": pages.url("/held")})
            seen = (await client.call("call-3", "browser.observe")).result
            batch = await client.poll_events()
            client.acknowledge_events(batch.next_cursor)
            old_cursor, old_workspace = client.event_cursor, client.workspace_id
            assert old_cursor != "cursor:0"

            click = asyncio.ensure_future(client.call("call-4", "browser.click", {
                "observationId": seen["observationId"],
                "ref": ref(seen, "button", "Place order")}))
            assert await asyncio.to_thread(pages.held.wait, 30), "the click never reached the page"
            broker = broker_pid(browser)
            os.kill(broker, signal.SIGKILL)
            with pytest.raises(UnknownOutcome) as unknown:
                await click
            assert unknown.value.code == "unknown_outcome" and not unknown.value.retryable
            assert unknown.value.context["reason"] == "broker_lost"  # answered by the bridge
            assert unknown.value.remediation["action"] == "inspect_state"
            pages.release()
            await asyncio.wait_for(client.wait_disconnected(), 30)
            with pytest.raises(BrokerError) as gone:
                await client.call("call-5", "browser.observe")
            assert gone.value.code == "broker_unavailable" and gone.value.retryable

            # Recover once the killed process is gone: a new bridge that reached the Broker's
            # socket sooner once answered browser_disconnected (alive but no handshake).
            while alive(broker):
                await asyncio.sleep(0.05)
            recovery = await client.recover()
            assert recovery.workspace_lost
            assert recovery.previous_workspace_id == old_workspace
            assert recovery.workspace_id == client.workspace_id != old_workspace
            assert client.event_cursor == recovery.event_cursor != old_cursor
            current = await client.request("workspaces/get", {"workspaceId": client.workspace_id})
            assert current["eventCursor"] == client.event_cursor

            # The new Workspace works, and its events are read from its own start.
            await client.call("call-6", "browser.connect")
            await client.call("call-7", "browser.open", {"url": pages.url("/form")})
            batch = await client.poll_events()
            assert batch.events[0]["sequence"] == 1
            assert {e["workspaceId"] for e in batch.events} == {client.workspace_id}
            assert pages.hits["/hold"] == 1, "the click was sent again"
        finally:
            await client.close()

    asyncio.run(scenario())


def test_bridge_killed_mid_click_is_unknown_outcome_and_recovery_keeps_the_workspace(
        browser: str, pages: Pages) -> None:
    async def scenario() -> None:
        client = await Client.start(options(browser, "bridge-loss"))
        try:
            await client.call("call-1", "browser.connect")
            await client.call("call-2", "browser.open", {"url": pages.url("/held")})
            seen = (await client.call("call-3", "browser.observe")).result
            batch = await client.poll_events()
            client.acknowledge_events(batch.next_cursor)
            cursor, workspace = client.event_cursor, client.workspace_id

            click = asyncio.ensure_future(client.call("call-4", "browser.click", {
                "observationId": seen["observationId"],
                "ref": ref(seen, "button", "Place order")}))
            assert await asyncio.to_thread(pages.held.wait, 30), "the click never reached the page"
            client.bridge.process.kill()
            with pytest.raises(UnknownOutcome) as unknown:
                await click
            assert unknown.value.context == {"reason": "bridge_lost",
                                             "commandId": client.command_identity("call-4")[0]}
            pages.release()

            # The Broker lives: the same Workspace, and events resume after the acknowledged
            # cursor. The replacement bridge reads the click's real outcome.
            recovery = await client.recover()
            assert not recovery.workspace_lost
            assert recovery.workspace_id == workspace and client.event_cursor == cursor
            command = {"commandId": client.command_identity("call-4")[0],
                       "workspaceId": client.workspace_id}
            status = ""
            while status != "completed":
                status = (await client.request("commands/get", command))["command"]["status"]
                await asyncio.sleep(0.05)
            events = (await client.poll_events()).events
            assert events[0]["sequence"] > int(cursor.split(":")[1])  # network events are gaps
            assert any(e["type"] == "command.status" and e["payload"].get("commandId")
                       == command["commandId"] for e in events), events
            assert pages.hits["/hold"] == 1, "the click was sent again"
        finally:
            await client.close()

    asyncio.run(scenario())


def test_heartbeats_keep_a_2s_lease_through_10s_idle_and_without_them_it_expires(
        home: str) -> None:
    kept = SyncClient(options(home, "kept", lease_ttl_ms=2000))
    lapsed = SyncClient(options(home, "lapsed", lease_ttl_ms=2000, heartbeats=False))
    idle_until = time.monotonic() + 10
    try:
        expired = None
        while expired is None and time.monotonic() < idle_until:
            batch = lapsed.poll_events()
            lapsed.acknowledge_events(batch.next_cursor)
            expired = next((e for e in batch.events if e["type"] == "lease.expired"), None)
            time.sleep(0.1)
        assert expired is not None, "the Lease without heartbeats never expired"
        assert expired["payload"]["leaseId"] == lapsed.client.lease_id
        with pytest.raises(BrokerError) as refused:
            lapsed.call("call-1", "browser.tabs.list")
        assert refused.value.code in ("lease_expired", "lease_not_found")

        time.sleep(max(0.0, idle_until - time.monotonic()))  # idle: only the heartbeats run
        assert kept.client.lease_lost is None
        assert kept.heartbeat()["id"] == kept.client.lease_id
        assert [e for e in kept.poll_events().events if e["type"] == "lease.expired"] == []
    finally:
        kept.close()
        lapsed.close()
