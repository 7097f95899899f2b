"""asap_policy: the policy node (a thin rclpy shell over asap_core)."""
