"""Load generation: the scenario file format, the Python open-loop replayer, and the Gatling
simulation (a Maven project in this folder) that replays the same file.
"""
