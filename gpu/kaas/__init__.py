"""Kernel-as-a-Service on the GPU pool: kTasks, graphs of kernels over keyed buffers.

A client sends a kTask (``format``: JSON, validated with developer errors) instead of code; one
executor per device (``executor``) runs any client's kTasks with built-in torch kernels
(``kernels``) or CUDA source, reads inputs from and writes outputs to the data layer (``store``)
and keeps constant buffers resident by key and version (``constants``); ``placement`` picks the
device. Pure modules: ``spec``, ``catalogue``, ``format``, ``placement``, ``constants``.
"""
