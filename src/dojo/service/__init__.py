"""The sandbox over HTTP: a native API (/v1), SandboxFusion's /run_code, sessions, metrics."""

from dojo.service.app import ServiceSettings, create_app

__all__ = ["ServiceSettings", "create_app"]
