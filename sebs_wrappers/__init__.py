"""SeBS benchmarks as OpenWhisk actions, their object store, and the paper's experiment runner.

The benchmark code comes from the published ``serverless-benchmarks`` distribution and is
packaged as data: it is located with ``importlib.util.find_spec("sebs")`` and never imported
(``import sebs`` pulls in docker and cloud SDKs).
"""
