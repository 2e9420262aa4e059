"""The ``prime`` subcommands, one module per group (``account``: login, whoami, token; ``env``;
``attach``: eval push, data), and what they share (``usage``: consoles, usage errors, the hub a
command talks to). ``hub_client/cli.py`` parses the command line and calls them."""
