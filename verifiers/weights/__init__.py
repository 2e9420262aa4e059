"""Weight updates, from the trainer into a running inference server: one home for both sides.

- ``access``: who may change the served weights (the launch secret, trusted directories)
- ``protocol``: the route bodies; ``receiver``: vf-serve's side of a broadcast
- ``group``: the trainer↔server process group and the tensor manifest both check
- ``transport``: the trainer's side (filesystem reload, gloo/NCCL broadcast)
- ``vllm_routes`` / ``vllm_worker``: the same API added to vLLM's own server

``verifiers.serve`` and ``verifiers.rl`` both depend on this package and not on each other.
"""
