"""The embedded model: which packages and pins a machine needs to run it (``stack``, runnable
before the SDK is installed) and where its converted weights live (``models``).
"""
