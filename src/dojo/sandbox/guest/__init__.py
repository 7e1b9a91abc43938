"""What runs inside a slot's sandbox, in its zygote and the processes it forks: standard library
only, because the sandbox's interpreter (``python3 -S -E -s``) has nothing else.

The host imports from here what both sides must agree on (``wire``: the framing and the typed
messages), so that a field renamed on one side fails type checking on the other; the slot ships
the modules to its zygote (``dojo.sandbox.slot``).
"""
