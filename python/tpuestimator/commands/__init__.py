"""CLI sub-commands; each module's `register(subparsers)` adds its parser."""
