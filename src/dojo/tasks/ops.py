"""``family:ops``: procedural operations tasks: configure a small HTTP service and start it, in the
task's shell; graded by the service's health endpoint and by its configuration as parsed.

Each task's tree holds ``service/app.py`` (``dojo.tasks.programs.ops_service``: the same small
service in every task; it reads a configuration file, refuses to start on an unknown setting, a
missing one or a wrong type, and answers ``GET /health`` with the settings it runs with) and, from
the middle difficulty, a seed data file the service must find in its data directory. The job: write
the configuration the request asks for, in the format the level asks for, and start the service so
that it keeps running after the script ends. The generator knows every value, so the checks
(``dojo.rewards.shell``) are exact:

- the configuration file parses (JSON, INI or TOML) and sets the asked values;
- ``GET /health`` on the asked port answers 200 with those values (and the data's item count), from
  ``python3 -I service/app.py --config <file>`` (the command line read from ``/proc``);
- the service's code and the seed data are untouched (guards: same content, and no change to the
  file while the script ran).

Difficulty: 0-0.33 a JSON file with three settings; 0.34-0.66 an INI file with five, including a
list; 0.67-1 a TOML file in sections with six, and the data directory to create and seed.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from dojo.tasks.families import difficulty_level, register_family
from dojo.tasks.model import Task, TaskMetadata, TestCase, Workspace
from dojo.tasks.programs import program_source

NAMES = ("inventory", "billing", "search", "ledger", "catalog", "notifier", "gateway", "scheduler")
LEVELS = ("debug", "info", "warning", "error")
FEATURES = ("cache", "metrics", "audit", "compress", "retry", "tracing")
FORMATS = ("json", "ini", "toml")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _config_text(fmt: str, s: dict[str, Any]) -> str:
    """The configuration in ``fmt``, as the reference writes it."""
    if fmt == "json":
        return json.dumps(s, indent=2) + "\n"
    if fmt == "ini":
        lines = ["[service]"] + [f"{k} = {', '.join(v) if isinstance(v, list) else v}" for k, v in s.items()]
        return "\n".join(lines) + "\n"
    service = f'[service]\nname = "{s["name"]}"\nport = {s["port"]}\n'
    runtime = f'\n[runtime]\nworkers = {s["workers"]}\nlog_level = "{s["log_level"]}"\n'
    features = f"\n[features]\nenabled = {json.dumps(s['features'])}\n"
    data = f'\n[data]\ndir = "{s["data_dir"]}"\n'
    return service + runtime + features + data


def _values(fmt: str, s: dict[str, Any]) -> dict[str, Any]:
    """What the configuration must set, as the check parses it (dotted keys; INI values are text)."""
    if fmt == "json":
        return dict(s)
    if fmt == "ini":
        return {f"service.{k}": str(v) if not isinstance(v, list) else None for k, v in s.items() if k != "features"}
    return {
        "service.name": s["name"], "service.port": s["port"], "runtime.workers": s["workers"],
        "runtime.log_level": s["log_level"], "features.enabled": s["features"], "data.dir": s["data_dir"],
    }  # fmt: skip


class OpsFamily:
    """See the module doc."""

    name = "ops"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level = difficulty_level(difficulty, 3)
        fmt = FORMATS[level]
        name = rng.choice(NAMES)
        port = rng.randint(8000, 8999)
        settings: dict[str, Any] = {"name": name, "port": port, "workers": rng.randint(2, 16)}
        if level >= 1:
            settings["log_level"] = rng.choice(LEVELS)
            settings["features"] = sorted(rng.sample(FEATURES, rng.randint(1, 3)))
        app = program_source("ops_service")  # the service (dojo.tasks.programs.ops_service)
        files = {"service/app.py": app}
        data_dir = f"data/{name}"
        items = 0
        if level >= 2:
            settings["data_dir"] = data_dir
            items = rng.randint(3, 12)
            rows = [f"{i},{rng.choice(FEATURES)}-{rng.randint(100, 999)},{rng.randint(1, 99)}" for i in range(items)]
            files["seed/items.csv"] = "id,sku,quantity\n" + "\n".join(rows) + "\n"
        config = f"service/config.{fmt}"
        command = ["-I", "service/app.py", "--config", config]
        health = {"status": "ok", "name": name, "port": port, "workers": settings["workers"],
                  "log_level": settings.get("log_level", "info"), "features": settings.get("features", []),
                  "items": items}  # fmt: skip
        values = {k: v for k, v in _values(fmt, settings).items() if v is not None}
        checks: list[dict[str, Any]] = [
            {"path": config, "format": fmt, "values": values},
            {"probe": {"port": port, "path": "/health", "wait": 5}, "status": 200, "json": health, "command": command},
        ]
        for path, text in files.items():  # the service's code and the seed stay as they are
            checks.append({"path": path, "sha256": sha(text), "guard": True})
            checks.append({"path": path, "untouched": True, "guard": True})
        asks = [f"name {name}", f"port {port}", f"{settings['workers']} workers"]
        if level >= 1:
            asks += [f"log level {settings['log_level']}", f"features {', '.join(settings['features'])}"]
        if level >= 2:
            asks.append(f"its data in {data_dir}/ (create it, with a copy of seed/items.csv as items.csv)")
        prompt = (
            f"In this directory, service/app.py is a small HTTP service (its docstring describes its settings and "
            f"their formats). Deploy it: write its configuration to {config} ({fmt.upper()}) with "
            f"{'; '.join(asks)}. Then start it from this directory with\n    python3 {' '.join(command)}\n"
            "in the background, so that it keeps running after your script ends and answers GET /health on "
            f"127.0.0.1:{port}. Do not change service/app.py. Answer with a bash script in a ```bash block; it "
            "runs in that directory.\n\n" + app.split('"""')[1]
        )
        script = ["set -e"]
        if level >= 2:
            script += [f"mkdir -p {data_dir}", f"cp seed/items.csv {data_dir}/items.csv"]
        script += [f"cat > {config} <<'EOF'\n{_config_text(fmt, settings)}EOF",
                   f"nohup python3 {' '.join(command)} > service/app.log 2>&1 &"]  # fmt: skip
        return Task(
            id="ops",
            domain="operations",
            form="shell",
            language="bash",
            prompt=prompt,
            tests=[TestCase(expected=c, visible=not c.get("guard")) for c in checks],  # what failed is feedback
            reference="```bash\n" + "\n".join(script) + "\n```",
            workspace=Workspace(files=files, editable=["*"], protected=[]),
            metadata=TaskMetadata(source="family:ops", difficulty=round(difficulty, 3), tags=[f"config:{fmt}"]),
        )


register_family(OpsFamily())
