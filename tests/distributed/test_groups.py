"""Super-learners and hosts: H-ADPSGD's hierarchy must follow the machines, not the rank numbers."""

from __future__ import annotations

from asrtrain.distributed.groups import Layout, resolve_group_size, spanning_hosts


def test_blocks_per_node_make_one_host_per_super_learner() -> None:
    hosts = ["n1/b", "n1/b", "n2/b", "n2/b"]
    assert spanning_hosts(Layout(0, 4, 2), hosts) is None
    assert resolve_group_size("h-adpsgd", 4, 2, None) == 2  # a node by default


def test_ranks_dealt_round_robin_are_named() -> None:
    hosts = ["n1/b", "n2/b", "n1/b", "n2/b"]  # srun --distribution=cyclic
    assert spanning_hosts(Layout(3, 4, 2), hosts) == "super-learner 0 (ranks 0-1) spans 2 hosts (n1, n2)"
    many = [f"n{r}/b" for r in range(8)]
    assert spanning_hosts(Layout(0, 8, 8), many).endswith("spans 8 hosts (n0, n1, n2, n3, …)")
