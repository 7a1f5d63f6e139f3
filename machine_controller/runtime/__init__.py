"""Generic controller machinery: informers, work queue, controller loop, leader election, events, health and
metrics, logging. Knows nothing of oVirt or Machines (layering: STYLE.md)."""
