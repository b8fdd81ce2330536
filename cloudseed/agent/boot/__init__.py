"""The boot engine: how a boot runs the agent's stages, in order, once per boot.

``stages`` runs a stage (``run_all``, ``run_handed_off``, one stage per unit), ``stage_local`` the
local stage, ``instances`` finds and adopts the instance, ``userdata_stage`` consumes user-data,
``boot_state`` carries one boot's state between stages, ``handoff`` lets later units hand their stage
to the boot's one agent process, ``lock`` keeps one agent at a time, ``detect`` and
``generator_shell`` decide whether the agent runs at all, ``sshd_order`` whether a reboot's sshd
waits, ``performance`` holds the boot's performance choices (preloading, priorities, page-cache
read-ahead), ``strict`` fails a boot closed.
"""
