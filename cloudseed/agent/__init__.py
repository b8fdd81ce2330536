"""The guest agent: boot stages, datasources, user-data, modules and distros."""
