#!/usr/bin/env python
"""Django's command-line utility for Pagoda: puts platform/ on sys.path, then runs the command."""
import os
import sys
from pathlib import Path


def main() -> None:
    root = Path(__file__).resolve().parent
    sys.path.insert(0, str(root / "platform"))
    sys.path.insert(0, str(root))  # so the platform can import the engine package `inference`
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pagoda.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
