"""What tests of asap_core, and of the packages built on it, need: tiny real ONNX policies (no torch), random
robot messages."""
