"""The hub's stores: every SQL statement (SQLite or PostgreSQL; engine, schema, one repository per resource), the blob store (a directory or S3) and their timestamps."""
