"""asap_sim: the simulated G1 twin. model, motor, profiles and twin are ROS-free."""
