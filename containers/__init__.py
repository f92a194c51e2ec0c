"""Containers: the pool (warm reuse, prewarm, eviction, pausing) and its backends."""
