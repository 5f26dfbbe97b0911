"""Built-in provider plugins; each imports only reconcile's public API."""
