"""The ``verifiers.envs.experimental`` module paths of verifiers 0.1.11+: ``gym_env``
(``GymEnv``), ``mcp_env`` (``MCPEnv``) and ``sandbox_mixin``. Harness environments of that
package (CLI agents, Harbor, browser, OpenEnv) are not part of this SDK; importing one fails
with a message naming what is missing."""
