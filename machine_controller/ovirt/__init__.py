"""The oVirt side: credentials, a shared pool of SDK connections, fault classification with retries, and the
Machine actuator built on them. Knows oVirt and the provider spec; knows nothing of Machine phases."""
