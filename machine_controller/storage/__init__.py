"""oVirt disks as Kubernetes persistent volumes: the disk layer, the volume provisioner and the FlexVolume driver.

Nothing outside this package imports it except its own wiring; it builds on the runtime, the api types and the
oVirt client (connection pool, `OvirtClient.call`, fault classification, credentials).
"""
