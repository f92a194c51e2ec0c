"""The Docker backend: action containers through the Docker Engine API (dockerd, Podman).

``backend.py`` (:class:`~containers.docker.backend.DockerBackend` and its containers),
``engine.py`` (the Engine API calls, over ``aiodocker``), ``logs.py`` (reading a
container's log), ``netns.py`` (connections made inside a container's network namespace),
``local.py`` (the local stand-ins for the official runtime images). Nothing is imported
here: the registry (:mod:`containers.registry`) loads a backend only when it is chosen.
"""
