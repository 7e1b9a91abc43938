"""Alert rules: they fire and resolve on what the runs and the sandbox nodes show, say so in the log and
to a webhook, and a rule file that is wrong says where."""

from __future__ import annotations

import http.server
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dojo.dashboard import AlertEngine, AlertRule, Dashboard, RunLocation, load_rules
from dojo.errors import InputError
from dojo.rollout.store import TrajectoryStore
from tests.dashboard.written_runs import write_groups


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, object]]]]:
    """A webhook receiver on loopback: its URL, and the events it was posted."""
    received: list[dict[str, object]] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_hack_wave_fires_logs_posts_and_resolves(
    tmp_path: Path, webhook: tuple[str, list[dict[str, object]]], caplog: pytest.LogCaptureFixture
) -> None:
    url, received = webhook
    store = TrajectoryStore(str(tmp_path / "s"))
    write_groups(store, 10, size=2)
    rules = [AlertRule(name="hacks", metric="hack_rate", above=0.2, window_groups=5, min_groups=5)]
    board = Dashboard([RunLocation.parse(f"r={tmp_path / 's'}")], rules=rules, webhook=url)
    board.refresh()
    assert board.engine.firing == {}
    write_groups(store, 2, size=2, hack=True)  # 2 of the last 5 groups: 0.4
    with caplog.at_level(logging.WARNING, logger="dojo.dashboard"):
        board.refresh()
    [alert] = board.engine.state()["firing"]
    assert (alert["rule"], alert["subject"], alert["value"]) == ("hacks", "run r", 0.4)
    assert "alert hacks (warning): run r: hack_rate 0.4 is above 0.2" in caplog.text
    write_groups(store, 5, size=2)  # the hacks leave the window
    board.refresh()
    assert board.engine.firing == {}
    assert [(e["state"], e["rule"]) for e in received] == [("firing", "hacks"), ("resolved", "hacks")]


def test_no_verdict_before_a_run_has_enough_groups(tmp_path: Path) -> None:
    store = TrajectoryStore(str(tmp_path / "s"))
    write_groups(store, 2, size=2, hack=True)
    rules = [AlertRule(name="h", metric="hack_rate", above=0.1)]
    board = Dashboard([RunLocation.parse(str(tmp_path / "s"))], rules=rules)
    board.refresh()
    assert board.engine.firing == {}  # 2 groups < min_groups (5): one unlucky group is no wave


def test_a_webhook_that_fails_is_counted_and_the_dashboard_goes_on(tmp_path: Path) -> None:
    engine = AlertEngine(
        [AlertRule(name="low", metric="pass_rate", below=0.9, min_groups=1)], "http://127.0.0.1:9/none"
    )
    transitions = engine.evaluate({"run a": {"pass_rate": 0.5}}, {"run a": 10.0})
    engine.post(transitions)
    assert engine.webhook_errors == 1 and len(engine.firing) == 1


def test_node_rules_look_at_each_node(tmp_path: Path) -> None:
    engine = AlertEngine([AlertRule(name="down", metric="unreachable", above=0.5)])
    engine.evaluate({"node a": {"unreachable": 1.0}, "node b": {"unreachable": 0.0}}, {})
    assert [a["subject"] for a in engine.state()["firing"]] == ["node a"]


def test_a_rule_file_replaces_the_defaults_and_errors_name_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("webhook: http://127.0.0.1:1/x\nrules:\n  - {name: slow, metric: throughput, below: 2.5}\n")
    loaded = load_rules(path)
    assert loaded.webhook == "http://127.0.0.1:1/x" and [r.name for r in loaded.rules] == ["slow"]
    path.write_text("rules:\n  - {name: x, metric: hack_rate}\n")
    with pytest.raises(InputError, match="give exactly one of above or below"):
        load_rules(path)
    path.write_text("rules:\n  - {name: x, metric: vibes, above: 1}\n")
    with pytest.raises(InputError, match=r"rules\.0\.metric"):
        load_rules(path)
    path.write_text("rules: [\n")
    with pytest.raises(InputError, match="is not YAML"):
        load_rules(path)
    with pytest.raises(InputError, match=r"the rule file '.*missing\.yaml' does not exist"):
        load_rules(tmp_path / "missing.yaml")
