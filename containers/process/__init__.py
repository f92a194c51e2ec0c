"""The process backend: action containers as local processes forked by a zygote.

``backend.py`` (:class:`~containers.process.backend.ProcessBackend` and its containers),
``claim.py`` (the host-wide claims of a name prefix and of a block of container uids).
Nothing is imported here: the registry (:mod:`containers.registry`) loads a backend only
when it is chosen.
"""
