"""What test modules share: fakes of what the code under test talks to, and the few helpers
more than one test module drives it with. Test modules import from here, never from each other.

- :mod:`tests.fakes.clock`: ``NOW`` and the one fake ``Clock``;
- :mod:`tests.fakes.kube`: the API server's list, watch and writes behind ``httpx.MockTransport``;
- :mod:`tests.fakes.raw_server`: real HTTP/1.1 servers on 127.0.0.1 answering scripted bytes;
- :mod:`tests.fakes.jobs_api`: the API server the dispatch room talks to (``JobsAPI``);
- :mod:`tests.fakes.quota_cluster`: a cluster with elastic quotas and the pods of their story;
- :mod:`tests.fakes.estimation_cluster`: loaded nodes with pods bound since their sample;
- :mod:`tests.fakes.annotator`: Prometheus, the nodes and leases APIs the annotator talks to;
- :mod:`tests.fakes.extender_calls`: driving the extender under test (clients, verbs, counters);
- :mod:`tests.fakes.uvicorn_server`: the extender served by uvicorn on 127.0.0.1;
- :mod:`tests.fakes.captured`: the kube-scheduler versions whose bodies were captured;
- :mod:`tests.fakes.kubeconfig`: a kubeconfig file for a client under test.
"""
