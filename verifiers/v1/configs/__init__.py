"""The v1 configs: what a run, an env, a taskset, a task, an agent and its harness accept
(pydantic models that refuse unknown keys, read from TOML, flags or the env-server wire)."""
