"""The synthetic exporter's per-pod series, as the kubelet's cAdvisor serves them."""

from sandbox.exporter import NodeLoad, render_families


def test_a_pod_s_cpu_counter_integrates_its_cores_and_survives_an_update() -> None:
    load = NodeLoad(cpus=1)
    load.set_pods({"web/api-1": {"cpu": 1.5, "mem": 2e8}, "web/api-2": {"cpu": 0.5}})
    load.advance(100.0)
    load.advance(110.0)  # 10 s: 15 and 5 CPU seconds
    text = render_families([load.series()]).decode()
    assert (
        'container_cpu_usage_seconds_total{namespace="web",pod="api-1",container="main"} '
        "15.000000" in text
    )
    assert (
        'container_memory_working_set_bytes{namespace="web",pod="api-1",container="main"} 200000000'
        in text
    )
    load.set_pods({"web/api-1": {"cpu": 0.0}})  # api-2 is gone; api-1 keeps its counter
    load.advance(120.0)
    series = load.series()
    assert series[3] == [
        'container_cpu_usage_seconds_total{namespace="web",pod="api-1",container="main"} 15.000000'
    ]
    assert "# TYPE container_cpu_usage_seconds_total counter" in render_families([series]).decode()
