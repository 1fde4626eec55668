"""MongoDB access: client creation, the embedded server, and index management."""
