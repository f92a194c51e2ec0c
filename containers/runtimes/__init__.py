"""Action runtimes: ``python_runtime.py`` (the process backend's zygote + forked containers),
``node_runtime.js``, and ``docker_entry.py`` (their entrypoint in the Docker backend's local
images). They are standalone programs; this package only ships them."""
