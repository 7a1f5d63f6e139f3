# syntax=docker/dockerfile:1
# Build stage: the oVirt SDK compiles a C extension against libxml2 and pycurl against libcurl.
FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libxml2-dev libcurl4-openssl-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY api ./api
COPY machine_controller ./machine_controller
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir -c constraints.txt .
# ovirt-csi-driver's stubs, generated here from csi.proto of the pinned CSI spec Go module, which Go fetches
# through the module proxy (machine_controller/storage/csi/spec.py); only the generated files reach the image.
COPY --from=golang:1.26-bookworm /usr/local/go /usr/local/go
RUN PATH=/usr/local/go/bin:$PATH GOPATH=/tmp/go OVIRT_CSI_STUBS=/opt/csi-stubs \
    /opt/venv/bin/python -m machine_controller.storage.csi.spec \
 && rm -rf /tmp/go

# Runtime stage: only the shared libraries, no compilers or headers.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends libxml2 libcurl4 ca-certificates e2fsprogs xfsprogs \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 65532 --no-create-home controller
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/csi-stubs /opt/csi-stubs
# machine-api-operator starts its provider container as /machine-controller-manager with its own flags: under that
# name the entry point takes them and runs the actuator side only (docs/compatibility.md#deployment-on-openshift).
RUN ln -s /opt/venv/bin/ovirt-machine-controller /machine-controller-manager
# Two malloc arenas instead of one per thread: a list of a thousand VMs parsed by one worker would otherwise stay
# reserved in that worker's arena, and again in the next one's. A fixed mmap threshold: glibc raises it to the size
# of the largest block freed (a list's answer, megabytes), after which such blocks come from the heap and its high
# water mark stays; fixed, each is mapped and given back when freed, and the peak RSS is what the controller holds
# (docs/benchmarks.md#figures-behind-the-codes-choices).
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 OVIRT_CSI_STUBS=/opt/csi-stubs MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072
USER 65532:65532
EXPOSE 8081 9440
ENTRYPOINT ["ovirt-machine-controller"]
