"""``python -m cloudseed`` runs the command line."""

from cloudseed.cli import main

raise SystemExit(main())
