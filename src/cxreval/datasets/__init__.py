"""Readers that turn public datasets into cxreval inputs and gold standards (read at run time)."""
