"""What a lab run found, as people and CI read it: ``agent_report`` (what either agent says about
its boot), ``report`` (text and JSON), ``timeline``, ``checks`` (--expect), ``state_diff`` (two
system states compared), ``report_html`` (--html) and ``junit`` (--junit)."""
