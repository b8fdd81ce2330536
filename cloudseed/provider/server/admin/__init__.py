"""The operator's side of the server, on the admin listener.

``admin_app`` (the ``/v1/instances`` REST API, ``/metrics``, ``/health``, and the routing of the
rest), ``admin_events`` (an instance's timeline of events), ``admin_provisioning`` (what the
instances reported of their boots), ``fleet_page`` (the fleet pages) with ``timeline_svg`` (a boot
drawn on a time axis, also used by the lab's report), ``openapi`` (the admin API's description).
"""
