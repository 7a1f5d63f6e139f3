"""`ovirt-csi-driver`: oVirt disks through the Container Storage Interface (docs/storage.md#csi-driver).

One process serves Identity and, by its flags, Controller (the engine side: disks and attachments, through the same
disk layer as the FlexVolume driver and the volume provisioner) and/or Node (the kernel side: the attached disk's
device found by its serial, formatted, staged, bind-mounted). Modules: `spec` (the generated stubs), `errors` (the
gRPC status of every failure), `volumes` (capabilities and capacity ranges), `identity`, `controller`, `node`,
`server` (flags, wiring, the entry point).
"""
