"""The hub's metadata storage: connections (``engine``), schema migrations (``schema``) and the
repository that owns every SQL statement (``repository``)."""
