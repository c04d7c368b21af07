#!/usr/bin/env python
"""Django's command-line utility for numaweb (`python manage.py serve` runs the product)."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "numaweb.settings")
    from django.core.management import execute_from_command_line

    from numaweb.startup import prepare

    prepare()

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
