"""CLI sub-commands; each module's `register(subparsers)` adds its parser.

The top layer (with `cli.py`): may import every package; nothing imports it but `cli.py`.
"""
