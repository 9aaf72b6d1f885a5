"""``kubectl loadsched``: the extender's explain, node and quota views from a terminal, through
the API server's service proxy with the user's kubeconfig."""
