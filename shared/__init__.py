"""The pure domain both loadsched services share: policy, annotation codec, load model.

Nothing here imports a web framework; Kubernetes I/O lives in :mod:`shared.kube`.
"""
