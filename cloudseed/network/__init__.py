"""One network model, its parsers (v1, v2, OpenStack network_data.json) and its renderers."""
