"""One module per command-line verb; see cloudseed/cli.py."""
