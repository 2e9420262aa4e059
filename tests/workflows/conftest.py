"""The hubs this folder's tests run against (``hub``, ``strict_hub``): tests/support/hub_fixtures.py,
shared by every folder whose tests use one."""

from support.hub_fixtures import hub, strict_hub  # noqa: F401  (fixtures, found by name)
