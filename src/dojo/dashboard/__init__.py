"""``dojo dashboard``: a live web page over runs (curves, the slowest episodes, a trajectory viewer),
the sandbox services they use, and alerts (``docs/dashboard.md``).

- ``runs``: a run's trajectory store and training metrics, read incrementally (``RunView``);
- ``fleet``: the sandbox services' ``/metrics``, scraped (``ServiceWatch``);
- ``alerts``: rules, and what fires (``AlertEngine``);
- ``app``: the page and its JSON API (``create_dashboard_app``).
"""

from dojo.dashboard.alerts import DEFAULT_RULES, AlertEngine, AlertRule, load_rules
from dojo.dashboard.app import Dashboard, create_dashboard_app
from dojo.dashboard.runs import RunLocation, RunView

__all__ = [
    "DEFAULT_RULES",
    "AlertEngine",
    "AlertRule",
    "Dashboard",
    "RunLocation",
    "RunView",
    "create_dashboard_app",
    "load_rules",
]
