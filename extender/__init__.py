"""loadsched's scheduler extender: the HTTP service the stock kube-scheduler calls."""
