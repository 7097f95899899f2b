"""asap_core: the G1 robot contract (no rclpy)."""
