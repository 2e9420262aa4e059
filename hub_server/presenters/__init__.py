"""Rows into what clients see: the wire models of hub_protocol.wire and the HTML templates."""
