"""GPU model-cache pool: devices, model cache, LALB/O3 and KaaS schedulers, workers, client.

Importing the package imports no torch; only the device workers (``gpu.device_process``) and the
action-side client (``gpu.client``) need it. See docs/gpu.md.
"""
