"""Upstream 0.3's ``verifiers.v1.utils`` module paths, which tasksets import by name
(``utils.loaders``, ``utils.image``); each module here has one job."""
