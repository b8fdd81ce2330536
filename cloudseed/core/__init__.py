"""The bottom layer, shared by the agent, the network code and the provider side.

``root``: the target-root layer (every file write and command). ``http``: the one HTTP client
(total deadline, size limit, redirect policy). ``values``: reading cloud-config values
(booleans as users write them, a scalar or a list). Nothing here imports from the rest of
cloudseed.
"""
