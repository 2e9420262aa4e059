"""One router per resource; each reads the hub from ``request.app.state.hub``."""
