"""The hub's domain work, below the HTTP edges: its state (hub.py), who may act, names, publishing, attachments, the SDK wheel."""
