"""Action runtimes run by the process backend: ``python_runtime.py`` (zygote + forked
containers) and ``node_runtime.js``. Both are standalone programs; this package only ships them."""
