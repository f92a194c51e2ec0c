"""The foundation every part of the project stands on: OpenWhisk's wire formats and runtimes
manifest (``protocol``, ``manifest``), the message bus and the document store with their
real and embedded implementations, the injected clock, task supervision, summary statistics,
the REST client, and small command-line helpers. It imports nothing of the worker
(``invoker``), the front, the container backends, the GPU pool or the experiment tools."""
