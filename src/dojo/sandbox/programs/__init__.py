"""Programs that run inside the sandbox for ``dojo.sandbox`` itself, shipped from their own files
(``dojo.sandbox.bundle``): a strict run's Python (``python_main``, the ``-c`` text that runs
``main.py``).

The host never imports them: each imports only the standard library and the shared modules it is
shipped with.
"""
