"""Finding an environment by its id (``name``, ``owner/name``, ``@version``) and loading it:
the id's grammar (``env_id``, shared with the hub) and the lookup (``loader``) that checks a
package's owner and version before any of its code runs.
"""
