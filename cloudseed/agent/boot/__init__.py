"""The boot engine: how a boot runs the agent's stages, in order, once per boot.

``stages`` runs the stages, one way for every caller (``run_stages``: in order, asking a gate
before each later stage; the boot's hand-off, all at once and a unit's own stage are its gates and
entry points), and applies the boot's performance choices there; ``stage_local`` is the local
stage, ``instances`` finds and adopts the instance, ``userdata_stage`` consumes user-data,
``boot_state`` carries one boot's state between stages, ``handoff`` holds the gates (later units
hand their stage to the boot's one agent process), ``lock`` keeps one agent at a time, ``detect``
and ``generator_shell`` decide whether the agent runs at all, ``sshd_order`` whether a reboot's
sshd waits, ``performance`` how the performance choices work (preloading, priorities, page-cache
read-ahead), ``strict`` fails a boot closed.
"""
