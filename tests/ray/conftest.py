"""A real two-node Ray cluster on this machine (head: 1 CPU, second node: 1 CPU), one per test module."""
import pytest

# a node that disappears is declared dead in ~1.5 s instead of ~15 s (the node-loss test waits for it)
FAST_FAILURE_DETECTION = {"health_check_period_ms": 500, "health_check_failure_threshold": 3,
                          "health_check_initial_delay_ms": 0}


@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                      "_system_config": FAST_FAILURE_DETECTION})
    c.second = c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="WARNING")
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
