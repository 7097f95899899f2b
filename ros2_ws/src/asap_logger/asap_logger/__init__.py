"""asap_logger: episode recorder (raw CDR to rosbag2 MCAP) and a ROS-free episode reader.

Everything here except ``recorder_node`` is free of rclpy and message packages, so training can
``import asap_logger.reader`` on a machine without ROS.
"""
