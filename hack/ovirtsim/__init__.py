"""A simulator of the oVirt engine REST API (v4), good enough for the unmodified Python SDK.

Every test of this project that needs an oVirt engine talks to this program over HTTP(S), exactly
as the controller talks to a real engine (docs/compatibility.md#simulator).

Module map (one home per concept):

* `cli` / `__main__`  -- `python -m hack.ovirtsim serve ...`
* `config`            -- timing profiles, credentials, addresses
* `server`            -- the HTTP(S) servers (API + SSO on one port, control on another)
* `tls`               -- a throw-away CA and server certificate
* `auth`              -- SSO tokens and logout
* `router`            -- path templates -> handlers; the templates are also the request-counter keys
* `xmlio`             -- request parsing and response rendering with the SDK's own readers/writers
* `always_sent`       -- the elements the engine sends for every object of a type
* `errors`            -- `ApiError` and the engine's fault messages
* `store`             -- the inventory (tables of SDK model objects) and the timeline of pending transitions
* `statemachine`      -- VM/disk status transitions and the matrix of refused actions (docs/compatibility.md#vm-states)
* `scheduler`         -- host selection against capacity and affinity groups (docs/compatibility.md#affinity-groups)
* `search`            -- the engine's search language (docs/compatibility.md#listing-and-search)
* `seed`              -- the default inventory (data center, cluster, hosts, storage, RHCOS template)
* `resources/*`       -- the API handlers, one module per family of collections
* `guest`             -- what runs inside a VM: guest agent IPs, Ignition, the Kubernetes Node, block devices
* `faults`            -- injected faults and the request counters, for tests
* `control`           -- the control API for tests (JSON, separate port)
* `persistence`       -- state file save/load
* `engine`            -- ties the above together
* `testing`           -- `running_simulator(...)` for the project's tests
"""
