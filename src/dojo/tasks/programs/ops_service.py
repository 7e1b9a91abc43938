"""A small HTTP service. Usage: python3 -I service/app.py --config FILE (.json, .ini or .toml).

Settings (every format; see the task for which it must set):
  name (text), port (int, 1024-65535), workers (int, 1-64), log_level (debug|info|warning|error),
  features (a list of names), data_dir (a directory holding items.csv, relative to the start dir)
JSON: one object of the settings. INI: a [service] section; features as a comma-separated list.
TOML: [service] name, port; [runtime] workers, log_level; [features] enabled = [...];
[data] dir = "...". An unknown setting, a missing required one (name, port) or a wrong type
stops the service with an error.
"""

import argparse
import configparser
import json
import os
import sys
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TYPES = {"name": str, "port": int, "workers": int, "log_level": str, "features": list, "data_dir": str}


def load(path: str) -> dict[str, Any]:
    with open(path) as f:
        text = f.read()
    settings: Any
    if path.endswith(".json"):
        settings = json.loads(text)
    elif path.endswith(".ini"):
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
        if parser.sections() != ["service"]:
            raise ValueError("an INI configuration has one section, [service]")
        settings = dict(parser["service"])
        for key in ("port", "workers"):
            if key in settings:
                settings[key] = int(settings[key])
        if "features" in settings:
            settings["features"] = [f.strip() for f in settings["features"].split(",") if f.strip()]
    elif path.endswith(".toml"):
        raw = tomllib.loads(text)
        unknown = set(raw) - {"service", "runtime", "features", "data"}
        if unknown:
            raise ValueError(f"unknown section(s): {sorted(unknown)}")
        settings = {**raw.get("service", {}), **raw.get("runtime", {})}
        if "features" in raw:
            settings["features"] = raw["features"].get("enabled", [])
        if "data" in raw:
            settings["data_dir"] = raw["data"].get("dir")
    else:
        raise ValueError("the configuration must be a .json, .ini or .toml file")
    if not isinstance(settings, dict):
        raise ValueError("the configuration must be a mapping of settings")
    for key, value in settings.items():
        if key not in TYPES:
            raise ValueError(f"unknown setting {key!r}")
        if type(value) is not TYPES[key]:
            raise ValueError(f"{key} must be a {TYPES[key].__name__}")
    for key in ("name", "port"):
        if key not in settings:
            raise ValueError(f"missing setting {key!r}")
    if not 1024 <= settings["port"] <= 65535:
        raise ValueError("port must lie in 1024-65535")
    if not 1 <= settings.get("workers", 1) <= 64:
        raise ValueError("workers must lie in 1-64")
    if settings.get("log_level", "info") not in ("debug", "info", "warning", "error"):
        raise ValueError("log_level must be debug, info, warning or error")
    return settings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    try:
        settings = load(args.config)
        items = 0
        if "data_dir" in settings:
            with open(os.path.join(settings["data_dir"], "items.csv")) as f:
                items = sum(1 for line in f if line.strip()) - 1  # a header line
    except (OSError, ValueError) as e:
        sys.exit(f"app: cannot start: {e}")
    health = {
        "status": "ok",
        "name": settings["name"],
        "port": settings["port"],
        "workers": settings.get("workers", 1),
        "log_level": settings.get("log_level", "info"),
        "features": sorted(settings.get("features", [])),
        "items": items,
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/health":
                self.send_error(404)
                return
            body = json.dumps(health).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", settings["port"]), Handler).serve_forever()


if __name__ == "__main__":
    main()
