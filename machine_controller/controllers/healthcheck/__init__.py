"""The MachineHealthCheck controller: which Machines are unhealthy, and which remediators it may call on."""
