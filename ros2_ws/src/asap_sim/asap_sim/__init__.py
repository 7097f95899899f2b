"""asap_sim: the simulated G1 twin. Every module but g1_sim_node is ROS-free (training imports them)."""
