"""What test rooms share (servers, hubs, sandboxes, trainer runs): imported as
``from support.NAME import ...``; no test file imports another test file."""
