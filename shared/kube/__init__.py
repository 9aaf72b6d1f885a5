"""Small Kubernetes helpers both services use: client configuration, error translation, and
list+watch caches. Each I/O verb lives in its own module."""
