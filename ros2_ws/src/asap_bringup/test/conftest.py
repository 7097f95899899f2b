"""DDS isolation for this package's node and graph tests."""

from __future__ import annotations

from asap_testing.dds import isolate

isolate()
