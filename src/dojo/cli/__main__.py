"""``python -m dojo.cli``: the same as the ``dojo`` command."""

from dojo.cli import app

app()
